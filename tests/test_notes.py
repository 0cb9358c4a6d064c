"""Claims quote the notes verbatim and cite where the line is."""
import os
import re

import pytest

from tests.helpers import all_claims

NOTES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "derivations", "notes")


def _squash(s):
    return re.sub(r"\s+", "", s)


def _note(name):
    with open(os.path.join(NOTES, name), encoding="utf-8") as fh:
        return fh.read()


BUNDLED = [(d, c) for d, c in all_claims() if os.path.exists(os.path.join(NOTES, c.note))]


@pytest.mark.parametrize("deriv,claim", BUNDLED, ids=[c.id for _, c in BUNDLED])
def test_latex_is_verbatim_and_citation_points_at_it(deriv, claim):
    text = _note(claim.note)
    lines = text.split("\n")
    cite = claim.citation
    assert cite.section, f"{claim.id}: no section"
    if not claim.latex:  # derived claims of the project (no note line) say so
        assert cite.what.startswith("derived") or claim.corrected_of, claim.id
        return
    assert _squash(claim.latex) in _squash(text), f"{claim.id}: LaTeX not found in {claim.note}"
    assert 1 <= cite.line <= len(lines), f"{claim.id}: line {cite.line} outside the note"
    # the quoted row starts on the cited line or within the display that begins there
    window = _squash("\n".join(lines[cite.line - 1: cite.line + 40]))
    assert _squash(claim.latex)[:40] in window, f"{claim.id}: not at line {cite.line}"
    assert _squash(cite.section.split(" ")[0]) in _squash(text), f"{claim.id}: unknown section"


def test_bundled_notes_are_the_shared_ones():
    for name in os.listdir(NOTES):
        assert re.match(r"^\d{3}_[0-9a-f]{16}\.txt$", name), name
