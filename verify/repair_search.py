"""The search for a line's repair: each candidate edit screened at one exact point
(one size set, the true side computed once, the candidate's unchanged subtrees
shared with the line's through the evaluator's memo), a survivor then decided at
every exact size set by the checker itself (levels.decide), within a candidate
cap and a time cap per claim."""
from __future__ import annotations

import dataclasses
import time
from typing import Optional

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim
from chunkproof.derivations.latex import to_latex
from . import programs
from .adjoints import adjoint_value
from .levels import decide
from .evaluate import Point
from .fields import ModP, ZeroDivision
from .repair_candidates import Vocabulary, _at, _replace, _summands, candidates
from .repair_residual import _neg, _tex, named_residual
from .sites import sites

MAX_CANDIDATES = 3000     # screened per claim
# per claim, screening and deciding together: a safety net, well above what a search
# takes on an idle machine, so that a loaded one finds the same suggestions
MAX_SECONDS = 10.0
MAX_DECIDED = 12          # screen survivors decided at every size set


@dataclasses.dataclass
class Suggestion:
    latex: str = ""          # the suggested line, printed from the IR
    verified: bool = False
    edit: str = ""           # what changed
    residual: str = ""       # line vs suggestion, in named tiles (LaTeX)
    note: str = ""           # why there is none, or where the search stopped
    tried: int = 0
    seconds: float = 0.0
    claim: Optional[Claim] = None   # the edited claim (not sent back from workers)
    program: object = None          # for a program's entry: the edited program


# ---------------------------------------------------------------- screening
class Screen:
    """One exact point: the claim's sites and true values, kept, so that each
    candidate costs the evaluation of the nodes it changed."""

    def __init__(self, deriv, claim, sizes, seed):
        self.claim, self.prog = claim, deriv.programs[claim.program]
        # a point where the true side is defined (a gate's inverse can hit zero),
        # as exact_once draws again: a screen that cannot evaluate it would pass nothing
        for attempt in range(8):
            rng = np.random.default_rng([seed, attempt, 0x5E])
            self.f = ModP(np.random.default_rng([seed, attempt, 0x5F]))
            self.pt = Point.sample(deriv, claim.recurrence, self.f, sizes, rng,
                                   zero_init=programs.ZERO in claim.assume)
            # [block, evaluator, binding, true adjoint once computed]
            self.sites = [[b, ev, env, None] for b, ev, env in sites(self.pt, claim, self.prog)]
            try:
                if self.sites and claim.kind == "adjoint":
                    self._lhs(self.sites[0], claim.lhs)
                break
            except ZeroDivision:
                continue

    def _lhs(self, site, lhs):
        b, ev, env, truth = site
        if self.claim.kind != "adjoint":
            return ev.ev(lhs, env)
        if truth is None:
            truth = site[3] = adjoint_value(self.pt, self.prog, b, self.claim.lhs)
        return truth

    def passes(self, lhs, rhs) -> bool:
        f = self.f
        for k, site in enumerate(self.sites):
            try:
                r = site[1].ev(rhs, site[2])
                left = self._lhs(site, lhs)
                if f.shape(r) != f.shape(left) or not f.equal(left, r):
                    if k:   # the next candidate most likely fails here too
                        self.sites.insert(0, self.sites.pop(k))
                    return False
            except Exception:  # noqa: BLE001 - a candidate that cannot be evaluated is no fix
                return False
        return True


def _well_formed(lhs, rhs) -> bool:
    try:
        return lhs.shape() == rhs.shape()
    except Exception:  # noqa: BLE001 - shape errors, and index nodes on the wrong tiles
        return False


# ---------------------------------------------------------------- the search
def cap_reached(tried, t0, max_candidates, max_seconds) -> str:
    """Where a search must stop ('' while it may go on); the line and program
    searches share the caps' wording, which the report prints."""
    if tried >= max_candidates:
        return f"candidate cap ({max_candidates}) reached"
    if time.perf_counter() - t0 > max_seconds:
        return f"time cap ({max_seconds:g} s) reached"
    return ""


