"""Where the forward time goes: device time per launched kernel, ours (several TILING
settings) and optionally FLA, under torch.profiler on the GPU.

    python benchmarks/profile_kernels.py --out $OUT/profile.md \
        [--variants gla,kda] [--configs "schedule=fused;schedule=split,scan_warps=4"] [--fla gated_delta_rule]

A config is a comma-separated list of TILING overrides; configs are separated by ';'.
Each (variant, config) prints the total time (triton do_bench median) and, per kernel,
the number of launches per call and the mean device time per call.  The inputs are
those of benchmarks/fwd_vs_fla.py at the same shape.
"""
import argparse
import importlib
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fwd_vs_fla import (DTYPES, FLA_IMPORT, OURS_NAME, bench_ms, fla_callable, log,  # noqa: E402
                        make_inputs, tiling)

DEFAULT_CONFIGS = "schedule=fused;schedule=split;schedule=split,computed_dots=input"


def parse_config(text):
    out = {}
    for kv in filter(None, (s.strip() for s in text.split(","))):
        key, val = kv.split("=", 1)
        out[key] = int(val) if val.lstrip("-").isdigit() else val
    return out


def device_us(evt):
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(evt, name):
            return getattr(evt, name)
    return 0.0


def profile(call, iters):
    """{kernel name: (launches per call, us per call)} for `iters` calls."""
    from torch.profiler import ProfilerActivity, profile as tprofile
    with torch.no_grad():
        call()
        torch.cuda.synchronize()
        with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                call()
            torch.cuda.synchronize()
    rows = {}
    for evt in prof.key_averages():
        us = device_us(evt)
        if us > 0:
            rows[evt.key] = (evt.count / iters, us / iters)
    return rows


def section(title, total_ms, rows):
    lines = [f"### {title}: {total_ms:.4f} ms (do_bench median)", "",
             "| kernel | launches/call | us/call | share |", "|---|---|---|---|"]
    tot = sum(us for _, us in rows.values()) or 1.0
    for name, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| `{name[:80]}` | {n:g} | {us:.1f} | {100 * us / tot:.0f}% |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None)
    p.add_argument("--variants", default="gla,gated_delta_rule,kda,dplr_delta_rule")
    p.add_argument("--configs", default=DEFAULT_CONFIGS)
    p.add_argument("--fla", default="", help="variants whose FLA forward is profiled too (autotunes: slow)")
    p.add_argument("--shape", default="4,4096,16,128")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--inverse", default="", help="'full_tiles': swap in benchmarks/inverse_bench.py's previous "
                   "inverse before compiling (an experiment; the generated files are not touched)")
    p.add_argument("--budget", type=float, default=1e9, help="stop starting new configs after this many seconds")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")
    B, T, H, D = (int(x) for x in args.shape.split(","))
    dtype = DTYPES[args.dtype]
    t0 = time.time()
    parts = [f"# Forward kernel profile\n\n- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
             f"shape (B, T, H, D) = ({B}, {T}, {H}, {D}) {args.dtype}; {args.iters} profiled calls\n"]

    def write():
        if args.out:
            with open(args.out, "w") as f:
                f.write("\n".join(parts))

    fla_set = {v.strip() for v in args.fla.split(",") if v.strip()}
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        inp = make_inputs(variant, B, T, H, D, dtype, torch.float32, "cuda", seed=0)
        scale = D ** -0.5
        mod = importlib.import_module(f"chunkproof.kernels.{variant}")
        if args.inverse == "full_tiles" and hasattr(mod, "_inv_unit_lower"):
            from inverse_bench import inv_full_tiles
            mod._inv_unit_lower = inv_full_tiles   # resolved from the module's globals at compile time
        fn = getattr(mod, OURS_NAME[variant])
        parts.append(f"## {variant}\n")
        for cfg_text in [c for c in args.configs.split(";") if c.strip()]:
            if time.time() - t0 > args.budget:
                parts.append(f"(budget reached; {variant} [{cfg_text}] not run)\n")
                break
            cfg = parse_config(cfg_text)
            try:
                with tiling(mod, cfg):
                    def call():
                        return fn(*inp.values(), scale=scale, output_final_state=True)
                    t = time.time()
                    rows = profile(call, args.iters)
                    ms = bench_ms(call, 1, 50, 200)
                log(f"[{variant}] ours [{cfg_text}] {ms:.4f} ms ({time.time() - t:.1f} s)")
                parts.append(section(f"ours [{cfg_text}]", ms, rows))
            except Exception as e:  # record and go on: one bad config must not hide the rest
                log(f"[{variant}] ours [{cfg_text}] failed: {type(e).__name__}: {e}")
                parts.append(f"### ours [{cfg_text}]: failed: {type(e).__name__}: {str(e)[:300]}\n")
            write()
        if variant in fla_set:
            try:
                f = fla_callable(variant, {"use_qk_l2norm_in_kernel": False} if variant == "gated_delta_rule" else {})
                t = time.time()
                rows = profile(lambda: f(inp, scale), args.iters)
                ms = bench_ms(lambda: f(inp, scale), 1, 50, 200)
                log(f"[{variant}] FLA {ms:.4f} ms ({time.time() - t:.1f} s incl. autotune)")
                parts.append(section(f"FLA ({FLA_IMPORT[variant][0]})", ms, rows))
            except Exception as e:
                parts.append(f"### FLA: failed: {type(e).__name__}: {str(e)[:300]}\n")
            write()
    write()
    print("\n".join(parts))


if __name__ == "__main__":
    main()
