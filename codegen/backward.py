"""The backward's kernels, planned from the variant's verified backward claims.

δS_[t-1] (claim backward['dS_prev']) reads δS_[t], δO_[t] and per-chunk tiles of the
inputs; the inner adjoints it names (δU, δC, ...) are defined by their own claims.
Each whole adjoint adj(X) becomes a tile dX, so the forward stage machinery
(codegen/emit.py) orders and prints them like program definitions.  Each function
returns KernelPlans (codegen/kernel_plan.py): what a kernel computes, reads, writes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, List, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.latex import to_latex
from .kernel_plan import CHUNK, VCOLS, VSUM, Final, KernelPlan, Passed
from .plan import Plan, has_product, var_names
from .printer import CodegenError

ADJ_STATE = "dS"          # δS_[t]^C, carried by the reverse scan
D_OUT = "dO"              # δO_[t], read from memory (derivations.dsl.DO)
VRED = "vr"               # the V reductions the V kernel passes to the K side


def adj_tile(x: ir.Adj) -> ir.Var:
    if x.via or x.excl:
        raise CodegenError(f"a kernel cannot print the partial adjoint of {x.var.name} "
                           f"(through {', '.join(x.via) or 'all but ' + ', '.join(x.excl)}); "
                           f"name a claim that gives the whole adjoint")
    return ir.Var("d" + x.var.name, x.var.rows, x.var.cols, r"\delta " + x.var.tex)


def subst_adjoints(e: ir.Expr, named=None) -> ir.Expr:
    """e with every adj(X) replaced by the tile dX, and every subexpression that a
    program definition names (``named``: expression -> its Var) by that tile: the notes
    write X^{-T} where the program has A = X^{-1}, and the kernel should not invert twice."""
    if isinstance(e, ir.Adj):
        return adj_tile(e)
    if named and not isinstance(e, ir.Var) and e in named:
        return named[e]
    return e.map_children(lambda x: subst_adjoints(x, named))


def _replace(e: ir.Expr, table: Dict[ir.Expr, ir.Expr]) -> ir.Expr:
    """e with every subexpression that is a key of table replaced by its value."""
    if e in table:
        return table[e]
    if isinstance(e, ir.Var):
        return e
    return e.map_children(lambda x: _replace(x, table))


# a mask's transpose, where the IR has one (M^T of the lower mask, and back)
_MASK_T = {"M": "MT", "MT": "M"}


def _named(plan: Plan):
    # the tile keeps the LaTeX its other uses in the program print with
    tex = {n.name: n.tex for _, e in plan.defs for n in ir.walk(e) if isinstance(n, ir.Var)}
    named = {e: ir.Var(n, *e.shape(), tex.get(n, n)) for n, e in plan.defs if not isinstance(e, ir.Var)}
    # a masked product's transpose, (Y X^T . M^T) = (X Y^T . M)^T, read as the named
    # tile transposed (GLA's dV claim holds the chunk's scores ch0 so): the same values,
    # read rather than formed again
    for e, var in list(named.items()):
        t = _transposed_product(e)
        if t is not None and t not in named:
            named[t] = ir.Transpose(var)
    return named


def _transposed_product(e: ir.Expr):
    """(Y X^T . M^T) for e = (X Y^T . M), or None where e is not a masked product of
    that form."""
    if isinstance(e, ir.Mask) and e.kind in _MASK_T and isinstance(e.a, ir.MatMul) \
            and isinstance(e.a.b, ir.Transpose):
        return ir.Mask(ir.MatMul(e.a.b.a, ir.Transpose(e.a.a)), _MASK_T[e.kind])
    return None


@dataclass
class _Adjoints:
    defs: Dict[str, ir.Expr]     # dX -> its claim's right-hand side, adjoints as tiles
    named: Dict[ir.Expr, ir.Var]
    cites: Dict[str, str]        # every definition -> where it is checked


def _cite(c) -> str:
    return f"claim {c.id}, {c.citation}"


def _adjoints(plan: Plan, bwd) -> _Adjoints:
    named = _named(plan)
    prog = plan.program
    fwd = f"program {prog.name}, under claims {plan.claims['O'].id}, {plan.claims['S'].id}"
    out, cites = {}, {n: fwd for n, _ in plan.defs}
    for c in list(bwd["inner"]) + list(bwd["grads"].values()):
        if isinstance(c.lhs, ir.Adj):
            n = adj_tile(c.lhs).name
            out[n] = subst_adjoints(c.rhs, named)
            cites[n] = _cite(c)
    return _Adjoints(out, named, cites)


def _grad_finals(bwd, named) -> List[Final]:
    # a parameter argument's gradient: its claim gives chunk t's part (the wrapper sums them)
    return [Final(f"g_{a}", subst_adjoints(c.rhs, named), c)
            for a, c in list(bwd["grads"].items()) + list(bwd.get("param_grads", {}).items())]


def _collect(plan: Plan, adj_defs, exprs, what, allow_state, given=()):
    """(forward definitions computed in the stage, adjoint definitions in dependency
    order, boundary tiles read) for a stage that computes `exprs`; ``given``: tiles the
    stage reads from memory besides the inputs and boundary tiles."""
    v = plan.variant
    dmap = dict(plan.defs)
    stored = set(plan.boundary)
    need_fwd, need_adj, order_adj = set(), set(), []

    def visit(e):
        for n in sorted(var_names(e)):    # sorted: the printed order must not depend on hashing
            if n == "S_prev" and not allow_state:
                raise CodegenError(f"the {what} of {v.name} would read S_[t-1]: "
                                   f"its claims must not need the forward state")
            if n in (ADJ_STATE, D_OUT, "S_prev") or n in plan.inputs or n in given:
                continue
            if n in adj_defs:
                if n not in need_adj:
                    need_adj.add(n)
                    visit(adj_defs[n])
                    order_adj.append(n)
            elif n in dmap:
                if n not in need_fwd:
                    need_fwd.add(n)
                    if n not in stored:
                        visit(dmap[n])
            elif n.startswith("d"):
                raise CodegenError(f"the {what} of {v.name} reads adjoint {n}, which no listed "
                                   f"claim defines (codegen/variants.py backward['inner'])")
            else:
                raise CodegenError(f"the {what} of {v.name} reads {n}, which is not defined")
    for e in exprs:
        visit(e)
    fwd = [n for n, _ in plan.defs if n in need_fwd and n not in stored]
    reads = [n for n, _ in plan.defs if n in need_fwd and n in stored]
    return fwd, order_adj, reads


def _extended(plan, defs, names, extra=()):
    return dataclasses.replace(plan, defs=list(plan.defs) + [(n, defs[n]) for n in names] + list(extra))


def _used(kp_defs: Dict[str, ir.Expr], names, finals) -> set:
    return set().union(set(), *(var_names(kp_defs[n]) for n in names), *(var_names(f.expr) for f in finals))


def _depends(dmap, hit, stop=()):
    """A predicate: an expression's value depends on a node for which hit(node) holds,
    through the definitions in dmap (not through the names in stop, read from memory)."""
    memo = {}

    def through(name):
        if name in stop or name not in dmap:
            return False
        if name not in memo:
            memo[name] = False      # a cycle is not a dependency
            memo[name] = dep(dmap[name])
        return memo[name]

    def dep(e):
        return any(hit(n) or (isinstance(n, ir.Var) and through(n.name)) for n in ir.walk(e))
    return dep


def _named_tile(name, e) -> ir.Var:
    return ir.Var(name, *e.shape(), "(" + to_latex(e) + ")")


def reverse_scan(plan: Plan, bwd) -> KernelPlan:
    """The reverse scan over chunks as one sequential kernel: δS_[t-1] from δS_[t] and
    δO_[t].  ``bwd``: the variant's checked backward claims (plan.backward_claims)."""
    adj = _adjoints(plan, bwd)
    c = bwd["dS_prev"]
    final = Final("dS_prev", subst_adjoints(c.rhs, adj.named), c)
    fwd, names, reads = _collect(plan, adj.defs, [final.expr], "reverse scan", allow_state=False)
    return KernelPlan(_extended(plan, adj.defs, names), fwd + names, [final], reads, cites=adj.cites)


