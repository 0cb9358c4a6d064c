"""A readable sympy residual (lhs - rhs) for a failing claim at tiny sizes."""
from __future__ import annotations

import sympy as sp

from .evaluate import BlockEval, EvalError, Point, Sizes, adjoint_value
from .fields import Sym

MAX_CHARS = 400


def _symbols(prefix, r, c):
    return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{prefix}_{i + 1}{j + 1}"))


def symbolic_point(deriv, claim, sizes: Sizes) -> Point:
    f = Sym()
    pt = object.__new__(Point)
    pt.deriv, pt.field, pt.sizes = deriv, f, sizes
    pt.rec = deriv.recurrences[claim.recurrence]
    pt.seq = {i.seq: _symbols(i.step, sizes.L, sizes.dim(i.dim)) for i in pt.rec.inputs}
    pt.S0 = sp.zeros(sizes.Dv, sizes.Dk) if "zero_initial_state" in claim.assume \
        else _symbols("s0", sizes.Dv, sizes.Dk)
    pt.dO = _symbols("do", sizes.L, sizes.Dv)
    pt.dST = _symbols("dS", sizes.Dv, sizes.Dk)
    pt.states = pt.outs = None
    return pt


def sympy_residual(deriv, claim, sizes: Sizes) -> str:
    if sizes.C * max(sizes.Dk, sizes.Dv) > 4:
        return ""
    from .check import _adjoint_fn, _bindings, _blocks
    prog = deriv.programs[claim.program]
    try:
        pt = symbolic_point(deriv, claim, sizes)
        shared = {}
        adjf = _adjoint_fn(pt, prog)
        for b in _blocks(claim, prog, sizes):
            ev = BlockEval(pt, prog, b, pt.field, adjoints=adjf, shared=shared)
            for env in _bindings(claim, ev.idx_env()):
                rhs = ev.ev(claim.rhs, env)
                lhs = adjoint_value(pt, prog, b, claim.lhs) if claim.kind == "adjoint" \
                    else ev.ev(claim.lhs, env)
                diff = (lhs - rhs).applyfunc(lambda x: sp.factor(sp.cancel(x)))
                nz = [(i, j, diff[i, j]) for i in range(diff.rows) for j in range(diff.cols)
                      if diff[i, j] != 0]
                if nz:
                    where = f"block t={b}" + "".join(f", {k}={v}" for k, v in env.items())
                    body = "; ".join(f"[{i + 1},{j + 1}]: {sp.sstr(x)}" for i, j, x in nz[:3])
                    more = f" (+{len(nz) - 3} more entries)" if len(nz) > 3 else ""
                    text = f"{where}: lhs - rhs = {body}{more}"
                    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + " ..."
    except (EvalError, ZeroDivisionError, ValueError) as e:
        return f"(no symbolic residual: {e})"
    return ""
