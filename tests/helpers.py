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


# ---- codegen helpers (tests/test_codegen.py, tests/test_backward.py) ----
def fresh_derivation(variant):
    """A private copy of a variant's bundled derivation (the bundled ones are shared)."""
    import copy
    return copy.deepcopy(bundled([variant.derivation])[0])


def with_claim_rhs(deriv, cid, rhs):
    """deriv with claim ``cid``'s right-hand side replaced (in place); returns deriv."""
    import dataclasses
    for i, c in enumerate(deriv.claims):
        if c.id == cid:
            deriv.claims[i] = dataclasses.replace(c, rhs=rhs)
            return deriv
    raise KeyError(cid)


@functools.lru_cache(maxsize=None)
def planned(name):
    """(forward plan, its checked backward claims) of a generated variant."""
    from chunkproof.codegen import plan
    from chunkproof.codegen.variants import BY_NAME
    p = plan.load_variant(BY_NAME[name])
    return p, plan.backward_claims(BY_NAME[name], p.deriv)
