"""Programs are checked, not trusted.

A claim's definitions (←Q, →K, W, ...) come from its program, and adjoints of
intermediates are taken through that program, so a wrong program with a backward
consistent with it would pass every such claim.  Each program (other than a
recurrence's own step program, which is the truth) is therefore checked once: its
output tile O and state S in every chunk, exactly, against the unrolled recurrence, at
the exact level's size sets (several chunks, a nonzero initial state).  Claims whose
program assumes S_[-1] = 0 (every claim on it says ``assume: zero_initial_state``)
are checked that way.  The result is a report entry of kind 'program', id
``<program>.reproduces``, and a claim that reads a program failing its check is
reported as failing, naming the program and, where one can be found, the first
definition that differs from an independent value (``locate``).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Citation, Claim, Derivation, Program
from chunkproof.derivations.loader import InputError
from .levels import (FLOAT_SIZES, Mismatch, Result, exact_once, float_error, parse_sizes,
                     smallest_failure, use_sizes)
from .evaluate import BlockEval, EvalError, Point, UndefinedFormula
from .fields import ModP, ZeroDivision
from .residual import sympy_residual
from .sites import sites

KIND = "program"
ZERO = "zero_initial_state"
SUFFIX = ".reproduces"


# ------------------------------------------------------------------ which programs
def is_truth(deriv: Derivation, prog: Program) -> bool:
    """A recurrence's own step program is the ground truth: nothing to check."""
    return any(r.program is prog for r in deriv.recurrences.values())


def checked_programs(deriv: Derivation) -> List[Program]:
    return [p for p in deriv.programs.values() if not is_truth(deriv, p)]


def zero_init_only(deriv: Derivation, prog: Program) -> bool:
    """A program whose every claim assumes S_[-1] = 0 is checked from a zero state."""
    cs = [c for c in deriv.claims if c.program == prog.name and c.kind != KIND]
    return bool(cs) and all(ZERO in c.assume for c in cs)


def _tile(prog, name):
    r, c = prog.expr(name).shape()
    return ir.Var(name, r, c)


def _leaves(prog, name):
    """Every name the definition reads, through the definitions it reads."""
    names = set(prog.names())
    out, todo, seen = set(), [name], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for v in _nodes(prog.expr(n)):
            if isinstance(v, ir.Var):
                out.add(v.name)
                if v.name in names:
                    todo.append(v.name)
    return out


def seed_tiles(prog):
    """O or S read the loss seed dO: such a tile is not a forward quantity (the
    objective programs of note 002 set O = L dO / (dO^T dO) so that the checker's loss
    is the note's objective) and is not compared with the recurrence."""
    return [n for n in (prog.output, prog.state) if "dO" in _leaves(prog, n)]


def tile_claims(deriv: Derivation, prog: Program, zero: bool):
    """The program's check as forward claims, O and S against the recurrence, so that
    the exact level, smallest sizes, residual and float64 level apply as to any
    claim (a tile that reads the loss seed is left out: ``seed_tiles``)."""
    chunk = prog.block == "chunk"
    rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
    truths = {prog.output: ir.Truth("outs") if chunk else ir.Truth("out", "t"),
              prog.state: ir.Truth("state", "t*C+C" if chunk else "t")}
    cite = Citation(_note(deriv, prog), f"program {prog.name}", 0)
    out = []
    for name in (prog.output, prog.state):
        if name in seed_tiles(prog):
            continue
        out.append(Claim(id=f"{prog.name}{SUFFIX}:{name}", citation=cite, latex="", kind="forward",
                         lhs=truths[name], rhs=_tile(prog, name), program=prog.name,
                         assume=(ZERO,) if zero else (), derivation=deriv.name, recurrence=rec))
    return out


def _note(deriv, prog):
    notes = [c.citation.note for c in deriv.claims if c.program == prog.name and c.kind != KIND]
    return notes[0] if notes else deriv.note


def _tex_text(name: str) -> str:
    # inside \text{} an underscore starts a subscript, which LaTeX (and KaTeX) refuse
    return name.replace("_", r"\_")


