"""The state scan's gated operands, computed by the intra kernel instead.

A vector-gated scan (GLA, KDA, DPLR, RWKV-6) multiplies the state's update by an
operand such as K_[t] Diag(gamma^C) / Gamma_[t]: a C x Dk tile that reads no state but
needs the whole C x Dk log gate (fp32) and an exp per element, inside the sequential
loop, once per V block.  On the H200 that work held KDA's scan at the register ceiling
(docs/measurements.md, "Where KDA's forward goes").  Here such operands become boundary
tiles: the intra kernel computes each once per chunk and writes it in fp32, the scan
reads it.

Where the claim's grouping does not have the operand as a subexpression ((V^T Kr)
Diag(gamma^C), or (S + V^T Kr) Diag(gamma^C)), the right-hand side is regrouped first
(a diagonal factor distributed over a sum, a product re-associated), and the regrouped
right-hand side is a claim of its own, checked like any other before a kernel is
printed from it (plan.gate).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Set, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim
from chunkproof.derivations.latex import to_latex

STATE = "S_prev"
OPERAND = (("C", "Dk"), ("C", "Dv"))


def _diag(e) -> bool:
    return isinstance(e, ir.DiagM)


def regroup(e: ir.Expr) -> ir.Expr:
    """``e`` with every right diagonal factor taken inside: (A + B) D -> A D + B D and
    (X Y) D -> X (Y D), bottom-up, so that Y D is a subexpression."""
    e = e.map_children(regroup)
    if isinstance(e, ir.MatMul) and _diag(e.b):
        a = e.a
        if isinstance(a, (ir.Add, ir.Sub)):
            return type(a)(regroup(ir.MatMul(a.a, e.b)), regroup(ir.MatMul(a.b, e.b)))
        if isinstance(a, ir.MatMul):
            return ir.MatMul(a.a, regroup(ir.MatMul(a.b, e.b)))
    return e


def _reads(e: ir.Expr, dmap: Dict[str, ir.Expr], stop: Set[str]) -> Set[str]:
    """Every tile ``e`` reads, through the definitions in ``dmap`` (not through ``stop``)."""
    seen: Set[str] = set()
    todo = [e]
    while todo:
        for n in ir.walk(todo.pop()):
            if isinstance(n, ir.Var) and not isinstance(n, ir.Param) and n.name not in seen:
                seen.add(n.name)
                if n.name in dmap and n.name not in stop:
                    todo.append(dmap[n.name])
    return seen


@dataclasses.dataclass
class Hoisted:
    rhs: ir.Expr                           # the state's right-hand side, operands named
    defs: List[Tuple[str, ir.Expr]]        # the operands (their expressions; a program's own keeps its name)
    claim: Optional[Claim]                 # the regrouped claim, when the grouping changed


def hoist(rhs: ir.Expr, claim: Claim, dmap: Dict[str, ir.Expr], stored: Set[str],
          vector_gates: Set[str], taken: Callable[[str], bool]) -> Optional[Hoisted]:
    """The operands of the state's products worth computing in the intra kernel: a
    maximal operand of a product in ``rhs`` (regrouped) that is C x Dk or C x Dv, reads
    no state, is not a tile already in memory, and reads one of ``vector_gates`` (C x Dk
    gate tiles kept in fp32).  None when there is none."""
    body = regroup(rhs)
    found: Dict[ir.Expr, str] = {}

    def worth(e) -> bool:
        if e.shape() not in OPERAND or (isinstance(e, ir.Var) and (e.name in stored or e.name not in dmap)):
            return False
        got = _reads(e, dmap, stored)
        return STATE not in got and bool(got & vector_gates)

    def sub(e):
        if isinstance(e, ir.MatMul):
            parts = []
            for x in (e.a, e.b):
                if worth(x) and isinstance(x, ir.Var):     # a definition of the program: its name
                    found.setdefault(x, x.name)
                    parts.append(x)
                elif worth(x):
                    if x not in found:
                        i = len(found)
                        found[x] = next(f"hs{j}" for j in range(i, i + 100) if not taken(f"hs{j}"))
                    rows, cols = x.shape()
                    parts.append(ir.Var(found[x], rows, cols, "(" + to_latex(x) + ")"))
                else:
                    parts.append(sub(x))
            return ir.MatMul(*parts)
        return e.map_children(sub)
    named = sub(body)
    if not found:
        return None
    regrouped = None
    if body != rhs:
        regrouped = dataclasses.replace(claim, id=f"{claim.id}.regrouped", rhs=body,
                                        latex=f"{claim.latex}  (regrouped: {to_latex(body)})")
    return Hoisted(named, [(n, dmap[n] if isinstance(x, ir.Var) else x) for x, n in found.items()], regrouped)
