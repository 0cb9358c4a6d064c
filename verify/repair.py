"""Repair suggestions: for a claim that does not hold, the smallest edit of its
line that makes it hold, verified exactly.

The edits are the mutation operators run backwards and their relatives
(mutate.local_edits), plus those that need the derivation's vocabulary: another
tile, or another adjoint, of the same shape; a missing term, taken from the
summands of the derivation's other lines and of the program's definitions; a
missing factor from the line itself.  Each candidate is screened at one exact
point (one size set, the true side computed once, the candidate's unchanged
subtrees shared with the line's through the evaluator's memo), and a survivor is
then decided at every exact size set by the checker itself (levels.decide): only
that makes a suggestion "verified".  The search is bounded by a candidate cap and
a time cap per claim, and says when it stopped at one.

The difference between the line and the suggestion, pushed through the linear
context of the edit, is the residual in the derivation's own named tiles.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from chunkproof.derivations.latex import to_latex
from . import programs
from .adjoints import adjoint_value
from .levels import Result, decide, size_sets
from .evaluate import BlockEval, Point
from .fields import ModP, ZeroDivision
from .mutate import _POSITIONS, Edit, local_edits
from .sites import sites

MAX_CANDIDATES = 3000     # screened per claim
MAX_SECONDS = 3.0         # per claim, screening and deciding together
MAX_DECIDED = 12          # screen survivors decided at every size set
LHS_LATER = 2.5           # added to the cost of an edit of a line's left side


def reverse_formula(deriv: Derivation, claim: Claim) -> Optional[ir.Expr]:
    """The formula derivations/reverse.py derives for an adjoint line's target (one
    chain-rule step, in the adjoints of its consumers, as the notes write them), or
    None where it has none: a "from X" part, a recurrence's own step program, a
    construct reverse mode refuses, or no reverse.py at all."""
    if claim.kind != "adjoint" or claim.lhs.via or claim.lhs.excl:
        return None
    prog = deriv.programs.get(claim.program)
    if prog is None or programs.is_truth(deriv, prog):
        return None
    key = (id(deriv), prog.name, claim.lhs.var.name)
    if key not in _DERIVED_CACHE:
        try:
            from chunkproof.derivations.reverse import adjoint_formula
            _DERIVED_CACHE[key] = (deriv, adjoint_formula(deriv, prog, claim.lhs.var.name).rhs)
        except Exception:  # noqa: BLE001 - without a derived formula the search still runs
            _DERIVED_CACHE[key] = (deriv, None)
    return _DERIVED_CACHE[key][1]


_DERIVED_CACHE: Dict[tuple, tuple] = {}
# Where the derived formula comes from: fn(deriv, claim) -> ir.Expr or None.  Its
# summands join the terms a missing one is looked for among, and where no single
# edit fixes an adjoint line the whole formula is the suggestion, checked like any
# other.  None turns both off.
DERIVED: Optional[Callable[[Derivation, Claim], Optional[ir.Expr]]] = reverse_formula


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


# ---------------------------------------------------------------- vocabulary
def _evaluable(deriv: Derivation, claim: Claim) -> set:
    prog = deriv.programs[claim.program]
    rec = deriv.recurrences[claim.recurrence]
    names = set(prog.names()) | {"S_prev", "dO"} | set(rec.parameters())
    for i in rec.inputs:
        names |= {i.seq, i.step}
    return names


def _summands(e):
    """The terms of a sum, signs dropped (a term is tried added and subtracted)."""
    if isinstance(e, (ir.Add, ir.Sub)):
        yield from _summands(e.a)
        yield from _summands(e.b)
    elif isinstance(e, (ir.Neg, ir.Tex)):
        yield from _summands(e.a)
    else:
        yield e


def _names_in(e):
    return {n.name for n in ir.walk(e) if isinstance(n, ir.Var)}


def _shape(e):
    try:
        return e.shape()
    except (ir.ShapeError, KeyError, AttributeError, IndexError):
        return None


class Vocabulary:
    """What a line of this derivation can be made of: tiles and adjoints by shape,
    terms (summands of other lines and of the program's definitions, those about
    the same target first), the global / chunk form of each input tile.  Lines in
    ``exclude`` and every correction are left out: a suggestion must not be read
    off the answer."""

    def __init__(self, deriv: Derivation, claim: Claim, exclude=(), derived=None):
        ok = _evaluable(deriv, claim)
        prog = deriv.programs[claim.program]
        others = [c for c in deriv.claims if c.id not in exclude and c.id != claim.id
                  and c.corrected_of is None and c.kind != programs.KIND]
        same = [c for c in others if c.program == claim.program]
        exprs = [e for c in same for e in (c.lhs, c.rhs)] + [e for _, e in prog.defs]
        self.tiles: Dict[tuple, ir.Var] = {}
        self.vars: Dict[tuple, List[ir.Var]] = {}
        self.adjs: Dict[tuple, List[ir.Adj]] = {}
        for e in exprs + [claim.lhs, claim.rhs]:
            for n in ir.walk(e):
                if type(n) in (ir.Var, ir.Param) and n.name in ok:
                    self.tiles.setdefault((n.name, n.rows), n)
                    _add(self.vars, n.shape(), n)
                elif isinstance(n, ir.Adj) and n.var.name in ok:
                    _add(self.adjs, n.shape(), n)
        target = _target(claim)
        self.derived = set(_summands(derived)) if derived is not None else set()
        # the derivation's own lines about the same target first (their notation), then
        # the derived formula's terms, then the rest
        ranked = [(0.5, t) for t in _summands(derived)] if derived is not None else []
        for c in same:
            near = 0 if target is not None and _target(c) == target else 1
            for side in ((c.rhs,) if c.kind == "adjoint" else (c.lhs, c.rhs)):
                ranked += [(near, t) for t in _summands(side)]
        ranked += [(2, t) for _, e in prog.defs for t in _summands(e)]
        # then lines on other programs of the derivation (the terms their tiles allow
        # here), and the inner sums of every line: a term dropped inside parentheses
        ranked += [(3, t) for c in others if c.program != claim.program
                   for side in (c.lhs, c.rhs) for t in _summands(side)]
        ranked += [(4, t) for c in others for side in (c.lhs, c.rhs) for n in ir.walk(side)
                   if isinstance(n, (ir.Add, ir.Sub)) for t in _summands(n)]
        self.terms: Dict[tuple, List[ir.Expr]] = {}
        seen = set()
        for _, t in sorted(ranked, key=lambda p: p[0]):
            if t in seen or isinstance(t, (ir.Zeros, ir.Eye, ir.RowRec)) or not _names_in(t) <= ok:
                continue
            seen.add(t)
            s = _shape(t)
            if s is not None:
                self.terms.setdefault(s, []).append(t)


def _add(table, shape, node):
    lst = table.setdefault(shape, [])
    if node not in lst:
        lst.append(node)


def _target(c: Claim):
    """The tile an adjoint line is about; its "from X" parts are about it too."""
    return c.lhs.var.name if c.kind == "adjoint" else None


def _factors(claim: Claim):
    """Square factors the line itself uses (Diag(...), an inverse, a square tile),
    and the tiles it multiplies or divides by elementwise: a missing factor is
    usually one written elsewhere in the same line."""
    mat, had = [], []
    for e in (claim.lhs, claim.rhs):
        for n in ir.walk(e):
            if isinstance(n, (ir.DiagM, ir.Inv)) or (type(n) is ir.Var and n.rows == n.cols != "1"):
                if n not in mat:
                    mat.append(n)
            if isinstance(n, (ir.Had, ir.HDiv)) and type(n.b) is ir.Var and n.b not in had:
                had.append(n.b)
    return mat, had


# ---------------------------------------------------------------- candidates
def vocabulary_edits(e: ir.Expr, voc: Vocabulary, claim: Claim) -> Iterator[Edit]:
    mat, had = _factors(claim)
    for path, n in _POSITIONS.visit(e, ()):
        s = _shape(n)
        if s is None:
            continue
        if type(n) in (ir.Var, ir.Param):
            for v in voc.vars.get(s, ()):
                if v.name != n.name:
                    yield Edit("symbol", f"another tile of the same shape, {n.name} -> {v.name}", path, v,
                               tier=1, delta=lambda n=n, v=v: v - n)
            for v in voc.vars.get(s, ()):
                if v.name != n.name:
                    yield Edit("symbol", f"another tile, transposed, {n.name} -> {v.name}^T", path,
                               ir.Transpose(v), tier=2)
        if isinstance(n, ir.Adj):
            for a in voc.adjs.get(s, ()):
                if a != n:
                    yield Edit("symbol", "another adjoint of the same shape", path, a, tier=1,
                               delta=lambda n=n, a=a: a - n)
        if s == ("1", "1"):
            for d in ("Dk", "Dv", "C"):
                # well-formed only where a d x d tile is wanted: in an ill-formed line
                yield Edit("scalar", f"scalar -> scalar times I_{d}", path, ir.Scale(n, ir.Eye(d)))
        # a missing term: where a sum is, first (root or an existing sum), then anywhere
        at_sum = not path or isinstance(n, (ir.Add, ir.Sub))
        for k, t in enumerate(voc.terms.get(s, ())):
            if t is n:
                continue
            # in the pool's order (terms of lines about the same tile first)
            tier = (2 if at_sum else 3) + 0.001 * k
            src = " of the derived formula" if t in voc.derived else ""
            yield Edit("term", f"add a term{src}", path, ir.Add(n, t), tier=tier, delta=lambda t=t: t,
                       word="missing")
            yield Edit("term", f"subtract a term{src}", path, ir.Sub(n, t), tier=tier,
                       delta=lambda t=t: ir.Neg(t), word="missing")
        for f in mat:
            fs = _shape(f)
            if fs == (s[1], s[1]):
                yield Edit("factor", f"times {to_latex(f)} on the right", path, ir.MatMul(n, f), tier=3)
            if fs == (s[0], s[0]):
                yield Edit("factor", f"times {to_latex(f)} on the left", path, ir.MatMul(f, n), tier=3)
        for g in had:
            if _shape(g) == s and g is not n:
                yield Edit("factor", f"(.) {to_latex(g)}", path, ir.Had(n, g), tier=3)
                yield Edit("factor", f"(/) {to_latex(g)}", path, ir.HDiv(n, g), tier=3)


def _replace(e, path, new):
    """``e`` with the node at ``path`` replaced; a Tex label on the way is dropped,
    since it would print the note's old LaTeX over the edited formula."""
    if not path:
        return new
    if isinstance(e, ir.Tex):
        return _replace(e.a, path[1:], new)
    head, rest = path[0], path[1:]
    return dataclasses.replace(e, **{head: _replace(getattr(e, head), rest, new)})