def program_entry(deriv: Derivation, prog: Program) -> Claim:
    """The report's entry for a program's check (kind 'program')."""
    rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
    zero = zero_init_only(deriv, prog)
    start = "S_[-1] = 0, as every claim on it assumes" if zero else "a nonzero S_[-1]"
    block = "chunk" if prog.block == "chunk" else "step"
    what = f"O and S of every {block} equal the unrolled recurrence {rec} ({start})"
    cite = Citation(_note(deriv, prog), f"program {prog.name}", 0, what=what)
    return Claim(id=prog.name + SUFFIX, citation=cite,
                 latex=rf"\text{{program {_tex_text(prog.name)}: O and S = recurrence {_tex_text(rec)}}}",
                 kind=KIND,
                 lhs=ir.Truth("outs" if prog.block == "chunk" else "out", "" if prog.block == "chunk" else "t"),
                 rhs=_tile(prog, prog.output), program=prog.name,
                 assume=(ZERO,) if zero else (), derivation=deriv.name, recurrence=rec)


def with_program_entries(derivs):
    """Copies of the derivations with a program entry ahead of each one's claims
    (the derivations themselves are shared and left as they are)."""
    out = []
    for d in derivs:
        have = {c.id for c in d.claims}
        extra = [program_entry(d, p) for p in checked_programs(d) if p.name + SUFFIX not in have]
        out.append(dataclasses.replace(d, claims=extra + list(d.claims)) if extra else d)
    return out


def prepare(derivs, sizes_text=""):
    """What `report` and `verify` run before checking: the ``--sizes`` option (an
    InputError for a bad value) and the program entries."""
    if sizes_text:
        try:
            use_sizes(parse_sizes(sizes_text))
        except ValueError as e:
            raise InputError(f"--sizes: {e}") from None
    return with_program_entries(derivs)


# ------------------------------------------------------------------ the check
@dataclass
class ProgramCheck:
    program: str
    verdict: str                      # holds | fails | ill-formed | error
    zero: bool                        # checked from S_[-1] = 0
    evidence: str = ""
    tile: str = ""                    # the first of O, S that differs
    mismatch: Optional[Mismatch] = None
    sizes: object = None              # where it differs
    message: str = ""
    located: str = ""                 # what `locate` found


_CACHE: Dict[tuple, tuple] = {}
_BUSY = set()   # checks under way: localising one program may check its siblings


def program_check(deriv: Derivation, prog: Program, zero: bool, sets, trials=1, seed=0) -> ProgramCheck:
    """O and S against the recurrence, one point per size set (cached per process:
    every claim on a program asks)."""
    key = (id(prog), prog.name, zero, tuple(sets), trials, seed)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit[1]
    _BUSY.add(key)
    try:
        res = _program_check(deriv, prog, zero, sets, trials, seed)
    finally:
        _BUSY.discard(key)
    _CACHE[key] = (prog, res)   # the program is kept alive so that its id is not reused
    return res


def _program_check(deriv, prog, zero, sets, trials, seed):
    tiles = tile_claims(deriv, prog, zero)
    start = "S_[-1] = 0" if zero else "nonzero S_[-1]"
    tried = []
    k = 0
    try:
        for sizes in sets:
            for _ in range(trials):
                k += 1
                for tc in tiles:
                    m = exact_once(deriv, tc, sizes, seed + k)
                    if m is not None:
                        tried.append(f"{tc.rhs.name} differs at {sizes}")
                        pc = ProgramCheck(prog.name, "fails", zero, mismatch=m, sizes=sizes,
                                          tile=tc.rhs.name)
                        pc.evidence = f"exact GF(2^31-1), {start}, {k} point(s): " + "; ".join(tried)
                        pc.located = locate(deriv, prog, zero, sizes, seed + k,
                                            _siblings(deriv, prog, zero, sets, trials, seed))
                        pc.message = _failure_text(pc)
                        return pc
            tried.append(f"{trials} at {sizes}")
    except (ir.ShapeError, UndefinedFormula) as e:
        return ProgramCheck(prog.name, "ill-formed", zero, message=f"program {prog.name}: {e}")
    except (EvalError, ZeroDivision) as e:
        return ProgramCheck(prog.name, "error", zero, message=f"program {prog.name}: {e}")
    which = " and ".join(t.rhs.name for t in tiles)
    skipped = seed_tiles(prog)
    left = (f" ({' and '.join(skipped)}: reads the loss seed dO, not a forward quantity, not compared)"
            if skipped else "")
    return ProgramCheck(prog.name, "holds", zero,
                        evidence=f"exact GF(2^31-1), {which} of every block{left}, {start}, "
                                 f"{k} point(s): " + "; ".join(tried))


