"""Whether the pieces of a tile stated in parts cover the tile the program needs.

A claim may state only part of a tile: some rows (``row(X, "r")`` over r), the
entries below the diagonal (``tril(X, "M-1")``, or ``row(row(X.T, "j"), "i")`` over
i > j), its diagonal (``ir.DiagV``), some sub-chunk blocks (P_[t][tau] for tau < t),
some chunks (``blocks="not_last"``).  The checker decides each claim only where it
speaks, so a case analysis that forgets a case passes.  Here the claims that state
the same tile are grouped, the entries each states are computed at one concrete size
set, and their union is compared with the entries the program needs in every block.

Coverage is information about what is stated, never a verdict: it is computed from
the claims' left sides and quantifiers whether they hold or not, and no verdict reads
it.

The target of a claim is its left side once the part-taking nodes (Row, DiagV, Mask,
Transpose, SubBlock, Tex) are peeled off: a definition of the claim's program, an
adjoint (with its via / excl), or, for a sub-chunk block, the chunk-level formula the
block is taken from (``SubBlock(Ql, bt) @ SubBlock(Kr, bs).T * SubBlock(M, bt, bs)``
is block (bt, bs) of ``Ql Kr^T (.) M``).  Targets are compared by structure, per
program.  The entries needed are those not zero by construction (outside a mask, a
zero tile, off a Diag): ``tril(Q K^T)`` needs only the diagonal and below.  A literal
line whose ``.corrected`` twin states the same target counts through its twin.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from chunkproof.derivations.latex import to_latex
from .evaluate import EvalError, Sizes, idx_value
from .sites import bindings, blocks

ABOUT = "information, not a verdict"


@dataclass
class Coverage:
    """One group: the claims stating one tile, and what their union leaves out."""
    tile: str                     # the target, readable (a definition, δX, a formula's LaTeX)
    program: str
    sizes: str                    # the size set the entries were counted at
    pieces: List[str]             # ids of the claims counted
    covered: bool
    uncovered: str = ""           # the entries no piece states, in words ('' when covered)
    superseded: List[str] = field(default_factory=list)   # literal lines counted through their correction
    overlaps: List[Tuple[str, str]] = field(default_factory=list)

    def record(self) -> dict:
        return OrderedDict(tile=self.tile, program=self.program, sizes=self.sizes,
                           pieces=list(self.pieces), superseded=list(self.superseded),
                           covered=self.covered, uncovered=self.uncovered or None,
                           overlaps=[list(p) for p in self.overlaps], about=ABOUT)

    def line(self) -> str:
        said = "covers the tile" if self.covered else f"leaves entries uncovered: {self.uncovered}"
        s = (f"coverage of {self.tile} ({self.program}), pieces {', '.join(self.pieces)}: {said}"
             f" (at {self.sizes}; {ABOUT})")
        if self.superseded:
            s += f"; {', '.join(self.superseded)} counted through the correction"
        if self.overlaps:
            s += "; overlapping: " + ", ".join(f"{a} and {b}" for a, b in self.overlaps)
        return s


class _NotTarget(Exception):
    """The left side is not (a part of) a tile the program computes."""


# ------------------------------------------------------------------ the target
@dataclass(frozen=True)
class _Base:
    key: tuple
    label: str
    shape: Tuple[str, str]
    expr: ir.Expr                 # what the support (entries needed) is read from


# nodes that make a chunk formula depend on a quantified index or on another chunk:
# such a formula names a different tile at each binding, not one tile to cover
_NOT_IN_FORMULA = (ir.Row, ir.Sum, ir.Prod, ir.Stack, ir.RowRec, ir.Truth, ir.Shift,
                   ir.SumBlocks, ir.SubBlock, ir.Adj)


def _adj_label(a: ir.Adj) -> str:
    s = "δ" + a.var.name
    if a.via:
        s += " from " + ", ".join(a.via)
    if a.excl:
        s += " w/o " + ", ".join(a.excl)
    return s


def _leaf_target(e, prog) -> Optional[_Base]:
    if isinstance(e, ir.Adj) and isinstance(e.var, ir.Param) and not (e.via or e.excl):
        return None   # a parameter's gradient is one value for the whole sequence, no per-block tile
    if isinstance(e, ir.Adj):
        return _Base(("adj", e.var.name, tuple(e.via), tuple(e.excl)), _adj_label(e), e.var.shape(), e)
    if type(e) is ir.Var and e.name in prog.names():
        return _Base(("def", e.name), e.name, prog.expr(e.name).shape(), e)
    return None


def _formula_target(e) -> _Base:
    if not e.children() or any(isinstance(n, _NOT_IN_FORMULA) for n in ir.walk(e)):
        raise _NotTarget
    try:
        label = to_latex(e)
    except Exception:  # noqa: BLE001 - a label is cosmetic
        label = type(e).__name__
    return _Base(("formula", e), label, e.shape(), e)


def _rebuild(e, kids):
    """``e`` with its Expr-valued fields replaced, in order, by ``kids``."""
    it = iter(kids)
    new = {f.name: next(it) for f in dataclasses.fields(e) if isinstance(getattr(e, f.name), ir.Expr)}
    return dataclasses.replace(e, **new)


_ELEMENTWISE = (ir.Add, ir.Sub, ir.Had, ir.HDiv)
_UNARY = (ir.Neg, ir.Exp, ir.Log, ir.Tex)


def _lift(e, env):
    """(chunk formula W, row block, column block) with ``e`` = block (rb, cb) of W; a
    block index None is the whole extent.  Raises _NotTarget where ``e`` is not one
    block of one formula (a product summing over a single block, two different blocks
    added)."""
    if isinstance(e, ir.SubBlock):
        if any(isinstance(n, ir.SubBlock) for n in ir.walk(e.a)):
            raise _NotTarget
        return e.a, idx_value(e.bi, env), (idx_value(e.bj, env) if e.bj else None)
    if not any(isinstance(n, ir.SubBlock) for n in ir.walk(e)):
        return e, None, None
    if isinstance(e, ir.Transpose):
        w, r, c = _lift(e.a, env)
        return ir.Transpose(w), c, r
    if isinstance(e, ir.MatMul):
        wa, ra, ca = _lift(e.a, env)
        wb, rb, cb = _lift(e.b, env)
        if ca is not None or rb is not None:
            raise _NotTarget
        return _rebuild(e, (wa, wb)), ra, cb
    if isinstance(e, _ELEMENTWISE):
        wa, ra, ca = _lift(e.a, env)
        wb, rb, cb = _lift(e.b, env)
        if (ra, ca) != (rb, cb):
            raise _NotTarget
        return _rebuild(e, (wa, wb)), ra, ca
    if isinstance(e, _UNARY):
        w, r, c = _lift(e.a, env)
        return _rebuild(e, (w,)), r, c
    if isinstance(e, ir.Scale) and not any(isinstance(n, ir.SubBlock) for n in ir.walk(e.a)):
        w, r, c = _lift(e.b, env)
        return _rebuild(e, (e.a, w)), r, c
    raise _NotTarget


def _dims(shape, sizes: Sizes):
    return sizes.dim(shape[0]), sizes.dim(shape[1])


def _mask(kind, n, m):
    r, c = np.indices((n, m))
    return {"M": r >= c, "M-1": r > c, "MT": r <= c}[kind]


def _region(e, prog, env, sizes):
    """(target, index array): the left side's entries as flat indices into its
    target's tile (-1 where an entry is zero by the left side's own mask)."""
    base = _leaf_target(e, prog)
    if base is not None:
        n, m = _dims(base.shape, sizes)
        return base, np.arange(n * m).reshape(n, m)
    if isinstance(e, ir.Tex):
        return _region(e.a, prog, env, sizes)
    if isinstance(e, ir.Transpose):
        b, ix = _region(e.a, prog, env, sizes)
        return b, ix.T
    if isinstance(e, ir.Row) and not e.glob:
        b, ix = _region(e.a, prog, env, sizes)
        i = idx_value(e.idx, env)
        if not 1 <= i <= ix.shape[0]:
            raise _NotTarget
        return b, ix[i - 1:i, :].T
    if isinstance(e, ir.DiagV):
        b, ix = _region(e.a, prog, env, sizes)
        return b, np.diagonal(ix).reshape(-1, 1)
    if isinstance(e, ir.Mask):
        b, ix = _region(e.a, prog, env, sizes)
        ix = np.where(_mask(e.kind, *ix.shape), ix, -1)
        return b, ix
    if any(isinstance(n, ir.SubBlock) for n in ir.walk(e)):
        w, rb, cb = _lift(e, env)
        if rb is None and cb is None:
            raise _NotTarget
        # under a block, the formula is the target whole: a mask in it is the tile's
        # own (zero above the diagonal), not a part the claim takes
        b = _leaf_target(w, prog) or _formula_target(w)
        n, m = _dims(b.shape, sizes)
        return b, _block(np.arange(n * m).reshape(n, m), rb, cb, sizes.T)
    raise _NotTarget


def _block(ix, rb, cb, T):
    if rb is not None:
        if not 0 <= rb < ix.shape[0] // T:
            raise _NotTarget
        ix = ix[rb * T:(rb + 1) * T, :]
    if cb is not None:
        if not 0 <= cb < ix.shape[1] // T:
            raise _NotTarget
        ix = ix[:, cb * T:(cb + 1) * T]
    return ix


def _whole(e) -> bool:
    """The left side is its target itself, not a part of it."""
    while isinstance(e, ir.Tex):
        e = e.a
    return isinstance(e, ir.Adj) or type(e) is ir.Var


# ------------------------------------------------------------------ entries needed
def _support(e, prog, sizes, depth=0) -> np.ndarray:
    """Where ``e`` can be nonzero, from its structure (a mask, a zero tile, a Diag);
    everything else may be nonzero anywhere."""
    n, m = _dims(e.shape(), sizes)
    if depth > 64:
        return np.ones((n, m), bool)
    rec = lambda x: _support(x, prog, sizes, depth + 1)  # noqa: E731
    if type(e) is ir.Var and prog.expr(e.name) is not None:
        return rec(prog.expr(e.name))
    if isinstance(e, ir.Zeros):
        return np.zeros((n, m), bool)
    if isinstance(e, (ir.Eye, ir.DiagM)):
        return np.eye(n, m, dtype=bool)
    if isinstance(e, ir.Mask):
        return rec(e.a) & _mask(e.kind, n, m)
    if isinstance(e, ir.Had):
        return rec(e.a) & rec(e.b)
    if isinstance(e, ir.HDiv):
        return rec(e.a)
    if isinstance(e, (ir.Add, ir.Sub)):
        return rec(e.a) | rec(e.b)
    if isinstance(e, (ir.Neg, ir.Tex)):
        return rec(e.a)
    if isinstance(e, ir.Transpose):
        return rec(e.a).T
    if isinstance(e, ir.Scale):
        return rec(e.b)
    if isinstance(e, ir.MatMul):
        return (rec(e.a).astype(np.int64) @ rec(e.b).astype(np.int64)) > 0
    return np.ones((n, m), bool)


# ------------------------------------------------------------------ one claim's entries
def _env(prog, sizes, b):
    # BlockEval.idx_env's names, without sampling a point: only indices are needed
    env = {"C": sizes.C, "T": sizes.T, "L": sizes.L, "Dk": sizes.Dk, "Dv": sizes.Dv}
    env["t"] = b if prog.block == "chunk" else b + 1
    return env


def _stated(claim: Claim, prog, sizes: Sizes):
    """(target, entries stated as a bool array [block, row, col], whether the claim
    states a part only), or None where the left side is not a tile's part."""
    if claim.kind not in ("forward", "adjoint", "identity"):
        return None
    nblocks = sizes.N if prog.block == "chunk" else sizes.L
    base, stated, part = None, None, claim.blocks != "all" or not _whole(claim.lhs)
    try:
        for b in blocks(claim, prog, sizes):
            for env in bindings(claim, _env(prog, sizes, b)):
                try:
                    tb, ix = _region(claim.lhs, prog, env, sizes)
                except _NotTarget:
                    if claim.over:
                        continue   # a binding outside the tile states nothing there
                    return None
                if base is None:
                    base = tb
                    stated = np.zeros((nblocks,) + _dims(tb.shape, sizes), bool)
                elif tb.key != base.key:
                    return None
                stated[b].flat[ix[ix >= 0]] = True
    except (EvalError, ir.ShapeError, KeyError, AttributeError, TypeError, ValueError):
        return None
    if base is None:
        return None
    return base, stated, part


