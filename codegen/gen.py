"""`chunkproof gen`: print generated_kernels/ from the verified derivations."""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import jinja2

from . import backward_pick, emit, fla_api, kloop, ksplit, precision, recurrent, schedule, wrap
from .plan import backward_claims, build, load_variant
from .printer import PRODUCT_TAG, CodegenError
from .tiling import Tiling
from .variants import VARIANTS, Variant

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(HERE), "generated_kernels")
MAX_HEAD_DIM = 512
# the largest head size a GPU run has passed (docs/measurements.md); over it, the
# interpreter only
GPU_MAX_HEAD_DIM = 256
MAX_LINE = 120
# the K block of a K-blocked gradient kernel, where the tiling states none; with a V loop
# (Variant.loop_reductions) Triton 3.6 miscompiles it at 32 on Hopper (an illegal
# shared-memory read at 4 warps, non-finite gradients at 8): 64 ran, and was the faster
# (docs/measurements.md, "The illegal memory access")
K_BLOCK, K_BLOCK_LOOPED = 32, 64


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["ksplit"] = ksplit.split_body
    env.filters["kloop"] = kloop.loop_body
    env.filters["late_loads"] = schedule.late_loads
    env.globals["scan_pieces"] = ksplit.PIECES
    return env


def tiling_of(v: Variant, kb=None) -> Tiling:
    """The variant's tiling, validated: a missing, unknown or ill-valued key names it.
    A tiling without grad_BK takes it from the structure (``kb``: the gradient stage's
    K-blocked kernel, an emit.Stage, or None where it has none)."""
    keys = dict(v.tiling)
    if "grad_BK" not in keys:
        keys["grad_BK"] = None if kb is None else K_BLOCK_LOOPED if kb.loop else K_BLOCK
    try:
        return Tiling.of(**keys)
    except ValueError as e:
        raise CodegenError(f"variant {v.name} (codegen/variants.py): {e}") from None


