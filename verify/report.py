"""Render check results as a table, JSON or Markdown (report_html: one HTML page).

Every human-readable form starts with the summary (the counts, then one line per
claim that does not hold) and shows, for each claim, the note's LaTeX beside the
formula that was checked, printed from the IR: the two can differ (a label that
says S_[t-1] over an encoding that reads S_[t]), and only the second was checked.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import List

from chunkproof.derivations.latex import to_latex
from chunkproof.derivations.loader import variant_name
from .coverage import groups_record, summary_line as coverage_line
from .levels import Result

MARK = {"holds": "ok", "fails": "FAIL", "ill-formed": "ILL", "error": "ERR"}
# A table is read on a terminal, where the failures are what matters; Markdown and
# HTML are documents, which list everything (failing claims first in HTML).
SHOW_DEFAULT = {"table": "failing", "markdown": "all", "html": "all", "json": "all"}


def formula_latex(r: Result) -> str:
    """The checked formula, printed from the claim's IR."""
    c = r.claim
    try:
        return f"{to_latex(c.lhs)} = {to_latex(c.rhs)}"
    except Exception as e:  # noqa: BLE001 - printing must not hide the verdict
        return f"(cannot print: {e})"


def note_latex(r: Result) -> str:
    """The note's LaTeX as written ('' for a derived claim the note does not give)."""
    return (r.claim.latex or "").strip()


def to_record(r: Result) -> dict:
    c = r.claim
    m = r.mismatch
    return OrderedDict(
        id=c.id,
        note=c.citation.note,
        derivation=c.derivation,
        variant=variant_name(c.derivation),
        citation=str(c.citation),
        section=c.citation.section,
        line=c.citation.line,
        row=c.citation.row,
        what=c.citation.what,
        latex=c.latex,
        formula=formula_latex(r),
        kind=c.kind,
        verdict=r.verdict,
        corrected_of=c.corrected_of,
        why=c.why or None,
        assume=list(c.assume),
        evidence=r.evidence,
        message=r.message or None,
        smallest_failing_sizes=r.smallest or None,
        mismatch=None if m is None else OrderedDict(
            sizes=m.sizes, seed=m.seed, chunk=m.block, binding=m.binding,
            entries=[list(e) for e in m.entries], lhs=m.lhs, rhs=m.rhs),
        residual=r.residual or None,
        float64_rel_error=r.float_error,
        coverage=None if _coverage(r) is None else _coverage(r).record(),
        seconds=round(r.seconds, 4),
        **suggestion_record(r),
    )


# ---------------------------------------------------------------- repair suggestions

def suggestion_record(r: Result) -> dict:
    """The repair search's answer (repair.py): None throughout for a claim that holds
    or was not searched (--no-suggest)."""
    searched = bool(r.suggestion or r.suggestion_note)
    return OrderedDict(
        suggestion=r.suggestion or None,
        suggestion_verified=r.suggestion_verified if searched else None,
        edit=r.edit or None,
        residual_named=r.suggestion_residual or None,
        suggestion_note=r.suggestion_note or None,
        suggestion_seconds=round(r.suggestion_seconds, 4) if searched else None,
    )


VERIFIED = "verified"


def suggestion_lines(r: Result) -> List[str]:
    """'suggested: LaTeX  [verified]', the edit and the residual in named tiles, or
    the plain statement that none was found; nothing for a claim not searched."""
    if r.suggestion:
        out = [f"suggested: {r.suggestion}  [{VERIFIED if r.suggestion_verified else 'not verified'}]"]
        if r.edit:
            out.append(f"edit:      {r.edit}")
        if r.suggestion_residual:
            out.append(f"residual in named tiles: {r.suggestion_residual}")
        if r.suggestion_note:
            out.append(f"search:    {r.suggestion_note}")
        return out
    # the note says it plainly: 'none for this line: ...', 'no single edit makes ...'
    return [f"suggested: {r.suggestion_note}"] if r.suggestion_note else []


def _coverage(r: Result):
    # results built before coverage existed (or by hand, in tests) have none
    return getattr(r, "coverage", None)


def summary(results: List[Result]) -> dict:
    out = OrderedDict(claims=len(results))
    for v in ("holds", "fails", "ill-formed", "error"):
        out[v] = sum(r.verdict == v for r in results)
    lit = [r for r in results if r.claim.corrected_of is None]
    cor = [r for r in results if r.claim.corrected_of is not None]
    out["literal_not_holding"] = sum(r.verdict != "holds" for r in lit)
    out["corrected"] = len(cor)
    out["corrected_not_holding"] = sum(r.verdict != "holds" for r in cor)
    return out


