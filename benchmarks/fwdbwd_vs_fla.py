#!/usr/bin/env python3
"""Forward + backward: chunkproof's generated kernels vs FLA, side by side in one process.

On the H200, one variant per process (a compile or an autotune cannot be interrupted;
the shell's `timeout` bounds each), then the table from what was measured:

    for v in gla gated_delta_rule kda dplr_delta_rule; do
        timeout 200 python benchmarks/fwdbwd_vs_fla.py --variant $v --json-dir $OUT/fwdbwd; done
    python benchmarks/fwdbwd_vs_fla.py --variant gla --no-fla --ours-set grad_warps=4 --tag w4 --json-dir $OUT/fwdbwd
    python benchmarks/fwdbwd_vs_fla.py --table $OUT/fwdbwd --out $OUT/fwdbwd_vs_fla.md

Here, without a GPU (ours only, interpreter, tiny shape):

    TRITON_INTERPRET=1 python benchmarks/fwdbwd_vs_fla.py --variant gla --smoke

Per side: the forward alone (no_grad), and forward + backward (torch.autograd.grad of
(o, final state) with fixed random cotangents into every input and the initial state),
each the median of triton.testing.do_bench; the peak memory of one forward + backward;
and the relative RMS error of o and of every gradient against autograd of a chunk-free
fp64 recurrence on an accuracy slice (all B and H, the first --acc-t steps), so that
bf16 accuracy is compared on the same inputs.  Inputs: benchmarks/fwd_vs_fla.py's."""
import argparse
import glob
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fwd_vs_fla import (DTYPES, FLA_IMPORT, OURS_NAME, bench_ms, first_line, forward_bytes, tiling_value,  # noqa: E402
                        log, make_inputs, rel_rms, slice_inputs)


def ours_fn(variant, settings=()):
    """Our public function, with TILING overrides (KEY=VALUE; JSON values) applied."""
    import importlib
    mod = importlib.import_module(f"chunkproof.kernels.{variant}")
    for kv in settings:
        key, val = kv.split("=", 1)
        if key not in mod.TILING:
            raise SystemExit(f"--ours-set: {key!r} is not a TILING key of {variant} ({', '.join(mod.TILING)})")
        mod.TILING[key] = tiling_value(val)
    return getattr(mod, OURS_NAME[variant])


def fla_fn(variant, force=False):
    import importlib
    if force:
        # FLA 0.6.0 refuses its gated chunk_bwd_dqkwg on Hopper with Triton 3.4 to 3.7.0
        # (its issue #640: wrong results).  --fla-force runs it anyway, to time it; its
        # gradients are then measured like everything else and may be wrong
        import fla.ops.common.chunk_o as co
        co.TRITON_ABOVE_3_7_1 = True
    mod_name, fn_name = FLA_IMPORT[variant]
    fn = getattr(importlib.import_module(mod_name), fn_name)
    extra = {"use_qk_l2norm_in_kernel": False} if variant == "gated_delta_rule" else {}
    return lambda *a, **kw: fn(*a, **kw, **extra)


def fwd_bwd(fn, inp, h0, do, dht, scale):
    leaves = [x.detach().requires_grad_() for x in inp.values()] + [h0.detach().requires_grad_()]
    o, ht = fn(*leaves[:-1], scale=scale, initial_state=leaves[-1], output_final_state=True)
    grads = torch.autograd.grad([o, ht], leaves, [do, dht])
    return o, dict(zip(list(inp) + ["initial_state"], grads))


def reference_grads(variant, inp, h0, do, dht, scale):
    """o and every gradient from the fp64 recurrence the fuzz campaign uses
    (chunkproof.fuzz.reference; DPLR's gate is its g there)."""
    from chunkproof.fuzz.reference import recurrence, reference_grads as oracle
    ref = {("g" if n == "gk" else n): x for n, x in inp.items()}
    o, _ = recurrence(variant, scale=scale, initial_state=h0, **ref)
    grads = oracle(variant, ref, do, dht, scale=scale, initial_state=h0)
    return o, {("gk" if n == "g" and "gk" in inp else n): g for n, g in grads.items()}


def bench_grad_ms(fn, args):
    with torch.enable_grad():
        if args.device != "cuda":       # smoke: one call, wall clock (exercises the path)
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
        import statistics
        import triton.testing
        return statistics.median(triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
                                 for _ in range(args.reps))


