"""`chunkproof fuzz`: a Hypothesis search per (property, variant), a table (property x
variant: examples, failures, worst error), the shrunk failures saved twice: in
Hypothesis's example database (which the tests replay through the same keys) and as
readable pins in tests/fuzz_failures.json (which the tests replay without Hypothesis).
docs/fuzz.md has the design."""
from __future__ import annotations

import math
import os
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .example import Example
from .pins import save_failures
from .properties import PROPERTIES, applies
from .search import CAMPAIGN_PHASES, database_key, search
from .strategies import examples as example_strategy


@dataclass
class Cell:
    examples: int = 0         # generated (or replayed) until the first failure
    shrinks: int = 0          # examples run while shrinking it
    failures: int = 0         # 0 or 1: the search stops at its first failure and shrinks it
    worst: float = 0.0
    tol: Optional[float] = None
    seconds: float = 0.0
    failed: List[dict] = field(default_factory=list)


def _kind(err, detail):
    # shrinking keeps to the kind of failure it started from, so that a tolerance failure
    # does not "shrink" into an unrelated crash
    if detail.startswith("raised "):
        return detail.split(":")[0]
    return "non-finite" if not math.isfinite(err) else "over tolerance"


def check(ex: Example):
    """Run one example; (ok, error, tolerance, record)."""
    try:
        with warnings.catch_warnings():
            # the campaign draws T < H on purpose: the API's head-first warning is for users
            warnings.filterwarnings("ignore", message=r".*head-first input")
            err, tol, detail = PROPERTIES[ex.prop](ex)
    except Exception as e:  # a crash is a finding, not the end of the campaign
        err, tol = math.inf, 0.0
        detail = f"raised {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        if os.environ.get("CHUNKPROOF_FUZZ_DEBUG"):
            traceback.print_exc()
    ok = math.isfinite(err) and err <= tol
    rec = dict(variant=ex.variant, property=ex.prop, device=ex.device, dtype=ex.dtype,
               example=ex.describe(), error=err if math.isfinite(err) else "inf", tolerance=tol,
               detail=detail, kind=None if ok else _kind(err, detail))
    return ok, err, tol, rec


class Progress:
    """One line on stderr: redrawn on a terminal, one per finished cell elsewhere."""

    def __init__(self, ncells, quiet):
        self.ncells, self.cell, self.quiet = ncells, 0, quiet
        self.tty = sys.stderr.isatty()
        self.t0 = time.time()
        self.failing = 0

    def show(self, label, cell: Cell, limit, done=False):
        if self.quiet or not (self.tty or done):
            return
        what = f"shrinking, step {cell.shrinks}" if cell.failures else f"example {cell.examples}/{limit}"
        line = (f"[{self.cell}/{self.ncells}] {label}: {what} "
                f"({self.failing + cell.failures} failing, {time.time() - self.t0:.0f} s)")
        sys.stderr.write(("\r" + line.ljust(100) + ("\n" if done else "")) if self.tty else line + "\n")
        sys.stderr.flush()


class Interrupted(Exception):
    """Ctrl-C during a campaign; `cells` holds what ran before it."""

    def __init__(self, cells):
        super().__init__("interrupted")
        self.cells = cells


def run_cell(cell: Cell, variant, prop, device, dtype, examples, seed, database, on_step=lambda: None):
    """Fill `cell` from one search.  A KeyboardInterrupt leaves in it what ran, the
    smallest failure so far included, and propagates."""
    last, memo = {}, {}

    def attempt(ex):
        # Hypothesis reruns an example it has seen (the first failure as shrinking starts,
        # the shrunk one at the end); every example is deterministic, so once is enough
        t = time.time()
        if ex not in memo:
            memo[ex] = check(ex)
        ok, err, tol, rec = memo[ex]
        cell.seconds += time.time() - t
        cell.tol = tol if cell.tol is None else max(cell.tol, tol)
        cell.worst = max(cell.worst, err)
        if cell.failures:
            cell.shrinks += 1
        else:
            cell.examples += 1
        # Hypothesis only keeps a failure it can shrink within the same kind
        hit = not ok and last.get("kind", rec["kind"]) == rec["kind"]
        if hit:
            last.update(rec, kind=rec["kind"], replay=ex.replay_command())
            cell.failures = 1
        on_step()
        return hit

    rng = random.Random(f"{seed}/{variant}/{prop}/{device}/{dtype}")
    try:
        search(example_strategy(variant, prop, device, dtype), attempt, key=database_key(variant, prop, device, dtype),
               database=database, max_examples=examples, seed=rng.getrandbits(64), phases=CAMPAIGN_PHASES)
    except KeyboardInterrupt:
        if last:
            cell.failed = [dict(last, shrunk="interrupted while shrinking: the smallest failure so far")]
        raise
    except Exception as e:   # Hypothesis's own complaint (a flaky replay): keep what it found
        if not last:
            raise
        last["detail"] += f" (Hypothesis: {type(e).__name__})"
    if last:
        cell.failed = [dict(last, shrunk=f"shrunk in {cell.shrinks} step{'s' if cell.shrinks != 1 else ''}")]


def run_campaign(variants, props, device, dtype, examples, seed, database=None, quiet=False) -> Dict[tuple, Cell]:
    cells: Dict[tuple, Cell] = {}
    pairs = [(v, p) for v in variants for p in props if applies(p, v)]
    prog = Progress(len(pairs), quiet)
    try:
        for v, p in pairs:
            prog.cell += 1
            cell = cells.setdefault((p, v), Cell())
            run_cell(cell, v, p, device, dtype, examples, seed, database,
                     on_step=lambda: prog.show(f"{v} {p}", cell, examples))
            prog.show(f"{v} {p}", cell, examples, done=True)
            prog.failing += cell.failures
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


def table(cells, device, dtype, examples, seed, database_path=None, title=None) -> str:
    db = f"; database {database_path}" if database_path else "; no database"
    lines = [title or f"fuzz campaign: device {device}, {dtype}, up to {examples} examples per cell "
                      f"(Hypothesis, seed {seed}{db})",
             "", "| property | variant | examples | failures | worst error | tolerance | seconds |",
             "|---|---|---|---|---|---|---|"]
    for (p, v), c in cells.items():
        lines.append(f"| {p} | {v} | {c.examples} | {c.failures} | {_fmt(c.worst)} | {_fmt(c.tol)} "
                     f"| {c.seconds:.0f} |")
    fails = [r for c in cells.values() for r in c.failed]
    if fails:
        lines += ["", "Failing examples, shrunk (the smallest shape and regime that still fail):", ""]
        for r in fails:
            lines.append(f"- {r['variant']} {r['property']}: {r['example']} ({r['shrunk']}): {r['detail']}")
            lines.append(f"  replay: `{r['replay']}`")
    return "\n".join(lines) + "\n"


__all__ = ["run_campaign", "run_cell", "table", "save_failures", "check", "Cell", "Interrupted"]