def hoist_reverse(plan: Plan, bwd) -> Tuple[KernelPlan, KernelPlan]:
    """The reverse scan with its state-free C x Dv products taken out of the sequential
    loop: every maximal subexpression of the scan's claims that does not read delta S,
    has shape C x Dv and contains a product (the intra-chunk part of delta U,
    (Q K^T . M)^T delta O) is computed first for all chunks in parallel (the first
    kernel) and read by the scan (the second).  Same claims, same grouping; only where
    each part is computed moves.  The first kernel's writes_passed is empty when nothing
    is state-free (GLA)."""
    adj = _adjoints(plan, bwd)
    c = bwd["dS_prev"]
    final = subst_adjoints(c.rhs, adj.named)
    dmap = dict(plan.defs)
    dmap.update(adj.defs)
    stored = set(plan.boundary)
    sdep = _depends(dmap, lambda e: isinstance(e, ir.Var) and e.name == ADJ_STATE, stored)
    hoisted: Dict[ir.Expr, Passed] = {}
    sdefs = {}
    cites = dict(adj.cites)

    def sub(e):
        if not sdep(e):
            body = dmap.get(e.name) if isinstance(e, ir.Var) else e
            if e.shape() == ("C", "Dv") and body is not None and has_product(body):
                if e not in hoisted:
                    name = e.name if isinstance(e, ir.Var) else f"hr{len(hoisted)}"
                    hoisted[e] = Passed(name, e, VCOLS)
                    cites.setdefault(name, _cite(c))
                p = hoisted[e]
                return ir.Var(p.name, "C", "Dv", e.tex if isinstance(e, ir.Var) else "(" + to_latex(e) + ")")
            return e
        if isinstance(e, ir.Var):
            if e.name in dmap and e.name not in stored and e.name not in sdefs:
                sdefs[e.name] = None
                sdefs[e.name] = sub(dmap[e.name])
            return e
        return e.map_children(sub)

    sfinal = Final("dS_prev", sub(final), c)
    passed = list(hoisted.values())
    unnamed = [(p.name, p.expr) for p in passed if p.name not in dmap]
    fwd_p, adj_p, reads_p = _collect(plan, adj.defs, [p.expr for p in passed], "reverse scan's parallel part",
                                     allow_state=False)
    pre = KernelPlan(_extended(plan, adj.defs, adj_p, unnamed), fwd_p + adj_p + [n for n, _ in unnamed],
                     reads=reads_p, writes_passed=passed, cites=cites)
    splan = dataclasses.replace(plan, defs=[(n, sdefs.get(n) or e) for n, e in plan.defs])
    sadj = {n: (sdefs.get(n) or e) for n, e in adj.defs.items()}
    fwd_s, adj_s, reads_s = _collect(splan, sadj, [sfinal.expr], "reverse scan", allow_state=False,
                                     given={p.name for p in passed})
    scan_plan = _extended(splan, sadj, adj_s)
    used = _used(dict(scan_plan.defs), fwd_s + adj_s, [sfinal])
    scan = KernelPlan(scan_plan, fwd_s + adj_s, [sfinal], reads_s,
                      reads_passed=[p for p in passed if p.name in used], cites=cites)
    return pre, scan


