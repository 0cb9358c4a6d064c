"""Print IR as plain text in the notes' notation, for terminals: ←Q and →K for the
decayed tiles, δX for adjoints, ⊙ ⊘ ᵀ, (X ⊙ M) for masks, Diag() and diag().

Names are the programs' own (Kr, Vnew, gC), with the arrows of decayed tiles, so a
line reads as the program defines its tiles; latex.py prints the notes' LaTeX."""
from __future__ import annotations

from .visitor import Visitor

_PREC = {"add": 1, "had": 2, "mul": 3, "atom": 4}
_MASK = {"M": "M", "M-1": "M₋₁", "MT": "Mᵀ"}
_ARROW = {"<": "←", ">": "→"}
_FIXED = {"S_prev": "S_[t-1]", "dO": "δO"}


def _wrap(s, inner, outer):
    return f"({s})" if _PREC[inner] < _PREC[outer] else s


class TextPrinter(Visitor):
    """``visit(e)`` is (text, precedence class), as latex.LatexPrinter's."""

    def __init__(self, state: str = "S"):
        self.state = state

    def text(self, e) -> str:
        return self.visit(e)[0]

    def wrapped(self, e, outer) -> str:
        return _wrap(*self.visit(e), outer)

    def visit_object(self, e):
        raise TypeError(f"no text for {type(e).__name__}")

    def visit_Var(self, e):
        if e.name in _FIXED:
            return _FIXED[e.name], "atom"
        if e.name == self.state and e.rows == "Dv" and e.cols == "Dk":
            return "S_[t]", "atom"
        if e.arrow in _ARROW and e.base:
            return _ARROW[e.arrow] + e.base, "atom"
        return e.name, "atom"

    def visit_Adj(self, e):
        base = "δ" + self.wrapped(e.var, "atom")
        if e.via:
            base += f"|from {', '.join(e.via)}"
        elif e.excl:
            base += f"|w/o {', '.join(e.excl)}"
        return base, "atom"

    def visit_Tex(self, e):
        return self.visit(e.a)

    def visit_Truth(self, e):
        return (f"{e.what}[{e.idx}]" if e.idx else e.what), "atom"

    def visit_Eye(self, e):
        return "I", "atom"

    def visit_Zeros(self, e):
        return "0", "atom"

    def visit_Ones(self, e):
        return "1", "atom"

    def visit_Const(self, e):
        return str(e.value), "atom"

    def visit_RowRec(self, e):
        return e.name, "atom"

    def visit_Add(self, e):
        return f"{self.text(e.a)} + {self.text(e.b)}", "add"

    def visit_Sub(self, e):
        b, pb = self.visit(e.b)
        return f"{self.text(e.a)} - {_wrap(b, pb, 'had') if pb == 'add' else b}", "add"

    def visit_Neg(self, e):
        return "-" + self.wrapped(e.a, "mul"), "add"

    def visit_SumBlocks(self, e):
        return f"Σ_t {self.wrapped(e.a, 'mul')}", "add"

    def visit_Sum(self, e):
        return f"Σ_{{{e.var}={e.lo}..{e.hi}}} {self.wrapped(e.body, 'mul')}", "add"

    def _hadamard(self, e, op):
        return f"{self.wrapped(e.a, 'had')} {op} {self.wrapped(e.b, 'mul')}", "had"

    def visit_Had(self, e):
        return self._hadamard(e, "⊙")

    def visit_HDiv(self, e):
        return self._hadamard(e, "⊘")

    def visit_MatMul(self, e):
        return f"{self.wrapped(e.a, 'mul')} {self.wrapped(e.b, 'mul')}", "mul"

    visit_Scale = visit_MatMul

    def visit_Prod(self, e):
        return f"Π_{{{e.var}={e.lo}..{e.hi}}} {self.wrapped(e.body, 'mul')}", "mul"

    def visit_Inner(self, e):
        return f"⟨{self.text(e.a)}, {self.text(e.b)}⟩", "atom"

    def visit_GatedInner(self, e):
        return f"gated({self.text(e.q)}, {self.text(e.k)}, {self.text(e.g)})", "atom"

    def visit_Transpose(self, e):
        return self.wrapped(e.a, "atom") + "ᵀ", "atom"

    def visit_Inv(self, e):
        return self.wrapped(e.a, "atom") + "⁻¹", "atom"

    def _call(self, name, e):
        return f"{name}({self.text(e.a)})", "atom"

    def visit_Exp(self, e):
        return self._call("exp", e)

    def visit_Log(self, e):
        return self._call("log", e)

    def visit_DiagM(self, e):
        return self._call("Diag", e)

    def visit_DiagV(self, e):
        return self._call("diag", e)

    def visit_CumProd(self, e):
        return self._call("cumprod", e)

    def visit_CumSum(self, e):
        return self._call("cumsum", e)

    def visit_RevCumSum(self, e):
        return self._call("suffix_sum", e)

    def visit_LastRow(self, e):
        return self.wrapped(e.a, "atom") + "^C", "atom"

    def visit_PlaceLast(self, e):
        return f"[0, …, 0, {self.text(e.a)}]ᵀ", "atom"

    def visit_Mask(self, e):
        return f"({self.text(e.a)} ⊙ {_MASK[e.kind]})", "atom"

    def visit_Row(self, e):
        return f"{self.wrapped(e.a, 'atom')}^{e.idx}", "atom"

    def visit_Stack(self, e):
        return f"[{self.text(e.body)}]_{{{e.var}=1..{e.n}}}ᵀ", "atom"

    def visit_Shift(self, e):
        return f"({self.text(e.a)})|t→t+{e.k}", "atom"

    def visit_SubBlock(self, e):
        return f"({self.text(e.a)})_[{e.bi}][{e.bj}]", "atom"


def to_text(e, state: str = "S") -> str:
    """``state``: the program's state definition, printed S_[t]."""
    return TextPrinter(state).text(e)
