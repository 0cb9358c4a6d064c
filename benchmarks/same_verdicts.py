"""Compare two `chunkproof report --format json` files, ignoring timings: exit 0
when every claim's verdict, evidence, mismatch and residual are identical, else
print the first differences and exit 1.  A refactor that must change no verdict:

    chunkproof report --format json -o before.json    # on the old commit
    chunkproof report --format json -o after.json
    python benchmarks/same_verdicts.py before.json after.json

With --verdicts-only, only each claim's verdict is compared (a change that adds
evidence, such as more size sets, but must not change what holds), and claims present
in one file only are listed but not counted as differences.
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
    argv = sys.argv[1:] if argv is None else list(argv)
    only_verdicts = "--verdicts-only" in argv
    argv = [a for a in argv if a != "--verdicts-only"]
    if len(argv) != 2:
        sys.stderr.write("usage: same_verdicts.py [--verdicts-only] BEFORE.json AFTER.json\n")
        return 2
    try:
        a, b = (_untimed(json.load(open(p))) for p in argv)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"same_verdicts.py: {e}\n")
        return 2
    before = {c["id"]: c for c in a["claims"]}
    after = {c["id"]: c for c in b["claims"]}
    only = [f"only in {argv[0]}: {i}" for i in sorted(before.keys() - after.keys())]
    only += [f"only in {argv[1]}: {i}" for i in sorted(after.keys() - before.keys())]
    diffs = [] if only_verdicts else list(only)
    for i in sorted(before.keys() & after.keys()):
        x, y = before[i], after[i]
        keys = ["verdict"] if only_verdicts else sorted(x.keys() | y.keys())
        diffs += [f"{i}.{k}: {x.get(k)!r} -> {y.get(k)!r}" for k in keys if x.get(k) != y.get(k)]
    if a["summary"] != b["summary"] and not only_verdicts:
        diffs.append(f"summary: {a['summary']} -> {b['summary']}")
    if only_verdicts and only:
        print(f"{len(only)} claims in one file only (not compared), e.g. {only[0]}")
    for line in diffs[:20]:
        print(line)
    same = "the same verdicts" if only_verdicts else "identical apart from timings"
    print(f"{len(before.keys() & after.keys())} claims in both; {same if not diffs else f'{len(diffs)} differences'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
