"""chunkproof.fuzz.interp_bf16: bf16 tiles in the interpreter computed as on the GPU (the
plain interpreter applies numpy to their bit patterns), and chunkproof.bench.fla_interp,
which runs FLA's kernels under it."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from chunkproof.fuzz import interp_bf16

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@triton.jit
def _ops(x, y, prod, scaled, mul, rsum, csum, rmax, less, N: tl.constexpr):
    o = tl.arange(0, N)
    p = o[:, None] * N + o[None, :]
    a = tl.load(x + p)
    b = tl.load(y + p)
    tl.store(prod + p, tl.dot(a, b))
    tl.store(scaled + p, (a * 0.5).to(a.dtype))
    tl.store(mul + p, a * b)
    tl.store(rsum + o, tl.sum(a, axis=1))
    tl.store(csum + p, tl.cumsum(a, axis=0))
    tl.store(rmax + o, tl.max(a, axis=1))
    tl.store(less + p, (a < b).to(tl.int32))


def _run(x, y):
    n = x.shape[0]
    out = dict(prod=torch.empty(n, n), scaled=torch.empty(n, n, dtype=torch.bfloat16),
               mul=torch.empty(n, n, dtype=torch.bfloat16), rsum=torch.empty(n, dtype=torch.bfloat16),
               csum=torch.empty(n, n, dtype=torch.bfloat16), rmax=torch.empty(n, dtype=torch.bfloat16),
               less=torch.empty(n, n, dtype=torch.int32))
    _ops[(1,)](x, y, *out.values(), N=n)
    return out


def test_bf16_tiles_compute_as_on_the_gpu_and_the_patch_is_undone():
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(16, 16, generator=g).bfloat16() for _ in range(2))
    xf, yf = x.float(), y.float()
    undo = interp_bf16.patch()
    try:
        got = _run(x, y)
    finally:
        undo()
    assert torch.allclose(got["prod"], xf @ yf, rtol=1e-5, atol=1e-5)
    assert torch.equal(got["scaled"].float(), xf * 0.5)
    assert torch.equal(got["mul"], (xf * yf).bfloat16())          # one op: exact, then rounded
    assert torch.equal(got["less"], (xf < yf).int())
    assert torch.equal(got["rmax"].float(), xf.max(1).values)
    # sums: each partial rounded to bf16, so within a few bf16 units of the exact sum
    unit = 2 ** -7 * xf.abs().sum(1).max()
    assert (got["rsum"].float() - xf.sum(1)).abs().max() <= 4 * unit
    assert (got["csum"].float() - xf.cumsum(0)).abs().max() <= 16 * unit
    assert "get_bf16" not in vars(triton.runtime.interpreter.InterpreterBuilder)
    with pytest.raises(Exception):      # the interpreter's own behaviour is back: no bf16 constants
        _run(x, y)


def test_the_plain_interpreter_gets_bf16_products_wrong():
    # why the patch exists: without it a bf16 product multiplies bit patterns
    @triton.jit
    def dot(x, y, out, N: tl.constexpr):
        o = tl.arange(0, N)
        p = o[:, None] * N + o[None, :]
        tl.store(out + p, tl.dot(tl.load(x + p), tl.load(y + p)))
    x = torch.randn(16, 16).bfloat16()
    out = torch.empty(16, 16)
    dot[(1,)](x, x, out, N=16)
    assert not torch.allclose(out, x.float() @ x.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(importlib.util.find_spec("fla") is None, reason="FLA is not installed (pip install fla-core)")
def test_flas_kernels_run_under_the_interpreter_within_bf16_tolerance():
    # GLA's forward + backward at a tiny shape: FLA's errors against the fp64 recurrence
    # within the gate's bf16 tolerance (unpatched, its outputs are around 1e10)
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import fla_accuracy_cpu as f; "
            "o, t = f.compare('gla', 1, 64, 1, 32, log=lambda m: None); "
            "print(max(t.values())); print(sorted(o) == sorted(t))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TRITON_INTERPRET="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    worst, same = out.stdout.split()[-2:]
    assert float(worst) < 2e-2 and same == "True", out.stdout
