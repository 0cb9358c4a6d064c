"""The candidate edits of a line that does not hold, in the order the search tries
them: the mutation operators run backwards (mutate.local_edits), and the edits
that need the derivation's vocabulary (another tile or adjoint of the same shape,
a missing term, a missing factor, a cut range)."""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, List, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from chunkproof.derivations.latex import to_latex
from . import programs
from .mutate import _POSITIONS, Edit, local_edits

LHS_LATER = 2.5           # added to the cost of an edit of a line's left side


# ---------------------------------------------------------------- vocabulary
def _evaluable(deriv: Derivation, claim: Claim) -> set:
    prog = deriv.programs[claim.program]
    rec = deriv.recurrences[claim.recurrence]
    names = set(prog.names()) | {"S_prev", "dO"} | set(rec.parameters())
    for i in rec.inputs:
        names |= {i.seq, i.step}
    return names


def _summands(e):
    """The terms of a sum, signs dropped (a term is tried added and subtracted)."""
    if isinstance(e, (ir.Add, ir.Sub)):
        yield from _summands(e.a)
        yield from _summands(e.b)
    elif isinstance(e, (ir.Neg, ir.Tex)):
        yield from _summands(e.a)
    else:
        yield e


def _names_in(e):
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Var)}


def _shape(e):
    try:
        return e.shape()
    except (ir.ShapeError, KeyError, AttributeError, IndexError):
        return None


class Vocabulary:
    """What a line of this derivation can be made of: tiles and adjoints by shape,
    terms (summands of other lines and of the program's definitions, those about
    the same target first), the global / chunk form of each input tile.  Lines in
    ``exclude`` and every correction are left out: a suggestion must not be read
    off the answer."""

    def __init__(self, deriv: Derivation, claim: Claim, exclude=(), derived=None):
        ok = _evaluable(deriv, claim)
        prog = deriv.programs[claim.program]
        others = [c for c in deriv.claims if c.id not in exclude and c.id != claim.id
                  and c.corrected_of is None and c.kind != programs.KIND]
        same = [c for c in others if c.program == claim.program]
        exprs = [e for c in same for e in (c.lhs, c.rhs)] + [e for _, e in prog.defs]
        self.tiles: Dict[tuple, ir.Var] = {}
        self.vars: Dict[tuple, List[ir.Var]] = {}
        self.adjs: Dict[tuple, List[ir.Adj]] = {}
        for e in exprs + [claim.lhs, claim.rhs]:
            for n in ir.walk(e):
                if type(n) in (ir.Var, ir.Param) and n.name in ok:
                    self.tiles.setdefault((n.name, n.rows), n)
                    _add(self.vars, n.shape(), n)
                elif isinstance(n, ir.Adj) and n.var.name in ok:
                    _add(self.adjs, n.shape(), n)
        target = _target(claim)
        self.derived = set(_summands(derived)) if derived is not None else set()
        # the derivation's own lines about the same target first (their notation), then
        # the derived formula's terms, then the rest
        ranked = [(0.5, t) for t in _summands(derived)] if derived is not None else []
        for c in same:
            near = 0 if target is not None and _target(c) == target else 1
            for side in ((c.rhs,) if c.kind == "adjoint" else (c.lhs, c.rhs)):
                ranked += [(near, t) for t in _summands(side)]
        ranked += [(2, t) for _, e in prog.defs for t in _summands(e)]
        # then lines on other programs of the derivation (the terms their tiles allow
        # here), and the inner sums of every line: a term dropped inside parentheses
        ranked += [(3, t) for c in others if c.program != claim.program
                   for side in (c.lhs, c.rhs) for t in _summands(side)]
        ranked += [(4, t) for c in others for side in (c.lhs, c.rhs) for n in ir.walk(side)
                   if isinstance(n, (ir.Add, ir.Sub)) for t in _summands(n)]
        self.terms: Dict[tuple, List[ir.Expr]] = {}
        seen = set()
        for _, t in sorted(ranked, key=lambda p: p[0]):
            if t in seen or isinstance(t, (ir.Zeros, ir.Eye, ir.RowRec)) or not _names_in(t) <= ok:
                continue
            seen.add(t)
            s = _shape(t)
            if s is not None:
                self.terms.setdefault(s, []).append(t)


def _add(table, shape, node):
    lst = table.setdefault(shape, [])
    if node not in lst:
        lst.append(node)


def _target(c: Claim):
    """The tile an adjoint line is about; its "from X" parts are about it too."""
    return c.lhs.var.name if c.kind == "adjoint" else None


def _factors(claim: Claim):
    """Square factors the line itself uses (Diag(...), an inverse, a square tile),
    and the tiles it multiplies or divides by elementwise: a missing factor is
    usually one written elsewhere in the same line."""
    mat, had = [], []
    for e in (claim.lhs, claim.rhs):
        for n in ir.walk(e):
            if isinstance(n, (ir.DiagM, ir.Inv)) or (type(n) is ir.Var and n.rows == n.cols != "1"):
                if n not in mat:
                    mat.append(n)
            if isinstance(n, (ir.Had, ir.HDiv)) and type(n.b) is ir.Var and n.b not in had:
                had.append(n.b)
    return mat, had


