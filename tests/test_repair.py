"""Repair suggestions (verify/repair.py): a claim that does not hold gets the
smallest edit that makes it hold, decided by the checker, or a plain statement
that there is none.

The mutation suite is sampled (every CHUNKPROOF_REPAIR_EVERY-th mutant, default 30;
1 runs all of them, as benchmarks/repair_timing.py does)."""
import collections
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from chunkproof.derivations import ir
from chunkproof.derivations.latex import to_latex
from chunkproof.derivations.loader import bundled
from chunkproof.verify import repair
from chunkproof.verify.check import check
from chunkproof.verify.mutate import Edit, index_variants, mutants
from tests.helpers import all_claims, verdicts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERY = int(os.environ.get("CHUNKPROOF_REPAIR_EVERY", "30"))
TYPO = "tests/data/wrong_dK.py"


def _mutant(c, rhs):
    return dataclasses.replace(c, rhs=rhs, id=c.id + "~mutant")


def _restored(s, c):
    """The original line, or another with its left side and range that holds
    (equal to it wherever the claim speaks)."""
    return s.verified and s.claim.lhs == c.lhs and s.claim.over == c.over


def test_suggestions_restore_at_least_90_percent_of_the_mutants(capsys):
    v = verdicts()
    stats = collections.defaultdict(collections.Counter)
    lost = []
    k = 0
    for d, c in all_claims():
        if v[c.id] != "holds":
            continue
        for op, desc, rhs in mutants(c, d):
            k += 1
            if (k - 1) % EVERY:
                continue
            m = _mutant(c, rhs)
            r = check(d, m, diagnose=False, floats=False)
            if r.verdict not in ("fails", "ill-formed"):
                continue   # equivalent mutants are no mistake (test_mutations.py)
            s = repair.suggest(d, m, r, exclude=(c.id,))
            ok = _restored(s, c)
            stats[op]["restored" if ok else "not"] += 1
            if s.verified:
                # what the search calls verified, the checker decides again, elsewhere
                again = check(d, s.claim, diagnose=False, floats=False, seed=7)
                assert again.verdict == "holds", f"{m.id} ({desc}): {s.edit} -> {again.verdict}"
            if not ok:
                lost.append(f"{c.id}: {desc}: {s.edit or s.note}")
    n = sum(s["restored"] + s["not"] for s in stats.values())
    got = sum(s["restored"] for s in stats.values())
    with capsys.disabled():
        print(f"\nrepair restore rate, every {EVERY}. mutant of a holding claim that is reported:")
        for op in sorted(stats):
            s = stats[op]
            print(f"  {op:10s} {s['restored']:4d}/{s['restored'] + s['not']:<4d}")
        print(f"  total      {got}/{n} = {100.0 * got / max(n, 1):.1f}%")
    assert n >= 20, "too few mutants sampled to say anything"
    assert got >= 0.9 * n, "not restored:\n" + "\n".join(lost)


def test_every_failing_literal_line_gets_a_verified_suggestion_or_a_plain_no(capsys):
    counts = collections.Counter()
    for d, c, r in repair.failing_literal_entries():
        s = repair.suggest(d, c, r)
        if s.verified:
            counts["verified"] += 1
            assert s.latex and s.edit, c.id
            if s.program is not None:   # a program's entry: the edited program reproduces
                d2 = dataclasses.replace(d, programs={**d.programs, s.program.name: s.program})
                again = check(d2, dataclasses.replace(c, program=s.program.name), diagnose=False,
                              floats=False, seed=7)
            else:
                again = check(d, s.claim, diagnose=False, floats=False, seed=7)
            assert again.verdict == "holds", c.id
        else:
            counts["none"] += 1
            assert not s.latex and s.note.startswith(("no single edit", "none for this line")), \
                (c.id, s.note)
    with capsys.disabled():
        print(f"\nliteral entries of the bundled notes that do not hold: {sum(counts.values())}; "
              f"verified suggestion: {counts['verified']}; none found (said plainly): {counts['none']}")
    assert sum(counts.values()) > 0


def test_a_missing_term_is_named_in_the_residual():
    """Drop the last term of holding lines: where the suggestion puts a term back at
    the root, the residual is 'missing + T' with T that term, and the line with it
    holds (so T is the dropped term's value)."""
    v = verdicts()
    seen = 0
    for d, c in all_claims():
        if v[c.id] != "holds" or c.kind != "adjoint" or not isinstance(c.rhs, ir.Add):
            continue
        m = _mutant(c, c.rhs.a)
        r = check(d, m, diagnose=False, floats=False)
        if r.verdict != "fails":
            continue
        s = repair.suggest(d, m, r, exclude=(c.id,))
        if not (s.verified and s.edit.startswith("term: add a term") and isinstance(s.claim.rhs, ir.Add)
                and s.claim.rhs.a == m.rhs):
            continue
        assert s.residual == rf"\text{{missing }} + {to_latex(s.claim.rhs.b)}"
        seen += 1
        if seen == 3:
            return
    pytest.fail(f"only {seen} lines with a dropped term got it back as a missing term")