def scan_tiles(scan: KernelPlan) -> List[Passed]:
    """The C x Dv tiles with a product in them that the reverse scan computes at every
    chunk (δU of the delta rules: K δS^T plus the hoisted intra-chunk part).  The
    gradient V kernel prints the same definitions from the same claims; the scan can
    write them per chunk over the padded V columns, like the hoisted tiles, for the V
    kernel to read instead of forming them again (emit.backward_stages keeps those it
    reads).  An alias (dC = dV2) is not a tile of its own."""
    defs = scan.defs()
    exprs = [e for _, e in scan.plan.defs] + [f.expr for f in scan.finals]
    tex = {n.name: n.tex for e in exprs for n in ir.walk(e) if isinstance(n, ir.Var)}
    return [Passed(n, ir.Var(n, "C", "Dv", tex.get(n, n)), VCOLS) for n in scan.computes
            if defs[n].shape() == ("C", "Dv") and not isinstance(defs[n], ir.Var) and has_product(defs[n])]


@dataclass
class KSide:
    """What the gradient stage's K side starts from (split_gradients), for split_k."""
    plan: Plan                   # the forward definitions, V reductions substituted
    adj_defs: Dict[str, ir.Expr]
    reductions: List[Passed]     # the V kernel's V reductions, read from memory
    finals: List[Final]
    cites: Dict[str, str]