def render_variant(v: Variant, plan=None, env=None, check=True, said=None) -> str:
    """The source of generated_kernels/<v.name>.py.  ``check=False`` skips re-checking
    the backward claims (tests that print from deliberately broken derivations).
    ``said``: called with what the tiling asked that this kernel cannot do (an intra
    kernel that cannot loop over K blocks, TILING prep_BK: printed whole)."""
    if plan is None:
        plan = load_variant(v, check=check)
    elif plan.variant is not v:    # the same kernel, another tiling or precise_lines
        plan = dataclasses.replace(plan, variant=v)
    v, plan = _picked(v, plan, check)
    intra, state, out = emit.forward_stages(plan)
    wide = emit.intra_wide_stage(plan)
    bw = None
    if v.backward:   # the backward claims are checked once, for every stage
        bw = emit.backward_stages(plan, backward_claims(v, plan.deriv, check=check))
        printed = {ln.target for st in bw.gradient_parts() for ln in st.lines}
        unknown = [n for n in v.precise_lines or () if f"b_{n}" not in printed]
        if unknown:
            raise CodegenError(f"variant {v.name}: precise_lines names {unknown}, which no gradient kernel "
                               f"computes (its lines: {sorted(t[2:] for t in printed)})")
        products = [n for names in bw.mixable().values() for n in names]
        lines_of = {emit.line_of(n) for n in products}
        unknown = [n for n in v.mixed_lines if n not in products and n not in lines_of]
        if unknown:
            raise CodegenError(f"variant {v.name}: mixed_lines names {unknown}, which no gradient or reverse "
                               f"scan kernel computes with a product of a tile read from memory by a computed "
                               f"one (those products: {products})")
    kb = bw.k_blocks() if bw else None
    tiling = tiling_of(v, kb)
    if bw:
        if (tiling.grad_BK is None) != (kb is None):
            raise CodegenError(f"variant {v.name}: TILING grad_BK is {tiling.grad_BK!r}, but its gradient "
                               f"stage {'has a' if kb else 'has no'} K-blocked kernel "
                               f"(set grad_BK {'to a K block size' if kb else 'to None'})")
    scans = [state] + ([bw.reverse or bw.reverse_scan] if bw else [])
    if any(st.guarded for st in scans):
        # a sequential kernel cannot run a chunk again (Launch guarded): its programs
        # carry the state through every chunk
        raise CodegenError(f"variant {v.name}: a state scan prints a vector-gated intra-chunk product "
                           f"(the runtime's _masked_ forms); only the per-chunk kernels may")
    parallel = [intra, wide, out] + ([bw.reverse_pre] + bw.gradient_kernels() if bw else [])
    bw_kernels = bw.parts() if bw else []
    # the scan's gated operands no backward kernel reads are not kept for the backward
    bw_reads = set().union(*(st.reads for _, st in bw_kernels))
    writes = (intra.writes if intra else []) + (wide.writes if wide else [])
    scan_only = [w for w in writes if w in plan.hoisted and w not in bw_reads]
    # a tile the intra kernel writes for the wide kernel alone (DPLR's ch2) is freed after it
    fwd_reads = set(state.reads) | set(out.reads)
    later = bw_reads | fwd_reads
    wide_only = [w for w in intra.writes if w in wide.reads and w not in later] if wide else []
    stored_types = _stored_types(plan, ([("_intra_wide_kernel", wide)] if wide else [])
                                 + [("_state_kernel", state), ("_out_kernel", out)] + bw_kernels)
    store_kind = {"k": "k", "v": "v", "gate_k": "k", "gate_h": "head", "head": "head"}
    rfunc = fla_api.recurrent_name(v.func)
    names = [a.name for a in v.args] + list(plan.param_arg_names)
    dmap = dict(plan.defs)
    # the backward keeps what its kernels read (a tile the forward alone reads is not kept)
    kept_tiles = [w for w in writes if w not in scan_only and w not in wide_only and (w in bw_reads or not bw)]
    ctx = dict(
        v=v, plan=plan, tiling=_tiling_literal(tiling), intra=intra, wide=wide,
        intra_kloop=tiling.prep_BK is not None, state_stage=state, out_stage=out, bw=bw,
        scan_only=scan_only, wide_only=wide_only, stored_types=stored_types, kept_tiles=kept_tiles,
        narrowed_names={s.name: s.layout for _, st in (bw.kernels() if bw else []) for s in st.writes_passed
                        if (s.over or s.name) in v.narrowed},
        # a forward that keeps nothing frees a kept tile after the last forward kernel reading it
        kept_unread=[w for w in kept_tiles if w not in fwd_reads],
        kept_scan=[w for w in kept_tiles if w in state.reads and w not in out.reads],
        guarded_any=any(st.guarded for st in parallel if st),
        kind_of={a.name: store_kind[a.kind] for a in v.args},
        grad_outs=[(a.name, store_kind[a.kind]) for a in v.args] if bw else [],
        layout={n: emit.layout(dmap[n].shape()) for n in plan.boundary}, logs=sorted(plan.logs), sums=sorted(plan.sums),
        fp32_tiles=[n for n in plan.boundary if emit.stored_fp32(plan, n) and n not in v.narrowed],
        out=plan.program.output, state=plan.program.state,
        arg_names=[a.name for a in v.args],
        args_spec=repr(tuple((a.name, a.kind) for a in v.args)), fla_keywords=fla_api.literal(v.func),
        rfunc=rfunc, recurrent_keywords=fla_api.literal(rfunc),
        chunk_sig=fla_api.signature(v.func, names), rec_sig=fla_api.signature(rfunc, names),
        chunk_params=fla_api.params_literal(v.func, names), rec_params=fla_api.params_literal(rfunc, names),
        chunk_given=", ".join(f"{p.name}={p.name}" for p in fla_api.params(v.func, names)),
        rec_given=", ".join(f"{p.name}={p.name}" for p in fla_api.params(rfunc, names)),
        rec=recurrent.kernel(v, plan),
        grouped=[a.name for a in v.args if fla_api.grouped(a.name, a.kind)],
        shapes_doc=", ".join(f"{a.name} {_SHAPE_DOC[a.kind]}" for a in v.args),
    )
    template = (env or _env()).get_template("variant.py.j2")
    try:
        text = template.render(**ctx)
    except kloop.KLoopError as e:
        # prep_BK is every variant's (one tiling for all): the intra kernels that cannot
        # loop hold every K column at once, as without it, and the caller is told why
        if not ctx["intra_kloop"]:
            raise
        if said:
            said(f"{v.name}: the intra kernel holds every K column at once (TILING prep_BK "
                 f"{tiling.prep_BK} not taken): {e}")
        text = template.render(**dict(ctx, intra_kloop=False))
    src = wrap.wrap_source(text, MAX_LINE)
    if PRODUCT_TAG[0] in src:
        line = next(i + 1 for i, ln in enumerate(src.splitlines()) if PRODUCT_TAG[0] in ln)
        raise CodegenError(f"generated_kernels/{v.name}.py, line {line}: a product printed without its types "
                           f"settled (emit.settle_products; a fault of the generator, not of the derivation)")
    try:   # a template slip fails here, not when the kernels are imported
        compile(src, f"generated_kernels/{v.name}.py", "exec")
    except SyntaxError as e:
        raise CodegenError(f"the templates print invalid Python for generated_kernels/{v.name}.py, "
                           f"line {e.lineno}: {e.msg}: {(e.text or '').strip()}") from None
    long = [i + 1 for i, ln in enumerate(src.splitlines()) if wrap.size(ln) > MAX_LINE]
    if long:
        raise CodegenError(f"generated_kernels/{v.name}.py: lines {long[:5]} are over {MAX_LINE} bytes")
    return src


