"""Kernels or host: for each variant, ours and FLA's, the device time of a call
(do_bench median) beside the host's time to issue one (the call returns before the GPU
is done; the median of --calls calls, each after a synchronize, the queue empty) and
beside the GPU's time for a burst of --calls calls issued back to back, and (--busy-cycles)
the time to issue one with the GPU busy on torch.cuda._sleep first: the same as idle
when nothing in the call waits for the GPU.  Where the issue time is near the do_bench
time and nothing waits, the call is host-bound: faster kernels would not show.
--profile-top N adds, per side, the N functions that took most of the host's own time
over the --calls calls (cProfile, tottime): where that time goes.

    python benchmarks/host_time.py --variants gla,gated_delta_rule --shape 8,2048,16,64 \
        [--mode fwd+bwd] [--fla gla,gated_delta_rule [--fla-force]] [--out $OUT/host.md]
"""
import cProfile
import io
import pstats
import statistics
import sys
import time

import torch

from chunkproof.bench import args as A, calls, fla, inputs, timing

PROG = "host_time.py"


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="gla")
    p.add_argument("--fla", default="", help="variants whose FLA call is timed too")
    p.add_argument("--fla-force", action="store_true", help="FLA's gated backward past its #640 refusal")
    p.add_argument("--shape", default="8,2048,16,64", help="B,T,H,D")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--mode", choices=["fwd", "fwd+bwd"], default="fwd+bwd")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--busy-cycles", type=int, default=20_000_000,
                   help="GPU clock cycles of the torch.cuda._sleep before each busy issue (0: not measured)")
    p.add_argument("--profile-top", type=int, default=0, help="cProfile's N most expensive functions per side")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    a.variants = A.variants(a.variants)
    a.fla = A.variants(a.fla) if a.fla.strip() else []
    a.shape = A.shape(a.shape)
    a.torch_dtype = A.dtype(a.dtype)
    if a.busy_cycles < 0:
        raise ValueError(f"--busy-cycles must be 0 or more, not {a.busy_cycles}")
    if a.profile_top < 0:
        raise ValueError(f"--profile-top must be 0 or more, not {a.profile_top}")
    if a.calls < 1:
        raise ValueError(f"--calls must be at least 1, not {a.calls}")
    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU")
    return a


def issue_ms(call, n, busy_cycles=0):
    """Median ms to issue one call, each after a synchronize (and a busy GPU's sleep)."""
    issue = []
    for _ in range(n):
        torch.cuda.synchronize()
        if busy_cycles:
            torch.cuda._sleep(busy_cycles)
        t = time.perf_counter()
        call()
        issue.append((time.perf_counter() - t) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(issue)


def measure(call, n, busy_cycles):
    """(do_bench ms, issue ms idle, issue ms busy or None, ms per call of a burst of n)."""
    call()
    torch.cuda.synchronize()
    idle = issue_ms(call, n)
    busy = issue_ms(call, n, busy_cycles) if busy_cycles else None
    t = time.perf_counter()
    for _ in range(n):
        call()
    torch.cuda.synchronize()
    burst = (time.perf_counter() - t) * 1e3 / n
    return timing.median_ms(call, True, 3, 50, 200), idle, busy, burst


def profiled(call, n, top):
    """The ``top`` functions by the host's own time over ``n`` calls (cProfile), as text."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        return A.fail(PROG, e)
    B, T, H, D = a.shape
    scale = D ** -0.5
    lines = [f"# Host time, {a.mode}", "", f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
             f"shape (B, T, H, D) = ({B}, {T}, {H}, {D}) {a.dtype}; {a.calls} calls", "",
             "| variant | side | do_bench ms | issue ms, GPU idle | issue ms, GPU busy | burst ms per call |",
             "|---|---|---|---|---|---|"]
    profiles = []
    for variant in a.variants:
        x = inputs.bench_inputs(variant, B, T, H, D, a.torch_dtype, torch.float32, "cuda", seed=0)
        h0, do, dht = inputs.cotangents(B, T, H, D, D, a.torch_dtype, "cuda")
        sides = [("ours", calls.ours(variant)[1])]
        if variant in a.fla:
            sides.append((f"FLA {fla.version()}", fla.load(variant, force=a.fla_force)))
        for side, fn in sides:
            try:
                call = calls.of_mode(a.mode, fn, x, h0, do, dht, scale)
                ms, idle, busy, burst = measure(call, a.calls, a.busy_cycles)
                lines.append(f"| {variant} | {side} | {ms:.3f} | {idle:.3f} | "
                             f"{'-' if busy is None else f'{busy:.3f}'} | {burst:.3f} |")
                if a.profile_top:
                    text = profiled(call, a.calls, a.profile_top)
                    profiles.append(f"## {variant}, {side}: cProfile over {a.calls} calls\n\n```\n{text}```\n")
            except Exception as e:  # noqa: BLE001  (one failing side must not hide the rest)
                lines.append(f"| {variant} | {side} | failed: {type(e).__name__}: {str(e)[:200]} | | | |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n" + "".join("\n" + p for p in profiles)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
