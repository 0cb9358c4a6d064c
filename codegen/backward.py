"""The backward's reverse scan, planned from the variant's verified backward claims.

δS_[t-1] (claim backward['dS_prev']) reads δS_[t], δO_[t] and per-chunk tiles of the
inputs; the inner adjoints it names (δU, δC, ...) are defined by their own claims.
Each whole adjoint adj(X) becomes a tile dX, so the forward stage machinery
(codegen/emit.py) orders and prints them like program definitions."""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

from derivations import ir
from .plan import Plan, _dense_inverses, backward_claims, var_names
from .printer import CodegenError

ADJ_STATE = "dS"          # δS_[t]^C, carried by the reverse scan
D_OUT = "dO"              # δO_[t], read from memory (derivations.dsl.DO)


def adj_tile(x: ir.Adj) -> ir.Var:
    if x.via or x.excl:
        raise CodegenError(f"a kernel cannot print the partial adjoint of {x.var.name} "
                           f"(through {', '.join(x.via) or 'all but ' + ', '.join(x.excl)}); "
                           f"name a claim that gives the whole adjoint")
    return ir.Var("d" + x.var.name, x.var.rows, x.var.cols, r"\delta " + x.var.tex)


def subst_adjoints(e: ir.Expr) -> ir.Expr:
    """e with every adj(X) replaced by the tile dX."""
    if isinstance(e, ir.Adj):
        return adj_tile(e)
    if not dataclasses.is_dataclass(e):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        val = getattr(e, f.name)
        if isinstance(val, ir.Expr):
            new = subst_adjoints(val)
            if new is not val:
                changes[f.name] = new
    return dataclasses.replace(e, **changes) if changes else e


def reverse_scan(plan: Plan, check=True) -> Tuple[Plan, List[str], Tuple[str, ir.Expr, object], List[str]]:
    """(plan extended by the adjoint definitions, definitions the reverse scan computes in
    order, its final (name, expr, claim) = δS_[t-1], boundary tiles it reads)."""
    v = plan.variant
    bwd = backward_claims(v, plan.deriv, check=check)
    adj_defs: Dict[str, Tuple[ir.Expr, object]] = {}
    for c in bwd["inner"]:
        if isinstance(c.lhs, ir.Adj):
            adj_defs[adj_tile(c.lhs).name] = (subst_adjoints(c.rhs), c)
    dmap = dict(plan.defs)
    final_claim = bwd["dS_prev"]
    final = subst_adjoints(final_claim.rhs)
    stored = set(plan.boundary)
    need_fwd, need_adj, order_adj = set(), set(), []

    def walk(e):
        for n in var_names(e):
            if n in (ADJ_STATE, D_OUT, "S_prev") or n in plan.inputs:
                if n == "S_prev":
                    raise CodegenError(f"the reverse scan of {v.name} would read S_[t-1]: "
                                       f"its claims must not need the forward state")
                continue
            if n in adj_defs:
                if n not in need_adj:
                    need_adj.add(n)
                    walk(adj_defs[n][0])
                    order_adj.append(n)
            elif n in dmap:
                if n not in need_fwd:
                    need_fwd.add(n)
                    if n not in stored:
                        walk(dmap[n])
            elif n.startswith("d"):
                raise CodegenError(f"the reverse scan of {v.name} reads adjoint {n}, which no listed "
                                   f"claim defines (codegen/variants.py backward['inner'])")
            else:
                raise CodegenError(f"the reverse scan of {v.name} reads {n}, which is not defined")
    walk(final)
    heavy_unstored = [n for n in need_fwd if n not in stored and _dense_inverses(dmap[n], plan.diagonal)]
    if heavy_unstored:
        raise CodegenError(f"the reverse scan of {v.name} needs {heavy_unstored}, which only the "
                           f"intra kernel can compute and it does not write")
    fwd_names = [n for n, _ in plan.defs if n in need_fwd and n not in stored]
    reads = [n for n, _ in plan.defs if n in need_fwd and n in stored]
    ext = dataclasses.replace(plan, defs=list(plan.defs) + [(n, adj_defs[n][0]) for n in order_adj])
    return ext, fwd_names + order_adj, ("dS_prev", final, final_claim), reads
