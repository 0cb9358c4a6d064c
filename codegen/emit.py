"""Turn kernel plans into the data a Jinja skeleton needs: loads, math lines, stores.

Templates own the skeleton; every math line comes from here, printed from the IR."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.latex import to_latex
from . import backward
from .fla_api import grouped
from .kernel_plan import Final, KernelPlan, Passed
from .plan import Plan, param_bindings, param_names, unit_lower, var_names
from .printer import PRODUCT_TAG, SCALE_LOG, CodegenError, TritonPrinter, Val


@dataclass
class Load:
    tile: str          # derivation tile name
    arg: str           # kernel pointer argument
    kind: str          # 'k' | 'kq' | 'v' | 'head' ; how the tensor is laid out ('kq': q, k)
    log: bool          # the argument holds the log of the tile (gates)
    scaled: bool = False
    f32: bool = False  # read in fp32 (an input that is already a log gate: it is summed and exponentiated)


@dataclass
class Line:
    comment: str
    target: str
    code: str


@dataclass(frozen=True)
class Stored:
    """A tile passed between backward kernels, as the kernels address it (fp32)."""
    name: str
    layout: str                   # kernel_plan.VSUM / CHUNK / VCOLS
    size: str                     # elements per chunk
    offsets: str                  # of the tile's elements within a chunk's block
    value: Optional[str] = None   # the dense tile written (tiles the kernel writes)
    over: Optional[str] = None    # a tile read by the same kernel, last, whose buffer it is written over


@dataclass
class Stage:
    """One kernel as printed: its input loads, its math lines, and its memory traffic."""
    loads: List[Load] = field(default_factory=list)
    lines: List[Line] = field(default_factory=list)
    reads: List[str] = field(default_factory=list)            # the intra kernel's boundary tiles read
    writes: List[str] = field(default_factory=list)           # boundary tiles written (the intra kernel)
    reads_passed: List[Stored] = field(default_factory=list)  # tiles an earlier backward kernel wrote
    writes_passed: List[Stored] = field(default_factory=list)  # tiles written for a later one
    finals: List[str] = field(default_factory=list)           # the final values printed (g_<arg>, ...)
    gated: List[str] = field(default_factory=list)            # lines with a gated product taking GPREC
    mixable: List[str] = field(default_factory=list)          # lines with a product of a read and a computed tile
    live: Optional[Set[str]] = None   # the tiles the printed lines read (None: every load is printed)
    # the V reductions the kernel forms itself (Variant.loop_reductions): ``loop`` prints
    # one V block's part of each (its writes_passed), which the skeleton adds up over the
    # blocks; ``loop_outer`` the loop's loads without a Dv dimension, printed before it;
    # ``loop_args``: the (kernel, host) names of the pointers the loop adds
    loop: Optional["Stage"] = None
    loop_outer: Optional["Stage"] = None
    loop_args: List[tuple] = field(default_factory=list)
    loop_init: Dict[str, str] = field(default_factory=dict)     # each looped reduction's zero accumulator
    # the printed tiles by their symbolic (rows, cols) in the kernel's layout (a load's, a
    # line's target's): codegen/ksplit.py holds a scan's K-indexed ones in pieces
    axes: Dict[str, tuple] = field(default_factory=dict)
    # the one K kernel printed blocked over K: nothing it prints sums over Dk
    # (BackwardStages.k_blocks)
    k_blocked: bool = False

    @property
    def guarded(self) -> bool:
        """Whether a vector-gated intra-chunk product is printed (the runtime's _masked_
        forms): the kernel then runs in a rebalanced and a blocked pass (Launch guarded)."""
        return any("_masked_" in text for text in [ln.code for ln in self.lines]
                   + [s.value or "" for s in self.writes_passed]) or bool(self.loop and self.loop.guarded)


# q as read, times the API's scale kept as a gate factor (positive; the wrappers refuse
# others): the printer then moves it as it moves gates, onto a product's rows or the
# operand rounded anyway, so q reaches the tensor cores as read where FLA's q does
Q_SCALE = dict(fac=SCALE_LOG, facshape=("1", "1"))


def layout(shape) -> str:
    """How a C x d tile lies in memory: 'k' [B,T,H,K], 'v' [B,T,H,V], 'head' [B,T,H],
    'c' [B,T,H,BT] (a C x C tile, row r of chunk t at token t*BT + r; fp32)."""
    rows, cols = shape
    if rows != "C":
        raise CodegenError(f"an input tile of shape {rows}x{cols} is not a chunk tile")
    return {"Dk": "k", "Dv": "v", "1": "head", "C": "c"}[cols]


def stored_fp32(plan: Plan, name: str) -> bool:
    """A boundary tile computed in fp32 (gate logs, prefix sums; the C x C tiles), not
    exact in the input dtype, so a product must not treat it as an input tile.  It is
    stored in fp32 between kernels unless it is narrowable and the precision planner
    narrowed it (Variant.narrowed; its readers widen it to fp32)."""
    return (name in plan.logs or name in plan.sums or name in plan.hoisted
            or layout(dict(plan.defs)[name].shape()) == "c")


def narrowable(plan: Plan, name: str) -> bool:
    """A boundary tile fp32 by choice, not by need: a C x C one (the triangular inverse,
    a masked gated product) that is no gate log, prefix sum or hoisted scan operand."""
    return stored_fp32(plan, name) and not (name in plan.logs or name in plan.sums or name in plan.hoisted)


_RED_DIMS = {"C": ("o_t", "BT"), "Dk": ("o_k", "BKF"), "Dv": ("o_v", "BVF"), "1": ("o_one", "1")}


def red_layout(shape):
    """(elements per chunk, offsets of the tile's elements) of a passed tile in memory:
    the whole padded block, row-major, fp32.  BKF is the padded Dk; a kernel blocked over
    Dk reads its block (o_k) of each row."""
    (ri, rn), (ci, cn) = (_RED_DIMS[d] for d in shape)
    return f"{rn} * {cn}", f"{ri}[:, None] * {cn} + {ci}[None, :]"


def _stored(p: Passed, value=None) -> Stored:
    return Stored(p.name, p.layout, *red_layout(p.expr.shape()), value)


_TILE = re.compile(r"\bb_\w+")
# a product the printer tagged (a tile read from memory times a computed one): its type
# constexprs, each followed by the product's number
_PRODUCT = re.compile(r"\b(DT3|CT3|PREC3|GPREC)" + re.escape(PRODUCT_TAG[0]) + r"(\d+)" + re.escape(PRODUCT_TAG[1]))


def line_of(name: str) -> str:
    """The line a Variant.mixed_lines entry names: ``n`` (every such product of line n) or
    ``n#i`` (its i-th)."""
    return name.split("#", 1)[0]


def settle_products(code: str, line: str, mixed=()) -> Tuple[str, List[str]]:
    """(``code``, printed for ``line``, with each tagged product typed; the products'
    names).  A product of a tile read from memory by a computed one multiplies in
    DT3/CT3/PREC3 unless Variant.mixed_lines (``mixed``) names its line or the product
    itself: then in DT2/CT2/PREC2, as two computed tiles (its family's tf32_mixed types,
    for that product alone).  Products are named ``line`` where the line has one and
    ``line#1``, ``line#2``, ... in the order they appear where it has several."""
    ids = list(dict.fromkeys(m.group(2) for m in _PRODUCT.finditer(code)))
    names = {k: line if len(ids) == 1 else f"{line}#{i}" for i, k in enumerate(ids, 1)}
    wide = {k for k, n in names.items() if line in mixed or n in mixed}

    def typed(m):
        kind = m.group(1)
        return kind.replace("3", "2") if kind != "GPREC" and m.group(2) in wide else kind
    return _PRODUCT.sub(typed, code), list(names.values())


def _settle_lines(lines: List[Line], line: str, mixed) -> List[str]:
    """settle_products over the Lines printed for one line, numbered together."""
    sep = "\0"
    code, names = settle_products(sep.join(ln.code for ln in lines), line, mixed)
    for ln, text in zip(lines, code.split(sep)):
        ln.code = text
    return names


def _live(lines: List[Line], roots) -> List[Line]:
    """The lines whose tiles are read by a later live line or by the skeleton (roots)."""
    need = set(roots)
    keep = []
    for ln in reversed(lines):
        if ln.target in need:
            keep.append(ln)
            need |= set(_TILE.findall(ln.code))
    keep.reverse()
    # a definition's comment travels with its first kept line
    for ln, nxt in zip(lines, lines[1:]):
        if ln.comment and ln not in keep and nxt in keep and not nxt.comment:
            nxt.comment = ln.comment
    return keep


def _stage(kp: KernelPlan, where: str, roots=(), state_in_memory=False, extra_loads=(), extra_env=None,
           gradient=False, mixing=None, scan=False) -> Stage:
    """Print ``kp``.  ``roots``: the tiles the skeleton reads besides the finals and the
    passed tiles written (a line no root reaches is not printed).  ``gradient``: a
    gradient kernel (precise lines); ``mixing`` (default: ``gradient``): a kernel whose
    lines Variant.mixed_lines may name (the gradient kernels and the reverse scan's);
    ``scan``: a sequential kernel (row gates stay on their operands: TritonPrinter.pull_gates)."""
    mixing = gradient if mixing is None else mixing
    plan = kp.plan
    v = plan.variant
    dmap = dict(plan.defs)
    names, finals = kp.computes, kp.finals
    used = set()
    for n in names:
        used |= var_names(dmap[n])
    for f in finals:
        used |= var_names(f.expr)
    st = Stage(reads=list(kp.reads), writes=list(kp.writes))
    env: Dict[str, Val] = {}
    args = v.tile_of()
    rec = plan.deriv.recurrences[plan.deriv.program_recurrence[plan.program.name]]
    shapes = {i.seq: ("C", i.dim) for i in rec.inputs}
    kinds = {i.seq: i.kind for i in rec.inputs}
    for t in plan.inputs:
        if t not in used:
            continue
        a = args[t]
        log = a.kind.startswith("gate")
        loggate = kinds.get(t) == "loggate"
        kind = "kq" if grouped(a.name, a.kind) else layout(shapes[t])     # GVA: from the q/k head
        st.loads.append(Load(t, a.name, kind, log, f32=loggate))
        env[t] = Val(None, shapes[t], log=f"b_{t}_log", last=f"b_{t}_log_last") if log else \
            Val(f"b_{t}", shapes[t], raw=not loggate, **(Q_SCALE if a.name == "q" else {}))
    if "S_prev" in used:
        env["S_prev"] = Val("b_s", ("Dv", "Dk"), raw=state_in_memory)
    for ld in extra_loads:
        if ld.tile in used:
            st.loads.append(ld)
    env.update(extra_env or {})
    # the recurrence's parameters, as the kernel declaration binds them: a per-head gate
    # by its log (a [1, 1] tile read from the [H] tensor the wrapper passes), a constant
    binds = param_bindings(plan.deriv, v.name)
    pused = set().union(set(), *(param_names(dmap[n]) for n in names), *(param_names(f.expr) for f in finals))
    for pn in sorted(pused):
        b = binds.get(pn)
        if b is None:
            raise CodegenError(f"{where}: parameter {pn} is read, and kernel {v.func} does not bind it "
                               f"(kernel(..., params=...), derivations/kernel.py)")
        if b.kind == "const":
            env[pn] = Val(repr(float(b.value)), ("1", "1"))
        elif b.kind == "head_arg":
            shp = next(x.shape() for x in _walk_all(plan, dmap, names, finals)
                       if isinstance(x, ir.Param) and x.name == pn)
            if shp != ("Dk", "1"):
                raise CodegenError(f"{where}: parameter {pn} is {shp[0]} x {shp[1]}; a parameter argument "
                                   f"is a Dk x 1 tile per head ([H, K])")
            st.loads.append(Load(pn, pn, "param_k", False))
            env[pn] = Val(f"b_{pn}", shp)
        else:
            st.loads.append(Load(f"{pn}_log", f"in_{pn}_log", "param_h", False))
            env[pn] = Val(None, ("1", "1"), log=f"b_{pn}_log")
    env.update({p.name: Val(f"b_{p.name}", p.expr.shape()) for p in kp.reads_passed})
    for r in kp.reads:
        # raw (exact in the input dtype) unless it is kept in fp32
        env[r] = Val(None, dmap[r].shape(), log=f"b_{r}_log", last=f"b_{r}_log_last") if r in plan.logs else \
            Val(f"b_{r}", dmap[r].shape(), raw=not stored_fp32(plan, r), last=f"b_{r}_last" if r in plan.sums else None)
    pr = TritonPrinter(env, lambda e: unit_lower(e, dmap, plan.diagonal), where, defs=dmap)
    pr.precise = gradient
    pr.pull_gates = not scan
    # Variant.precise_lines: the lines whose gated products take GPREC (None: all)
    gprec = lambda n: "GPREC" if v.precise_lines is None or n in v.precise_lines else "PREC2"     # noqa: E731
    # Variant.mixed_lines, in the kernels whose family the planner may narrow from tf32_mixed
    mixed = set(v.mixed_lines) if mixing else set()
    lines: List[Line] = []
    gated, mixable = [], []

    def start(n):
        pr.gprec = gprec(n)
        return len(lines)

    def settle(n, first):
        """Types line ``n``'s products (the Lines from ``first`` on) and records its
        mixed-line candidates."""
        names = _settle_lines(lines[first:], n, mixed)
        if mixing:
            mixable.extend(names)

    def note(n, text):
        """Records whether line ``n`` (printed as ``text``) could take GPREC (the planner's candidates)."""
        if pr.gprec == "GPREC" and "GPREC" in text:
            gated.append(n)
    for n in names:
        e = dmap[n]
        first = start(n)
        val = pr.p(e)
        note(n, (val.code or "") + (val.fac or "") + (val.log or ""))
        cmt = f"{n} = {to_latex(e)}   [{kp.cites[n]}]" if n in kp.cites else f"{n} = {to_latex(e)}"
        if val.log is not None and val.code is None:
            lines.append(Line(cmt, f"b_{n}_log", val.log))
            lines.append(Line("", f"b_{n}", f"tl.exp(b_{n}_log)"))
            env[n] = Val(f"b_{n}", val.shape, diag=val.diag, log=f"b_{n}_log")
        elif val.fac is not None:
            code = val.code
            if not re.fullmatch(r"b_\w+", code):
                lines.append(Line(cmt + "  (a tile times a gate factor: the tile)", f"b_{n}_c", code))
                code, cmt = f"b_{n}_c", ""
            lines.append(Line(cmt + ("  (its gate factor, in log space)" if cmt else ""), f"b_{n}_f", val.fac))
            env[n] = Val(code, val.shape, fac=f"b_{n}_f", facshape=val.facshape,
                         raw=val.raw and code == val.code)
        elif val.diag:
            lines.append(Line(cmt + "  (kept as its diagonal)", f"b_{n}", pr.dense_vec(val)))
            env[n] = Val(f"b_{n}", val.shape, diag=True)
        else:
            lines.append(Line(cmt, f"b_{n}", val.code))
            # a sum or masked product keeps its parts: a gate factor applied to it later
            # is distributed over them (printer.factor) rather than multiplying b_{n}
            env[n] = Val(f"b_{n}", val.shape, raw=val.raw, terms=val.terms, mix=val.mix)
        if n in kp.writes and n in plan.hoisted and env[n].dense() != f"b_{n}":
            # a gated operand the scan reads is written whole, its gate applied
            lines.append(Line("", f"b_{n}", pr.dense(env[n])))
            env[n] = Val(f"b_{n}", val.shape)
        settle(n, first)
    for f in finals:
        first = start(f.name)
        lines.append(Line(f"{f.name} = {to_latex(f.expr)}   [claim {f.claim.id}, {f.claim.citation}]",
                          f"b_{f.name}", pr.code(f.expr)))
        note(f.name, lines[-1].code)
        settle(f.name, first)
    _reuse_repeated_lines(lines)
    st.axes = _axes(env, finals)
    st.writes_passed = [_stored(p, settle_products(pr.dense(env[p.name]), p.name, mixed)[0])
                        for p in kp.writes_passed]
    st.reads_passed = [_stored(p) for p in kp.reads_passed]
    st.finals = [f.name for f in finals]
    written = {f"b_{n}" for n in st.finals} | set(roots)
    for s in st.writes_passed:
        written |= set(_TILE.findall(s.value))
    for w in st.writes:
        written |= {f"b_{w}", f"b_{w}_log"}
    st.lines = _live(lines, written)
    st.gated = [n for n in gated if any(ln.target.startswith(f"b_{n}") for ln in st.lines)]
    st.mixable = list(dict.fromkeys(n for n in mixable
                                    if any(ln.target.startswith(f"b_{line_of(n)}") for ln in st.lines)))
    live = set().union(written, *(_TILE.findall(ln.code) for ln in st.lines))
    st.live = live
    st.loads = [ld for ld in st.loads if {f"b_{ld.tile}", f"b_{ld.tile}_log", f"b_{ld.tile}_log_last"} & live]
    return st


def _axes(env: Dict[str, Val], finals) -> Dict[str, tuple]:
    """Stage.axes, read off the printer's values: each one's tile, its log and the log's
    last row, its gate factor; the state the skeleton carries and the finals."""
    axes = {"b_s": ("Dv", "Dk")}
    for val in env.values():
        named = {val.code: val.shape, val.log: val.shape, val.fac: val.facshape,
                 val.last: ("1", val.shape[1])}
        axes.update({n: shp for n, shp in named.items() if n and _TILE.fullmatch(n)})
    axes.update({f"b_{f.name}": f.expr.shape() for f in finals})
    return axes


def _walk_all(plan, dmap, names, finals):
    for n in names:
        yield from ir.walk(dmap[n])
    for f in finals:
        yield from ir.walk(f.expr)


def _reuse_repeated_lines(lines: List[Line]) -> None:
    """A line whose code an earlier line of the stage already computed reads that line's
    tile instead.  The gradients a grouped gate gradient reads (g_q is dQ's expression,
    printed again from its claim) repeat whole lines, and Triton's CSE does not merge the
    repeats when they hold gated products: those carry a runtime branch or a loop (region
    ops), so each copy ran, three products apiece under tf32x3.  An earlier line counts as
    the same code when it differs only in taking GPREC where this one takes PREC2: a
    precise line (Variant.precise_lines) then also serves the gradient printed again from
    the same claim, at no cost and never less precisely (GPREC is PREC2 or finer,
    runtime.kernel_types).  Every target is assigned once per stage, so the earlier tile
    still holds that value."""
    first: List[Line] = []
    for ln in lines:
        if not re.fullmatch(r"b_\w+", ln.code):
            same = next((e for e in first if _as_precise(e.code, ln.code)), None)
            if same is not None:
                ln.code = same.target
                continue
        first.append(ln)


_GATED_TYPE = re.compile(r"\b(GPREC|PREC2)\b")


def _as_precise(earlier: str, code: str) -> bool:
    """Whether ``earlier`` computes ``code``'s value with every gated product at least as
    precise: the same text, GPREC or PREC2 in each of ``code``'s PREC2 places, GPREC in
    each of its GPREC places."""
    a, b = _GATED_TYPE.split(earlier), _GATED_TYPE.split(code)
    if len(a) != len(b):
        return False
    return all(x == y or (i % 2 == 1 and y == "PREC2") for i, (x, y) in enumerate(zip(a, b)))


def _final(plan: Plan, which: str) -> Final:
    name = plan.program.output if which == "O" else plan.program.state
    return Final(name, dict(plan.defs)[name], plan.claims[which])


def _forward_cites(plan: Plan) -> Dict[str, str]:
    c = plan.claims
    return {n: f"program {plan.program.name}, under claims {c['O'].id}, {c['S'].id}" for n, _ in plan.defs}


def forward_stages(plan: Plan):
    """(intra, state scan, output kernel); intra is None when no definition needs it."""
    cites = _forward_cites(plan)
    name = plan.variant.name
    intra = None
    if plan.intra:
        intra = _stage(KernelPlan(plan, plan.intra, writes=plan.intra_writes, cites=cites), f"{name} intra kernel")
    s, o = plan.state_stage, plan.out_stage
    state = _stage(KernelPlan(plan, s.computes, [_final(plan, "S")], s.reads, cites=cites), f"{name} state kernel",
                   scan=True)
    out = _stage(KernelPlan(plan, o.computes, [_final(plan, "O")], o.reads, cites=cites), f"{name} output kernel",
                 state_in_memory=True)
    return intra, state, out


def intra_wide_stage(plan: Plan) -> Optional[Stage]:
    """The intra stage's second kernel (Plan.wide: the C x D tiles formed from the chunk's
    C x C tiles the intra kernel wrote), or None where the stage is one kernel."""
    if not plan.wide:
        return None
    dmap = dict(plan.defs)
    got = set(plan.intra_wide).union(*(var_names(dmap[n]) for n in plan.intra_wide))
    reads = [n for n in plan.intra_writes if n in got]
    return _stage(KernelPlan(plan, plan.intra_wide, reads=reads, writes=list(plan.wide), cites=_forward_cites(plan)),
                  f"{plan.variant.name} intra wide kernel")


def _backward_inputs():
    """δO_[t] is read from memory; δS_[t] is b_ds (carried by the reverse scan, loaded
    from dh by the gradient kernels)."""
    return ([Load(backward.D_OUT, "do", "v", False)],
            {backward.ADJ_STATE: Val("b_ds", ("Dv", "Dk")), backward.D_OUT: Val("b_dO", ("C", "Dv"), raw=True)})


@dataclass
class BackwardStages:
    """The backward's kernels as printed.  The reverse scan is one sequential kernel
    (reverse) when nothing in it is state-free (GLA), else a parallel kernel
    (reverse_pre) and the scan reading its tiles (reverse_scan).  The gradients: the V
    kernel, then the K kernel (grad_k) when no tile needs whole K rows (GLA), else the C
    kernel and the KB kernel blocked over K (grad_c, grad_kb).  The K kernel is blocked
    over K too (its Stage.k_blocked) where nothing in it sums over Dk (GLA, RWKV-6: every
    gradient line is per K column): each program holds C x BK tiles instead of C x K."""
    reverse: Optional[Stage]
    reverse_pre: Optional[Stage]
    reverse_scan: Optional[Stage]
    grad_v: Stage
    grad_k: Optional[Stage]
    grad_c: Optional[Stage]
    grad_kb: Optional[Stage]

    def k_blocks(self) -> Optional[Stage]:
        """The gradient kernel blocked over K (TILING grad_BK), or None."""
        return self.grad_kb or (self.grad_k if self.grad_k and self.grad_k.k_blocked else None)

    # each stage's kernel, as the templates name it
    KERNELS = dict(reverse="_dstate_kernel", reverse_pre="_dstate_pre_kernel", reverse_scan="_dstateh_kernel",
                   grad_v="_dgradv_kernel", grad_k="_dgradk_kernel", grad_c="_dgradc_kernel",
                   grad_kb="_dgradkb_kernel")

    # each stage's product family (TILING key of its products with a computed tile)
    FAMILY = dict(reverse="reverse_dots", reverse_pre="reverse_dots", reverse_scan="reverse_dots",
                  grad_v="gradv_dots", grad_k="grad_dots", grad_c="grad_dots", grad_kb="grad_dots")

    def mixable(self) -> Dict[str, List[str]]:
        """Per product family, the products Variant.mixed_lines may name in its kernels
        (and their V loops), in launch order."""
        out: Dict[str, List[str]] = {}
        for f, fam in self.FAMILY.items():
            st = getattr(self, f)
            for p in (st, st and st.loop):
                if p:
                    out[fam] = list(dict.fromkeys(out.get(fam, []) + p.mixable))
        return out

    def gradient_kernels(self) -> List[Stage]:
        return [s for s in (self.grad_v, self.grad_k, self.grad_c, self.grad_kb) if s]

    def kernels(self) -> List[tuple]:
        """(kernel name, stage) of every kernel printed, in launch order."""
        return [(k, getattr(self, f)) for f, k in self.KERNELS.items() if getattr(self, f)]

    def parts(self) -> List[tuple]:
        """(kernel name, stage) of every kernel and of each V loop inside one (its lines,
        and the loads printed before it), in launch order: what each kernel prints."""
        return [(k, p) for k, st in self.kernels() for p in (st, st.loop, st.loop_outer) if p]

    def gradient_parts(self) -> List[Stage]:
        """The gradient kernels and the V loops inside them."""
        return [p for st in self.gradient_kernels() for p in (st, st.loop) if p]

    def freed_after(self) -> Dict[str, List[str]]:
        """Per stage, the host buffers that no later kernel reads: passed tiles (r_<name>),
        the forward's tiles and, from the V kernel on, the chunk states h and their
        gradients dh; the host code drops them after that stage's launch, so that they do
        not add to the peak memory of what comes after."""
        stages = [(n, getattr(self, n)) for n in ("reverse", "reverse_pre", "reverse_scan", "grad_v", "grad_k",
                                                  "grad_c", "grad_kb") if getattr(self, n)]
        last = {"h": "grad_v", "dh": "grad_v"}
        for n, st in stages:
            parts = [p for p in (st, st.loop, st.loop_outer) if p]
            for p in parts:
                for name in p.reads:
                    last[name] = n
            for s in st.reads_passed + (st.loop.reads_passed if st.loop else []):
                last[f"r_{s.name}"] = n
            for _, host in st.loop_args:
                if host in ("h", "dh"):
                    last[host] = n
        return {n: sorted(k for k, at in last.items() if at == n) for n, _ in stages}


def _computing_hoisted(kp: KernelPlan) -> KernelPlan:
    """``kp`` with the scan's gated operands it reads (Plan.hoisted) computed instead:
    their definitions join the stage's, the tiles those read from memory its reads."""
    plan = kp.plan
    dmap = dict(plan.defs)
    want = [r for r in kp.reads if r in plan.hoisted]
    unstored = dataclasses.replace(plan, boundary=[n for n in plan.boundary if n not in plan.hoisted])
    fwd, _, reads = backward._collect(unstored, {}, [dmap[r] for r in want], "the scan's gated operands",
                                      allow_state=False)
    extra = set(want) | set(fwd)
    order = [n for n, _ in plan.defs]
    computes = [n for n in order if n in extra or n in kp.computes]
    computes += [n for n in kp.computes if n not in computes]
    new_reads = [n for n in order if (n in kp.reads and n not in want) or n in reads]
    return dataclasses.replace(kp, computes=computes, reads=new_reads)


def _write_over(kp: KernelPlan, st: Stage, later: List[Stage]) -> None:
    """Each tile ``st`` writes for a later kernel takes the buffer of a tile of the same
    layout that it reads, that its own definition reads and that no ``later`` kernel
    reads (the scan's δU over the hoisted part of it, hr0): no second buffer, and the
    kernel stores through the pointers it loaded with (a second pointer tile in the
    scan's loop spilled: docs/measurements.md).  A value formed from the tile is stored
    only after every element of it was loaded, so the reads are safe."""
    defs = kp.defs()
    gone = {s.name for x in later for s in x.reads_passed}
    out = []
    for w in st.writes_passed:
        src = next((r for r in st.reads_passed if (r.layout, r.size, r.offsets) == (w.layout, w.size, w.offsets)
                    and r.name not in gone and r.name in var_names(defs[w.name])), None)
        if src is not None:
            gone.add(src.name)
            w = dataclasses.replace(w, over=src.name)
        out.append(w)
    st.writes_passed = out


def _bytes_per_row(st: Stage, plan: Plan) -> int:
    """Bytes a program of ``st`` reads per chunk row, counting whole C x Dk and C x Dv
    tiles (each D wide; C x 1 gates and last rows are negligible, C x C tiles half):
    inputs in a 16-bit dtype, boundary tiles in theirs (a narrowed one in the inputs')."""
    dmap = dict(plan.defs)
    live = st.live or set()
    wide = lambda r: stored_fp32(plan, r) and r not in plan.variant.narrowed     # noqa: E731
    n = sum(2 for ld in st.loads if ld.kind in ("k", "kq", "v"))
    for r in st.reads:
        if {f"b_{r}", f"b_{r}_log"} & live:
            n += {"k": 2, "v": 2, "c": 1, "head": 0}[layout(dmap[r].shape())] * (2 if wide(r) else 1)
    return n


def backward_stages(plan: Plan, bwd) -> BackwardStages:
    loads, env = _backward_inputs()
    name = plan.variant.name

    def printed(kp, where, sequential=False, given_env=None, **kw):
        kenv = dict(env, **(given_env or {}))
        st = _stage(kp, f"{name} {where}", extra_loads=loads, extra_env=kenv, scan=sequential, **kw)
        if sequential or not plan.hoisted & set(kp.reads):
            return st
        # a parallel kernel reads a scan's gated operand only where that moves fewer
        # bytes than computing it from what the kernel reads anyway (the sequential scans
        # always read it: taking the work off their loop is why it is written)
        alt = _stage(_computing_hoisted(kp), f"{name} {where}", extra_loads=loads, extra_env=kenv, **kw)
        return alt if _bytes_per_row(alt, plan) <= _bytes_per_row(st, plan) else st
    pre, scan = backward.hoist_reverse(plan, bwd)
    if not pre.writes_passed:
        scan = backward.reverse_scan(plan, bwd)
    # the scan's own C x Dv tiles that the V kernel would form again: the scan writes
    # those the V kernel then reads (backward.scan_tiles)
    carried = backward.scan_tiles(scan)
    split = backward.split_gradients(plan, bwd, pre.writes_passed + carried)
    ck, kb = backward.split_k(plan, split.k_side)
    one_k = not ck.writes_passed
    if one_k:
        # one K kernel: it reads a C x Dk reduction whole where it needs it, so a row sum
        # of it is formed there too, not passed beside it
        split = backward.split_gradients(plan, bwd, pre.writes_passed + carried, share_rowsums=True)
    k_side = [("grad_k", split.k)] if one_k else [("grad_c", ck), ("grad_kb", kb)]
    loops = _looped(plan, split, k_side)
    # the V reductions the K side forms itself are not written by the V kernel
    gone = {p.name for lp in loops.values() for p in lp["reds"]}
    if gone:
        split = backward.split_gradients(plan, bwd, pre.writes_passed + carried, looped=gone, share_rowsums=one_k)
    read = {p.name for p in split.v.reads_passed} | {p.name for lp in loops.values() for p in lp["plan"].reads_passed}
    scan = dataclasses.replace(scan, writes_passed=[p for p in carried if p.name in read])
    reverse = reverse_pre = reverse_scan = None
    if pre.writes_passed:
        reverse_pre = printed(pre, "reverse scan's parallel kernel", mixing=True)
        reverse_scan = printed(scan, "reverse scan kernel", sequential=True, roots=["b_dS_prev"], mixing=True)
    else:
        reverse = printed(scan, "reverse scan kernel", sequential=True, roots=["b_dS_prev"], mixing=True)
    grad_v = printed(split.v, "gradient V kernel", state_in_memory=True, gradient=True)
    k_stages = {}
    for f, kp in k_side:
        where = {"grad_c": "gradient C kernel", "grad_kb": "gradient KB kernel", "grad_k": "gradient K kernel"}[f]
        lp = loops.get(f)
        if not lp:
            k_stages[f] = printed(kp, where, gradient=True)
            continue
        names = {p.name for p in lp["reds"]}
        main = dataclasses.replace(kp, reads_passed=[p for p in kp.reads_passed if p.name not in names])
        st = printed(main, where, gradient=True,
                     given_env={p.name: Val(f"b_{p.name}", p.expr.shape()) for p in lp["reds"]})
        _attach_loop(st, _stage(lp["plan"], f"{name} {where}'s V loop", state_in_memory=True, extra_loads=loads,
                                extra_env=env, gradient=True), dict(lp["plan"].plan.defs), lp["reds"])
        k_stages[f] = st
    later = [k_stages[f] for f in k_stages if k_stages[f].loop]
    _write_over(scan, reverse_scan or reverse, [grad_v] + [s.loop for s in later])
    if one_k:
        k_stages["grad_k"].k_blocked = not _sums_over_k(dict(k_side)["grad_k"], loops.get("grad_k"))
    return BackwardStages(reverse, reverse_pre, reverse_scan, grad_v, k_stages.get("grad_k"),
                          k_stages.get("grad_c"), k_stages.get("grad_kb"))


def _sums_over_k(kp, loop) -> bool:
    """Whether the one K kernel (its plan ``kp`` and V loop ``loop``, _looped's) forms
    something summed over Dk: it then needs whole K rows and is not blocked over K."""
    dmap = kp.defs()
    exprs = [dmap[n] for n in kp.computes] + [f.expr for f in kp.finals]
    if loop:
        ldefs = loop["plan"].defs()
        exprs += [ldefs[n] for n in loop["plan"].computes]
    return any(backward.sums_over(e, "Dk") for e in exprs)


def _looped(plan: Plan, split, k_side) -> Dict[str, dict]:
    """Per K-side kernel, the V reductions it forms itself in a loop over V blocks
    (Variant.loop_reductions) and the plan of that loop: those the size of a tile (C x Dk,
    C x C) that every kernel reading them can form (backward.loopable).  A column or a
    scalar per chunk costs next to nothing to pass; one that some reader must read from
    memory is written by the V kernel anyway.  A looped KB kernel runs K blocks of 64
    (gen.K_BLOCK_LOOPED): at 32 Triton 3.6 miscompiles it on Hopper.  A split K side
    loops only where no gate is per K column: a vector-gated KB kernel holds C x BK gate
    tiles in both of its passes, and with loops KDA's and DPLR's were slower on the H200
    at K blocks of 32 and spill 2-9 KB offline at 64, where Gated DeltaNet's and
    DeltaNet's were faster (docs/measurements.md, "The illegal memory access")."""
    if not plan.variant.loop_reductions:
        return {}
    dmap = dict(plan.defs)
    if len(k_side) > 1 and any("Dk" in dmap[n].shape() for n in plan.logs if n in dmap):
        return {}
    ok: Dict[str, bool] = {}
    for f, kp in k_side:
        for p in kp.reads_passed:
            if p.layout == backward.VSUM:
                # the KB kernel holds one K block: a reduction summing over Dk is not formed there
                ok[p.name] = ok.get(p.name, True) and p.expr.shape() in (("C", "Dk"), ("C", "C")) \
                    and backward.loopable(split.v_side, p, blocked=f == "grad_kb")
    out = {}
    for f, kp in k_side:
        reds = [p for p in kp.reads_passed if ok.get(p.name)]
        if reds:
            out[f] = dict(reds=reds, plan=backward.loop_plan(split.v_side, reds))
    return out


_ACC_DIMS = {"C": "BT", "Dk": "BK", "Dv": "BV", "1": "1"}


def _attach_loop(st: Stage, loop: Stage, dmap, reds: List[Passed]) -> None:
    """Give ``st`` the V loop ``loop``: its Dv-wide loads inside the loop, the others
    before it (loop_outer), and the pointers it adds to the kernel's."""
    inner = lambda ld: ld.kind == "v"     # noqa: E731
    wide = [r for r in loop.reads if layout(dmap[r].shape()) == "v"]
    outer = dataclasses.replace(loop, loads=[ld for ld in loop.loads if not inner(ld)],
                                reads=[r for r in loop.reads if r not in wide], lines=[])
    loop.loads, loop.reads = [ld for ld in loop.loads if inner(ld)], wide
    st.loop, st.loop_outer = loop, outer
    have = {ld.arg for ld in st.loads}
    args = []
    for ld in outer.loads + loop.loads:
        if ld.arg not in have:
            have.add(ld.arg)
            args.append((ld.arg, ld.arg))
    args += [(f"in_{r}", r) for r in outer.reads + loop.reads if r not in st.reads]
    args += [(f"r_{s.name}", f"r_{s.name}") for s in loop.reads_passed]
    args += [(n, n) for n, t in (("h", "b_s"), ("dh", "b_ds")) if t in (loop.live or ())]
    st.loop_args = args
    st.loop_init = {p.name: f"tl.zeros([{', '.join(_ACC_DIMS[d] for d in p.expr.shape())}], dtype=tl.float32)"
                    for p in reds}
