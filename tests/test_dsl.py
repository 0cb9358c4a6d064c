"""What the DSL can say: parameters constant over time, log-space gates, Stack/Prod in
programs, scalar * tile, one declaration of a tile's shape, claims without a line.
Each construct holds in a derivation that is right, and a slip in it is caught."""
import importlib

import pytest

from chunkproof.derivations import ir
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, DO_STEP, Derivation, Notebook, Program, S_PREV, adj, diag,
                                        exp, ones, param, prod, shift, stack, sum_blocks, tile, tril)
from chunkproof.derivations.ir import Inner, Truth
from chunkproof.derivations.loader import InputError, from_file
from chunkproof.verify.check import check


def verdict(deriv, claim_id, floats=False):
    claim = next(c for c in deriv.claims if c.id == claim_id)
    return check(deriv, claim, floats=floats, diagnose=False).verdict


def fresh(module):
    """A private copy of an example, so that added claims do not leak between tests."""
    return importlib.reload(importlib.import_module(f"chunkproof.derivations.examples.{module}"))


# ------------------------------------------------------------------ the examples
@pytest.mark.parametrize("name", ["retnet", "gla_log", "mamba2"])
def test_examples_hold(name):
    mod = fresh(name)
    for c in mod.DERIVATION.claims:
        assert check(mod.DERIVATION, c, diagnose=False).verdict == "holds", c.id


# ------------------------------------------------------------------ parameters
def test_parameter_gradients_summed_over_chunks():
    m = fresh("retnet")
    d = m.DERIVATION
    claim = next(c for c in d.claims if c.id == "retnet.dgamma")
    assert claim.kind == "adjoint" and "summed" in claim.citation.what
    assert verdict(d, "retnet.dtau", floats=True) == "holds"
    nb = Notebook(d, "slips").section("parameters")
    nb.adjoint("slip.dtau", "x", adj(m.tau), sum_blocks(Inner(DO, m.O)), "retnet_chunk")    # O for O^u
    nb.adjoint("slip.dgamma", "x", adj(m.gamma), sum_blocks(ones("1", "C") @ m.GATE_PARTS), "retnet_chunk")
    nb.adjoint("slip.one_chunk", "x", adj(m.tau), Inner(DO, m.Ou), "retnet_chunk")    # not summed
    for cid in ("slip.dtau", "slip.dgamma", "slip.one_chunk"):
        assert verdict(d, cid) == "fails", cid


def test_parameter_part_of_one_chunk():
    """adj(param, via=...) is chunk t's own part, checked by the JVP like any adjoint,
    and read by reverse mode through a Stack of Prods in the program."""
    m = fresh("retnet")
    d = m.DERIVATION
    nb = Notebook(d, "x").section("parts")
    part = (ones("1", "C") @ m.GATE_PARTS) / m.gamma
    nb.identity("rev.dgamma_chunk", "x", adj(m.gamma, via=("Gamma",)), part, "retnet_chunk")
    nb.adjoint("slip.dgamma_chunk", "x", adj(m.gamma, via=("Gamma",)), part * m.gamma, "retnet_chunk")
    assert verdict(d, "retnet.dgamma_chunk") == "holds"
    assert verdict(d, "rev.dgamma_chunk", floats=True) == "holds"
    assert verdict(d, "slip.dgamma_chunk") == "fails"


def test_vector_parameter_in_a_step_program():
    """RWKV-6's bonus u (Dk x 1): delta u = sum_t (k_t . q_t) <v_t, do_t>, per step."""
    d = Derivation("rwkv6_test", "x", "x")
    d.add_recurrence(R.rwkv6())
    k, q, v = R.k, R.q, R.v
    nb = Notebook(d, "x").section("bonus")
    nb.adjoint("rwkv6.du", "x", adj(R.u_p), sum_blocks(Inner(v, DO_STEP) * (k * q)), "rwkv6_step",
               blocks="first")
    nb.adjoint("slip.du", "x", adj(R.u_p), sum_blocks(Inner(v, DO_STEP) * q), "rwkv6_step", blocks="first")
    assert verdict(d, "rwkv6.du", floats=True) == "holds"
    assert verdict(d, "slip.du") == "fails"


def test_parameter_declared_twice_differently_is_refused():
    d = Derivation("p", "x", "x")
    d.add_recurrence(R.retnet())
    nb = Notebook(d, "x").section("s")
    nb.identity("p.a", "x", param("gamma", "Dk", "1"), param("gamma", "Dk", "1"), "retnet_step")
    with pytest.raises(ValueError, match="declared twice"):
        d.parameters()


