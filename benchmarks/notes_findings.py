"""Summarise what the report finds in the four bundled notes (from its JSON).

    chunkproof report --format json -q -o /tmp/report.json
    python benchmarks/notes_findings.py /tmp/report.json > benchmarks/results/notes_findings.md
"""
import json
import sys


def main(path):
    data = json.load(open(path, encoding="utf-8"))
    claims = data["claims"]
    fixes = {c["corrected_of"]: c for c in claims if c["corrected_of"]}
    s = data["summary"]
    print("# What `chunkproof report` finds in the bundled notes\n")
    print(f"{s['claims']} claims: {s['holds']} hold, {s['fails']} fail, {s['ill-formed']} ill-formed; "
          f"{s['literal_not_holding']} literal lines do not hold; {s['corrected']} corrected claims, "
          f"{s['corrected_not_holding']} of which do not hold. Report time {data['seconds']} s.\n")
    print("| note | claim | citation | verdict | what is wrong (from the corrected claim) | evidence |")
    print("|---|---|---|---|---|---|")
    for c in claims:
        if c["corrected_of"] or c["verdict"] == "holds":
            continue
        fix = fixes.get(c["id"])
        why = fix["why"] if fix else "(no correction)"
        ev = c["smallest_failing_sizes"] or c["message"] or ""
        if c["residual"]:
            ev += f"; residual {c['residual'][:160]}"
        cite = c["citation"].split(" §")[1] if " §" in c["citation"] else c["citation"]
        print(f"| {c['note'][:3]} | `{c['id']}` | {cite} | {c['verdict']} | {why} | "
              f"{ev.replace('|', '/')} |")


if __name__ == "__main__":
    main(sys.argv[1])