# ------------------------------------------------------------------ in words
def _ranges(xs, one=1) -> str:
    """[0, 1, 2, 5] -> '1..3, 6' (``one``: the number of the first)."""
    xs = sorted(xs)
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        a, b = xs[i] + one, xs[j] + one
        out.append(str(a) if a == b else f"{a}..{b}")
        i = j + 1
    return ", ".join(out)


def _plural(word, xs):
    return word if len(xs) == 1 else word + "s"


def _entries_words(P) -> str:
    pos = [tuple(int(v) + 1 for v in p) for p in np.argwhere(P)]
    shown = ", ".join(f"({r},{c})" for r, c in pos[:6])
    return f"entries (row,col) {shown}" + (f", ... ({len(pos)} in all)" if len(pos) > 6 else "")


def _tile_words(P, need, T) -> str:
    """The entries P of one block's tile, in words (rows and columns from 1, sub-chunk
    blocks from 0, as the encodings count them)."""
    n, m = P.shape
    if (P == need).all():
        return "the whole tile"
    if n == m and n > 1:
        r, c = np.indices((n, m))
        for cand, words in ((r == c, "the diagonal"), (r < c, "the entries above the diagonal"),
                            (r <= c, "the diagonal and above"), (r > c, "the entries below the diagonal"),
                            (r >= c, "the diagonal and below")):
            if (P == (cand & need)).all():
                return words
    rows = [i for i in range(n) if P[i].any()]
    if rows and all((P[i] == need[i]).all() for i in rows):
        return f"{_plural('row', rows)} {_ranges(rows)}" + (" (the last)" if rows == [n - 1] and n > 1 else "")
    cols = [j for j in range(m) if P[:, j].any()]
    if cols and all((P[:, j] == need[:, j]).all() for j in cols):
        return f"{_plural('column', cols)} {_ranges(cols)}" + (" (the last)" if cols == [m - 1] and m > 1 else "")
    if T > 1 and n % T == 0 and m % T == 0 and (n // T > 1 or m // T > 1):
        words = _block_words(P, need, T)
        if words:
            return words
    return _entries_words(P)


def _block_words(P, need, T) -> str:
    nr, nc = P.shape[0] // T, P.shape[1] // T
    blk = lambda X, i, j: X[i * T:(i + 1) * T, j * T:(j + 1) * T]  # noqa: E731
    full, part = [], []
    for i in range(nr):
        for j in range(nc):
            p, nd = blk(P, i, j), blk(need, i, j)
            if not p.any():
                continue
            (full if (p == nd).all() else part).append((i, j))
    out = []
    if full:
        needed = {(i, j) for i in range(nr) for j in range(nc) if blk(need, i, j).any()}
        above = {(i, j) for i, j in needed if i < j}
        below = {(i, j) for i, j in needed if i > j}
        if set(full) == above:
            out.append("the sub-chunk blocks above the diagonal (bi < bj)")
        elif set(full) == below:
            out.append("the sub-chunk blocks below the diagonal (bi > bj)")
        else:
            out.append(f"{_plural('sub-chunk block', full)} " + ", ".join(f"({i},{j})" for i, j in full))
    if part:
        local = {blk(P, i, j).tobytes() for i, j in part}
        if len(local) != 1:
            return ""
        i0, j0 = part[0]
        inner = _tile_words(blk(P, i0, j0), blk(need, i0, j0), 1)
        if inner.startswith("entries"):
            return ""
        diag = [(i, i) for i in range(min(nr, nc)) if blk(need, i, i).any()]
        if part == diag:
            out.append(f"{inner} of each diagonal sub-chunk block")
        else:
            out.append(f"{inner} of {_plural('sub-chunk block', part)} "
                       + ", ".join(f"({i},{j})" for i, j in part))
    return " and ".join(out)


def describe(unc, need, T, unit="chunk") -> str:
    """The uncovered entries ``unc`` (bool [block, row, col]) of a tile whose entries
    needed are ``need`` (the same shape), in words: chunks from 0 (the encodings' t),
    steps from 1 (a step program's t)."""
    n = unc.shape[0]
    first = 0 if unit == "chunk" else 1
    by_pattern: Dict[bytes, list] = OrderedDict()
    for b in range(n):
        if unc[b].any():
            by_pattern.setdefault(unc[b].tobytes() + need[b].tobytes(), []).append(b)
    parts = []
    for bs in by_pattern.values():
        P, nd = unc[bs[0]], need[bs[0]]
        where = f"{_plural(unit, bs)} {_ranges(bs, one=first)}"
        if bs == [n - 1] and n > 1:
            where += " (the last)"
        elif bs == [0] and n > 1:
            where += " (the first)"
        if (P == nd).all():
            parts.append(f"all of {where}")
        else:
            scope = f"in every {unit}" if len(bs) == n else f"in {where}"
            parts.append(f"{_tile_words(P, nd, T)} {scope}")
    return "; ".join(parts)


# ------------------------------------------------------------------ groups
def groups(deriv: Derivation, sizes: Sizes) -> Dict[str, Coverage]:
    """claim id -> its group's Coverage, for the claims that state a tile in part
    (a group none of whose claims is a part has nothing to report)."""
    found: Dict[tuple, list] = OrderedDict()
    for c in deriv.claims:
        prog = deriv.programs.get(c.program)
        if prog is None:
            continue
        got = _stated(c, prog, sizes)
        if got is None:
            continue
        base, stated, part = got
        found.setdefault((c.program, base.key), []).append((c, base, stated, part))
    out: Dict[str, Coverage] = {}
    for (pname, _), members in found.items():
        if not any(part for *_, part in members):
            continue
        prog = deriv.programs[pname]
        base = members[0][1]
        superseded = [c.id for c, *_ in members if any(d.corrected_of == c.id for d, *_ in members)]
        counted = [(c, st) for c, _, st, _ in members if c.id not in superseded]
        parts = {c.id for c, _, _, part in members if part}
        n, m = _dims(base.shape, sizes)
        nblocks = counted[0][1].shape[0]
        one = _support(base.expr, prog, sizes) if base.key[0] != "adj" else np.ones((n, m), bool)
        need = np.broadcast_to(one, (nblocks, n, m))
        union = np.zeros_like(need)
        for _, st in counted:
            union = union | st
        unc = need & ~union
        # a whole-tile claim overlaps every piece by nature; two pieces stating the
        # same entries are two forms of one case, worth a word
        overlaps = [(a.id, b.id) for i, (a, sa) in enumerate(counted) for b, sb in counted[i + 1:]
                    if a.id in parts and b.id in parts and (sa & sb & need).any()]
        unit = "chunk" if prog.block == "chunk" else "step"
        cov = Coverage(base.label, pname, str(sizes), [c.id for c, _ in counted], not unc.any(),
                       "" if not unc.any() else describe(unc, need, sizes.T, unit),
                       superseded, overlaps)
        for c, _, _, part in members:
            if part:
                out[c.id] = cov
    return out


_CACHE: Dict[tuple, tuple] = {}


def coverage_of(deriv: Derivation, claim: Claim, sizes: Sizes) -> Optional[Coverage]:
    """The Coverage of ``claim``'s group, or None when it states a whole tile or no
    tile's part.  Cached per derivation and size set: every claim of it asks."""
    key = (id(deriv), tuple(id(c) for c in deriv.claims), sizes)
    hit = _CACHE.get(key)
    if hit is None:
        # the claims are kept alive so that their ids are not reused by others
        try:
            found = groups(deriv, sizes)
        except (ir.ShapeError, EvalError, ValueError, KeyError, IndexError, TypeError):
            found = {}   # information only: a derivation it cannot read still gets its verdicts
        hit = _CACHE[key] = (tuple(deriv.claims), found)
    return hit[1].get(claim.id)


def summary_line(results) -> str:
    """'coverage (information, not a verdict): 5 tiles stated in pieces; 2 leave entries
    uncovered: ...' ('' when no claim states a part of a tile)."""
    seen = OrderedDict()
    for r in results:
        cov = getattr(r, "coverage", None)
        if cov is not None:
            seen.setdefault((cov.program, cov.tile, tuple(cov.pieces)), cov)
    if not seen:
        return ""
    open_ = [c for c in seen.values() if not c.covered]
    s = f"coverage ({ABOUT}): {len(seen)} {'tile' if len(seen) == 1 else 'tiles'} stated in pieces"
    if not open_:
        return s + ", each covered"
    return s + f"; {len(open_)} {'leaves' if len(open_) == 1 else 'leave'} entries uncovered: " + "; ".join(
        f"{c.tile} ({c.program}): {c.uncovered}" for c in open_)


def groups_record(results) -> list:
    """Every group once, for the JSON report."""
    seen = OrderedDict()
    for r in results:
        cov = getattr(r, "coverage", None)
        if cov is not None:
            seen.setdefault((cov.program, cov.tile, tuple(cov.pieces)), cov)
    return [c.record() for c in seen.values()]
