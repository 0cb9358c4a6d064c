"""Decide a claim: its own evidence (levels.py), and for a claim read through a chunk
program, whether that program reproduces its recurrence (programs.py): a claim that
holds through a wrong program does not hold."""
from __future__ import annotations

import time

from chunkproof.derivations.dsl import Claim, Derivation
from . import programs
from .coverage import coverage_of
from .levels import TRIALS, Result, decide, size_sets


def check(deriv: Derivation, claim: Claim, sizes=None, trials=TRIALS,
          diagnose=True, floats=True, seed=0) -> Result:
    """Decide one claim.  ``sizes``: one Sizes or several (default: the exact
    level's size sets, see ``levels.use_sizes``); ``trials`` points at each, with
    seeds seed+1, seed+2, ...; a reported seed reproduces the point with ``--seed``
    (seed - 1).  A claim of kind 'program' is that program's own check."""
    sets = size_sets(sizes)
    if claim.kind == programs.KIND:
        return programs.check_program_entry(deriv, claim, sets, trials, diagnose, floats, seed)
    t0 = time.perf_counter()
    res = decide(deriv, claim, sets, trials, diagnose, floats, seed)
    if res.verdict != "error":
        programs.gate(deriv, claim, res, sets, trials, seed)
    # what the claim's group of pieces leaves unstated, at the first size set: shown
    # beside the verdict, never read by it (an attribute until Result has the field)
    res.coverage = coverage_of(deriv, claim, sets[0])
    res.seconds = time.perf_counter() - t0
    return res
