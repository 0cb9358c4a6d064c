"""Coverage of tiles stated in pieces: whether the pieces of a tile (i > j, i = j,
t != tau, blocks='not_last') cover what the program needs, and which entries are left.
Coverage is information: verdicts never depend on it."""
import json

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import DO, S_PREV, Derivation, Notebook, Program, adj, row, shift, tile, tril
from chunkproof.derivations.loader import bundled
from chunkproof.verify import coverage as cov
from chunkproof.verify.check import check
from chunkproof.verify.levels import EXACT_SIZES
from chunkproof.verify.report import render, to_record

Q, K = tile("Q", "C", "Dk"), tile("K", "C", "Dk")
V = tile("V", "C", "Dv")
QK = Q @ K.T


def _derivation():
    d = Derivation("cov_test", "coverage", "cov")
    d.add_recurrence(R.linear_attention())
    P = Program("la_cov", "chunk")
    X = P.define("X", QK)                 # every entry may be nonzero
    XL = P.define("XL", tril(QK))         # zero above the diagonal by construction
    P.define("O", Q @ S_PREV.T + XL @ V)
    S = P.define("S", S_PREV + V.T @ K)
    d.add_program(P, recurrence="linear_attention")
    return d, X, XL, S


def _entry(t, i, j):
    """Entry (i, j) of t, 1-based: row i of column j."""
    return row(row(t.T, j), i)


def _covers_in_pieces():
    d, X, XL, _ = _derivation()
    nb = Notebook(d, "cov").section("pieces")
    nb.identity("c.XL_below", "", _entry(XL, "i", "j"), _entry(QK, "i", "j"), "la_cov",
                over=(("i", "2", "C"), ("j", "1", "i-1")))
    nb.identity("c.XL_diag", "", _entry(XL, "i", "i"), _entry(QK, "i", "i"), "la_cov",
                over=(("i", "1", "C"),))
    return d


def _below_only():
    d, X, _, _ = _derivation()
    nb = Notebook(d, "cov").section("pieces")
    nb.identity("u.X_below", "", tril(X, "M-1"), tril(QK, "M-1"), "la_cov")
    return d


def test_pieces_below_and_on_the_diagonal_cover_a_lower_triangular_tile():
    d = _covers_in_pieces()
    g = cov.groups(d, EXACT_SIZES)
    assert set(g) == {"c.XL_below", "c.XL_diag"}
    c = g["c.XL_below"]
    assert c is g["c.XL_diag"]
    assert c.tile == "XL" and c.program == "la_cov"
    assert c.pieces == ["c.XL_below", "c.XL_diag"]
    assert c.covered and c.uncovered == "" and c.overlaps == []
    assert "covers the tile" in c.line()


def test_the_diagonal_alone_leaves_the_entries_below():
    d, _, XL, _ = _derivation()
    Notebook(d, "cov").section("s").identity("d.XL_diag", "", _entry(XL, "i", "i"), _entry(QK, "i", "i"),
                                             "la_cov", over=(("i", "1", "C"),))
    c = cov.groups(d, EXACT_SIZES)["d.XL_diag"]
    # XL is zero above the diagonal by construction: only the entries below are needed
    assert not c.covered
    assert c.uncovered == "the entries below the diagonal in every chunk"


def test_below_the_diagonal_only_leaves_the_diagonal_and_above():
    d = _below_only()
    c = cov.groups(d, EXACT_SIZES)["u.X_below"]
    assert c.tile == "X" and c.pieces == ["u.X_below"]
    assert not c.covered
    assert c.uncovered == "the diagonal and above in every chunk"
    assert "leaves entries uncovered: the diagonal and above" in c.line()


def test_three_pieces_cover_a_full_tile_and_the_rest_is_named_when_one_is_dropped():
    d, X, _, _ = _derivation()
    nb = Notebook(d, "cov").section("s")
    nb.identity("f.below", "", tril(X, "M-1"), tril(QK, "M-1"), "la_cov")
    nb.identity("f.diag", "", ir.DiagV(X), ir.DiagV(QK), "la_cov")
    nb.identity("f.above", "", tril(X.T, "M-1"), tril(QK.T, "M-1"), "la_cov")
    assert cov.groups(d, EXACT_SIZES)["f.diag"].covered
    d.claims = [c for c in d.claims if c.id != "f.above"]
    c = cov.groups(d, EXACT_SIZES)["f.diag"]
    assert not c.covered and c.uncovered == "the entries above the diagonal in every chunk"


