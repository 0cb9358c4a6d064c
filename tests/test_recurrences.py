"""The recurrences reduce to each other as the notes say: linear attention and
DeltaNet are GLA / Gated DeltaNet with alpha = 1, Gated DeltaNet is KDA with a
gate shared by all channels, KDA is DPLR with a = k, b = beta k, v = beta v'."""
import torch
from hypothesis import given, settings, strategies as st

from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import Derivation
from chunkproof.verify.evaluate import Point, Sizes
from torch_field import TorchFloat


def _outputs(rec, seq, S0, sizes):
    d = Derivation("x", "x", "x")
    d.add_recurrence(rec)
    # no loss seeds: only the trajectory is read
    pt = Point(d, rec.name, TorchFloat(), sizes, {i.seq: seq[i.seq] for i in rec.inputs}, S0, None, None)
    states, outs = pt.trajectory()
    return torch.stack([outs[t] for t in sorted(outs)]), states[sizes.L]


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3))
def test_special_cases(seed, dk, dv, C):
    sizes = Sizes(C=C, Dk=dk, Dv=dv, N=2)
    g = torch.Generator().manual_seed(seed)
    L = sizes.L
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    Q, K, V = r(L, dk), r(L, dk), r(L, dv)
    beta = torch.rand(L, 1, generator=g, dtype=torch.float64)
    alpha_s = 0.5 + 0.5 * torch.rand(L, 1, generator=g, dtype=torch.float64)
    alpha_v = 0.5 + 0.5 * torch.rand(L, dk, generator=g, dtype=torch.float64)
    S0 = r(dv, dk)
    ones_s, ones_v = torch.ones(L, 1, dtype=torch.float64), torch.ones(L, dk, dtype=torch.float64)
    base = dict(Q=Q, K=K, V=V)

    def same(a, b):
        assert torch.allclose(a[0], b[0], atol=1e-10) and torch.allclose(a[1], b[1], atol=1e-10)

    same(_outputs(R.linear_attention(), base, S0, sizes),
         _outputs(R.gla(), {**base, "Alpha": ones_v}, S0, sizes))
    same(_outputs(R.deltanet(), {**base, "Beta": beta}, S0, sizes),
         _outputs(R.gated_deltanet(), {**base, "Alpha": ones_s, "Beta": beta}, S0, sizes))
    same(_outputs(R.mamba2(), {**base, "Alpha": alpha_s}, S0, sizes),
         _outputs(R.gla(), {**base, "Alpha": alpha_s.expand(L, dk)}, S0, sizes))
    same(_outputs(R.gated_deltanet(), {**base, "Alpha": alpha_s, "Beta": beta}, S0, sizes),
         _outputs(R.kda(), {**base, "Alpha": alpha_s.expand(L, dk), "Beta": beta}, S0, sizes))
    same(_outputs(R.kda(), {**base, "Alpha": alpha_v, "Beta": beta}, S0, sizes),
         _outputs(R.dplr(), {"Q": Q, "K": K, "V": beta * V, "Alpha": alpha_v, "A": K, "B": beta * K},
                  S0, sizes))
    # DPLR without the external gate is DPLR with b = Diag(alpha)^{-1} d
    D = r(L, dk)
    same(_outputs(R.dplr_nogate(), {**base, "Alpha": alpha_v, "A": K, "D": D}, S0, sizes),
         _outputs(R.dplr(), {**base, "Alpha": alpha_v, "A": K, "B": D / alpha_v}, S0, sizes))
