"""The report as one standalone HTML page: rendered math, needing no network.

KaTeX (MIT, vendored unmodified in verify/html/katex/, see its LICENSE and VERSION)
is inlined into the page with its fonts as data: URLs, and a Content-Security-Policy
forbids every fetch, so a page that renders here renders anywhere, offline.  Without
JavaScript each formula still shows as its LaTeX source.
"""
from __future__ import annotations

import base64
import html
import re
from importlib import metadata, resources
from typing import List

from chunkproof.derivations.loader import variant_name
from .levels import Result
from .coverage import summary_line as coverage_line
from .report import (NO_NOTE_LINE, VERIFIED, _correction_of, _coverage, _group, _n, count_line,
                     corrections_line, formula_latex, note_latex, summary)

KATEX = resources.files("chunkproof.verify") / "html" / "katex"
# the page may run its own inline script and style and read fonts from data: URLs;
# anything that would go to a network is refused by the browser
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "font-src data:; img-src data:")

_FONT_SRC = re.compile(r'src:url\(fonts/([A-Za-z0-9_-]+)\.woff2\) format\("woff2"\)'
                       r'(?:,url\(fonts/[^)]*\) format\("[a-z]+"\))*')


def katex_css() -> str:
    """KaTeX's stylesheet with each font inlined as woff2 (every browser that runs
    KaTeX reads woff2; the woff and ttf fallbacks would only triple the page)."""
    css = (KATEX / "katex.min.css").read_text(encoding="utf-8")

    def inline(m):
        data = base64.b64encode((KATEX / "fonts" / f"{m.group(1)}.woff2").read_bytes()).decode("ascii")
        return f'src:url(data:font/woff2;base64,{data}) format("woff2")'

    css, n = _FONT_SRC.subn(inline, css)
    if n == 0 or "url(fonts/" in css:
        raise RuntimeError(f"{KATEX}/katex.min.css: its @font-face rules are not in the form this "
                           f"page inlines; the vendored KaTeX was changed")
    return css


def katex_js() -> str:
    js = (KATEX / "katex.min.js").read_text(encoding="utf-8")
    # a literal "</script" would end the inline script early
    return re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)


_UNESCAPED_AMP = re.compile(r"(?<!\\)&")


def display_tex(tex: str) -> str:
    """A note's line as KaTeX takes it: a row of an aligned display keeps its
    alignment marks and breaks, which are only legal inside an environment."""
    t = tex.strip()
    if (_UNESCAPED_AMP.search(t) or "\\\\" in t) and not t.startswith("\\begin"):
        return "\\begin{aligned}" + t + "\\end{aligned}"
    return t


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _math(tex: str, cls: str) -> str:
    if not tex:
        return f'<div class="nomath">{_e(NO_NOTE_LINE)}</div>'
    return f'<div class="math {cls}" data-tex="{_e(display_tex(tex))}">{_e(tex)}</div>'


def _entries_table(r: Result) -> str:
    m = r.mismatch
    rows = "".join(f"<tr><td>[{i},{j}]</td><td>{a:g}</td><td>{b:g}</td></tr>"
                   for (i, j), a, b in zip(m.entries, m.lhs, m.rhs))
    return ('<table class="entries"><thead><tr><th>entry</th><th>left side (truth)</th>'
            f'<th>formula</th></tr></thead><tbody>{rows}</tbody></table>')


def _suggestion_figure(r: Result) -> str:
    """The repair search's suggested line beside the two formulas.  Its math has a
    class of its own (rendered by SUGGESTION_RENDER), so that a card still has one
    note and one checked formula."""
    if not r.suggestion:
        return ""
    word = VERIFIED if r.suggestion_verified else "not verified"
    return (f'<figure class="suggestion"><figcaption>suggested fix <span class="sugg-mark">{word}</span>'
            f'</figcaption><div class="sugg-math" data-tex="{_e(r.suggestion)}">{_e(r.suggestion)}</div>'
            '</figure>')


def _suggestion_rows(r: Result) -> List[str]:
    out = []
    if r.edit:
        out.append(f"<dt>edit</dt><dd>{_e(r.edit)}</dd>")
    if r.suggestion_residual:
        out.append('<dt>residual in named tiles</dt><dd><div class="sugg-math" '
                   f'data-tex="{_e(r.suggestion_residual)}">{_e(r.suggestion_residual)}</div></dd>')
    if r.suggestion_note:
        label = "repair search" if r.suggestion else "suggested fix"
        out.append(f"<dt>{label}</dt><dd>{_e(r.suggestion_note)}</dd>")
    return out