def _stored_types(plan, stages) -> Dict[str, str]:
    """The scan's gated operands (Plan.hoisted), and the chunks' delta S (dh, written by
    the reverse scan from its fp32 register and read by the gradient kernels alone),
    every reader of which only multiplies it, rounded to a product type first: name ->
    the readers' (kernel, type constexpr) list as printed, for Launches.stored_type.  A
    tile read any other way is left out (stored in fp32)."""
    out = {}
    for h in sorted(plan.hoisted):
        r = _product_readers(f"b_{h}", [(k, st) for k, st in stages if h in st.reads])
        if r:
            out[h] = r
    # the gradient kernels read it (the V kernel, and a K-side kernel's V loop)
    r = _product_readers("b_ds", [(k, st) for k, st in stages if k.startswith("_dgrad")])
    if r:
        out["dh"] = r
    return out


def _product_readers(tile: str, stages) -> Optional[str]:
    """The (kernel, type constexpr) list of the products that read ``tile`` in
    ``stages``, each rounding it (or its transpose) to the type first; None where a
    line reads it any other way, or none reads it."""
    product = re.compile(rf"(?:\b{tile}|tl\.trans\({tile}\))\.to\((DT\d?)\)")
    readers, other = set(), False
    for kernel, st in stages:
        for ln in st.lines:
            readers |= {(kernel, m) for m in product.findall(ln.code)}
            other |= bool(re.search(rf"\b{tile}\b", product.sub("", ln.code)))
    return repr(sorted(readers)) if readers and not other else None


def _picked(v: Variant, plan, check):
    """``v`` and its plan with the backward claims its declaration left to pick."""
    picked, _ = backward_pick.resolve(v, plan.deriv, check=check)
    if picked is v:
        return v, plan
    return picked, build(picked, plan.deriv, check=False)   # its forward claims were checked already


