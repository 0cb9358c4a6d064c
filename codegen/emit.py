"""Turn a plan into the data a Jinja skeleton needs: loads, math lines, stores.

Templates own the skeleton; every math line comes from here, printed from the IR."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List

from chunkproof.derivations.latex import to_latex
from .plan import Plan, var_names
from .printer import TritonPrinter, Val
from . import plan as planmod


@dataclass
class Load:
    tile: str          # derivation tile name
    arg: str           # kernel pointer argument
    kind: str          # 'k' | 'v' | 'head' ; how the tensor is laid out
    log: bool          # the argument holds the log of the tile (gates)
    scaled: bool = False


@dataclass
class Line:
    comment: str
    target: str
    code: str


@dataclass
class Stage:
    loads: List[Load] = field(default_factory=list)
    lines: List[Line] = field(default_factory=list)
    reads: List[str] = field(default_factory=list)     # boundary tiles read (scan)
    mats: List[tuple] = field(default_factory=list)    # the C kernel's tiles written, as reds
    finals: List[str] = field(default_factory=list)    # the final values printed (g_<arg>, ...)
    hoisted: List[tuple] = field(default_factory=list)  # the reverse scan's parallel tiles read
    writes: List[str] = field(default_factory=list)    # boundary tiles written (intra)
    # the split gradient stage's V reductions: (name, tile size, offsets in the tile, the
    # dense value written) -- see red_layout
    reds: List[tuple] = field(default_factory=list)


def layout(shape) -> str:
    """How a C x d tile lies in memory: 'k' [B,T,H,K], 'v' [B,T,H,V], 'head' [B,T,H],
    'c' [B,T,H,BT] (a C x C tile, row r of chunk t at token t*BT + r; fp32)."""
    rows, cols = shape
    if rows != "C":
        raise planmod.CodegenError(f"an input tile of shape {rows}x{cols} is not a chunk tile")
    return {"Dk": "k", "Dv": "v", "1": "head", "C": "c"}[cols]


def stored_fp32(plan: Plan, name: str) -> bool:
    """A boundary tile kept in fp32 between kernels (gate logs; the C x C triangular
    inverse), not in the input dtype: it is not exact in bf16, so a product must not treat
    it as an input tile."""
    return name in plan.logs or layout(dict(plan.defs)[name].shape()) == "c"


def _stage(plan: Plan, names: List[str], finals: list, reads: List[str], where: str,
           state_in_memory=False, extra_loads=(), extra_env=None, dense_of=()) -> Stage:
    v = plan.variant
    dmap = dict(plan.defs)
    used = set()
    for n in names:
        used |= var_names(dmap[n])
    for _, e, _ in finals:
        used |= var_names(e)
    st = Stage(reads=list(reads))
    env: Dict[str, Val] = {}
    args = v.tile_of()
    rec = plan.deriv.recurrences[plan.deriv.program_recurrence[plan.program.name]]
    shapes = {i.seq: ("C", i.dim) for i in rec.inputs}
    for t in plan.inputs:
        if t not in used:
            continue
        a = args[t]
        log = a.kind.startswith("gate")
        st.loads.append(Load(t, a.name, layout(shapes[t]), log, scaled=(a.name == "q")))
        env[t] = Val(None, shapes[t], log=f"b_{t}_log", last=f"b_{t}_log_last") if log else \
            Val(f"b_{t}", shapes[t], raw=(a.name != "q"))      # q is scaled on load
    if "S_prev" in used:
        env["S_prev"] = Val("b_s", ("Dv", "Dk"), raw=state_in_memory)
    for ld in extra_loads:
        if ld.tile in used:
            st.loads.append(ld)
    env.update(extra_env or {})
    for r in reads:
        # raw (exact in the input dtype) unless it is kept in fp32
        env[r] = Val(None, dmap[r].shape(), log=f"b_{r}_log", last=f"b_{r}_log_last") if r in plan.logs else \
            Val(f"b_{r}", dmap[r].shape(), raw=not stored_fp32(plan, r))
    pr = TritonPrinter(env, lambda e: planmod.unit_lower(e, dmap, plan.diagonal), where, defs=dmap)
    # Variant.gprec_tiles: the lines whose gated products take GPREC (none named: all)
    gprec = lambda n: "GPREC" if not v.gprec_tiles or n in v.gprec_tiles else "PREC2"     # noqa: E731
    for n in names:
        e = dmap[n]
        pr.gprec = gprec(n)
        val = pr.p(e)
        cmt = f"{n} = {to_latex(e)}"
        if val.log is not None and val.code is None:
            st.lines.append(Line(cmt, f"b_{n}_log", val.log))
            st.lines.append(Line("", f"b_{n}", f"tl.exp(b_{n}_log)"))
            env[n] = Val(f"b_{n}", val.shape, diag=val.diag, log=f"b_{n}_log")
        elif val.fac is not None:
            code = val.code
            if not re.fullmatch(r"b_\w+", code):
                st.lines.append(Line(cmt + "  (a tile times a gate factor: the tile)", f"b_{n}_c", code))
                code, cmt = f"b_{n}_c", ""
            st.lines.append(Line(cmt + ("  (its gate factor, in log space)" if cmt else ""), f"b_{n}_f", val.fac))
            env[n] = Val(code, val.shape, fac=f"b_{n}_f", facshape=val.facshape,
                         raw=val.raw and code == val.code)
        elif val.diag:
            st.lines.append(Line(cmt + "  (kept as its diagonal)", f"b_{n}", pr.dense_vec(val)))
            env[n] = Val(f"b_{n}", val.shape, diag=True)
        else:
            st.lines.append(Line(cmt, f"b_{n}", val.code))
            # a sum or masked product keeps its parts: a gate factor applied to it later
            # is distributed over them (printer.factor) rather than multiplying b_{n}
            env[n] = Val(f"b_{n}", val.shape, raw=val.raw, terms=val.terms, mix=val.mix)
    for n, e, c in finals:
        pr.gprec = gprec(n)
        st.lines.append(Line(f"{n} = {to_latex(e)}   [claim {c.id}, {c.citation}]", f"b_{n}", pr.code(e)))
    _reuse_repeated_lines(st.lines)
    st.reds = [(n,) + red_layout(dmap[n].shape()) + (pr.dense(env[n]),) for n in dense_of]
    st.finals = [n for n, _, _ in finals]
    return st


def _reuse_repeated_lines(lines: List[Line]) -> None:
    """A line whose code an earlier line of the stage already computed reads that line's
    tile instead.  The gradients a grouped gate gradient reads (g_q is dQ's expression,
    printed again from its claim) repeat whole lines, and Triton's CSE does not merge the
    repeats when they hold gated products: those carry a runtime branch or a loop (region
    ops), so each copy ran, three products apiece under tf32x3.  Every target is assigned
    once per stage, so the earlier tile still holds that value."""
    first: Dict[str, str] = {}
    for ln in lines:
        if ln.code in first and not re.fullmatch(r"b_\w+", ln.code):
            ln.code = first[ln.code]
        else:
            first.setdefault(ln.code, ln.target)


_RED_DIMS = {"C": ("o_t", "BT"), "Dk": ("o_k", "BKF"), "Dv": ("o_v", "BVF"), "1": ("o_one", "1")}


def red_layout(shape):
    """(elements per chunk, offsets of the tile's elements) of a V reduction in memory:
    the whole padded block, row-major, fp32 ([NV, B * NT * H, size]).  BKF is the padded
    Dk; a kernel blocked over Dk reads its block (o_k) of each row."""
    (ri, rn), (ci, cn) = (_RED_DIMS[d] for d in shape)
    return f"{rn} * {cn}", f"{ri}[:, None] * {cn} + {ci}[None, :]"


def stages(plan: Plan):
    """(intra, fused scan, split state scan, split output): intra is None when no
    definition needs it."""
    dmap = dict(plan.defs)
    intra = None
    if plan.intra:
        intra = _stage(plan, plan.intra, [], [], f"{plan.variant.name} intra kernel")
        intra.writes = list(plan.boundary)
    prog = plan.program
    o_final = (prog.output, dmap[prog.output], plan.claims["O"])
    s_final = (prog.state, dmap[prog.state], plan.claims["S"])
    name = plan.variant.name
    # the fused scan reads the boundary tiles its two finals reach (not the inverses the
    # intra kernel writes for the backward alone)
    both = set(plan.split["state"][1]) | set(plan.split["out"][1])
    scan = _stage(plan, plan.scan, [o_final, s_final], [n for n in plan.boundary if n in both],
                  f"{name} scan kernel")
    s_defs, s_reads = plan.split["state"]
    o_defs, o_reads = plan.split["out"]
    state = _stage(plan, s_defs, [s_final], s_reads, f"{name} state kernel")
    out = _stage(plan, o_defs, [o_final], o_reads, f"{name} output kernel", state_in_memory=True)
    return intra, scan, state, out


def _backward_inputs():
    """δO_[t] is read from memory; δS_[t] is b_ds (carried by the reverse scan, loaded
    from dh by the gradient kernel)."""
    from . import backward
    return ([Load(backward.D_OUT, "do", "v", False)],
            {backward.ADJ_STATE: Val("b_ds", ("Dv", "Dk")), backward.D_OUT: Val("b_dO", ("C", "Dv"), raw=True)})


def reverse_stage(plan: Plan, bwd) -> Stage:
    """The backward's reverse scan over chunks: δS_[t-1] from δS_[t] and δO_[t]."""
    from . import backward
    ext, names, final, reads = backward.reverse_scan(plan, bwd)
    loads, env = _backward_inputs()
    return _stage(ext, names, [final], reads, f"{plan.variant.name} reverse scan kernel",
                  extra_loads=loads, extra_env=env)


def gradient_stage(plan: Plan, bwd) -> Stage:
    """The backward's per-chunk gradients, given S_[t-1] (b_s) and δS_[t] (b_ds)."""
    from . import backward
    ext, names, finals, reads = backward.gradients(plan, bwd)
    loads, env = _backward_inputs()
    return _stage(ext, names, finals, reads, f"{plan.variant.name} gradient kernel", state_in_memory=True,
                  extra_loads=loads, extra_env=env)


def split_gradient_stages(plan: Plan, bwd):
    """The gradient stage as a V kernel and a K kernel (backward.split_gradients):
    (V stage, K stage); each carries the V reductions it writes or reads in .reds."""
    from . import backward
    hoisted = backward.hoist_reverse(plan, bwd)["pre"][3]
    r = backward.split_gradients(plan, bwd, hoisted)
    loads, env = _backward_inputs()
    name = plan.variant.name
    vplan, vnames, vfinals, vreads = r["v"]
    henv = {n: Val(f"b_{n}", ("C", "Dv")) for n in r["hoisted"]}
    vst = _stage(vplan, vnames, vfinals, vreads, f"{name} gradient V kernel", state_in_memory=True,
                 extra_loads=loads, extra_env=dict(env, **henv), dense_of=[n for n, _ in r["reds"]])
    vst.hoisted = [(n,) + red_layout(("C", "Dv")) for n in r["hoisted"]]
    kplan, knames, kfinals, kreads = r["k"]
    kenv = dict(env, **{n: Val(f"b_{n}", e.shape()) for n, e in r["reds"]})
    kst = _stage(kplan, knames, kfinals, kreads, f"{name} gradient K kernel", extra_loads=loads, extra_env=kenv)
    kst.reds = _reds_read(kplan, knames, kfinals, r["reds"])
    return vst, kst


def split_k_stages(plan: Plan, bwd):
    """The C and KB kernels of backward.split_k: (C stage, KB stage), each with the
    tiles it reads in .reds (the V reductions, and for KB the C kernel's tiles) and the
    C stage with the tiles it writes in .mats."""
    from . import backward
    r = backward.split_k(plan, bwd)
    loads, env = _backward_inputs()
    name = plan.variant.name
    renv = {n: Val(f"b_{n}", e.shape()) for n, e in r["reds"]}
    cplan, cnames, cfinals, creads = r["c"]
    cst = _stage(cplan, cnames, cfinals, creads, f"{name} gradient C kernel", extra_loads=loads,
                 extra_env=dict(env, **renv), dense_of=[n for n, _ in r["mats"]])
    cst.mats, cst.reds = cst.reds, _reds_read(cplan, cnames, cfinals, r["reds"])
    bplan, bnames, bfinals, breads = r["kb"]
    menv = {n: Val(f"b_{n}", e.shape()) for n, e in r["mats"]}
    bst = _stage(bplan, bnames, bfinals, breads, f"{name} gradient KB kernel", extra_loads=loads,
                 extra_env=dict(env, **renv, **menv))
    bst.reds = _reds_read(bplan, bnames, bfinals, list(r["reds"]) + list(r["mats"]))
    return cst, bst


def _reds_read(plan, names, finals, tiles):
    defs = dict(plan.defs)
    used = set().union(*(var_names(defs[n]) for n in names), *(var_names(e) for _, e, _ in finals))
    return [(n,) + red_layout(e.shape()) + (None,) for n, e in tiles if n in used]


def hoisted_reverse_stages(plan: Plan, bwd):
    """(parallel part, scan) of backward.hoist_reverse: the parallel part writes the
    hoisted tiles (.reds), the scan reads them (.reds)."""
    from . import backward
    r = backward.hoist_reverse(plan, bwd)
    loads, env = _backward_inputs()
    name = plan.variant.name
    pplan, pnames, preads, hlist = r["pre"]
    pre = _stage(pplan, pnames, [], preads, f"{name} reverse scan's parallel kernel",
                 extra_loads=loads, extra_env=env, dense_of=[n for n, _ in hlist])
    splan, snames, sfinal, sreads = r["scan"]
    henv = {n: Val(f"b_{n}", ("C", "Dv")) for n, _ in hlist}
    scan = _stage(splan, snames, [sfinal], sreads, f"{name} reverse scan kernel",
                  extra_loads=loads, extra_env=dict(env, **henv))
    scan.reds = _reds_read(splan, snames, [sfinal], hlist)
    return pre, scan
