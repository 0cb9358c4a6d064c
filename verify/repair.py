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

The work is split by job: repair_candidates (the vocabulary and the candidate
edits), repair_search (screening and deciding them), repair_programs (a
program's definitions, and lines read through them), repair_residual (the
residual in named tiles).  This module keeps the entry points the rest of the
package uses, and DERIVED, which tests replace here.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, Optional

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from . import programs
from .levels import Result, size_sets
from .repair_candidates import LHS_LATER, Vocabulary, candidates, range_edits, vocabulary_edits
from .repair_programs import ProgramScreen, failing_program_note, program_edits, suggest_program
from .repair_residual import named_residual
from .repair_search import (MAX_CANDIDATES, MAX_DECIDED, MAX_SECONDS, Screen, Suggestion,
                            _well_formed, search_line)

__all__ = ["DERIVED", "LHS_LATER", "MAX_CANDIDATES", "MAX_DECIDED", "MAX_SECONDS", "ProgramScreen",
           "Screen", "Suggestion", "Vocabulary", "attach", "candidates", "named_residual",
           "failing_literal_entries", "program_edits", "range_edits", "reverse_formula", "suggest",
           "suggest_program", "vocabulary_edits"]


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


def suggest(deriv: Derivation, claim: Claim, res: Result, seed=0, exclude=(),
            max_candidates=MAX_CANDIDATES, max_seconds=MAX_SECONDS) -> Suggestion:
    """The smallest verified edit of a claim that does not hold, or why there is none."""
    t0 = time.perf_counter()
    out = Suggestion()
    sets = size_sets()
    if claim.kind == programs.KIND:
        return suggest_program(deriv, claim, res, seed, max_candidates, max_seconds)
    out.note = failing_program_note(deriv, claim, res, sets, seed)
    if out.note:
        return out
    if res.verdict not in ("fails", "ill-formed"):
        return out
    return search_line(deriv, claim, exclude, _derived(deriv, claim), sets, seed,
                       max_candidates, max_seconds, t0)


def _derived(deriv, claim):
    if DERIVED is None:
        return None
    try:
        rhs = DERIVED(deriv, claim)
    except Exception:  # noqa: BLE001 - another module's failure must not lose the verdict
        return None
    return rhs if rhs is not None and _well_formed(claim.lhs, rhs) else None


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


def failing_literal_entries():
    """(derivation, claim, result) for every literal entry of the bundled notes that
    does not hold, program entries included as the report lists them (decided without
    the diagnosis and the float level): what the search is measured on."""
    from chunkproof.derivations.loader import bundled
    from .check import check
    for d in programs.with_program_entries(bundled()):
        for c in d.claims:
            if c.corrected_of is None:
                r = check(d, c, diagnose=False, floats=False)
                if r.verdict != "holds":
                    yield d, c, r