def log_gates(v: Variant, plan) -> tuple:
    """The arguments that hold a log gate: log_of() arguments (kind gate_*) and those bound
    to a recurrence input of kind 'loggate' (simple GLA's g, RWKV-6's w)."""
    rec = plan.deriv.recurrences[plan.deriv.program_recurrence[plan.program.name]]
    kinds = {i.seq: i.kind for i in rec.inputs}
    return tuple(a.name for a in v.args if a.kind.startswith("gate") or kinds.get(a.tile) == "loggate")


def candidate_lines(v: Variant, plan) -> Tuple[List[str], Dict[str, List[str]], List[str]]:
    """The precision planner's candidates, from one printing of the backward kernels with
    every line precise: the lines with a product of a computed tile, for tf32x3
    (Variant.precise_lines), per product family the products of a tile read from memory
    by a computed one, for tf32_mixed alone (Variant.mixed_lines: a line's, or one of
    them where a line has several), and the tiles that may be
    stored in the inputs' dtype (Variant.narrowed): the C x C boundary tiles, then those
    passed between backward kernels in their own buffers, in launch order."""
    v = dataclasses.replace(v, precise_lines=None, mixed_lines=(), narrowed=())
    v, plan = _picked(v, dataclasses.replace(plan, variant=v), False)
    if not v.backward:
        return [], {}, []
    bw = emit.backward_stages(plan, backward_claims(v, plan.deriv, check=False))
    kernels = bw.gradient_parts()
    # the C x C boundary tiles (the triangular inverse, masked gated products) first: fp32
    # unless narrowed, where no error grows (Gated DeltaNet's At in bf16: under 1%, docs/measurements.md)
    square = [n for n in plan.boundary if emit.narrowable(plan, n)]
    passed = square + [s.name for _, st in bw.kernels() for s in st.writes_passed if not s.over]
    return sorted({n for st in kernels for n in st.gated}), bw.mixable(), list(dict.fromkeys(passed))


def planned_stores(v: Variant, plan) -> Tuple[str, ...]:
    """The stored types the precision planner chooses for ``v`` (precision.STORE_KEYS):
    delta S's (TILING dh_store) where the kernel has a backward."""
    return precision.STORE_KEYS if _picked(v, plan, False)[0].backward else ()


def _tiling_literal(t: Tiling) -> str:
    return "Tiling(" + ", ".join(f"{k}={getattr(t, k)!r}" for k in Tiling.keys()) + ")"


_SHAPE_DOC = {"k": "[B, T, H, K]", "v": "[B, T, H, V]", "gate_k": "[B, T, H, K] (log decay)",
              "gate_h": "[B, T, H] (log decay)", "head": "[B, T, H]"}


class StalePrecision(CodegenError):
    """A precision record is missing, was measured on other kernel code or planned under
    other settings (--check)."""


