#!/usr/bin/env python3
"""Ours vs FLA, side by side in one process: forward, and forward + backward.

One variant (and one TILING configuration of ours) per process: a compile or an
autotune cannot be interrupted, so the caller's `timeout` bounds each process, and the
JSON is rewritten after every phase, so a process cut short keeps what it measured.
On the H200 (benchmarks/gpu_run.sh and sweep.sh run it so):

    python benchmarks/vs_fla.py --variant kda --json-dir $OUT/json [--mode fwd] \
        [--set KEY=VALUE ...] [--fla-set safe_gate=true --fla-set lower_bound=-5] [--tag NAME]
    python benchmarks/vs_fla.py --table $OUT/json --out $OUT/vs_fla.md

Here, without a GPU (ours only, Triton's interpreter, a tiny shape; exit 1 when an error
is over --smoke-tol):

    TRITON_INTERPRET=1 python benchmarks/vs_fla.py --variant gla --smoke

Correctness first: on each side, the first call (compile; FLA: compile + autotune),
then the relative RMS error against the fp64 recurrence (chunkproof.fuzz.reference) on
an accuracy slice (every batch and head, the first --acc-t steps), then the time
(triton.testing.do_bench medians).  Both forwards (no grad: o and the final state) come
before either forward + backward (torch.autograd.grad of (o, final state) with fixed
random cotangents into every input and the initial state; then its peak memory and the
device time per kernel).  Inputs: chunkproof.bench.inputs (FLA's conventions), with an
initial state.  A failure of one side or phase is recorded, not raised."""
import os
import sys

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")     # before triton is imported

import contextlib  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

from chunkproof.bench import args as A, calls, fla, inputs, metrics, tiling, timing  # noqa: E402