def candidates(deriv, claim, voc) -> List[Tuple[str, Edit]]:
    """(side, edit) in the order tried: by tier (node-local slips, then another
    tile, then a missing term or factor where a sum is, then anywhere), the right
    side before the left; an adjoint's left side is its target and is not edited."""
    sides = ["rhs"] + ([] if claim.kind == "adjoint" else ["lhs"])
    out = []
    sizes = {}
    for side in sides:
        e = getattr(claim, side)
        for ed in list(local_edits(e, voc.tiles)) + list(vocabulary_edits(e, voc, claim)):
            out.append((_cost(ed, _at(e, ed.path), sizes), side, ed))
    out += [(3, "over", ed) for ed in range_edits(claim)]
    # the left side of an identity is usually what the line is about: an edit there
    # comes after the right side's edits up to a missing term at a sum
    out = [(cost + (LHS_LATER if side == "lhs" else 0), side, ed) for cost, side, ed in out]
    order = {s: i for i, s in enumerate(sides + ["over"])}
    out.sort(key=lambda p: (p[0], order[p[1]]))
    return [(side, ed) for _, side, ed in out]


def _cost(ed: Edit, old, memo) -> float:
    """The tier, plus a little for each node the edit adds or removes: dropping a
    whole term is a larger edit than wrapping a scalar in I.  A missing term counts
    as one, whatever its size: the pool's order ranks those."""
    if ed.op == "term":
        return ed.tier + 0.2
    cost = ed.tier + 0.2 * abs(_size(ed.new, memo) - _size(old, memo))
    if ed.op == "swap" and _shape(ed.new) != _shape(old):
        cost += 0.5   # an inner product made outer (k^T k -> k k^T) changes what the line is
    return cost


