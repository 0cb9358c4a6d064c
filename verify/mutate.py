"""Systematic mutations of a claim's formula: the mistakes people make when
deriving by hand.  Used to show that the checker reports each of them."""
from __future__ import annotations

import dataclasses
import re
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


# ---------------------------------------------------------------- repairs
# The inverse direction: edits at one node that undo the mistakes above and their
# relatives (a missing transpose, an extra one, an index off by one or global where
# the chunk's row is meant, inclusive where exclusive was meant).  repair.py adds
# the edits that need the derivation's vocabulary (another tile, a missing term)
# and searches them; nothing here checks a value.

@dataclasses.dataclass(frozen=True)
class Edit:
    """One edit at one node: ``new`` replaces the node at ``path`` of one side.
    ``tier`` orders the search (a fraction ranks within a tier).  ``delta`` (a
    function giving new minus old, where that reads more simply than the two; built
    only when shown) and ``word`` ('missing', 'extra', or '') are for the residual
    in named tiles."""
    op: str
    desc: str
    path: Tuple[str, ...]
    new: ir.Expr
    tier: float = 0
    delta: object = None
    word: str = ""


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIZES = {"C", "T", "L", "Dk", "Dv"}
_FLIPS = ((">=", ">"), ("<=", "<"), (">", ">="), ("<", "<="))


def index_variants(s: str):
    """Index expressions one slip away from ``s``: a bound variable one off, global
    where the chunk's row is meant (or back), the whole index one off, a strict
    inequality for a weak one."""
    out = []
    for m in _IDENT.finditer(s):
        v = m.group()
        if v in _SIZES:
            continue
        subs = [f"({v}-1)", f"({v}+1)"] + ([] if v == "t" else [f"({v}-t*C)", f"(t*C+{v})"])
        out += [s[:m.start()] + x + s[m.end():] for x in subs]
    out += [f"({s})-1", f"({s})+1"]
    if "t*C+" in s:
        out.append(s.replace("t*C+", "", 1))
    for a, b in _FLIPS:
        i = s.find(a)
        if i >= 0 and not (a in (">", "<") and s[i:i + 2] in (">=", "<=")):
            out.append(s[:i] + b + s[i + len(a):])
    base = _tidy(s)
    return list(dict.fromkeys(t for t in map(_tidy, out) if t != base))


_ARITH = re.compile(r"[A-Za-z0-9_+\-*() ]+")


def _tidy(s: str) -> str:
    """An index as a reader would write it: 't*C+((i-t*C))' is 'i'.  Only sums and
    products are simplified (sympy), and only where that is shorter; a comparison or
    a floor division is left as it is."""
    if not _ARITH.fullmatch(s):
        return s
    import sympy as sp   # verify loads sympy already (residual.py)
    try:
        names = {v: sp.Symbol(v) for v in _IDENT.findall(s)}
        t = str(sp.parse_expr(s, local_dict=names)).replace(" ", "")
    except Exception:  # noqa: BLE001 - an index sympy cannot read is shown as written
        return s
    while s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]):
        s = s[1:-1]
    return t if len(t) < len(s) else s


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


_MASKS = ("M", "M-1", "MT")


