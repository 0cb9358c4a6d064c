"""codegen/schedule.py: a scan's loads that only its chunk step's second phase reads are
issued just before their first reader, and nothing else moves.  The printed kernels run
against the recurrence in tests/test_kernels.py and tests/test_scan_blocks.py."""
from chunkproof.codegen import schedule

HEAD = ["    b_s = tl.zeros([BV, BK], dtype=tl.float32)", "    for i_t in range(0, NT):"]
TAIL = ["", "        b_s = b_S", "    tl.store(ht + p_s, b_s, mask=m_s)"]


def _late(body):
    return schedule.late_loads("\n".join(HEAD + ["        " + ln for ln in body] + TAIL)).split("\n")


def _body(out):
    return [ln[8:] for ln in out[len(HEAD):len(out) - len(TAIL)]]


STEP = ["tl.store(h + p_s, b_s, mask=m_s)",          # the carried state: not a tile of this step
        "b_K = tl.load(k + p_t, mask=m_t, other=0.)",
        "b_Q = tl.load(q + p_t, mask=m_t, other=0.)",
        "if KP > 1:",
        "    b_W_k1 = tl.load(w + p_t,",
        "            mask=m_t, other=0.)",
        "b_U = tl.dot(b_K, tl.trans(b_s))",
        "tl.store(u + p_t, b_U)",                      # the step's first store of its own tile
        "# S = s + Q U",
        "b_S = b_s + tl.dot(tl.trans(b_U), b_Q)",
        "if KP > 1:",
        "    b_S_k1 = b_s_k1 - tl.dot(tl.trans(b_U), b_W_k1)"]


def test_a_load_only_the_second_phase_reads_moves_before_its_first_reader():
    out = _body(_late(STEP))
    assert sorted(out) == sorted(STEP)                 # nothing lost, nothing added
    assert out.index("b_K = tl.load(k + p_t, mask=m_t, other=0.)") < out.index("b_U = tl.dot(b_K, tl.trans(b_s))")
    assert out.index("b_K = tl.load(k + p_t, mask=m_t, other=0.)") == 1       # read in the first phase: stays
    q = out.index("b_Q = tl.load(q + p_t, mask=m_t, other=0.)")
    assert out.index("tl.store(u + p_t, b_U)") < q < out.index("# S = s + Q U")  # before the reader's comment
    w = out.index("    b_W_k1 = tl.load(w + p_t,")
    assert out[w - 1] == "if KP > 1:" and out[w + 1] == STEP[5]    # its lines go with it
    assert out.index("b_S = b_s + tl.dot(tl.trans(b_U), b_Q)") < w - 1 < out.index("    b_S_k1 = b_s_k1 - "
                                                                                   "tl.dot(tl.trans(b_U), b_W_k1)")


def test_without_a_store_of_its_own_tile_the_step_is_unchanged():
    step = [ln for ln in STEP if ln != "tl.store(u + p_t, b_U)"]
    assert _body(_late(step)) == step


def test_a_load_stays_where_moving_it_would_read_other_values():
    # its operand reassigned between (p_t), or its memory written between (q): not moved
    for between in ("p_t = p_t + BT", "tl.store(q + p_t, b_U)"):
        step = STEP[:8] + [between] + STEP[8:]
        out = _body(_late(step))
        assert out.index("b_Q = tl.load(q + p_t, mask=m_t, other=0.)") == 2, between
    assert _body(_late(STEP)).index("b_Q = tl.load(q + p_t, mask=m_t, other=0.)") != 2


def test_text_without_a_loop_is_unchanged():
    text = "    b_x = tl.load(x + p)\n    tl.store(y + p, b_x)"
    assert schedule.late_loads(text) == text


def test_the_bundled_reverse_scans_issue_their_second_phase_loads_late():
    # Gated DeltaNet's reverse scan stores dU, then reads dO, Q and W: as printed
    import inspect

    import chunkproof.kernels.gated_delta_rule as m
    src = inspect.getsource(m._dstateh_kernel.fn)
    store = src.index("tl.store(r_hr0")
    assert store < src.index("b_dO = tl.load(") and store < src.index("b_Q_k0 = tl.load(")
    assert src.index("b_K_k0 = tl.load(") < store
