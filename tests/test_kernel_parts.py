"""Kernel forms of IR nodes that are more than one Triton call, checked on their own."""
import pytest
import torch
import triton
import triton.language as tl

from chunkproof.kernels._runtime import _inv_unit_lower


@triton.jit
def _inv_kernel(x_ptr, y_ptr, BT: tl.constexpr):
    o_t = tl.arange(0, BT)
    p = o_t[:, None] * BT + o_t[None, :]
    x = tl.load(x_ptr + p)
    y = _inv_unit_lower(x, o_t[:, None] > o_t[None, :], o_t[:, None] == o_t[None, :], BT, "ieee")
    tl.store(y_ptr + p, y)


@pytest.mark.parametrize("BT", [16, 32, 64])
@pytest.mark.parametrize("seed", [0, 1])
def test_inverse_of_unit_lower(BT, seed):
    g = torch.Generator().manual_seed(seed)
    L = torch.tril(torch.randn(BT, BT, generator=g, dtype=torch.float64), -1) * 0.3
    X = torch.eye(BT, dtype=torch.float64) + L
    # what lies on and above the diagonal must not matter: the kernel reads I + strictly lower
    junk = torch.triu(torch.randn(BT, BT, generator=g, dtype=torch.float64), 0)
    y = torch.empty(BT, BT)
    _inv_kernel[(1,)]((X + torch.triu(junk, 1)).float().contiguous(), y, BT=BT)
    ref = torch.linalg.inv(X)
    err = float(torch.linalg.norm(y.double() - ref) / torch.linalg.norm(ref))
    assert err < 1e-5, err
