"""A readable sympy residual (lhs - rhs) for a failing claim at tiny sizes.  sympy
(0.7 s to import) loads on the first residual: a derivation that holds never needs it."""
from __future__ import annotations

from .adjoints import adjoint_value
from .evaluate import EvalError, Point, Sizes
from .fields import Sym
from .sites import sites

MAX_CHARS = 400


def _symbols(prefix, r, c):
    import sympy as sp
    return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{prefix}_{i + 1}{j + 1}"))


def symbolic_point(deriv, claim, sizes: Sizes) -> Point:
    """Every input a symbol named after its per-step vector (q_11, alpha_21, ...)."""
    import sympy as sp
    rec = deriv.recurrences[claim.recurrence]
    seq = {i.seq: _symbols(i.step, sizes.L, sizes.dim(i.dim)) for i in rec.inputs}
    S0 = sp.zeros(sizes.Dv, sizes.Dk) if "zero_initial_state" in claim.assume \
        else _symbols("s0", sizes.Dv, sizes.Dk)
    return Point(deriv, claim.recurrence, Sym(), sizes, seq, S0,
                 _symbols("do", sizes.L, sizes.Dv), _symbols("dS", sizes.Dv, sizes.Dk))


def sympy_residual(deriv, claim, sizes: Sizes) -> str:
    if sizes.C * max(sizes.Dk, sizes.Dv) > 4:
        return ""
    import sympy as sp
    prog = deriv.programs[claim.program]
    try:
        pt = symbolic_point(deriv, claim, sizes)
        for b, ev, env in sites(pt, claim, prog):
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
