"""Grouped value attention (issue 18 item 2, FLA's GVA): HV value heads, H = HV / G
query/key heads, value head h reading q and k of head h // G.  The property: it equals
the same call with q and k repeated G times over the heads (outputs, final states, every
gradient, dq and dk summed over each group), for every generated variant."""
import pytest
import torch

from chunkproof.fuzz.cases import VARIANTS, make_inputs, module


def _fn(name):
    m = module(name)
    return getattr(m, next(f for f in dir(m) if f.startswith("chunk_")))


def _run(fn, args, h0, do, dht):
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = fn(*leaves, initial_state=h, output_final_state=True)
    ((o * do).sum() + (ht * dht).sum()).backward()
    return o.detach(), ht.detach(), [x.grad for x in leaves] + [h.grad]


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("HQ, G", [(1, 2), (2, 3)])
def test_gva_equals_repeated_query_key_heads(name, HQ, G):
    B, T, K, V = 1, 20, 16, 16          # a partial chunk at the end
    HV = HQ * G
    args, _, h0 = make_inputs(name, B, T, HV, K, V, seed=3, h0=True)
    names = [n for n, _ in module(name).ARGS]
    grouped = {i for i, n in enumerate(names) if n in ("q", "k")}
    small = [a[:, :, ::G].contiguous() if i in grouped else a for i, a in enumerate(args)]
    rep = [a.repeat_interleave(G, dim=2) if i in grouped else a for i, a in enumerate(small)]
    gen = torch.Generator().manual_seed(4)
    do = torch.randn(B, T, HV, V, generator=gen)
    dht = torch.randn(B, HV, K, V, generator=gen)
    fn = _fn(name)
    o1, ht1, g1 = _run(fn, small, h0, do, dht)
    o2, ht2, g2 = _run(fn, rep, h0, do, dht)
    assert torch.equal(o1, o2) and torch.equal(ht1, ht2)
    for i, (a, b) in enumerate(zip(g1, g2)):
        if i in grouped:
            b = b.view(B, T, HQ, G, K).sum(3)
        assert a.shape == b.shape, (names + ["initial_state"])[i]
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name} d{(names + ['h0'])[i]}: {m}")


def test_value_heads_not_a_multiple_are_named():
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 3, 16, 16, seed=0)
    q, k, v, g, beta = args
    with pytest.raises(ValueError, match=r"HV = 3 heads, q has H = 2: HV must be a multiple of H"):
        _fn("gated_delta_rule")(q[:, :, :2], k[:, :, :2], v, g, beta)
    with pytest.raises(ValueError, match=r"g must be \[B, T, HV\] = \[1, 8, 3\], got \[1, 8, 1\]"):
        _fn("gated_delta_rule")(q[:, :, :1], k[:, :, :1], v, g[:, :, :1], beta)
