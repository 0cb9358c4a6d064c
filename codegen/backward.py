"""The backward's reverse scan, planned from the variant's verified backward claims.

δS_[t-1] (claim backward['dS_prev']) reads δS_[t], δO_[t] and per-chunk tiles of the
inputs; the inner adjoints it names (δU, δC, ...) are defined by their own claims.
Each whole adjoint adj(X) becomes a tile dX, so the forward stage machinery
(codegen/emit.py) orders and prints them like program definitions."""
from __future__ import annotations

import dataclasses
from typing import List, Tuple

from chunkproof.derivations import ir
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


def _collect(plan: Plan, adj_defs, exprs, what, allow_state, given=()):
    """(forward definitions computed in the stage, adjoint definitions in dependency
    order, boundary tiles read) for a stage that computes `exprs`; ``given``: tiles the
    stage reads from memory besides the inputs and boundary tiles."""
    v = plan.variant
    dmap = dict(plan.defs)
    stored = set(plan.boundary)
    need_fwd, need_adj, order_adj = set(), set(), []

    def walk(e):
        for n in sorted(var_names(e)):    # sorted: the printed order must not depend on hashing
            if n == "S_prev" and not allow_state:
                raise CodegenError(f"the {what} of {v.name} would read S_[t-1]: "
                                   f"its claims must not need the forward state")
            if n in (ADJ_STATE, D_OUT, "S_prev") or n in plan.inputs or n in given:
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


def hoist_reverse(plan: Plan, bwd):
    """The reverse scan with its state-free C x Dv products taken out of the sequential
    loop (TILING dstate_hoist): every maximal subexpression of the scan's claims that
    does not read delta S, has shape C x Dv and contains a product (the intra-chunk part
    of delta U, (Q K^T . M)^T delta O) is computed first for all chunks in parallel and
    read by the scan.  Same claims, same grouping; only where each part is computed moves.

    Returns dict(pre=(plan, names, reads, hoisted [(name, expr)]),
    scan=(plan, names, final, reads))."""
    adj_defs, named = _adjoint_defs(plan, bwd)
    c = bwd["dS_prev"]
    final = subst_adjoints(c.rhs, named)
    dmap = dict(plan.defs)
    dmap.update(adj_defs)
    stored = set(plan.boundary)
    sdep = _reads(dmap, lambda e: isinstance(e, ir.Var) and e.name == ADJ_STATE, stored)

    def has_mm(e):
        return isinstance(e, ir.MatMul) or any(has_mm(x) for x in e.children())

    hoisted, sdefs = {}, {}

    def sub(e):
        if not sdep(e):
            body = dmap.get(e.name) if isinstance(e, ir.Var) else e
            if e.shape() == ("C", "Dv") and body is not None and has_mm(body):
                key = e.name if isinstance(e, ir.Var) else repr(e)
                if key not in hoisted:
                    hoisted[key] = (e.name if isinstance(e, ir.Var) else f"hr{len(hoisted)}", e)
                return ir.Var(hoisted[key][0], "C", "Dv", e.tex if isinstance(e, ir.Var) else "(" + _tex(e) + ")")
            return e
        if isinstance(e, ir.Var):
            if e.name in dmap and e.name not in stored and e.name not in sdefs:
                sdefs[e.name] = None
                sdefs[e.name] = sub(dmap[e.name])
            return e
        return _rebuild(e, sub)

    sfinal = sub(final)
    hlist = list(hoisted.values())
    unnamed = [(n, e) for n, e in hlist if n not in dmap]
    fwd_p, adj_p, reads_p = _collect(plan, adj_defs, [e for _, e in hlist], "reverse scan's parallel part",
                                     allow_state=False)
    pplan = dataclasses.replace(plan, defs=list(plan.defs) + [(n, adj_defs[n]) for n in adj_p] + unnamed)
    splan = dataclasses.replace(plan, defs=[(n, sdefs.get(n) or e) for n, e in plan.defs])
    sadj = {n: (sdefs.get(n) or e) for n, e in adj_defs.items()}
    fwd_s, adj_s, reads_s = _collect(splan, sadj, [sfinal], "reverse scan", allow_state=False,
                                     given={n for n, _ in hlist})
    splan = dataclasses.replace(splan, defs=list(splan.defs) + [(n, sadj[n]) for n in adj_s])
    return dict(pre=(pplan, fwd_p + adj_p + [n for n, _ in unnamed], reads_p, hlist),
                scan=(splan, fwd_s + adj_s, ("dS_prev", sfinal, c), reads_s))