def _size(e, memo):
    hit = memo.get(id(e))
    if hit is None:
        n = 1 + sum(_size(c, memo) for c in e.children())
        hit = memo[id(e)] = (e, n)   # the node is kept, so that its id is not reused
    return hit[1]


def range_edits(claim: Claim) -> Iterator[Edit]:
    """A quantifier's range cut at another index it is bound after: the line may
    hold for tau < t only, where it claims every tau != t."""
    for k, (var, lo, hi) in enumerate(claim.over):
        for u, _, _ in claim.over[:k]:
            for lo2, hi2 in ((lo, f"{u}-1"), (lo, u), (u, hi), (f"{u}+1", hi)):
                if (lo2, hi2) != (lo, hi):
                    over = claim.over[:k] + ((var, lo2, hi2),) + claim.over[k + 1:]
                    yield Edit("range", f"{var} = {lo}..{hi} -> {lo2}..{hi2}", (), over, tier=3)


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
def _gated(res: Result) -> str:
    """The program a claim holds through but which fails its own check ('' if none)."""
    for e in res.evidence:
        if e.startswith("holds through the definitions of "):
            return e.split("holds through the definitions of ", 1)[1].split(";")[0]
    return ""


def _program_fails(deriv, claim, sets, seed) -> str:
    prog = deriv.programs.get(claim.program)
    if prog is None or programs.is_truth(deriv, prog) or not programs.reads_program(claim, prog):
        return ""
    pc = programs.program_check(deriv, prog, programs.ZERO in claim.assume, sets, 1, seed)
    return "" if pc.verdict == "holds" else prog.name


