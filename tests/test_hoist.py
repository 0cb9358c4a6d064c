"""The state scan's gated operands are computed by the intra kernel (codegen/hoist.py):
which variants, what the scan then reads, and that a regrouping is checked before a
kernel is printed from it."""
import os

import pytest

from chunkproof.codegen import emit, gen, hoist, plan, precision
from chunkproof.codegen.variants import BY_NAME
from chunkproof.derivations import ir
from chunkproof.fuzz import cases
from tests.helpers import fresh_derivation, planned

VECTOR = ["gla", "kda", "dplr_delta_rule", "rwkv6"]
SCALAR = ["gated_delta_rule", "delta_rule", "simple_gla", "retention"]


@pytest.mark.parametrize("name", VECTOR)
def test_vector_gated_scans_read_their_operands(name):
    """A vector-gated scan reads its gated operands (fp32, written by the intra kernel)
    and neither K nor the whole C x Dk log gate: only the gate's last row."""
    p, _ = planned(name)
    # by the intra kernel, or by the second one where the intra stage is split (KDA)
    assert p.hoisted and p.hoisted <= set(p.boundary) and p.hoisted <= set(p.intra) | set(p.intra_wide)
    assert all(emit.stored_fp32(p, n) for n in p.hoisted)
    intra, state, _ = emit.forward_stages(p)
    wide = emit.intra_wide_stage(p)
    writers = [intra] + ([wide] if wide else [])
    assert p.hoisted <= set().union(*(st.writes for st in writers))
    for n in p.hoisted:     # written whole: the intra stage applies the gate before the store
        assert any(ln.target == f"b_{n}" for st in writers for ln in st.lines)
    code = "\n".join(ln.code for ln in state.lines)
    assert all(f"b_{n}" in code for n in p.hoisted)
    assert "k" not in {ld.arg for ld in state.loads}
    assert not any(ld.log for ld in state.loads)
    gates = (p.logs | p.sums) & set(state.reads)
    assert gates
    for g in gates:     # the gate's last row, never its whole tile
        assert {f"b_{g}_log", f"b_{g}"}.isdisjoint(state.live)
        assert {f"b_{g}_log_last", f"b_{g}_last"} & state.live


@pytest.mark.parametrize("name", SCALAR)
def test_scalar_gated_scans_are_left_alone(name):
    """A per-row (C x 1) gate costs the scan one column: nothing is moved, and the claim
    is printed in its own grouping."""
    p, _ = planned(name)
    assert not p.hoisted
    assert not p.claims["S"].id.endswith(".regrouped")


def test_regrouping_takes_the_diagonal_inside():
    p, _ = planned("kda")
    c = plan._claim(p.deriv, BY_NAME["kda"].state_claim)
    body = hoist.regroup(c.rhs)
    assert body != c.rhs
    kr = [e for e in ir.walk(body) if isinstance(e, ir.MatMul) and isinstance(e.a, ir.Var) and e.a.name == "Kr"]
    assert kr and isinstance(kr[0].b, ir.DiagM)
    assert p.claims["S"].id == f"{c.id}.regrouped" and p.claims["S"].rhs == body


def test_a_wrong_regrouping_is_refused(monkeypatch):
    """The regrouped right-hand side is a claim of its own and goes through the same
    gate: a regrouping that drops the trailing Diag(gamma^C) of the update is refused."""
    real = hoist.regroup

    def dropping(e):
        e = real(e)
        if isinstance(e, ir.Add) and isinstance(e.b, ir.MatMul) and isinstance(e.b.b, ir.MatMul):
            return ir.Add(e.a, ir.MatMul(e.b.a, e.b.b.a))
        return e
    monkeypatch.setattr(hoist, "regroup", dropping)
    v = BY_NAME["kda"]
    with pytest.raises(plan.Refused, match=r"kda\.S\.regrouped"):
        plan.build(v, fresh_derivation(v))


def _kernels(name):
    from chunkproof.codegen import gen
    p, bwd = planned(name)
    return p, emit.backward_stages(p, bwd), gen.render_variant(BY_NAME[name])