def _card(i: int, r: Result, fixes: dict, by_id: dict) -> str:
    c = r.claim
    out = [f'<article class="claim {_e(r.verdict)}" id="c{i}" data-claim="{_e(c.id)}" '
           f'data-verdict="{_e(r.verdict)}">',
           f'<h3><span class="verdict">{_e(r.verdict)}</span> <code>{_e(c.id)}</code> '
           f'<span class="kind">{_e(c.kind)}</span></h3>',
           f'<p class="cite">{_e(c.citation)}'
           + (f' <span class="what">({_e(c.citation.what)})</span>' if c.citation.what else "") + "</p>"]
    if c.corrected_of:
        target = by_id.get(c.corrected_of)
        ref = f'<a href="#c{target}">{_e(c.corrected_of)}</a>' if target is not None else _e(c.corrected_of)
        out.append(f'<p class="corrects">corrects {ref}: {_e(c.why)}</p>')
    fix = fixes.get(c.id)
    if fix is not None:
        j = by_id.get(fix.claim.id)
        ref = f'<a href="#c{j}">{_e(fix.claim.id)}</a>' if j is not None else _e(fix.claim.id)
        out.append(f'<p class="fixed">corrected by {ref}, which {_e(fix.verdict)}</p>')
    note_caption = ("the note, as written (the line this corrects)" if c.corrected_of
                    else "the note, as written")
    out.append('<div class="formulas">'
               f'<figure><figcaption>{note_caption}</figcaption>{_math(note_latex(r), "note")}</figure>'
               f'<figure><figcaption>checked (printed from the IR)</figcaption>'
               f'{_math(formula_latex(r), "checked")}</figure>{_suggestion_figure(r)}</div>')
    dl = [f"<dt>evidence</dt><dd><ul>{''.join(f'<li>{_e(ev)}</li>' for ev in r.evidence)}</ul></dd>"]
    if r.float_error is not None:
        dl.append(f"<dt>float64 rel. error</dt><dd>{r.float_error:.1e}</dd>")
    if r.message:
        dl.append(f"<dt>message</dt><dd>{_e(r.message)}</dd>")
    m = r.mismatch
    if m is not None:
        where = f"chunk t={m.block}" + "".join(f", {k}={v}" for k, v in m.binding.items())
        dl.append(f"<dt>smallest failing</dt><dd>{_e(r.smallest or m.sizes)}; seed {m.seed}; {_e(where)}</dd>")
        dl.append(f"<dt>differing entries</dt><dd>{_entries_table(r)}"
                  f'<p class="small">GF(2<sup>31</sup>&minus;1) values, centred</p></dd>')
    if r.residual:
        dl.append(f'<dt>residual</dt><dd><pre class="residual">{_e(r.residual)}</pre></dd>')
    dl += _suggestion_rows(r)
    if c.assume:
        dl.append(f"<dt>assumes</dt><dd>{_e(', '.join(c.assume))}</dd>")
    if _coverage(r) is not None:
        dl.append(f'<dt>coverage</dt><dd class="coverage">{_e(_coverage(r).line())}</dd>')
    out.append(f'<dl>{"".join(dl)}</dl></article>')
    return "\n".join(out)


