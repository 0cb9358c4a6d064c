"""Check every claim of a set of derivations, in forked worker processes."""
from __future__ import annotations

import multiprocessing as mp
import time

from chunkproof.derivations import ir
from chunkproof.derivations.loader import InputError
from .check import check

_WORK = []  # (derivation, claim) pairs, inherited by forked workers


def validate(derivs):
    """Programs and recurrences must be well formed before claims mean anything."""
    for d in derivs:
        for p in d.programs.values():
            rec = d.recurrences.get(d.program_recurrence.get(p.name, ""))
            reserved = {"S_prev", "dO"}
            if rec is not None:
                reserved |= {i.seq for i in rec.inputs} | {i.step for i in rec.inputs}
            for name, e in p.defs:
                if name in reserved:
                    raise InputError(f"{d.source}: program {p.name}: definition {name!r} has the name "
                                     f"of an input; give the derived tile its own name")
                try:
                    e.shape()
                except ir.ShapeError as err:
                    raise InputError(f"{d.source}: program {p.name}, definition {name}: "
                                     f"ill-formed: {err}") from None
            for need in (p.state, p.output):
                if p.expr(need) is None:
                    raise InputError(f"{d.source}: program {p.name} defines no {need!r}")
        for c in d.claims:
            if c.program not in d.programs:
                raise InputError(f"{d.source}: claim {c.id} ({c.citation}): unknown program {c.program!r}")
            if c.recurrence not in d.recurrences:
                raise InputError(f"{d.source}: claim {c.id} ({c.citation}): unknown recurrence {c.recurrence!r}")


def _check_one(args):
    """One claim in a forked worker; args = (index into _WORK, floats, diagnose, seed)."""
    i, floats, diagnose, seed = args
    d, c = _WORK[i]
    r = check(d, c, floats=floats, diagnose=diagnose, seed=seed)
    r.claim = None  # the parent re-attaches it; IR trees need not travel
    return i, r


def run_checks(derivs, pattern="", jobs=1, floats=True, diagnose=True, seed=0, on_result=None):
    """Results of every claim whose id contains ``pattern``, in the derivations'
    order, and the seconds taken.  ``on_result(done, total, result)`` is called as
    each claim is decided (in completion order when ``jobs`` > 1)."""
    global _WORK
    _WORK = [(d, c) for d in derivs for c in d.claims if pattern in c.id]
    n = len(_WORK)
    results = [None] * n
    tell = on_result or (lambda done, total, r: None)
    t0 = time.perf_counter()
    if jobs > 1 and n > 8:
        ctx = mp.get_context("fork")
        with ctx.Pool(jobs) as pool:
            done = 0
            for i, r in pool.imap_unordered(_check_one, [(i, floats, diagnose, seed) for i in range(n)]):
                r.claim = _WORK[i][1]
                results[i] = r
                done += 1
                tell(done, n, r)
    else:
        for i, (d, c) in enumerate(_WORK):
            results[i] = check(d, c, floats=floats, diagnose=diagnose, seed=seed)
            tell(i + 1, n, results[i])
    return results, time.perf_counter() - t0
