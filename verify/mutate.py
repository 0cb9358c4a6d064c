"""Systematic mutations of a claim's formula: the mistakes people make when
deriving by hand.  Used to show that the checker reports each of them."""
from __future__ import annotations

import dataclasses
from typing import Iterator, Tuple

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from .evaluate import BlockEval, EvalError, Point
from .fields import ModP, ZeroDivision

OPERATORS = ("transpose", "mask", "state", "arrow", "drop", "swap", "sign")


def _children_fields(node):
    if not dataclasses.is_dataclass(node):
        return []
    return [f.name for f in dataclasses.fields(node) if isinstance(getattr(node, f.name), ir.Expr)]


def _positions(e, path=()):
    yield path, e
    for name in _children_fields(e):
        if isinstance(e, ir.Adj):
            continue  # the adjoint's target is not part of the formula
        yield from _positions(getattr(e, name), path + (name,))


def _replace(e, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    return dataclasses.replace(e, **{head: _replace(getattr(e, head), rest, new)})


def _twin(var: ir.Var, deriv: Derivation, prog_name: str):
    """The Var with the opposite arrow over the same base tile, if the program has one."""
    want = {"<": ">", ">": "<"}[var.arrow]
    prog = deriv.programs[prog_name]
    for c in deriv.claims:
        for e in (c.rhs, c.lhs):
            for n in ir.walk(e):
                if isinstance(n, ir.Var) and n.arrow == want and n.base == var.base \
                        and n.name in prog.names():
                    return n
    return None


def mutants(claim: Claim, deriv: Derivation) -> Iterator[Tuple[str, str, ir.Expr]]:
    """(operator, description, mutated rhs) for every applicable site."""
    state = ir.Var("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^{C}")
    prev = ir.Var("S_prev", "Dv", "Dk", r"\mathbf{S}_{[t-1]}^{C}")
    for path, n in _positions(claim.rhs):
        at = "/".join(path) or "root"
        sub = lambda new: _replace(claim.rhs, path, new)  # noqa: E731
        if isinstance(n, ir.MatMul):
            yield "transpose", f"transpose left operand at {at}", sub(ir.MatMul(ir.Transpose(n.a), n.b))
            yield "transpose", f"transpose right operand at {at}", sub(ir.MatMul(n.a, ir.Transpose(n.b)))
            yield "swap", f"swap product operands at {at}", sub(ir.MatMul(n.b, n.a))
        if isinstance(n, ir.Mask):
            other = {"M": "M-1", "M-1": "M", "MT": "M"}[n.kind]
            yield "mask", f"mask {n.kind} -> {other} at {at}", sub(ir.Mask(n.a, other))
        if isinstance(n, ir.Var) and n.name in ("S_prev", "S"):
            yield "state", f"S_[t-1] <-> S_[t] at {at}", sub(state if n.name == "S_prev" else prev)
        if isinstance(n, ir.Var) and n.arrow:
            tw = _twin(n, deriv, claim.program)
            if tw is not None:
                yield "arrow", f"{n.name} -> {tw.name} at {at}", sub(tw)
        if isinstance(n, (ir.Add, ir.Sub)):
            yield "drop", f"drop right term at {at}", sub(n.a)
            yield "drop", f"drop left term at {at}", sub(n.b if isinstance(n, ir.Add) else ir.Neg(n.b))
            flip = ir.Sub(n.a, n.b) if isinstance(n, ir.Add) else ir.Add(n.a, n.b)
            yield "sign", f"flip sign at {at}", sub(flip)
        if isinstance(n, ir.Neg):
            yield "sign", f"drop minus at {at}", sub(n.a)


def equivalent(deriv: Derivation, claim: Claim, rhs2: ir.Expr, seed=1) -> bool:
    """Whether a mutant formula equals the original one identically (decided
    exactly at a random point over every chunk and index); such mutants are
    not mistakes and are not counted."""
    from .check import _adjoint_fn, _bindings, _blocks
    prog = deriv.programs[claim.program]
    for attempt in range(5):
        rng = np.random.default_rng(seed * 31 + attempt)
        f = ModP(rng)
        pt = Point(deriv, claim.recurrence, f, _sizes(), rng,
                   zero_init="zero_initial_state" in claim.assume)
        try:
            shared = {}
            for b in _blocks(claim, prog, pt.sizes):
                ev = BlockEval(pt, prog, b, f, adjoints=_adjoint_fn(pt, prog), shared=shared)
                for env in _bindings(claim, ev.idx_env()):
                    if not f.equal(ev.ev(claim.rhs, env), ev.ev(rhs2, env)):
                        return False
            return True
        except ZeroDivision:
            continue
        except (EvalError, ir.ShapeError, ValueError):
            return False
    return False


def _sizes():
    from .check import EXACT_SIZES
    return EXACT_SIZES
