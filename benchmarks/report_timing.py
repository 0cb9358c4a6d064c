"""Timing targets of the verified-derivation core (run on the 2-core CPU box):

  * the full report on the four bundled notes (target: <= 30 s);
  * one exact check of one adjoint claim at C = 16, Dk = Dv = 16 (target: <= 0.1 s).

    python benchmarks/report_timing.py [--out benchmarks/results/report_timing.md]
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

from chunkproof.verify.levels import exact_once  # noqa: E402
from chunkproof.verify.evaluate import Sizes  # noqa: E402
from chunkproof.derivations.loader import bundled  # noqa: E402


def full_report_seconds():
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "chunkproof", "report", "-q", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"report failed: {p.stderr}")
    import json
    return secs, json.loads(p.stdout)["summary"]


def one_adjoint_check(claim_id="kda.dU"):
    d = next(d for d in bundled(["kda"]))
    c = next(c for c in d.claims if c.id == claim_id)
    sizes = Sizes(C=16, Dk=16, Dv=16, N=2)
    exact_once(d, c, sizes, 1)  # warm caches and imports
    times = []
    for s in range(2, 9):
        t0 = time.perf_counter()
        m = exact_once(d, c, sizes, s)
        times.append(time.perf_counter() - t0)
        assert m is None, f"{claim_id} unexpectedly fails"
    return statistics.median(times), c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    secs, summ = full_report_seconds()
    one, c = one_adjoint_check()
    lines = [
        "# Verified-derivation core: timing",
        "",
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}",
        "",
        "| measurement | result | target |",
        "|---|---|---|",
        f"| `chunkproof report` on the 4 bundled notes ({summ['claims']} claims, wall clock incl. start-up) "
        f"| {secs:.1f} s | <= 30 s |",
        f"| one exact check of adjoint claim `{c.id}` at C=16, Dk=Dv=16, 2 chunks (median of 7) "
        f"| {one * 1000:.0f} ms | <= 100 ms |",
        "",
        f"report summary: {summ}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
