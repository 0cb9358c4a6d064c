"""Systematic mutations of a claim's formula: the mistakes people make when
deriving by hand.  Used to show that the checker reports each of them."""
from __future__ import annotations

import dataclasses
from typing import Iterator, Tuple

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from chunkproof.derivations.visitor import Visitor
from .levels import EXACT_SIZES
from .evaluate import EvalError, Point
from .fields import ModP, ZeroDivision
from .sites import sites

OPERATORS = ("transpose", "mask", "state", "arrow", "drop", "swap", "sign")


class _Positions(Visitor):
    """(path of field names, node) for every node of a formula, parents first."""

    def visit_Expr(self, e, path):
        yield path, e
        for f in dataclasses.fields(e):
            child = getattr(e, f.name)
            if isinstance(child, ir.Expr):
                yield from self.visit(child, path + (f.name,))

    def visit_Adj(self, e, path):
        yield path, e  # the adjoint's target is not part of the formula


_POSITIONS = _Positions()


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


class _Mistakes(Visitor):
    """``visit(n, sub, at, ...)`` yields (operator, description, mutated rhs) for the
    mistakes one can make at node n; ``sub(new)`` is the rhs with n replaced."""

    def visit_Expr(self, n, sub, at, claim, deriv):
        return ()

    def visit_MatMul(self, n, sub, at, claim, deriv):
        yield "transpose", f"transpose left operand at {at}", sub(ir.MatMul(ir.Transpose(n.a), n.b))
        yield "transpose", f"transpose right operand at {at}", sub(ir.MatMul(n.a, ir.Transpose(n.b)))
        yield "swap", f"swap product operands at {at}", sub(ir.MatMul(n.b, n.a))

    def visit_Mask(self, n, sub, at, claim, deriv):
        other = {"M": "M-1", "M-1": "M", "MT": "M"}[n.kind]
        yield "mask", f"mask {n.kind} -> {other} at {at}", sub(ir.Mask(n.a, other))

    def visit_Var(self, n, sub, at, claim, deriv):
        if n.name in ("S_prev", "S"):
            yield "state", f"S_[t-1] <-> S_[t] at {at}", sub(_STATE if n.name == "S_prev" else _PREV)
        if n.arrow:
            tw = _twin(n, deriv, claim.program)
            if tw is not None:
                yield "arrow", f"{n.name} -> {tw.name} at {at}", sub(tw)

    def visit_Add(self, n, sub, at, claim, deriv):
        yield "drop", f"drop right term at {at}", sub(n.a)
        yield "drop", f"drop left term at {at}", sub(n.b)
        yield "sign", f"flip sign at {at}", sub(ir.Sub(n.a, n.b))

    def visit_Sub(self, n, sub, at, claim, deriv):
        yield "drop", f"drop right term at {at}", sub(n.a)
        yield "drop", f"drop left term at {at}", sub(ir.Neg(n.b))
        yield "sign", f"flip sign at {at}", sub(ir.Add(n.a, n.b))

    def visit_Neg(self, n, sub, at, claim, deriv):
        yield "sign", f"drop minus at {at}", sub(n.a)


_STATE = ir.Var("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^{C}")
_PREV = ir.Var("S_prev", "Dv", "Dk", r"\mathbf{S}_{[t-1]}^{C}")
_MISTAKES = _Mistakes()


def mutants(claim: Claim, deriv: Derivation) -> Iterator[Tuple[str, str, ir.Expr]]:
    """(operator, description, mutated rhs) for every applicable site."""
    for path, n in _POSITIONS.visit(claim.rhs, ()):
        sub = lambda new, path=path: _replace(claim.rhs, path, new)  # noqa: E731
        yield from _MISTAKES.visit(n, sub, "/".join(path) or "root", claim, deriv)


def equivalent(deriv: Derivation, claim: Claim, rhs2: ir.Expr, seed=1) -> bool:
    """Whether a mutant formula equals the original one identically (decided
    exactly at a random point over every chunk and index); such mutants are
    not mistakes and are not counted."""
    prog = deriv.programs[claim.program]
    for attempt in range(5):
        rng = np.random.default_rng(seed * 31 + attempt)
        f = ModP(rng)
        pt = Point.sample(deriv, claim.recurrence, f, EXACT_SIZES, rng,
                          zero_init="zero_initial_state" in claim.assume)
        try:
            for _, ev, env in sites(pt, claim, prog):
                if not f.equal(ev.ev(claim.rhs, env), ev.ev(rhs2, env)):
                    return False
            return True
        except ZeroDivision:
            continue
        except (EvalError, ir.ShapeError, ValueError):
            return False
    return False