MODES = ("fwd", "fwd+bwd")
PROG = "vs_fla.py"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:200]


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant")
    p.add_argument("--mode", default="fwd+bwd", choices=MODES, help="fwd: the forwards only")
    p.add_argument("--shape", default=None, help="B,T,H,D (default 4,4096,16,128; --smoke 1,70,2,16)")
    p.add_argument("--dtype", default="bf16", help="q, k, v (and beta, a, b) dtype: bf16, fp16, fp32")
    p.add_argument("--gate-dtype", default="fp32")
    p.add_argument("--gate-normalizer", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--acc-t", type=int, default=256, help="steps of the accuracy slice")
    p.add_argument("--reps", type=int, default=3, help="do_bench calls per timing (median taken)")
    p.add_argument("--profile-iters", type=int, default=3, help="profiled forward + backward calls (0: none)")
    p.add_argument("--bandwidth", type=float, default=4.8e12, help="B/s of the forward's memory floor (H200)")
    p.add_argument("--set", "--ours-set", dest="set", action="append", default=[], metavar="KEY=VALUE",
                   help="a TILING override of ours (JSON value, else the bare word); repeatable")
    p.add_argument("--fla-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword argument of FLA's entry point, e.g. safe_gate=true; repeatable")
    p.add_argument("--tag", default="", help="names this configuration in the JSON file name and the table")
    p.add_argument("--json-dir", default=None)
    p.add_argument("--no-fla", action="store_true")
    p.add_argument("--fla-force", action="store_true", help="run FLA's backward where it refuses this Triton "
                   "(gated products on Hopper, Triton < 3.7.1); its gradients may then be wrong")
    p.add_argument("--smoke", action="store_true", help="CPU, TRITON_INTERPRET=1, ours only")
    p.add_argument("--smoke-tol", type=float, default=None,
                   help="--smoke fails above this rel RMS (default 5e-2, fp32 1e-3)")
    p.add_argument("--table", default=None, help="a --json-dir to tabulate (no measuring)")
    p.add_argument("--out", default=None, help="with --table: write the markdown here")
    a = p.parse_args(argv)
    if a.table:
        return a
    if not a.variant:
        raise ValueError("--variant or --table is required")
    A.variant(a.variant)
    a.shape = A.shape(a.shape or ("1,70,2,16" if a.smoke else "4,4096,16,128"))
    a.torch_dtype, a.torch_gate_dtype = A.dtype(a.dtype), A.dtype(a.gate_dtype)
    a.overrides = tiling.parse_overrides(a.set)
    a.fla_kwargs = tiling.parse_overrides(a.fla_set)
    if a.smoke:
        a.no_fla = True
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("--smoke needs TRITON_INTERPRET=1 before triton is imported")
    elif not torch.cuda.is_available():
        raise ValueError("no CUDA device; --smoke runs ours under the CPU interpreter")
    a.device = "cpu" if a.smoke else "cuda"
    return a


class Side:
    """One side's callable and the context its calls run in (ours: its TILING overrides)."""

    def __init__(self, name, fn, context=contextlib.nullcontext):
        self.name, self.fn, self.context = name, fn, context


def phase(res, side, what, fn, save):
    """Run fn() within side's context; its failure is recorded (the side stops there)."""
    r = res.setdefault(side.name, {})
    if "failed" in r:
        return None
    t = time.time()
    try:
        with side.context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            val = fn()
        log(f"[{res['variant']}] {side.name} {what}: {time.time() - t:.1f} s")
        return val
    except Exception as e:  # noqa: BLE001  (one side failing must not hide the other)
        r["failed"] = f"{what}: {first_line(e)}"
        log(f"[{res['variant']}] {side.name} {what} failed: {r['failed']}")
        return None
    finally:
        save()


def measure(a):
    B, T, H, D = a.shape
    scale = D ** -0.5
    cuda = a.device == "cuda"
    x = inputs.fla_inputs(a.variant, B, T, H, D, a.torch_dtype, a.torch_gate_dtype, a.device, a.seed,
                          a.gate_normalizer)
    h0, do, dht = inputs.cotangents(B, T, H, D, D, a.torch_dtype, a.device, seed=a.seed + 1)
    t = min(a.acc_t, T)
    sl, sl_do = inputs.first_steps(x, t), do[:, :t].contiguous()
    res = {"variant": a.variant + (f" [{a.tag}]" if a.tag else ""), "mode": a.mode, "shape": [B, T, H, D],
           "dtype": a.dtype, "acc_t": t, "seed": a.seed, "ours_set": list(a.set), "fla_set": list(a.fla_set),
           "device": torch.cuda.get_device_name() if cuda else "cpu (interpreter)",
           "versions": {"python": platform.python_version(), "torch": torch.__version__,
                        "triton": __import__("triton").__version__, "fla": fla.version()},
           "fwd_floor_ms": metrics.forward_bytes(x, h0) / a.bandwidth * 1e3}
    save = lambda: write_json(a, res)  # noqa: E731
    want_o, want_ht = metrics.reference_forward(a.variant, sl, scale, h0)
    mod, fn = calls.ours(a.variant)
    sides = [Side("ours", fn, lambda: tiling.applied(mod, a.overrides))]
    if not a.no_fla:
        try:
            sides.append(Side("fla", fla.load(a.variant, a.fla_force, **a.fla_kwargs)))
            res["fla_backend"] = fla.backend(a.variant, tuple(x.values()), a.fla_kwargs)
        except Exception as e:  # noqa: BLE001
            res["fla"] = {"failed": f"import: {first_line(e)}"}
    save()

    for s in sides:    # the forwards: first call, accuracy, time
        r = res.setdefault(s.name, {})
        fwd = lambda s=s: calls.forward(s.fn, x, h0, scale)  # noqa: E731
        r["first_fwd_s"] = phase(res, s, "forward first call", lambda: round(timing.first_call_s(fwd, cuda), 1), save)
        r["err"] = phase(res, s, "forward accuracy", lambda s=s: metrics.errors(
            dict(zip(("o", "final_state"), calls.forward(s.fn, sl, h0, scale))),
            {"o": want_o, "final_state": want_ht}), save)
        r["fwd_ms"] = phase(res, s, "forward timing", lambda: timing.median_ms(fwd, cuda, a.reps), save)
    if a.mode == "fwd":
        return res
    t0 = time.time()
    o_ref, g_ref = metrics.reference_backward(a.variant, sl, h0, sl_do, dht, scale)
    log(f"[{res['variant']}] fp64 reference gradients on T = {t}: {time.time() - t0:.1f} s")
    for s in sides:    # forward + backward: first call, accuracy, time, memory, kernels
        r = res[s.name]
        step = lambda s=s: calls.fwd_bwd(s.fn, x, h0, do, dht, scale)  # noqa: E731

        def acc(s=s):
            o, g = calls.fwd_bwd(s.fn, sl, h0, sl_do, dht, scale)
            return {**(r.get("err") or {}), **metrics.errors({"o": o, **g}, {"o": o_ref, **g_ref})}
        r["first_call_s"] = phase(res, s, "fwd+bwd first call", lambda: round(timing.first_call_s(step, cuda), 1), save)
        r["err"] = phase(res, s, "fwd+bwd accuracy", acc, save) or r.get("err")
        r["fwdbwd_ms"] = phase(res, s, "fwd+bwd timing", lambda: timing.median_ms(step, cuda, a.reps), save)
        if cuda:
            r["peak_mib"] = phase(res, s, "peak memory", lambda: round(timing.peak_mib(step), 1), save)
            if a.profile_iters:
                rows = phase(res, s, "kernel profile", lambda: timing.kernel_times(step, a.profile_iters), save)
                r["kernels_us"] = {k[:60]: round(us, 1) for k, (n, us) in
                                   sorted((rows or {}).items(), key=lambda kv: -kv[1][1])[:12]}
    save()
    return res


def write_json(a, res):
    if a.json_dir:
        os.makedirs(a.json_dir, exist_ok=True)
        path = os.path.join(a.json_dir, a.variant + (f"@{a.tag}" if a.tag else "") + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(path + ".tmp", path)


def table(results):
    """Markdown: times, then errors, then kernels; reads this script's JSON and that of
    the fwdbwd_vs_fla.py it replaced (benchmarks/results/2026-11-*/fwdbwd/)."""
    lines = ["| variant | ours fwd ms | FLA fwd ms | fwd ratio | fwd floor ms (fraction ours / FLA) "
             "| ours fwd+bwd ms | FLA fwd+bwd ms | fwd+bwd ratio | peak MiB ours / FLA |",
             "|---|---|---|---|---|---|---|---|---|"]
    errs = ["", "| variant | tensor | ours rel RMS | FLA rel RMS |", "|---|---|---|---|"]

    def f(x, d=3):
        return "-" if x is None else f"{x:.{d}f}"
    for r in results:
        o, fl = r.get("ours") or {}, r.get("fla") or {}

        def ratio(key):
            return o[key] / fl[key] if o.get(key) and fl.get(key) else None
        floor = r.get("fwd_floor_ms")
        frac = "-" if not floor else " / ".join(f(floor / s[key], 2) if s.get(key) else "-"
                                                for s, key in ((o, "fwd_ms"), (fl, "fwd_ms")))
        lines.append(f"| {r['variant']} | {f(o.get('fwd_ms'))} | {f(fl.get('fwd_ms'))} | {f(ratio('fwd_ms'), 2)} | "
                     f"{f(floor)} ({frac}) | {f(o.get('fwdbwd_ms'))} | {f(fl.get('fwdbwd_ms'))} | "
                     f"{f(ratio('fwdbwd_ms'), 2)} | {o.get('peak_mib', '-')} / {fl.get('peak_mib', '-')} |")
        for side in ("ours", "fla"):
            if "failed" in (r.get(side) or {}):
                why = r[side]["failed"].replace("|", "/")
                lines.append(f"| {r['variant']} {side} failed: {why} | | | | | | | | |")
        oe, fe = o.get("err") or {}, fl.get("err") or {}
        for n in dict.fromkeys([*oe, *fe]):
            label = n if n in ("o", "final_state") else "d " + n
            errs.append(f"| {r['variant']} | {label} | {'-' if oe.get(n) is None else f'{oe[n]:.2e}'} | "
                        f"{'-' if fe.get(n) is None else f'{fe[n]:.2e}'} |")
    kern = ["", "Device time per kernel in one forward + backward (us, torch.profiler, top 12):", ""]
    for r in results:
        for side in ("ours", "fla"):
            ks = (r.get(side) or {}).get("kernels_us")
            if ks:
                kern.append(f"- {r['variant']} {side}: " + ", ".join(f"`{k}` {v}" for k, v in ks.items()))
    return "\n".join(lines + errs + (kern if len(kern) > 3 else [])) + "\n"


def header(results):
    if not results:
        return "# Ours vs FLA\n\n(no results)\n\n"
    r = results[0]
    v = r.get("versions") or {}
    ver = ", ".join(f"{k} {x}" for k, x in v.items())
    backends = {x.get("fla_backend") for x in results if x.get("fla_backend")}
    return ("# Ours vs FLA\n\n"
            f"- {r['device']}; shape (B, T, H, D) = {tuple(r['shape'])} {r['dtype']}; accuracy on the first "
            f"{r['acc_t']} steps vs the fp64 recurrence (gradients: its autograd)\n"
            + (f"- {ver}\n" if ver else "")
            + (f"- FLA backend: {', '.join(sorted(backends))}\n" if backends else "") + "\n")


def smoke_failures(res, tol):
    r = res.get("ours") or {}
    bad = [f"ours failed: {r['failed']}"] if "failed" in r else []
    bad += [f"{n} {e:.2e} > {tol:g}" for n, e in (r.get("err") or {}).items() if not e <= tol]
    return bad


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        return A.fail(PROG, e)
    if a.table:
        if not os.path.isdir(a.table):
            return A.fail(PROG, f"--table: {a.table!r} is not a directory")
        paths = sorted(glob.glob(os.path.join(a.table, "*.json")))
        results = [json.load(open(p)) for p in paths]
        text = header(results) + table(results)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
        print(text)
        return 0
    try:   # an unknown TILING key: refused before anything runs
        with tiling.applied(calls.ours(a.variant)[0], a.overrides):
            pass
    except ValueError as e:
        return A.fail(PROG, f"--set: {e}")
    res = measure(a)
    print(table([res]))
    if a.smoke:
        bad = smoke_failures(res, a.smoke_tol or (1e-3 if a.dtype == "fp32" else 5e-2))
        if bad:
            log("SMOKE FAILED: " + "; ".join(bad))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