def _failure_text(pc: ProgramCheck):
    m = pc.mismatch
    what = "outputs" if pc.tile != "S" else "state"
    ent = ", ".join(f"[{i},{j}]" for i, j in m.entries[:4])
    s = (f"program {pc.program} does not reproduce its recurrence: {pc.tile} differs from the "
         f"recurrence's {what} at {m.sizes}, chunk t={m.block} (entries {ent})")
    return s + (f"; {pc.located}" if pc.located else "")


# ------------------------------------------------------------------ which claims read it
def _nodes(e):
    """Every node of ``e`` (an adj() node's target tile is not a read of its value)."""
    yield e
    for ch in e.children():
        yield from _nodes(ch)


def _reads_defs(e, names):
    return {n.name for n in _nodes(e) if isinstance(n, ir.Var) and n.name in names}


def _through_recurrence(a: ir.Adj, prog: Program) -> bool:
    """Adjoint targets whose true value does not depend on the program's definitions:
    an input or S_[t-1] as the lhs of an adjoint claim (taken through the recurrence),
    and the block's output and state (δO, δS_[t]: the loss after the block)."""
    if a.via or a.excl:
        return False
    return a.var.name in (prog.state, prog.output)


def reads_program(claim: Claim, prog: Program) -> bool:
    """Whether a claim's value depends on the program's definitions: a formula reads a
    definition, or an adjoint is taken through the program (every adj() inside a
    formula, by reverse mode through the block's definitions, except δO and δS_[t]; an
    adjoint claim's target when it is a definition or a "from X" / "w/o X" part)."""
    names = set(prog.names())
    formulas = [claim.rhs]
    if claim.kind == "adjoint":
        a = claim.lhs
        if not _through_recurrence(a, prog) and (a.via or a.excl or a.var.name in names):
            return True
    else:
        formulas.append(claim.lhs)
    for e in formulas:
        for n in _nodes(e):
            if isinstance(n, ir.Adj) and not _through_recurrence(n, prog):
                return True
            if isinstance(n, ir.Var) and n.name in names:
                return True
    return False


def gate(deriv: Derivation, claim: Claim, res: Result, sets, trials, seed):
    """A claim read through a program that fails its check does not hold."""
    prog = deriv.programs.get(claim.program)
    if prog is None or is_truth(deriv, prog) or not reads_program(claim, prog):
        return
    pc = program_check(deriv, prog, ZERO in claim.assume, sets, trials, seed)
    if pc.verdict == "holds":
        return
    if pc.verdict == "fails":
        why = f"program {prog.name} does not reproduce its recurrence (entry {prog.name}{SUFFIX})"
    else:
        why = f"program {prog.name} cannot be checked ({pc.verdict}: {pc.message})"
    if res.verdict == "holds":
        res.verdict = "fails"
        res.message = (f"{pc.message}; this claim is evaluated through it, and holding there shows "
                       f"nothing" if pc.verdict == "fails" else f"{why}; this claim is evaluated through it")
        res.evidence.append(f"holds through the definitions of {prog.name}; but {why}")
    else:
        res.evidence.append(why)


# ------------------------------------------------------------------ localising
def _superseded(deriv):
    return {c.corrected_of for c in deriv.claims if c.corrected_of}