@dataclass
class VSide:
    """What the V kernel computes its V reductions from (split_gradients), for loop_plan."""
    plan: Plan
    adj_defs: Dict[str, ir.Expr]
    given: set                   # the reverse scan's tiles it reads (hoisted)
    hoisted: List[Passed]
    cites: Dict[str, str]


@dataclass
class GradientSplit:
    v: KernelPlan                # the V kernel: gradients with a Dv dimension, writes the V reductions
    k: KernelPlan                # the K kernel: the other gradients, reads them
    k_side: KSide
    v_side: VSide


def split_gradients(plan: Plan, bwd, hoisted=(), looped=frozenset(), share_rowsums=False) -> GradientSplit:
    """The gradient stage as two kernels.  The V kernel, V-blocked, computes the
    gradients that have a Dv dimension and every *V reduction* the others read: a
    subexpression without a Dv dimension whose operands have one (delta O S_[t-1],
    delta O Vnew^T, <S_[t-1], delta S>, ...; a diag() of such a product is reduced
    whole), each written per V block.  The K kernel reads them summed over the blocks
    and computes the other gradients without reading any tile with a Dv dimension.
    Nothing is re-derived: each V reduction is a subexpression of a checked claim, and
    the K kernel prints the claims with those subexpressions read instead of recomputed.

    ``hoisted``: the reverse scan's parallel tiles (hoist_reverse's writes_passed); the
    V kernel reads them where its claims hold the same subexpression (the intra-chunk
    part of delta U) instead of forming it again.  ``looped``: the V reductions the K
    side forms itself (loop_plan); the V kernel does not write them.  ``share_rowsums``:
    a row sum (X ⊙ Y) 1 whose X another claim needs whole is formed by the K side from
    that reduction rather than passed as a column (Variant.vred_rowsums); right where the
    K side is one kernel, which reads X anyway (emit.backward_stages decides)."""
    adj = _adjoints(plan, bwd)
    adj_plain = dict(adj.defs)
    hmap = {p.expr: _named_tile(p.name, p.expr) for p in hoisted if not isinstance(p.expr, ir.Var)}
    adj_defs = {n: _replace(e, hmap) for n, e in adj.defs.items()} if hmap else adj.defs
    # a hoisted tile that is a definition of its own (the scan's δU): any other
    # definition holding the same expression (δV_new's claim repeats δU's) reads it too
    same = {adj_defs[p.expr.name]: p.expr for p in hoisted
            if isinstance(p.expr, ir.Var) and p.expr.name in adj_defs}
    if same:
        adj_defs = {n: e if n in {v.name for v in same.values()} else _replace(e, same)
                    for n, e in adj_defs.items()}
    finals = _grad_finals(bwd, adj.named)
    dmap = dict(plan.defs)
    dmap.update(adj_defs)
    cites = dict(adj.cites)
    has_v = lambda e: "Dv" in e.shape()     # noqa: E731
    vdep = _depends(dmap, has_v)             # e's value reads a tile with a Dv dimension
    reds: Dict[ir.Expr, Passed] = {}
    kdefs = {}
    rowsums = plan.variant.vred_rowsums
    direct = lambda e: not has_v(e) and any(has_v(c) for c in e.children())     # noqa: E731
    source = [""]     # the claim whose expression is being cut, for the reductions' citations

    def red(e):
        if e not in reds:
            reds[e] = Passed(f"{VRED}{len(reds)}", e, VSUM)
            cites[reds[e].name] = source[-1]
        return _named_tile(reds[e].name, e)

    def k_rowsum(e):
        # (X ⊙ Y) 1 over Dk, X a V reduction and Y free of any: linear in X, so each V
        # block's part of it sums to the whole
        return isinstance(e, ir.MatMul) and isinstance(e.b, ir.Ones) and e.b.shape() == ("Dk", "1")

    def sub(e):
        if not vdep(e):
            return e
        if has_v(e):
            raise CodegenError(f"the gradient K kernel of {plan.variant.name} would need "
                               f"${to_latex(e)}$, which has a Dv dimension")
        if rowsums and k_rowsum(e):
            # Variant.vred_rowsums: the V kernel writes such a row sum as a C x 1 V
            # reduction, so that the kernel reading it need not read the C x Dk one
            if isinstance(e.a, (ir.Add, ir.Sub)):
                return sub(type(e.a)(ir.MatMul(e.a.a, e.b), ir.MatMul(e.a.b, e.b)))
            if isinstance(e.a, ir.Had) and any(direct(x) and not vdep(y) for x, y in ((e.a.a, e.a.b), (e.a.b, e.a.a))):
                if share_rowsums and (e.a.a in shared or e.a.b in shared):
                    # the C x Dk reduction is read anyway (another claim needs it whole)
                    return ir.MatMul(e.a.map_children(lambda c: red(c) if c in shared else sub(c)), e.b)
                return red(e)
        if isinstance(e, ir.Var):
            if e.name not in kdefs:
                kdefs[e.name] = None
                source.append(cites.get(e.name, source[-1]))
                kdefs[e.name] = sub(dmap[e.name])
                source.pop()
            return e
        if isinstance(e, ir.DiagV):
            parts = _diag_terms(e.a, dmap)
            if not (isinstance(parts, ir.DiagV) and parts.a is e.a):
                return sub(parts)
        kids = e.children()
        if any(has_v(c) for c in kids):
            return red(e)
        if isinstance(e, (ir.DiagV, ir.Inner)) and any(any(has_v(g) for g in c.children()) for c in kids):
            if any(c in shared for c in kids):
                # <A, V δS> where another claim reduces V δS itself (simple GLA's dK and
                # its gate gradient): the K side reads that reduction and forms the inner
                # product, instead of the V kernel forming V δS a second time
                return e.map_children(lambda c: red(c) if c in shared else sub(c))
            return red(e)      # diag(X^T Y) whole: a column, not the Dk x Dk product
        return e.map_children(sub)

    v_finals = [f for f in finals if has_v(f.expr)]

    def k_side_finals():
        out = []
        for f in finals:
            if not has_v(f.expr):
                source.append(_cite(f.claim))
                out.append(dataclasses.replace(f, expr=sub(f.expr)))
                source.pop()
        return out

    # twice: the first pass finds the reductions some claim needs whole, which the second
    # shares with the inner products that hold them
    shared: set = set()
    k_side_finals()
    shared = set(reds)
    reds.clear()
    kdefs.clear()
    cites = dict(adj.cites)
    k_finals = k_side_finals()
    all_reds = list(reds.values())
    red_list = [p for p in all_reds if p.name not in looped]
    # the V kernel: its gradients and the V reductions, V-blocked
    hnames = {v.name for v in hmap.values()} | {p.name for p in hoisted if isinstance(p.expr, ir.Var)}
    fwd, names, reads = _collect(plan, adj_defs, [f.expr for f in v_finals] + [p.expr for p in red_list],
                                 "gradient V kernel", allow_state=True, given=hnames)
    used = set().union(set(), *(var_names(adj_defs[n]) for n in names),
                       *(var_names(f.expr) for f in v_finals), *(var_names(p.expr) for p in red_list))
    for n in fwd + names:
        # a V block's partial sum of a reduction over V must not reach a tile with a Dv
        # dimension inside the same block: that tile would need the whole sum
        if has_v(dmap[n]) and any(vdep(ir.Var(m, *dmap[m].shape())) and not has_v(dmap[m])
                                  for m in var_names(dmap[n]) if m in dmap and m not in plan.boundary):
            raise CodegenError(f"the gradient V kernel of {plan.variant.name}: {n} reads a sum over "
                               f"V that a V block holds only in part")
    vk = KernelPlan(_extended(plan, adj_defs, names, [(p.name, p.expr) for p in red_list]),
                    fwd + names + [p.name for p in red_list], v_finals, reads,
                    reads_passed=sorted((p for p in hoisted if p.name in hnames & used), key=lambda p: p.name),
                    writes_passed=red_list,
                    cites=cites)
    # the K kernel: everything else, the V reductions read from memory
    kadj = {n: (kdefs[n] if n in kdefs else e) for n, e in adj_plain.items()}
    kbase = dataclasses.replace(plan, defs=[(n, kdefs.get(n) or e) for n, e in plan.defs])
    fwd_k, adj_k, reads_k = _collect(kbase, kadj, [f.expr for f in k_finals], "gradient K kernel",
                                     allow_state=False, given={p.name for p in all_reds})
    kfwd = dict(kbase.defs)
    for n in fwd_k + adj_k:
        e = kadj[n] if n in kadj else kfwd[n]
        if has_v(e) or {"S_prev", ADJ_STATE, D_OUT} & var_names(e):
            raise CodegenError(f"the gradient K kernel of {plan.variant.name} would compute {n}, "
                               f"which reads a tile with a Dv dimension")
    kplan = _extended(kbase, kadj, adj_k)
    kused = _used(dict(kplan.defs), fwd_k + adj_k, k_finals)
    kk = KernelPlan(kplan, fwd_k + adj_k, k_finals, reads_k,
                    reads_passed=[p for p in all_reds if p.name in kused], cites=cites)
    return GradientSplit(vk, kk, KSide(kbase, kadj, all_reds, k_finals, cites),
                         VSide(plan, adj_defs, hnames, list(hoisted), cites))


