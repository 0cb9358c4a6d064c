"""Print formula IR as Triton tile code, one method per IR node.

Every IR value becomes a 2-D Triton tensor whose sizes follow the symbolic shape
(C -> BT, Dk -> BK, Dv -> BV, 1 -> 1), so the IR's shape rules become Triton's
broadcasting rules.  Two facts are tracked beside the code, because printing them
literally would be slow or would overflow:

- ``diag``: the value is Diag(v); the code is the column v.  Products with a
  diagonal become row or column scalings instead of C x C matrices.
- ``log``: the value is positive and known in log space (gates, their cumulative
  products and ratios).  Products and quotients of such values add and subtract
  logs, so K / Gamma prints as k * exp(-cumsum(g)) and Gamma / alpha as one exp.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

from derivations import ir
from derivations.latex import to_latex


class CodegenError(Exception):
    """A formula that cannot become kernel code; the message names the formula."""


@dataclass(frozen=True)
class Val:
    code: str                     # Triton expression; for diag values, the column v
    shape: tuple                  # symbolic (rows, cols) of the value itself
    diag: bool = False
    log: Optional[str] = None     # log of the value, when it is a positive gate product
    raw: bool = False             # exactly a tile read from memory (an input or a boundary tile)

    def dense(self) -> str:
        if self.log is not None and self.code is None:
            return f"tl.exp({self.log})"
        return self.code


DIMS = {"C": "BT", "Dk": "BK", "Dv": "BV", "1": "1"}
MASKS = {"M": "m_incl", "M-1": "m_strict", "MT": "m_upper"}


def _dim(d: str, where) -> str:
    if d not in DIMS:
        raise CodegenError(f"size {d!r} has no kernel block size in {where}")
    return DIMS[d]


def _t(code: str) -> str:
    return f"tl.trans({code})"


class TritonPrinter:
    """``env`` maps tile names to printed values; ``inv_ok(expr)`` says whether an
    Inv argument is proven unit lower triangular (the plan proves it)."""

    def __init__(self, env: Dict[str, Val], inv_ok: Callable[[ir.Expr], bool], where: str):
        self.env = env
        self.inv_ok = inv_ok
        self.where = where

    def fail(self, e: ir.Expr, why: str):
        raise CodegenError(f"{self.where}: cannot print ${to_latex(e)}$: {why}")

    def p(self, e: ir.Expr) -> Val:
        meth = getattr(self, "_" + type(e).__name__, None)
        if meth is None:
            self.fail(e, f"IR node {type(e).__name__} has no Triton form")
        return meth(e)

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
        return f"tl.exp({v.log})" if v.log is not None and v.code is None else v.code

    # ------------------------------------------------------------ leaves
    def _Var(self, e: ir.Var):
        if e.name not in self.env:
            self.fail(e, f"tile {e.name} has no value at this point of the kernel")
        return self.env[e.name]

    def _Const(self, e: ir.Const):
        return Val(f"{float(e.value)!r}", ("1", "1"))

    def _Eye(self, e: ir.Eye):
        return Val("1.0", (e.n, e.n), diag=True) if e.n == "C" else self.fail(e, "identity of size " + e.n)

    def _Ones(self, e: ir.Ones):
        return Val(f"tl.full(({_dim(e.rows, self.where)}, {_dim(e.cols, self.where)}), 1.0, tl.float32)",
                   e.shape())

    def _Zeros(self, e: ir.Zeros):
        return Val(f"tl.zeros(({_dim(e.rows, self.where)}, {_dim(e.cols, self.where)}), tl.float32)",
                   e.shape())

    # ------------------------------------------------------------ elementwise
    def _lin(self, e, op):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag and b.diag:
            return Val(f"({self.dense_vec(a)} {op} {self.dense_vec(b)})", e.shape(), diag=True)
        return Val(f"({self.dense(a)} {op} {self.dense(b)})", e.shape())

    def _Add(self, e):
        return self._lin(e, "+")

    def _Sub(self, e):
        return self._lin(e, "-")

    def _Neg(self, e):
        a = self.p(e.a)
        return Val(f"(-{self.dense_vec(a) if a.diag else self.dense(a)})", e.shape(), diag=a.diag)

    def _Had(self, e):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag or b.diag:
            self.fail(e, "Hadamard product with a diagonal matrix")
        if a.log is not None and b.log is not None:
            return Val(None, e.shape(), log=f"({a.log} + {b.log})")
        return Val(f"({self.dense(a)} * {self.dense(b)})", e.shape())

    def _HDiv(self, e):
        a, b = self.p(e.a), self.p(e.b)
        if a.diag or b.diag:
            self.fail(e, "Hadamard division with a diagonal matrix")
        if a.log is not None and b.log is not None:
            return Val(None, e.shape(), log=f"({a.log} - {b.log})")
        if b.log is not None:
            return Val(f"({self.dense(a)} * tl.exp(-{b.log}))", e.shape())
        return Val(f"({self.dense(a)} / {self.dense(b)})", e.shape())

    def _Scale(self, e):
        s, x = self.p(e.a), self.p(e.b)
        if s.log is not None and x.log is not None:
            return Val(None, e.shape(), log=f"({s.log} + {x.log})", diag=x.diag)
        xs = self.dense_vec(x) if x.diag else self.dense(x)
        return Val(f"({self.dense(s)} * {xs})", e.shape(), diag=x.diag)

    def _Exp(self, e):
        return Val(None, e.shape(), log=self.code(e.a))

    def _Log(self, e):
        a = self.p(e.a)
        return Val(a.log if a.log is not None else f"tl.log({self.dense(a)})", e.shape())

    # ------------------------------------------------------------ structure
    def _Transpose(self, e):
        a = self.p(e.a)
        if a.diag:
            return a
        if a.code is None:
            return Val(None, e.shape(), log=_t(a.log))
        return Val(_t(a.code), e.shape(), raw=a.raw)

    def _DiagM(self, e):
        a = self.p(e.a)
        return Val(a.code, e.shape(), diag=True, log=a.log)

    def _Mask(self, e: ir.Mask):
        a = self.p(e.a)
        if e.kind not in MASKS:
            self.fail(e, f"mask kind {e.kind}")
        return Val(f"tl.where({MASKS[e.kind]}, {self.dense(a)}, 0.)", e.shape(), raw=a.raw)

    def _CumProd(self, e):
        a = self.p(e.a)
        if a.log is None:
            self.fail(e, "a cumulative product is printed in log space and needs a gate (positive) operand")
        return Val(None, e.shape(), log=self._cumsum(a.log, e.shape()))

    def _CumSum(self, e):
        return Val(self._cumsum(self.code(e.a), e.shape()), e.shape())

    @staticmethod
    def _cumsum(x, shape):
        # Triton 3.6 cannot lower a scan over a BT x 1 tile; for a column, sum under
        # the inclusive mask instead (BT x BT work, negligible)
        if shape[1] == "1":
            return f"tl.sum(tl.where(m_incl, tl.trans({x}), 0.), axis=1, keep_dims=True)"
        return f"tl.cumsum({x}, axis=0)"

    def _LastRow(self, e):
        # padded rows of a partial chunk carry log-gate 0, so row BT-1 is the last real row
        a = self.p(e.a)
        pick = "tl.trans(tl.sum(tl.where(m_last, {}, 0.), axis=0, keep_dims=True))"
        if a.code is None:
            return Val(None, e.shape(), log=pick.format(a.log))
        return Val(pick.format(self.dense(a)), e.shape())

    def _Inv(self, e):
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
    def _MatMul(self, e):
        a, b = self.p(e.a), self.p(e.b)
        shape = e.shape()
        if a.diag and b.diag:
            if a.log is not None and b.log is not None:
                return Val(None, shape, diag=True, log=f"({a.log} + {b.log})")
            return Val(f"({self.dense_vec(a)} * {self.dense_vec(b)})", shape, diag=True)
        if a.diag:      # Diag(v) X scales the rows of X
            return Val(f"({self.dense_vec(a)} * {self.dense(b)})", shape)
        if b.diag:      # X Diag(v) scales the columns of X
            return Val(f"({self.dense(a)} * {_t(self.dense_vec(b))})", shape)
        ac, bc = self.dense(a), self.dense(b)
        inner = e.a.shape()[1]
        if inner == "1":                       # outer product
            return Val(f"({ac} * {bc})", shape)
        if shape[1] == "1":                    # matrix times column
            return Val(f"tl.sum({ac} * {_t(bc)}, axis=1, keep_dims=True)", shape)
        if shape[0] == "1":                    # row times matrix
            return Val(f"tl.sum({_t(ac)} * {bc}, axis=0, keep_dims=True)", shape)
        if a.raw or b.raw:
            # a tile read from memory is exact in the input dtype: multiply in it
            return Val(f"tl.dot({ac}.to(DT).to(CT), {bc}.to(DT).to(CT), input_precision=PREC)", shape)
        # two computed tiles: the host picks their product type (see dot_types)
        return Val(f"tl.dot({ac}.to(DT2).to(CT2), {bc}.to(DT2).to(CT2), input_precision=PREC2)", shape)
