"""Print IR to LaTeX in the notes' notation (bold tiles, chunk subscripts,
arrows for decayed tiles, odot / oslash, masks M and M_{-1})."""
from __future__ import annotations

from . import ir

_PREC = {"add": 1, "had": 2, "mul": 3, "atom": 4}


def _wrap(s, inner, outer):
    return f"\\left({s}\\right)" if _PREC[inner] < _PREC[outer] else s


def _p(e):
    """(latex, precedence class)."""
    if isinstance(e, ir.Tex):
        return e.tex, "atom"
    if isinstance(e, ir.Var):
        return (e.tex or e.name), "atom"
    if isinstance(e, ir.Adj):
        base = e.tex or f"\\delta {to_latex(e.var)}"
        if e.via:
            base = f"\\left.{base}\\right|_{{\\text{{from }} {', '.join(e.via)}}}"
        elif e.excl:
            base = f"\\left.{base}\\right|_{{\\text{{w/o }} {', '.join(e.excl)}}}"
        return base, "atom"
    if isinstance(e, ir.Truth):
        if e.tex:
            return e.tex, "atom"
        return {"state": f"\\mathbf{{S}}_{{{e.idx}}}", "out": f"\\boldsymbol{{o}}_{{{e.idx}}}",
                "outs": "\\mathbf{O}_{[t]}"}[e.what], "atom"
    if isinstance(e, ir.Eye):
        return "\\mathbf{I}", "atom"
    if isinstance(e, ir.Zeros):
        return "\\mathbf{0}", "atom"
    if isinstance(e, ir.Ones):
        return "\\mathbf{1}", "atom"
    if isinstance(e, ir.Const):
        return str(e.value), "atom"
    if isinstance(e, (ir.Add, ir.Sub)):
        op = "+" if isinstance(e, ir.Add) else "-"
        b, pb = _p(e.b)
        if isinstance(e, ir.Sub) and pb == "add":
            b = f"\\left({b}\\right)"
        return f"{to_latex(e.a)} {op} {b}", "add"
    if isinstance(e, ir.Neg):
        a, pa = _p(e.a)
        return "-" + _wrap(a, pa, "mul"), "add"
    if isinstance(e, (ir.Had, ir.HDiv)):
        op = "\\odot" if isinstance(e, ir.Had) else "\\oslash"
        a, pa = _p(e.a)
        b, pb = _p(e.b)
        return f"{_wrap(a, pa, 'had')} {op} {_wrap(b, pb, 'mul')}", "had"
    if isinstance(e, (ir.MatMul, ir.Scale)):
        a, pa = _p(e.a)
        b, pb = _p(e.b)
        return f"{_wrap(a, pa, 'mul')} {_wrap(b, pb, 'mul')}", "mul"
    if isinstance(e, ir.Inner):
        return f"\\langle {to_latex(e.a)}, {to_latex(e.b)} \\rangle", "atom"
    if isinstance(e, ir.Transpose):
        a, pa = _p(e.a)
        a = _wrap(a, pa, 'atom')
        if "^" in a and not a.endswith("\\right)"):
            a = "{" + a + "}"  # a second superscript needs its own group
        return f"{a}^\\top", "atom"
    if isinstance(e, ir.Inv):
        return f"\\left({to_latex(e.a)}\\right)^{{-1}}", "atom"
    if isinstance(e, ir.Exp):
        return f"\\exp\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.Log):
        return f"\\log {_wrap(*_p(e.a), 'atom')}", "atom"
    if isinstance(e, ir.DiagM):
        return f"\\text{{Diag}}\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.DiagV):
        return f"\\text{{diag}}\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.CumProd):
        return f"\\text{{cumprod}}\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.CumSum):
        return f"\\text{{cumsum}}\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.RevCumSum):
        return f"\\text{{suffix\\_sum}}_{{row}}\\left({to_latex(e.a)}\\right)", "atom"
    if isinstance(e, ir.LastRow):
        a, pa = _p(e.a)
        return f"{_wrap(a, pa, 'atom')}^{{C}}", "atom"
    if isinstance(e, ir.PlaceLast):
        return f"\\left[0,\\dots,0,{to_latex(e.a)}\\right]^\\top", "atom"
    if isinstance(e, ir.Mask):
        m = {"M": "\\mathbf{M}", "M-1": "\\mathbf{M}_{-1}", "MT": "\\mathbf{M}^\\top"}[e.kind]
        a, pa = _p(e.a)
        return f"\\left({a} \\odot {m}\\right)", "atom"
    if isinstance(e, ir.Row):
        a, _ = _p(e.a)
        return f"{a}^{{{e.idx}}}", "atom"
    if isinstance(e, ir.Sum):
        return f"\\sum_{{{e.var}={e.lo}}}^{{{e.hi}}} {_wrap(*_p(e.body), 'mul')}", "add"
    if isinstance(e, ir.Prod):
        return f"\\prod_{{{e.var}={e.lo}}}^{{{e.hi}}} {_wrap(*_p(e.body), 'mul')}", "mul"
    if isinstance(e, ir.Stack):
        return f"\\left[{to_latex(e.body)}\\right]_{{{e.var}=1}}^{{{e.n}}}{{}}^\\top", "atom"
    if isinstance(e, ir.RowRec):
        return e.name, "atom"
    if isinstance(e, ir.Shift):
        return f"\\left.{to_latex(e.a)}\\right|_{{t\\to t+{e.k}}}", "atom"
    if isinstance(e, ir.SubBlock):
        a, _ = _p(e.a)
        return f"\\left({a}\\right)_{{[{e.bi}][{e.bj}]}}", "atom"
    if isinstance(e, ir.GatedInner):
        return (f"\\left[\\sum_d q_{{id}} k_{{jd}} \\exp(\\log g_{{id}} - \\log g_{{jd}})\\right]"
                f"_{{{to_latex(e.q)},{to_latex(e.k)},{to_latex(e.g)}}}"), "atom"
    raise TypeError(f"no LaTeX for {type(e).__name__}")


def to_latex(e) -> str:
    return _p(e)[0]
