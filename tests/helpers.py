"""Shared fixtures: the bundled derivations, checked once per test session."""
import collections.abc
import functools
import hashlib
import os

from chunkproof.verify.check import check
from chunkproof.derivations.loader import bundled, from_file


@functools.lru_cache(maxsize=None)
def derivations():
    return tuple(bundled()) + tuple(from_file("derivations/examples/mamba2.py"))


# Under pytest-xdist: a folder of this run that every worker reads and writes
# (conftest.py sets it), so that a verdict is checked once per run, not once per worker.
SHARED_DIR = None


class _Verdicts(collections.abc.Mapping):
    """claim id -> verdict, each claim checked when first looked up: a test (or an
    xdist worker) that needs a few verdicts does not check every claim."""

    def __init__(self):
        self._claims = {c.id: (d, c) for d, c in all_claims()}
        self._known = {}

    def __getitem__(self, cid):
        if cid not in self._known:
            self._known[cid] = self._shared(cid) or self._check(cid)
        return self._known[cid]

    def _shared(self, cid):
        path = _shared_path(cid)
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return f.read()

    def _check(self, cid):
        d, c = self._claims[cid]
        verdict = check(d, c, diagnose=False, floats=False).verdict
        path = _shared_path(cid)
        if path:   # written whole, then renamed: a reader never sees half a file
            with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as f:
                f.write(verdict)
            os.replace(f"{path}.{os.getpid()}", path)
        return verdict

    def __iter__(self):
        return iter(self._claims)

    def __len__(self):
        return len(self._claims)


def _shared_path(cid):
    if SHARED_DIR:
        return os.path.join(SHARED_DIR, hashlib.sha1(cid.encode()).hexdigest())


@functools.lru_cache(maxsize=None)
def verdicts():
    """claim id -> verdict at the default exact sizes (no diagnosis, no floats)."""
    return _Verdicts()


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
