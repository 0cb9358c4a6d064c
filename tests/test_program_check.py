"""Programs are checked against their recurrence, not trusted; the exact level's
sizes find index slips that C = 4 with two sub-chunks hides."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from chunkproof.derivations import ir
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import DO, Derivation, Notebook, Program, S_PREV, adj, diag, inv, tile, tril
from chunkproof.derivations.ir import CumProd, LastRow, Scale
from chunkproof.derivations.loader import bundled
from chunkproof.verify import programs
from chunkproof.verify.check import check
from chunkproof.verify.levels import EXACT_SIZE_SETS, exact_once, parse_sizes
from chunkproof.verify.evaluate import Sizes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Q, K = tile("Q", "C", "Dk"), tile("K", "C", "Dk")
V = tile("V", "C", "Dv")
Alpha = tile("Alpha", "C", "1")
Gamma, gC = tile("Gamma", "C", "1"), tile("gC", "1", "1")
Ql, Kr = tile("Ql", "C", "Dk", "", "<", "Q"), tile("Kr", "C", "Dk", "", ">", "K")
S = tile("S", "Dv", "Dk")


def mamba2_like(kr, o=None, zero=False):
    """derivations/examples/mamba2.py's chunk program with →K defined as ``kr``, and a
    backward consistent with that program: δ→K and δ←Q, taken through the program,
    hold whatever →K is.  Γ = cumprod(α) is stated by a claim of its own."""
    D = Derivation("m2", "test", "m2.py")
    D.add_recurrence(R.mamba2())
    D.add_program(Program("m2_chunk", "chunk", [
        ("Gamma", CumProd(Alpha)),
        ("gC", LastRow(Gamma)),
        ("Ql", diag(Gamma) @ Q),
        ("Kr", kr),
        ("O", o if o is not None else Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V),
        ("S", Scale(gC, S_PREV + V.T @ Kr)),
    ]))
    kw = {"assume": ("zero_initial_state",)} if zero else {}
    nb = Notebook(D, "m2.py").section("backward")
    nb.identity("m2.Gamma", 1, "", Gamma, CumProd(Alpha), "m2_chunk", **kw)
    nb.adjoint("m2.dKr", 2, "", adj(Kr), Scale(gC, V @ adj(S)) + tril(V @ DO.T, "MT") @ Ql, "m2_chunk", **kw)
    nb.adjoint("m2.dQl", 3, "", adj(Ql), DO @ S_PREV + tril(DO @ V.T) @ Kr, "m2_chunk", **kw)
    return D


RIGHT_KR = inv(diag(Gamma)) @ K
WRONG_KR = diag(Gamma) @ K       # Diag(γ) where Diag(γ)^-1 is meant


def _entry(D):
    (d,) = programs.with_program_entries([D])
    (e,) = [c for c in d.claims if c.kind == programs.KIND]
    return d, e


def test_a_right_program_and_its_claims_hold():
    d, e = _entry(mamba2_like(RIGHT_KR))
    assert e.id == "m2_chunk.reproduces"
    assert check(d, e, floats=False).verdict == "holds"
    for c in d.claims:
        assert check(d, c, floats=False).verdict == "holds", c.id


def test_a_wrong_forward_program_with_a_consistent_backward_is_reported():
    d, e = _entry(mamba2_like(WRONG_KR))
    claims = [c for c in d.claims if c.kind != programs.KIND]
    # what the checker saw before: every claim holds through the program's definitions
    for c in claims:
        for i, s in enumerate(EXACT_SIZE_SETS):
            assert exact_once(d, c, s, i + 1) is None, c.id
    r = check(d, e, floats=False)
    assert r.verdict == "fails"
    assert "m2_chunk does not reproduce its recurrence" in r.message
    # O and S both differ; Γ agrees with its claim, so the one definition that explains
    # both is →K
    assert "a single wrong definition would be one of Kr " in r.message + " ", r.message
    assert r.mismatch is not None and r.mismatch.entries
    assert r.smallest and r.residual
    for c in claims:
        rc = check(d, c, floats=False, diagnose=False)
        assert rc.verdict == "fails", c.id
        assert "program m2_chunk" in rc.message and "Kr" in rc.message, rc.message


def test_the_first_differing_definition_is_named_where_a_claim_states_it():
    D = mamba2_like(RIGHT_KR)
    # a wrong Γ, which its own claim contradicts: localised to Γ itself
    prog = D.programs["m2_chunk"]
    prog.defs[0] = ("Gamma", CumProd(Alpha) * Alpha)
    d, e = _entry(D)
    r = check(d, e, floats=False, diagnose=False)
    assert r.verdict == "fails"
    assert "first definition that differs: Gamma (against claim m2.Gamma" in r.message, r.message


def test_a_program_for_a_zero_initial_state_is_checked_from_one():
    no_prev = tril(Ql @ Kr.T) @ V           # drops ←Q S_[t-1]^T
    d, e = _entry(mamba2_like(RIGHT_KR, o=no_prev, zero=True))
    assert e.assume == ("zero_initial_state",)
    r = check(d, e, floats=False, diagnose=False)
    # later chunks have a nonzero S_[t-1] even from S_[-1] = 0: still wrong
    assert r.verdict == "fails" and "O differs" in r.message
    d2, e2 = _entry(mamba2_like(RIGHT_KR, zero=True))
    assert check(d2, e2, floats=False).verdict == "holds"
    for c in d2.claims:
        assert check(d2, c, floats=False).verdict == "holds", c.id


def test_objective_programs_are_checked_on_their_state_only():
    (gdn,) = bundled(["gated_deltanet"])
    prog = gdn.programs["frob_objective"]
    assert programs.seed_tiles(prog) == ["O"]
    r = check(gdn, programs.program_entry(gdn, prog), floats=False)
    assert r.verdict == "holds" and "O: reads the loss seed dO" in r.evidence[0]


# ---------------------------------------------------------------- sizes
def _gla():
    (g,) = bundled(["gla"])
    return g


def test_a_sub_chunk_gate_slip_holds_at_c4_and_fails_at_the_new_sizes():
    g = _gla()
    good = next(c for c in g.claims if c.id == "gla.P_case2_log")
    Qg, Kg = tile("Q", "C", "Dk"), tile("K", "C", "Dk")
    Gg = tile("Gamma", "C", "Dk")
    # τ's decay read from sub-chunk bt-1 (the one before the current) instead of bs:
    # the same sub-chunk whenever there are only two
    slip = (ir.SubBlock(Qg, "bt") * ir.Exp(ir.Log(ir.SubBlock(Gg, "bt"))))\
        @ (ir.SubBlock(Kg, "bs") * ir.Exp(-ir.Log(ir.SubBlock(Gg, "bt-1")))).T
    bad = dataclasses.replace(good, id="gla.P_case2_log.slip", rhs=slip)
    old = Sizes(C=4, Dk=3, Dv=5, N=3, T=2)
    assert exact_once(g, good, old, 1) is None
    assert exact_once(g, bad, old, 1) is None and exact_once(g, bad, old, 2) is None
    r = check(g, bad, floats=False)
    assert r.verdict == "fails"
    assert "fails at C=6, Dk=3, Dv=5, chunks=3, T=2" in r.evidence[0]
    assert r.smallest.startswith("C=6") and r.mismatch.entries
    assert check(g, good, floats=False).verdict == "holds"


def test_default_sizes_are_the_ones_the_issue_asks_for():
    assert len(EXACT_SIZE_SETS) >= 2
    for s in EXACT_SIZE_SETS:
        assert s.C & (s.C - 1) != 0 and s.N >= 3 and s.Dk != s.Dv and s.C % s.T == 0
    assert any(s.C // s.T >= 3 and s.T >= 2 for s in EXACT_SIZE_SETS)


def test_parse_sizes():
    assert parse_sizes("C=6,Dk=3,Dv=5,chunks=3,T=2; C=5,Dk=4,Dv=2") == (
        Sizes(C=6, Dk=3, Dv=5, N=3, T=2), Sizes(C=5, Dk=4, Dv=2, N=3, T=1))
    for bad, needle in [("C=6,Dk=3", "missing Dv"), ("C=6,Dk=3,Dv=x", "not an integer"),
                        ("C=6,Dk=3,Dv=2,T=4", "does not divide"), ("C=6,Dk=3,Dv=2,chunks=1", "at least 2"),
                        ("C=6,Dk=3,Dv=2,E=1", "KEY=N"), ("C=0,Dk=3,Dv=2", "at least 1"), (";", "no size set"),
                        ("C=6,C=5,Dk=1,Dv=1", "twice")]:
        with pytest.raises(ValueError, match=needle):
            parse_sizes(bad)


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_cli_sizes_option():
    code, out, err = _cli("verify", "derivations/examples/mamba2.py", "-q", "--sizes", "C=5,Dk=3,Dv=2,T=2")
    assert code == 2 and "--sizes" in err and "does not divide" in err and "Traceback" not in err
    code, out, err = _cli("verify", "derivations/examples/mamba2.py", "-q", "--no-float", "--format", "json",
                          "--sizes", "C=7,Dk=2,Dv=3,chunks=4")
    assert code == 0, err
    data = json.loads(out)
    rec = {c["id"]: c for c in data["claims"]}
    assert rec["mamba2_chunk.reproduces"]["kind"] == "program"
    assert rec["mamba2_chunk.reproduces"]["verdict"] == "holds"
    assert "C=7, Dk=2, Dv=3, chunks=4" in rec["mamba2.dK"]["evidence"][0]
