"""Check every claim of a set of derivations, in forked worker processes."""
from __future__ import annotations

import multiprocessing as mp
import time

from . import repair
from .check import check

_WORK = []  # (derivation, claim) pairs, inherited by forked workers


def _check_one(args):
    """One claim in a forked worker; args = (index into _WORK, floats, diagnose, seed,
    suggest)."""
    i, floats, diagnose, seed, suggest = args
    d, c = _WORK[i]
    r = _decided(d, c, floats, diagnose, seed, suggest)
    r.claim = None  # the parent re-attaches it; IR trees need not travel
    return i, r


def _decided(d, c, floats, diagnose, seed, suggest):
    r = check(d, c, floats=floats, diagnose=diagnose, seed=seed)
    if suggest:
        # the repair search runs where the claim was decided: its program checks are cached here
        repair.attach(d, c, r, seed=seed)
    return r


def run_checks(derivs, pattern="", jobs=1, floats=True, diagnose=True, seed=0, on_result=None,
               suggest=True):
    """Results of every claim whose id contains ``pattern``, in the derivations'
    order, and the seconds taken.  ``on_result(done, total, result)`` is called as
    each claim is decided (in completion order when ``jobs`` > 1).  With ``suggest``,
    a claim that does not hold gets a repair suggestion (repair.py)."""
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
            for i, r in pool.imap_unordered(_check_one, [(i, floats, diagnose, seed, suggest) for i in range(n)]):
                r.claim = _WORK[i][1]
                results[i] = r
                done += 1
                tell(done, n, r)
    else:
        for i, (d, c) in enumerate(_WORK):
            results[i] = _decided(d, c, floats, diagnose, seed, suggest)
            tell(i + 1, n, results[i])
    return results, time.perf_counter() - t0
