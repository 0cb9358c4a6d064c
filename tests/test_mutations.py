"""Every hand-derivation mistake we can make mechanically (transpose an
operand, M <-> M_{-1}, S_[t] <-> S_[t-1], left <-> right arrow, drop a term,
swap a product, flip a sign) must be reported, on every claim that holds."""
import collections
import dataclasses

import pytest

from chunkproof.verify.check import check
from chunkproof.verify.mutate import equivalent, mutants
from tests.helpers import all_claims, verdicts

# The claims are dealt round-robin into shards (about 3,400 mutants in all): pytest-xdist
# runs the shards on every core, and a shard's worker checks only its own claims' verdicts.
SHARDS = 12


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_mutant_of_a_holding_claim_is_reported(shard, capsys):
    v = verdicts()
    stats = collections.defaultdict(collections.Counter)
    survivors = []
    for d, c in all_claims()[shard::SHARDS]:
        if v[c.id] != "holds":
            continue
        for op, desc, rhs in mutants(c, d):
            m = _with_rhs(c, rhs)
            r = check(d, m, diagnose=False, floats=False)
            if r.verdict in ("fails", "ill-formed"):
                stats[op]["killed"] += 1
                stats[op]["by shape" if r.verdict == "ill-formed" else "by value"] += 1
            elif r.verdict == "holds" and equivalent(d, c, rhs):
                stats[op]["equivalent"] += 1
            else:
                stats[op]["survived"] += 1
                survivors.append(f"{c.id}: {desc} -> {r.verdict} {r.message}")
    with capsys.disabled():
        print(f"\nmutation kill rate, shard {shard + 1} of {SHARDS} (equivalent mutants excluded):")
        total_k = total_n = 0
        for op in sorted(stats):
            s = stats[op]
            n = s["killed"] + s["survived"]
            total_k += s["killed"]
            total_n += n
            print(f"  {op:10s} {s['killed']:5d}/{n:<5d} killed ({s['by value']} by value, "
                  f"{s['by shape']} by shape), {s['equivalent']} equivalent")
        print(f"  total      {total_k}/{total_n} = {100.0 * total_k / max(total_n, 1):.1f}%")
    assert total_n > 0
    assert not survivors, "mutants not reported:\n" + "\n".join(survivors[:30])


def _with_rhs(c, rhs):
    return dataclasses.replace(c, rhs=rhs, id=c.id + "~mutant")