def render_json(results: List[Result], seconds: float, show: str = "all") -> str:
    # JSON is for programs: it always holds every claim, whatever --show says
    return json.dumps(OrderedDict(summary=summary(results), seconds=round(seconds, 2),
                                  coverage=groups_record(results),
                                  claims=[to_record(r) for r in results]),
                      ensure_ascii=False, indent=2, default=float)


# ---------------------------------------------------------------- summary lines

def _n(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def has_corrections(results: List[Result]) -> bool:
    return any(r.claim.corrected_of for r in results)


def count_line(results: List[Result], seconds: float) -> str:
    """'19 claims: 18 hold, 1 fails, 0 ill-formed (1.5 s)'; errors only when there are."""
    s = summary(results)
    parts = [_n(s["holds"], "holds", "hold"), _n(s["fails"], "fails", "fail"),
             f"{s['ill-formed']} ill-formed"]
    if s["error"]:
        parts.append(_n(s["error"], "cannot be evaluated", "cannot be evaluated"))
    return f"{_n(s['claims'], 'claim', 'claims')}: {', '.join(parts)} ({seconds:.1f} s)"


def corrections_line(results: List[Result]) -> str:
    """The literal / corrected split, only for derivations that have corrections
    (a user's own file usually has none, and the words would mean nothing there)."""
    if not has_corrections(results):
        return ""
    s = summary(results)
    others = s["claims"] - s["corrected"]

    def dont(k):
        return f"{k} {'does' if k == 1 else 'do'} not hold"
    return (f"corrections (<id>.corrected): {s['corrected']}, of which {dont(s['corrected_not_holding'])}; "
            f"the other {_n(others, 'claim', 'claims')} (the lines as written, and derived claims): "
            f"{dont(s['literal_not_holding'])}")


def not_holding(results: List[Result]) -> List[Result]:
    return [r for r in results if r.verdict != "holds"]


def _correction_of(results: List[Result]) -> dict:
    return {r.claim.corrected_of: r for r in results if r.claim.corrected_of}


def _short(s: str, width: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[:width - 3] + "..."


def problem_tail(r: Result, fixes: dict, width: int = 100) -> str:
    """Where a claim that does not hold is, what fixes it, and why it is ill-formed."""
    c = r.claim
    out = str(c.citation)
    if c.citation.what:
        out += f" ({c.citation.what})"
    fix = fixes.get(c.id)
    if fix is not None:
        out += f"; {fix.claim.id} {fix.verdict}"
    if r.verdict in ("ill-formed", "error") and r.message:
        out += f": {_short(r.message, width)}"
    return out


def problem_line(r: Result, fixes: dict, width: int = 100) -> str:
    return f"{MARK[r.verdict]:4s} {r.claim.id}  {problem_tail(r, fixes, width)}"


def summary_lines(results: List[Result], seconds: float) -> List[str]:
    lines = [count_line(results, seconds)]
    cl = corrections_line(results)
    if cl:
        lines.append(cl)
    bad = not_holding(results)
    if bad:
        fixes = _correction_of(results)
        lines.append(f"{_n(len(bad), 'claim does', 'claims do')} not hold:")
        lines += ["  " + problem_line(r, fixes) for r in bad]
    else:
        lines.append("every claim holds")
    cov = coverage_line(results)
    if cov:
        lines.append(cov)
    return lines


# ---------------------------------------------------------------- details

def _group(results):
    groups = OrderedDict()
    for r in results:
        groups.setdefault((r.claim.note, r.claim.derivation), []).append(r)
    return groups


def _selected(results: List[Result], show: str) -> List[Result]:
    if show not in ("failing", "all"):
        raise ValueError(f"show must be 'failing' or 'all', not {show!r}")
    return list(results) if show == "all" else not_holding(results)


def _details(r: Result) -> List[str]:
    out = []
    c = r.claim
    if c.corrected_of:
        out.append(f"corrects {c.corrected_of}: {c.why}")
    if r.message:
        out.append(r.message)
    m = r.mismatch
    if m is not None:
        where = f"chunk t={m.block}" + "".join(f", {k}={v}" for k, v in m.binding.items())
        ent = ", ".join(f"[{i},{j}] {a:g} vs {b:g}" for (i, j), a, b in zip(m.entries, m.lhs, m.rhs))
        out.append(f"smallest failing: {r.smallest or m.sizes}; seed {m.seed}; {where}; "
                   f"differing entries (left side vs formula, GF(p) centred): {ent}")
    if r.residual:
        out.append(f"residual: {r.residual}")
    if _coverage(r) is not None:
        out.append(_coverage(r).line())
    return out


NO_NOTE_LINE = "(not in the note: a derived claim)"


def render_table(results: List[Result], seconds: float, show: str = "failing", width=100) -> str:
    lines = summary_lines(results, seconds)
    shown = _selected(results, show)
    for (note, deriv), rs in _group(shown).items():
        lines += ["", f"== {note} ({variant_name(deriv)}) =="]
        for r in rs:
            c = r.claim
            lines.append(f"  {MARK[r.verdict]:4s} {c.id}  [{c.kind}]  {c.citation}"
                         + (f"  ({c.citation.what})" if c.citation.what else ""))
            # a claim that does not hold gets its formulas whole: the difference may
            # be anywhere in them
            cut = (lambda s: s) if r.verdict != "holds" else (lambda s: _short(s, width))
            lines.append(f"       note:     {cut(note_latex(r)) or NO_NOTE_LINE}")
            lines.append(f"       checked:  {cut(formula_latex(r))}")
            lines += [f"       {x}" for x in suggestion_lines(r)]
            lines.append(f"       evidence: {'; '.join(r.evidence)}")
            for d in _details(r):
                lines.append(f"       {d}")
    hidden = len(results) - len(shown)
    if hidden:
        lines += ["", f"({_n(hidden, 'claim that holds is', 'claims that hold are')} not listed; "
                      f"--show all lists them)"]
    return "\n".join(lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def inline_tex(tex: str) -> str:
    """A note's display line as one inline formula: alignment marks and row
    breaks of an aligned display mean nothing outside it."""
    out, i = [], 0
    while i < len(tex):
        if tex.startswith("\\\\", i):
            out.append(r"\quad ")
            i += 2
        elif tex[i] == "\\" and i + 1 < len(tex):
            out.append(tex[i:i + 2])
            i += 2
        elif tex[i] == "&":
            i += 1
        else:
            out.append(tex[i])
            i += 1
    return " ".join("".join(out).split())


def _md_suggestion(r: Result) -> str:
    if r.suggestion:
        out = f"${_md(inline_tex(r.suggestion))}$ **{VERIFIED if r.suggestion_verified else 'not verified'}**"
        if r.edit:
            out += f" ({_md(r.edit)})"
        if r.suggestion_residual:
            out += f"; residual: ${_md(inline_tex(r.suggestion_residual))}$"
        return out
    return _md(r.suggestion_note) if r.suggestion_note else ""


def render_markdown(results: List[Result], seconds: float, show: str = "all") -> str:
    lines = ["# chunkproof report", "", f"**{count_line(results, seconds)}**"]
    cl = corrections_line(results)
    if cl:
        lines += ["", cl[0].upper() + cl[1:] + "."]
    bad = not_holding(results)
    if bad:
        fixes = _correction_of(results)
        lines += ["", "Claims that do not hold:", ""]
        lines += [f"- **{r.verdict}** `{r.claim.id}` {_md(problem_tail(r, fixes))}" for r in bad]
    else:
        lines += ["", "Every claim holds."]
    cov = coverage_line(results)
    if cov:
        lines += ["", _md(cov[0].upper() + cov[1:]) + "."]
    shown = _selected(results, show)
    for (note, deriv), rs in _group(shown).items():
        lines += ["", f"## {note} ({variant_name(deriv)})", "",
                  "| claim | citation | note (LaTeX) | checked (printed from the IR) | suggested fix | "
                  "verdict | evidence | details |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rs:
            c = r.claim
            nt = note_latex(r)
            nt = f"${_md(inline_tex(nt))}$" if nt else NO_NOTE_LINE
            lines.append(f"| `{c.id}` | {_md(str(c.citation))} | {nt} | ${_md(inline_tex(formula_latex(r)))}$ | "
                         f"{_md_suggestion(r)} | "
                         f"**{r.verdict}** | {_md('; '.join(r.evidence))} | {_md(' / '.join(_details(r)))} |")
    hidden = len(results) - len(shown)
    if hidden:
        lines += ["", f"({_n(hidden, 'claim that holds is', 'claims that hold are')} not listed.)"]
    return "\n".join(lines)


def render(fmt: str, results: List[Result], seconds: float, show: str = "") -> str:
    """The text formats; html is report_html.render_html (it builds on this module)."""
    show = show or SHOW_DEFAULT[fmt]
    return {"table": render_table, "json": render_json,
            "markdown": render_markdown}[fmt](results, seconds, show=show)