def _dropped_term_mutant(variant):
    """A holding adjoint line of ``variant`` with its last term dropped, that fails."""
    d = next(d for d in bundled([variant]))
    for c in d.claims:
        if c.kind == "adjoint" and isinstance(c.rhs, ir.Add) and verdicts()[c.id] == "holds":
            m = _mutant(c, c.rhs.a)
            r = check(d, m, diagnose=False, floats=False)
            if r.verdict == "fails":
                return d, c, m, r
    pytest.fail(f"no line of {variant} fails with a term dropped")


def test_the_search_says_where_it_stopped():
    d, c, m, r = _dropped_term_mutant("kda")
    s = repair.suggest(d, m, r, exclude=(c.id,), max_candidates=2)
    assert s.tried == 2 and "candidate cap (2) reached" in s.note
    s = repair.suggest(d, m, r, exclude=(c.id,), max_seconds=0.0)
    # no edit was tried; the derived formula, where there is one, is still shown
    assert s.tried == 0 and "time cap (0 s) reached" in s.note
    assert not s.verified or "derived formula" in s.edit


def test_the_derived_formula_is_shown_where_no_single_edit_fixes_a_line(monkeypatch):
    """Two slips in one adjoint line: no single edit restores it; a derived formula
    (here the true line, standing in for derivations/reverse.py) is shown instead,
    verified like any suggestion."""
    v = verdicts()
    for d, c in all_claims():
        if v[c.id] != "holds" or c.kind != "adjoint":
            continue
        once = [rhs for op, _, rhs in mutants(c, d) if op == "sign"]
        twice = [rhs for r1 in once for op, _, rhs in mutants(_mutant(c, r1), d) if op == "transpose"]
        for rhs in twice:
            m = _mutant(c, rhs)
            r = check(d, m, diagnose=False, floats=False)
            if r.verdict not in ("fails", "ill-formed"):
                continue
            monkeypatch.setattr(repair, "DERIVED", None)
            s = repair.suggest(d, m, r, exclude=(c.id,))
            if s.verified:
                continue   # one edit was enough after all
            assert s.note.startswith("no single edit makes this line hold")
            monkeypatch.setattr(repair, "DERIVED", lambda deriv, claim: c.rhs)
            s = repair.suggest(d, m, r, exclude=(c.id,))
            assert s.verified and s.claim.rhs == c.rhs and "derived formula" in s.edit
            return
    pytest.fail("no two-slip line that one edit cannot fix")


def test_index_slips_are_tidied():
    assert "i" in index_variants("t*C+(i)")
    assert "r" in index_variants("r-1") and "r-1" not in index_variants("r-1")
    assert "m+(m>bt)" in index_variants("m+(m>=bt)")


def test_residual_through_a_product_keeps_the_other_factor():
    A = ir.Var("A", "C", "C", "A")
    B = ir.Var("B", "C", "C", "B")
    X = ir.Var("X", "C", "C", "X")
    side = ir.MatMul(A, ir.Add(B, X))
    ed = Edit("term", "add a term", ("b",), ir.Add(ir.Add(B, X), A), delta=lambda: A, word="missing")
    assert repair.named_residual(side, ed) == r"\text{lhs} - \text{rhs} = A A"
    ed = Edit("symbol", "B -> X", ("b", "a"), X)
    assert repair.named_residual(side, ed) == r"\text{lhs} - \text{rhs} = A \left(X - B\right)"
    assert repair.named_residual(ir.Inv(ir.Add(B, X)), Edit("symbol", "", ("a", "a"), X)) == ""


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_reports_show_the_suggestion_next_to_the_line(tmp_path):
    code, out, err = _cli("verify", TYPO, "--claim", "typo", "--format", "json", "-q", "--no-float")
    assert code == 1, err
    (rec,) = json.loads(out)["claims"]
    assert rec["verdict"] == "fails" and rec["suggestion_verified"] is True
    assert rec["suggestion"] and rec["edit"]
    code, table, _ = _cli("verify", TYPO, "--claim", "typo", "-q", "--no-float")
    lines = table.splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("checked:"))
    assert lines[i + 1].strip() == f"suggested: {rec['suggestion']}  [verified]"
    _, md, _ = _cli("verify", TYPO, "--claim", "typo", "--format", "markdown", "-q", "--no-float")
    assert "| suggested fix |" in md and "**verified**" in md
    page = tmp_path / "r.html"
    _cli("verify", TYPO, "--claim", "typo", "--format", "html", "-o", str(page), "-q", "--no-float")
    html = page.read_text(encoding="utf-8")
    assert 'class="suggestion"' in html and "sugg-math" in html
    code, out, _ = _cli("verify", TYPO, "--claim", "typo", "--format", "json", "-q", "--no-float",
                        "--no-suggest")
    (rec,) = json.loads(out)["claims"]
    assert rec["suggestion"] is None and rec["suggestion_verified"] is None and rec["edit"] is None