def sums_over(e: ir.Expr, dim: str) -> bool:
    """Whether some part of e sums over ``dim`` (a tile without it formed from one with it)."""
    return any(dim not in n.shape() and any(dim in c.shape() for c in n.children()) for n in ir.walk(e))


def loopable(side: VSide, p: Passed, blocked: bool) -> bool:
    """Whether a K-side kernel can form V reduction ``p`` itself, in a loop over V blocks
    (Variant.loop_reductions): every tile with a Dv dimension it needs is read from memory
    (inputs, delta O, the states S_[t-1] and delta S_[t], the reverse scan's tiles) or
    names one (an alias), none is formed from a product over Dk; in a kernel ``blocked``
    over Dk (the KB kernel) nothing in it may sum over Dk either."""
    fwd, names, _ = _collect(side.plan, side.adj_defs, [p.expr], "looped V reduction", allow_state=True,
                             given=side.given)
    dmap = dict(side.plan.defs)
    dmap.update(side.adj_defs)
    if any("Dv" in dmap[n].shape() and not isinstance(dmap[n], ir.Var) for n in fwd + names):
        return False
    return not (blocked and (sums_over(p.expr, "Dk") or any(sums_over(dmap[n], "Dk") for n in fwd + names)))


def loop_plan(side: VSide, reds: List[Passed]) -> KernelPlan:
    """What a K-side kernel prints inside its loop over V blocks to form V reductions
    ``reds`` itself: the V kernel's definitions for them and nothing else, each
    reduction written (writes_passed) as that block's part, which the kernel adds up."""
    fwd, names, reads = _collect(side.plan, side.adj_defs, [p.expr for p in reds], "looped V reductions",
                                 allow_state=True, given=side.given)
    used = set().union(set(), *(var_names(side.adj_defs[n]) for n in names), *(var_names(p.expr) for p in reds))
    return KernelPlan(_extended(side.plan, side.adj_defs, names, [(p.name, p.expr) for p in reds]),
                      fwd + names + [p.name for p in reds], [], reads,
                      reads_passed=sorted((p for p in side.hoisted if p.name in side.given & used),
                                          key=lambda p: p.name),
                      writes_passed=list(reds), cites=side.cites)