def suggest(deriv: Derivation, claim: Claim, res: Result, seed=0, exclude=(),
            max_candidates=MAX_CANDIDATES, max_seconds=MAX_SECONDS) -> Suggestion:
    """The smallest verified edit of a claim that does not hold, or why there is none."""
    t0 = time.perf_counter()
    out = Suggestion()
    sets = size_sets()
    if claim.kind == programs.KIND:
        return suggest_program(deriv, claim, res, seed, max_candidates, max_seconds)
    bad = _gated(res) or _program_fails(deriv, claim, sets, seed)
    if bad:
        out.note = (f"none for this line: it is read through program {bad}, which does not reproduce "
                    f"its recurrence (entry {bad}{programs.SUFFIX})")
        fixed = _fixed_program(deriv, deriv.programs[bad], programs.ZERO in claim.assume, seed)
        if fixed is not None:
            d2 = dataclasses.replace(deriv, programs={**deriv.programs, bad: fixed[1]})
            if decide(d2, claim, sets, diagnose=False, floats=False, seed=seed).verdict == "holds":
                out.note += f"; the line holds as written once the program is fixed ({fixed[0]})"
        else:
            out.note += "; fix the program first"
        return out
    if res.verdict not in ("fails", "ill-formed"):
        return out
    exclude = set(exclude) | {c.id for c in deriv.claims if c.corrected_of == claim.id}
    derived = _derived(deriv, claim)
    voc = Vocabulary(deriv, claim, exclude, derived)
    cands = candidates(deriv, claim, voc)
    screen = Screen(deriv, claim, sets[0], seed)
    seen = {(claim.lhs, claim.rhs)}
    decided = 0
    stop = ""
    for side, ed in cands:
        if out.tried >= max_candidates:
            stop = f"candidate cap ({max_candidates}) reached"
            break
        if time.perf_counter() - t0 > max_seconds:
            stop = f"time cap ({max_seconds:g} s) reached"
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


