"""The GPU benchmark scripts' CPU paths (interpreter, tiny shapes): they must run, so that
device time is not spent finding a broken script."""
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def bench_path(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))


def test_fwdbwd_smoke_measures_accuracy_and_writes_json(bench_path, tmp_path, capsys):
    import fwdbwd_vs_fla as fb
    rc = fb.main(["--variant", "kda", "--smoke", "--dtype", "fp32", "--shape", "1,20,1,16",
                  "--ours-set", "grad_warps=4", "--tag", "w4", "--json-dir", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "kda@w4.json").read_text())
    assert res["ours_set"] == ["grad_warps=4"] and "failed" not in res["ours"], res
    assert all(e <= 1e-4 for e in res["ours"]["err"].values()), res["ours"]["err"]
    assert res["ours"]["fwdbwd_ms"] > 0          # the timed path ran with gradients
    out = tmp_path / "table.md"
    assert fb.main(["--table", str(tmp_path), "--out", str(out)]) == 0
    assert "| kda [w4] |" in out.read_text()


def test_fwdbwd_rejects_an_unknown_tiling_key(bench_path):
    import fwdbwd_vs_fla as fb
    with pytest.raises(SystemExit, match="not a TILING key"):
        fb.main(["--variant", "gla", "--smoke", "--shape", "1,5,1,16", "--ours-set", "nope=1"])


def test_cpu_grad_accuracy_rows_and_unknown_key(bench_path, capsys):
    import cpu_grad_accuracy as ga
    ga.main(["--variant", "gla", "--shape", "1,20,1,16,16", "--set", "", "--set", "grad_dots=input"])
    ga.main(["--variant", "kda", "--inputs", "bench", "--bench-t", "40", "--shape", "1,20,1,16,16",
             "--tf32", "trunc", "--set", "grad_gprec=tf32x3"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(":")[0] for r in rows] == ["gla defaults", "gla grad_dots=input", "kda grad_gprec=tf32x3"]
    assert all("dg " in r for r in rows) and "dbeta " in rows[-1]
    with pytest.raises(SystemExit, match="not TILING keys"):
        ga.main(["--variant", "gla", "--shape", "1,5,1,16,16", "--set", "nope=1"])


def test_interp_rounding_matches_the_gpu_conversions(bench_path):
    import numpy as np
    import torch
    from interp_rounding import to_bf16_bits, to_tf32
    x = torch.randn(4096, dtype=torch.float32)
    x[:3] = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)])     # ties: to even
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (to_bf16_bits(x.numpy()) == want).all()
    one = np.float32(1 + 2 ** -11)           # half a tf32 unit above 1
    assert to_tf32(np.array([one]), "rna")[0] == np.float32(1 + 2 ** -10)
    assert to_tf32(np.array([one]), "trunc")[0] == np.float32(1.0)
    t = to_tf32(x.numpy(), "trunc")
    assert (np.abs(t) <= np.abs(x.numpy())).all() and (t.view(np.uint32) & 0x1FFF == 0).all()


def test_interp_rounding_patches_casts_and_tf32_products_and_undoes_them(bench_path):
    import torch
    import triton
    import triton.language as tl
    from interp_rounding import emulate

    @triton.jit
    def k(x, y, d, N: tl.constexpr):
        o = tl.arange(0, N)
        a = tl.load(x + o[:, None] * N + o[None, :])
        tl.store(y + o[:, None] * N + o[None, :], a.to(tl.bfloat16).to(tl.float32))
        tl.store(d + o[:, None] * N + o[None, :], tl.dot(a, a, input_precision="tf32"))

    x = torch.randn(16, 16) * (1 + 2 ** -12)
    y, d = torch.empty(16, 16), torch.empty(16, 16)
    undo = emulate("trunc")
    try:
        k[(1,)](x, y, d, N=16)
    finally:
        undo()
    assert torch.equal(y, x.to(torch.bfloat16).float())
    xt = (x.view(torch.int32) & ~0x1FFF).view(torch.float32).double()
    assert torch.allclose(d.double(), xt @ xt, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(d.double(), x.double() @ x.double(), rtol=1e-6, atol=1e-6)
    k[(1,)](x, y, d, N=16)              # undone: the interpreter's own products again
    assert torch.allclose(d.double(), x.double() @ x.double(), rtol=1e-5, atol=1e-5)
