"""Shared fixtures: the bundled derivations, checked once per test session."""
import functools

from chunkproof.verify.check import check
from chunkproof.derivations.loader import bundled, from_file


@functools.lru_cache(maxsize=None)
def derivations():
    return tuple(bundled()) + tuple(from_file("derivations/examples/mamba2.py"))


@functools.lru_cache(maxsize=None)
def verdicts():
    """claim id -> verdict at the default exact sizes (no diagnosis, no floats)."""
    out = {}
    for d in derivations():
        for c in d.claims:
            out[c.id] = check(d, c, diagnose=False, floats=False).verdict
    return out


def all_claims():
    return [(d, c) for d in derivations() for c in d.claims]
