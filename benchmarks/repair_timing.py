"""The repair search (verify/repair.py): what it costs the report, and how often it
restores a mutated line.

  * the full report on the four bundled notes with and without `--no-suggest`
    (target: the search adds at most 30 s, idle 2-core machine, default settings);
  * the mutation suite of tests/test_mutations.py (every mutant of a holding claim
    that the checker reports): the share whose suggestion restores the original line
    or an equivalent verified one (target: at least 90%), per operator;
  * the literal lines of the notes that do not hold: how many get a verified
    suggestion, how many a plain statement that none was found.

    python benchmarks/repair_timing.py [--runs 3] [--every 1] [--out FILE.md]

``--every K`` takes every K-th mutant (the suite has a few thousand); ``--skip-report``
leaves out the report timing.  The load average is printed beside the timings: on a
shared machine they are upper bounds.
"""
import argparse
import collections
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from chunkproof.derivations.loader import bundled  # noqa: E402
from chunkproof.verify import repair  # noqa: E402
from chunkproof.verify.check import check  # noqa: E402
from chunkproof.verify.mutate import mutants  # noqa: E402


def _report(extra, runs):
    times, data = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "chunkproof", "report", "-q", "--format", "json", *extra],
                           cwd=ROOT, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode not in (0, 1):
            raise SystemExit(f"chunkproof report {' '.join(extra)} failed: {p.stderr}")
        data = json.loads(p.stdout)
    return times, data


def report_cost(runs=3):
    """(wall seconds with the search, without it, the last JSON with it); the runs
    alternate so that a change in the machine's load falls on both."""
    on, off, data = [], [], None
    for _ in range(runs):
        t, data = _report([], 1)
        on += t
        off += _report(["--no-suggest"], 1)[0]
    return on, off, data


def _derivations():
    return tuple(bundled()) + tuple(d for d in _mamba2())


def _mamba2():
    from chunkproof.derivations.loader import from_file
    return from_file(os.path.join(ROOT, "derivations/examples/mamba2.py"))


def mutant_suite(every=1):
    """(mutated claim, original claim, derivation, operator) for every mutant of a
    holding claim that the checker reports (fails or ill-formed), as
    tests/test_mutations.py counts them; every ``every``-th one."""
    out, k = [], 0
    for d in _derivations():
        for c in d.claims:
            if check(d, c, diagnose=False, floats=False).verdict != "holds":
                continue
            for op, _desc, rhs in mutants(c, d):
                k += 1
                if (k - 1) % every:
                    continue
                m = dataclasses.replace(c, rhs=rhs, id=c.id + "~mutant")
                r = check(d, m, diagnose=False, floats=False)
                if r.verdict in ("fails", "ill-formed"):
                    out.append((m, c, d, op, r))
    return out


def restored(s, original) -> str:
    """'original' (the very line), 'equivalent' (another line with the same left side
    that the checker decided holds: equal to the original wherever the claim
    speaks), or '' (none, or a line that changed the left side or the range)."""
    if not s.verified or s.claim is None:
        return ""
    if s.claim.over != original.over or s.claim.lhs != original.lhs:
        return ""
    return "original" if s.claim.rhs == original.rhs else "equivalent"


def mutant_rate(every=1, on_each=None):
    """operator -> Counter(original, equivalent, none, seconds)."""
    stats = collections.defaultdict(collections.Counter)
    for m, c, d, op, r in mutant_suite(every):
        t0 = time.perf_counter()
        s = repair.suggest(d, m, r, exclude=(c.id,))
        how = restored(s, c) or "none"
        stats[op][how] += 1
        stats[op]["seconds"] += time.perf_counter() - t0
        if on_each:
            on_each(m, op, how, s)
    return stats


def rate_lines(stats):
    lines = ["| operator | mutants | restored: the original line | an equivalent verified line | none | "
             "mean search (s) |", "|---|---|---|---|---|---|"]
    tot = collections.Counter()
    for op in sorted(stats):
        s = stats[op]
        n = s["original"] + s["equivalent"] + s["none"]
        tot.update(s)
        lines.append(f"| {op} | {n} | {s['original']} | {s['equivalent']} | {s['none']} | "
                     f"{s['seconds'] / max(n, 1):.2f} |")
    n = tot["original"] + tot["equivalent"] + tot["none"]
    rate = (tot["original"] + tot["equivalent"]) / max(n, 1)
    lines.append(f"| total | {n} | {tot['original']} | {tot['equivalent']} | {tot['none']} | "
                 f"{tot['seconds'] / max(n, 1):.2f} |")
    return lines, rate, n


def literal_lines():
    """(id, verified suggestion?, edit or statement) for every literal entry of the
    bundled notes that does not hold (program entries included, as the report lists
    them)."""
    out = []
    for d, c, r in repair.failing_literal_entries():
        repair.attach(d, c, r)
        out.append((c.id, r.suggestion_verified, r.edit or r.suggestion_note))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--skip-report", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    lines = ["# Repair search: cost and restore rate", "",
             f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}",
             f"load average at start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}", ""]
    if not args.skip_report:
        on, off, data = report_cost(args.runs)
        spent = sum(c["suggestion_seconds"] or 0 for c in data["claims"])
        lines += ["| measurement | min / median / max |", "|---|---|",
                  f"| `chunkproof report` ({data['summary']['claims']} entries, {len(on)} runs) | "
                  f"{min(on):.1f} / {statistics.median(on):.1f} / {max(on):.1f} s |",
                  f"| `chunkproof report --no-suggest` | {min(off):.1f} / {statistics.median(off):.1f} / "
                  f"{max(off):.1f} s |",
                  f"| added by the search (median difference) | "
                  f"{statistics.median(on) - statistics.median(off):.1f} s |",
                  "", f"search time summed over the claims, in the workers (last run): {spent:.1f} s",
                  f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}", ""]
    lit = literal_lines()
    ok = sum(v for _, v, _ in lit)
    lines += [f"literal entries that do not hold: {len(lit)}; verified suggestion: {ok}; "
              f"plain statement that none was found: {len(lit) - ok}", ""]
    lines += [f"- `{i}`: {'verified: ' if v else 'none: '}{w}" for i, v, w in lit]
    t0 = time.perf_counter()
    stats = mutant_rate(args.every)
    rl, rate, n = rate_lines(stats)
    lines += ["", f"mutation suite (every {args.every}. mutant of a holding claim that the checker reports): "
                  f"{n} mutants, restored {100 * rate:.1f}% ({time.perf_counter() - t0:.0f} s)", ""] + rl
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