def _statements(deriv: Derivation, prog: Program, zero: bool):
    """name -> [(source, claim, other side)]: claims of the derivation that give a
    definition a value independent of it.  A forward claim whose formula is the
    definition (its name, or its expression) states it equals a quantity of the
    recurrence.  An identity with the definition on one side states it equals the
    other side, which counts only while it reads no adjoint and only definitions
    found correct before (``locate`` walks in program order).  Literal lines that
    have a correction, claims with index quantifiers, and claims assuming S_[-1] = 0
    at a point that has none, are left out."""
    names = prog.names()
    out: Dict[str, list] = {}
    gone = _superseded(deriv)
    for c in deriv.claims:
        if c.program != prog.name or c.kind not in ("forward", "identity") or c.over or c.id in gone:
            continue
        if ZERO in c.assume and not zero:
            continue
        pairs = [(c.rhs, c.lhs)] if c.kind == "forward" else [(c.rhs, c.lhs), (c.lhs, c.rhs)]
        for side, other in pairs:
            for n in names:
                if (isinstance(side, ir.Var) and side.name == n) or side == prog.expr(n):
                    out.setdefault(n, []).append((c, other))
    return out


def _siblings(deriv, prog, zero, sets, trials, seed):
    """Other programs of the derivation over the same recurrence that reproduce it:
    their definitions of the same name are a last source of comparison."""
    rec = deriv.program_recurrence.get(prog.name)
    out = []
    for p in checked_programs(deriv):
        if p is prog or deriv.program_recurrence.get(p.name) != rec or p.block != prog.block:
            continue
        if (id(p), p.name, zero, tuple(sets), trials, seed) in _BUSY:
            continue
        if program_check(deriv, p, zero, sets, trials, seed).verdict == "holds":
            out.append(p)
    return out


def _cone(prog, name):
    """The definitions ``name`` reads, directly or not."""
    names = set(prog.names())
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        for m in _reads_defs(prog.expr(n), names):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def locate(deriv: Derivation, prog: Program, zero: bool, sizes, seed, siblings=()) -> str:
    """Where in the program it goes wrong, at one point where it does.  Definitions
    are compared, in program order, with every independent value there is: O and S
    with the recurrence, others with the claims that state them (``_statements``) or,
    failing those, with the same-named definition of a sibling program that
    reproduces the recurrence (a name can mean something else there, so this is said).
    The first that differs is named.  A definition with no independent value cannot
    be judged, so the text also says which unjudged definitions could explain every
    difference found, if one definition alone is wrong."""
    order = prog.names()
    stm = _statements(deriv, prog, zero)
    truth = {t.rhs.name: t for t in tile_claims(deriv, prog, zero)}
    for attempt in range(8):
        rng = np.random.default_rng([seed, attempt, 0x10C])
        f = ModP(np.random.default_rng([seed, attempt, 0xD1]))
        rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
        pt = Point.sample(deriv, rec, f, sizes, rng, zero_init=zero)
        try:
            return _locate_at(pt, prog, order, stm, truth, siblings)
        except ZeroDivision:
            continue
        except (EvalError, ir.ShapeError):
            return ""
    return ""


def _same_name(pt, prog, sib, name):
    """False where the sibling's definition of ``name`` differs in some block."""
    f = pt.field
    for b in range(pt.sizes.N if prog.block == "chunk" else pt.sizes.L):
        mine = BlockEval(pt, prog, b).var_value(name)
        theirs = BlockEval(pt, sib, b).var_value(name)
        if f.shape(mine) != f.shape(theirs):
            return None
        if not f.equal(mine, theirs):
            return b
    return -1