def test_rows_and_chunks_left_out_are_named():
    d, X, _, S = _derivation()
    nb = Notebook(d, "cov").section("s")
    nb.identity("r.X_rows", "", row(X, "r"), row(QK, "r"), "la_cov", over=(("r", "1", "C-1"),))
    nb.adjoint("r.dS", "", adj(S), shift(adj(S)) + shift(DO).T @ shift(Q), "la_cov", blocks="not_last")
    g = cov.groups(d, EXACT_SIZES)
    assert g["r.X_rows"].uncovered == f"row {EXACT_SIZES.C} (the last) in every chunk"
    assert g["r.dS"].tile == "δS"
    assert g["r.dS"].uncovered == f"all of chunk {EXACT_SIZES.N - 1} (the last)"


def test_a_whole_tile_claim_has_nothing_to_report():
    d, X, _, _ = _derivation()
    Notebook(d, "cov").section("s").identity("w.X", "", X, QK, "la_cov")
    assert cov.groups(d, EXACT_SIZES) == {}
    assert check(d, d.claims[0], floats=False).coverage is None


def test_describe_names_sub_chunk_blocks():
    n, T = 6, 2
    r, c = np.indices((n, n))
    need = np.ones((1, n, n), bool)
    above_blocks = ((r // T) < (c // T))[None]
    assert cov.describe(above_blocks, need, T) == "the sub-chunk blocks above the diagonal (bi < bj) in every chunk"
    one_block = np.zeros((1, n, n), bool)
    one_block[0, 2:4, 2:4] = True
    assert cov.describe(one_block, need, T) == "sub-chunk block (1,1) in every chunk"
    rows = np.zeros((3, n, n), bool)
    rows[0, :2] = True
    assert cov.describe(rows, np.ones((3, n, n), bool), T) == "rows 1..2 in chunk 0 (the first)"


def test_coverage_is_information_and_reaches_every_format():
    d = _below_only()
    d.claims[0].rhs = tril(QK.T, "M-1")          # now false: the verdict is the checker's alone
    res = check(d, d.claims[0], floats=False, diagnose=False)
    assert res.verdict == "fails"
    assert res.coverage is not None and not res.coverage.covered
    rec = to_record(res)["coverage"]
    assert rec["covered"] is False and rec["pieces"] == ["u.X_below"]
    assert rec["uncovered"] == "the diagonal and above in every chunk"
    assert rec["about"] == "information, not a verdict"
    doc = json.loads(render("json", [res], 0.0))
    assert doc["coverage"] == [rec]
    table = render("table", [res], 0.0)
    assert "leaves entries uncovered: the diagonal and above" in table
    assert "information, not a verdict" in table
    assert "leaves entries uncovered" in render("markdown", [res], 0.0)


def test_bundled_piecewise_sub_chunk_claims():
    """Note 003's P_[t][tau], stated case by case (t = tau with i > j, t > tau, and the
    literal t != tau that its correction restates): one group, whatever it finds."""
    gla = next(d for d in bundled() if d.name == "gla")
    g = cov.groups(gla, EXACT_SIZES)
    c = g["gla.P_case1"]
    for cid in ("gla.P_case2", "gla.P_case2.corrected", "gla.P_case2_log"):
        assert g[cid] is c
    assert c.program == "gla_chunk"
    assert "gla.P_case1" in c.pieces and "gla.P_case2.corrected" in c.pieces
    # the literal line counts through its correction, never as a piece of its own
    assert c.superseded == ["gla.P_case2"] and "gla.P_case2" not in c.pieces
    assert c.covered == (c.uncovered == "")
    if not c.covered:
        assert c.uncovered.endswith("in every chunk") or "chunk" in c.uncovered
    # P's definition over every block is its own group (the masked tile, all blocks)
    assert g["gla.P_def"] is not c and g["gla.P_def"].pieces == ["gla.P_def"]
    # whole-tile claims and claims on the recurrence's truths have no coverage
    assert "gla.O" not in g and "gla.Gamma_def" not in g
    for cid, one in g.items():
        assert cid in one.pieces or cid in one.superseded
