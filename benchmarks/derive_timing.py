"""Timing target of `chunkproof derive` (issue 16): for each bundled variant, the
derived backward with every line checked exactly, start-up included, at most 10 s on
the idle 2-core CPU box.  Also splits one in-process run into derivation (symbolic
reverse mode and simplification) and the exact check.

    python benchmarks/derive_timing.py [--runs 3] [--out benchmarks/results/derive_timing.md]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

VARIANTS = ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"]
TARGET_S = 10.0


def command_seconds(variant, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "chunkproof", "derive", variant, "--format", "json"],
                           cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise SystemExit(f"chunkproof derive {variant} failed ({p.returncode}): {p.stderr}")
    return times


def in_process(variant):
    """(lines, derive seconds, check seconds) of one run inside this process."""
    from chunkproof.cmd_derive import default_program
    from chunkproof.derivations.loader import resolve
    from chunkproof.verify.derived import derive_checked
    (d,) = resolve([variant])
    c = derive_checked(d, default_program(d))
    return len(c.claims), c.derive_seconds, c.seconds - c.derive_seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", help="also write the table (markdown) here")
    args = ap.parse_args()
    rows = ["| variant | lines | `chunkproof derive` (min / median / max) | derive | exact check | target |",
            "|---|---|---|---|---|---|"]
    worst = 0.0
    load = os.getloadavg()[0]
    for v in VARIANTS:
        ts = command_seconds(v, args.runs)
        n, td, tc = in_process(v)
        worst = max(worst, statistics.median(ts))
        ok = "ok" if statistics.median(ts) <= TARGET_S else "OVER"
        rows.append(f"| {v} | {n} | {min(ts):.2f} / {statistics.median(ts):.2f} / {max(ts):.2f} s "
                    f"| {td * 1000:.0f} ms | {tc:.2f} s | {ok} (<= {TARGET_S:.0f} s) |")
    env = (f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
           f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {args.runs} runs each, "
           f"load average at the start {load:.1f} (idle is about 0)")
    text = "\n".join(["# `chunkproof derive` timing", "", env, ""] + rows) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
