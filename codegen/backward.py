"""The backward's reverse scan, planned from the variant's verified backward claims.

δS_[t-1] (claim backward['dS_prev']) reads δS_[t], δO_[t] and per-chunk tiles of the
inputs; the inner adjoints it names (δU, δC, ...) are defined by their own claims.
Each whole adjoint adj(X) becomes a tile dX, so the forward stage machinery
(codegen/emit.py) orders and prints them like program definitions."""
from __future__ import annotations

import dataclasses
from typing import List, Tuple

from derivations import ir
from .plan import Plan, var_names
from .printer import CodegenError

ADJ_STATE = "dS"          # δS_[t]^C, carried by the reverse scan
D_OUT = "dO"              # δO_[t], read from memory (derivations.dsl.DO)


def adj_tile(x: ir.Adj) -> ir.Var:
    if x.via or x.excl:
        raise CodegenError(f"a kernel cannot print the partial adjoint of {x.var.name} "
                           f"(through {', '.join(x.via) or 'all but ' + ', '.join(x.excl)}); "
                           f"name a claim that gives the whole adjoint")
    return ir.Var("d" + x.var.name, x.var.rows, x.var.cols, r"\delta " + x.var.tex)


def subst_adjoints(e: ir.Expr, named=None) -> ir.Expr:
    """e with every adj(X) replaced by the tile dX, and every subexpression that a
    program definition names (``named``: repr of an expression -> its Var) by that tile: the notes
    write X^{-T} where the program has A = X^{-1}, and the kernel should not invert twice."""
    if isinstance(e, ir.Adj):
        return adj_tile(e)
    if named and not isinstance(e, ir.Var) and repr(e) in named:
        return named[repr(e)]
    if not dataclasses.is_dataclass(e):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        val = getattr(e, f.name)
        if isinstance(val, ir.Expr):
            new = subst_adjoints(val, named)
            if new is not val:
                changes[f.name] = new
    return dataclasses.replace(e, **changes) if changes else e


def _named(plan: Plan):
    # IR nodes compare by identity; their dataclass repr is the structural key.  The
    # tile keeps the LaTeX its other uses in the program print with.
    tex = {n.name: n.tex for _, e in plan.defs for n in ir.walk(e) if isinstance(n, ir.Var)}
    return {repr(e): ir.Var(n, *e.shape(), tex.get(n, n)) for n, e in plan.defs if not isinstance(e, ir.Var)}


def _adjoint_defs(plan: Plan, bwd):
    named = _named(plan)
    out = {}
    for c in list(bwd["inner"]) + list(bwd["grads"].values()):
        if isinstance(c.lhs, ir.Adj):
            out[adj_tile(c.lhs).name] = subst_adjoints(c.rhs, named)
    return out, named


def _collect(plan: Plan, adj_defs, exprs, what, allow_state):
    """(forward definitions computed in the stage, adjoint definitions in dependency
    order, boundary tiles read) for a stage that computes `exprs`."""
    v = plan.variant
    dmap = dict(plan.defs)
    stored = set(plan.boundary)
    need_fwd, need_adj, order_adj = set(), set(), []

    def walk(e):
        for n in sorted(var_names(e)):    # sorted: the printed order must not depend on hashing
            if n == "S_prev" and not allow_state:
                raise CodegenError(f"the {what} of {v.name} would read S_[t-1]: "
                                   f"its claims must not need the forward state")
            if n in (ADJ_STATE, D_OUT, "S_prev") or n in plan.inputs:
                continue
            if n in adj_defs:
                if n not in need_adj:
                    need_adj.add(n)
                    walk(adj_defs[n])
                    order_adj.append(n)
            elif n in dmap:
                if n not in need_fwd:
                    need_fwd.add(n)
                    if n not in stored:
                        walk(dmap[n])
            elif n.startswith("d"):
                raise CodegenError(f"the {what} of {v.name} reads adjoint {n}, which no listed "
                                   f"claim defines (codegen/variants.py backward['inner'])")
            else:
                raise CodegenError(f"the {what} of {v.name} reads {n}, which is not defined")
    for e in exprs:
        walk(e)
    fwd = [n for n, _ in plan.defs if n in need_fwd and n not in stored]
    reads = [n for n, _ in plan.defs if n in need_fwd and n in stored]
    return fwd, order_adj, reads


def _extended(plan, adj_defs, names):
    return dataclasses.replace(plan, defs=list(plan.defs) + [(n, adj_defs[n]) for n in names])


def reverse_scan(plan: Plan, bwd) -> Tuple[Plan, List[str], Tuple[str, ir.Expr, object], List[str]]:
    """(plan extended by the adjoint definitions, definitions the reverse scan computes in
    order, its final (name, expr, claim) = delta S_[t-1], boundary tiles it reads).
    ``bwd``: the variant's checked backward claims (plan.backward_claims)."""
    adj_defs, named = _adjoint_defs(plan, bwd)
    c = bwd["dS_prev"]
    final = subst_adjoints(c.rhs, named)
    fwd, adj, reads = _collect(plan, adj_defs, [final], "reverse scan", allow_state=False)
    return _extended(plan, adj_defs, adj), fwd + adj, ("dS_prev", final, c), reads


def gradients(plan: Plan, bwd):
    """The per-chunk gradient stage: (extended plan, definitions in order, finals
    [("g_<arg>", expr, claim)], boundary tiles read).  It reads S_[t-1] (the forward's h)
    and delta S_[t] (the reverse scan's dh)."""
    adj_defs, named = _adjoint_defs(plan, bwd)
    finals = [(f"g_{a}", subst_adjoints(c.rhs, named), c) for a, c in bwd["grads"].items()]
    fwd, adj, reads = _collect(plan, adj_defs, [e for _, e, _ in finals], "gradient stage", allow_state=True)
    return _extended(plan, adj_defs, adj), fwd + adj, finals, reads
