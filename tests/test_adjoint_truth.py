"""The ground truth for adjoint claims, three ways: reverse mode over GF(p)
(used for right-hand sides and differing entries), dual-number JVPs over GF(p)
(used for verdicts) and torch autograd in float64 (independent of both)."""
import numpy as np
import pytest
import torch

from chunkproof.verify.adjoints import adjoint_value, true_dstates
from chunkproof.verify.levels import jvp_loss
from chunkproof.verify.evaluate import BlockEval, Point, Sizes
from chunkproof.verify.fields import Float, ModP, ZeroDivision
from chunkproof.derivations.loader import bundled, from_file
from chunkproof.derivations import ir

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
        S0 = pt.S0.clone().requires_grad_(True)
        pt.S0 = S0
        states, outs = pt.trajectory()
        L = sum((pt.dO[t - 1] * outs[t][:, 0]).sum() for t in outs) + (pt.dST * states[pt.sizes.L]).sum()
        (g,) = torch.autograd.grad(L, S0)
        pt.S0 = S0.detach()
        pt.states = None
        ours = true_dstates(pt)[0]
        assert torch.allclose(g, ours, rtol=1e-10, atol=1e-12), rec