def gradients(plan: Plan, bwd):
    """The per-chunk gradient stage: (extended plan, definitions in order, finals
    [("g_<arg>", expr, claim)], boundary tiles read).  It reads S_[t-1] (the forward's h)
    and delta S_[t] (the reverse scan's dh)."""
    adj_defs, named = _adjoint_defs(plan, bwd)
    finals = [(f"g_{a}", subst_adjoints(c.rhs, named), c) for a, c in bwd["grads"].items()]
    fwd, adj, reads = _collect(plan, adj_defs, [e for _, e, _ in finals], "gradient stage", allow_state=True)
    return _extended(plan, adj_defs, adj), fwd + adj, finals, reads


VRED = "vr"      # the V reductions the split gradient stage passes from its V kernel to its K kernel


def _reads(dmap, hit, stop=()):
    """A predicate: an expression's value depends on a node for which hit(node) holds,
    through the definitions in dmap (not through the names in stop, read from memory)."""
    memo = {}

    def dep(e):
        if hit(e):
            return True
        if isinstance(e, ir.Var):
            if e.name in stop or e.name not in dmap:
                return False
            if e.name not in memo:
                memo[e.name] = False      # a cycle is not a dependency
                memo[e.name] = dep(dmap[e.name])
            return memo[e.name]
        return any(dep(c) for c in e.children())
    return dep


def _replace(e: ir.Expr, table) -> ir.Expr:
    """e with every subexpression whose repr is a key of table replaced by its value."""
    if repr(e) in table:
        return table[repr(e)]
    if isinstance(e, ir.Var) or not dataclasses.is_dataclass(e):
        return e
    return _rebuild(e, lambda x: _replace(x, table))


def _rebuild(e: ir.Expr, f) -> ir.Expr:
    changes = {}
    for fld in dataclasses.fields(e):
        val = getattr(e, fld.name)
        if isinstance(val, ir.Expr):
            new = f(val)
            if new is not val:
                changes[fld.name] = new
    return dataclasses.replace(e, **changes) if changes else e