def render_all(variants: Optional[List[Variant]] = None, progress=None, out_dir: str = OUT_DIR,
               measure=None, keep_records: bool = False) -> Dict[str, str]:
    """File name -> content for every generated file: each module and its precision record
    (<name>.precision.json, codegen/precision.py).  A record in ``out_dir`` that is fresh
    (measured on the same kernel code) is kept; otherwise the planner measures again with
    ``measure`` (chunkproof.fuzz.precision_measure.Measure), or without one StalePrecision
    names every such variant.  ``keep_records`` (chunkproof gen): each record planned is
    written to ``out_dir`` at once, so a run stopped after hours of measuring keeps what
    it measured and the next plans only the rest; the modules are written by the caller."""
    env = _env()
    variants = variants or VARIANTS
    runtime = env.get_template("runtime.py.j2").render(max_head_dim=MAX_HEAD_DIM, gpu_max_head_dim=GPU_MAX_HEAD_DIM,
                                                        grouped_names=repr(fla_api.GROUPED))
    files, stale_names = {}, []
    for v in variants:
        if progress:
            named = v.backward or {}
            nb = len(named.get("grads", {})) + len(named.get("inner", [])) + len({"dS", "dS_prev"} & set(named))
            left = "" if backward_pick.complete(v) else (" and the ones left to pick" if nb else "")
            more = f", {nb} named backward claims{left}" if nb else ", the backward claims it picks"
            progress(f"checking claims {v.out_claim}, {v.state_claim}{more} and printing {v.name}.py")
        plan = load_variant(v)
        if progress and plan.claims["S"].id != v.state_claim:
            progress(f"{v.name}: the state scan reads {', '.join(sorted(plan.hoisted))} from the intra kernel, "
                     f"printed from {plan.claims['S'].id} (checked: exact)")
        rec = precision.read_record(out_dir, v.name)
        current = bool(rec) and rec.get("version") == precision.VERSION
        # why it is planned again, where it is: a reason found here, else precision.staleness's
        why = None if current else "written by another planner version" if rec else "none yet"
        stores = planned_stores(v, plan)
        choice = precision.Choice.from_dict(rec["choice"]) if current else precision.Choice.cheapest(stores)
        candidates = None
        if choice.lines or choice.mixed or choice.narrow:
            # a changed derivation may no longer print a line or pass a tile the record
            # names: the record is then stale, not an error of the user's variant
            candidates = lines, mixable, passed = candidate_lines(v, plan)
            if not (set(choice.lines) <= set(lines) and set(choice.mixed) <= {n for f in mixable.values() for n in f}
                    and set(choice.narrow) <= set(passed)):
                rec, choice = None, precision.Choice.cheapest(stores)
                why = "names lines or passed tiles the backward kernels no longer print"
        src = render_variant(precision.apply(v, choice), plan=plan, env=env, said=progress)  # checks the claims once
        rec = precision.rekeyed(rec, src, runtime)
        if not precision.fresh(rec, src, runtime):
            why = why or precision.staleness(rec, src, runtime)
            if measure is None:
                stale_names.append(f"{v.name} ({why})")
                continue
            precision.require_interpreter()
            if progress:
                progress(f"planning the product precision of {v.name} (its record: {why}; codegen/precision.py)")
            lines, mixable, passed = candidates or candidate_lines(v, plan)
            rec, src = precision.plan(v, lambda vv: render_variant(vv, plan=plan, env=env, check=False),
                                      runtime, lines, measure, progress, gates=log_gates(v, plan), mixable=mixable,
                                      stores=stores, passed=passed)
            if not rec["met"] and progress:
                progress(f"{v.name}: the precision target ({precision.TARGET}x the plain chunked bf16 "
                         f"baseline's error) is NOT met: worst {rec['worst_ratio']}x, with every product at "
                         f"its most precise")
            if keep_records:
                write({precision.RECORD.format(v.name): precision.record_text(rec)}, out_dir, prune=False)
                if progress:
                    progress(f"{v.name}: its precision record is written to {out_dir} (kept if this run stops)")
        files[f"{v.name}.py"] = src
        files[precision.RECORD.format(v.name)] = precision.record_text(rec)
    if stale_names:
        raise StalePrecision(f"the precision record of {'; '.join(stale_names)} is not this kernel's plan "
                             f"(codegen/precision.py)")
    files["_runtime.py"] = runtime
    files["__init__.py"] = env.get_template("init.py.j2").render(
        variants=variants, rfunc={v.func: fla_api.recurrent_name(v.func) for v in variants})
    return files


# the variants a worker of plan_in_parallel plans, by index (the workers are forked)
_WORKER_VARIANTS: List[Variant] = []


def _plan_in_worker(i: int, out_dir: str, measure, quiet: bool) -> str:
    v = _WORKER_VARIANTS[i]
    say = None if quiet else (lambda m: sys.stderr.write(f"chunkproof gen [{v.name}]: {m}\n"))
    render_all([v], progress=say, out_dir=out_dir, measure=measure, keep_records=True)
    return v.name


