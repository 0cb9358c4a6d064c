"""The chunk inverse (I + L)^{-1} alone: the generated kernels' `_inv_unit_lower` (the
stacked 16 x 16 substitution; "stacked" in results/logs/inverse_bench.log, measured before
it moved into the kernels) against other forms, on N random 64 x 64 strictly lower L.  Accuracy vs torch fp64 and, on a
GPU, time per launch (one program per matrix, like the intra kernel).

    python benchmarks/inverse_bench.py [--n 4096] [--prec tf32|ieee]   (CPU: TRITON_INTERPRET=1, small n)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not __import__("torch").cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from chunkproof.kernels._runtime import _inv_unit_lower as inv_current  # noqa: E402


@triton.jit
def inv_full_tiles(x, m_strict, m_eye, BT: tl.constexpr, IPREC: tl.constexpr):
    # the previous form: the same 16-row substitution, but every step a full BT x BT dot
    # (1.7x slower on the H200 than the stacked 16 x 16 blocks the kernels use now)
    o_t = tl.arange(0, BT)
    same = (o_t[:, None] // 16) == (o_t[None, :] // 16)
    b_l = tl.where(m_strict, x, 0.)
    b_ld = tl.where(same, b_l, 0.)
    b_eye = tl.where(m_eye, 1., 0.)
    b_y = b_eye
    for j in range(1, 16):
        sel = ((o_t % 16) == j)[:, None]
        b_y = tl.where(sel, b_y - tl.dot(tl.where(sel, b_ld, 0.), b_y, input_precision=IPREC), b_y)
    b_m = -tl.dot(b_y, tl.where(same, 0., b_l), input_precision=IPREC)
    b_inv = b_eye
    for _ in tl.static_range(1, BT // 16):
        b_inv = b_eye + tl.dot(b_m, b_inv, input_precision=IPREC)
    return tl.dot(b_inv, b_y, input_precision=IPREC)


@triton.jit
def _kernel(X, Y, BT: tl.constexpr, IPREC: tl.constexpr, MODE: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    o_t = tl.arange(0, BT)
    off = i * BT * BT + o_t[:, None] * BT + o_t[None, :]
    x = tl.load(X + off)
    m_strict = o_t[:, None] > o_t[None, :]
    m_eye = o_t[:, None] == o_t[None, :]
    if MODE == 0:
        r = x
    elif MODE == 1:
        r = inv_current(x, m_strict, m_eye, BT, IPREC)
    else:
        r = inv_full_tiles(x, m_strict, m_eye, BT, IPREC)
    tl.store(Y + off, r)


MODES = {"copy": 0, "current": 1, "full_tiles": 2}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--prec", default="tf32", choices=["tf32", "ieee", "tf32x3"])
    p.add_argument("--warps", type=int, default=8)
    args = p.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    n = args.n or (4096 if dev == "cuda" else 3)
    prec = args.prec if dev == "cuda" else "ieee"
    BT = 64
    g = torch.Generator().manual_seed(0)
    # normalised keys, beta in (0, 1): the delta rule's I + beta K K^T (strict lower)
    k = torch.nn.functional.normalize(torch.randn(n, BT, 128, generator=g, dtype=torch.float64), dim=-1)
    k[:, 20:40] = k[:, 20:21]      # a run of repeated keys: the hard case for cancellation
    beta = torch.rand(n, BT, 1, generator=g, dtype=torch.float64)
    L = torch.tril(beta * (k @ k.transpose(1, 2)), -1)
    eye = torch.eye(BT, dtype=torch.float64)
    ref = torch.linalg.inv(eye + L)
    X = (eye + L).to(torch.float32).to(dev).contiguous()
    for name, mode in MODES.items():
        Y = torch.empty_like(X)
        _kernel[(n,)](X, Y, BT, prec, mode, num_warps=args.warps)
        err = ((Y.double().cpu() - ref).norm() / ref.norm()).item() if mode else float("nan")
        line = f"{name:8s} rel err {err:.2e}"
        if dev == "cuda":
            ms = triton.testing.do_bench(lambda: _kernel[(n,)](X, Y, BT, prec, mode, num_warps=args.warps),
                                         warmup=50, rep=300, return_mode="median")
            line += f"  {ms * 1e3:.1f} us for {n} matrices ({prec}, {args.warps} warps)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
