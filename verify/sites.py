"""Where a claim is evaluated: the blocks it quantifies over and every binding of
its index variables, in each block's evaluator."""
from __future__ import annotations

from chunkproof.derivations.dsl import Claim
from .adjoints import adjoint_fn
from .evaluate import BlockEval, Point, Sizes, idx_value


def blocks(claim: Claim, prog, sizes: Sizes):
    n = sizes.N if prog.block == "chunk" else sizes.L
    if claim.blocks == "not_last":
        return range(n - 1)
    if claim.blocks == "first":
        return range(1)
    if claim.blocks == "not_first":
        return range(1, n)
    return range(n)


def bindings(claim: Claim, base_env: dict):
    """All assignments of the claim's index quantifiers."""
    def rec(i, env):
        if i == len(claim.over):
            yield dict(env)
            return
        var, lo, hi = claim.over[i]
        full = {**base_env, **env}
        for x in range(idx_value(lo, full), idx_value(hi, full) + 1):
            env[var] = x
            yield from rec(i + 1, env)
        env.pop(var, None)
    yield from rec(0, {})


def sites(pt: Point, claim: Claim, prog):
    """(block, evaluator, binding) for every place the claim speaks of at ``pt``;
    adj() nodes in its formulas read the point's true adjoints."""
    shared = {}
    adjf = adjoint_fn(pt)
    for b in blocks(claim, prog, pt.sizes):
        ev = BlockEval(pt, prog, b, pt.field, adjoints=adjf, shared=shared)
        for env in bindings(claim, ev.idx_env()):
            yield b, ev, env