def plan_in_parallel(variants: List[Variant], out_dir: str, jobs: int, measure, quiet: bool = False) -> None:
    """Plan the stale precision records of ``variants`` in ``jobs`` forked processes with
    ``measure`` (render_all's), each record written to ``out_dir`` as planned (its
    keep_records); the longest planned last time first.  A worker's error is raised here,
    naming its variant."""
    import concurrent.futures
    import multiprocessing
    precision.require_interpreter()     # before any worker imports Triton
    last = {}
    for v in variants:
        rec = precision.read_record(out_dir, v.name) if os.path.isdir(out_dir) else None
        last[v.name] = (rec or {}).get("seconds", 0)
    order = sorted(range(len(variants)), key=lambda i: -last[variants[i].name])
    _WORKER_VARIANTS[:] = variants
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_plan_in_worker, i, out_dir, measure, quiet): variants[i].name for i in order}
        for f in concurrent.futures.as_completed(futures):
            try:
                f.result()
            except CodegenError as e:
                raise CodegenError(f"planning {futures[f]}: {e}") from None


def render_recorded(name: str, env=None, out_dir: str = OUT_DIR) -> str:
    """A bundled module printed with the choice its precision record holds, planning
    nothing (benchmarks/scan_mix_probe.py edits a scan printed with ``env``'s filters)."""
    v = next(x for x in VARIANTS if x.name == name)
    rec = precision.read_record(out_dir, name)
    if rec is None:
        raise StalePrecision(f"no precision record of {name} in {out_dir} (run chunkproof gen)")
    return render_variant(precision.apply(v, precision.Choice.from_dict(rec["choice"])), env=env)


def stale(files: Dict[str, str], out_dir: str = OUT_DIR) -> List[str]:
    """Names whose checked-in content differs from ``files`` (or that are missing or extra)."""
    bad = []
    for name, src in files.items():
        path = os.path.join(out_dir, name)
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != src:
            bad.append(name)
    if os.path.isdir(out_dir):
        for name in sorted(os.listdir(out_dir)):
            if name.endswith(".py") and name not in files:
                bad.append(name + " (not generated by any variant)")
    return bad


def write(files: Dict[str, str], out_dir: str = OUT_DIR, prune: bool = True) -> List[str]:
    """Write all files or none: everything is rendered first, each file is replaced
    atomically, and (``prune``) files no variant generates any more are removed."""
    os.makedirs(out_dir, exist_ok=True)
    changed = []
    for name, src in files.items():
        path = os.path.join(out_dir, name)
        if os.path.exists(path) and open(path, encoding="utf-8").read() == src:
            continue
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(src)
        os.replace(tmp, path)
        changed.append(name)
    for name in sorted(os.listdir(out_dir)) if prune else ():
        if name.endswith(".py") and name not in files:
            os.remove(os.path.join(out_dir, name))
            changed.append(name + " (removed)")
    return changed


def user_variants(path: str) -> List[Variant]:
    """The kernels a derivation file declares (derivations/kernel.py), as gen prints them."""
    from chunkproof.derivations.loader import InputError, from_file
    from .variants import BY_NAME, from_kernel
    out = [from_kernel(k, path) for d in from_file(path) for k in d.kernels]
    if not out:
        raise InputError(f"{path}: declares no kernel; add one with chunkproof.derivations.kernel.kernel(D, "
                         f"'chunk_<name>', program, outputs=..., state=..., args=...) (docs/gen.md)")
    clash = [v.name for v in out if v.name in BY_NAME]
    if clash:
        raise InputError(f"{path}: kernel chunk_{clash[0]} has the name of a bundled kernel; name it otherwise")
    return out


def default_out(path: str) -> str:
    """Where `chunkproof gen FILE.py` writes: a package beside the file, <stem>_kernels."""
    stem = os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    return os.path.join(os.path.dirname(os.path.abspath(path)), f"{stem}_kernels")
