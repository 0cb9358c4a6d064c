"""Derived adjoints are checked before they are shown.

derivations/reverse.py writes the backward of a chunk program symbolically; here each
line becomes a claim (kind 'adjoint'; a parameter's gradient over all chunks, like
every such claim, kind 'identity') and is decided exactly over GF(p) by the checker's
own test: the line's formula, paired with a random direction, against the JVP of the
loss through the unrolled recurrence.  A line that does not hold is a bug of reverse
mode or of the simplifier, raised as :class:`DerivedAdjointError`, never output.

All lines are decided at shared points (one per size set and seed): the point's
trajectory and true adjoints are computed once, not once per line, which is what
keeps `chunkproof derive` within seconds.  The claims are the checker's own, so
`chunkproof verify` on the emitted file decides them again by the usual route.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Sequence

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Citation, Claim, Derivation, Program
from chunkproof.derivations.latex import to_latex
from chunkproof.derivations.loader import InputError
from chunkproof.derivations.reverse import Backward, DeriveError, derive_adjoints
from .evaluate import EvalError, Point
from .fields import ModP, ZeroDivision
from .levels import jvp_loss, size_sets
from .programs import ZERO, is_truth, program_check, zero_init_only
from .sites import sites

SECTION = "derived backward"
_VERIFIED = {}


class DerivedAdjointError(Exception):
    """A derived line does not hold, or cannot be evaluated: a bug, not a result."""


@dataclass
class Checked:
    """A derived backward and the evidence that every line of it holds."""
    deriv: Derivation
    program: Program
    backward: Backward
    claims: List[Claim]
    evidence: str = ""
    points: int = 0
    seconds: float = 0.0
    derive_seconds: float = 0.0
    sizes: List[str] = field(default_factory=list)


def claim_id(prog: Program, eq) -> str:
    return f"{prog.name}.{eq.id}"


def to_claims(deriv: Derivation, prog: Program, bw: Backward) -> List[Claim]:
    """One claim per equation, on the program it was derived from."""
    zero = (ZERO,) if zero_init_only(deriv, prog) else ()
    rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
    out = []
    for eq in bw.equations:
        cite = Citation(deriv.note, f"{SECTION} of {prog.name}", 0, 0,
                        eq.what or f"derived: {eq.role.replace('_', ' ')}")
        out.append(Claim(id=claim_id(prog, eq), citation=cite,
                         latex=f"{to_latex(eq.lhs)} = {to_latex(eq.rhs)}", kind=eq.kind,
                         lhs=eq.lhs, rhs=eq.rhs, program=prog.name, blocks=eq.blocks,
                         assume=zero, derivation=deriv.name, recurrence=rec))
    return out


def _program(deriv: Derivation, program) -> Program:
    prog = deriv.programs.get(program) if isinstance(program, str) else program
    if prog is None:
        chunk = [p.name for p in deriv.programs.values() if p.block == "chunk"]
        raise InputError(f"{deriv.source or deriv.name}: no program {program!r} "
                         f"(chunk programs: {', '.join(chunk) or 'none'})")
    return prog


def derive_checked(deriv: Derivation, program, sets=None, seeds: Sequence[int] = (0,),
                   full: bool = False) -> Checked:
    """The derived backward of ``program``, every line decided exactly at each size set
    of ``sets`` (default: the exact level's) and seed.  ``full`` also decides each line
    on its own by the report's route (verify.check: fresh points per line, the float64
    level).  Raises InputError when the program cannot be derived (a refused construct,
    a program that does not reproduce its recurrence) and DerivedAdjointError when a
    derived line does not hold."""
    prog = _program(deriv, program)
    if is_truth(deriv, prog):
        raise InputError(f"{prog.name} is a recurrence's step program, the ground truth; "
                         f"derive works on chunk programs")
    t0 = time.perf_counter()
    try:
        bw = derive_adjoints(deriv, prog)
    except DeriveError as e:
        raise InputError(f"{deriv.source or deriv.name}: {e}") from None
    except ir.ShapeError as e:   # the definitions were validated: this formula is reverse mode's
        raise DerivedAdjointError(f"program {prog.name}: reverse mode built an ill-formed "
                                  f"formula ({e}): a bug, not a result") from None
    t1 = time.perf_counter()
    sets = size_sets(sets)
    zero = zero_init_only(deriv, prog)
    pc = program_check(deriv, prog, zero, sets)
    if pc.verdict != "holds":
        raise InputError(f"{deriv.source or deriv.name}: program {prog.name} {pc.verdict}: "
                         f"{pc.message or 'it does not reproduce its recurrence'}; a backward "
                         f"derived from it would be the backward of something else")
    claims = to_claims(deriv, prog, bw)
    done = []
    for sizes in sets:
        for seed in seeds:
            _decide_all(deriv, prog, claims, sizes, seed, zero)
            done.append(str(sizes))
    out = Checked(deriv, prog, bw, claims, points=len(done), derive_seconds=t1 - t0)
    out.sizes = list(dict.fromkeys(done))
    out.evidence = (f"every line holds exactly over GF(2^31-1) at {len(done)} point(s) "
                    f"({'; '.join(out.sizes)}; seeds {', '.join(map(str, seeds))})")
    if full:
        worst = _full_check(deriv, claims, sets, seeds[0])
        out.evidence += ("; and line by line as the report decides claims"
                         + (f" (float64 rel. error at most {worst:.1e})" if worst is not None else ""))
    out.seconds = time.perf_counter() - t0
    return out


def _full_check(deriv, claims, sets, seed):
    from .check import check
    worst = None
    for c in claims:
        r = check(deriv, c, sets, diagnose=False, floats=True, seed=seed)
        if r.verdict != "holds":
            raise DerivedAdjointError(f"derived line {c.id} {r.verdict} by the report's check: "
                                      f"{r.message or '; '.join(r.evidence)}")
        if r.float_error is not None:
            worst = r.float_error if worst is None else max(worst, r.float_error)
    return worst


def _decide_all(deriv, prog, claims, sizes, seed, zero):
    rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
    for attempt in range(8):
        # the field's own stream (random directions) apart from the point's, as levels.py does
        f = ModP(np.random.default_rng([seed, attempt, 0xD1]))
        pt = Point.sample(deriv, rec, f, sizes, np.random.default_rng(seed * 1000 + attempt),
                          zero_init=zero)
        try:
            for c in claims:
                _decide_at(pt, prog, c, sizes, seed)
            return
        except ZeroDivision:
            continue   # a sampled gate or pivot is zero at this point: draw another
    raise DerivedAdjointError(f"program {prog.name}: every sampled point at {sizes} divides by zero")


def _decide_at(pt, prog, claim, sizes, seed):
    f = pt.field
    try:
        for b, ev, env in sites(pt, claim, prog):
            rhs = ev.ev(claim.rhs, env)
            if claim.kind == "adjoint":
                r, c = f.shape(rhs)
                D = f.rand(r, c)
                ok = jvp_loss(pt, prog, b, claim.lhs, D) == int(f.had(rhs, D).sum() % f.p)
            else:
                ok = f.equal(ev.ev(claim.lhs, env), rhs)
            if not ok:
                raise DerivedAdjointError(
                    f"derived line {claim.id} does not hold at {sizes}, seed {seed}, chunk t={b}: "
                    f"a bug of symbolic reverse mode or the simplifier, not a result: "
                    f"{to_latex(claim.lhs)} = {to_latex(claim.rhs)}")
    except ZeroDivision:
        raise
    except (EvalError, ir.ShapeError) as e:
        raise DerivedAdjointError(f"derived line {claim.id} cannot be evaluated ({e}): a bug of "
                                  f"symbolic reverse mode, not a result") from None


def verified_backward(deriv: Derivation, program) -> Checked:
    """derive_checked at the default sizes, once per program per process: the API for
    a caller that wants "the derived, verified formula of δX in program P"
    (``verified_backward(d, "kda_chunk").backward.get("dKr").rhs``)."""
    prog = _program(deriv, program)
    key = (id(deriv), id(prog), len(prog.defs))
    hit = _VERIFIED.get(key)
    if hit is None or hit[0] is not prog:
        hit = _VERIFIED[key] = (prog, derive_checked(deriv, prog))
    return hit[1]
