"""The residual of a suggestion: the difference between the line and the
suggested line, pushed through the linear context of the edit, written in the
derivation's own named tiles."""
from __future__ import annotations

import dataclasses

from chunkproof.derivations import ir
from chunkproof.derivations.latex import to_latex
from .mutate import Edit
from .repair_candidates import _at


_LINEAR = (ir.MatMul, ir.Had, ir.Scale, ir.Transpose, ir.Mask, ir.DiagM, ir.DiagV, ir.Sum,
           ir.Row, ir.Stack, ir.Shift, ir.SumBlocks, ir.SubBlock, ir.LastRow, ir.PlaceLast,
           ir.CumSum, ir.RevCumSum, ir.Inner)


def _through(e, path, delta):
    """How a change ``delta`` at ``path`` changes ``e``, as a formula: the other
    summands drop out, linear operations keep their other operands.  None where the
    path passes through something not linear in it (an inverse, a denominator)."""
    if not path:
        return delta
    head, rest = path[0], path[1:]
    inner = _through(getattr(e, head), rest, delta)
    if inner is None:
        return None
    if isinstance(e, ir.Add) or isinstance(e, ir.Tex):
        return inner
    if isinstance(e, ir.Sub):
        return inner if head == "a" else _neg(inner)
    if isinstance(e, ir.Neg):
        return _neg(inner)
    if isinstance(e, ir.HDiv) and head == "a" or isinstance(e, _LINEAR):
        return dataclasses.replace(e, **{head: inner})
    return None


def _neg(e):
    return e.a if isinstance(e, ir.Neg) else ir.Neg(e)


def _only_sums(e, path):
    for p in path:
        if not isinstance(e, (ir.Add, ir.Sub, ir.Neg, ir.Tex)):
            return False
        e = getattr(e, p)
    return True


def named_residual(side_expr, ed: Edit, side="rhs") -> str:
    """lhs - rhs of the line as written, in the derivation's tiles (LaTeX): 'missing
    + T' where a term is missing from a sum of the line, 'extra + T' where one is too
    many, else the difference the edit makes, carried to the whole side ('' where
    that passes through something not linear)."""
    old = _at(side_expr, ed.path)
    delta = ed.delta() if ed.delta else ir.Sub(ed.new, old)
    d = _through(side_expr, ed.path, delta)
    if d is None:
        return ""
    if side == "lhs":   # the edit moved the left side: lhs - rhs changes by -d
        d = _neg(d)
    if ed.word and _only_sums(side_expr, ed.path):
        t = d if ed.word == "missing" else _neg(d)
        sign, t = ("-", t.a) if isinstance(t, ir.Neg) else ("+", t)
        return rf"\text{{{ed.word} }} {sign} {_tex(t)}"
    return rf"\text{{lhs}} - \text{{rhs}} = {_tex(d)}"


def _tex(e):
    try:
        return to_latex(e)
    except Exception:  # noqa: BLE001
        return type(e).__name__