class _Fixes(Visitor):
    """``visit(n, at, tiles)`` yields the Edits at node n (path ``at``) that need
    nothing but the node; ``tiles`` maps a tile's (name, rows) to its Var, for the
    global <-> chunk row toggle."""

    def visit_Expr(self, n, at, tiles):
        return ()

    def visit_MatMul(self, n, at, tiles):
        yield Edit("swap", "swap the product's operands", at, ir.MatMul(n.b, n.a))

    def visit_HDiv(self, n, at, tiles):
        yield Edit("hadamard", "(/) -> (.)", at, ir.Had(n.a, n.b))

    def visit_Had(self, n, at, tiles):
        yield Edit("hadamard", "(.) -> (/)", at, ir.HDiv(n.a, n.b))

    def visit_Transpose(self, n, at, tiles):
        yield Edit("transpose", "remove a transpose", at, n.a)

    def visit_Inv(self, n, at, tiles):
        yield Edit("inverse", "remove an inverse", at, n.a)

    def visit_Mask(self, n, at, tiles):
        for k in _MASKS:
            if k != n.kind:
                yield Edit("mask", f"mask {n.kind} -> {k}", at, ir.Mask(n.a, k))
        yield Edit("mask", f"remove the mask {n.kind}", at, n.a, tier=1)

    def visit_Var(self, n, at, tiles):
        if n.name in ("S_prev", "S"):
            # the derivation's own tile where it has one: its label, not ours
            other = "S" if n.name == "S_prev" else "S_prev"
            new = tiles.get((other, n.rows)) or (_STATE if n.name == "S_prev" else _PREV)
            yield Edit("state", "S_[t-1] <-> S_[t]", at, new)
        yield Edit("index", f"{n.name} -> {n.name}_[t+1]", at, ir.Shift(n, 1), tier=1)
        yield Edit("index", f"{n.name} -> {n.name}_[t-1]", at, ir.Shift(n, -1), tier=1)

    def visit_Add(self, n, at, tiles):
        yield Edit("sign", "+ -> -", at, ir.Sub(n.a, n.b), delta=lambda: -2 * n.b)
        yield Edit("drop", "remove the right term", at, n.a, delta=lambda: ir.Neg(n.b), word="extra")
        yield Edit("drop", "remove the left term", at, n.b, delta=lambda: ir.Neg(n.a), word="extra")

    def visit_Sub(self, n, at, tiles):
        yield Edit("sign", "- -> +", at, ir.Add(n.a, n.b), delta=lambda: 2 * n.b)
        yield Edit("drop", "remove the right term", at, n.a, delta=lambda: n.b, word="extra")
        yield Edit("drop", "remove the left term", at, ir.Neg(n.b), delta=lambda: ir.Neg(n.a), word="extra")

    def visit_Neg(self, n, at, tiles):
        yield Edit("sign", "remove a minus", at, n.a, delta=lambda: 2 * n.a)

    def _cumulative(self, n, at, other, name):
        yield Edit("cumsum", f"{name}: inclusive -> exclusive", at, ir.Sub(n, n.a), delta=lambda: ir.Neg(n.a))
        yield Edit("cumsum", f"{name} -> the other direction", at, other(n.a), tier=1)

    def visit_CumSum(self, n, at, tiles):
        yield from self._cumulative(n, at, ir.RevCumSum, "cumsum")

    def visit_RevCumSum(self, n, at, tiles):
        yield from self._cumulative(n, at, ir.CumSum, "suffix sum")

    def visit_CumProd(self, n, at, tiles):
        yield Edit("cumsum", "cumprod: inclusive -> exclusive", at, ir.HDiv(n, n.a))

    def visit_Row(self, n, at, tiles):
        # the global <-> chunk toggle first: it keeps the note's index as written
        if isinstance(n.a, ir.Var):
            rows = "C" if n.glob else "L"
            other = tiles.get((n.a.name, rows))
            if other is not None:
                where = "the chunk's row" if n.glob else "the global step"
                yield Edit("index", f"{n.a.name}^{n.idx}: {where}", at, ir.Row(other, n.idx, not n.glob))
        for s in index_variants(n.idx):
            yield Edit("index", f"row {n.idx} -> {s}", at, dataclasses.replace(n, idx=s))

    def _bounds(self, n, at, fields_):
        for fld in fields_:
            for s in index_variants(getattr(n, fld)):
                yield Edit("index", f"{fld} {getattr(n, fld)} -> {s}", at, dataclasses.replace(n, **{fld: s}))

    def visit_Sum(self, n, at, tiles):
        yield from self._bounds(n, at, ("lo", "hi"))

    visit_Prod = visit_Sum

    def visit_SubBlock(self, n, at, tiles):
        yield from self._bounds(n, at, ("bi", "bj") if n.bj else ("bi",))

    def visit_Truth(self, n, at, tiles):
        if n.idx:
            yield from self._bounds(n, at, ("idx",))

    def visit_Shift(self, n, at, tiles):
        yield Edit("index", f"t+{n.k} -> t", at, n.a)
        for k in (n.k - 1, n.k + 1, -n.k):
            if k and k != n.k:
                yield Edit("index", f"t+{n.k} -> t+{k}", at, ir.Shift(n.a, k))


_FIXES = _Fixes()


def _square_like(n):
    try:
        r, c = n.shape()
    except ir.ShapeError:
        return None
    return r == c and r != "1"


def local_edits(e: ir.Expr, tiles=None, wrap=True) -> Iterator[Edit]:
    """Every one-node edit of ``e``.  With ``wrap``, also the edits that put
    something around a node: a transpose, an inverse or a mask over a square
    tile, a minus (these are later tiers: the node-local ones come first)."""
    tiles = tiles or {}
    for path, n in _POSITIONS.visit(e, ()):
        yield from _FIXES.visit(n, path, tiles)
        if not wrap or isinstance(n, ir.Tex):
            continue
        if not isinstance(n, ir.Transpose):
            yield Edit("transpose", "add a transpose", path, ir.Transpose(n), tier=1)
        if not isinstance(n, ir.Neg):
            yield Edit("sign", "add a minus", path, ir.Neg(n), tier=1, delta=lambda n=n: -2 * n)
        if _square_like(n) and not isinstance(n, (ir.Inv, ir.Eye)):
            yield Edit("inverse", "invert", path, ir.Inv(n), tier=2)
            if n.shape() == ("C", "C") and not isinstance(n, ir.Mask):
                for k in _MASKS:
                    yield Edit("mask", f"add the mask {k}", path, ir.Mask(n, k), tier=2)