STYLE = """
:root { --fail: #b3261e; --ill: #9a5b00; --ok: #1e6b35; --line: #d7d7de; --soft: #f5f5f8; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1b1b1f; }
.page { max-width: 1400px; margin: 0 auto; padding: 0 24px 24px; }
header { padding-top: 18px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 10px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0; }
.counts { font-size: 17px; margin: 6px 0; }
.counts b.fails, .counts b.ill-formed, .counts b.error { color: var(--fail); }
.counts b.holds { color: var(--ok); }
.sub { color: #555; margin: 2px 0; }
table { border-collapse: collapse; }
table.overview td, table.overview th, table.entries td, table.entries th {
  border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
table.overview th, table.entries th { background: var(--soft); }
table.entries td { font-family: ui-monospace, monospace; }
.claim { border: 1px solid var(--line); border-left: 6px solid var(--ok); border-radius: 6px;
  padding: 10px 14px; margin: 12px 0; background: #fff; }
.claim.fails, .claim.error { border-left-color: var(--fail); }
.claim.ill-formed { border-left-color: var(--ill); }
.verdict { display: inline-block; min-width: 70px; text-align: center; border-radius: 4px;
  padding: 1px 6px; color: #fff; background: var(--ok); font-size: 13px; }
.fails .verdict, .error .verdict, .v-fails, .v-error { background: var(--fail); }
.ill-formed .verdict, .v-ill-formed { background: var(--ill); }
span.v, .verdict { white-space: nowrap; }
span.v { display: inline-block; border-radius: 4px; padding: 0 6px; color: #fff; font-size: 13px; }
table.problems td.reason { font-size: 13px; color: #444; max-width: 40em; }
.what { color: #555; }
.kind { color: #555; font-weight: normal; font-size: 13px; }
.cite, .corrects, .fixed { margin: 4px 0; color: #333; }
.corrects, .fixed { font-style: italic; }
.formulas { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; margin: 8px 0; }
figure { margin: 0; min-width: 0; background: var(--soft); border-radius: 4px; padding: 6px 10px; }
figcaption { font-size: 12px; color: #555; text-transform: uppercase; letter-spacing: .03em; }
.math { overflow-x: auto; overflow-y: hidden; font-family: ui-monospace, monospace; font-size: 14px; }
.math .katex-display { margin: 6px 0; text-align: left; }
.math .katex-display > .katex { text-align: left; }
.nomath { color: #666; font-style: italic; padding: 6px 0; }
.math-failed { white-space: pre-wrap; padding: 6px 0; }
.math-why { font-family: system-ui, sans-serif; font-size: 12px; color: var(--ill); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0 0; }
dt { color: #555; }
dd { margin: 0; min-width: 0; }
dd ul { margin: 0; padding-left: 18px; }
pre.residual { margin: 0; white-space: pre-wrap; word-break: break-all; max-height: 16em; overflow: auto;
  background: var(--soft); padding: 4px 8px; border-radius: 4px; }
.small { font-size: 12px; color: #666; margin: 2px 0; }
#hide-holding { margin: 16px 4px 0 0; }
label.toggle { margin: 16px 0 0; }
#hide-holding:checked ~ main #holding { display: none; }
@media (max-width: 900px) { .formulas { grid-template-columns: 1fr; } }
figure.suggestion { grid-column: 1 / -1; background: #eef6ef; }
.sugg-mark { background: var(--ok); color: #fff; border-radius: 4px; padding: 0 5px; text-transform: none; }
.sugg-math { overflow-x: auto; overflow-y: hidden; font-family: ui-monospace, monospace; font-size: 14px; }
"""

# The suggested lines and residuals, rendered like the formulas; a failure is shown
# and marked the same way (class math-failed), but they are not counted with them.
SUGGESTION_RENDER = """
(function () {
  "use strict";
  document.querySelectorAll(".sugg-math[data-tex]").forEach(function (el) {
    var source = el.textContent;
    try {
      katex.render(el.getAttribute("data-tex"), el,
                   {displayMode: true, throwOnError: true, strict: "ignore", trust: false});
    } catch (e) {
      el.textContent = source;
      el.classList.add("math-failed");
      el.setAttribute("data-error", String(e && e.message || e));
    }
  });
})();
"""

RENDER = """
(function () {
  "use strict";
  var body = document.body, rendered = 0, failed = 0;
  document.querySelectorAll(".math[data-tex]").forEach(function (el) {
    var source = el.textContent;
    try {
      katex.render(el.getAttribute("data-tex"), el,
                   {displayMode: true, throwOnError: true, strict: "ignore", trust: false});
      rendered++;
    } catch (e) {
      // keep the source readable (it is still the element's text) and say why
      failed++;
      el.textContent = source;
      el.classList.add("math-failed");
      el.setAttribute("data-error", String(e && e.message || e));
      var why = document.createElement("div");
      why.className = "math-why";
      why.textContent = "KaTeX cannot render this LaTeX: " + el.getAttribute("data-error");
      el.appendChild(why);
    }
  });
  // what a headless browser reads back to know the formulas rendered
  body.setAttribute("data-math-rendered", String(rendered));
  body.setAttribute("data-math-errors", String(failed + document.querySelectorAll(".katex-error").length));
  if (document.fonts) {
    document.fonts.ready.then(function () {
      var fams = {};
      document.fonts.forEach(function (f) {
        if (f.status === "loaded") { fams[f.family.replace(/["']/g, "")] = 1; }
      });
      body.setAttribute("data-fonts-loaded", Object.keys(fams).sort().join(" "));
    });
  }
})();
"""


