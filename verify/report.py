"""Render check results as a table, JSON or Markdown."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import List

from chunkproof.derivations.latex import to_latex
from .check import Result

MARK = {"holds": "ok", "fails": "FAIL", "ill-formed": "ILL", "error": "ERR"}


def formula_latex(r: Result) -> str:
    c = r.claim
    try:
        return f"{to_latex(c.lhs)} = {to_latex(c.rhs)}"
    except Exception as e:  # noqa: BLE001 - printing must not hide the verdict
        return f"(cannot print: {e})"


def to_record(r: Result) -> dict:
    c = r.claim
    m = r.mismatch
    return OrderedDict(
        id=c.id,
        note=c.citation.note,
        derivation=c.derivation,
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
        seconds=round(r.seconds, 4),
    )


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


def render_json(results: List[Result], seconds: float) -> str:
    return json.dumps(OrderedDict(summary=summary(results), seconds=round(seconds, 2),
                                  claims=[to_record(r) for r in results]),
                      ensure_ascii=False, indent=2, default=float)


def _group(results):
    groups = OrderedDict()
    for r in results:
        groups.setdefault((r.claim.note, r.claim.derivation), []).append(r)
    return groups


def _shown_formula(r: Result) -> str:
    """The note's own LaTeX for a literal claim; the fixed formula, printed from
    the IR, for a correction (the note's line is the literal claim's)."""
    c = r.claim
    if c.corrected_of or not c.latex:
        return formula_latex(r)
    return c.latex


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
    return out


def render_table(results: List[Result], seconds: float, width=100) -> str:
    lines = []
    for (note, deriv), rs in _group(results).items():
        src = rs[0].claim.derivation
        lines.append(f"== {note} ({src}) ==")
        for r in rs:
            c = r.claim
            lines.append(f"  {MARK[r.verdict]:4s} {c.id}  [{c.kind}]  {c.citation}"
                         + (f"  ({c.citation.what})" if c.citation.what else ""))
            tex = _shown_formula(r)
            lines.append(f"       {tex if len(tex) <= width else tex[:width - 3] + '...'}")
            ev = "; ".join(r.evidence)
            lines.append(f"       evidence: {ev}")
            for d in _details(r):
                lines.append(f"       {d}")
        lines.append("")
    s = summary(results)
    lines.append(f"{s['claims']} claims: {s['holds']} hold, {s['fails']} fail, "
                 f"{s['ill-formed']} ill-formed, {s['error']} errors; "
                 f"{s['literal_not_holding']} literal claims do not hold, "
                 f"{s['corrected_not_holding']} of {s['corrected']} corrected claims do not hold "
                 f"({seconds:.1f} s)")
    return "\n".join(lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(results: List[Result], seconds: float) -> str:
    lines = ["# chunkproof report", ""]
    for (note, deriv), rs in _group(results).items():
        lines += [f"## {note}", "", "| claim | citation | formula (note) | verdict | evidence | details |",
                  "|---|---|---|---|---|---|"]
        for r in rs:
            c = r.claim
            tex = _shown_formula(r)
            lines.append(f"| `{c.id}` | {_md(str(c.citation))} | ${_md(tex)}$ | **{r.verdict}** | "
                         f"{_md('; '.join(r.evidence))} | {_md(' / '.join(_details(r)))} |")
        lines.append("")
    s = summary(results)
    lines.append(f"**{s['claims']} claims**: {s['holds']} hold, {s['fails']} fail, "
                 f"{s['ill-formed']} ill-formed, {s['error']} errors ({seconds:.1f} s).")
    return "\n".join(lines)
