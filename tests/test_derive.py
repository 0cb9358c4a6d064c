"""Symbolic reverse mode (derivations/reverse.py, simplify.py), the exact check of its
lines (verify/derived.py) and `chunkproof derive` (issue 16, items 1, 2 and 5)."""
import dataclasses
import glob
import json
import os
import subprocess
import sys

import pytest

from chunkproof.cli import main
from chunkproof.cmd_derive import default_program
from chunkproof.derivations import ir
from chunkproof.derivations.dsl import S_PREV, tile
from chunkproof.derivations.loader import InputError, bundled, from_file
from chunkproof.derivations.plaintext import to_text
from chunkproof.derivations.reverse import DeriveError, adjoint_formula, derive_adjoints
from chunkproof.derivations.simplify import Simplifier, transpose
from chunkproof.verify import derived
from chunkproof.verify.derived import DerivedAdjointError, derive_checked
from chunkproof.verify.evaluate import Sizes
from chunkproof.verify.levels import EXACT_SIZE_SETS
from chunkproof.verify.programs import is_truth

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "derivations", "examples", "*.py"))
                  if not p.endswith("__init__.py"))
# the report's two size sets and a third with Dk = Dv and an odd chunk, at two seeds
SETS = EXACT_SIZE_SETS + (Sizes(C=3, Dk=2, Dv=2, N=3),)
SEEDS = (0, 7)


def _load(target):
    return from_file(target)[0] if target.endswith(".py") else bundled([target])[0]


MAIN = ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"] + EXAMPLES


@pytest.mark.parametrize("target", MAIN, ids=lambda t: os.path.basename(t))
def test_derived_adjoints_hold_at_several_sizes_and_seeds(target):
    d = _load(target)
    c = derive_checked(d, default_program(d), SETS, SEEDS)
    assert c.points == len(SETS) * len(SEEDS)
    roles = {e.role for e in c.backward.equations}
    assert {"state", "definition", "input", "state_prev", "initial"} <= roles


def _other_programs():
    out = []
    for d in bundled():
        for p in d.programs.values():
            if p.block == "chunk" and not is_truth(d, p) and p.name != default_program(d):
                out.append((d.name, p.name))
    return out


@pytest.mark.parametrize("deriv,prog", _other_programs(), ids=lambda x: x)
def test_every_other_bundled_chunk_program_derives_or_is_refused_for_its_forward(deriv, prog):
    d = bundled([deriv])[0]
    if prog == "dplr_nogate_chunk":   # the note's literal no-gate form, which is wrong
        with pytest.raises(InputError, match="does not reproduce its recurrence"):
            derive_checked(d, prog)
        return
    assert derive_checked(d, prog).claims


def test_every_definition_input_and_parameter_has_a_line():
    d = _load(os.path.join(ROOT, "derivations", "examples", "retnet.py"))
    bw = derive_adjoints(d, "retnet_chunk")
    names = {e.name for e in bw.equations}
    prog = d.programs["retnet_chunk"]
    assert set(prog.names()) - {"O"} <= names          # δO is the loss seed
    assert {"Q", "K", "V", "S_prev", "gamma", "scale"} <= names
    total = next(e for e in bw.equations if e.id == "dgamma")
    assert total.kind == "identity" and isinstance(total.rhs, ir.SumBlocks)


@pytest.mark.parametrize("target", MAIN, ids=lambda t: os.path.basename(t))
def test_lines_are_in_an_order_computable_chunk_by_chunk(target):
    """Each line reads only adjoints of lines before it (δS_[t]^C, the first line,
    comes from chunk t+1, which is done before chunk t)."""
    d = _load(target)
    bw = derive_adjoints(d, default_program(d))
    assert bw.equations[0].role == "state" and bw.equations[0].blocks == "not_last"
    done = set()
    for e in bw.equations:
        if e.role != "state":
            reads = {(n.var.name, n.via) for n in ir.walk(e.rhs) if isinstance(n, ir.Adj)}
            assert reads <= done, f"{e.id} reads {reads - done} before they are computed"
        done.add((e.name, e.lhs.via))


def test_derived_formulas_read_the_programs_own_tiles():
    d = bundled(["gla"])[0]
    assert to_text(adjoint_formula(d, "gla_chunk", "Q").rhs) == "δ←Q ⊙ Gamma"
    assert to_text(adjoint_formula(d, "gla_chunk", "S_prev").rhs) == "δOᵀ ←Q + δS_[t] Diag(gC)"
    d = _load(os.path.join(ROOT, "derivations", "examples", "gla_log.py"))
    # exp(G^c) ⊙ Q is the definition ←Q, also inside a longer Hadamard product
    assert "δ←Q ⊙ ←Q" in to_text(adjoint_formula(d, "gla_log_chunk", "Gc").rhs)
    with pytest.raises(DeriveError, match="no adjoint of 'nothing'"):
        adjoint_formula(d, "gla_log_chunk", "nothing")


def test_a_wrong_line_is_an_error_not_output(monkeypatch):
    real = derived.derive_adjoints

    def one_term_dropped(deriv, prog):
        bw = real(deriv, prog)
        eqs = list(bw.equations)
        k = next(i for i, e in enumerate(eqs) if e.id == "dKr")
        eqs[k] = dataclasses.replace(eqs[k], rhs=eqs[k].rhs.a)   # the first term only
        return dataclasses.replace(bw, equations=eqs)

    monkeypatch.setattr(derived, "derive_adjoints", one_term_dropped)
    with pytest.raises(DerivedAdjointError, match="gla_chunk.dKr does not hold"):
        derive_checked(bundled(["gla"])[0], "gla_chunk")


