"""Kernel forms of IR nodes that are more than one Triton call, checked on their own."""
import pytest
import torch
import triton
import triton.language as tl

from chunkproof.kernels._runtime import _blocked_gated_dot, _inv_unit_lower, _masked_gated_dot, _masked_mix


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


@triton.jit
def _blocked_kernel(a_ptr, f_ptr, b_ptr, out_ptr, BT: tl.constexpr, D: tl.constexpr, STRICT: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_d = tl.arange(0, D)
    a = tl.load(a_ptr + o_t[:, None] * D + o_d[None, :])
    f = tl.load(f_ptr + o_t[:, None] * D + o_d[None, :])
    b = tl.load(b_ptr + o_t[:, None] * D + o_d[None, :])
    p = _blocked_gated_dot(a, f, tl.trans(b), -tl.trans(f), STRICT, BT, tl.float32, tl.float32, "ieee")
    tl.store(out_ptr + o_t[:, None] * BT + o_t[None, :], p)


@pytest.mark.parametrize("strict", [False, True])
def test_blocked_gated_product_at_mild_decay(strict):
    # the form the kernels take once a chunk's decay is out of the rebalanced form's
    # range, checked on its own where both forms are exact: P_ij = sum_d a_id b_jd
    # exp(f_id - f_jd) on and below the diagonal (strictly below if strict)
    BT, D = 64, 16
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(BT, D, generator=g, dtype=torch.float64), torch.randn(BT, D, generator=g, dtype=torch.float64)
    f = torch.cumsum(-0.05 * torch.rand(BT, D, generator=g, dtype=torch.float64), 0)
    want = torch.einsum("id,jd->ij", a * f.exp(), b * (-f).exp()).tril(-1 if strict else 0)
    got = torch.empty(BT, BT)
    _blocked_kernel[(1,)](a.float(), f.float(), b.float(), got, BT=BT, D=D, STRICT=strict)
    err = float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))
    assert err < 1e-5, err


