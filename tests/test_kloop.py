"""The intra kernel's K columns in a loop over K blocks (TILING prep_BK, codegen/kloop.py)."""
import dataclasses
import os
import re

import pytest
import torch

from chunkproof.codegen import gen, kloop, precision
from chunkproof.codegen.variants import VARIANTS

BY = {v.name: v for v in VARIANTS}


def _printed(name, prep_bk, said=None):
    """The bundled module of ``name`` as its record chooses, with TILING prep_BK."""
    v = BY[name]
    rec = precision.read_record(gen.OUT_DIR, name)
    v = precision.apply(v, precision.Choice.from_dict(rec["choice"]))
    return gen.render_variant(dataclasses.replace(v, tiling=dict(v.tiling, prep_BK=prep_bk)), said=said)


def test_only_an_intra_kernel_whose_sums_over_k_are_whole_products_loops():
    # GLA's: ch0 is its one sum over K.  The delta rules' per-K tiles come from their
    # inverse (a sum over K first); RWKV-6's scores add its bonus row sum (itself a sum
    # over K) to a product over K in one statement; simple GLA and RetNet sum nothing
    # over K in theirs
    src = _printed("gla", 64)
    body = src[src.index("def _intra_kernel"):src.index("def _state_kernel")]
    assert body.count("for i_kl in range(0, tl.cdiv(K, KL)):") == 1
    assert "b_ch0 = tl.zeros([BT, BT], dtype=tl.float32)" in body and "b_ch0 += _masked_gated_dot(" in body
    assert body.index("for i_kl") < body.index("tl.store(out_Gamma") < body.index("tl.store(out_ch0")
    assert "KL=min(til.prep_BK, BK)" in src
    why = {"gated_delta_rule": "b_Xt = ", "delta_rule": "b_Xt = ", "kda": "b_Xt = ", "dplr_delta_rule": "b_F = ",
           "rwkv6": "b_Aqk = .* sum over K \\(b_Bu\\)", "simple_gla": "nothing sums over K", "retention": "nothing sums over K"}
    for name, what in why.items():
        # the tiling is every variant's: one that cannot loop is printed whole, and gen says why
        said = []
        whole = _printed(name, 64, said.append)
        assert len(said) == 1 and re.search(f"{name}: the intra kernel holds every K column at once .*"
                                            f"{name} _intra_kernel: .*{what}", said[0]), said
        assert "for i_kl in range" not in whole and "KL=" not in whole
        assert whole.replace("prep_BK=64", "prep_BK=None") == _printed(name, None)
    # the bundled modules: GLA's loops (prep_BK 64 by default since session 54), no other
    for v in VARIANTS:
        with open(os.path.join(gen.OUT_DIR, f"{v.name}.py"), encoding="utf-8") as f:
            assert ("for i_kl in range" in f.read()) == (v.name == "gla"), v.name


def test_a_k_indexed_value_read_from_a_sum_is_refused():
    axes = {"b_A": ("C", "Dk"), "b_P": ("C", "C"), "b_W": ("C", "Dk")}
    text = "\n".join(["b_A = tl.load(a + o_k[None, :])",
                      "b_P = tl.dot(b_A, tl.trans(b_A))",
                      "b_W = tl.dot(b_P, b_A)"])
    with pytest.raises(kloop.KLoopError, match="b_W = .* reads K-indexed tiles and a sum over K \\(b_P\\)"):
        kloop.loop_body(text, axes, "k")
    ok = kloop.loop_body("\n".join(text.split("\n")[:2] + ["tl.store(p + o_t, b_P)"]), axes, "k")
    assert ok.split("\n")[-1] == "tl.store(p + o_t, b_P)" and "    b_P += tl.dot(b_A, tl.trans(b_A))" in ok
    # a row sum over K accumulates too; a sum inside a larger expression does not
    rows = kloop.loop_body("\n".join([text.split("\n")[0], "b_R = tl.sum(b_A * b_A, axis=1, keep_dims=True)"]),
                           dict(axes, b_R=("C", "1")), "k")
    assert "b_R = tl.zeros([BT, 1], dtype=tl.float32)" in rows and "    b_R += tl.sum(" in rows
    with pytest.raises(kloop.KLoopError, match="other than as one whole product or sum"):
        kloop.loop_body("\n".join([text.split("\n")[0], "b_P = 1.0 + tl.dot(b_A, tl.trans(b_A))"]), axes, "k")


@pytest.mark.parametrize("shape", [(1, 80, 1, 64, 32), (2, 70, 2, 40, 24)])
def test_the_looped_intra_kernel_computes_what_the_whole_one_does(shape, tmp_path, monkeypatch):
    # blocks of 16 (four at K = 64; three, the last masked, at K = 40), fp32 under the
    # interpreter, forward and backward, against the whole kernel (prep_BK None)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from chunkproof.fuzz.precision_measure import import_printed
    with open(os.path.join(gen.OUT_DIR, "_runtime.py"), encoding="utf-8") as f:
        runtime = f.read()
    looped = import_printed(str(tmp_path), "kloop_gla", runtime, "gla", _printed("gla", 16))
    whole = import_printed(str(tmp_path), "whole_gla", runtime, "gla", _printed("gla", None))
    B, T, H, K, V = shape
    g = torch.Generator().manual_seed(7)
    x = dict(q=torch.randn(B, T, H, K, generator=g), k=torch.randn(B, T, H, K, generator=g) * 0.3,
             v=torch.randn(B, T, H, V, generator=g), g=-torch.rand(B, T, H, K, generator=g) * 0.2)
    got = []
    for m in (whole, looped):
        xs = {a: t.clone().requires_grad_() for a, t in x.items()}
        o, ht = m.chunk_gla(**xs, output_final_state=True)
        (o * torch.cos(o)).sum().backward()
        got.append([o, ht] + [xs[a].grad for a in x])
    # the same values up to the order of each product's sum over K (fp32 rounding)
    for a, b in zip(*got):
        assert (a - b).abs().max() <= 1e-6 * a.abs().max(), ((a - b).abs().max(), a.abs().max())