# ------------------------------------------------------------------ the simplifier
Q, K = tile("Q", "C", "Dk"), tile("K", "C", "Dk")
G, V = tile("G", "C", "Dk"), tile("V", "C", "Dv")


def test_simplifier_pushes_transposes_collects_and_names():
    s = Simplifier()
    assert s(transpose(ir.Mask(Q @ K.T))) == ir.Mask(K @ Q.T, "MT")
    assert s(Q @ K.T @ V.T.T + Q @ K.T @ V) == ir.Scale(ir.Const(2), Q @ K.T @ V)
    assert s(Q @ K.T @ V - Q @ S_PREV.T) == Q @ (K.T @ V - S_PREV.T)
    assert s(Q - Q) == ir.Zeros("C", "Dk")
    assert s(-(-Q)) == Q
    Kr = tile("Kr", "C", "Dk")
    named = Simplifier({ir.HDiv(K, G): Kr})
    assert named(ir.HDiv(ir.HDiv(ir.Had(Q, K), G), G)) == ir.HDiv(ir.Had(Q, Kr), G)


# ------------------------------------------------------------------ the command
def test_formats(capsys, tmp_path):
    assert main(["derive", "gla", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (bw,) = data["backwards"]
    assert bw["program"] == "gla_chunk" and bw["points"] == 2
    ids = [e["id"] for e in bw["equations"]]
    assert ids[0] == "dS" and "dS_init" in ids and all(e["verified"] for e in bw["equations"])
    assert main(["derive", "gla", "--full-check", "--format", "json"]) == 0
    (bw,) = json.loads(capsys.readouterr().out)["backwards"]
    assert "line by line as the report decides claims (float64" in bw["evidence"]
    assert main(["derive", "gla"]) == 0
    table = capsys.readouterr().out
    assert "δS_[-1] = " in table and "every line holds exactly" in table
    assert main(["derive", "gla", "--format", "markdown"]) == 0
    assert "| # | adjoint | formula | chunks |" in capsys.readouterr().out
    assert main(["derive", "gla", "--format", "latex", "-o", str(tmp_path / "b.tex")]) == 0
    tex = (tmp_path / "b.tex").read_text()
    assert tex.count(r"\begin{align*}") == 1 and r"\delta \mathbf{S}_{[-1]}" in tex


def _run(*args, cwd=ROOT):
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("target", ["gla", os.path.join(ROOT, "derivations", "examples", "retnet.py")],
                         ids=["gla", "retnet"])
def test_emitted_claims_verify_unchanged_and_equal_the_derived_ones(target, tmp_path):
    out = tmp_path / "derived_claims.py"
    code, _, err = _run("derive", target, "--emit-claims", str(out))
    assert code == 0, err
    code, rep, err = _run("verify", str(out), "--format", "json", "-q", cwd=tmp_path)
    assert code == 0, err
    verdicts = {r["id"]: r["verdict"] for r in json.loads(rep)["claims"]}
    assert set(verdicts.values()) == {"holds"}
    d = _load(target)
    c = derive_checked(d, default_program(d))
    (loaded,) = from_file(str(out))
    got = {x.id: x for x in loaded.claims}
    for want in c.claims:
        assert want.id in verdicts
        assert got[want.id].lhs == want.lhs and got[want.id].rhs == want.rhs, want.id
        assert got[want.id].blocks == want.blocks


ROWREC = '''
from chunkproof.derivations import ir, recurrences as R
from chunkproof.derivations.dsl import Derivation, Program, S_PREV, row, tile, tril
D = Derivation("rowrec", "a row recursion on the path to O", "x.py")
D.add_recurrence(R.linear_attention())
Q, K, V = tile("Q", "C", "Dk"), tile("K", "C", "Dk"), tile("V", "C", "Dv")
P = Program("p", "chunk")
Kc = P.define("Kc", ir.RowRec("Kc", "r", row(K, "r"), "C", "Dk"))
P.define("O", Q @ S_PREV.T + tril(Q @ Kc.T) @ V)
P.define("S", S_PREV + V.T @ Kc)
D.add_program(P)
DERIVATION = D
'''


def _one_line_error(code, out, err):
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chunkproof: error: "), err
    return lines[0]


def test_bad_inputs_are_one_line_errors_and_write_nothing(tmp_path):
    emit, rep = tmp_path / "e.py", tmp_path / "r.txt"
    outs = ["--emit-claims", str(emit), "-o", str(rep)]
    cases = [
        (["nosuchvariant"], "not a derivation file"),
        ([str(tmp_path / "missing.py")], "no such file"),
        (["gla", "--program", "nope"], "no such program"),
        (["gla", "--program", "gla_G_step"], "step program"),
        (["dplr_delta_rule", "--program", "dplr_nogate_chunk"], "does not reproduce its recurrence"),
        (["gla", "--sizes", "C=0"], "--sizes"),
        (["gla", "--emit-claims", str(tmp_path / "no" / "x.py")], "no folder"),
        (["gla", "--emit-claims", str(tmp_path / "x.txt")], "ends in .py"),
    ]
    for args, says in cases:
        line = _one_line_error(*_run("derive", *outs, *args))   # a case's own option wins
        assert says in line, line
        assert not emit.exists() and not rep.exists()
    f = tmp_path / "rowrec.py"
    f.write_text(ROWREC)
    line = _one_line_error(*_run("derive", str(f), *outs))
    assert "definition Kc" in line and "RowRec" in line
    assert not emit.exists() and not rep.exists()
    assert sorted(os.listdir(tmp_path)) == ["rowrec.py"]   # no temporary left behind
