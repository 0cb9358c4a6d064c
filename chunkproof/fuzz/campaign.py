"""`chunkproof fuzz`: run the properties over many seeds, print a table (property x
variant: examples, failures, worst error), save the failing seeds for the test suite
(tests/test_fuzz.py replays tests/fuzz_failures.json)."""
from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import DEFAULT_SAVE
from .properties import PROPERTIES, draw


@dataclass
class Cell:
    examples: int = 0
    failures: int = 0
    worst: float = 0.0
    tol: Optional[float] = None
    seconds: float = 0.0
    failed: List[dict] = field(default_factory=list)


def check(variant, prop, seed, device, dtype):
    """Run one example; (ok, error, tolerance, record)."""
    ex = draw(variant, prop, seed, device, dtype)
    try:
        err, tol, detail = PROPERTIES[prop](ex)
    except Exception as e:  # a crash is a finding, not the end of the campaign
        err, tol = math.inf, 0.0
        detail = f"raised {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        if os.environ.get("CHUNKPROOF_FUZZ_DEBUG"):
            traceback.print_exc()
    ok = math.isfinite(err) and err <= tol
    rec = dict(variant=variant, property=prop, seed=seed, device=device, dtype=dtype,
               error=err if math.isfinite(err) else "inf", tolerance=tol, example=ex.describe(), detail=detail)
    return ok, err, tol, rec


class Progress:
    def __init__(self, total, quiet):
        self.total, self.done, self.quiet = total, 0, quiet
        self.tty = sys.stderr.isatty()
        self.t0 = time.time()

    def step(self, label, failures):
        self.done += 1
        if self.quiet:
            return
        width = 24
        fill = int(width * self.done / max(1, self.total))
        line = (f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {label}"
                f" ({failures} failing, {time.time() - self.t0:.0f} s)")
        if self.tty:
            sys.stderr.write("\r" + line.ljust(100))
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.done == self.total or self.done % max(1, self.total // 20) == 0:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


class Interrupted(Exception):
    """Ctrl-C during a campaign; `cells` holds what ran before it."""

    def __init__(self, cells):
        super().__init__("interrupted")
        self.cells = cells


def run_campaign(variants, props, device, dtype, examples, seed, quiet=False) -> Dict[tuple, Cell]:
    cells: Dict[tuple, Cell] = {}
    prog = Progress(len(variants) * len(props) * examples, quiet)
    nfail = 0
    try:
        for v in variants:
            for p in props:
                cell = cells.setdefault((p, v), Cell())
                for i in range(examples):
                    t = time.time()
                    ok, err, tol, rec = check(v, p, seed + i, device, dtype)
                    cell.seconds += time.time() - t
                    cell.examples += 1
                    cell.tol = tol
                    cell.worst = max(cell.worst, err)
                    if not ok:
                        cell.failures += 1
                        cell.failed.append(rec)
                        nfail += 1
                    prog.step(f"{v} {p} seed {seed + i}", nfail)
    except KeyboardInterrupt:
        if not quiet:
            sys.stderr.write("\n")
        raise Interrupted({k: c for k, c in cells.items() if c.examples}) from None
    return cells


def _fmt(x):
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf"
    return "0" if x == 0 else f"{x:.1e}"


def table(cells, device, dtype, examples, seed) -> str:
    lines = [f"fuzz campaign: device {device}, {dtype}, {examples} examples per cell, seeds {seed}..{seed + examples - 1}",
             "", "| property | variant | examples | failures | worst error | tolerance | seconds |",
             "|---|---|---|---|---|---|---|"]
    for (p, v), c in cells.items():
        lines.append(f"| {p} | {v} | {c.examples} | {c.failures} | {_fmt(c.worst)} | {_fmt(c.tol)} | {c.seconds:.0f} |")
    fails = [r for c in cells.values() for r in c.failed]
    if fails:
        lines += ["", "Failing examples (replay: `chunkproof fuzz --variant V --property P --seed S --examples 1`):", ""]
        for r in fails[:30]:
            lines.append(f"- {r['variant']} {r['property']} seed {r['seed']}: {r['example']}: {r['detail']}")
        if len(fails) > 30:
            lines.append(f"- ... and {len(fails) - 30} more (all saved)")
    return "\n".join(lines) + "\n"


def save_failures(path, cells) -> int:
    """Merge this campaign's failures into the JSON list at `path` (written atomically);
    returns the number of new entries."""
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    key = lambda r: (r["variant"], r["property"], r["seed"], r["device"], r["dtype"])  # noqa: E731
    have = {key(r) for r in old}
    new = [r for c in cells.values() for r in c.failed if key(r) not in have]
    if not new:
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(old + new, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return len(new)


__all__ = ["run_campaign", "table", "save_failures", "check", "DEFAULT_SAVE", "Cell", "Interrupted"]
