"""`chunkproof report` / `verify`: formats, exit codes, bad input."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    """The command in a new interpreter: exit codes and what reaches stdout and stderr."""
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def _fresh_examples():
    # the data files add claims to the example's shared Derivation: import it afresh
    for name in [m for m in sys.modules if m.startswith(("chunkproof.derivations.examples",
                                                         "chunkproof_user_"))]:
        del sys.modules[name]


def here(*args):
    """run(), but main() in this process (stdout and stderr captured, neither a
    terminal): for what the report says, where a new interpreter is only start-up time."""
    import contextlib
    import io
    from chunkproof.cli import main
    from chunkproof.verify import levels
    _fresh_examples()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        levels.use_sizes(None)
    return code, out.getvalue(), err.getvalue()


def test_verify_example_all_hold_exit_0():
    code, out, err = run("verify", "derivations/examples/mamba2.py", "--format", "json", "-q")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["claims"] == len(data["claims"]) > 5
    for rec in data["claims"]:
        for key in ("id", "note", "citation", "latex", "kind", "verdict", "corrected_of"):
            assert key in rec
        assert rec["verdict"] == "holds"


def test_a_typo_is_reported_with_sizes_entries_seed_and_residual():
    code, out, err = run("verify", "tests/data/wrong_dK.py", "--format", "json", "-q",
                         "--claim", "typo")
    assert code == 1
    (rec,) = json.loads(out)["claims"]
    assert rec["verdict"] == "fails"
    assert rec["smallest_failing_sizes"].startswith("C=1")
    assert rec["mismatch"]["entries"] and isinstance(rec["mismatch"]["seed"], int)
    assert "alpha" in rec["residual"]


def test_shape_error_is_a_verdict_with_a_one_line_message():
    code, out, err = run("verify", "tests/data/shape_error.py", "--claim", "bad.QS", "-q")
    assert code == 1
    assert "ILL" in out and "bad.QS" in err and "shape_error.py" in err and "Traceback" not in err
    assert "line 3" in err


def test_bad_inputs_exit_2_with_one_line_and_no_traceback():
    for args, needle in [
        (("verify", "tests/data/does_not_exist.py"), "no such file"),
        (("verify", "tests/data/import_error.py"), "import_error.py:2"),
        (("verify", "tests/data/unknown_symbol.py", "--claim", "bad.Z"), "Zeta"),
        (("report", "no_such_note"), "not a derivation file"),
    ]:
        code, out, err = run(*args, "-q")
        assert code == 2, (args, code, err)
        assert needle in err, (args, err)
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err


def test_markdown_and_table_formats_and_output_file(tmp_path):
    target = tmp_path / "r.md"
    code, out, err = here("verify", "derivations/examples/mamba2.py", "--format", "markdown",
                          "-o", str(target), "-q")
    assert code == 0 and out == ""
    text = target.read_text()
    assert text.startswith("# chunkproof report") and "| `mamba2.O` |" in text
    code, out, err = here("verify", "derivations/examples/mamba2.py", "-q", "--no-float")
    # 9 claims and the program's own entry, mamba2_chunk.reproduces
    assert code == 0 and "10 claims: 10 hold" in out, out


# ---------------------------------------------------------------- reading the report
# Most tests below build results by hand (no claim is checked): they are about what
# the report shows, and run in milliseconds.

def _claims(path):
    from chunkproof.derivations.loader import from_file
    _fresh_examples()
    return from_file(path)[0].claims


def _results(verdicts, claims=None):
    import dataclasses
    from chunkproof.verify.levels import Result
    claims = claims or _claims("derivations/examples/mamba2.py")
    return [Result(claim=dataclasses.replace(c), verdict=v, evidence=["exact GF(2^31-1)"])
            for c, v in zip(claims, verdicts)]


def test_table_starts_with_the_summary_and_lists_only_failing_claims_by_default():
    code, out, err = here("verify", "tests/data/wrong_dK.py", "-q", "--no-float")
    assert code == 1
    lines = out.splitlines()
    m = re.match(r"(\d+) claims: (\d+) hold, 1 fails, 0 ill-formed \(", lines[0])
    assert m and int(m.group(1)) == int(m.group(2)) + 1 > 5, lines[0]
    assert lines[1] == "1 claim does not hold:"
    assert lines[2].split() == ["FAIL", "mamba2.dK.typo", "wrong_dK.py", "§chunk", "backward"]
    assert "  ok " not in out and f"{m.group(2)} claims that hold are not listed; --show all lists them" in out
    # a user's file with no corrections is told holds / fails / ill-formed only
    assert "literal" not in out and "corrected" not in out
    # what was checked, printed from the IR, beside the note's LaTeX
    assert r"note:     \delta K = \text{Diag}(\gamma) \delta \overrightarrow{K}" in out
    # (next: the file adds its claim to the example's shared Derivation on every load)
    typo = next(r for r in _results(["fails"] * 99, _claims("tests/data/wrong_dK.py")) if "typo" in r.claim.id)
    from chunkproof.verify.report import formula_latex
    assert r"\mathbf{K}" in formula_latex(typo) and f"checked:  {formula_latex(typo)}\n" in out
    code, out, err = here("verify", "tests/data/wrong_dK.py", "-q", "--no-float", "--show", "all")
    assert "  ok   mamba2.O  [forward]" in out and "not listed" not in out


def test_the_table_shows_the_checked_formula_when_the_label_says_otherwise():
    import dataclasses
    from chunkproof.verify import report
    (r,) = _results(["holds"])
    r.claim = dataclasses.replace(r.claim, latex=r"O_{[t]} = \overleftarrow{Q} S_{[t-1]}^\top")
    for text in (report.render_table([r], 0.0, show="all"), report.render_markdown([r], 0.0)):
        assert r"S_{[t-1]}^\top" in text                 # the label, as written
        assert report.formula_latex(r) == report.formula_latex(_results(["holds"])[0])
        assert r"{\mathbf{S}_{[t-1]}}^\top" in text or r"\mathbf{S}" in text   # the encoding
    md = report.render_markdown([r], 0.0)
    assert "| note (LaTeX) | checked (printed from the IR) |" in md


def test_corrections_are_named_only_where_a_derivation_has_them():
    from chunkproof.derivations.loader import bundled
    from chunkproof.verify import report
    claims = bundled(["gla"])[0].claims
    fix = next(c for c in claims if c.corrected_of)
    lit = next(c for c in claims if c.id == fix.corrected_of)
    rs = _results(["fails", "holds"], [lit, fix])
    text = report.render_table(rs, 0.0)
    assert ("corrections (<id>.corrected): 1, of which 0 do not hold; the other 1 claim "
            "(the lines as written, and derived claims): 1 does not hold") in text
    assert f"FAIL {lit.id}  " in text and f"; {fix.id} holds" in text
    mine = report.render_table(_results(["fails", "holds"]), 0.0)
    assert "literal" not in mine and "corrected" not in mine and "corrections" not in mine


def test_json_has_every_claim_and_fla_variant_names():
    from chunkproof.derivations.loader import bundled
    from chunkproof.verify import report
    rs = _results(["holds"], bundled(["dplr_delta_rule"])[0].claims[:1])
    data = json.loads(report.render("json", rs + _results(["fails"]), 0.0, show="failing"))
    assert len(data["claims"]) == 2
    assert data["claims"][0]["variant"] == "dplr_delta_rule" and data["claims"][0]["derivation"] == "dplr"
    assert "== 000_cb349aeede08771a.txt (dplr_delta_rule) ==" in report.render_table(rs, 0.0, show="all")


def test_fla_variant_names_and_deprecated_aliases():
    from chunkproof.derivations.loader import resolve
    notes = []
    new = resolve(["gated_delta_rule", "dplr_delta_rule", "gla", "kda"], warn=notes.append)
    old = resolve(["gated_deltanet", "dplr"], warn=notes.append)
    assert [d.name for d in new] == ["gated_deltanet", "dplr", "gla", "kda"]
    assert [d.name for d in old] == ["gated_deltanet", "dplr"]
    assert len(notes) == 2 and "use 'gated_delta_rule'" in notes[0] and "use 'dplr_delta_rule'" in notes[1]
    # on the command line: one note on stderr, and the run goes on (here to "no claim matches")
    code, out, err = run("report", "gated_deltanet", "--claim", "no-such-claim", "-q")
    assert code == 2 and err.count("\n") == 2
    assert "deprecated" in err.splitlines()[0] and "gated_delta_rule" in err.splitlines()[0]
    code, out, err = run("report", "gated_delta_rule", "--claim", "no-such-claim", "-q")
    assert code == 2 and "deprecated" not in err and "no claim matches" in err


def _screen(text):
    """The lines a terminal shows after ``text``: enough of one for \\r, \\n and ESC[K."""
    lines, col = [""], 0
    i = 0
    while i < len(text):
        if text.startswith("\033[K", i):
            lines[-1] = lines[-1][:col]
            i += 3
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("")
            col = 0
        else:
            cur = lines[-1]
            lines[-1] = cur[:col] + ch + cur[col + 1:]
            col += 1
        i += 1
    return lines


class _Stream:
    def __init__(self, tty):
        self.tty, self.parts = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass

    def text(self):
        return "".join(self.parts)


def test_progress_on_a_terminal_never_draws_over_a_failure_line():
    from chunkproof.cli import _Progress
    verdicts = ["holds", "fails", "holds", "ill-formed", "holds", "holds"]
    rs = _results(verdicts)
    rs[3].message = "the two sides have shapes CxDk and CxDv"
    st = _Stream(tty=True)
    prog = _Progress(st)
    for k, r in enumerate(rs):
        prog(k + 1, len(rs), r)
        screen = _screen(st.text())
        shown = [ln for ln in screen if ln.startswith(("FAIL", "ILL"))]
        assert len(shown) == sum(v != "holds" for v in verdicts[:k + 1]), screen
        assert screen[-1].startswith(f"[{k + 1}/{len(rs)}]")
    prog.finish(rs, 1.0)
    screen = _screen(st.text())
    assert screen[0].startswith(f"FAIL {rs[1].claim.id}") and screen[1].startswith(f"ILL  {rs[3].claim.id}")
    assert "shapes CxDk" in screen[1]
    assert screen[2] == "chunkproof: checked 6 claims in 1.0 s: 2 do not hold" and screen[3] == ""
    assert prog.live == [rs[1].claim.id, rs[3].claim.id]


def test_progress_off_a_terminal_is_one_final_line():
    from chunkproof.cli import _Progress
    rs = _results(["holds", "fails", "holds"])
    st = _Stream(tty=False)
    prog = _Progress(st)
    for k, r in enumerate(rs):
        prog(k + 1, len(rs), r)
    assert st.text() == ""
    prog.finish(rs, 2.0)
    assert st.text() == "chunkproof: checked 3 claims in 2.0 s: 1 does not hold\n"


def test_show_does_not_apply_to_json():
    code, out, err = here("verify", "derivations/examples/mamba2.py", "--format", "json", "--show",
                          "failing", "-q", "--no-float")
    data = json.loads(out)
    assert code == 0 and len(data["claims"]) == data["summary"]["claims"] == data["summary"]["holds"] > 5
    assert "--show does not apply to json" in err


# ---------------------------------------------------------------- slips never crash
# Run in-process (main() with captured output): each case would spend 3 s starting an
# interpreter.  tests/test_derivation_fuzz.py finds such cases; these keep a few.

def _verify_here(*args):
    return here("verify", "-q", "-j", "1", "--no-float", *args)


def test_structural_slips_are_one_line_input_errors_and_write_nothing(tmp_path):
    unknown_rec = tmp_path / "unknown_recurrence.py"
    unknown_rec.write_text(
        "from chunkproof.derivations.examples import mamba2 as base\n"
        "from chunkproof.derivations.dsl import Notebook\n"
        "from chunkproof.derivations.ir import Truth\n"
        "nb = Notebook(base.D, 'unknown_recurrence.py').section('forward')\n"
        "nb.forward('bad.rec', 5, 'O', Truth('outs'), base.Ql @ base.S_PREV.T, 'mamba2_chunk',\n"
        "           recurrence='mamba3')\n"
        "DERIVATION = base.D\n")
    target = tmp_path / "r.json"
    for path, needles in [
        # was a ValueError traceback from numpy, exit 1
        ("tests/data/scale_handle.py", ["definition S", "'gC' is declared 1x1", "Dkx1"]),
        ("tests/data/defines_nothing.py", ["defines no DERIVATION"]),
        ("tests/data/no_program.py", ["claim bad.prog (no_program.py §forward, line 3)",
                                      "unknown program 'mamba2_chunkk'"]),
        (str(unknown_rec), ["claim bad.rec", "unknown recurrence 'mamba3'"]),
        ("tests/data/no_recurrence.py", ["has no recurrence"]),
        # found by the fuzz test: was a RecursionError traceback
        ("tests/data/self_reading.py", ["definition O: reads itself (O -> O)"]),
    ]:
        code, out, err = _verify_here(path, "--format", "json", "-o", str(target))
        assert code == 2, (path, code, err)
        assert err.startswith(f"chunkproof: error: {path}: ") and err.count("\n") == 1, err
        for n in needles:
            assert n in err, (path, err)
        assert not target.exists() and not list(tmp_path.glob(".chunkproof-*")), path


def test_fuzz_found_leaf_and_output_shape_slips(tmp_path):
    src = open(os.path.join(ROOT, "derivations/examples/mamba2.py"), encoding="utf-8").read()
    for old, new, needle in [
        # Q's handle named dO: a numpy matmul ValueError in the evaluator
        ('Q, K = tile("Q", "C", "Dk"', 'Q, K = tile("dO", "C", "Dk"',
         "tile 'dO' is declared CxDk, but dO is CxDv"),
        # an output of the state's shape: a numpy broadcast ValueError in the comparison
        ('("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V)', '("O", S_PREV)',
         "definition O: is DvxDk, but a chunk program's O is CxDv"),
        # adj of a transpose: an AttributeError in the program gate
        ("adj(Ql), DO @ S_PREV", "adj(Ql.T), DO @ S_PREV", "adj() takes a named tile"),
    ]:
        assert old in src
        path = tmp_path / "mut_mamba2.py"
        path.write_text(src.replace(old, new))
        code, out, err = _verify_here(str(path))
        assert code == 2 and needle in err and err.count("\n") == 1, (new, err)


def test_a_truth_past_the_sequence_is_ill_formed_and_the_rest_is_reported(tmp_path):
    # was a KeyError traceback from a forked worker, exit 1, and no report at all
    # (two jobs: the claims run in the worker pool, as the report's do)
    target = tmp_path / "r.json"
    code, out, err = _verify_here("tests/data/truth_past_end.py", "--format", "json", "-o", str(target),
                                  "-j", "2")
    assert code == 1, err
    claims = {c["id"]: c for c in json.loads(target.read_text())["claims"]}
    assert claims["bad.S_past"]["verdict"] == "ill-formed"
    assert "outside the sequence" in claims["bad.S_past"]["message"]
    assert claims["mamba2.O"]["verdict"] == "holds" and len(claims) > 5
    assert err.startswith("tests/data/truth_past_end.py: bad.S_past (truth_past_end.py §forward, line 3)")


def test_sizes_too_small_for_the_program_are_input_errors(tmp_path):
    target = tmp_path / "r.json"
    for args, needle in [
        (("--sizes", "C=4,Dk=2,Dv=2,chunks=1"), "chunks must be at least 2"),
    ]:
        code, out, err = _verify_here("derivations/examples/mamba2.py", *args, "-o", str(target))
        assert code == 2 and needle in err and err.count("\n") == 1 and not target.exists(), err
    code, out, err = here("report", "gla", "--claim", "P_def", "--sizes", "C=4,Dk=2,Dv=2,T=4", "-q",
                          "-o", str(target))
    assert code == 2 and "one sub-chunk per chunk" in err and "gla.P_def" in err, err
    assert err.count("\n") == 1 and not target.exists()


def test_an_unwritable_output_is_an_input_error(tmp_path):
    code, out, err = _verify_here("tests/data/wrong_dK.py", "--claim", "typo", "-o",
                                  str(tmp_path / "no" / "such" / "dir" / "r.txt"))
    assert code == 2 and "cannot write there" in err and "Traceback" not in err
