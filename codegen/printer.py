"""Print formula IR as Triton tile code, one method per IR node.

Every IR value becomes a 2-D Triton tensor whose sizes follow the symbolic shape
(C -> BT, Dk -> BK, Dv -> BV, 1 -> 1), so the IR's shape rules become Triton's
broadcasting rules.  Three facts are tracked beside the code, because printing them
literally would be slow or would overflow:

- ``diag``: the value is Diag(v); the code is the column v.  Products with a
  diagonal become row or column scalings instead of C x C matrices.
- ``log``: the value is positive and known in log space (gates, their cumulative
  products and ratios).  Products and quotients of such values add and subtract
  logs, so K / Gamma prints as k * exp(-cumsum(g)) and Gamma / alpha as one exp.
- ``fac``: the value is a tile times a gate factor kept in log space (K / Gamma is
  k with factor -cumsum(g)).  Factors of the two operands of a product are
  rebalanced around the chunk's middle row, and a trailing Diag(gamma^C) is moved
  onto the factor, so exp(G_i - G_j) and exp(gamma^C - G_j) are formed without
  the overflowing exp(-G_j).  These are identities of the algebra (associativity,
  distributivity, exp(a)exp(b) = exp(a+b)); what is printed equals what was verified.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.latex import to_latex
from chunkproof.derivations.visitor import Visitor


# brackets around a product's number in printed code until emit.settle_products types it:
# not Python, so a tag left in a kernel fails to compile rather than run in a wrong type
PRODUCT_TAG = ("\u27e6", "\u27e7")


class CodegenError(Exception):
    """A formula that cannot become kernel code; the message names the formula."""


@dataclass(frozen=True)
class Val:
    code: Optional[str]           # Triton expression; for diag values, the column v
    shape: tuple                  # symbolic (rows, cols) of the value itself
    diag: bool = False
    log: Optional[str] = None     # log of the value, when it is a positive gate product
    raw: bool = False             # the tile (code) is exactly one read from memory
    fac: Optional[str] = None     # the value is code * exp(fac): a tile times a gate factor
    facshape: tuple = ()          # symbolic shape of fac (broadcasts against shape)
    last: Optional[str] = None    # a [1, cols] tile holding the log's last real row, read from memory
    # structure kept for a gate factor applied later (the backward's row factors), so that
    # it can meet the factors inside instead of multiplying an overflowed tile:
    terms: tuple = ()             # ((sign, Val), ...) whose sum this value is
    mix: Optional[tuple] = None   # (x, kind, y, f): (x masked by kind) @ (y * exp(f)), x C x C
    masked: Optional[tuple] = None  # (kind, x): this value is x under mask kind

    def dense(self) -> str:
        if self.code is None:
            return f"tl.exp({self.log})"
        if self.fac is not None:
            if self.raw and self.fac == SCALE_LOG:
                # a tile in its memory dtype times a Python float: in fp32 (the interpreter
                # has no bf16 scalar)
                return f"({self.code}.to(tl.float32) * scale)"
            return f"({self.code} * {_exp(self.fac)})"
        return self.code


# the log of the API's scale, q's factor (emit.Q_SCALE)
SCALE_LOG = "tl.log(scale)"


def _exp(fac: str) -> str:
    return "scale" if fac == SCALE_LOG else f"tl.exp({fac})"


def _bcast(a: tuple, b: tuple) -> tuple:
    return tuple(y if x == "1" else x for x, y in zip(a, b))


DIMS = {"C": "BT", "Dk": "BK", "Dv": "BV", "1": "1"}
MASKS = {"M": "m_incl", "M-1": "m_strict", "MT": "m_upper"}
# a transposed mask, as the kind a masked value keeps (Val.masked); MT-1 is strictly upper
_FLIP = {"M": "MT", "M-1": "MT-1", "MT": "M", "MT-1": "M-1"}
_MIX_MASKS = dict(MASKS, **{"MT-1": "tl.trans(m_strict)"})


def _dim(d: str, where) -> str:
    if d not in DIMS:
        raise CodegenError(f"size {d!r} has no kernel block size in {where}")
    return DIMS[d]


def _structured(v: Val) -> bool:
    return bool(v.terms) or v.mix is not None


def _terms(v: Val) -> tuple:
    return v.terms if v.terms else ((1, v),)


def _join(parts, dense) -> str:
    out = ""
    for sg, t in parts:
        c = dense(t)
        out = (f"(-{c})" if sg < 0 else c) if not out else f"({out} {'-' if sg < 0 else '+'} {c})"
    return out


def _vector_gated(x: Val, y: Val, d: str) -> bool:
    """x y with a gate factor per row and channel on each side (a C x d times d x C product)."""
    return x.fac is not None and y.fac is not None and x.facshape == ("C", d) \
        and y.facshape == (d, "C") and d != "1"


def _inner_gate_moved(a: Val, b: Val, ashape: tuple, bshape: tuple) -> Tuple[Val, Val]:
    """x (y exp(f)) with f one value per index of the contraction, y read from memory:
    f moved onto x where x is computed (it is rounded for the product anyway, and y
    then goes to the tensor cores exact and untouched), or where x is also read from
    memory but spans V (a V block) while y spans K (all of it: fewer values scaled).
    The same for (x exp(f)) y."""
    inner = ashape[1]
    if inner == "1" or (a.fac is None) == (b.fac is None) or any(v.terms or v.mix or v.diag or v.masked
                                                                 for v in (a, b)):
        return a, b
    # g: the gated operand, o: the other; the factor's shape on each, as a contraction factor
    if b.fac is not None:
        g, o, gfree, ofree, gshape, oshape = b, a, bshape[1], ashape[0], (inner, "1"), ("1", inner)
    else:
        g, o, gfree, ofree, gshape, oshape = a, b, ashape[0], bshape[1], ("1", inner), (inner, "1")
    if g.facshape not in (gshape, ("1", "1")) or not g.raw or (o.raw and not (ofree == "Dv" and gfree == "Dk")) or o.code is None:
        return a, b
    moved = Val(o.code, o.shape, fac=_fac_t(g),
                facshape=oshape if g.facshape != ("1", "1") else g.facshape, raw=o.raw)
    plain = Val(g.code, g.shape, raw=True)
    return (moved, plain) if o is a else (plain, moved)


def _gated(v: Val) -> bool:
    return not v.diag and (v.fac is not None or v.log is not None)


def _t(code: str) -> str:
    return f"tl.trans({code})"


def _fac_t(v: "Val") -> str:
    """v's factor transposed with v; a factor of one number (q's scale) stays as it is."""
    return v.fac if v.facshape == ("1", "1") else _t(v.fac)


def _colsums(x: str, y: str) -> str:
    """diag(X^T Y), or X^T y for a column y, as the column sums of X . Y: no C x D tile
    is transposed (each transpose is a trip through shared memory)."""
    return f"tl.trans(tl.sum({x} * {y}, axis=0, keep_dims=True))"


class TritonPrinter(Visitor):
    """One ``visit_<Node>`` method per IR node.  ``env`` maps tile names to printed
    values; ``inv_ok(expr)`` says whether an Inv argument is proven unit lower
    triangular (the plan proves it)."""

    def __init__(self, env: Dict[str, Val], inv_ok: Callable[[ir.Expr], bool], where: str,
                 defs: Optional[Dict[str, ir.Expr]] = None):
        self.env = env
        self.inv_ok = inv_ok
        self.where = where
        self.defs = defs or {}    # the stage's definitions, for diag() to look through
        # the product type constexpr of gated intra-chunk products (_masked_mix,
        # _masked_gated_dot): GPREC, or PREC2 in a line the variant keeps out of grad_gated
        self.gprec = "GPREC"
        # products of a tile read from memory by a computed one printed so far: each is
        # tagged with its number, its types settled once its line is printed
        # (emit.settle_products: Variant.mixed_lines)
        self.products = 0
        # whether this kernel's precise lines take GPREC in every product (the gradient
        # kernels; GPREC is their grad_gated type)
        self.precise = False
        # whether a raw tile's row (column) gate is applied to the product's rows (columns)
        # rather than to the tile (_pulled_gate): the parallel kernels.  The scans keep the
        # gate on the operand: pulled there, the planner's bf16-state target took a cheaper
        # reverse scan whose dh0 was 3.5x FLA's (docs/measurements.md, session 41)
        self.pull_gates = False

    def fail(self, e: ir.Expr, why: str):
        raise CodegenError(f"{self.where}: cannot print ${to_latex(e)}$: {why}")

    def p(self, e: ir.Expr) -> Val:
        if not self.handles(e):
            self.fail(e, f"IR node {type(e).__name__} has no Triton form")
        return self.visit(e)

    def code(self, e: ir.Expr) -> str:
        """The value of ``e`` as a dense tile expression."""
        return self.dense(self.p(e))

    def dense(self, v: Val) -> str:
        if v.diag:
            n = v.shape[0]
            if n != "C":
                raise CodegenError(f"{self.where}: a {n}x{n} diagonal matrix would be materialised")
            return f"tl.where(m_eye, {self.dense_vec(v)}, 0.)"
        return v.dense()

    @staticmethod
    def dense_vec(v: Val) -> str:
        return f"tl.exp({v.log})" if v.code is None else v.code

    def factor(self, x: Val, log: str, logshape: tuple, shape: tuple) -> Val:
        """x * exp(log), keeping the factor in log space."""
        if x.terms:
            parts = [(sg, self.factor(t, log, logshape, shape)) for sg, t in x.terms]
            return Val(_join(parts, self.dense), shape, terms=tuple(parts))
        if x.mix is not None and logshape[0] == "C" and x.code is not None and x.fac is None:
            return self._mix_factor(x, log, logshape, shape)
        if x.log is not None:
            return Val(None, shape, log=f"({x.log} + {log})")
        if x.fac is not None:
            return Val(x.code, shape, fac=f"({x.fac} + {log})", facshape=_bcast(x.facshape, logshape),
                       raw=x.raw)
        return Val(self.dense(x), shape, fac=log, facshape=logshape, raw=x.raw)

    def _mix_factor(self, x: Val, g: str, gshape: tuple, shape: tuple) -> Val:
        # exp(g_i) sum_j mask_ij x_ij y_j exp(f_j): the row factor meets the column
        # factor inside (f_j + g_i <= 0 where the mask keeps an entry, as every such pair
        # in the derivations is a decay between two rows of the chunk)
        xc, kind, y, f, fshape = x.mix
        if fshape[1] == "1" and gshape[1] == "1":
            # scalar gates per row: fold exp(g_i + f_j) into the C x C matrix
            m = _MIX_MASKS[kind]
            return Val(self._dot(Val(f"tl.where({m}, {xc} * tl.exp({g} + tl.trans({f})), 0.)", ()),
                                 Val(y, ())), shape)
        strict = {"M": "0", "M-1": "1", "MT": "2", "MT-1": "3"}[kind]
        return Val(f"_masked_mix({xc}, {y}, {f}, {g}, {strict}, m_mid, BT, DT2, CT2, {self.gprec}, rng_c, BLOCKED)", shape)

    # ------------------------------------------------------------ leaves
    def visit_Var(self, e: ir.Var):
        if e.name not in self.env:
            self.fail(e, f"tile {e.name} has no value at this point of the kernel")
        return self.env[e.name]

    def visit_Const(self, e: ir.Const):
        return Val(f"{float(e.value)!r}", ("1", "1"))

    def visit_Eye(self, e: ir.Eye):
        return Val("1.0", (e.n, e.n), diag=True) if e.n == "C" else self.fail(e, "identity of size " + e.n)

    def visit_Ones(self, e: ir.Ones):
        return Val(f"tl.full(({_dim(e.rows, self.where)}, {_dim(e.cols, self.where)}), 1.0, tl.float32)",
                   e.shape())

    def visit_Zeros(self, e: ir.Zeros):
        return Val(f"tl.zeros(({_dim(e.rows, self.where)}, {_dim(e.cols, self.where)}), tl.float32)",
                   e.shape())

    # ------------------------------------------------------------ elementwise
    def _lin(self, e, op):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag and b.diag:
            return Val(f"({self.dense_vec(a)} {op} {self.dense_vec(b)})", e.shape(), diag=True)
        code = f"({self.dense(a)} {op} {self.dense(b)})"
        if _structured(a) or _structured(b):
            sb = 1 if op == "+" else -1
            parts = _terms(a) + tuple((sb * sg, t) for sg, t in _terms(b))
            return Val(code, e.shape(), terms=parts)
        return Val(code, e.shape())

    def visit_Add(self, e):
        return self._lin(e, "+")

    def visit_Sub(self, e):
        return self._lin(e, "-")

    def visit_Neg(self, e):
        a = self.p(e.a)
        if a.diag:
            return Val(f"(-{self.dense_vec(a)})", e.shape(), diag=True)
        # a raw tile is in its memory dtype: negate it in fp32 (the interpreter cannot
        # do arithmetic on bf16 storage)
        code = f"{a.code}.to(tl.float32)" if a.raw else a.code
        if a.fac is not None:
            return Val(f"(-{code})", e.shape(), fac=a.fac, facshape=a.facshape)
        return Val(f"(-{code if a.raw else self.dense(a)})", e.shape())

    def visit_Had(self, e):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag or b.diag:
            self.fail(e, "Hadamard product with a diagonal matrix")
        if b.log is not None:
            return self.factor(a, b.log, e.b.shape(), e.shape())
        if a.log is not None:
            return self.factor(b, a.log, e.a.shape(), e.shape())
        # a tile times a gate factor, times a sum or masked product: the factor is moved
        # onto the other operand's parts, where it meets their own factors (X exp(f) ⊙ Y =
        # X ⊙ (exp(f) ⊙ Y)), so that no overflowed part is multiplied by an underflowed one
        for x, y in ((a, b), (b, a)):
            if x.fac is not None and x.code is not None and not x.terms and x.mix is None \
                    and _structured(y) and x.facshape == e.shape():
                fy = self.factor(y, x.fac, x.facshape, e.shape())
                xc = f"{x.code}.to(tl.float32)" if x.raw else x.code
                return Val(f"({xc} * {self.dense(fy)})", e.shape())
        if a.raw and b.raw:
            # two tiles in their memory dtype: the product in fp32 (bf16 storage has no
            # arithmetic under the interpreter, and a bf16 product would round)
            return Val(f"({self.dense(a)}.to(tl.float32) * {self.dense(b)})", e.shape())
        return Val(f"({self.dense(a)} * {self.dense(b)})", e.shape())

    def visit_HDiv(self, e):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag or b.diag:
            self.fail(e, "Hadamard division with a diagonal matrix")
        if b.log is not None:
            return self.factor(a, f"(-{b.log})", e.b.shape(), e.shape())
        return Val(f"({self.dense(a)} / {self.dense(b)})", e.shape())

    def visit_Scale(self, e):
        s = self.p(e.a)
        if s.log is not None:
            x = e.b
            # a positive scalar factor is moved onto the tiles of a sum or the right
            # factor of a product, where it meets that tile's own gate factor
            if isinstance(x, (ir.Add, ir.Sub)):
                return self.p(type(x)(ir.Scale(e.a, x.a), ir.Scale(e.a, x.b)))
            if isinstance(x, ir.MatMul):
                # onto the factor that carries a gate factor of its own, else onto the product
                if _gated(self.p(x.b)):
                    return self.p(ir.MatMul(x.a, ir.Scale(e.a, x.b)))
                if _gated(self.p(x.a)):
                    return self.p(ir.MatMul(ir.Scale(e.a, x.a), x.b))
            xv = self.p(x)
            if xv.diag:
                if xv.log is not None:
                    return Val(None, e.shape(), diag=True, log=f"({s.log} + {xv.log})")
                return Val(f"(tl.exp({s.log}) * {xv.code})", e.shape(), diag=True)
            return self.factor(xv, s.log, ("1", "1"), e.shape())
        x = self.p(e.b)
        xs = self.dense_vec(x) if x.diag else self.dense(x)
        return Val(f"({self.dense(s)} * {xs})", e.shape(), diag=x.diag)

    def visit_Exp(self, e):
        return Val(None, e.shape(), log=self.code(e.a))

    def visit_Log(self, e):
        a = self.p(e.a)
        return Val(a.log if a.log is not None else f"tl.log({self.dense(a)})", e.shape())

    # ------------------------------------------------------------ structure
    def visit_Transpose(self, e):
        a = self.p(e.a)
        if a.diag:
            return a
        if a.code is None:
            return Val(None, e.shape(), log=_t(a.log))
        if a.fac is not None:
            return Val(_t(a.code), e.shape(), fac=_fac_t(a), facshape=a.facshape[::-1], raw=a.raw)
        if a.masked is not None:
            return Val(_t(a.code), e.shape(), raw=a.raw, masked=(_FLIP[a.masked[0]], _t(a.masked[1])))
        return Val(_t(a.code), e.shape(), raw=a.raw)

    def visit_DiagM(self, e):
        a = self.p(e.a)
        return Val(a.code, e.shape(), diag=True, log=a.log)

    def visit_Mask(self, e: ir.Mask):
        if e.kind not in MASKS:
            self.fail(e, f"mask kind {e.kind}")
        if isinstance(e.a, ir.MatMul):
            x, y = self.p(e.a.a), self.p(e.a.b)
            if x.fac is not None and y.fac is not None and x.facshape == ("C", "1") \
                    and y.facshape == ("1", "C") and e.a.a.shape()[1] != "1":
                # (Diag(exp f) X)(Y Diag(exp h)) under a causal mask or its transpose: a
                # scalar gate per row, so multiply by exp(f_i + h_j) <= 1 (a decay between
                # two rows) after the product; the entries the mask discards, where it
                # can overflow, are dropped
                xy = self._dot(Val(x.code, x.shape, raw=x.raw), Val(y.code, y.shape, raw=y.raw))
                return Val(f"tl.where({MASKS[e.kind]}, {xy} * tl.exp({x.fac} + {y.fac}), 0.)", e.shape())
        if e.kind in ("M", "M-1") and isinstance(e.a, ir.MatMul):
            if _vector_gated(x, y, e.a.a.shape()[1]):
                # the same with a gate per row and channel: no one rescaling keeps a
                # chunk's factors in range at strong decay; the runtime forms the masked
                # product by blocks with every exponent <= 0 (_masked_gated_dot)
                strict = "True" if e.kind == "M-1" else "False"
                return Val(f"_masked_gated_dot({x.code}, {x.fac}, {y.code}, {y.fac}, {MASKS[e.kind]}, m_mid, "
                           f"{strict}, BT, DT2, CT2, {self.gprec}, rng_c, BLOCKED)", e.shape())
        if e.kind == "MT" and isinstance(e.a, ir.MatMul):
            x, y = self.p(e.a.a), self.p(e.a.b)
            if _vector_gated(x, y, e.a.a.shape()[1]):
                # on and above the diagonal: the transpose of the lower form, whose row
                # factor (y's, transposed) is the non-increasing one
                return Val(f"tl.trans(_masked_gated_dot({_t(y.code)}, {_fac_t(y)}, {_t(x.code)}, {_fac_t(x)}, "
                           f"m_incl, m_mid, False, BT, DT2, CT2, {self.gprec}, rng_c, BLOCKED))", e.shape())
        a = self.p(e.a)
        dense = self.dense(a)
        return Val(f"tl.where({MASKS[e.kind]}, {dense}, 0.)", e.shape(), raw=a.raw and a.fac is None,
                   masked=(e.kind, dense))

    def visit_CumProd(self, e):
        a = self.p(e.a)
        if a.log is None:
            self.fail(e, "a cumulative product is printed in log space and needs a gate (positive) operand")
        return Val(None, e.shape(), log=self._cumsum(a.log, e.shape()))

    def visit_CumSum(self, e):
        return Val(self._cumsum(self.code(e.a), e.shape()), e.shape())

    @staticmethod
    def _cumsum(x, shape):
        # Triton 3.6 cannot lower a scan over a BT x 1 tile; for a column, sum under
        # the inclusive mask instead (BT x BT work, negligible)
        if shape[1] == "1":
            return f"tl.sum(tl.where(m_incl, tl.trans({x}), 0.), axis=1, keep_dims=True)"
        return f"tl.cumsum({x}, axis=0)"

    def visit_RevCumSum(self, e):
        # suffix sums down the chunk (padded rows hold 0); a column is summed under the
        # upper mask (Triton 3.6 cannot scan a BT x 1 tile)
        x = self.code(e.a)
        if e.shape()[1] == "1":
            return Val(f"tl.sum(tl.where(m_upper, tl.trans({x}), 0.), axis=1, keep_dims=True)", e.shape())
        return Val(f"tl.cumsum({x}, axis=0, reverse=True)", e.shape())

    def visit_PlaceLast(self, e):
        # [0, ..., 0, v]^T: v^T on the chunk's last real row
        return Val(f"tl.where(m_last, tl.trans({self.code(e.a)}), 0.)", e.shape())

    def visit_DiagV(self, e):
        return Val(self._diag(e.a), e.shape())

    def _diag(self, a) -> str:
        # diag(X Y) without forming X Y: row sums of X . Y^T (C x D work, not a C x C x D
        # product), distributed over sums; a definition that is such a sum is looked
        # through (its C x C tile, if nothing else reads it, is then dead code)
        if isinstance(a, ir.Var) and isinstance(self.defs.get(a.name), (ir.Add, ir.Sub, ir.Neg, ir.MatMul)):
            return self._diag(self.defs[a.name])
        if isinstance(a, (ir.Add, ir.Sub)):
            return f"({self._diag(a.a)} {'+' if isinstance(a, ir.Add) else '-'} {self._diag(a.b)})"
        if isinstance(a, ir.Neg):
            return f"(-{self._diag(a.a)})"
        if isinstance(a, ir.MatMul) and isinstance(a.a, ir.Transpose):
            return _colsums(self.code(a.a.a), self.code(a.b))      # diag(X^T Y)
        if isinstance(a, ir.MatMul):
            x, y = self.code(a.a), self.code(a.b)
            return f"tl.sum({x} * {_t(y)}, axis=1, keep_dims=True)"
        return f"tl.sum(tl.where(m_eye, {self.code(a)}, 0.), axis=1, keep_dims=True)"

    def visit_Inner(self, e):
        return Val(f"tl.sum(tl.sum({self.code(e.a)} * {self.code(e.b)}, axis=1, keep_dims=True), axis=0, "
                   f"keep_dims=True)", e.shape())

    def visit_LastRow(self, e):
        # m_last is the last real row of the chunk (see macros.j2 rows())
        a = self.p(e.a)
        if a.last is not None and a.log is not None and a.code is None:
            # read from memory on its own: a masked reduction over the rows cost the
            # Gated DeltaNet state scan a third of its time on the H200
            return Val(None, e.shape(), log=f"tl.trans({a.last})")
        if a.last is not None and a.log is None and a.fac is None:
            return Val(f"tl.trans({a.last})", e.shape())     # a prefix sum's last row, the same way
        pick = "tl.trans(tl.sum(tl.where(m_last, {}, 0.), axis=0, keep_dims=True))"
        if a.log is not None:
            return Val(None, e.shape(), log=pick.format(a.log))
        return Val(pick.format(self.dense(a)), e.shape())

    def visit_Inv(self, e):
        a = self.p(e.a)
        if a.diag:
            if a.log is not None:
                return Val(None, e.shape(), diag=True, log=f"(-{a.log})")
            return Val(f"(1.0 / {a.code})", e.shape(), diag=True)
        if not self.inv_ok(e.a):
            self.fail(e, "only diagonal and unit lower triangular (I + strictly lower) inverses "
                         "have a kernel form, and this argument is not provably either")
        return Val(f"_inv_unit_lower({self.dense(a)}, m_strict, m_eye, BT, IPREC)", e.shape())

    # ------------------------------------------------------------ products
    def visit_MatMul(self, e):
        shape = e.shape()
        b = self.p(e.b)
        if b.diag and b.log is not None and not isinstance(e.a, ir.DiagM):
            x = e.a
            # X Diag(exp l): distribute over sums and reassociate, so the column factor
            # reaches the tile that carries a gate factor of its own
            if isinstance(x, (ir.Add, ir.Sub)):
                return self.p(type(x)(ir.MatMul(x.a, e.b), ir.MatMul(x.b, e.b)))
            if isinstance(x, ir.MatMul) and _gated(self.p(x.b)):
                return self.p(ir.MatMul(x.a, ir.MatMul(x.b, e.b)))
            # otherwise the column factor stays on the product, where a row factor
            # applied later meets it (the backward's K-side gradients)
            a = self.p(x)
            if not a.diag:
                return self.factor(a, _t(b.log), ("1", e.b.shape()[1]), shape)
        else:
            a = self.p(e.a)
        if isinstance(e.a, ir.Ones) and e.a.cols == "1" and b.log is not None and b.code is None \
                and not b.diag and not a.diag:
            # 1 gamma: a column of one positive scalar (a parameter's gate), kept in log space
            return Val(None, shape, log=f"({a.code} * {b.log})")
        if a.diag and a.log is not None and not b.diag:
            x = e.b
            if isinstance(x, (ir.Add, ir.Sub)):
                return self.p(type(x)(ir.MatMul(e.a, x.a), ir.MatMul(e.a, x.b)))
            if isinstance(x, ir.MatMul) and _gated(self.p(x.a)):
                return self.p(ir.MatMul(ir.MatMul(e.a, x.a), x.b))
            return self.factor(b, a.log, (e.a.shape()[0], "1"), shape)
        if a.diag and b.diag:
            if a.log is not None and b.log is not None:
                return Val(None, shape, diag=True, log=f"({a.log} + {b.log})")
            return Val(f"({self.dense_vec(a)} * {self.dense_vec(b)})", shape, diag=True)
        if a.diag:      # Diag(v) X scales the rows of X
            return Val(f"({self.dense_vec(a)} * {self.dense(b)})", shape)
        if b.diag:      # X Diag(v) scales the columns of X
            return Val(f"({self.dense(a)} * {_t(self.dense_vec(b))})", shape)
        inner = e.a.shape()[1]
        if a.masked is not None and a.fac is None and b.fac is not None and inner == "C" \
                and b.facshape[0] == "C" and shape[1] != "1":
            # (x masked) (y exp(f)): printed densely here, and kept as a mix so that a row
            # factor applied later can meet f (see factor)
            return Val(self._dot(Val(self.dense(a), ()), Val(self.dense(b), ())), shape,
                       mix=(a.masked[1], a.masked[0], b.code, b.fac, b.facshape))
        if a.fac is not None and b.fac is not None and a.facshape[0] == "C" \
                and b.facshape == (a.facshape[1], "C") and inner != "1":
            # (x exp(f)) (y exp(h)): shift both factors by the middle row of f, so each
            # stays within half a chunk's decay; the product is unchanged
            mid = f"tl.sum(tl.where(m_mid, {a.fac}, 0.), axis=0, keep_dims=True)"
            ac = f"({a.code} * tl.exp({a.fac} - {mid}))"
            bc = f"({b.code} * tl.exp({b.fac} + {_t(mid)}))"
        else:
            a, b = _inner_gate_moved(a, b, e.a.shape(), e.b.shape())
            pulled = self._pulled_gate(a, b, shape, inner)
            if pulled is not None:
                return pulled
            ac, bc = self.dense(a), self.dense(b)
            if shape[1] == "1" and isinstance(e.a, ir.Transpose) and inner != "1":
                return Val(_colsums(self.dense(self.p(e.a.a)), bc), shape)      # X^T y
        if inner == "1":                       # outer product
            return Val(f"({ac} * {bc})", shape)
        if shape[1] == "1":                    # matrix times column
            return Val(f"tl.sum({ac} * {_t(bc)}, axis=1, keep_dims=True)", shape)
        if shape[0] == "1":                    # row times matrix
            return Val(f"tl.sum({_t(ac)} * {bc}, axis=0, keep_dims=True)", shape)
        return Val(self._dot(Val(ac, (), raw=a.raw and a.fac is None), Val(bc, (), raw=b.raw and b.fac is None)),
                   shape)

    def _pulled_gate(self, a: Val, b: Val, shape: tuple, inner: str) -> Optional[Val]:
        """(x exp(f)) y with f one value per row of the product (or x (y exp(h)), h one per
        column): x y with the factor on the product's rows (columns).  A tile read from
        memory then reaches the product exact in its memory dtype, not rounded after its
        gate; a computed one is rounded once either way.  Only where ``pull_gates`` is on
        (the parallel kernels)."""
        if not self.pull_gates or "1" in (inner, shape[0], shape[1]):
            return None
        for x, y, fshape in ((a, b, (shape[0], "1")), (b, a, ("1", shape[1]))):
            if x.fac is not None and x.facshape in (fshape, ("1", "1")) and y.fac is None \
                    and not (x.terms or x.mix or y.terms or y.mix or y.diag):
                xr, yv = Val(x.code, (), raw=x.raw), Val(self.dense(y), (), raw=y.raw)
                code = self._dot(xr, yv) if x is a else self._dot(yv, xr)
                return Val(code, shape, fac=x.fac, facshape=x.facshape)
        return None

    def _dot(self, a: Val, b: Val) -> str:
        # the host picks each kind's product type (see dot_types)
        if a.raw and b.raw:
            # two tiles read from memory are exact in the input dtype: multiply in it
            return f"tl.dot({a.code}.to(DT).to(CT), {b.code}.to(DT).to(CT), input_precision=PREC)"
        tag = ""
        if a.raw or b.raw:
            # a tile read from memory times a computed one: tagged, so that the line it ends
            # up in names it (a mixed-line candidate, however it is typed here)
            self.products += 1
            tag = f"{PRODUCT_TAG[0]}{self.products}{PRODUCT_TAG[1]}"
        if self.gprec == "GPREC" and self.precise:
            # a precise line (Variant.precise_lines) of a gradient kernel: every product with
            # a computed tile as its gated ones, fp32 operands in GPREC (tf32x3) where its
            # family multiplies computed tiles in tf32
            return f"tl.dot({a.code}.to(DT2).to(CT2), {b.code}.to(DT2).to(CT2), input_precision=GPREC{tag})"
        if tag:
            return f"tl.dot({a.code}.to(DT3{tag}).to(CT3{tag}), {b.code}.to(DT3{tag}).to(CT3{tag}), " \
                   f"input_precision=PREC3{tag})"
        return f"tl.dot({a.code}.to(DT2).to(CT2), {b.code}.to(DT2).to(CT2), input_precision=PREC2)"