def _locate_at(pt, prog, order, stm, truth, siblings=()):
    f = pt.field
    good, differs = set(), []      # differs: (name, against, block)
    for name in order:
        checks = []
        if name in truth:
            checks.append(("the unrolled recurrence", truth[name].lhs, truth[name]))
        for c, other in stm.get(name, ()):
            if any(isinstance(n, ir.Adj) for n in ir.walk(other)):
                continue
            if not _reads_defs(other, set(order)) <= good:
                continue
            checks.append((f"claim {c.id}", other, c))
        if not checks:
            # a sibling's definition, the weakest source, only where no claim speaks
            for sib in siblings:
                if name not in sib.names() or sib.expr(name).shape() != prog.expr(name).shape():
                    continue
                b = _same_name(pt, prog, sib, name)
                src = f"the same-named definition of {sib.name}, which reproduces the recurrence"
                if b is None:
                    continue
                if b >= 0:
                    differs.append((name, src, b))
                    break
                good.add(name)
                break
            continue
        bad = None
        for against, other, c in checks:
            for b, ev, env in sites(pt, c, prog):
                if not f.equal(ev.var_value(name), ev.ev(other, env)):
                    bad = (against, b)
                    break
            if bad:
                break
        if bad is None:
            good.add(name)
        else:
            differs.append((name, bad[0], bad[1]))
    if not differs:
        return ""
    name, against, b = differs[0]
    text = f"first definition that differs: {name} (against {against}, chunk t={b})"
    # a single wrong definition explains a difference only if the differing definition
    # reads it (or is it) and it was not itself found correct
    suspects = None
    for n, _, _ in differs:
        s = ({n} | _cone(prog, n)) - good
        suspects = s if suspects is None else suspects & s
    unjudged = [n for n in order if n in (suspects or set()) and n not in {d[0] for d in differs}]
    if suspects == {name}:
        return text + f"; every definition it reads agrees with an independent value, so the error is in {name}'s own formula"
    if suspects:
        cand = [n for n in order if n in suspects]
        text += (f"; a single wrong definition would be one of {', '.join(cand)}"
                 + (f" ({', '.join(unjudged)} have no independent value to compare with)" if unjudged else ""))
    else:
        text += "; no single definition explains every difference (more than one is wrong)"
    if good:
        text += f"; agree: {', '.join(n for n in order if n in good)}"
    return text


# ------------------------------------------------------------------ the report entry
def check_program_entry(deriv: Derivation, claim: Claim, sets, trials, diagnose, floats, seed) -> Result:
    t0 = time.perf_counter()
    res = Result(claim, "holds")
    prog = deriv.programs.get(claim.program)
    if prog is None:
        res.verdict, res.message = "error", f"unknown program {claim.program!r}"
        return res
    zero = ZERO in claim.assume
    pc = program_check(deriv, prog, zero, sets, trials, seed)
    res.verdict, res.message, res.mismatch = pc.verdict, pc.message, pc.mismatch
    if pc.evidence:
        res.evidence.append(pc.evidence)
    if pc.verdict == "fails" and not zero and any(ZERO in c.assume for c in deriv.claims
                                                  if c.program == prog.name):
        z = program_check(deriv, prog, True, sets, trials, seed)
        res.evidence.append(f"with S_[-1] = 0 (assumed by some of its claims): {z.verdict}")
    tiles = tile_claims(deriv, prog, zero)
    if pc.verdict == "fails" and diagnose:
        tc = next(t for t in tiles if t.rhs.name == pc.tile)
        small, m2 = smallest_failure(deriv, tc)
        if small is not None:
            res.smallest, res.mismatch = str(small), m2
            res.residual = sympy_residual(deriv, tc, small)
            if res.residual:
                res.evidence.append(f"sympy residual of {pc.tile} at {small}")
    if floats and tiles and pc.verdict in ("holds", "fails"):   # tiles: none if O and S read dO
        try:
            res.float_error = max(float_error(deriv, t) for t in tiles)
            res.evidence.append(f"float64 at {FLOAT_SIZES}: rel. error {res.float_error:.1e}")
        except (EvalError, ZeroDivision, ir.ShapeError) as e:
            res.evidence.append(f"float64 at {FLOAT_SIZES}: not evaluated ({e})")
    res.seconds = time.perf_counter() - t0
    return res
