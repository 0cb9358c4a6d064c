"""Mutated derivation files never crash `chunkproof verify`.

Realistic slips (a shape string, an index expression, a name, an operator, a dropped
argument, a transpose) are applied to small derivation sources; the command must
answer with a verdict (exit 0 or 1), or an input error (exit 2, one line naming the
file, and no -o file), or a full report with claims that cannot be evaluated (exit
2 after the report, each such claim on a line naming the file).  A traceback is a
bug in chunkproof.  main() runs in-process: starting an interpreter per example
would spend 3 s importing torch and sympy for under a second of checking.
"""
import contextlib
import io
import json
import os
import re
import sys
import tokenize

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from chunkproof.cli import main
from chunkproof.verify import levels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["derivations/examples/mamba2.py", "tests/data/wrong_dK.py",
           "tests/data/shape_error.py", "derivations/examples/retnet.py"]
EXAMPLES = int(os.environ.get("CHUNKPROOF_FUZZ_EXAMPLES", "40"))

DIMS = ["C", "Dk", "Dv", "1", "L", "T"]
INDICES = ["r-1", "r+1", "t*C+r+5", "t*C", "t*C+C", "0", "C+1", "t-1", "i", "bt+1", "x"]
OPS = ["@", "*", "+", "-", "/"]


def _tokens(src):
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        a = starts[tok.start[0] - 1] + tok.start[1]
        b = starts[tok.end[0] - 1] + tok.end[1]
        out.append((tok.type, tok.string, a, b))
    return out


def _is_code_line(src, pos):
    # docstrings and comments are not worth mutating: keep to lines of code
    line_start = src.rfind("\n", 0, pos) + 1
    return not src[line_start:pos].lstrip().startswith(("#", '"""'))


def sites(src):
    """(kind, start, end, text) for every place a slip can be made."""
    toks = _tokens(src)
    out = []
    depth = 0
    for k, (typ, text, a, b) in enumerate(toks):
        if typ == tokenize.OP and text in "([{":
            depth += 1
        elif typ == tokenize.OP and text in ")]}":
            depth -= 1
        if typ == tokenize.STRING and not text.startswith(('"""', "r'", 'r"', "'''")) and len(text) <= 24:
            val = text[1:-1]
            if val in DIMS:
                out.append(("shape", a, b, text))
            elif re.fullmatch(r"[A-Za-z_0-9*+\-/() <>=]+", val) and re.search(r"[*+\-]", val):
                out.append(("index", a, b, text))
            elif re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*", val):
                out.append(("string", a, b, text))
        elif typ == tokenize.NAME and depth > 0 and text not in ("True", "False", "None", "lambda"):
            nxt = toks[k + 1][1] if k + 1 < len(toks) else ""
            prev = toks[k - 1][1] if k else ""
            if nxt not in ("=", "(") and prev != ".":
                out.append(("name", a, b, text))
        elif typ == tokenize.OP and text in OPS and depth > 0:
            out.append(("op", a, b, text))
        elif typ == tokenize.OP and text == "," and depth > 0:
            # the argument after this comma, up to the next comma or closer at this depth
            d, j = 0, k + 1
            while j < len(toks):
                t = toks[j][1]
                if t in "([{":
                    d += 1
                elif t in ")]}":
                    if d == 0:
                        break
                    d -= 1
                elif t == "," and d == 0:
                    break
                j += 1
            if j < len(toks) and j > k + 1:
                out.append(("drop", a, toks[j - 1][3], src[a:toks[j - 1][3]]))
    return [s for s in out if _is_code_line(src, s[1])]


@st.composite
def mutants(draw):
    path = draw(st.sampled_from(SOURCES))
    src = open(os.path.join(ROOT, path), encoding="utf-8").read()
    done = []
    for _ in range(draw(st.integers(1, 2))):
        options = sites(src)
        # kind first: dropped arguments outnumber every other site, and mostly stop the import
        pick = draw(st.sampled_from(sorted({o[0] for o in options})))
        kind, a, b, text = draw(st.sampled_from([o for o in options if o[0] == pick]))
        if kind == "shape":
            new = '"' + draw(st.sampled_from([d for d in DIMS if d != text[1:-1]])) + '"'
        elif kind == "index":
            new = '"' + draw(st.sampled_from(INDICES)) + '"'
        elif kind == "string":
            new = '"' + draw(st.sampled_from([text[1:-1] + "x", "Zeta", "S", "O", "dO", "S_prev", "K"])) + '"'
        elif kind == "name":
            new = draw(st.sampled_from(["Undefined_tile", text + ".T", "S_PREV", "DO", "V", "Alpha"]))
        elif kind == "op":
            new = draw(st.sampled_from([o for o in OPS if o != text]))
        else:
            new = ""
        src = src[:a] + new + src[b:]
        done.append(f"{kind} {text!r} -> {new!r}")
    floats = draw(st.booleans())   # the float64 level evaluates at other sizes: slips show there too
    return path, src, done, floats


def _fresh_examples():
    # the data files add claims to the example's shared Derivation: each run must
    # import the examples afresh, as a new process would
    for name in [m for m in sys.modules if m.startswith(("chunkproof.derivations.examples",
                                                         "chunkproof_user_"))]:
        del sys.modules[name]


def verify(path, *args):
    _fresh_examples()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["verify", path, "-q", "-j", "1", *args])
    finally:
        levels.use_sizes(None)
    return code, out.getvalue(), err.getvalue()


def assert_clean_answer(path, code, out, err, target):
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err, err
    lines = err.strip().splitlines()
    if code == 2 and lines and lines[0].startswith("chunkproof: error:"):
        # an input error: one line naming the file, nothing written
        assert len(lines) == 1, err
        assert os.path.basename(path) in lines[0] or "--sizes" in lines[0], err
        assert not os.path.exists(target), "a report was written for an input error"
    else:
        # a verdict for every claim: the report is whole, problems named by file
        data = json.loads(open(target, encoding="utf-8").read())
        assert data["summary"]["claims"] == len(data["claims"]) >= 1
        for ln in lines:
            assert ln.startswith(path) or ln.startswith("chunkproof: note:"), ln
        if code == 2:
            assert any(c["verdict"] == "error" for c in data["claims"])


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(m=mutants())
def test_a_mutated_derivation_never_crashes(m, tmp_path):
    orig, src, done, floats = m
    path = str(tmp_path / ("mut_" + os.path.basename(orig)))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(src)
    target = str(tmp_path / "report.json")
    if os.path.exists(target):
        os.unlink(target)
    code, out, err = verify(path, "--format", "json", "-o", target, *([] if floats else ["--no-float"]))
    try:
        assert_clean_answer(path, code, out, err, target)
    except AssertionError as e:
        raise AssertionError(f"{orig} with {done}: {e}") from None


def test_the_sources_mutate_at_every_kind_of_site():
    seen = set()
    for p in SOURCES:
        kinds = {s[0] for s in sites(open(os.path.join(ROOT, p), encoding="utf-8").read())}
        assert {"name", "op", "drop", "string"} <= kinds, (p, kinds)
        seen |= kinds
    assert seen == {"shape", "index", "string", "name", "op", "drop"}


@pytest.mark.parametrize("path", SOURCES)
def test_the_unmutated_sources_answer_cleanly(path, tmp_path):
    target = str(tmp_path / "report.json")
    code, out, err = verify(os.path.join(ROOT, path), "--format", "json", "-o", target, "--no-float")
    assert_clean_answer(os.path.join(ROOT, path), code, out, err, target)