# ---------------------------------------------------------------- programs
def _readers(prog, name):
    """The definitions that read ``name``, directly or through others, and itself."""
    out, grew = {name}, True
    while grew:
        grew = False
        for n, e in prog.defs:
            if n not in out and _names_in(e) & out:
                out.add(n)
                grew = True
    return out


def program_edits(deriv, prog, claim) -> Iterator[Tuple[str, list, dict]]:
    """(description, changed definition names, new defs) for a program: one symbol
    swapped for another of its shape in every definition that can read it (the same
    slip made in each line, as a note that repeats a factor does), then one edit of
    one definition."""
    handles = {}
    for _, e in prog.defs:
        for n in ir.walk(e):
            if type(n) in (ir.Var, ir.Param):
                handles.setdefault(n.name, n)
    for c in deriv.claims:
        if c.program == prog.name and c.corrected_of is None:   # not from the answer
            for side in (c.lhs, c.rhs):
                for n in ir.walk(side):
                    if type(n) is ir.Var and n.name in prog.names():
                        handles.setdefault(n.name, n)
    defs = dict(prog.defs)
    for x in [v for v in handles.values() if any(v.name in _names_in(e) for e in defs.values())]:
        for y in handles.values():
            if y.name == x.name or y.shape() != x.shape():
                continue
            # a definition that y is computed from cannot read y
            free = {n for n in defs if n not in _cone_of(prog, y.name)} - {y.name}
            new = {n: _swap(e, x.name, y) for n, e in defs.items() if n in free and x.name in _names_in(e)}
            if new:
                yield f"symbol: {x.name} -> {y.name} in {', '.join(new)}", list(new), new
    tiles = {(v.name, v.rows): v for v in handles.values()}
    for n, e in prog.defs:
        for ed in local_edits(e, tiles, wrap=False):
            yield f"{ed.op}: {ed.desc} in {n}", [n], {n: _replace(e, ed.path, ed.new)}


def _cone_of(prog, name):
    """The definitions ``name`` is computed from (itself included)."""
    defs = dict(prog.defs)
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in defs:
            continue
        seen.add(n)
        todo += list(_names_in(defs[n]))
    return seen


def _swap(e, name, new):
    if type(e) in (ir.Var, ir.Param) and e.name == name:
        return new
    return e.map_children(lambda c: _swap(c, name, new))


class ProgramScreen:
    """O and S of a program against the recurrence at one point; a candidate
    program re-evaluates only the definitions that read what it changed."""

    def __init__(self, deriv, prog, zero, sizes, seed):
        self.prog, self.zero = prog, zero
        self.tiles = programs.tile_claims(deriv, prog, zero)
        rec = deriv.program_recurrence.get(prog.name, deriv.default_recurrence)
        self.f = ModP(np.random.default_rng([seed, 0x9F]))
        self.pt = Point.sample(deriv, rec, self.f, sizes, np.random.default_rng([seed, 0x9E]), zero_init=zero)
        n = sizes.N if prog.block == "chunk" else sizes.L
        self.base = [BlockEval(self.pt, prog, b) for b in range(n)]
        self.truth = [{t.rhs.name: ev.ev(t.lhs, {}) for t in self.tiles} for ev in self.base]

    def passes(self, new_prog, changed) -> bool:
        redo = set()
        for n in changed:
            redo |= _readers(new_prog, n)
        for ev0, want in zip(self.base, self.truth):
            ev = BlockEval(self.pt, new_prog, ev0.b)
            # definitions that read nothing changed keep their values (the memo's
            # ('def', name) entries, see BlockEval.var_value)
            for name in new_prog.names():
                if name not in redo:
                    ev0.var_value(name)
                    ev.memo[("def", name)] = ev0.memo[("def", name)]
            try:
                for name, value in want.items():
                    got = ev.var_value(name)
                    if self.f.shape(got) != self.f.shape(value) or not self.f.equal(got, value):
                        return False
            except Exception:  # noqa: BLE001 - a program that cannot be evaluated is no fix
                return False
        return True


