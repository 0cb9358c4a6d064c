"""Print IR to LaTeX in the notes' notation (bold tiles, chunk subscripts,
arrows for decayed tiles, odot / oslash, masks M and M_{-1}).

The printer knows the nodes only by their class names (a visitor), so that the IR
can print itself in its error messages without an import loop."""
from __future__ import annotations

from .visitor import Visitor

_PREC = {"add": 1, "had": 2, "mul": 3, "atom": 4}
_MASK = {"M": "\\mathbf{M}", "M-1": "\\mathbf{M}_{-1}", "MT": "\\mathbf{M}^\\top"}
_TRUTH = {"state": "\\mathbf{{S}}_{{{}}}", "out": "\\boldsymbol{{o}}_{{{}}}", "outs": "\\mathbf{{O}}_{{[t]}}"}


def _wrap(s, inner, outer):
    return f"\\left({s}\\right)" if _PREC[inner] < _PREC[outer] else s


class LatexPrinter(Visitor):
    """``visit(e)`` is (latex, precedence class); the class decides where an
    enclosing operator needs parentheses."""

    def tex(self, e) -> str:
        return self.visit(e)[0]

    def wrapped(self, e, outer) -> str:
        return _wrap(*self.visit(e), outer)

    def visit_object(self, e):
        raise TypeError(f"no LaTeX for {type(e).__name__}")

    # -- leaves
    def visit_Tex(self, e):
        return e.tex, "atom"

    def visit_Var(self, e):
        return (e.tex or e.name), "atom"

    def visit_Adj(self, e):
        base = e.tex or f"\\delta {self.tex(e.var)}"
        if e.via:
            base = f"\\left.{base}\\right|_{{\\text{{from }} {', '.join(e.via)}}}"
        elif e.excl:
            base = f"\\left.{base}\\right|_{{\\text{{w/o }} {', '.join(e.excl)}}}"
        return base, "atom"

    def visit_Truth(self, e):
        return (e.tex or _TRUTH[e.what].format(e.idx)), "atom"

    def visit_Eye(self, e):
        return "\\mathbf{I}", "atom"

    def visit_Zeros(self, e):
        return "\\mathbf{0}", "atom"

    def visit_Ones(self, e):
        return "\\mathbf{1}", "atom"

    def visit_Const(self, e):
        return str(e.value), "atom"

    def visit_RowRec(self, e):
        return e.name, "atom"

    # -- sums
    def visit_Add(self, e):
        return f"{self.tex(e.a)} + {self.visit(e.b)[0]}", "add"

    def visit_Sub(self, e):
        b, pb = self.visit(e.b)
        if pb == "add":
            b = f"\\left({b}\\right)"
        return f"{self.tex(e.a)} - {b}", "add"

    def visit_Neg(self, e):
        return "-" + self.wrapped(e.a, "mul"), "add"

    def visit_SumBlocks(self, e):
        return f"\\sum_{{t}} {self.wrapped(e.a, 'mul')}", "add"

    def visit_Sum(self, e):
        return f"\\sum_{{{e.var}={e.lo}}}^{{{e.hi}}} {self.wrapped(e.body, 'mul')}", "add"

    # -- products
    def _hadamard(self, e, op):
        return f"{self.wrapped(e.a, 'had')} {op} {self.wrapped(e.b, 'mul')}", "had"

    def visit_Had(self, e):
        return self._hadamard(e, "\\odot")

    def visit_HDiv(self, e):
        return self._hadamard(e, "\\oslash")

    def _juxtaposed(self, e):
        return f"{self.wrapped(e.a, 'mul')} {self.wrapped(e.b, 'mul')}", "mul"

    def visit_MatMul(self, e):
        return self._juxtaposed(e)

    def visit_Scale(self, e):
        return self._juxtaposed(e)

    def visit_Prod(self, e):
        return f"\\prod_{{{e.var}={e.lo}}}^{{{e.hi}}} {self.wrapped(e.body, 'mul')}", "mul"

    def visit_Inner(self, e):
        return f"\\langle {self.tex(e.a)}, {self.tex(e.b)} \\rangle", "atom"

    def visit_GatedInner(self, e):
        return (f"\\left[\\sum_d q_{{id}} k_{{jd}} \\exp(\\log g_{{id}} - \\log g_{{jd}})\\right]"
                f"_{{{self.tex(e.q)},{self.tex(e.k)},{self.tex(e.g)}}}"), "atom"

    # -- functions of one tile
    def visit_Transpose(self, e):
        a = self.wrapped(e.a, "atom")
        if "^" in a and not a.endswith("\\right)"):
            a = "{" + a + "}"  # a second superscript needs its own group
        return f"{a}^\\top", "atom"

    def visit_Inv(self, e):
        return f"\\left({self.tex(e.a)}\\right)^{{-1}}", "atom"

    def visit_Exp(self, e):
        return f"\\exp\\left({self.tex(e.a)}\\right)", "atom"

    def visit_Log(self, e):
        return f"\\log {self.wrapped(e.a, 'atom')}", "atom"

    def _call(self, name, e):
        return f"{name}\\left({self.tex(e.a)}\\right)", "atom"

    def visit_DiagM(self, e):
        return self._call("\\text{Diag}", e)

    def visit_DiagV(self, e):
        return self._call("\\text{diag}", e)

    def visit_CumProd(self, e):
        return self._call("\\text{cumprod}", e)

    def visit_CumSum(self, e):
        return self._call("\\text{cumsum}", e)

    def visit_RevCumSum(self, e):
        return self._call("\\text{suffix\\_sum}_{row}", e)

    def visit_LastRow(self, e):
        return f"{self.wrapped(e.a, 'atom')}^{{C}}", "atom"

    def visit_PlaceLast(self, e):
        return f"\\left[0,\\dots,0,{self.tex(e.a)}\\right]^\\top", "atom"

    def visit_Mask(self, e):
        return f"\\left({self.tex(e.a)} \\odot {_MASK[e.kind]}\\right)", "atom"

    # -- index level
    def visit_Row(self, e):
        return f"{self.tex(e.a)}^{{{e.idx}}}", "atom"

    def visit_Stack(self, e):
        return f"\\left[{self.tex(e.body)}\\right]_{{{e.var}=1}}^{{{e.n}}}{{}}^\\top", "atom"

    def visit_Shift(self, e):
        return f"\\left.{self.tex(e.a)}\\right|_{{t\\to t+{e.k}}}", "atom"

    def visit_SubBlock(self, e):
        return f"\\left({self.tex(e.a)}\\right)_{{[{e.bi}][{e.bj}]}}", "atom"


_PRINTER = LatexPrinter()


def to_latex(e) -> str:
    return _PRINTER.tex(e)
