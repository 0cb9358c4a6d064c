"""The formula IR: shape-checked expressions over chunk tiles.

Shapes are pairs of symbolic dimensions ('C', 'Dk', 'Dv', '1', 'T', 'L').
Vectors are columns (n x 1), scalars are 1 x 1, as in the notes.  A shape
mismatch raises :class:`ShapeError`, which the checker turns into the verdict
"ill-formed" (a derivation that multiplies a C x Dk tile by a Dv x Dk state is
wrong even when Dk happens to equal Dv).

Index expressions (``'t*C+r'``, ``'r-1'``) are small Python expressions over
bound index variables and sizes; the derivation files are trusted Python.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Tuple

from .latex import to_latex

Shape = Tuple[str, str]


class ShapeError(ValueError):
    """A formula combines operands whose symbolic shapes do not fit."""


def _fmt(s: Shape) -> str:
    return f"{s[0]}x{s[1]}"


class Expr:
    """Base of all IR nodes.  Operators build nodes, so formulas read like math.

    Nodes are immutable and compare and hash by structure: two nodes are equal when
    they are of one class with equal fields (their LaTeX labels included), so a
    subexpression can key a dict wherever it appears.  The hash is computed once."""

    def children(self):
        return ()

    def key(self) -> tuple:
        """The node's class and field values: what equality compares."""
        return (type(self),) + tuple(getattr(self, f.name) for f in fields(self))

    def __hash__(self):
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self.key())
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, o):
        if self is o:
            return True
        if type(o) is not type(self) or hash(o) != hash(self):
            return False
        return self.key() == o.key()

    def __ne__(self, o):
        return not self == o

    def map_children(self, f):
        """This node with every field that is an expression, x, replaced by f(x);
        itself when nothing changed."""
        changes = {}
        for fld in fields(self):
            val = getattr(self, fld.name)
            if isinstance(val, Expr):
                new = f(val)
                if new is not val:
                    changes[fld.name] = new
        return dataclasses.replace(self, **changes) if changes else self

    # -- operator sugar -------------------------------------------------
    def __add__(self, o):
        return Add(self, o)

    def __sub__(self, o):
        return Sub(self, o)

    def __neg__(self):
        return Neg(self)

    def __matmul__(self, o):
        return MatMul(self, o)

    def __mul__(self, o):  # the notes' odot, or a scalar times a tile (see times)
        return times(self, o) if isinstance(o, (Expr, int)) else NotImplemented

    def __rmul__(self, o):  # 2 * X
        return times(o, self) if isinstance(o, int) else NotImplemented

    def __truediv__(self, o):  # Hadamard division, the notes' oslash
        return HDiv(self, o)

    @property
    def T(self):
        return Transpose(self)

    def shape(self) -> Shape:
        raise NotImplementedError


def times(a, b) -> "Expr":
    """``a * b``: a 1 x 1 factor and a tile of another shape is a scalar times the tile
    (:class:`Scale`, in either order, as the notes juxtapose them); otherwise the
    Hadamard product.  The shapes are read here, at construction, so that the node
    is what it means everywhere after (printers, mutations, reverse mode).  An
    operand whose shape cannot be computed stays a Hadamard operand, and its
    shape() reports the error as it always did."""
    if isinstance(a, int):
        a = Const(a)
    if isinstance(b, int):
        b = Const(b)
    try:
        sa, sb = a.shape(), b.shape()
    except Exception:  # noqa: BLE001 - the error belongs to shape(), where it is a verdict
        return Had(a, b)
    if sa != sb and sa == ("1", "1"):
        return Scale(a, b)
    if sa != sb and sb == ("1", "1"):
        return Scale(b, a)
    return Had(a, b)


def _dims_equal(a: str, b: str) -> bool:
    return a == b


def _same(a: Shape, b: Shape, what: str, node) -> None:
    if not (_dims_equal(a[0], b[0]) and _dims_equal(a[1], b[1])):
        raise ShapeError(f"{what}: {_fmt(a)} vs {_fmt(b)} in {latex_of(node)}")


