"""The ground truth for adjoint claims, three ways: reverse mode (over GF(p) for
differing entries, over float64 for the float level's errors), dual-number JVPs
over GF(p) (used for verdicts) and torch autograd in float64 (independent of both,
and only here: the checker itself does not import torch)."""
import numpy as np
import pytest
import torch

from chunkproof.verify.adjoints import adjoint_value, true_dstates
from chunkproof.verify.levels import jvp_loss, loss_given, EXACT_SIZES
from chunkproof.verify.evaluate import BlockEval, EvalError, Point, Sizes
from chunkproof.verify.fields import Float, ModP, ZeroDivision
from chunkproof.verify.sites import sites
from chunkproof.derivations.loader import bundled, from_file
from chunkproof.derivations import ir
from torch_field import on_torch

SIZES = Sizes(C=3, Dk=2, Dv=3, N=3, T=1)


def _derivations():
    ds = bundled() + from_file("derivations/examples/mamba2.py")
    return [(d, p) for d in ds for p in d.programs.values()]


def _targets(prog, pt):
    names = ["S_prev", prog.state] + [n for n, _ in prog.defs]
    for i in pt.rec.inputs:
        names.append(i.seq if prog.block == "chunk" else i.step)
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def _shape(prog, pt, name):
    ev = BlockEval(pt, prog, 1)
    return pt.field.shape(ev.var_value(name))


@pytest.mark.parametrize("deriv,prog", _derivations(), ids=lambda x: getattr(x, "name", ""))
def test_reverse_mode_matches_dual_numbers(deriv, prog):
    rec = deriv.program_recurrence[prog.name]
    for seed in range(4):
        rng = np.random.default_rng(seed)
        f = ModP(rng)
        pt = Point.sample(deriv, rec, f, SIZES, rng)
        try:
            names = _targets(prog, pt)
            for name in names:
                var = ir.Var(name, "?", "?")
                # () means every consumer in the program: the program-level cut, which is
                # what reverse mode computes (inputs' verdicts go through the recurrence,
                # which agrees whenever the program's forward claims hold)
                every = tuple(prog.names())
                for via in [every] + [(c,) for c, e in prog.defs
                                      if any(isinstance(n, ir.Var) and n.name == name for n in ir.walk(e))]:
                    a = ir.Adj(var, via)
                    r, c = _shape(prog, pt, name)
                    D = f.rand(r, c)
                    want = jvp_loss(pt, prog, 1, a, D)
                    got = adjoint_value(pt, prog, 1, a)
                    assert int((got * D % f.p).sum() % f.p) == want, (prog.name, name, via)
            return
        except ZeroDivision:
            continue
    pytest.fail("every sampled point hit a zero denominator")


@pytest.mark.parametrize("deriv", bundled(), ids=lambda d: d.name)
def test_state_adjoints_match_torch_autograd(deriv):
    """dL/dS_t from our reverse pass equals torch autograd through the recurrence."""
    for rec in deriv.recurrences:
        rng = np.random.default_rng(3)
        pt = Point.sample(deriv, rec, Float(), Sizes(C=4, Dk=3, Dv=2, N=2), rng)
        tp = on_torch(pt)
        S0 = tp.S0.clone().requires_grad_(True)
        tp.S0 = S0
        states, outs = tp.trajectory()
        L = sum((tp.dO[t - 1] * outs[t][:, 0]).sum() for t in outs) + (tp.dST * states[tp.sizes.L]).sum()
        (g,) = torch.autograd.grad(L, S0)
        ours = true_dstates(pt)[0]
        assert isinstance(ours, np.ndarray)
        assert torch.allclose(g, torch.from_numpy(ours), rtol=1e-10, atol=1e-12), rec


def _autograd_truth(pt, prog, b, target):
    """dL/dX by torch autograd: X at block b a leaf, L through the program cut at X
    and the recurrence after it (what the float level used before it left torch)."""
    tp = on_torch(pt)
    if target.var.name in pt.param_decl and not target.via and not target.excl:
        # a parameter is read by every step: its gradient is summed over all of them
        leaves = {n: v.clone().requires_grad_(True) for n, v in tp.params.items()}
        tp = on_torch(pt, leaves)
        states, outs = tp.trajectory()
        loss = (tp.dST * states[tp.sizes.L]).sum()
        for t, o in outs.items():
            loss = loss + (tp.dO[t - 1:t, :] @ o).sum()
        x = leaves[target.var.name]
    else:
        x = BlockEval(tp, prog, b, tp.field).var_value(target.var.name).detach().clone()
        x.requires_grad_(True)
        loss = loss_given(tp, prog, b, target, x, tp.field).sum()
    (g,) = torch.autograd.grad(loss, x, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def _adjoint_claims():
    ds = bundled() + [d for f in ("mamba2", "retnet", "gla_log")
                      for d in from_file(f"derivations/examples/{f}.py")]
    return [(d, [c for c in d.claims if c.kind == "adjoint"]) for d in ds]


@pytest.mark.parametrize("deriv,claims", _adjoint_claims(), ids=lambda x: getattr(x, "name", ""))
def test_float_level_truth_is_torch_autograd(deriv, claims):
    """The float level's adjoint truths (numpy, our reverse mode) equal torch autograd
    through the program and the recurrence, for every adjoint claim, at every block."""
    compared = 0
    for claim in claims:
        prog = deriv.programs[claim.program]
        rng = np.random.default_rng(7)
        pt = Point.sample(deriv, claim.recurrence, Float(), EXACT_SIZES, rng,
                          zero_init="zero_initial_state" in claim.assume)
        try:
            blocks = sorted({b for b, _, _ in sites(pt, claim, prog)})
            for b in blocks:
                ours = adjoint_value(pt, prog, b, claim.lhs)
                want = _autograd_truth(pt, prog, b, claim.lhs).numpy()
                assert isinstance(ours, np.ndarray), claim.id
                np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-11, err_msg=claim.id)
                compared += 1
        except (EvalError, ir.ShapeError):
            continue   # the float level says "not evaluated" for these; the exact level decides
    assert compared >= len(claims) // 2, f"{deriv.name}: only {compared} blocks compared"