def measure_fwd(side, fn, inp, h0, scale, acc, res, args, checkpoint):
    """Phase 1: the forward alone (first call, o's error, time).  Kept even if the
    backward's compile or autotune later runs past the caller's timeout."""
    t0 = time.time()
    r = res.setdefault(side, {})
    try:
        with torch.no_grad():
            fn(*inp.values(), scale=scale, initial_state=h0, output_final_state=True)
            torch.cuda.synchronize() if args.device == "cuda" else None
            r["first_fwd_s"] = round(time.time() - t0, 1)
            sl, h0a, _, _ = acc["args"]
            o, _ = fn(*sl.values(), scale=scale, initial_state=h0a, output_final_state=True)
        r["err"] = {"o": rel_rms(o, acc["o"])}
        r["fwd_ms"] = bench_ms(lambda: fn(*inp.values(), scale=scale, initial_state=h0, output_final_state=True),
                               args.reps, 50, 300) if args.device == "cuda" else None
        log(f"[{args.variant}] {side}: forward {r['fwd_ms']} ms, o error {r['err']['o']:.3e} ({time.time() - t0:.1f} s)")
    except Exception as e:  # one side failing must not hide the other
        r["failed"] = first_line(e)
        log(f"[{args.variant}] {side} forward failed: {r['failed']}")
    checkpoint()


def measure_bwd(side, fn, inp, h0, do, dht, scale, acc, res, args, checkpoint):
    """Phase 2: forward + backward (first call, every gradient's error, time, peak
    memory, a kernel profile)."""
    t0 = time.time()
    r = res.setdefault(side, {})
    if "failed" in r:
        return
    try:
        fwd_bwd(fn, inp, h0, do, dht, scale)
        torch.cuda.synchronize() if args.device == "cuda" else None
        r["first_call_s"] = round(time.time() - t0, 1)
        o, g = fwd_bwd(fn, *acc["args"], scale)     # accuracy first: kept if the timing runs out
        r["err"] = {"o": rel_rms(o, acc["o"]), **{n: rel_rms(x, acc["grads"][n]) for n, x in g.items()}}
        log(f"[{args.variant}] {side}: errors {r['err']}")
        checkpoint()
        r["fwdbwd_ms"] = bench_grad_ms(lambda: fwd_bwd(fn, inp, h0, do, dht, scale), args)
        if args.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fwd_bwd(fn, inp, h0, do, dht, scale)
            r["peak_mib"] = round((torch.cuda.max_memory_allocated() - base) / 2 ** 20, 1)
            from profile_kernels import profile
            def step():   # profile() runs its calls under no_grad
                with torch.enable_grad():
                    fwd_bwd(fn, inp, h0, do, dht, scale)
            rows = profile(step, 3)
            r["kernels_us"] = {k[:60]: round(us, 1) for k, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:12]}
        log(f"[{args.variant}] {side}: timed ({time.time() - t0:.1f} s): {r}")
    except Exception as e:  # one side failing must not hide the other
        r["failed"] = first_line(e)
        log(f"[{args.variant}] {side} failed: {r['failed']}")
    checkpoint()


def run(args):
    B, T, H, D = (int(x) for x in args.shape.split(","))
    dtype = DTYPES[args.dtype]
    inp = make_inputs(args.variant, B, T, H, D, dtype, torch.float32, args.device, seed=0)
    gen = torch.Generator(device="cpu").manual_seed(1)
    h0 = torch.randn(B, H, D, D, generator=gen).to(args.device)
    do = torch.randn(B, T, H, D, generator=gen).to(dtype).to(args.device)
    dht = torch.randn(B, H, D, D, generator=gen).to(args.device)
    scale = D ** -0.5
    t = min(args.acc_t, T)
    sl = slice_inputs(inp, t)
    acc_do = do[:, :t].contiguous()
    t0 = time.time()
    o_ref, g_ref = reference_grads(args.variant, sl, h0, acc_do, dht, scale)
    log(f"[{args.variant}] fp64 reference gradients on T = {t}: {time.time() - t0:.1f} s")
    acc = {"args": (sl, h0, acc_do, dht), "o": o_ref, "grads": g_ref}
    res = {"variant": args.variant, "shape": [B, T, H, D], "dtype": args.dtype, "acc_t": t,
           "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu (interpreter)"}
    res["ours_set"] = list(args.ours_set)
    # the forward's memory floor at the H200's datasheet 4.8 TB/s (fwd_vs_fla.py's convention)
    res["fwd_floor_ms"] = forward_bytes(inp, h0) / 4.8e12 * 1e3
    if args.tag:
        res["variant"] = f"{args.variant} [{args.tag}]"
    # both forwards first, then both backwards: FLA's first forward + backward compiles and
    # autotunes for minutes, and a caller's timeout then still leaves the forward side by side
    sides = [("ours", ours_fn(args.variant, args.ours_set))]
    if not args.no_fla:
        sides.append(("fla", fla_fn(args.variant, args.fla_force)))
    for side, fn in sides:
        measure_fwd(side, fn, inp, h0, scale, acc, res, args, lambda: save(args, res))
    for side, fn in sides:
        measure_bwd(side, fn, inp, h0, do, dht, scale, acc, res, args, lambda: save(args, res))
    return res