# ---------------------------------------------------------------- leaves
@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A named tile: a chunk input, a named definition, a state or a loss seed.

    ``arrow`` marks the left/right decayed pair of a tile ('<' or '>'), used by
    mutation testing to swap them."""
    name: str
    rows: str
    cols: str
    tex: str = ""
    arrow: str = ""
    base: str = ""

    def shape(self):
        return (self.rows, self.cols)


@dataclass(frozen=True, eq=False)
class Param(Var):
    """A tile constant over time (RetNet's decay, a scale, RWKV-6's bonus u): one
    value for every step and chunk, drawn at random per check point.  ``kind``
    picks sampling as for inputs ('any', 'gate', 'beta', 'loggate').  Its adjoint
    is the gradient summed over every step that reads it."""
    kind: str = "any"


@dataclass(frozen=True, eq=False)
class Adj(Expr):
    """The true adjoint dL/dX of a named tile, optionally only through the
    definitions in ``via`` (the notes' "from X" partial gradients)."""
    var: Var
    via: Tuple[str, ...] = ()
    excl: Tuple[str, ...] = ()
    tex: str = ""

    def __post_init__(self):
        if not isinstance(self.var, Var):
            raise TypeError(f"adj() takes a named tile (an input, S_prev, a definition or a "
                            f"parameter), not {type(self.var).__name__} {latex_of(self.var)}")

    def shape(self):
        return self.var.shape()


_TRUTH_SHAPES = {"state": ("Dv", "Dk"), "out": ("Dv", "1"), "outs": ("C", "Dv")}


@dataclass(frozen=True, eq=False)
class Truth(Expr):
    """A quantity of the unrolled recurrence: 'state' (Dv x Dk) or 'out' (Dv x 1)
    at the global 1-based step given by ``idx``; 'outs' the C x Dv outputs of
    the current chunk."""
    what: str
    idx: str = ""
    tex: str = ""

    def __post_init__(self):
        if self.what not in _TRUTH_SHAPES:
            raise ValueError(f"Truth({self.what!r}): the recurrence's quantities are "
                             f"{', '.join(map(repr, _TRUTH_SHAPES))}")

    def shape(self):
        return _TRUTH_SHAPES[self.what]


@dataclass(frozen=True, eq=False)
class Eye(Expr):
    n: str

    def shape(self):
        return (self.n, self.n)


@dataclass(frozen=True, eq=False)
class Zeros(Expr):
    rows: str
    cols: str

    def shape(self):
        return (self.rows, self.cols)


@dataclass(frozen=True, eq=False)
class Ones(Expr):
    rows: str
    cols: str

    def shape(self):
        return (self.rows, self.cols)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """An integer constant scalar (1 x 1)."""
    value: int

    def shape(self):
        return ("1", "1")


# ---------------------------------------------------------------- binary
@dataclass(frozen=True, eq=False)
class _Bin(Expr):
    a: Expr
    b: Expr

    def children(self):
        return (self.a, self.b)


class Add(_Bin):
    def shape(self):
        sa, sb = self.a.shape(), self.b.shape()
        _same(sa, sb, "sum of different shapes", self)
        return sa


class Sub(_Bin):
    def shape(self):
        sa, sb = self.a.shape(), self.b.shape()
        _same(sa, sb, "difference of different shapes", self)
        return sa


class Had(_Bin):
    def shape(self):
        sa, sb = self.a.shape(), self.b.shape()
        _same(sa, sb, "Hadamard product of different shapes", self)
        return sa


class HDiv(_Bin):
    def shape(self):
        sa, sb = self.a.shape(), self.b.shape()
        _same(sa, sb, "Hadamard division of different shapes", self)
        return sa


class MatMul(_Bin):
    def shape(self):
        sa, sb = self.a.shape(), self.b.shape()
        if not _dims_equal(sa[1], sb[0]):
            raise ShapeError(f"product {_fmt(sa)} @ {_fmt(sb)}: inner sizes "
                             f"{sa[1]} and {sb[0]} differ in {latex_of(self)}")
        return (sa[0], sb[1])


class Scale(_Bin):
    """Scalar (1 x 1) times a matrix, written as juxtaposition in the notes."""

    def shape(self):
        sa = self.a.shape()
        if sa != ("1", "1"):
            raise ShapeError(f"scalar factor has shape {_fmt(sa)} in {latex_of(self)}")
        return self.b.shape()


class Inner(_Bin):
    """<A, B> = Tr(A^T B), a scalar."""

    def shape(self):
        _same(self.a.shape(), self.b.shape(), "inner product of different shapes", self)
        return ("1", "1")


# ---------------------------------------------------------------- unary
@dataclass(frozen=True, eq=False)
class _Un(Expr):
    a: Expr

    def children(self):
        return (self.a,)


class Neg(_Un):
    def shape(self):
        return self.a.shape()


class Transpose(_Un):
    def shape(self):
        r, c = self.a.shape()
        return (c, r)


class Exp(_Un):
    def shape(self):
        return self.a.shape()


class Log(_Un):
    def shape(self):
        return self.a.shape()


def _square(node, s):
    if not _dims_equal(s[0], s[1]):
        raise ShapeError(f"needs a square matrix, got {_fmt(s)} in {latex_of(node)}")


class Inv(_Un):
    def shape(self):
        s = self.a.shape()
        _square(self, s)
        return s


class DiagM(_Un):
    """Diag(v): a column vector to a diagonal matrix."""

    def shape(self):
        r, c = self.a.shape()
        if c != "1":
            raise ShapeError(f"Diag() of a {r}x{c} matrix, not a vector, in {latex_of(self)}")
        return (r, r)


class DiagV(_Un):
    """diag(X): the diagonal of a square matrix as a column vector."""

    def shape(self):
        s = self.a.shape()
        _square(self, s)
        return (s[0], "1")


class CumProd(_Un):
    """Row-wise inclusive cumulative product along the chunk axis (Gamma from alpha)."""

    def shape(self):
        return self.a.shape()


class CumSum(_Un):
    def shape(self):
        return self.a.shape()


class RevCumSum(_Un):
    """Suffix sum along rows: row r is the sum of rows j >= r."""

    def shape(self):
        return self.a.shape()


class LastRow(_Un):
    """The last row of a tile, as a column vector (gamma^C from Gamma)."""

    def shape(self):
        return (self.a.shape()[1], "1")


class PlaceLast(_Un):
    """[0, ..., 0, v]^T: a C x d tile whose last row is the vector v."""

    def shape(self):
        r, c = self.a.shape()
        if c != "1":
            raise ShapeError(f"[0,...,v]^T needs a vector, got {r}x{c} in {latex_of(self)}")
        return ("C", r)


@dataclass(frozen=True, eq=False)
class Mask(Expr):
    """X odot M (kind 'M', lower with diagonal), M_{-1} ('M-1', strictly lower),
    or M^T ('MT')."""
    a: Expr
    kind: str = "M"

    def children(self):
        return (self.a,)

    def shape(self):
        s = self.a.shape()
        _square(self, s)
        return s


# ---------------------------------------------------------------- index level
@dataclass(frozen=True, eq=False)
class Row(Expr):
    """Row ``idx`` (1-based) of a tile, as a column vector: x_[t]^i from X_[t].
    With ``glob`` the tile is the whole sequence and idx a global step."""
    a: Expr
    idx: str
    glob: bool = False

    def children(self):
        return (self.a,)

    def shape(self):
        return (self.a.shape()[1], "1")


@dataclass(frozen=True, eq=False)
class Sum(Expr):
    var: str
    lo: str
    hi: str
    body: Expr

    def children(self):
        return (self.body,)

    def shape(self):
        return self.body.shape()


@dataclass(frozen=True, eq=False)
class Prod(Expr):
    """Ordered matrix product, increasing index from left to right."""
    var: str
    lo: str
    hi: str
    body: Expr

    def children(self):
        return (self.body,)

    def shape(self):
        s = self.body.shape()
        _square(self, s)
        return s


@dataclass(frozen=True, eq=False)
class Stack(Expr):
    """[x^1, ..., x^n]^T: rows var = 1..n of a column-vector body."""
    var: str
    body: Expr
    n: str = "C"

    def children(self):
        return (self.body,)

    def shape(self):
        r, c = self.body.shape()
        if c != "1":
            raise ShapeError(f"stacking rows needs vectors, got {r}x{c} in {latex_of(self)}")
        return (self.n, r)


@dataclass(frozen=True, eq=False)
class RowRec(Expr):
    """A tile defined row by row by a recursion: row ``var`` is ``body``, which
    may read earlier rows through ``Row(self_ref, i)`` for i < var.
    ``n`` is 'C' (within the chunk) or 'L' (the whole sequence)."""
    name: str
    var: str
    body: Expr
    rows: str = "C"
    cols: str = "Dk"

    def children(self):
        return (self.body,)

    def shape(self):
        r, c = self.body.shape()
        if c != "1" or r != self.cols:
            raise ShapeError(f"recursion {self.name}: body is {r}x{c}, expected {self.cols}x1")
        return (self.rows, self.cols)


@dataclass(frozen=True, eq=False)
class Shift(Expr):
    """Evaluate ``a`` in chunk (or step) t + k: the notes' X_[t+1]."""
    a: Expr
    k: int = 1

    def children(self):
        return (self.a,)

    def shape(self):
        return self.a.shape()


@dataclass(frozen=True, eq=False)
class SumBlocks(Expr):
    """The sum of ``a`` evaluated in every chunk (or step) of the sequence: the
    notes' sum over t, e.g. a parameter's gradient from per-chunk parts."""
    a: Expr

    def children(self):
        return (self.a,)

    def shape(self):
        return self.a.shape()


@dataclass(frozen=True, eq=False)
class SubBlock(Expr):
    """Sub-chunk block (bi, bj) of size T x T (or T x d with cols='full') of a
    C x C (or C x d) tile; bi, bj are index expressions (0-based sub-chunks)."""
    a: Expr
    bi: str
    bj: str = ""

    def children(self):
        return (self.a,)

    def shape(self):
        r, c = self.a.shape()
        if r != "C":
            raise ShapeError(f"sub-chunk block of a {r}x{c} tile in {latex_of(self)}")
        return ("T", "T" if self.bj else c)


@dataclass(frozen=True, eq=False)
class GatedInner(Expr):
    """(P)_{ij} = sum_d Q_id K_jd G_id / G_jd  (note 003 section 5.3 case 1,
    with G = exp(log gamma)); a T x T tile from two T x d tiles and T x d gates."""
    q: Expr
    k: Expr
    g: Expr

    def children(self):
        return (self.q, self.k, self.g)

    def shape(self):
        sq, sk, sg = self.q.shape(), self.k.shape(), self.g.shape()
        _same(sq, sk, "gated inner product", self)
        _same(sq, sg, "gated inner product gates", self)
        return (sq[0], sq[0])


@dataclass(frozen=True, eq=False)
class Tex(Expr):
    """Wraps an expression with the LaTeX the note uses for it (e.g. a named
    product), without changing its meaning."""
    a: Expr
    tex: str

    def children(self):
        return (self.a,)

    def shape(self):
        return self.a.shape()


def walk(e: Expr):
    """All nodes of an expression tree, parents before children."""
    stack = [e]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(reversed(n.children()))
        if isinstance(n, Adj):
            stack.append(n.var)


def latex_of(e: Expr) -> str:
    try:
        return to_latex(e)
    except Exception:  # a printing failure must never hide the shape error itself
        return type(e).__name__
