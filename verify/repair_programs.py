"""Repairs of a program's definitions: for a program's entry, the smallest edit
of its definitions that makes it reproduce its recurrence; for a line read
through a program that does not, the note that says so (and whether the line
holds once the program is fixed)."""
from __future__ import annotations

import dataclasses
import time
from typing import Dict, Iterator, Tuple

import numpy as np

from chunkproof.derivations import ir
from . import programs
from .levels import Result, decide, size_sets
from .evaluate import BlockEval, Point
from .fields import ModP
from .mutate import local_edits
from .repair_candidates import _names_in, _replace
from .repair_residual import _tex
from .repair_search import MAX_CANDIDATES, MAX_SECONDS, Suggestion, cap_reached


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
        stop = cap_reached(out.tried, t0, max_candidates, max_seconds)
        if stop:
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



# ---------------------------------------------------------------- lines read through a program
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


def failing_program_note(deriv, claim, res, sets, seed) -> str:
    """Why a line has no suggestion of its own when it is read through a program
    that fails its check ('' where it is not)."""
    bad = _gated(res) or _program_fails(deriv, claim, sets, seed)
    if not bad:
        return ""
    note = (f"none for this line: it is read through program {bad}, which does not reproduce "
            f"its recurrence (entry {bad}{programs.SUFFIX})")
    fixed = _fixed_program(deriv, deriv.programs[bad], programs.ZERO in claim.assume, seed)
    if fixed is not None:
        d2 = dataclasses.replace(deriv, programs={**deriv.programs, bad: fixed[1]})
        if decide(d2, claim, sets, diagnose=False, floats=False, seed=seed).verdict == "holds":
            note += f"; the line holds as written once the program is fixed ({fixed[0]})"
    else:
        note += "; fix the program first"
    return note