def save(args, res):
    if args.json_dir:
        os.makedirs(args.json_dir, exist_ok=True)
        name = args.variant + (f"@{args.tag}" if args.tag else "")
        with open(os.path.join(args.json_dir, f"{name}.json"), "w") as f:
            json.dump(res, f, indent=1)


def table(results):
    lines = ["| variant | ours fwd ms | FLA fwd ms | fwd ratio | fwd floor ms (fraction ours / FLA) "
             "| ours fwd+bwd ms | FLA fwd+bwd ms | fwd+bwd ratio | peak MiB ours / FLA |",
             "|---|---|---|---|---|---|---|---|---|"]
    errs = ["", "| variant | tensor | ours rel RMS | FLA rel RMS |", "|---|---|---|---|"]

    def f(x, d=3):
        return "-" if x is None else f"{x:.{d}f}"
    for r in results:
        o, fl = r.get("ours", {}), r.get("fla", {})
        def ratio(key):
            return o[key] / fl[key] if o.get(key) and fl.get(key) else None
        floor = r.get("fwd_floor_ms")
        frac = "-" if not floor else " / ".join(f(floor / x[key], 2) if x.get(key) else "-"
                                                for x, key in ((o, "fwd_ms"), (fl, "fwd_ms")))
        lines.append(f"| {r['variant']} | {f(o.get('fwd_ms'))} | {f(fl.get('fwd_ms'))} | {f(ratio('fwd_ms'), 2)} | "
                     f"{f(floor)} ({frac}) | {f(o.get('fwdbwd_ms'))} | {f(fl.get('fwdbwd_ms'))} | "
                     f"{f(ratio('fwdbwd_ms'), 2)} | {o.get('peak_mib', '-')} / {fl.get('peak_mib', '-')} |")
        for side in ("ours", "fla"):
            if "failed" in r.get(side, {}):
                lines.append(f"| {r['variant']} {side} failed: {r[side]['failed']} | | | | | | | | |")
        for n in (o.get("err") or fl.get("err") or {}):
            oe, fe = (o.get("err") or {}).get(n), (fl.get("err") or {}).get(n)
            errs.append(f"| {r['variant']} | {'d ' + n if n != 'o' else 'o'} | "
                        f"{'-' if oe is None else f'{oe:.2e}'} | {'-' if fe is None else f'{fe:.2e}'} |")
    kern = ["", "Device time per kernel in one forward + backward (us, torch.profiler, top 12):", ""]
    for r in results:
        for side in ("ours", "fla"):
            ks = r.get(side, {}).get("kernels_us")
            if ks:
                kern.append(f"- {r['variant']} {side}: " + ", ".join(f"`{k}` {v}" for k, v in ks.items()))
    return "\n".join(lines + errs + kern) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant")
    p.add_argument("--shape", default=None, help="B,T,H,D (default 4,4096,16,128; smoke 1,70,2,16)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--acc-t", type=int, default=256)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json-dir", default=None)
    p.add_argument("--tag", default="", help="names this configuration in the JSON file name and the table "
                   "(with --ours-set: several configurations of one variant side by side)")
    p.add_argument("--no-fla", action="store_true")
    p.add_argument("--ours-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a TILING override for our side (JSON value, e.g. grad_warps=4 or "
                        "'grad_groups=[[\"q\",\"k\"],[\"v\",\"g\"]]'); repeatable")
    p.add_argument("--fla-force", action="store_true", help="run FLA's backward where it refuses this Triton "
                   "(Gated DeltaNet on Hopper, Triton < 3.7.1); its gradients are measured and may be wrong")
    p.add_argument("--smoke", action="store_true", help="CPU, TRITON_INTERPRET=1, ours only: accuracy, no timing")
    p.add_argument("--table", default=None, help="a --json-dir to tabulate (no measuring)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.table:
        results = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(args.table, "*.json")))]
        text = "# Forward + backward vs FLA\n\n" + (
            f"- {results[0]['device']}; shape (B, T, H, D) = {tuple(results[0]['shape'])} {results[0]['dtype']}; "
            f"accuracy on the first {results[0]['acc_t']} steps vs autograd of the fp64 recurrence\n\n"
            if results else "") + table(results)
        if args.out:
            open(args.out, "w").write(text)
        print(text)
        return 0
    if not args.variant:
        p.error("--variant or --table is required")
    args.device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        args.no_fla = True
    args.shape = args.shape or ("1,70,2,16" if args.smoke else "4,4096,16,128")
    res = run(args)
    print(table([res]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