# ------------------------------------------------------------------ log-space gates
def test_log_gate_slips_fail():
    m = fresh("gla_log")
    d = m.DERIVATION
    nb = Notebook(d, "x").section("slips")
    nb.forward("slip.O", "x", Truth("outs"), m.Ql @ S_PREV.T + tril((m.Q * exp(m.Gc)) @ (m.K * exp(m.Gc)).T) @ m.V,
               "gla_log_chunk")
    nb.adjoint("slip.dG", "x", adj(m.G), ir.CumSum(adj(m.Gc)), "gla_log_chunk")  # prefix for suffix
    nb.identity("slip.decay", "x", ir.Row(m.Ql, "i").T @ ir.Row(m.Kr, "j"),
                (ir.Row(m.Q, "i") * exp(ir.Row(m.Gc, "j") - ir.Row(m.Gc, "i"))).T @ ir.Row(m.K, "j"),
                "gla_log_chunk", over=(("i", "1", "C"), ("j", "1", "C")))
    for cid in ("slip.O", "slip.dG", "slip.decay"):
        assert verdict(d, cid) == "fails", cid


def test_log_gate_outside_exp_is_an_error_that_says_why():
    m = fresh("gla_log")
    nb = Notebook(m.DERIVATION, "x").section("s")
    nb.identity("bare.G", "x", m.G, m.G * m.G, "gla_log_chunk")
    nb.identity("exp.K", "x", exp(m.K), m.K, "gla_log_chunk")
    r = check(m.DERIVATION, m.DERIVATION.claims[-2], floats=False, diagnose=False)
    assert r.verdict == "error" and "inside exp" in r.message
    r = check(m.DERIVATION, m.DERIVATION.claims[-1], floats=False, diagnose=False)
    assert r.verdict == "error" and "loggate" in r.message


# ------------------------------------------------------------------ scalar * tile
def test_scalar_times_tile_is_scale_in_both_orders():
    s, X, Y = tile("s", "1", "1"), tile("X", "C", "Dk"), tile("Y", "C", "Dk")
    assert s * X == ir.Scale(s, X) and X * s == ir.Scale(s, X)
    assert X * Y == ir.Had(X, Y) and s * s == ir.Had(s, s)
    assert 2 * X == ir.Scale(ir.Const(2), X)
    with pytest.raises(ir.ShapeError):
        (X * tile("Z", "C", "Dv")).shape()


def test_scalar_times_tile_slip_fails():
    m = fresh("mamba2")
    nb = Notebook(m.D, "x").section("s")
    nb.forward("star.S", "x", Truth("state", "t*C+C"), m.gC * (S_PREV + m.V.T @ m.Kr), "mamba2_chunk")
    nb.forward("slip.S", "x", Truth("state", "t*C+C"), m.gC * S_PREV + m.V.T @ m.Kr, "mamba2_chunk")
    assert verdict(m.D, "star.S") == "holds" and verdict(m.D, "slip.S") == "fails"