def test_parallel_kernels_read_the_operand_only_where_it_saves_reads():
    """The reverse scan (sequential) reads KDA's hs0; its gradient kernels do not: the V
    kernel reads delta U from the scan (the only line of it that multiplied hs0) and then
    loads neither K nor the log gate, and the KB kernel reads both for other lines
    anyway.  DPLR's V kernel forms its hs0 from K and the gate it loads for other
    products.  GLA's V kernel reads hs0 with ch0 (its dV claim holds K-> Diag(gamma^C)
    and the transposed scores, session 53) and then loads neither Q, K nor the gate:
    hs0 is kept for the backward; its reverse scan does not read it."""
    p, bw, src = _kernels("kda")
    assert "hs0" in bw.reverse_scan.reads and "kept = dict(" in src and "hs0=hs0" in src
    assert not any("hs0" in st.reads for st in bw.gradient_kernels())
    assert not {"k", "q"} & {ld.arg for ld in bw.grad_v.loads} and "Gamma" not in bw.grad_v.reads
    p, bw, src = _kernels("dplr_delta_rule")
    assert "hs0" not in bw.grad_v.reads and "k" in {ld.arg for ld in bw.grad_v.loads}
    p, bw, src = _kernels("gla")
    assert {"hs0", "ch0"} <= set(bw.grad_v.reads) and "Gamma" not in bw.grad_v.reads
    assert not {"k", "q"} & {ld.arg for ld in bw.grad_v.loads}
    assert "hs0" not in bw.reverse.reads and not any("hs0" in st.reads for st in [bw.grad_k] if st)
    assert "hs0=hs0" in src and "del ch0, hs0" in src


def test_the_intra_stage_stores_each_tile_once_computed():
    """KDA's intra stage is two kernels (its W and U apply the chunk's inverse): the
    first writes the gate's prefix and the inverse, the second reads them and writes the
    scan's operand and W, U, with no inverse of its own; every boundary tile is stored
    exactly once."""
    p = plan.load_variant(BY_NAME["kda"])
    assert p.wide == ["hs0", "W", "U"]
    _, _, src = _kernels("kda")
    intra = src[src.index("def _intra_kernel"):src.index("def _intra_wide_kernel")]
    wide = src[src.index("def _intra_wide_kernel"):src.index("def _state_kernel")]
    assert "_inv_unit_lower(" in intra and "_inv_unit_lower(" not in wide
    for w, kernel in (("Gamma", intra), ("At", intra), ("hs0", wide), ("W", wide), ("U", wide)):
        assert src.count(f"tl.store(out_{w} ") == 1 and kernel.count(f"tl.store(out_{w} ") == 1


def test_gen_says_what_the_scan_is_printed_from():
    from chunkproof.codegen import gen
    said = []
    gen.render_all([BY_NAME["kda"]], progress=said.append)
    assert any("reads hs0 from the intra kernel, printed from kda.S.regrouped (checked: exact)" in m for m in said)
    said.clear()
    gen.render_all([BY_NAME["gated_delta_rule"]], progress=said.append)
    assert not any("intra kernel, printed from" in m for m in said)


def test_the_operand_is_stored_in_the_type_its_products_round_it_to():
    """GLA's scan multiplies hs0 by V (an input) in DT3, its gradient V kernel by δS in
    DT2: bf16 where both are bf16 (the scan multiplied it so before, bit for bit), fp32
    at its planned types (the V kernel's products in tf32); KDA's is multiplied by a computed tile in both scans (DT2): bf16 where both
    multiply such products in bf16 (scan_dots and reverse_dots "input"), fp32 where
    either takes tf32 (as its planned reverse_dots does).  Any fp32 reader, or fp16/fp32 inputs, keep it in fp32."""
    import importlib
    import torch
    gla = importlib.import_module("chunkproof.kernels.gla")
    kda = importlib.import_module("chunkproof.kernels.kda")
    cuda = torch.device("cuda")
    spec = gla.launch_specs(torch.bfloat16, cuda, 128, 128)
    assert gla.STORED_TYPES == {"hs0": [("_dgradv_kernel", "DT2"), ("_state_kernel", "DT3")]}
    assert gla.TILING.gradv_dots == "tf32" and spec.stored_type(torch.bfloat16, gla.STORED_TYPES["hs0"]) == \
        torch.float32
    bf16_v = gla.launch_specs(torch.bfloat16, cuda, 128, 128, tiling=gla.TILING.replace(gradv_dots="input"))
    assert bf16_v.stored_type(torch.bfloat16, gla.STORED_TYPES["hs0"]) == torch.bfloat16
    assert spec.stored_type(torch.bfloat16, [("_state_kernel", "DT3")]) == torch.bfloat16
    assert gla.launch_specs(torch.float16, cuda, 128, 128).stored_type(torch.float16, gla.STORED_TYPES["hs0"]) \
        == torch.float32
    assert gla.launch_specs(torch.float32, cuda, 128, 128).stored_type(torch.float32, gla.STORED_TYPES["hs0"]) \
        == torch.float32
    tf32_scan = gla.launch_specs(torch.bfloat16, cuda, 128, 128, tiling=gla.TILING.replace(scan_dots="tf32"))
    assert tf32_scan.stored_type(torch.bfloat16, [("_state_kernel", "DT2")]) == torch.float32
    assert spec.stored_type(torch.bfloat16, []) == torch.float32
    # (KDA's planned reverse_dots is tf32 since session 48, so its hs0 is stored in fp32:
    # both cases from a tiling with both scans in bf16)
    narrow = kda.TILING.replace(scan_dots="input", reverse_dots="input")
    kspec = kda.launch_specs(torch.bfloat16, cuda, 128, 128, tiling=narrow)
    assert kspec.stored_type(torch.bfloat16, kda.STORED_TYPES["hs0"]) == torch.bfloat16
    for wide in (dict(scan_dots="tf32"), dict(reverse_dots="tf32")):
        kspec = kda.launch_specs(torch.bfloat16, cuda, 128, 128, tiling=narrow.replace(**wide))
        assert kspec.stored_type(torch.bfloat16, kda.STORED_TYPES["hs0"]) == torch.float32, wide