def split_gradients(plan: Plan, bwd, hoisted=()):
    """The gradient stage as two kernels (TILING grad_split).  The V kernel, V-blocked,
    computes the gradients that have a Dv dimension and every *V reduction* the others
    read: a subexpression without a Dv dimension whose operands have one (delta O
    S_[t-1], delta O Vnew^T, <S_[t-1], delta S>, ...; a diag() of such a product is
    reduced whole), each written per V block.  The K kernel reads them summed over the
    blocks and computes the other gradients without reading any tile with a Dv dimension.
    Nothing is re-derived: each V reduction is a subexpression of a checked claim, and
    the K kernel prints the claims with those subexpressions read instead of recomputed.

    ``hoisted``: the reverse scan's parallel tiles (hoist_reverse), [(name, expr)]; the V
    kernel reads them where its claims hold the same subexpression (the intra-chunk part
    of delta U) instead of forming it again.

    Returns dict(v=(plan, names, finals, reads), k=(plan, names, finals, reads),
    reds=[(name, expr)] in the order the V kernel writes them, hoisted=[names the V
    kernel reads])."""
    adj_defs, named = _adjoint_defs(plan, bwd)
    adj_plain = dict(adj_defs)
    hmap = {repr(e): ir.Var(n, *e.shape(), "(" + _tex(e) + ")") for n, e in hoisted if not isinstance(e, ir.Var)}
    if hmap:
        adj_defs = {n: _replace(e, hmap) for n, e in adj_defs.items()}
    finals = [(f"g_{a}", subst_adjoints(c.rhs, named), c) for a, c in bwd["grads"].items()]
    dmap = dict(plan.defs)
    dmap.update(adj_defs)
    has_v = lambda e: "Dv" in e.shape()     # noqa: E731
    vdep = _reads(dmap, has_v)               # e's value reads a tile with a Dv dimension

    reds, kdefs = {}, {}
    rowsums = plan.variant.vred_rowsums
    direct = lambda e: not has_v(e) and any(has_v(c) for c in e.children())     # noqa: E731

    def red(e):
        key = repr(e)
        if key not in reds:
            reds[key] = (f"{VRED}{len(reds)}", e)
        rows, cols = e.shape()
        return ir.Var(reds[key][0], rows, cols, "(" + _tex(e) + ")")

    def k_rowsum(e):
        # (X ⊙ Y) 1 over Dk, X a V reduction and Y free of any: linear in X, so each V
        # block's part of it sums to the whole
        return isinstance(e, ir.MatMul) and isinstance(e.b, ir.Ones) and e.b.shape() == ("Dk", "1")

    def sub(e):
        if not vdep(e):
            return e
        if has_v(e):
            raise CodegenError(f"the gradient K kernel of {plan.variant.name} would need "
                               f"${_tex(e)}$, which has a Dv dimension")
        if rowsums and k_rowsum(e):
            # Variant.vred_rowsums: the V kernel writes such a row sum as a C x 1 V
            # reduction, so that the kernel reading it need not read the C x Dk one
            if isinstance(e.a, (ir.Add, ir.Sub)):
                return sub(type(e.a)(ir.MatMul(e.a.a, e.b), ir.MatMul(e.a.b, e.b)))
            if isinstance(e.a, ir.Had) and any(direct(x) and not vdep(y) for x, y in ((e.a.a, e.a.b), (e.a.b, e.a.a))):
                return red(e)
        if isinstance(e, ir.Var):
            if e.name not in kdefs:
                kdefs[e.name] = None
                kdefs[e.name] = sub(dmap[e.name])
            return e
        if isinstance(e, ir.DiagV):
            parts = _diag_terms(e.a, dmap)
            if not (isinstance(parts, ir.DiagV) and parts.a is e.a):
                return sub(parts)
        kids = e.children()
        if any(has_v(c) for c in kids):
            return red(e)
        if isinstance(e, (ir.DiagV, ir.Inner)) and any(any(has_v(g) for g in c.children()) for c in kids):
            return red(e)      # diag(X^T Y) whole: a column, not the Dk x Dk product
        return _rebuild(e, sub)

    v_finals = [f for f in finals if has_v(f[1])]
    k_finals = [(n, sub(e), c) for n, e, c in finals if not has_v(e)]
    red_list = list(reds.values())
    # the V kernel: its gradients and the V reductions, V-blocked
    hnames = {v.name for v in hmap.values()} | {n for n, e in hoisted if isinstance(e, ir.Var)}
    fwd, adj, reads = _collect(plan, adj_defs, [e for _, e, _ in v_finals] + [e for _, e in red_list],
                               "gradient V kernel", allow_state=True, given=hnames)
    used = set().union(set(), *(var_names(adj_defs[n]) for n in adj),
                       *(var_names(e) for _, e, _ in v_finals), *(var_names(e) for _, e in red_list))
    vplan = dataclasses.replace(plan, defs=list(plan.defs) + [(n, adj_defs[n]) for n in adj] + red_list)
    for n in fwd + adj:
        # a V block's partial sum of a reduction over V must not reach a tile with a Dv
        # dimension inside the same block: that tile would need the whole sum
        if has_v(dmap[n]) and any(vdep(ir.Var(m, *dmap[m].shape())) and not has_v(dmap[m])
                                  for m in var_names(dmap[n]) if m in dmap and m not in plan.boundary):
            raise CodegenError(f"the gradient V kernel of {plan.variant.name}: {n} reads a sum over "
                               f"V that a V block holds only in part")
    # the K kernel: everything else, the V reductions read from memory
    kadj = {n: (kdefs[n] if n in kdefs else e) for n, e in adj_plain.items()}
    kfwd_defs = [(n, kdefs.get(n) or e) for n, e in plan.defs]
    kbase = dataclasses.replace(plan, defs=kfwd_defs)
    given = {n for n, _ in red_list}
    fwd_k, adj_k, reads_k = _collect(kbase, kadj, [e for _, e, _ in k_finals], "gradient K kernel",
                                     allow_state=False, given=given)
    for n in fwd_k + adj_k:
        e = kadj.get(n) if n in kadj else dict(kfwd_defs)[n]
        if has_v(e) or {"S_prev", ADJ_STATE, D_OUT} & var_names(e):
            raise CodegenError(f"the gradient K kernel of {plan.variant.name} would compute {n}, "
                               f"which reads a tile with a Dv dimension")
    kplan = dataclasses.replace(kbase, defs=kfwd_defs + [(n, kadj[n]) for n in adj_k])
    return dict(v=(vplan, fwd + adj + [n for n, _ in red_list], v_finals, reads),
                k=(kplan, fwd_k + adj_k, k_finals, reads_k), reds=red_list,
                kparts=(kbase, kadj, given, k_finals), hoisted=sorted(hnames & used))