# ------------------------------------------------------------------ Stack / Prod in programs
def test_stack_in_a_program_and_its_slip():
    d = Derivation("stack_test", "x", "x")
    d.add_recurrence(R.mamba2())
    Alpha, K, V = tile("Alpha", "C", "1"), tile("K", "C", "Dk"), tile("V", "C", "Dv")
    P = Program("p", "chunk")
    Gamma = P.define("Gamma", stack("r", prod("i", "1", "r", ir.Row(Alpha, "i"))))
    Kr = P.define("Kr", stack("i", ir.Row(K, "i") * ir.Row(ir.HDiv(ones("C", "1"), Gamma), "i")))
    Ql = P.define("Ql", diag(Gamma) @ tile("Q", "C", "Dk"))
    S = P.define("S", ir.LastRow(Gamma) * (S_PREV + V.T @ Kr))
    P.define("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V)
    d.add_program(P)
    nb = Notebook(d, "x").section("s")
    nb.forward("stack.S", "x", Truth("state", "t*C+C"), S, "p")
    nb.adjoint("stack.dK", "x", adj(K), ir.Inv(diag(Gamma)) @ adj(Kr), "p")
    nb.adjoint("slip.dK", "x", adj(K), diag(Gamma) @ adj(Kr), "p")
    nb.adjoint("stack.dS", "x", adj(S), shift(ir.LastRow(Gamma) * adj(S)) + shift(DO).T @ shift(Ql), "p",
               blocks="not_last")
    assert [verdict(d, c) for c in ("stack.S", "stack.dK", "slip.dK", "stack.dS")] == \
        ["holds", "holds", "fails", "holds"]


def test_shift_in_a_program_is_refused_clearly():
    d = Derivation("shift_test", "x", "x")
    d.add_recurrence(R.linear_attention())
    K, V = tile("K", "C", "Dk"), tile("V", "C", "Dv")
    P = Program("p", "chunk")
    Kn = P.define("Kn", shift(K))
    S = P.define("S", S_PREV + V.T @ K + 0 * (V.T @ Kn))
    P.define("O", tile("Q", "C", "Dk") @ S_PREV.T + tril(tile("Q", "C", "Dk") @ K.T) @ V)
    d.add_program(P)
    nb = Notebook(d, "x").section("s")
    # through S only: an input's whole adjoint goes through the recurrence, its part
    # through one definition through the program's reverse mode, which meets the Shift
    nb.identity("x.dK", "x", adj(K, via=("S",)), adj(K, via=("S",)), "p", blocks="not_last")
    r = check(d, d.claims[0], floats=False, diagnose=False)
    assert r.verdict == "error" and "reads another chunk" in r.message


# ------------------------------------------------------------------ one declaration of a shape
def test_define_returns_the_handle_with_the_formula_shape():
    P = Program("p", "chunk")
    Kr = P.define("Kr", ir.Inv(diag(tile("Gamma", "C", "1"))) @ tile("K", "C", "Dk"), r"\vec K", ">", "K")
    assert (Kr.rows, Kr.cols, Kr.arrow, Kr.base) == ("C", "Dk", ">", "K") and P.names() == ["Kr"]
    with pytest.raises(ir.ShapeError, match="definition Bad"):
        P.define("Bad", tile("K", "C", "Dk") @ tile("V", "C", "Dv"))


def test_handle_that_disagrees_with_its_definition_names_it(tmp_path):
    f = tmp_path / "bad_handle.py"
    f.write_text(
        "from chunkproof.derivations import recurrences as R\n"
        "from chunkproof.derivations.dsl import Derivation, Program, S_PREV, tile\n"
        "D = Derivation('bad', 'x', 'x')\n"
        "D.add_recurrence(R.linear_attention())\n"
        "K, V, Q = tile('K', 'C', 'Dk'), tile('V', 'C', 'Dv'), tile('Q', 'C', 'Dk')\n"
        "W = tile('W', 'C', 'Dv')\n"
        "D.add_program(Program('p', 'chunk', [('W', K), ('S', S_PREV + V.T @ K), ('O', Q @ S_PREV.T + W)]))\n"
        "DERIVATION = D\n")
    with pytest.raises(InputError, match="definition 'W' of program p is CxDk"):
        from_file(str(f))


# ------------------------------------------------------------------ old style, line optional
def test_old_style_files_still_work():
    d = from_file("tests/data/wrong_dK.py")[0]
    typo = next(c for c in d.claims if "typo" in c.id)
    assert check(d, typo, floats=False, diagnose=False).verdict == "fails"
    assert verdict(d, "mamba2.dK") == "holds"


def test_line_is_optional():
    m = fresh("mamba2")
    nb = Notebook(m.D, "x").section("s")
    a = nb.forward("noline", "latex", Truth("outs"), m.Ql @ S_PREV.T + tril(m.Ql @ m.Kr.T) @ m.V, "mamba2_chunk")
    b = nb.forward("kwline", latex="latex", lhs=Truth("outs"), rhs=a.rhs, program="mamba2_chunk", line=7)
    c = nb.forward("posline", 8, "latex", Truth("outs"), a.rhs, "mamba2_chunk")
    assert (a.citation.line, b.citation.line, c.citation.line) == (0, 7, 8)
    assert a.latex == "latex" and verdict(m.D, "noline") == "holds"



# ------------------------------------------------------------------ reverse mode vs dual numbers
@pytest.mark.parametrize("name", ["retnet", "gla_log"])
def test_reverse_mode_matches_dual_numbers(name):
    """Reverse mode through Stack/Prod, parameters and log-space definitions equals
    the exact JVP for every tile of the program, and a parameter's summed gradient
    equals the sum of its chunks' JVPs."""
    import numpy as np
    from chunkproof.verify.adjoints import adjoint_value
    from chunkproof.verify.levels import jvp_loss
    from chunkproof.verify.evaluate import BlockEval, Point, Sizes
    from chunkproof.verify.fields import ModP
    d = fresh(name).DERIVATION
    prog = next(p for p in d.programs.values() if p.block == "chunk")
    sizes = Sizes(C=3, Dk=2, Dv=3, N=3)
    rng = np.random.default_rng(0)
    f = ModP(rng)
    pt = Point.sample(d, d.program_recurrence[prog.name], f, sizes, rng)
    every = tuple(prog.names())
    names = ["S_prev"] + prog.names() + [i.seq for i in pt.rec.inputs] + list(pt.param_decl)
    for n in names:
        r, c = f.shape(BlockEval(pt, prog, 1).var_value(n))
        D = f.rand(r, c)
        a = ir.Adj(ir.Var(n, "?", "?"), every)
        assert int((adjoint_value(pt, prog, 1, a) * D % f.p).sum() % f.p) == jvp_loss(pt, prog, 1, a, D), n
    for n, p in pt.param_decl.items():
        D = f.rand(1, 1) if p.rows == "1" else f.rand(sizes.dim(p.rows), 1)
        want = sum(jvp_loss(pt, prog, b, ir.Adj(p, every), D) for b in range(sizes.N)) % f.p
        got = adjoint_value(pt, prog, 0, ir.Adj(p))
        assert int((got * D % f.p).sum() % f.p) == want, n
