"""Which gradient launch configuration raises the illegal memory access of session 37's
V loops on the GPU: forward + backward of VARIANT at (4, 4096, 16, 128) bf16, once per
configuration, each in its own process (an illegal access ends the CUDA context) with
CUDA_LAUNCH_BLOCKING=1, so the traceback's last launch names the kernel; a configuration that runs is then timed
in a second process without it (do_bench) and its peak memory taken, as `chunkproof
bench` does.  Run it on a
generation whose split K side has the loops (Gated DeltaNet, DeltaNet: commit 3cf69a9's
modules, `git show 3cf69a9:generated_kernels/gated_delta_rule.py`, copied over
generated_kernels/ on the device; main's delta rules have none, docs/measurements.md
"V reductions formed where they are read").

    python benchmarks/gpu_ima_probe.py VARIANT [CONFIG ...]    (default: every CONFIG)

Each configuration's whole output goes to $OUT/probe.VARIANT.CONFIG.log (OUT default
/tmp/out), and gets PROBE_TIMEOUT seconds (default 150).  PROBE_SHAPE=B,T,H,K,V changes the
shape (default 4,4096,16,128,128); PROBE_TIME=0 skips the timing.

CONFIG: asis (autotune as generated), fixed8 / fixed4 / fixed2 (autotune off, the gradient
kernels at 8 / 4 / 2 warps, the loops' V block = grad_BV; FLA keeps some of its Hopper
backward kernels at 2 warps, FLA #988), bk64 / bk128 (as fixed8 with the KB kernel's K
block at 64 / 128 instead of 32: Triton #11366 is an illegal access of a Hopper kernel with
several products over 32-wide K blocks at 4 warps), loopbv (autotune over warps only: the loops' V
block not tuned), half8 (autotune off, 8 warps, the loops at half the V block)."""
import dataclasses
import os
import subprocess
import sys
import time

from chunkproof.bench.isolated import run_isolated, split_tool

CONFIGS = ("asis", "fixed8", "fixed4", "fixed2", "bk64", "bk128", "loopbv", "half8")


def run(variant, config, timed=False):
    import torch
    from chunkproof.bench import calls, inputs, timing
    from chunkproof.fuzz import cases
    m = cases.module(variant)
    stated = m.launch_specs

    def patched(*args, **kwargs):
        spec = stated(*args, **kwargs)
        kernels = {}
        for name, launch in spec.kernels.items():
            if name.startswith("_dgrad") and name != "_dgradv_kernel" and "BV" in launch.tuned:
                if config == "loopbv":
                    launch = dataclasses.replace(launch, tuned=())
                elif config == "half8":
                    launch = dataclasses.replace(launch, constexprs=dict(launch.constexprs,
                                                                         BV=launch.constexprs["BV"] // 2))
            kernels[name] = launch
        return dataclasses.replace(spec, kernels=kernels)
    if config in ("loopbv", "half8"):
        m.launch_specs = patched
    til = {"fixed8": dict(autotune=False, grad_warps=8), "fixed4": dict(autotune=False, grad_warps=4),
           "fixed2": dict(autotune=False, grad_warps=2),
           "bk64": dict(autotune=False, grad_warps=8, grad_BK=64),
           "bk128": dict(autotune=False, grad_warps=8, grad_BK=128),
           "half8": dict(autotune=False, grad_warps=8)}.get(config, {})
    B, T, H, K, V = (int(n) for n in os.environ.get("PROBE_SHAPE", "4,4096,16,128,128").split(","))
    x, h0, do, dht = inputs.bench_case(variant, B, T, H, K, V, seed=0)
    x = {k: t.cuda() for k, t in x.items()}
    h0, do, dht = h0.cuda(), do.cuda(), dht.cuda()
    fn = cases.kernel(variant)
    with m.tiling_override(**til):
        t0 = time.time()
        out = calls.fwd_bwd_state(fn, x, h0, do, dht)
        torch.cuda.synchronize()
        ok = all(bool(torch.isfinite(g).all()) for g in out[2].values())
        first = time.time() - t0
        if not timed:
            print(f"{variant} {config}: first call {first:.1f} s, gradients finite: {ok}", flush=True)
            return
        step = lambda: calls.fwd_bwd_state(fn, x, h0, do, dht)     # noqa: E731
        ms, mib = timing.median_ms(step, True), timing.peak_mib(step)
    print(f"{variant} {config}: gradients finite: {ok}; forward + backward {ms:.3f} ms (median of 3 "
          f"do_bench medians), peak {mib:.1f} MiB over the inputs", flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[2] in ("--one", "--timed"):
        run(sys.argv[1], sys.argv[3], timed=sys.argv[2] == "--timed")
        return
    variant, configs = sys.argv[1], sys.argv[2:] or CONFIGS
    out = os.environ.get("OUT", "/tmp/out")
    os.makedirs(out, exist_ok=True)
    for c in configs:
        tool, bare = split_tool(c)
        t0 = time.time()
        text, rc = run_isolated([sys.executable, __file__, variant, "--one", bare], tool,
                                float(os.environ.get("PROBE_TIMEOUT", 150)))
        if rc is None:
            print(f"{variant} {c}: {text}", flush=True)
            continue
        with open(os.path.join(out, f"probe.{variant}.{c.replace(':', '_')}.log"), "w") as f:
            f.write(text)
        tail = text.strip().splitlines()
        launch = [ln.strip() for ln in tail if "_kernel" in ln and ("spec[" in ln or "launch" in ln)]
        print(f"{variant} {c}: {time.time() - t0:.0f} s, rc={rc}; " + (tail[-1] if rc == 0 else
              f"last launch: {launch[-1] if launch else '?'}; {tail[-1] if tail else ''}"), flush=True)
        if rc == 0 and not tool and os.environ.get("PROBE_TIME", "1") != "0":
            try:
                p = subprocess.run([sys.executable, __file__, variant, "--timed", c], capture_output=True, text=True,
                                   timeout=float(os.environ.get("PROBE_TIMEOUT", 150)))
                last = (p.stdout + p.stderr).strip().splitlines()
                print(f"{variant} {c}: timed rc={p.returncode}; {last[-1] if last else ''}", flush=True)
            except subprocess.TimeoutExpired:
                print(f"{variant} {c}: timing timed out", flush=True)


if __name__ == "__main__":
    main()