@triton.jit
def _mix_kernel(x_ptr, y_ptr, G_ptr, out_ptr, rng, BT: tl.constexpr, D: tl.constexpr, KIND: tl.constexpr,
                PREC: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_d = tl.arange(0, D)
    x = tl.load(x_ptr + o_t[:, None] * BT + o_t[None, :])
    y = tl.load(y_ptr + o_t[:, None] * D + o_d[None, :])
    G = tl.load(G_ptr + o_t[:, None] * D + o_d[None, :])
    if KIND >= 2:
        f, g = G, -G
    else:
        f, g = -G, G
    p = _masked_mix(x, y, f, g, KIND, (o_t == BT // 2)[:, None], BT, tl.float32, tl.float32, PREC, rng, False)
    tl.store(out_ptr + o_t[:, None] * D + o_d[None, :], p)


@pytest.mark.parametrize("prec", ["ieee", "tf32x3"])
@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_masked_mix_every_kind(kind, prec):
    # P_id = sum_j x_ij y_jd exp(f_jd + g_id) over j <= i, j < i, j >= i, j > i; with bf16 y
    # and tf32x3, the precise lines' form (the diagonal 16 x 16 blocks as one batched
    # product, the rest one product): the same sum (the interpreter multiplies in fp32)
    BT, D = 64, 32
    gen = torch.Generator().manual_seed(kind)
    x = torch.randn(BT, BT, generator=gen, dtype=torch.float64)
    y = torch.randn(BT, D, generator=gen, dtype=torch.float64).bfloat16()
    G = torch.cumsum(-0.2 * torch.rand(BT, D, generator=gen, dtype=torch.float64), 0)
    f, g = (G, -G) if kind >= 2 else (-G, G)
    i, j = torch.arange(BT)[:, None], torch.arange(BT)[None, :]
    keep = [i >= j, i > j, i <= j, i < j][kind].double()
    want = torch.einsum("ij,jd,ijd->id", x * keep, y.double(), (f[None, :, :] + g[:, None, :]).clamp(max=0).exp())
    got = torch.empty(BT, D)
    rng = torch.zeros(1, dtype=torch.int32)
    _mix_kernel[(1,)](x.float(), y, G.float(), got, rng, BT=BT, D=D, KIND=kind, PREC=prec)
    assert int(rng) == 0
    err = float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))
    assert err < 1e-5, err


@triton.jit
def _gated_kernel(a_ptr, f_ptr, b_ptr, out_ptr, rng, BT: tl.constexpr, D: tl.constexpr, STRICT: tl.constexpr,
                  PREC: tl.constexpr, DT: tl.constexpr = tl.float32):
    o_t = tl.arange(0, BT)
    o_d = tl.arange(0, D)
    a = tl.load(a_ptr + o_t[:, None] * D + o_d[None, :])
    f = tl.load(f_ptr + o_t[:, None] * D + o_d[None, :])
    b = tl.load(b_ptr + o_t[:, None] * D + o_d[None, :])
    keep = o_t[:, None] > o_t[None, :] if STRICT else o_t[:, None] >= o_t[None, :]
    p = _masked_gated_dot(a, f, tl.trans(b), -tl.trans(f), keep, (o_t == BT // 2)[:, None], STRICT, BT,
                          DT, tl.float32, PREC, rng, False)
    tl.store(out_ptr + o_t[:, None] * BT + o_t[None, :], p)


@pytest.mark.parametrize("prec", ["ieee", "tf32"])
@pytest.mark.parametrize("strict", [False, True])
def test_masked_gated_dot_split_form(strict, prec):
    # with bf16 operands in tf32 the rebalanced pass forms the diagonal 16 x 16 blocks as
    # one batched product and the rest as another: the same scores (the interpreter
    # multiplies in fp32)
    a, b, f, want = _gated_case(strict)
    BT, D = a.shape
    got = torch.empty(BT, BT)
    rng = torch.zeros(1, dtype=torch.int32)
    _gated_kernel[(1,)](a, f.float(), b, got, rng, BT=BT, D=D, STRICT=strict, PREC=prec)
    assert int(rng) == 0
    err = float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want))
    assert err < 1e-5, err


@pytest.mark.parametrize("strict", [False, True])
def test_masked_gated_dot_split_at_the_input_type(strict):
    # at the input type (the rest of the product of bf16-rounded operands; in fp32 here, as
    # dot_types multiplies them under the interpreter, which cannot multiply bf16 tiles)
    # the diagonal blocks keep fp32's precision: only the entries off them carry bf16's
    # rounding
    a, b, f, want = _gated_case(strict)
    BT, D = a.shape
    got = torch.empty(BT, BT)
    rng = torch.zeros(1, dtype=torch.int32)
    _gated_kernel[(1,)](a, f.float(), b, got, rng, BT=BT, D=D, STRICT=strict, PREC="tf32", DT=tl.bfloat16)
    assert int(rng) == 0
    i, j = torch.arange(BT)[:, None], torch.arange(BT)[None, :]
    same = (i // 16) == (j // 16)
    err = (got.double() - want).abs()
    on = float(err[same].norm() / want[same].norm())
    off = float(err[~same].norm() / want[~same].norm())
    assert on < 1e-5, on
    assert 1e-4 < off < 2e-2, off      # bf16 products there: rounded, not exact


def _gated_case(strict):
    BT, D = 64, 32
    g = torch.Generator().manual_seed(7)
    a = torch.randn(BT, D, generator=g, dtype=torch.float64).bfloat16()
    b = torch.randn(BT, D, generator=g, dtype=torch.float64).bfloat16()
    f = torch.cumsum(-0.2 * torch.rand(BT, D, generator=g, dtype=torch.float64), 0)
    want = torch.einsum("id,jd->ij", a.double() * f.exp(), b.double() * (-f).exp()).tril(-1 if strict else 0)
    return a, b, f, want