def suggest_program(deriv, claim, res, seed, max_candidates, max_seconds) -> Suggestion:
    """For a program's entry: the smallest edit of its definitions that makes it
    reproduce its recurrence, decided by the program check at every size set."""
    t0 = time.perf_counter()
    out = Suggestion()
    prog = deriv.programs[claim.program]
    zero = programs.ZERO in claim.assume
    sets = size_sets()
    try:
        screen = ProgramScreen(deriv, prog, zero, sets[0], seed)
    except Exception as e:  # noqa: BLE001 - e.g. a program that cannot be evaluated at all
        out.note = f"no edit of the program was searched: {e}"
        return out
    stop = ""
    for desc, changed, new in program_edits(deriv, prog, claim):
        if out.tried >= max_candidates:
            stop = f"candidate cap ({max_candidates}) reached"
            break
        if time.perf_counter() - t0 > max_seconds:
            stop = f"time cap ({max_seconds:g} s) reached"
            break
        out.tried += 1
        p2 = dataclasses.replace(prog, defs=[(n, new.get(n, e)) for n, e in prog.defs])
        if not screen.passes(p2, changed):
            continue
        d2 = dataclasses.replace(deriv, programs={**deriv.programs, prog.name: p2})
        if programs.program_check(d2, p2, zero, sets, 1, seed).verdict == "holds":
            out.verified, out.program = True, p2
            out.latex = r" \quad ".join(f"{_tex(ir.Var(n, '', '', _handle_tex(deriv, prog, n)))} = "
                                         f"{_tex(new[n])}" for n in changed)
            out.edit = f"{desc} (program {prog.name})"
            break
    if not out.verified:
        out.note = (f"no single edit of the program's definitions makes it reproduce its recurrence "
                    f"({out.tried} candidate edits tried"
                    + (f"; search stopped: {stop})" if stop else ", all there are)"))
    out.seconds = time.perf_counter() - t0
    return out


_FIXED: Dict[tuple, tuple] = {}


def _fixed_program(deriv, prog, zero, seed):
    """(what changed, the fixed program) for a program that fails its check, or
    None; searched once per process (every line read through it asks)."""
    key = (id(deriv), prog.name, zero, seed)
    if key not in _FIXED:
        entry = next((c for c in deriv.claims if c.kind == programs.KIND and c.program == prog.name), None)
        entry = entry or programs.program_entry(deriv, prog)
        s = suggest_program(deriv, dataclasses.replace(entry, assume=(programs.ZERO,) if zero else ()),
                            None, seed, MAX_CANDIDATES, MAX_SECONDS)
        _FIXED[key] = (deriv, (s.edit, s.program) if s.verified else None)
    return _FIXED[key][1]


def _handle_tex(deriv, prog, name):
    """How the derivation prints a definition's name: its handle where a definition
    or a line reads it."""
    exprs = [e for _, e in prog.defs] + [side for c in deriv.claims if c.program == prog.name
                                         for side in (c.lhs, c.rhs)]
    exprs += [side for c in deriv.claims for side in (c.lhs, c.rhs)]
    for e in exprs:
        for n in ir.walk(e):
            if type(n) is ir.Var and n.name == name and n.tex:
                return n.tex
    return name


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