def split_k(plan: Plan, bwd):
    """The split gradient stage's K kernel once more in two (TILING grad_ksplit): a C
    kernel, one program per chunk, computes every tile without a Dk dimension that the
    gradients with one read and that depends on a Dk-wide tile (the inverse, delta A,
    delta X, ...: named definitions, kept whole; an unnamed product over Dk gets a name
    kr<i>) and the gradients without a Dk dimension; a KB kernel, blocked over Dk like
    the V kernel over Dv, reads those and computes the gradients with a Dk dimension,
    each K block exactly (no product in it sums over Dk).

    Returns dict(v=..., reds=... as split_gradients, c=(plan, names, finals, reads),
    kb=(plan, names, finals, reads), mats=[(name, expr)] the C kernel writes)."""
    r = split_gradients(plan, bwd)
    kbase, kadj, given_v, k_finals = r["kparts"]
    dmap = dict(kbase.defs)
    dmap.update(kadj)
    stored = set(kbase.boundary)
    has_k = lambda e: "Dk" in e.shape()     # noqa: E731
    # e's value reads a tile with a Dk dimension (other than by a V reduction)
    kdep = _reads(dmap, has_k, set(given_v) | stored)

    mats, kbdefs = {}, {}

    def sub(e):
        if not kdep(e):
            return e
        if isinstance(e, ir.Var):
            if has_k(e):
                if e.name in dmap and e.name not in stored and e.name not in kbdefs:
                    kbdefs[e.name] = None
                    kbdefs[e.name] = sub(dmap[e.name])
            else:
                mats.setdefault(e.name, e)
            return e
        if not has_k(e) and any(has_k(c) for c in e.children()):
            key = repr(e)
            if key not in mats:
                n = sum(1 for m in mats.values() if isinstance(m, tuple))
                mats[key] = (ir.Var(f"kr{n}", *e.shape(), "(" + _tex(e) + ")"), e)
            return mats[key][0]
        return _rebuild(e, sub)

    kb_finals = [(n, sub(e), c) for n, e, c in k_finals if has_k(e)]
    c_finals = [f for f in k_finals if not has_k(f[1])]
    mat_list = []          # (name, expr computed by the C kernel)
    for key, m in mats.items():
        if isinstance(m, tuple):
            mat_list.append((m[0].name, m[1]))
        else:
            mat_list.append((m.name, m))
    # the C kernel: full Dk, one program per chunk
    unnamed = [(n, e) for n, e in mat_list if n not in dmap]
    fwd_c, adj_c, reads_c = _collect(kbase, kadj, [e for _, e in mat_list] + [e for _, e, _ in c_finals],
                                     "gradient C kernel", allow_state=False, given=given_v)
    cplan = dataclasses.replace(kbase, defs=list(kbase.defs) + [(n, kadj[n]) for n in adj_c] + unnamed)
    # the KB kernel: blocked over Dk, the C kernel's tiles read from memory
    kb_defs = [(n, kbdefs.get(n) or e) for n, e in kbase.defs]
    kb_adj = {n: (kbdefs.get(n) or e) for n, e in kadj.items()}
    given = set(given_v) | {n for n, _ in mat_list}
    kbb = dataclasses.replace(kbase, defs=kb_defs)
    fwd_b, adj_b, reads_b = _collect(kbb, kb_adj, [e for _, e, _ in kb_finals], "gradient KB kernel",
                                     allow_state=False, given=given)
    for n in fwd_b + adj_b:
        e = kb_adj[n] if n in kb_adj else dict(kb_defs)[n]
        if not has_k(e) and kdep(ir.Var(n, *e.shape())):
            raise CodegenError(f"the gradient KB kernel of {plan.variant.name} would compute {n}, "
                               f"a sum over Dk that a K block holds only in part")
    kbplan = dataclasses.replace(kbb, defs=kb_defs + [(n, kb_adj[n]) for n in adj_b])
    return dict(v=r["v"], reds=r["reds"], mats=mat_list,
                c=(cplan, fwd_c + adj_c + [n for n, _ in unnamed], c_finals, reads_c),
                kb=(kbplan, fwd_b + adj_b, kb_finals, reads_b))


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


def _tex(e):
    from chunkproof.derivations.latex import to_latex
    return to_latex(e)