def test_a_users_named_operand_keeps_its_name(tmp_path):
    """derivations/examples/gla_log.py defines the scan's operand itself (K^d, a program
    definition): with a kernel declared, that definition is the boundary tile, by its
    own name, and its state claim is printed as written (no regrouping)."""
    from chunkproof.codegen import gen
    import chunkproof.derivations.examples as examples
    src = open(os.path.join(os.path.dirname(examples.__file__), "gla_log.py")).read()
    src += ('\nfrom chunkproof.derivations.kernel import kernel\n'
            'kernel(D, "chunk_my_gla_log", P, outputs="gla_log.O", state="gla_log.S", args=dict(q=Q, k=K, v=V, g=G))\n')
    path = tmp_path / "gla_user.py"
    path.write_text(src)
    (v,) = gen.user_variants(str(path))
    p = plan.load_variant(v)
    assert p.hoisted == {"Kd"} and "Kd" in p.boundary
    assert not any(n.startswith("hs") for n, _ in p.defs)
    assert p.claims["S"].id == "gla_log.S"


def test_a_chunk_product_is_formed_once_per_chunk():
    """RWKV-6's Aqk (a C x C gated product that reads no state and that the output
    reads) is written by the intra kernel; the output kernel (V-blocked) and the
    gradient V kernel read it and form no gated product of their own.  GLA's and DPLR's,
    unnamed inside O's claim, are named (ch0, ...) and moved the same way, O's printed
    line reading them; Gated DeltaNet's, with a scalar gate (a plain product, cheaper to
    form again than to read), stays in the output kernel."""
    p, bw, src = _kernels("rwkv6")
    intra, _, out = emit.forward_stages(p)
    assert "Aqk" in p.boundary and "Aqk" in intra.writes and "Aqk" in out.reads and "Aqk" in bw.grad_v.reads
    assert any("_masked_gated_dot" in ln.code for ln in intra.lines)
    assert not any("_masked_gated_dot" in ln.code for st in (out, bw.grad_v) for ln in st.lines)
    # stored in fp32 unless the precision planner narrowed it (its record)
    narrowed = "Aqk" in precision.read_record(gen.OUT_DIR, "rwkv6")["choice"]["narrowed"]
    assert ("Aqk" in cases.module("rwkv6").FP32_TILES) != narrowed
    for name, n in (("gla", 1), ("dplr_delta_rule", 2)):
        p, bw, _ = _kernels(name)
        intra, _, out = emit.forward_stages(p)
        wide = emit.intra_wide_stage(p)     # DPLR's: its C's product, named for the wide kernel
        moved = [b for b in p.boundary if b.startswith("ch") and not (wide and b in wide.reads)]
        assert len(moved) == n and set(moved) <= set(intra.writes) and set(moved) <= set(out.reads), name
        assert not any("_masked_gated_dot" in ln.code for ln in out.lines), name
    p, _, _ = _kernels("gated_delta_rule")
    assert all(dict(p.defs)[n].shape() != ("C", "C") or n == "At" for n in p.boundary)
