"""tests/fuzz_failures.json: the shrunk failures as readable records, each replayable
without Hypothesis (its `example` parses back into an Example).  The database holds
the same failures as Hypothesis's choices, which a new Hypothesis or a changed strategy
may no longer read; these records do not depend on either."""
from __future__ import annotations

import json
import os

from .example import parse

_KEEP = ("variant", "property", "device", "dtype", "example", "error", "tolerance", "detail")


def _key(r):
    return (r["variant"], r["property"], r["device"], r["dtype"], r["example"])


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def example_of(rec):
    """The record's Example.  Records of the seed-drawn campaign (before Hypothesis) keep
    their seed apart from the example's words; the inputs they name are drawn the same way."""
    extra = {"seed": rec["seed"]} if "seed" in rec else {}
    return parse(rec["example"], rec["variant"], rec["property"], rec["device"], rec["dtype"], **extra)


def save_failures(path, cells) -> int:
    """Merge the cells' shrunk failures into the JSON list at `path` (written
    atomically); the number of new entries."""
    old = load(path)
    have = {_key(r) for r in old}
    new = [{k: r[k] for k in _KEEP} for c in cells.values() for r in c.failed if _key(r) not in have]
    if not new:
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(old + new, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return len(new)
