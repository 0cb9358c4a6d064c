"""`--format html`: one standalone page, formulas rendered offline.

The page's structure is checked in Python always; when Debian's chromium is
installed (/usr/bin/chromium, or $CHROMIUM; .ci/run installs it), the page is also
loaded headless and the DOM read back after its scripts ran, to see that every
formula rendered and that the fonts came from the page itself.

    python tests/test_report_html.py --screenshot docs/report_html.png

re-takes the screenshot committed with the docs.
"""
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# no network, no profile left behind, nothing that phones home
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--virtual-time-budget=15000"]
TARGET = "tests/data/wrong_dK.py"   # the claims of the mamba2 example and one typo
# one xdist worker renders the module's page once for all its tests
pytestmark = pytest.mark.xdist_group("report_html")


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


class Dom(html.parser.HTMLParser):
    """Just enough of a DOM: every element with its attributes, its ancestors'
    indices, and the text inside it."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.els, self.stack = [], []
        self.feed(text)

    VOID = {"meta", "link", "br", "img", "input", "hr", "col", "source", "wbr", "area", "base",
            "embed", "param", "track"}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        el = dict(tag=tag, attrs=a, classes=set((a.get("class") or "").split()),
                  parents=list(self.stack), text=[])
        self.els.append(el)
        if tag not in self.VOID:
            self.stack.append(len(self.els) - 1)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        for k in range(len(self.stack) - 1, -1, -1):
            if self.els[self.stack[k]]["tag"] == tag:
                del self.stack[k:]
                break

    def handle_data(self, data):
        for i in self.stack:
            self.els[i]["text"].append(data)

    def find(self, tag=None, cls=None, inside=None):
        return [e for i, e in enumerate(self.els)
                if (tag is None or e["tag"] == tag) and (cls is None or cls in e["classes"])
                and (inside is None or inside in e["parents"])]

    def index(self, el):
        return self.els.index(el)

    @staticmethod
    def text(el):
        return "".join(el["text"])


def render(target, out, *extra):
    code, _, err = _cli("verify", target, "--format", "html", "-o", out, "-q", *extra)
    assert code in (0, 1) and "Traceback" not in err and os.path.exists(out), err
    with open(out, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    path = str(d / "report.html")
    text = render(TARGET, path, "--no-float")
    code, out, err = _cli("verify", TARGET, "--format", "json", "-q", "--no-float")
    assert code == 1, err
    return path, text, json.loads(out)


def test_one_file_that_needs_no_network(page):
    _, text, _ = page
    dom = Dom(text)
    assert text.startswith("<!DOCTYPE html>")
    assert len(dom.find("html")) == 1 and len(dom.find("body")) == 1
    assert not dom.find("link") and not dom.find("iframe") and not dom.find("img")
    assert all("src" not in e["attrs"] for e in dom.find("script"))
    # every url() of the inlined stylesheets is a data: URL (KaTeX's fonts)
    urls = re.findall(r"url\(([^)]*)\)", text)
    assert urls and all(u.strip("'\"").startswith("data:") for u in urls), \
        [u[:40] for u in urls if not u.strip("'\"").startswith("data:")]
    (csp,) = [e for e in dom.find("meta") if e["attrs"].get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp["attrs"]["content"]
    assert "katex" in "".join(Dom.text(e) for e in dom.find("script"))


def test_failing_claims_first_with_both_formulas_verdicts_residual_and_entries(page):
    from chunkproof.verify.report_html import display_tex
    _, text, data = page
    dom = Dom(text)
    recs = {r["id"]: r for r in data["claims"]}
    cards = dom.find("article", "claim")
    assert len(cards) == len(recs) == data["summary"]["claims"] > 5
    verdicts = [c["attrs"]["data-verdict"] for c in cards]
    assert verdicts[0] == "fails" and cards[0]["attrs"]["data-claim"] == "mamba2.dK.typo"
    assert verdicts == sorted(verdicts, key=lambda v: v == "holds"), "failing claims come first"
    for card in cards:
        rec = recs[card["attrs"]["data-claim"]]
        i = dom.index(card)
        note = dom.find(cls="note", inside=i)
        checked = dom.find(cls="checked", inside=i)
        assert len(note) == len(checked) == 1
        # the note's LaTeX and the formula printed from the IR, side by side
        assert note[0]["attrs"]["data-tex"] == display_tex(rec["latex"])
        assert checked[0]["attrs"]["data-tex"] == display_tex(rec["formula"])
        assert rec["verdict"] in Dom.text(dom.find(cls="verdict", inside=i)[0])
    first = dom.index(cards[0])
    typo = recs["mamba2.dK.typo"]
    assert typo["residual"] in Dom.text(dom.find("pre", "residual", inside=first)[0])
    rows = dom.find("tr", inside=dom.index(dom.find("table", "entries", inside=first)[0]))
    cells = [Dom.text(c) for c in dom.find("td", inside=dom.index(rows[1]))]
    i, j = typo["mismatch"]["entries"][0]
    assert cells[0] == f"[{i},{j}]" and cells[1] == f"{typo['mismatch']['lhs'][0]:g}"
    header = Dom.text(dom.find("header")[0])
    n = data["summary"]["claims"]
    assert f"{n} claims: {n - 1} hold, 1 fails, 0 ill-formed" in header
    # a user's file without corrections is told holds / fails / ill-formed, nothing more
    assert "literal" not in header and "corrected" not in header


def test_show_failing_lists_only_claims_that_do_not_hold(tmp_path):
    text = render(TARGET, str(tmp_path / "f.html"), "--no-float", "--show", "failing")
    cards = Dom(text).find("article", "claim")
    assert [c["attrs"]["data-verdict"] for c in cards] == ["fails"]
    assert re.search(r"\d+ claims that hold are not listed", text)


def test_display_tex_wraps_aligned_rows():
    from chunkproof.verify.report_html import display_tex
    assert display_tex(r"a &= b ") == r"\begin{aligned}a &= b\end{aligned}"
    assert display_tex(r"a \& b") == r"a \& b"
    assert display_tex(r"\begin{aligned} a &= b \end{aligned}").startswith(r"\begin{aligned} a")


def chromium(args, tmp):
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}", *args],
                          capture_output=True, text=True, timeout=180)


needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} not installed (Debian: apt-get install chromium; .ci/run installs it): "
           f"the rendered formulas are not checked, only the page's structure")


@needs_chromium
def test_formulas_render_in_headless_chromium(page, tmp_path):
    path, text, _ = page
    p = chromium(["--dump-dom", "file://" + path], str(tmp_path / "profile"))
    assert p.returncode == 0, p.stderr[-2000:]
    dom = Dom(p.stdout)
    (body,) = dom.find("body")
    before = Dom(text)
    n_math = len(before.find(cls="math"))
    assert n_math == 2 * len(before.find("article")) - len(before.find(cls="nomath")) > 0
    errors = [f"{e['attrs'].get('data-error')}: {e['attrs'].get('data-tex')}"
              for e in dom.find(cls="math-failed")]
    errors += [f"{e['attrs'].get('title', '')}: {Dom.text(e)}" for e in dom.find(cls="katex-error")]
    assert not errors and body["attrs"].get("data-math-errors") == "0", \
        "formulas KaTeX could not render:\n" + "\n".join(errors)
    assert body["attrs"].get("data-math-rendered") == str(n_math), body["attrs"]
    assert len(dom.find(cls="katex")) >= n_math
    # the fonts can only have come from the page: its policy refuses every fetch
    fonts = body["attrs"].get("data-fonts-loaded", "").split()
    assert "KaTeX_Main" in fonts and "KaTeX_Math" in fonts, fonts


def screenshot(out, targets=(TARGET,), width=1280, height=1500):
    """Render the report on ``targets`` and photograph it with headless chromium."""
    with tempfile.TemporaryDirectory() as tmp:
        page_path = os.path.join(tmp, "report.html")
        code, _, err = _cli("verify", *targets, "--format", "html", "-o", page_path, "-q")
        assert code in (0, 1), err
        p = chromium([f"--window-size={width},{height}", f"--screenshot={os.path.abspath(out)}",
                      "file://" + page_path], os.path.join(tmp, "profile"))
        assert p.returncode == 0 and os.path.exists(out), p.stderr[-2000:]


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--screenshot":
        screenshot(sys.argv[2], tuple(sys.argv[3:]) or (TARGET,))
        print(f"wrote {sys.argv[2]}")
    else:
        sys.exit(__doc__)