def _derived(deriv, claim):
    if DERIVED is None:
        return None
    try:
        rhs = DERIVED(deriv, claim)
    except Exception:  # noqa: BLE001 - another module's failure must not lose the verdict
        return None
    return rhs if rhs is not None and _well_formed(claim.lhs, rhs) else None


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


def _at(e, path):
    for p in path:
        e = getattr(e, p)
    return e


def _tex(e):
    try:
        return to_latex(e)
    except Exception:  # noqa: BLE001
        return type(e).__name__


# ---------------------------------------------------------------- named residual
_LINEAR = (ir.MatMul, ir.Had, ir.Scale, ir.Transpose, ir.Mask, ir.DiagM, ir.DiagV, ir.Sum,
           ir.Row, ir.Stack, ir.Shift, ir.SumBlocks, ir.SubBlock, ir.LastRow, ir.PlaceLast,
           ir.CumSum, ir.RevCumSum, ir.Inner)


def _through(e, path, delta):
    """How a change ``delta`` at ``path`` changes ``e``, as a formula: the other
    summands drop out, linear operations keep their other operands.  None where the
    path passes through something not linear in it (an inverse, a denominator)."""
    if not path:
        return delta
    head, rest = path[0], path[1:]
    inner = _through(getattr(e, head), rest, delta)
    if inner is None:
        return None
    if isinstance(e, ir.Add) or isinstance(e, ir.Tex):
        return inner
    if isinstance(e, ir.Sub):
        return inner if head == "a" else _neg(inner)
    if isinstance(e, ir.Neg):
        return _neg(inner)
    if isinstance(e, ir.HDiv) and head == "a" or isinstance(e, _LINEAR):
        return dataclasses.replace(e, **{head: inner})
    return None


def _neg(e):
    return e.a if isinstance(e, ir.Neg) else ir.Neg(e)


def _only_sums(e, path):
    for p in path:
        if not isinstance(e, (ir.Add, ir.Sub, ir.Neg, ir.Tex)):
            return False
        e = getattr(e, p)
    return True


def named_residual(side_expr, ed: Edit, side="rhs") -> str:
    """lhs - rhs of the line as written, in the derivation's tiles (LaTeX): 'missing
    + T' where a term is missing from a sum of the line, 'extra + T' where one is too
    many, else the difference the edit makes, carried to the whole side ('' where
    that passes through something not linear)."""
    old = _at(side_expr, ed.path)
    delta = ed.delta() if ed.delta else ir.Sub(ed.new, old)
    d = _through(side_expr, ed.path, delta)
    if d is None:
        return ""
    if side == "lhs":   # the edit moved the left side: lhs - rhs changes by -d
        d = _neg(d)
    if ed.word and _only_sums(side_expr, ed.path):
        t = d if ed.word == "missing" else _neg(d)
        sign, t = ("-", t.a) if isinstance(t, ir.Neg) else ("+", t)
        return rf"\text{{{ed.word} }} {sign} {_tex(t)}"
    return rf"\text{{lhs}} - \text{{rhs}} = {_tex(d)}"


# ---------------------------------------------------------------- the result
def attach(deriv: Derivation, claim: Claim, res: Result, seed=0, **kw) -> Result:
    """Fill ``res``'s suggestion fields.  A failure of the search is reported in
    the note, never raised: the verdict stands without a suggestion."""
    if res.verdict not in ("fails", "ill-formed"):
        return res
    t0 = time.perf_counter()
    try:
        s = suggest(deriv, claim, res, seed=seed, **kw)
    except Exception as e:  # noqa: BLE001 - see above
        s = Suggestion(note=f"repair search failed: {type(e).__name__}: {e}")
    res.suggestion = s.latex
    res.suggestion_verified = s.verified
    res.edit = s.edit
    res.suggestion_residual = s.residual
    res.suggestion_note = s.note
    res.suggestion_seconds = time.perf_counter() - t0
    return res
