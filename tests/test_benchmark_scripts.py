"""The benchmark library (chunkproof.bench) and the GPU benchmark scripts' CPU paths
(interpreter, tiny shapes): they must run, so that device time is not spent finding a
broken script."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def bench_path(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))


def test_library_imports_without_cuda_or_fla():
    code = ("import sys, chunkproof.bench.args, chunkproof.bench.calls, chunkproof.bench.fla, "
            "chunkproof.bench.inputs, chunkproof.bench.metrics, chunkproof.bench.tiling, chunkproof.bench.timing; "
            "print(sorted(m for m in ('fla', 'triton') if m in sys.modules))")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_tiling_overrides_parse_and_are_restored():
    from chunkproof.bench import tiling
    import chunkproof.kernels.gla as mod
    assert tiling.parse_overrides(["a=8", "b=null", "c=tf32", 'd=[["q", "k"], ["v"]]']) == \
        {"a": 8, "b": None, "c": "tf32", "d": [["q", "k"], ["v"]]}
    assert tiling.parse_overrides("a=1,b=[1, 2],c=x") == {"a": 1, "b": [1, 2], "c": "x"}
    assert tiling.parse_overrides("a=False,b=true,c=None,d=Falsey") == {"a": False, "b": True, "c": None, "d": "Falsey"}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        tiling.parse_overrides(["novalue"])
    before = mod.TILING
    with tiling.applied(mod, {"grad_warps": 4}) as now:
        assert mod.TILING is now and now.grad_warps == 4 and now.BT == before.BT
        with pytest.raises(dataclasses.FrozenInstanceError):
            now.grad_warps = 2                  # what it yields is read-only
    assert mod.TILING is before
    with pytest.raises(RuntimeError):
        with tiling.applied(mod, {"BT": 32}):
            raise RuntimeError
    assert mod.TILING is before
    with pytest.raises(ValueError, match="unknown TILING key"):
        with tiling.applied(mod, {"grad_ksplit": 32}):
            pass
    assert mod.TILING is before


def test_fla_inputs_conventions_and_metrics():
    from chunkproof.bench import inputs, metrics
    x = inputs.fla_inputs("dplr_delta_rule", 1, 9, 2, 16, torch.bfloat16, torch.float32, seed=3)
    assert list(x) == ["q", "k", "v", "a", "b", "gk"]
    assert x["q"].dtype == torch.bfloat16 and x["gk"].dtype == torch.float32
    assert torch.equal(x["b"], -x["a"]) and (x["a"] >= 0).all()
    g = inputs.fla_inputs("gated_delta_rule", 1, 9, 2, 16, seed=3)
    assert list(g) == ["q", "k", "v", "g", "beta"] and g["g"].shape == (1, 9, 2)
    assert torch.allclose(g["k"].float().norm(dim=-1), torch.ones(1, 9, 2), atol=1e-2)
    assert torch.equal(inputs.fla_inputs("kda", 1, 9, 2, 16, seed=3)["q"],
                       inputs.fla_inputs("kda", 1, 9, 2, 16, seed=3)["q"])
    h0, do, dht = inputs.cotangents(1, 9, 2, 16, 16)
    o, ht = metrics.reference_forward("dplr_delta_rule", x, initial_state=h0)
    assert o.shape == (1, 9, 2, 16) and ht.shape == (1, 2, 16, 16)
    _, grads = metrics.reference_backward("dplr_delta_rule", x, h0, do, dht)
    assert set(grads) == {"q", "k", "v", "a", "b", "gk", "initial_state"}
    assert metrics.errors({"o": o}, {"o": o}) == {"o": 0.0}
    with pytest.raises(FloatingPointError, match="o"):
        metrics.errors({"o": o * float("nan")}, {"o": o})


def test_fla_loading_is_lazy_and_reports_what_is_missing(monkeypatch):
    from chunkproof.bench import fla
    monkeypatch.setenv("FLA_DISABLE_BACKEND_DISPATCH", "1")
    assert fla.backend("kda").startswith("triton")
    if not fla.importable():
        assert fla.version() == "not installed"
        with pytest.raises(ImportError):
            fla.load("gla")


def test_vs_fla_smoke_measures_accuracy_and_writes_json(bench_path, tmp_path):
    import vs_fla
    rc = vs_fla.main(["--variant", "kda", "--smoke", "--dtype", "fp32", "--shape", "1,20,1,16",
                      "--set", "grad_warps=4", "--tag", "w4", "--json-dir", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "kda@w4.json").read_text())
    assert res["ours_set"] == ["grad_warps=4"] and "failed" not in res["ours"], res
    assert set(res["ours"]["err"]) == {"o", "final_state", "q", "k", "v", "g", "beta", "initial_state"}
    assert all(e <= 1e-4 for e in res["ours"]["err"].values()), res["ours"]["err"]
    assert res["ours"]["fwdbwd_ms"] > 0          # the timed path ran with gradients
    out = tmp_path / "table.md"
    assert vs_fla.main(["--table", str(tmp_path), "--out", str(out)]) == 0
    assert "| kda [w4] |" in out.read_text() and "| kda [w4] | d beta |" in out.read_text()


def test_vs_fla_smoke_fails_above_its_tolerance(bench_path, tmp_path):
    import vs_fla
    assert vs_fla.main(["--variant", "gla", "--smoke", "--mode", "fwd", "--shape", "1,20,1,16",
                        "--smoke-tol", "1e-9", "--json-dir", str(tmp_path)]) == 1
    res = json.loads((tmp_path / "gla.json").read_text())
    assert set(res["ours"]["err"]) == {"o", "final_state"} and "fwdbwd_ms" not in res["ours"]


def test_vs_fla_tabulates_the_committed_json(bench_path, capsys):
    import vs_fla
    path = os.path.join(ROOT, "benchmarks", "results", "2026-11-30", "fwdbwd")
    assert vs_fla.main(["--table", path]) == 0
    assert "| gla [defaults] | 1.012 |" in capsys.readouterr().out


BAD_INPUT = [
    ("vs_fla.py", ["--variant", "nope", "--smoke"], "unknown variant 'nope'"),
    ("vs_fla.py", ["--variant", "gla", "--smoke", "--shape", "1,2,3"], "is not B,T,H,D"),
    ("vs_fla.py", ["--variant", "gla", "--smoke", "--set", "nope=1"], "'nope'"),
    ("vs_fla.py", ["--variant", "gla", "--smoke", "--set", "grad_warps"], "is not KEY=VALUE"),
    ("vs_fla.py", ["--variant", "gla", "--smoke", "--dtype", "fp8"], "unknown dtype 'fp8'"),
    ("vs_fla.py", ["--table", "/nonexistent/dir"], "is not a directory"),
    ("profile_kernels.py", ["--variants", "gla", "--configs", "nope=1"], "'nope'"),
    ("profile_kernels.py", ["--shape", "4x4096"], "is not B,T,H,D"),
    ("profile_kernels.py", ["--variants", "gated_delta_rule", "--narrow", "hr0;nope"], "no passed tile nope"),
    ("cpu_grad_accuracy.py", ["--variant", "gla", "--set", "nope=1"], "'nope'"),
    ("compile_check.py", ["--variants", "gla", "--set", "nope=1"], "'nope'"),
    ("cpu_grad_accuracy.py", ["--variant", "gla", "--shape", "1,20,1,16"], "is not B,T,H,K,V"),
    ("compile_check.py", ["--variants", "gla,nope"], "unknown variant 'nope'"),
    ("fla_layers_patched.py", ["--layers", "gla,nope"], "unknown layer(s) nope"),
    ("fla_layers_patched.py", ["--shape", "2,64"], "T = 64: FLA's layers take their recurrent path"),
    ("ncu_summary.py", ["README.md"], "not an ncu --csv --page details file"),
    ("cpu_grad_accuracy.py", ["--variant", "rwkv6", "--shape", "1,20,1,16,16", "--precise", "nope"],
     "precise_lines names ['nope']"),
    ("ncu_kernels.py", ["--variant", "nope"], "unknown variant 'nope'"),
    ("same_outputs.py", ["--variant", "gla", "--before", "/nonexistent.py"], "--before /nonexistent.py: no such file"),
    ("same_outputs.py", ["--variant", "nope", "--before", "README.md"], "unknown variant 'nope'"),
    ("cpu_forward_accuracy.py", ["--variant", "kda", "--set", "nope=1"], "'nope'"),
    ("cpu_forward_accuracy.py", ["--variant", "kda", "--shape", "1,20,1"], "is not B,T,H,D"),
    ("host_time.py", ["--variants", "gla,nope"], "unknown variant 'nope'"),
    ("fla_accuracy_cpu.py", ["--variants", "gla,nope"], "--variants: nope"),
    ("fla_accuracy_cpu.py", ["--shape", "1,2,3"], "is not B,T,H,D"),
    ("fla_accuracy_cpu.py", ["--shape", "1,4096,2,64"], "T at most 2048"),
    ("kernel_bytes.py", ["--variant", "gated_delta_rule", "--narrow", "hr0,nope"], "has no passed tile nope"),
    ("kernel_bytes.py", ["--variant", "gla", "--host", "-1"], "--host must be 0 or more, not -1"),
    ("store_growth.py", ["--variant", "gated_delta_rule", "--narrow", "hr0;nope"], "has no passed tile nope"),
    ("store_growth.py", ["--variant", "gla", "--narrow", "vr4", "--shapes", "1,64,1,16,32"],
     "is not B,T,H,K,V with K = V"),
    ("host_time.py", ["--calls", "0"], "--calls must be at least 1, not 0"),
    ("host_time.py", ["--busy-cycles", "-1"], "--busy-cycles must be 0 or more, not -1"),
    ("host_time.py", ["--profile-top", "-2"], "--profile-top must be 0 or more, not -2"),
    ("modules_accuracy.py", ["--a", os.path.join(ROOT, "benchmarks"), "--b", os.path.join(ROOT, "generated_kernels")],
     "holds no _runtime.py"),
    ("modules_accuracy.py", ["--a", os.path.join(ROOT, "generated_kernels"), "--b", os.path.join(ROOT, "generated_kernels"),
                             "--shape", "1,64"], "is not B,T,H,D"),
    ("modules_accuracy.py", ["--a", os.path.join(ROOT, "generated_kernels"), "--b", os.path.join(ROOT, "generated_kernels"),
                             "--variants", "nope"], "has no module nope.py"),
]


def test_host_time_profiles_the_calls_it_is_given(bench_path):
    # --profile-top: the host's most expensive functions over the calls, by their own time
    import host_time

    def busy():
        return sorted(range(20000), key=lambda i: -i)
    text = host_time.profiled(busy, 3, 4)
    assert "function calls" in text and "<lambda>" in text and "tottime" in text, text


def _error_lines(err):
    return [ln for ln in err.splitlines() if "warn" not in ln.lower()]


@pytest.mark.parametrize("script, argv, message", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_code_2(script, argv, message, bench_path, capsys):
    # each script's main() in-process (a new interpreter spends 4 s importing torch);
    # the command line itself: the test below
    import importlib
    try:
        code = importlib.import_module(script[:-3]).main(list(argv))
    except SystemExit as e:     # argparse's usage errors
        code = e.code
    err = capsys.readouterr().err
    lines = _error_lines(err)
    assert code == 2, err
    assert len(lines) == 1 and message in lines[0], err


@pytest.mark.parametrize("script", sorted({s for s, _, _ in BAD_INPUT}))
def test_bad_input_from_the_command_line(script):
    argv, message = next((a, m) for s, a, m in BAD_INPUT if s == script)
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, os.path.join("benchmarks", script), *argv], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    lines = _error_lines(out.stderr)
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and message in lines[0], out.stderr


# which Tiling keys size each kernel (codegen/tiling.py's docs), stated here on their
# own so that the modules' launch_specs are checked against the schema, not themselves
_FAMILY = {"_intra_kernel": "prep", "_intra_wide_kernel": "prep", "_state_kernel": "scan", "_out_kernel": "out", "_dstate_kernel": "scan",
           "_dstate_pre_kernel": "out", "_dstateh_kernel": "scan", "_dgradv_kernel": "grad",
           "_dgradk_kernel": "grad", "_dgradc_kernel": "grad", "_dgradkb_kernel": "grad"}


@pytest.mark.parametrize("dtype, sets", [("bf16", []), ("fp32", []),
                                         ("bf16", ["--set", "scan_warps=4", "--set", "grad_stages=2"])])
def test_compile_check_lists_every_kernels_launch(bench_path, capsys, dtype, sets):
    # --list: every step before compiling (launch_specs, each kernel's signature)
    import importlib
    import compile_check
    from chunkproof.bench import tiling
    from chunkproof.fuzz.cases import VARIANTS
    assert compile_check.main(["--list", "--dtype", dtype, "--K", "128", "--V", "64", *sets]) == 0
    rows = {}
    passes = {}
    for line in capsys.readouterr().out.splitlines():
        v, name, *kv = line.split()
        k, _, p = name.partition("[")             # a guarded kernel's two passes: k[rebal.], k[blocked]
        rows[v, k] = dict(x.split("=", 1) for x in kv)
        passes.setdefault((v, k), []).append((p, rows[v, k].get("BLOCKED")))
    assert {v for v, _ in rows} == set(VARIANTS)
    assert any(len(ps) == 2 for ps in passes.values())
    for ps in passes.values():
        assert ps in ([("", None)], [("rebal.]", "False"), ("blocked]", "True")]), ps
    for v in VARIANTS:
        mod = importlib.import_module(f"chunkproof.kernels.{v}")
        with tiling.applied(mod, tiling.parse_overrides(sets[1::2])) as til:
            til = til.for_inputs(dtype == "fp32", False)
        kernels = {k for k in vars(mod) if k.endswith("_kernel")}
        assert {k for w, k in rows if w == v} == kernels
        r = rows[v, "_recurrent_kernel"]      # the recurrent form: its own launch (recurrent_spec)
        assert (r["num_warps"], r["K"], r["V"], r["BK"]) == ("4", "128", "64", "128"), v
        for k in kernels - {"_recurrent_kernel"}:
            r, family = rows[v, k], _FAMILY[k]
            assert (int(r["num_warps"]), int(r["num_stages"])) == \
                (getattr(til, family + "_warps"), getattr(til, family + "_stages")), (v, k)
            assert (int(r["BT"]), r["K"], r["V"]) == (til.BT, "128", "64"), (v, k)
            assert r["DT"] == ("fp32" if dtype == "fp32" else "bf16"), (v, k)


def test_cpu_grad_accuracy_rows(bench_path, capsys):
    import cpu_grad_accuracy as ga
    assert ga.main(["--variant", "gla", "--shape", "1,20,1,16,16", "--set", "", "--set", "grad_warps=4"]) == 0
    assert ga.main(["--variant", "kda", "--inputs", "bench", "--bench-t", "40", "--shape", "1,20,1,16,16",
                    "--tf32", "trunc", "--set", "grad_warps=4,BT=32"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(":")[0] for r in rows] == ["gla defaults", "gla grad_warps=4", "kda grad_warps=4,BT=32"]
    assert all("dg " in r for r in rows) and "dbeta " in rows[-1]


def test_cpu_grad_accuracy_rows_of_other_precise_lines(bench_path, capsys):
    # a bundled variant that is not one of FLA's four, printed again with other precise
    # lines: its planned lines give its default row's errors (same kernel code)
    import cpu_grad_accuracy as ga
    from chunkproof.codegen import gen, precision
    rec = precision.read_record(gen.OUT_DIR, "simple_gla")
    planned = rec["choice"]["precise_lines"]
    other = next(n for n in rec["gated_lines"] if n not in planned)
    assert ga.main(["--variant", "simple_gla", "--inputs", "bench", "--bench-t", "20", "--shape", "1,20,1,16,16",
                    "--set", "", "--precise", ",".join(planned), "--precise", other]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(":")[0] for r in rows] == ["simple_gla defaults",
                                               f"simple_gla precise lines {','.join(planned) or '(none)'}",
                                               f"simple_gla precise lines {other}"]
    assert rows[0].split(":")[1] == rows[1].split(":")[1]


def test_cpu_forward_accuracy_rows(bench_path, capsys, monkeypatch):
    # one row per --set: the planned types and the forward's families at tf32 differ in
    # KDA's errors (its final state's; o agrees to four digits at this shape since its
    # C x C tiles are stored in bf16)
    import cpu_forward_accuracy as F
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert F.main(["--variant", "kda", "--shape", "1,40,1,16", "--bench-t", "40", "--set", "",
                   "--set", "prep_dots=tf32,scan_dots=tf32,out_dots=tf32"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("kda ")]
    assert [r.split(":")[0] for r in rows] == ["kda planned", "kda prep_dots=tf32,scan_dots=tf32,out_dots=tf32"]
    errs = [float(r.split(" o ")[1].split()[0]) for r in rows]
    finals = [float(r.split("final state ")[1].split()[0]) for r in rows]
    assert all(0 < e < 0.05 for e in errs + finals) and (errs[0], finals[0]) != (errs[1], finals[1])


def test_cpu_grad_accuracy_bench_inputs_are_the_benchmarks_slice():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        from cpu_grad_accuracy import bench_case
    finally:
        sys.path.pop(0)
    from chunkproof.bench import inputs
    x, h0, do, dht = bench_case("gla", 1, 8, 2, 16, 16, seed=0, full_t=30)
    full = inputs.fla_inputs("gla", 1, 30, 2, 16)
    assert all(torch.equal(x[n], full[n][:, :8]) for n in full)
    assert torch.equal(h0, inputs.cotangents(1, 30, 2, 16, 16)[0]) and do.shape == (1, 8, 2, 16)


def test_shell_scripts_parse_and_name_existing_entry_points():
    for sh in ("gpu_run.sh", "gpu_campaign.sh", "gpu_varlen.sh", "gpu_profile.sh", "gpu_final.sh", "sweep.sh",
               "tcache.sh", "gpu_ncu.sh"):
        path = os.path.join(ROOT, "benchmarks", sh)
        assert subprocess.run(["bash", "-n", path]).returncode == 0, sh
        text = open(path).read()
        for name in ("fwd_vs_fla.py", "fwdbwd_vs_fla.py", "--ours-set", "benchmarks/sweeps/"):
            assert name not in text, (sh, name)
        for word in text.split():
            if word.startswith("benchmarks/") and word.endswith((".py", ".sh")):
                assert os.path.exists(os.path.join(ROOT, word.strip('"')))


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


def test_varlen_vs_fixed_runs_under_the_interpreter(tmp_path):
    # the GPU benchmark of packed sequences against a fixed-length batch, at a tiny shape
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "varlen_vs_fixed.py"), "--device", "cpu",
                        "--variant", "retention", "--shape", "3,20,1,16", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.load(open(tmp_path / "varlen.json"))["rows"]
    assert [(x["layout"], x["mode"]) for x in rows] == [(lay, m) for lay in ("fixed", "equal", "uneven")
                                                        for m in ("fwd", "fwd+bwd")]
    assert rows[2]["max_abs_diff"] == 0.0 and rows[4]["lens"] == [5, 15, 40]


def test_recurrent_vs_fla_runs_under_the_interpreter(tmp_path):
    # the GPU benchmark of the recurrent forms, at a tiny shape: both of ours gated
    # against the fp64 recurrence and timed (FLA is GPU only)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "recurrent_vs_fla.py"), "--device", "cpu",
                        "--variant", "gla,rwkv6", "--shape", "2,3,2,16", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.load(open(tmp_path / "recurrent.json"))["rows"]
    assert [(x["variant"], x["side"]) for x in rows] == [(v, s) for v in ("gla", "rwkv6")
                                                        for s in ("ours recurrent", "ours chunk")]
    assert all(x["ms"] is not None and x["err"] < 5e-2 for x in rows)
    assert rows[0]["func"] == "fused_recurrent_gla" and rows[3]["func"] == "chunk_rwkv6"


def test_fla_layers_patch_puts_ours_in_and_takes_it_out(bench_path):
    # the layer check patches every chunk_<op> the layer's module imports (here a
    # stand-in module: FLA's layers run on a GPU only), counts the calls of ours, and
    # restores FLA's afterwards
    import types
    import fla_layers_patched as L
    from chunkproof.fuzz.cases import make_inputs
    fla_op = object()
    mod = types.ModuleType("stand_in_layer")
    mod.chunk_gla, mod.fused_recurrent_gla, mod.other = fla_op, fla_op, fla_op
    calls = {}
    with L.patched(mod, calls) as names:
        assert names == ["chunk_gla"] and mod.fused_recurrent_gla is fla_op
        args, _, _ = make_inputs("gla", 1, 8, 1, 16, 16, seed=0)
        o, _ = mod.chunk_gla(*args)
        assert o.shape == args[2].shape
    assert calls == {"chunk_gla": 1} and mod.chunk_gla is fla_op


def test_tcache_restores_the_committed_autotune_results_and_packs_flas(tmp_path):
    # benchmarks/autotune_cache/ (FLA's autotune results from an H200 run) goes into the
    # Triton cache a GPU script runs with; the pack writes FLA's results back, not ours
    import shutil
    cache, work = tmp_path / "tcache", tmp_path / "work"      # work: a checkout without .tcache/
    shutil.copytree(os.path.join(ROOT, "benchmarks", "autotune_cache"), work / "benchmarks" / "autotune_cache")
    sh = os.path.join(ROOT, "benchmarks", "tcache.sh")
    env = dict(os.environ, TCACHE_DIR=str(cache))
    r = subprocess.run(["bash", "-c", f". {sh} && tcache_restore && echo $TRITON_CACHE_DIR"],
                       cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    committed = sorted(p.relative_to(os.path.join(ROOT, "benchmarks", "autotune_cache")).as_posix()
                       for p in __import__("pathlib").Path(ROOT, "benchmarks", "autotune_cache").rglob("*.json"))
    restored = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*.autotune.json"))
    assert committed and restored == committed and r.stdout.split()[-1] == str(cache)
    for name in restored:
        rec = json.load(open(cache / name))
        assert rec["key"] and rec["configs_timings"] and not os.path.basename(name).startswith("_")
    ours = cache / "OURS" / "_dgradv_kernel.autotune.json"
    ours.parent.mkdir()
    ours.write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run(["bash", "-c", f". {sh} && tcache_pack {out}"], cwd=work, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    packed = subprocess.run(["tar", "-tf", str(out / "autotune.tar")], capture_output=True, text=True).stdout.split()
    assert sorted(p[2:] for p in packed) == committed and (out / "tcache.partaa").exists()


def test_kernel_bytes_records_every_launch_without_running_one(bench_path, monkeypatch):
    # the kernels are stood in for by recorders (nothing runs), and put back afterwards
    import kernel_bytes as KB
    from chunkproof.fuzz.cases import module
    m = module("gla")
    before = m._dgradv_kernel
    log = KB.launches("gla", (1, 70, 2, 16))
    assert m._dgradv_kernel is before
    per = KB.bytes_per_kernel(log)
    assert set(per) == {"_intra_kernel", "_state_kernel", "_out_kernel", "_dstate_kernel", "_dgradv_kernel",
                        "_dgradk_kernel"}
    q_bytes = 1 * 70 * 2 * 16 * 2
    assert all(b >= q_bytes for _, b in per.values())
    # a guarded kernel's second pass (BLOCKED) is a launch that adds no bytes (GLA's
    # intra kernel, which forms the chunk's gated Q K^T; its output kernel is unguarded)
    assert per["_intra_kernel"][0] == 2 and any(blocked for name, _, _, blocked in log if name == "_intra_kernel")
    assert per["_out_kernel"][0] == 1
    times = KB.profile_times(os.path.join(ROOT, "benchmarks", "results", "2026-12-03", "two_pass", "profile.md"),
                             "gla", "grad_BV=128")
    assert times["_dgradk_kernel"] == 1142.6 and "| all |" in KB.table(per, times)


@pytest.mark.parametrize("variant, dh_at_k, vr0_passed", [("gla", True, False), ("gated_delta_rule", False, False),
                                                          ("rwkv6", True, False), ("kda", False, True)])
def test_backward_drops_each_buffer_after_its_last_reader(bench_path, variant, dh_at_k, vr0_passed):
    # peak memory: the host drops dh after the last kernel reading it and allocates each
    # gradient just before the kernel writing it.  GLA's and RWKV-6's K kernel reads dh in
    # its V loop (Variant.loop_reductions: V delta S^T); Gated DeltaNet's C kernel reads it
    # last, and its KB kernel's dq and dk are allocated after it; KDA's V kernel reads it
    # last.  The allocations are counted with the kernels stood in for
    # (kernel_bytes.peak_memory, which reproduced the H200's peaks of 2026-12-04: 2065 MiB
    # for Gated DeltaNet, 1488 for RWKV-6)
    import kernel_bytes as KB
    base, peak, alive = KB.peak_memory(variant, (1, 70, 2, 16))
    seen = KB.peak_memory.last.alive_at
    assert base > 0 and peak > 0 and alive
    assert "dh" in seen["d_v"]
    assert all(("dh" in seen[g]) == dh_at_k for g in ("d_q", "d_k")), {g: seen[g] for g in ("d_q", "d_k")}
    # a V reduction the K side forms itself (vr0, delta O S_[t-1]) has no buffer; a
    # vector-gated split K side (KDA) reads it from one
    assert any("r_vr0" in names for names in seen.values()) == vr0_passed


@pytest.mark.parametrize("variant, dropped, read_last", [("gated_delta_rule", ("Wl", "U"), "At"),
                                                         ("kda", ("W", "U", "hs0"), "At"), ("gla", ("ch0",), "Gamma")])
def test_the_backward_drops_the_forwards_tiles_after_their_last_reader(bench_path, variant, dropped, read_last):
    # the kept forward tiles no longer live until the backward returns: Gated DeltaNet's
    # and KDA's W and U (read by the V kernel last) are gone when the K side allocates dq
    # and dk, the inverse At (read by the KB kernel) is not; GLA's ch0, read by the
    # output kernel alone, is not kept at all
    import kernel_bytes as KB
    KB.peak_memory(variant, (1, 70, 2, 16))
    seen = KB.peak_memory.last.alive_at
    assert read_last in seen["d_q"] and not set(dropped) & seen["d_q"], seen["d_q"]
    assert not set(dropped) & seen["d_k"]


@pytest.mark.parametrize("variant, freed", [("gla", "hs0"), ("gated_delta_rule", "At"), ("kda", "hs0")])
def test_a_forward_without_autograd_frees_its_tiles_before_the_output(bench_path, variant, freed):
    # o is allocated after the state scan, and a forward that keeps nothing for the
    # backward frees each tile once its last forward reader has run (GLA's scan-only
    # hs0, the delta rules' inverse At, KDA's hs0 read by the scan and the backward);
    # under autograd the kept ones are still alive when o is allocated
    import kernel_bytes as KB
    _, fwd_peak, _ = KB.peak_memory(variant, (1, 70, 2, 16), forward_only=True)
    assert freed not in KB.peak_memory.last.alive_at["o"]
    _, both_peak, _ = KB.peak_memory(variant, (1, 70, 2, 16))
    assert fwd_peak <= both_peak
    if variant != "gla":        # GLA's hs0 is read by the scan alone, its ch0 by the output kernel: none kept
        assert freed in KB.peak_memory.last.alive_at["o"] and fwd_peak < both_peak


def test_kernel_bytes_counts_a_narrowed_tile_at_the_inputs_width(bench_path):
    # --narrow: the module printed with Gated DeltaNet's hr0 (delta U) in bf16, whose
    # buffer is then half the fp32 one, and the peak lower by at least that
    import kernel_bytes as KB

    def hr0_bytes(narrow):
        _, peak, _ = KB.peak_memory("gated_delta_rule", (1, 70, 2, 16), narrow=narrow)
        return peak, KB.peak_memory.last.sizes["r_hr0"]
    peak, hr0 = hr0_bytes(())
    peak_n, hr0_n = hr0_bytes(("hr0",))
    assert hr0_n * 2 == hr0 and peak_n <= peak - hr0_n, (peak, hr0, peak_n, hr0_n)


def test_kernel_bytes_times_the_host_of_a_stood_in_call(bench_path):
    # --host: the call with every kernel stood in, as many launches as launches() records
    import kernel_bytes as KB
    ms, n = KB.host_ms("gla", (1, 70, 2, 16), 3)
    assert ms > 0 and n == len(KB.launches("gla", (1, 70, 2, 16)))


def test_store_growth_prints_each_tensor_over_the_recorded(bench_path, capsys):
    # the planner's measure of a narrowed tile against the record, per tensor and shape
    import store_growth
    assert store_growth.main(["--variant", "delta_rule", "--narrow", "hr0", "--shapes", "1,64,1,16,16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("delta_rule, as recorded") and out[1].startswith("hr0 narrowed, over as recorded: ")
    growth = {kv.rsplit(" ", 1)[0]: float(kv.rsplit(" ", 1)[1]) for kv in out[1].split(": ", 1)[1].split(", ")}
    assert "1,64,1,16,16 dv" in growth and all(0.5 < g < 3 for g in growth.values()), growth


def test_ncu_summary_tabulates_each_launch_of_ours(bench_path, tmp_path):
    # the committed Nsight Compute CSV of KDA's forward (H200, 2026-12-04): one row per
    # launch of ours in launch order, PyTorch's fill left out, durations in us
    import ncu_summary
    path = os.path.join(ROOT, "benchmarks", "results", "2026-12-04", "ncu_kda", "ncu_kda_fwd.csv")
    rows = [ln for ln in ncu_summary.table(path).splitlines() if ln.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["_intra_kernel", "_intra_kernel", "_state_kernel", "_out_kernel",
                                               "_out_kernel"]
    assert rows[2].split(" | ")[3] == "385.7"


def test_fla_layers_runs_merge_into_one_table(bench_path, tmp_path, capsys):
    # gpu_final.sh runs each layer in its own process; a run stopped before its layer
    # ended left no JSON and is a row saying so, and the merged run is not all ok
    import fla_layers_patched as L
    from chunkproof.bench import args as A
    row = dict(layer="gla", ok=True, calls={"chunk_gla": 1}, reference="FLA bf16", worst="dx",
               ours={"dx": 4.9e-3}, fla={})
    A.write_rows(str(tmp_path / "gla"), "fla_layers", {"device": "stand-in"}, [row], L.table([row]))
    (tmp_path / "kda").mkdir()
    code = L.main(["--merge", str(tmp_path / "gla"), str(tmp_path / "kda"), "--out", str(tmp_path / "all")])
    merged = json.loads((tmp_path / "all" / "fla_layers.json").read_text())
    assert code == 1 and [r["layer"] for r in merged["rows"]] == ["gla", "kda"]
    assert merged["meta"] == {"device": "stand-in"} and "no result" in merged["rows"][1]["note"]
    assert "| gla |" in capsys.readouterr().out
    (tmp_path / "kda" / "fla_layers.json").write_text("{broken")
    assert L.main(["--merge", str(tmp_path / "kda")]) == 2


def test_same_outputs_names_the_tensors_a_changed_module_computes_otherwise(bench_path, tmp_path, capsys):
    import importlib
    import same_outputs
    src = open(importlib.import_module("chunkproof.kernels.retention").__file__).read()
    changed = src.replace("b_O.to(o.dtype.element_ty)", "(b_O * 1.5).to(o.dtype.element_ty)")
    assert changed != src
    (tmp_path / "retention.py").write_text(changed)
    argv = ["--variant", "retention", "--dtypes", "fp32", "--shape", "1,40,1,16", "--before"]
    assert same_outputs.main(argv + [str(tmp_path / "retention.py")]) == 1
    out = capsys.readouterr().out
    assert "differ: o" in out and "final state" not in out
    (tmp_path / "same.py").write_text(src)
    assert same_outputs.main(argv + [str(tmp_path / "same.py")]) == 0


def _recorded_scan_mix():
    """The probe's plain mix with the three scan products' types the planner recorded for
    Gated DeltaNet: a product of two computed tiles (P1) in tf32 from reverse_dots = tf32
    on, one with a tile read from memory (P2: dS_prev#1, P3: dS_prev#2) only at
    tf32_mixed or where named a mixed line (codegen/precision.py)."""
    with open(os.path.join(ROOT, "generated_kernels", "gated_delta_rule.precision.json")) as f:
        choice = json.load(f)["choice"]
    from scan_mix_probe import MIXES
    fam, mixed = choice["reverse_dots"], set(choice["mixed_lines"])

    def read_side(n):
        return "tf32" if fam == "tf32_mixed" or (fam == "tf32" and {"dS_prev", n} & mixed) else "bf16"
    types = ("tf32" if fam in ("tf32", "tf32_mixed") else "bf16", read_side("dS_prev#1"), read_side("dS_prev#2"))
    return next(m for m, t in MIXES.items() if t == types)


def test_scan_mix_probe_copies_compute_what_the_kernel_does(tmp_path, bench_path):
    # the probe rewrites Gated DeltaNet's generated reverse scan by hand: a regenerated
    # module it no longer matches stops it (SystemExit), and each rewritten copy computes
    # the gradients of the copy with the same product types (same errors under the CPU
    # emulation), so that its GPU timings compare like with like
    out = tmp_path / "mix.md"
    env = dict(os.environ, TRITON_INTERPRET="1")
    rec = _recorded_scan_mix()
    mixes = ["m0", "m1", "m4", "m9", "m13", "m16", "m10", "shipped", "lazy"] + ([rec] if rec not in ("m0", "m1", "m4") else [])
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "scan_mix_probe.py"), "--out", str(out),
                        "--cpu", "1,40,1,32", "--mixes", ",".join(mixes)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {ln.split("|")[1].strip(): ln.split("|")[3] for ln in out.read_text().splitlines()
            if ln.startswith("| ") and not ln.startswith("| mix")}
    errs = {m: {kv.split()[0]: float(kv.split()[1]) for kv in text.split(",")} for m, text in rows.items()}
    assert set(errs) == set(mixes)
    # the module as generated multiplies the scan's products in its recorded types (in K
    # pieces); "lazy" only moves its loads
    for same, ref in (("m9", "m0"), ("m13", "m0"), ("m16", "m0"), ("m10", "m1"), ("shipped", rec),
                      ("lazy", "shipped")):
        for n, e in errs[ref].items():
            assert errs[same][n] == pytest.approx(e, rel=0.05), (same, n)
    assert errs["m1"]["dinitial_state"] > errs["m0"]["dinitial_state"]      # the bf16 scan loses dh0


def test_profile_kernels_says_what_autotune_picked(bench_path):
    # each kernel's autotuned pick per key, read from the runtime's autotuners (here one
    # made by hand: the interpreter does not autotune)
    import triton

    import profile_kernels
    from chunkproof.kernels import _runtime as rt
    import chunkproof.kernels.gated_delta_rule as mod
    assert profile_kernels.autotune_picks(mod) == ""
    configs = (((("BV", 64),), 8, 2), ((("BV", 32),), 4, 2))
    tuner = rt._autotuned(mod._state_kernel, configs)
    try:
        tuner.cache[(16, 128, 128, 64, 32)] = triton.Config({"BV": 32}, num_warps=4, num_stages=2)
        text = profile_kernels.autotune_picks(mod)
        assert "`_state_kernel` key (16, 128, 128, 64, 32): BV=32 warps 4 stages 2" in text, text
        import chunkproof.kernels.gla as other
        assert profile_kernels.autotune_picks(other) == ""
    finally:
        del rt._AUTOTUNED[(mod._state_kernel, configs, ())]


def test_profile_kernels_names_every_error_as_the_gate_measures_it(bench_path):
    # --narrow's rows carry every tensor's error against the fp64 recurrence on the first
    # steps, worst first; a module printed with δU's intra part (hr0) in bf16 is measured
    # the same way
    import torch

    import profile_kernels
    from chunkproof.bench import calls, inputs, printed
    x = inputs.bench_inputs("delta_rule", 1, 40, 1, 16, torch.bfloat16, torch.float32, "cpu", seed=0)
    h0, do, dht = inputs.cotangents(1, 40, 1, 16, 16, torch.bfloat16, "cpu")
    for fn in (calls.ours("delta_rule")[1], printed.narrowed("delta_rule", ["hr0"])[1]):
        for mode, names in (("fwd", ("o", "final_state")), ("fwd+bwd", None)):
            errs = profile_kernels.errors("delta_rule", fn, mode, x, h0, do, dht, 0.25)
            name = max(errs, key=errs.get)
            assert (names is None or name in names) and 0 < errs[name] < 5e-2, (mode, errs)
            assert (mode == "fwd") == ("dq" not in errs), errs
            line = profile_kernels.error_line("ours", errs)
            assert line.startswith(f"- ours: {name} ") and line.count(",") == len(errs) - 1, line