def _version() -> str:
    try:
        return metadata.version("chunkproof")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def render_html(results: List[Result], seconds: float, show: str = "all") -> str:
    if show not in ("failing", "all"):
        raise ValueError(f"show must be 'failing' or 'all', not {show!r}")
    fixes = _correction_of(results)
    by_id = {}
    for i, r in enumerate(results):
        by_id.setdefault(r.claim.id, i)
    bad = [(i, r) for i, r in enumerate(results) if r.verdict != "holds"]
    good = [(i, r) for i, r in enumerate(results) if r.verdict == "holds"]

    s = summary(results)
    parts = [f'<b class="{"holds" if s["holds"] else ""}">{_n(s["holds"], "holds", "hold")}</b>',
             f'<b class="{"fails" if s["fails"] else ""}">{_n(s["fails"], "fails", "fail")}</b>',
             f'<b class="{"ill-formed" if s["ill-formed"] else ""}">{s["ill-formed"]} ill-formed</b>']
    if s["error"]:
        parts.append(f'<b class="error">{s["error"]} cannot be evaluated</b>')
    counts = f'{_n(s["claims"], "claim", "claims")}: {", ".join(parts)} ({seconds:.1f} s)'
    head = [f'<p class="counts">{counts}</p>']
    cl = corrections_line(results)
    if cl:
        head.append(f'<p class="sub">{_e(cl[0].upper() + cl[1:])}.</p>')
    cov = coverage_line(results)
    if cov:
        head.append(f'<p class="sub coverage">{_e(cov[0].upper() + cov[1:])}.</p>')
    head.append(f'<p class="sub">chunkproof {_e(_version())}. Each claim shows the note\'s '
                f'LaTeX beside the formula that was checked, printed from its encoding.</p>')

    per_note = []
    for (note, deriv), rs in _group(results).items():
        k = {v: sum(r.verdict == v for r in rs) for v in ("holds", "fails", "ill-formed", "error")}
        per_note.append(f"<tr><td>{_e(note)}</td><td>{_e(variant_name(deriv))}</td><td>{len(rs)}</td>"
                        f"<td>{k['holds']}</td><td>{k['fails']}</td><td>{k['ill-formed']}</td>"
                        f"<td>{k['error']}</td></tr>")
    head.append('<table class="overview"><thead><tr><th>note</th><th>variant</th><th>claims</th>'
                '<th>hold</th><th>fail</th><th>ill-formed</th><th>errors</th></tr></thead>'
                f'<tbody>{"".join(per_note)}</tbody></table>')
    if bad:
        rows = []
        for i, r in bad:
            c = r.claim
            fix = fixes.get(c.id)
            fixed = ("" if fix is None else
                     f'<a href="#c{by_id[fix.claim.id]}"><code>{_e(fix.claim.id)}</code></a> {_e(fix.verdict)}')
            reason = _e(r.message) if r.verdict in ("ill-formed", "error") else _e(r.smallest)
            rows.append(f'<tr><td><span class="v v-{_e(r.verdict)}">{_e(r.verdict)}</span></td>'
                        f'<td><a href="#c{i}"><code>{_e(c.id)}</code></a></td>'
                        f'<td>{_e(c.citation)}' + (f' <span class="what">({_e(c.citation.what)})</span>'
                                                   if c.citation.what else "")
                        + f'</td><td>{fixed}</td><td class="reason">{reason}</td></tr>')
        head.append(f'<h2>{_n(len(bad), "claim does", "claims do")} not hold</h2>'
                    '<table class="overview problems"><thead><tr><th>verdict</th><th>claim</th>'
                    '<th>where</th><th>correction</th><th>why ill-formed / smallest failing sizes</th>'
                    f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    else:
        head.append("<h2>Every claim holds</h2>")

    body = []
    if bad:
        body.append('<section id="failing"><h2>Claims that do not hold, in detail</h2>')
        body += [_card(i, r, fixes, by_id) for i, r in bad]
        body.append("</section>")
    if show == "all" and good:
        body.append(f'<section id="holding"><h2>{_n(len(good), "claim holds", "claims hold")}</h2>')
        groups = {}
        for i, r in good:
            groups.setdefault((r.claim.note, r.claim.derivation), []).append((i, r))
        for (note, deriv), rs in groups.items():
            body.append(f"<h3 class=\"group\">{_e(note)} ({_e(variant_name(deriv))})</h3>")
            body += [_card(i, r, fixes, by_id) for i, r in rs]
        body.append("</section>")
    elif good:
        body.append(f'<p class="sub">{_n(len(good), "claim that holds is", "claims that hold are")} '
                    f'not listed (--show all lists them).</p>')
    toggle = ('<input type="checkbox" id="hide-holding"> <label class="toggle" for="hide-holding">'
              'hide the claims that hold</label>' if show == "all" and good else "")
    # the checkbox must precede main for the CSS sibling selector
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>chunkproof report: {_e(re.sub(r' [(].*', '', count_line(results, seconds)))}</title>",
        f"<style>{katex_css()}</style>",
        f"<style>{STYLE}</style>",
        "</head><body>",
        '<div class="page">',
        "<header><h1>chunkproof report</h1>", *head, "</header>",
        toggle,
        "<main>", *body, "</main>",
        "</div>",
        f"<script>{katex_js()}</script>",
        f"<script>{RENDER}</script>",
        f"<script>{SUGGESTION_RENDER}</script>",
        "</body></html>",
    ])
