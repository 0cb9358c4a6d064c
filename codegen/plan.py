"""From a variant to kernel stages: check the verdicts, split the definitions.

The state S_[t]^C and outputs O_[t] are taken from the variant's two forward claims
(their right-hand sides, not the program's own lines), and the definitions they read
come from the claims' program.  A claim's "holds" covers the definitions it reads,
since the checker evaluates them against the unrolled recurrence.

Stages (DESIGN.md "Code generation"):
- intra: definitions that need a triangular inverse, the chunk's prefix products of
  the gates (CumProd), and what they read.  They do not depend on the state, so they
  run for all chunks in parallel; the ones the scan reads are written to memory
  ("boundary" tiles; gate products as their log, in fp32).
- state: sequential over chunks, one program per (batch*head, V block): what
  S_[t]^C needs, with the state carried in registers; it writes S_[t-1]^C per chunk.
- out: what O_[t] needs, for all chunks in parallel, reading S_[t-1]^C.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation, Program
from chunkproof.derivations.latex import to_latex
from chunkproof.derivations.loader import bundled
from chunkproof.verify.check import check as verify_claim
from .hoist import hoist
from .printer import CodegenError
from .variants import Variant


class Refused(CodegenError):
    """The generator will not print a kernel from a claim that does not hold."""


def var_names(e: ir.Expr) -> Set[str]:
    """The tiles ``e`` reads; a recurrence's parameters (ir.Param) are not tiles: each
    kernel binds them itself (param_names, derivations/kernel.py ParamBinding)."""
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Var) and not isinstance(n, ir.Param)}


def param_names(e: ir.Expr) -> Set[str]:
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Param)}


def param_bindings(deriv: Derivation, module: str) -> dict:
    """name -> ParamBinding of kernel ``module`` (its declaration's params in ``deriv``)."""
    for k in deriv.kernels:
        if k.module == module:
            return {p.name: p for p in k.params}
    return {}


@dataclass(frozen=True)
class StageNames:
    """The definitions a forward kernel computes and the boundary tiles it reads."""
    computes: List[str]
    reads: List[str]


@dataclass
class Plan:
    variant: Variant
    deriv: Derivation
    program: Program
    claims: Dict[str, Claim]                 # 'O' / 'S' -> claim printed from
    defs: List[Tuple[str, ir.Expr]]          # in program order, S and O from the claims
    inputs: List[str]                        # tile names of the recurrence inputs
    intra: List[str] = field(default_factory=list)
    boundary: List[str] = field(default_factory=list)
    logs: Set[str] = field(default_factory=set)     # boundary tiles written as their log (gate products)
    sums: Set[str] = field(default_factory=set)     # boundary tiles that are prefix sums (fp32, rows clamped)
    hoisted: Set[str] = field(default_factory=set)  # the state scan's gated operands (codegen/hoist.py; fp32)
    diagonal: Set[str] = field(default_factory=set)
    wide: List[str] = field(default_factory=list)        # boundary tiles the intra wide kernel writes
    intra_wide: List[str] = field(default_factory=list)  # the definitions it computes
    state_stage: Optional[StageNames] = None   # the state scan
    out_stage: Optional[StageNames] = None     # the output kernel

    @property
    def intra_writes(self) -> list:
        """The boundary tiles the intra kernel writes: all of them but the wide kernel's."""
        return [n for n in self.boundary if n not in self.wide]

    @property
    def param_logs(self) -> list:
        """The per-head parameters the wrapper passes as their logs ([H] fp32), in name order."""
        return [p for _, p in sorted(param_bindings(self.deriv, self.variant.name).items()) if p.kind == "head_log"]

    @property
    def param_log_tiles(self) -> list:
        """What the kernels read the per-head parameters' logs as (in_<name>_log, fp32)."""
        return [f"{p.name}_log" for p in self.param_logs]

    @property
    def param_args(self) -> list:
        """The parameters passed as tensor arguments (after the tiles'), in declaration order."""
        return [p for p in param_bindings(self.deriv, self.variant.name).values() if p.kind == "head_arg"]

    @property
    def param_arg_names(self) -> list:
        return [p.name for p in self.param_args]

    @property
    def param_args_spec(self) -> str:
        return repr(tuple((p.name, "param_k") for p in self.param_args))


def _claim(deriv: Derivation, cid: str) -> Claim:
    for c in deriv.claims:
        if c.id == cid:
            return c
    raise CodegenError(f"derivation {deriv.name} has no claim {cid!r}")


def gate(deriv: Derivation, claims, checker=None):
    """Refuse unless every claim holds.  ``checker`` defaults to verify.check.check."""
    checker = checker or verify_claim
    for c in claims:
        r = checker(deriv, c, floats=False, diagnose=False)
        if r.verdict != "holds":
            why = f": {r.message}" if r.message else ""
            raise Refused(f"claim {c.id} ({c.citation}) {r.verdict}{why}; "
                          f"no kernel is printed from a claim that does not hold")


def _strictly_lower(e: ir.Expr, diag: Set[str]) -> bool:
    if isinstance(e, ir.Mask):
        return e.kind == "M-1"
    if isinstance(e, ir.MatMul):
        return ((_is_diag(e.a, diag) and _strictly_lower(e.b, diag))
                or (_strictly_lower(e.a, diag) and _is_diag(e.b, diag)))
    if isinstance(e, ir.Scale):
        return _strictly_lower(e.b, diag)
    if isinstance(e, ir.Neg):
        return _strictly_lower(e.a, diag)
    if isinstance(e, (ir.Add, ir.Sub)):
        return _strictly_lower(e.a, diag) and _strictly_lower(e.b, diag)
    return False


def _is_diag(e: ir.Expr, diag: Set[str]) -> bool:
    return isinstance(e, (ir.DiagM, ir.Eye)) or (isinstance(e, ir.Var) and e.name in diag)


def unit_lower(e: ir.Expr, defs: Dict[str, ir.Expr], diag: Set[str]) -> bool:
    """A structural proof that ``e`` is I + (strictly lower triangular)."""
    if isinstance(e, ir.Var) and e.name in defs:
        return unit_lower(defs[e.name], defs, diag)
    return isinstance(e, ir.Add) and isinstance(e.a, ir.Eye) and _strictly_lower(e.b, diag)


def build(v: Variant, deriv: Derivation, check=True, checker=None) -> Plan:
    prog = deriv.programs.get(v.program)
    if prog is None:
        raise CodegenError(f"derivation {deriv.name} has no program {v.program!r}")
    oc, sc = _claim(deriv, v.out_claim), _claim(deriv, v.state_claim)
    for c, what, want in ((oc, "outputs", "outs"), (sc, "state", "state")):
        if c.kind != "forward" or not isinstance(c.lhs, ir.Truth) or c.lhs.what != want or c.over:
            raise CodegenError(f"claim {c.id} is not a whole-chunk forward claim of the {what}")
        if c.program != v.program:
            raise CodegenError(f"claim {c.id} is about program {c.program}, not {v.program}")
        if c.assume:
            raise CodegenError(f"claim {c.id} assumes {', '.join(c.assume)}; a kernel cannot")
    if check:
        gate(deriv, [oc, sc], checker)
    rec = deriv.recurrences[deriv.program_recurrence[prog.name]]
    inputs = [i.seq for i in rec.inputs]
    missing = [t for t in inputs if t not in v.tile_of()]
    if missing:
        raise CodegenError(f"variant {v.name}: recurrence inputs {missing} have no argument")

    final = {}
    for name, c in ((prog.output, oc), (prog.state, sc)):
        rhs = c.rhs
        if isinstance(rhs, ir.Var) and rhs.name == name:   # the claim states the program's own line
            rhs = prog.expr(name)
        if name in var_names(rhs):
            raise CodegenError(f"claim {c.id}: the right-hand side reads {name} itself")
        final[name] = rhs
    needed: Set[str] = set()

    def need(e):
        for n in var_names(e):
            if n in needed or n in inputs or n == "S_prev":
                continue
            d = prog.expr(n)
            if d is None:
                raise CodegenError(f"program {prog.name}: {n} is read but never defined")
            needed.add(n)
            need(d)
    for e in final.values():
        need(e)
    defs = [(n, final.get(n, e)) for n, e in prog.defs if n in needed or n in final]
    plan = Plan(v, deriv, prog, {"O": oc, "S": sc}, defs, inputs)
    binds = param_bindings(deriv, v.name)
    for n, e in defs:
        for pn in sorted(param_names(e) - set(binds)):
            raise CodegenError(f"program {prog.name}: {n} reads parameter {pn}, which kernel {v.func} does "
                               f"not bind (kernel(..., params=dict({pn}=per_head_log(...), const(...) or "
                               f"head_arg(grad=...))), derivations/kernel.py)")
    plan.diagonal = {n for n, e in defs if isinstance(e, ir.DiagM)}

    dmap = dict(defs)
    heavy: Set[str] = set()
    for n, e in defs:
        stateful = "S_prev" in _closure(n, dmap)
        if _dense_inverses(e, plan.diagonal) and stateful:
            raise CodegenError(f"program {prog.name}: {n} needs a triangular inverse and the state; "
                               f"the intra stage cannot compute it")
        if not stateful and (_dense_inverses(e, plan.diagonal) or var_names(e) & heavy):
            heavy.add(n)
    # a chunk's prefix products of the gates: a scan along the chunk that every stage
    # would repeat (on the GPU it cost the state scan a third of its time); the intra
    # stage computes it once and writes its log.  What reads it is not made heavy.
    prods = {n for n, e in defs if isinstance(e, ir.CumProd) and "S_prev" not in _closure(n, dmap)}
    # the same for a prefix sum along the chunk (a log-space gate's cumsum): in the state
    # scan it cost simple GLA's 559 us against RetNet's 110 (H200, docs/measurements.md)
    sums = {n for n, e in defs if isinstance(e, ir.CumSum) and "S_prev" not in _closure(n, dmap)}
    cum = prods | sums
    stored = heavy | cum
    # the scan's gated operands are computed by the intra kernel (codegen/hoist.py)
    gates = {n for n in cum if dmap[n].shape()[1] != "1"}
    moved = hoist(final[prog.state], sc, dmap, stored, gates, lambda n: n in dmap or n in inputs)
    if moved:
        if check and moved.claim:
            gate(deriv, [moved.claim], checker)
            plan.claims["S"] = moved.claim
        final[prog.state] = moved.rhs
        at = [n for n, _ in defs].index(prog.state)
        defs[at] = (prog.state, moved.rhs)
        for n, e in moved.defs:     # right after what it reads: the intra kernel stores it early
            names = [m for m, _ in defs]
            if n not in names:
                defs.insert(max([names.index(m) for m in var_names(e) if m in names], default=-1) + 1, (n, e))
        plan.defs = defs
        dmap = dict(defs)
        plan.hoisted = {n for n, _ in moved.defs}
        stored |= plan.hoisted
    def reach(exprs) -> Set[str]:
        """Definitions a stage computing ``exprs`` reads: recursively, stopping at
        heavy ones and gate products (those are read from memory)."""
        seen: Set[str] = set()

        def walk(e):
            for n in var_names(e):
                if n in dmap and n not in seen:
                    seen.add(n)
                    if n not in stored:
                        walk(dmap[n])
        for e in exprs:
            walk(e)
        return seen
    # a named C x C product that reads no state and that the output reads (RWKV-6's
    # gated Q K^T, Aqk): the output kernel, V-blocked, formed it once per V block and the
    # gradient V kernel again; the intra stage computes it once per chunk and writes it
    # (fp32, like the inverses), and every later kernel reads it
    # one the output's claim leaves unnamed ((Q K^T . M) inside O) is named first, as the
    # scan's operands are (ch0, ch1, ...; the same expression, so the claim is unchanged)
    named_out, new = _name_chunk_products(final[prog.output], dmap, gates, lambda n: n in dmap or n in inputs)
    if new:
        final[prog.output] = named_out
        at = [n for n, _ in defs].index(prog.output) if prog.output in dmap else len(defs)
        defs[at:at] = new
        if prog.output in dmap:
            defs[at + len(new)] = (prog.output, named_out)
        plan.defs = defs
        dmap = dict(defs)
    chunk_products = {n for n in reach([final[prog.output]]) if n not in stored and dmap[n].shape() == ("C", "C")
                      and "S_prev" not in _closure(n, dmap) and has_product(dmap[n])}
    stored |= chunk_products
    scan_needed = reach(final.values())
    order = [n for n, _ in defs]

    def stage(name):
        got = reach([final[name]])
        return StageNames([n for n in order if n in got and n not in stored], [n for n in order if n in got and n in stored])
    plan.state_stage, plan.out_stage = stage(prog.state), stage(prog.output)
    # a chunk's triangular inverse (the WY inverse, DPLR's E) is written too when the
    # variant has a backward: the backward's kernels read it instead of inverting again
    inverses = {n for n, e in defs if isinstance(e, ir.Inv) and n in heavy and e.shape() == ("C", "C")} \
        if v.backward else set()
    plan.boundary = [n for n, _ in defs if n in stored and (n in scan_needed or n in inverses)]
    plan.logs = {n for n in plan.boundary if n in prods}
    plan.sums = {n for n in plan.boundary if n in sums}
    for n in plan.boundary:
        rows, cols = dmap[n].shape()
        if rows != "C" or cols not in (("Dk", "Dv", "1") if n in cum else ("Dk", "Dv", "C")
                                       if n in inverses | chunk_products else ("Dk", "Dv")):
            raise CodegenError(f"program {prog.name}: {n} ({rows}x{cols}) would cross stages; only "
                               f"C x Dk and C x Dv tiles (and C x 1 gate products, C x C inverses) are "
                               f"written between kernels")
    plan.wide, plan.intra_wide = _split_wide(plan, dmap, heavy, cum)
    intra = set(plan.intra_writes).union(*(_closure(n, dmap) for n in plan.intra_writes))
    plan.intra = [n for n, _ in defs if n in intra]
    for n in list(plan.intra) + [n for n, _ in defs if n in scan_needed and n not in stored]:
        for sub in _dense_inverses(dmap[n], plan.diagonal):
            if not unit_lower(sub.a, dmap, plan.diagonal):
                raise CodegenError(f"program {prog.name}: {n} inverts a matrix that is not provably "
                                   f"I + strictly lower triangular")
    return plan


def _split_wide(plan: Plan, dmap, heavy, cum):
    """(the boundary tiles, the definitions) of the intra stage's second kernel, or
    ([], []).  Where a C x Dk or C x Dv boundary tile applies a chunk's triangular inverse
    (the WY tiles W and U), one kernel holding the inverse's work and every C x D product
    ran at 255 registers with spills and two programs per SM (Gated DeltaNet, KDA, DPLR
    on the H200); the first kernel then writes the C x C and gate-prefix tiles and the
    second forms every non-prefix C x D boundary tile from them.  The second recomputes
    no inverse and no C x C product over a head dimension (else no split).  Mutates
    plan.defs and plan.boundary where it names such a product."""
    inverses = {n for n in plan.boundary if n in heavy and dmap[n].shape() == ("C", "C")}
    wide = [n for n in plan.boundary if dmap[n].shape()[1] in ("Dk", "Dv") and n not in cum]
    if not inverses or not any(_closure(n, dmap) & inverses for n in wide):
        return [], []
    need = _wide_needs(wide, dmap, set(plan.boundary) - set(wide))
    # a C x C product over a head dimension in a wide tile (DPLR's C = -E (B K^T . M) V)
    # is named (ch<i>, the same expression) and formed by the first kernel
    for n in [n for n, _ in plan.defs if n in need and any(_chunk_gram(x) for x in ir.walk(dmap[n]))]:
        named, new = _name_chunk_products(dmap[n], dmap, None, lambda m: m in dmap or m in plan.inputs)
        if new:
            at = [m for m, _ in plan.defs].index(n)
            plan.defs[at:at + 1] = new + [(n, named)]
            dmap.update(plan.defs)
            fresh = {m for m, _ in new}
            plan.boundary = [m for m, _ in plan.defs if m in fresh or m in plan.boundary]
    need = _wide_needs(wide, dmap, set(plan.boundary) - set(wide))
    if any(_dense_inverses(dmap[n], plan.diagonal) or any(_chunk_gram(x) for x in ir.walk(dmap[n])) for n in need):
        return [], []
    return wide, [n for n, _ in plan.defs if n in need]


def _wide_needs(wide, dmap, first) -> Set[str]:
    """The definitions the wide kernel computes to form ``wide``, reading ``first``."""
    need: Set[str] = set(wide)
    todo = list(wide)
    while todo:
        for m in var_names(dmap[todo.pop()]):
            if m in dmap and m not in first and m not in need:
                need.add(m)
                todo.append(m)
    return need


def _chunk_gram(x) -> bool:
    """Whether ``x`` is a C x C product over the head dimension (Q K^T and the like)."""
    return isinstance(x, ir.MatMul) and x.shape() == ("C", "C") and x.a.shape()[1] in ("Dk", "Dv")


def _name_chunk_products(e, dmap, gates, taken):
    """``e`` with every maximal C x C subexpression that holds a product, reads no state
    and reads one of ``gates`` (C x Dk gate tiles: a product with an exp per channel,
    worth forming once; a scalar-gated one is a plain product, cheaper to form again than
    to read in fp32; None: any) replaced by a tile ch<i>, and the new definitions
    [(name, expression)]."""
    found: Dict[ir.Expr, str] = {}

    def free(x) -> bool:
        names = var_names(x)
        reads = names.union(*(_closure(n, dmap) for n in names if n in dmap))
        return "S_prev" not in reads and (gates is None or bool(reads & gates))

    def sub(x):
        if x.shape() == ("C", "C") and not isinstance(x, ir.Var) and has_product(x) and free(x):
            if x not in found:
                found[x] = next(f"ch{j}" for j in range(len(found), len(found) + 100) if not taken(f"ch{j}"))
            return ir.Var(found[x], "C", "C", "(" + to_latex(x) + ")")
        return x if isinstance(x, ir.Var) else x.map_children(sub)
    out = sub(e)
    return out, [(n, x) for x, n in found.items()]


def has_product(e) -> bool:
    """Whether ``e`` holds a matrix product."""
    return any(isinstance(x, ir.MatMul) for x in ir.walk(e))


def _dense_inverses(e, diag):
    """The inverses in ``e`` of matrices that are not diagonal."""
    return [i for i in ir.walk(e) if isinstance(i, ir.Inv) and not _is_diag(i.a, diag)]


def _closure(name, dmap) -> Set[str]:
    """Every name the definition of ``name`` reads, through the definitions in dmap."""
    seen: Set[str] = set()
    todo = [name]
    while todo:
        for m in var_names(dmap[todo.pop()]) - seen:
            seen.add(m)
            if m in dmap:
                todo.append(m)
    return seen


def derivation_of(v: Variant) -> Derivation:
    """The derivation that declares ``v``: a bundled module, or a user's file."""
    if v.derivation.endswith(".py"):
        from chunkproof.derivations.loader import from_file
        ds = from_file(v.derivation)
    else:
        ds = bundled([v.derivation])
    for d in ds:
        if any(k.module == v.name for k in d.kernels):
            return d
    return ds[0]


def load_variant(v: Variant, check=True) -> Plan:
    return build(v, derivation_of(v), check=check)


def _full_adj(e, name):
    """e is the whole adjoint of tile `name` (no "via"/"excl" restriction)."""
    return isinstance(e, ir.Adj) and e.var.name == name and not e.via and not e.excl


def backward_claims(v: Variant, deriv: Optional[Derivation] = None, check=True, checker=None):
    """The variant's backward claims (Variant.backward), checked: each names the right
    adjoint (the recursion of delta S, delta S_[t-1] in full, one whole gradient per
    argument, gates in log space: delta alpha . alpha), reads the kernel's own program,
    and holds.  Returns {'dS', 'dS_prev', 'grads': {arg: claim}, 'inner': [claims]}."""
    if deriv is None:
        deriv = derivation_of(v)
    from .backward_pick import resolve   # the claims the declaration leaves to pick
    v, _ = resolve(v, deriv, check=check)
    spec = v.backward
    prog = deriv.programs.get(v.program)
    if prog is None:
        raise CodegenError(f"derivation {deriv.name} has no program {v.program!r}")
    out = {"dS": _claim(deriv, spec["dS"]), "dS_prev": _claim(deriv, spec["dS_prev"]), "grads": {},
           "inner": [_claim(deriv, c) for c in spec.get("inner", [])]}
    if not _full_adj(out["dS"].lhs, prog.state):
        raise CodegenError(f"claim {out['dS'].id} should give the whole adjoint of {prog.state}")
    if not _full_adj(out["dS_prev"].lhs, "S_prev"):
        raise CodegenError(f"claim {out['dS_prev'].id} should give the whole adjoint of S_[t-1]")
    for a in v.args:
        cid = spec["grads"].get(a.name)
        if cid is None:
            raise CodegenError(f"variant {v.name}: no gradient claim for argument {a.name} "
                               f"(codegen/variants.py backward['grads'])")
        c = _claim(deriv, cid)
        lhs = c.lhs
        if a.kind.startswith("gate"):
            ok = isinstance(lhs, ir.Had) and _full_adj(lhs.a, a.tile) and lhs.b == lhs.a.var
            want = f"delta {a.tile} . {a.tile} (the log gate's gradient)"
        else:
            ok = _full_adj(lhs, a.tile)
            want = f"the whole adjoint of {a.tile}"
        if not ok:
            raise CodegenError(f"claim {cid} is listed as the gradient of {a.name} but does not give {want}")
        out["grads"][a.name] = c
    unknown = set(spec["grads"]) - {a.name for a in v.args}
    if unknown:
        raise CodegenError(f"variant {v.name}: gradient claims for unknown arguments {sorted(unknown)}")
    out["param_grads"] = {}
    for pb in param_bindings(deriv, v.name).values():
        if pb.kind != "head_arg":
            continue
        c = _claim(deriv, pb.grad)
        lhs = c.lhs
        if not (isinstance(lhs, ir.Adj) and lhs.var.name == pb.name and isinstance(lhs.var, ir.Param)
                and c.blocks == "all"):
            raise CodegenError(f"claim {pb.grad} is named as the gradient of parameter {pb.name}, but does not "
                               f"give chunk t's part of its adjoint (every chunk, blocks='all')")
        out["param_grads"][pb.name] = c
    claims = [out["dS"], out["dS_prev"], *out["grads"].values(), *out["inner"], *out["param_grads"].values()]
    for c in claims:
        if c.program != v.program:
            raise CodegenError(f"claim {c.id} is about program {c.program}, not the kernel's {v.program}")
    if check:
        gate(deriv, claims, checker)
    return out