def split_k(plan: Plan, side: KSide) -> Tuple[KernelPlan, KernelPlan]:
    """The split gradient stage's K side once more in two (TILING grad_BK): a C kernel,
    one program per chunk, computes every tile without a Dk dimension that the
    gradients with one read and that depends on a Dk-wide tile (the inverse, delta A,
    delta X, ...: named definitions, kept whole; an unnamed product over Dk gets a name
    kr<i>) and the gradients without a Dk dimension; a KB kernel, blocked over Dk like
    the V kernel over Dv, reads those and computes the gradients with a Dk dimension,
    each K block exactly (no product in it sums over Dk).  The C kernel's
    writes_passed is empty when nothing needs whole K rows (GLA)."""
    kbase, kadj, cites = side.plan, side.adj_defs, dict(side.cites)
    given_v = {p.name for p in side.reductions}
    dmap = dict(kbase.defs)
    dmap.update(kadj)
    stored = set(kbase.boundary)
    has_k = lambda e: "Dk" in e.shape()     # noqa: E731
    # e's value reads a tile with a Dk dimension (other than by a V reduction)
    kdep = _depends(dmap, has_k, given_v | stored)
    mats: Dict[object, Passed] = {}     # a definition by its name, an unnamed product by itself
    kbdefs = {}
    source = [""]

    def sub(e):
        if not kdep(e):
            return e
        if isinstance(e, ir.Var):
            if has_k(e):
                if e.name in dmap and e.name not in stored and e.name not in kbdefs:
                    kbdefs[e.name] = None
                    source.append(cites.get(e.name, source[-1]))
                    kbdefs[e.name] = sub(dmap[e.name])
                    source.pop()
            elif e.name not in mats:
                mats[e.name] = Passed(e.name, e, CHUNK)
            return e
        if not has_k(e) and any(has_k(c) for c in e.children()):
            if e not in mats:
                n = sum(1 for p in mats.values() if not isinstance(p.expr, ir.Var))
                mats[e] = Passed(f"kr{n}", e, CHUNK)
                cites[f"kr{n}"] = source[-1]
            return _named_tile(mats[e].name, e)
        return e.map_children(sub)

    kb_finals = []
    for f in side.finals:
        if has_k(f.expr):
            source.append(_cite(f.claim))
            kb_finals.append(dataclasses.replace(f, expr=sub(f.expr)))
            source.pop()
    c_finals = [f for f in side.finals if not has_k(f.expr)]
    written = list(mats.values())
    # the C kernel: full Dk, one program per chunk
    unnamed = [(p.name, p.expr) for p in written if p.name not in dmap]
    fwd_c, adj_c, reads_c = _collect(kbase, kadj, [p.expr for p in written] + [f.expr for f in c_finals],
                                     "gradient C kernel", allow_state=False, given=given_v)
    cplan = _extended(kbase, kadj, adj_c, unnamed)
    cnames = fwd_c + adj_c + [n for n, _ in unnamed]
    cused = _used(dict(cplan.defs), cnames, c_finals)
    ck = KernelPlan(cplan, cnames, c_finals, reads_c, writes_passed=written,
                    reads_passed=[p for p in side.reductions if p.name in cused], cites=cites)
    # the KB kernel: blocked over Dk, the C kernel's tiles read from memory
    kb_defs = [(n, kbdefs.get(n) or e) for n, e in kbase.defs]
    kb_adj = {n: (kbdefs.get(n) or e) for n, e in kadj.items()}
    kbb = dataclasses.replace(kbase, defs=kb_defs)
    fwd_b, adj_b, reads_b = _collect(kbb, kb_adj, [f.expr for f in kb_finals], "gradient KB kernel",
                                     allow_state=False, given=given_v | {p.name for p in written})
    kbd = dict(kb_defs)
    for n in fwd_b + adj_b:
        e = kb_adj[n] if n in kb_adj else kbd[n]
        if not has_k(e) and kdep(ir.Var(n, *e.shape())):
            raise CodegenError(f"the gradient KB kernel of {plan.variant.name} would compute {n}, "
                               f"a sum over Dk that a K block holds only in part")
    kbplan = _extended(kbb, kb_adj, adj_b)
    bused = _used(dict(kbplan.defs), fwd_b + adj_b, kb_finals)
    kb = KernelPlan(kbplan, fwd_b + adj_b, kb_finals, reads_b,
                    reads_passed=[p for p in side.reductions + written if p.name in bused], cites=cites)
    return ck, kb


def _diag_terms(a, dmap):
    """diag(a) distributed over the sums in a (through definitions that are sums), so
    that each V reduction inside is reduced to its diagonal on its own."""
    if isinstance(a, ir.Var) and isinstance(dmap.get(a.name), (ir.Add, ir.Sub, ir.Neg)):
        return _diag_terms(dmap[a.name], dmap)
    if isinstance(a, (ir.Add, ir.Sub)):
        return type(a)(_diag_terms(a.a, dmap), _diag_terms(a.b, dmap))
    if isinstance(a, ir.Neg):
        return ir.Neg(_diag_terms(a.a, dmap))
    return ir.DiagV(a)
