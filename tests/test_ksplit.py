"""codegen/ksplit.py: a scan's printed statements cut into K pieces, and what it refuses
(the kernel is then printed whole, saying why).  The printed kernels themselves are run
against one piece in tests/test_scan_blocks.py."""
import pytest

from chunkproof.codegen import ksplit

AXES = {"b_s": ("Dv", "Dk"), "b_K": ("C", "Dk"), "b_U": ("C", "Dv"), "b_g": ("C", "1"), "b_KK": ("Dk", "Dk"),
        "b_S": ("Dv", "Dk"), "b_Vnew": ("C", "Dv")}


def _split(text):
    return ksplit.Splitter(AXES, "test kernel").body(text)


def test_a_k_indexed_value_is_printed_once_per_piece():
    out = _split("    b_S = (b_s * tl.exp(b_g)) + tl.dot(tl.trans(b_Vnew), b_K, input_precision=P)").split("\n")
    assert out[0] == "    b_S_k0 = (b_s_k0 * tl.exp(b_g)) + tl.dot(tl.trans(b_Vnew), b_K_k0, input_precision=P)"
    assert out[1:3] == ["    if KP > 1:",
                        "        b_S_k1 = (b_s_k1 * tl.exp(b_g)) + tl.dot(tl.trans(b_Vnew), b_K_k1, input_precision=P)"]
    assert len(out) == 1 + 2 * (ksplit.PIECES - 1)


def test_a_product_over_k_is_the_sum_of_its_pieces_products():
    out = _split("b_Vnew = (b_U - tl.dot(b_K.to(DT), tl.trans(b_s).to(DT), input_precision=P))").split("\n")
    assert out[0] == "b_Vnew_ksum0 = tl.dot(b_K_k0.to(DT), tl.trans(b_s_k0).to(DT), input_precision=P)"
    assert out[1:3] == ["if KP > 1:", "    b_Vnew_ksum0 = tl.dot(b_K_k1.to(DT), tl.trans(b_s_k1).to(DT), "
                                      "acc=b_Vnew_ksum0, input_precision=P)"]
    assert out[-1] == "b_Vnew = (b_U - b_Vnew_ksum0)"


def test_the_skeleton_is_cut_too_and_other_statements_pass():
    text = "\n".join(["p_s = o_k[None, :] * V + o_v[:, None]", "b_s = tl.zeros([BV, BK], dtype=tl.float32)",
                      "for i_t in range(0, NT):", "    # a comment naming b_s", "    r_t = i_t * BT + o_t",
                      "    tl.store(h + p_s, b_s, mask=m_s)"])
    out = _split(text).split("\n")
    assert out[0] == "p_s0 = o_k0[None, :] * V + o_v[:, None]"
    assert "b_s_k0 = tl.zeros([BV, KB], dtype=tl.float32)" in out
    assert "    # a comment naming b_s" in out and "    r_t = i_t * BT + o_t" in out
    assert "    tl.store(h + p_s0, b_s_k0, mask=m_s0)" in out
    assert "        tl.store(h + p_s3, b_s_k3, mask=m_s3)" in out


@pytest.mark.parametrize("stmt, why", [
    ("b_x = tl.sum(b_K, axis=1)", "tl.sum() may sum over K"),
    ("b_y = b_KK * 2", "b_KK has two K axes"),
    ("b_S = tl.dot(tl.trans(b_s), b_K)", "a product sums over K inside a K-indexed value"),
    ("b_Vnew = b_U + b_K", "b_K is read outside a product that sums over K"),
    ("b_Vnew = tl.dot(tl.dot(b_K, tl.trans(b_s)), b_U)", "a product inside a product"),
])
def test_what_cannot_be_cut_is_refused_by_name(stmt, why):
    with pytest.raises(ksplit.KSplitError, match="test kernel: the state cannot be held in K pieces") as e:
        _split(stmt)
    assert why in str(e.value) and stmt in str(e.value)


def test_a_refused_kernel_is_printed_whole_saying_why():
    text = "    b_x = tl.sum(b_K, axis=1)\n    b_s = b_S"
    out = ksplit.split_body(text, AXES, "test kernel")
    assert out.startswith("    # the state is held in one piece: test kernel: ")
    assert out.endswith(text)
