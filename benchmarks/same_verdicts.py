"""Compare two `chunkproof report --format json` files, ignoring timings: exit 0
when every claim's verdict, evidence, mismatch and residual are identical, else
print the first differences and exit 1.  A refactor that must change no verdict:

    chunkproof report --format json -o before.json    # on the old commit
    chunkproof report --format json -o after.json
    python benchmarks/same_verdicts.py before.json after.json
"""
import json
import sys


def _untimed(d):
    if isinstance(d, dict):
        return {k: _untimed(v) for k, v in d.items() if k != "seconds"}
    if isinstance(d, list):
        return [_untimed(x) for x in d]
    return d


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write("usage: same_verdicts.py BEFORE.json AFTER.json\n")
        return 2
    try:
        a, b = (_untimed(json.load(open(p))) for p in argv)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"same_verdicts.py: {e}\n")
        return 2
    before = {c["id"]: c for c in a["claims"]}
    after = {c["id"]: c for c in b["claims"]}
    diffs = [f"only in {argv[0]}: {i}" for i in before.keys() - after.keys()]
    diffs += [f"only in {argv[1]}: {i}" for i in after.keys() - before.keys()]
    for i in sorted(before.keys() & after.keys()):
        x, y = before[i], after[i]
        diffs += [f"{i}.{k}: {x.get(k)!r} -> {y.get(k)!r}" for k in sorted(x.keys() | y.keys())
                  if x.get(k) != y.get(k)]
    if a["summary"] != b["summary"]:
        diffs.append(f"summary: {a['summary']} -> {b['summary']}")
    for line in diffs[:20]:
        print(line)
    print(f"{len(before)} claims; {'identical apart from timings' if not diffs else f'{len(diffs)} differences'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