# ---------------------------------------------------------------- candidates
def vocabulary_edits(e: ir.Expr, voc: Vocabulary, claim: Claim) -> Iterator[Edit]:
    mat, had = _factors(claim)
    for path, n in _POSITIONS.visit(e, ()):
        s = _shape(n)
        if s is None:
            continue
        if type(n) in (ir.Var, ir.Param):
            for v in voc.vars.get(s, ()):
                if v.name != n.name:
                    yield Edit("symbol", f"another tile of the same shape, {n.name} -> {v.name}", path, v,
                               tier=1, delta=lambda n=n, v=v: v - n)
            for v in voc.vars.get(s, ()):
                if v.name != n.name:
                    yield Edit("symbol", f"another tile, transposed, {n.name} -> {v.name}^T", path,
                               ir.Transpose(v), tier=2)
        if isinstance(n, ir.Adj):
            for a in voc.adjs.get(s, ()):
                if a != n:
                    yield Edit("symbol", "another adjoint of the same shape", path, a, tier=1,
                               delta=lambda n=n, a=a: a - n)
        if s == ("1", "1"):
            for d in ("Dk", "Dv", "C"):
                # well-formed only where a d x d tile is wanted: in an ill-formed line
                yield Edit("scalar", f"scalar -> scalar times I_{d}", path, ir.Scale(n, ir.Eye(d)))
        # a missing term: where a sum is, first (root or an existing sum), then anywhere
        at_sum = not path or isinstance(n, (ir.Add, ir.Sub))
        for k, t in enumerate(voc.terms.get(s, ())):
            if t is n:
                continue
            # in the pool's order (terms of lines about the same tile first)
            tier = (2 if at_sum else 3) + 0.001 * k
            src = " of the derived formula" if t in voc.derived else ""
            yield Edit("term", f"add a term{src}", path, ir.Add(n, t), tier=tier, delta=lambda t=t: t,
                       word="missing")
            yield Edit("term", f"subtract a term{src}", path, ir.Sub(n, t), tier=tier,
                       delta=lambda t=t: ir.Neg(t), word="missing")
        for f in mat:
            fs = _shape(f)
            if fs == (s[1], s[1]):
                yield Edit("factor", f"times {to_latex(f)} on the right", path, ir.MatMul(n, f), tier=3)
            if fs == (s[0], s[0]):
                yield Edit("factor", f"times {to_latex(f)} on the left", path, ir.MatMul(f, n), tier=3)
        for g in had:
            if _shape(g) == s and g is not n:
                yield Edit("factor", f"(.) {to_latex(g)}", path, ir.Had(n, g), tier=3)
                yield Edit("factor", f"(/) {to_latex(g)}", path, ir.HDiv(n, g), tier=3)


def _replace(e, path, new):
    """``e`` with the node at ``path`` replaced; a Tex label on the way is dropped,
    since it would print the note's old LaTeX over the edited formula."""
    if not path:
        return new
    if isinstance(e, ir.Tex):
        return _replace(e.a, path[1:], new)
    head, rest = path[0], path[1:]
    return dataclasses.replace(e, **{head: _replace(getattr(e, head), rest, new)})


def candidates(deriv, claim, voc) -> List[Tuple[str, Edit]]:
    """(side, edit) in the order tried: by tier (node-local slips, then another
    tile, then a missing term or factor where a sum is, then anywhere), the right
    side before the left; an adjoint's left side is its target and is not edited."""
    sides = ["rhs"] + ([] if claim.kind == "adjoint" else ["lhs"])
    out = []
    sizes = {}
    for side in sides:
        e = getattr(claim, side)
        for ed in list(local_edits(e, voc.tiles)) + list(vocabulary_edits(e, voc, claim)):
            out.append((_cost(ed, _at(e, ed.path), sizes), side, ed))
    out += [(3, "over", ed) for ed in range_edits(claim)]
    # the left side of an identity is usually what the line is about: an edit there
    # comes after the right side's edits up to a missing term at a sum
    out = [(cost + (LHS_LATER if side == "lhs" else 0), side, ed) for cost, side, ed in out]
    order = {s: i for i, s in enumerate(sides + ["over"])}
    out.sort(key=lambda p: (p[0], order[p[1]]))
    return [(side, ed) for _, side, ed in out]


def _cost(ed: Edit, old, memo) -> float:
    """The tier, plus a little for each node the edit adds or removes: dropping a
    whole term is a larger edit than wrapping a scalar in I.  A missing term counts
    as one, whatever its size: the pool's order ranks those."""
    if ed.op == "term":
        return ed.tier + 0.2
    cost = ed.tier + 0.2 * abs(_size(ed.new, memo) - _size(old, memo))
    if ed.op == "swap" and _shape(ed.new) != _shape(old):
        cost += 0.5   # an inner product made outer (k^T k -> k k^T) changes what the line is
    return cost


def _size(e, memo):
    hit = memo.get(id(e))
    if hit is None:
        n = 1 + sum(_size(c, memo) for c in e.children())
        hit = memo[id(e)] = (e, n)   # the node is kept, so that its id is not reused
    return hit[1]


def range_edits(claim: Claim) -> Iterator[Edit]:
    """A quantifier's range cut at another index it is bound after: the line may
    hold for tau < t only, where it claims every tau != t."""
    for k, (var, lo, hi) in enumerate(claim.over):
        for u, _, _ in claim.over[:k]:
            for lo2, hi2 in ((lo, f"{u}-1"), (lo, u), (u, hi), (f"{u}+1", hi)):
                if (lo2, hi2) != (lo, hi):
                    over = claim.over[:k] + ((var, lo2, hi2),) + claim.over[k + 1:]
                    yield Edit("range", f"{var} = {lo}..{hi} -> {lo2}..{hi2}", (), over, tier=3)


def _at(e, path):
    for p in path:
        e = getattr(e, p)
    return e
