"""Every generated kernel's loads and stores stay inside its tensor arguments
(chunkproof.fuzz.memcheck, under the interpreter): forward and backward with the V (and,
where split, K) blocks smaller than the head sizes so that every blocked and looped
kernel takes more than one block, a partial last chunk, bf16; and a variable-length,
grouped-value call.  The interpreter does not check addresses itself: an access past a
buffer reads whatever lies there and can pass a float comparison."""
import pytest
import torch
import triton
import triton.language as tl

from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module
from chunkproof.fuzz.memcheck import bounds_checked


@triton.jit
def _copy(x, y, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y + o, tl.load(x + o))


def test_an_access_past_a_buffer_is_named():
    x, y = torch.arange(16.0), torch.zeros(32)
    with bounds_checked():
        _copy[(1,)](x, y, 16)
        assert torch.equal(y[:16], x)
        with pytest.raises(Exception, match=r"_copy: load of 16 address\(es\).*\+64 bytes from the start of 'x' \(64"):
            _copy[(1,)](x, y, 32)
    _copy[(1,)](x, y, 32)          # restored: unchecked again


def _fwd_bwd(name, args, h0, **kw):
    fn = kernel(name)
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = fn(*leaves, initial_state=h, output_final_state=True, **kw)
    (o.float().sum() + ht.float().sum()).backward()
    return [o, ht] + [x.grad for x in leaves] + [h.grad]


@pytest.mark.parametrize("name", VARIANTS)
def test_blocked_kernels_stay_in_bounds(name):
    args, _, h0 = make_inputs(name, 2, 45, 2, 32, 32, seed=11, dtype=torch.bfloat16, h0=True)
    m = module(name)
    blocks = dict(BV=16, grad_BV=16, **({"grad_BK": 16} if m.TILING.grad_BK else {}))
    with bounds_checked(), m.tiling_override(**blocks):
        out = _fwd_bwd(name, args, h0)
    assert all(t is not None and bool(torch.isfinite(t).all()) for t in out)


@pytest.mark.parametrize("name", VARIANTS)
def test_varlen_grouped_calls_stay_in_bounds(name):
    lens = [7, 0, 40, 2]
    cu = torch.tensor([0, 7, 7, 47, 49], dtype=torch.int32)
    args, _, _ = make_inputs(name, 1, sum(lens) + 3, 4, 16, 16, seed=12)
    grouped = {i for i, (n, _) in enumerate(module(name).ARGS) if n in ("q", "k")}
    args = [a[:, :, ::2].contiguous() if i in grouped else a for i, a in enumerate(args)]
    h0 = torch.randn(len(lens), 4, 16, 16, generator=torch.Generator().manual_seed(13))
    with bounds_checked():
        out = _fwd_bwd(name, args, h0, cu_seqlens=cu)
    assert all(t is not None and bool(torch.isfinite(t).all()) for t in out)