def search_line(deriv, claim, exclude, derived, sets, seed, max_candidates, max_seconds,
                t0) -> Suggestion:
    """The search proper, for a line that is not read through a failing program;
    ``t0`` is when the caller started, so that the time cap covers its work too."""
    out = Suggestion()
    exclude = set(exclude) | {c.id for c in deriv.claims if c.corrected_of == claim.id}
    voc = Vocabulary(deriv, claim, exclude, derived)
    cands = candidates(deriv, claim, voc)
    screen = Screen(deriv, claim, sets[0], seed)
    seen = {(claim.lhs, claim.rhs)}
    decided = 0
    stop = ""
    for side, ed in cands:
        stop = cap_reached(out.tried, t0, max_candidates, max_seconds)
        if stop:
            break
        if side == "over":
            fixed = dataclasses.replace(claim, over=ed.new)
            out.tried += 1
            if not _range_passes(deriv, fixed, sets[0], seed):
                continue
        else:
            new_side = _replace(getattr(claim, side), ed.path, ed.new)
            lhs, rhs = (new_side, claim.rhs) if side == "lhs" else (claim.lhs, new_side)
            if (lhs, rhs) in seen or _says_nothing(deriv, claim, lhs, rhs):
                continue
            seen.add((lhs, rhs))
            out.tried += 1
            if not _well_formed(lhs, rhs) or not screen.passes(lhs, rhs):
                continue
            fixed = dataclasses.replace(claim, lhs=lhs, rhs=rhs)
        if decided >= MAX_DECIDED:
            stop = f"{MAX_DECIDED} candidates passed the screen but not the check at every size set"
            break
        decided += 1
        if decide(deriv, fixed, sets, diagnose=False, floats=False, seed=seed).verdict == "holds":
            _fill(out, fixed, claim, side, ed)
            break
    if not out.verified and derived is not None:
        _derived_instead(out, deriv, claim, derived, sets, seed)
    if not out.verified:
        what = f"{out.tried} candidate edits"
        out.note = (f"no single edit makes this line hold ({what} tried"
                    + (f"; search stopped: {stop}" if stop else ", all there are") + ")")
    elif stop:
        out.note = stop
    out.seconds = time.perf_counter() - t0
    return out


def _range_passes(deriv, fixed, sizes, seed) -> bool:
    """A cut range must keep some of the line: an empty one holds and says nothing."""
    try:
        screen = Screen(deriv, fixed, sizes, seed)
    except Exception:  # noqa: BLE001 - a range that cannot be enumerated is no fix
        return False
    return bool(screen.sites) and screen.passes(fixed.lhs, fixed.rhs)


def _says_nothing(deriv, claim, lhs, rhs) -> bool:
    """A line that is its own left side holds and says nothing; so does "the state
    (or output) of the recurrence is the program's S (or O)", which is the program's
    own check."""
    if claim.kind == "adjoint":
        return False
    l, r = _plain(lhs), _plain(rhs)
    if l == r:
        return True
    prog = deriv.programs[claim.program]
    if isinstance(r, ir.Transpose):
        r = r.a
    return isinstance(l, ir.Truth) and type(r) is ir.Var and r.name in (prog.state, prog.output)


def _plain(e):
    """``e`` without what does not change its value: labels, double transposes,
    products with I, Hadamard products with a block of ones."""
    e = e.map_children(_plain)
    if isinstance(e, ir.Tex):
        return e.a
    if isinstance(e, ir.Transpose) and isinstance(e.a, ir.Transpose):
        return e.a.a
    if isinstance(e, ir.Had):
        if _ones(e.b):
            return e.a
        if _ones(e.a):
            return e.b
    if isinstance(e, ir.MatMul):
        if isinstance(e.a, ir.Eye):
            return e.b
        if isinstance(e.b, ir.Eye):
            return e.a
    return e


def _ones(e):
    return isinstance(e, ir.Ones) or (isinstance(e, ir.SubBlock) and isinstance(e.a, ir.Ones))


def _fill(out, fixed, claim, side, ed):
    out.verified = True
    out.claim = fixed
    out.latex = f"{to_latex(fixed.lhs)} = {to_latex(fixed.rhs)}"
    if side == "over":
        ranges = ", ".join(f"{v} = {lo}..{hi}" for v, lo, hi in fixed.over)
        out.latex += rf" \quad \text{{for }} {ranges}"
        out.edit = f"{ed.op}: {ed.desc} (the line holds on part of its range only)"
        return
    old = _at(getattr(claim, side), ed.path)
    where = "left side" if side == "lhs" else "right side"
    same = _tex(old) == _tex(ed.new)
    if ed.word:   # a term added or removed: the term says it, the whole sum would not
        d = ed.delta()
        t = d if ed.word == "missing" else _neg(d)
        sign, t = ("-", t.a) if isinstance(t, ir.Neg) else ("+", t)
        what = f"{sign} {_tex(t)}"
    else:
        what = f"{_tex(old)} -> {_tex(ed.new)}"
        if same:
            what += " (the two print alike: they are different definitions of the program)"
    out.edit = f"{ed.op}: {ed.desc} ({where}): {what}"
    # an ill-formed line has no value to subtract from; alike-printed tiles no readable one
    if _well_formed(claim.lhs, claim.rhs) and not same:
        out.residual = named_residual(getattr(claim, side), ed, side)


def _derived_instead(out, deriv, claim, rhs, sets, seed):
    """Where no single edit fixes an adjoint line: the derived formula, if it holds."""
    fixed = dataclasses.replace(claim, rhs=rhs)
    if decide(deriv, fixed, sets, diagnose=False, floats=False, seed=seed).verdict == "holds":
        out.verified, out.claim = True, fixed
        out.latex = f"{to_latex(fixed.lhs)} = {to_latex(rhs)}"
        out.edit = "no single edit fixes the line: the derived formula (reverse mode on the IR) instead"
        terms = [t for t in _summands(rhs)]
        have = set(_summands(claim.rhs))
        miss = [t for t in terms if t not in have]
        if miss:
            out.residual = r"\text{terms of the derived formula the line lacks (up to sign): } " + \
                           r",\quad ".join(_tex(t) for t in miss)
