"""Timing targets of the verified-derivation core (run on the 2-core CPU box, idle, with
no OMP_* / MKL_* variables set: what a user gets by default):

  * the full report on the four bundled notes (target: <= 30 s);
  * `chunkproof verify` on a 10-entry derivation, derivations/examples/mamba2.py
    (target: <= 3 s, start-up included);
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


def _timed(args, runs):
    """(wall seconds of each run, stdout of the last) of `chunkproof ARGS`."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode not in (0, 1):
            raise SystemExit(f"chunkproof {' '.join(args)} failed: {p.stderr}")
    return times, p.stdout


def full_report_seconds(runs=3):
    import json
    times, out = _timed(["report", "-q", "--format", "json"], runs)
    return times, json.loads(out)["summary"]


def small_derivation_seconds(runs=5):
    return _timed(["verify", "-q", "derivations/examples/mamba2.py"], runs)[0]


def _spread(ts):
    return f"{min(ts):.1f} / {statistics.median(ts):.1f} / {max(ts):.1f} s"


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
    set_vars = sorted(k for k in os.environ if k.startswith(("OMP_", "MKL_", "OPENBLAS_")))
    if set_vars:
        sys.stderr.write(f"note: {', '.join(set_vars)} set; the targets are for the defaults\n")
    full, summ = full_report_seconds()
    small = small_derivation_seconds()
    one, c = one_adjoint_check()
    lines = [
        "# Verified-derivation core: timing",
        "",
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}",
        "",
        f"environment: {', '.join(set_vars) or 'no OMP_* / MKL_* / OPENBLAS_* variables set'}",
        "",
        "| measurement | min / median / max | target |",
        "|---|---|---|",
        f"| `chunkproof report` on the 4 bundled notes ({summ['claims']} entries, wall clock incl. start-up, "
        f"{len(full)} runs) | {_spread(full)} | <= 30 s |",
        f"| `chunkproof verify derivations/examples/mamba2.py` (10 entries, incl. start-up, {len(small)} runs) "
        f"| {_spread(small)} | <= 3 s |",
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
