"""The generator: kernels are printed from the claims, refuse failing claims, the
checked-in files are what the derivations generate, and the planner's kernels read and
write what they should."""
import dataclasses
import inspect
import os

import pytest

from chunkproof.codegen import backward, emit, gen, plan
from chunkproof.codegen.kernel_plan import VSUM
from chunkproof.codegen.tiling import Tiling
from chunkproof.codegen.variants import BY_NAME
from chunkproof.derivations import ir
from chunkproof import cli
from tests.helpers import fresh_derivation, planned, with_claim_rhs

ALL = ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"]


def _swap_mask(e):
    """The first M mask becomes M_{-1} (a "transposed/shifted mask" slip)."""
    if isinstance(e, ir.Mask) and e.kind == "M":
        return ir.Mask(e.a, "M-1"), True
    if isinstance(e, (ir.Add, ir.Sub, ir.MatMul, ir.Had)):
        a, done = _swap_mask(e.a)
        if done:
            return type(e)(a, e.b), True
        b, done = _swap_mask(e.b)
        return type(e)(e.a, b), done
    return e, False


def _masks(e):
    return sorted(n.kind for n in ir.walk(e) if isinstance(n, ir.Mask))


@pytest.mark.parametrize("name", ["gla", "kda"])
def test_mutated_claim_changes_source_and_is_refused(name):
    v = BY_NAME[name]
    d = fresh_derivation(v)
    claim = next(c for c in d.claims if c.id == v.out_claim)
    rhs, done = _swap_mask(claim.rhs)
    assert done
    with_claim_rhs(d, v.out_claim, rhs)
    mutated = plan.build(v, d, check=False)
    # the forward prints the claim's right-hand side as stated, mask included (the
    # masked product in the tile ch0 the intra kernel forms from it: plan's chunk products)
    defs = dict(mutated.defs)
    out_def = defs[mutated.program.output]
    assert "M-1" in _masks(out_def) + [k for n in plan.var_names(out_def) if n.startswith("ch") for k in _masks(defs[n])]
    lines = lambda p: {ln.target: ln.code for st in emit.forward_stages(p) if st for ln in st.lines}  # noqa: E731
    got, good = lines(mutated), lines(plan.load_variant(v))
    assert got.keys() == good.keys() and any(got[t] != good[t] for t in got)
    assert gen.render_variant(v, plan=mutated, check=False) != gen.render_variant(v)
    with pytest.raises(plan.Refused, match=f"claim {v.out_claim} .* fails"):
        plan.build(v, d)


def test_mutated_definition_changes_source():
    v = BY_NAME["kda"]
    d = fresh_derivation(v)
    prog = d.programs[v.program]
    i = prog.names().index("Kr")
    prog.defs[i] = ("Kr", ir.Had(prog.defs[i][1].a, prog.defs[i][1].b))    # K . Gamma for K / Gamma
    p = plan.build(v, d, check=False)
    intra, state, _ = emit.forward_stages(p)
    printed = {ln.target: ln.code for st in (intra, state) if st for ln in st.lines}
    assert printed["b_Kr_f"] == "b_Gamma_log"             # the gate factor, not its inverse
    with pytest.raises(plan.Refused):
        plan.build(v, d)


def test_only_provable_inverses_are_printed():
    v = BY_NAME["kda"]
    d = fresh_derivation(v)
    prog = d.programs[v.program]
    i = prog.names().index("Xt")
    prog.defs[i] = ("Xt", ir.Eye("C") + ir.MatMul(ir.Var("Kl", "C", "Dk"), ir.Var("Kr", "C", "Dk").T))
    with pytest.raises(plan.CodegenError, match="not provably I \\+ strictly lower"):
        plan.build(v, d, check=False)


@pytest.fixture(scope="module")
def gen_check():
    """The exit code of a real `chunkproof gen --check` and the files it rendered.  A
    render re-checks every claim the kernels are printed from (about 10 s): the test of
    what gen does with the files reuses this one."""
    real, rendered = gen.render_all, []

    def render_all(*args, **kwargs):
        rendered.append(real(*args, **kwargs))
        return rendered[-1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gen, "render_all", render_all)
        code = cli.main(["gen", "--check", "-q"])
    (files,) = rendered
    return code, files


@pytest.mark.xdist_group("gen_check")
def test_checked_in_kernels_match_the_derivations(gen_check):
    code, files = gen_check
    assert gen.stale(files) == []
    assert code == 0


@pytest.mark.xdist_group("gen_check")
def test_gen_check_reports_an_edited_file(gen_check, tmp_path, capsys, monkeypatch):
    _, files = gen_check
    monkeypatch.setattr(gen, "render_all", lambda variants, progress=None, **kw: dict(files))
    out = str(tmp_path / "gk")
    assert cli.main(["gen", "-q", "--out", out]) == 0
    assert cli.main(["gen", "--check", "-q", "--out", out]) == 0
    with open(os.path.join(out, "gla.py"), "a") as f:
        f.write("# hand edit\n")
    assert cli.main(["gen", "--check", "-q", "--out", out]) == 1
    assert "gla.py differs from what the derivations generate" in capsys.readouterr().err
    assert cli.main(["gen", "-q", "--out", out]) == 0          # regenerating repairs it
    assert cli.main(["gen", "--check", "-q", "--out", out]) == 0


def test_header_names_the_derivation_and_claims():
    src = gen.render_variant(BY_NAME["dplr_delta_rule"])
    assert src.startswith("# generated by `chunkproof gen` from chunkproof.derivations/dplr.py -- do not edit.")
    assert "claim dplr.fla.O" in src and "claim dplr.fla.S" in src


def test_unknown_variant_is_an_input_error(capsys):
    assert cli.main(["gen", "--check", "--variant", "nope"]) == 2
    assert "unknown variant 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ALL)
def test_gate_prefix_products_are_computed_once(name):
    """The chunk's cumulative gate is computed by the intra kernel, written as its log,
    and read (never recomputed) by the state and output kernels."""
    p, _ = planned(name)
    cum = {n for n, e in p.defs if isinstance(e, ir.CumProd)}
    assert cum and p.logs == cum & set(p.boundary)
    assert cum <= set(p.intra)
    intra, state, out = emit.forward_stages(p)
    assert cum <= set(intra.writes)
    for st, names in ((state, p.state_stage), (out, p.out_stage)):
        assert not cum & set(names.computes) and cum & set(st.reads)
        assert not any("tl.cumsum" in ln.code for ln in st.lines)


@pytest.mark.parametrize("name", ["simple_gla", "rwkv6"])
def test_gate_prefix_sums_are_computed_once(name):
    """A log-space gate's prefix sum (CumSum) is computed by the intra kernel, written
    in fp32 as it is (not as a log), and read by every later kernel that needs it: the
    state scan recomputing it took 559 of simple GLA's 789 us forward (H200)."""
    p, _ = planned(name)
    sums = {n for n, e in p.defs if isinstance(e, ir.CumSum)}
    assert sums and p.sums == sums & set(p.boundary) and not p.sums & p.logs
    assert all(emit.stored_fp32(p, n) for n in p.sums)
    intra, state, out = emit.forward_stages(p)
    assert p.sums <= set(intra.writes)
    for st, names in ((state, p.state_stage), (out, p.out_stage)):
        assert not p.sums & set(names.computes) and p.sums & set(st.reads)
        assert not any("tl.cumsum" in ln.code or "m_incl, tl.trans(b_G)" in ln.code for ln in st.lines)


@pytest.mark.parametrize("name", ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"])
def test_backward_claims_hold_and_cover_every_argument(name):
    # the verified claims the backward kernels (issue 4) will be printed from (planned():
    # plan.backward_claims on the variant's derivation, checked once per process)
    v = BY_NAME[name]
    _, b = planned(name)
    assert set(b["grads"]) == {a.name for a in v.args}
    assert b["dS"].kind == "adjoint" and b["dS_prev"].kind == "adjoint"


def test_backward_claims_refuse_a_failing_gradient():
    v = BY_NAME["kda"]
    d = fresh_derivation(v)
    c = next(c for c in d.claims if c.id == "kda.dV")
    with_claim_rhs(d, "kda.dV", -c.rhs)
    with pytest.raises(plan.Refused, match="claim kda.dV .* fails"):
        plan.backward_claims(v, d)


def test_backward_claims_name_what_is_missing_or_wrong():
    v = BY_NAME["gla"]
    # a gradient the declaration leaves out is picked from the derivation's claims
    spec = dict(v.backward, grads={k: c for k, c in v.backward["grads"].items() if k != "v"})
    got = plan.backward_claims(dataclasses.replace(v, backward=spec), check=False)
    assert got["grads"]["v"].id == "gla.dV"
    spec = dict(v.backward, grads=dict(v.backward["grads"], g="gla.dA"))     # delta alpha, not its log form
    with pytest.raises(plan.CodegenError, match="gla.dA is listed as the gradient of g"):
        plan.backward_claims(dataclasses.replace(v, backward=spec), check=False)
    spec = dict(v.backward, dS_prev="gla.dSprev_O")                           # a partial ("from O")
    with pytest.raises(plan.CodegenError, match="whole adjoint of S_\\[t-1\\]"):
        plan.backward_claims(dataclasses.replace(v, backward=spec), check=False)


@pytest.mark.parametrize("name", ["gated_delta_rule", "kda", "dplr_delta_rule"])
def test_fp32_inverse_tile_is_never_rounded_to_the_input_dtype(name):
    # the triangular inverse is kept in fp32 between kernels; a product must not treat it
    # as an input tile (exact in bf16) and round it to DT
    import re
    p, bwd = planned(name)
    inverses = [n for n in p.boundary if emit.layout(dict(p.defs)[n].shape()) == "c"]
    assert inverses and all(emit.stored_fp32(p, n) for n in inverses)
    bw = emit.backward_stages(p, bwd)
    stages = [s for s in emit.forward_stages(p) + tuple(vars(bw).values()) if s]
    readers = [s for s in stages if set(inverses) & set(s.reads)]
    assert readers
    for s in readers:
        for ln in s.lines:
            for t in inverses:
                assert not re.search(rf"b_{t}\)*\.to\(DT\)", ln.code), f"{name}: b_{t} rounded to DT"


def test_gradient_kernels_gated_product_precision():
    import triton.language as tl
    import torch
    from chunkproof.kernels import _runtime as rt
    cpu = torch.device("cpu")
    assert rt.kernel_types(torch.bfloat16, cpu, "tf32")["GPREC"] == "tf32"            # forward: PREC2
    assert rt.kernel_types(torch.bfloat16, cpu, "tf32", "tf32x3")["GPREC"] == "tf32x3"
    # bf16 operands (a kernel whose products are "input") keep PREC2
    v = rt.kernel_types(torch.bfloat16, cpu, "input", "tf32x3")
    assert v["GPREC"] == "tf32" and v["DT2"] == tl.bfloat16
    assert rt.kernel_types(torch.float32, cpu, "tf32", "tf32x3")["GPREC"] == "ieee"       # fp32 inputs
    with pytest.raises(ValueError, match="must be one of input, tf32, tf32_mixed, got 'tf32x9'"):
        rt.kernel_types(torch.bfloat16, cpu, "tf32x9", "tf32")


def _gated_lines(stage, prec):
    # the masked forms take the chunk's flag and the pass after the type: ", rng_c, BLOCKED)"
    return sorted(ln.target for ln in stage.lines
                  if f"CT2, {prec})" in ln.code or f"CT2, {prec}, rng_c" in ln.code)


def _stages_with(name, lines):
    p, bwd = planned(name)
    v = dataclasses.replace(p.variant, precise_lines=lines)
    return emit.backward_stages(dataclasses.replace(p, variant=v), bwd)


def test_precise_lines_confine_the_gated_product_type_to_their_lines():
    # dQ's and dK's gated products take grad_gated (GPREC); every other gated product of
    # DPLR's KB kernel is printed with the kernel's PREC2
    bw = _stages_with("dplr_delta_rule", ("dQ", "dK"))
    assert _gated_lines(bw.grad_kb, "GPREC") == ["b_dK", "b_dQ"]
    assert {"b_dA", "b_dB"} <= set(_gated_lines(bw.grad_kb, "PREC2"))
    # none named: every gated product takes PREC2; None (the planner's survey): all GPREC
    assert not _gated_lines(_stages_with("gla", ()).grad_k, "GPREC")
    every = _stages_with("gla", None).grad_k
    assert _gated_lines(every, "GPREC") and not _gated_lines(every, "PREC2")
    assert set(every.gated) >= {"dQ", "dK"}


def test_a_precise_line_takes_gprec_in_every_product_with_a_computed_tile():
    # RWKV-6's dw needs its V kernel's V dS (vr3) and S products near fp32 (the CPU's
    # emulation of the H200: dw 5.3e-3 in tf32, 1.7e-3 with both exact; docs/measurements.md):
    # a precise line's plain products take fp32 operands and GPREC like its gated ones
    def line(stages, name):     # in the V kernel or a K-side kernel's V loop (Variant.loop_reductions)
        return next(ln.code for st in stages.gradient_parts() for ln in st.lines if ln.target == f"b_{name}")
    plain, precise = _stages_with("rwkv6", ()), _stages_with("rwkv6", ("vr3",))
    assert "input_precision=GPREC" not in line(plain, "vr3")
    assert "input_precision=GPREC" in line(precise, "vr3") and ".to(DT2).to(CT2)" in line(precise, "vr3")
    assert line(plain, "vr1") == line(precise, "vr1")          # two tiles read from memory: untouched
    assert any("vr3" in st.gated for st in _stages_with("rwkv6", None).gradient_parts())     # a planner's candidate


def test_precise_lines_naming_no_gradient_line_is_refused():
    v = dataclasses.replace(BY_NAME["gla"], precise_lines=("dQ", "dQx"))
    with pytest.raises(plan.CodegenError, match=r"precise_lines names \['dQx'\]"):
        gen.render_variant(v)


@pytest.mark.parametrize("name", ALL)
def test_a_repeated_line_reads_the_first_tile(name):
    # the grouped gate gradients print dQ, dK, ... again from their claims; the kernel
    # computes each once (Triton does not merge repeated gated products)
    import re
    p, bwd = planned(name)
    bw = emit.backward_stages(p, bwd)
    for st in [s for s in emit.forward_stages(p) + tuple(vars(bw).values()) if s]:
        seen = {}
        for ln in st.lines:
            if re.fullmatch(r"b_\w+", ln.code):
                continue
            assert ln.code not in seen, f"{name}: {ln.target} repeats {seen[ln.code]}"
            seen[ln.code] = ln.target
    if name == "dplr_delta_rule":
        assert ("b_g_q", "b_dQ") in [(ln.target, ln.code) for ln in bw.grad_kb.lines]


def test_a_gradient_printed_again_reads_the_precise_line_of_its_claim():
    # GLA's dK is a precise line (its gated mix in GPREC, for the gate gradient); the
    # stored gradient g_k, printed again from the same claim at PREC2, reads dK's tile
    # rather than forming the mix a second time.  Never the other way: a PREC2 line does
    # not stand in for a GPREC one
    v = dataclasses.replace(BY_NAME["gla"], precise_lines=("dK",))
    src = gen.render_variant(v)
    kb = src[src.index("def _dgradk_kernel"):src.index("def tiling_override")]
    assert "b_g_k = b_dK\n" in kb
    assert kb.count("_masked_mix(b_vr3") == 1
    assert emit._as_precise("f(x, GPREC) + f(y, PREC2)", "f(x, PREC2) + f(y, PREC2)")
    assert not emit._as_precise("f(x, PREC2)", "f(x, GPREC)")
    assert not emit._as_precise("f(x, GPREC)", "f(z, PREC2)")


def test_vred_rowsums_keep_the_c_kernel_off_the_wide_v_reductions():
    # Gated DeltaNet's C kernel read delta O S and V_new delta S (C x Dk, per V block) only
    # for its gate gradient's row sums; with vred_rowsums the V kernel writes those sums
    v = BY_NAME["gated_delta_rule"]
    assert v.vred_rowsums
    p, bwd = planned(v.name)

    def c_reads(variant):
        q = plan.build(variant, p.deriv, check=False)
        side = backward.split_gradients(q, bwd).k_side
        c, _ = backward.split_k(q, side)
        return [r.expr.shape() for r in c.reads_passed if r.layout == VSUM]
    on = c_reads(v)
    off = c_reads(dataclasses.replace(v, vred_rowsums=False))
    assert on.count(("C", "Dk")) == 1 and off.count(("C", "Dk")) == 3, (on, off)
    assert on.count(("C", "1")) == off.count(("C", "1")) + 2     # the V kernel writes the two sums as columns


def _loop_stages(name, kernels):
    """The backward stages of ``name`` with and without Variant.loop_reductions, and the
    V reductions the K-side ``kernels`` form in their loops: each one the V kernel writes
    without loops (a C x Dk or C x C tile) and no longer writes with them."""
    v = BY_NAME[name]
    p, bwd = planned(name)

    def stages(loop):
        return emit.backward_stages(dataclasses.replace(p, variant=dataclasses.replace(v, loop_reductions=loop)),
                                    bwd)
    on, off = stages(True), stages(False)
    written = lambda bw: {s.name: s for s in bw.grad_v.writes_passed}     # noqa: E731
    looped = {s.name for k in kernels if getattr(on, k).loop for s in getattr(on, k).loop.writes_passed}
    assert looped and not looped & set(written(on)) and looped <= set(written(off))
    assert all(written(off)[n].size in ("BT * BKF", "BT * BT") for n in looped)
    return p, on, off


def test_loop_reductions_take_the_tile_sized_v_reductions_off_the_v_kernel():
    # with Variant.loop_reductions GLA's K kernel forms delta O S_[t-1] (C x Dk) and its
    # like in a loop over V blocks: the K kernel reads the states instead; a column
    # (diag(S^T delta S), Dk x 1) stays passed
    _, on, off = _loop_stages("gla", ["grad_k"])
    assert [s.size for s in on.grad_v.writes_passed] == ["BKF * 1"]
    assert "b_vr0" in on.grad_k.loop.live and ("h", "h") in on.grad_k.loop_args and ("dh", "dh") in on.grad_k.loop_args
    assert not off.grad_k.loop and not off.grad_k.loop_args
    # the host drops each state after the last kernel that reads it
    assert {"h", "dh"} <= set(on.freed_after()["grad_k"]) and {"h", "dh"} <= set(off.freed_after()["grad_v"])


def test_a_split_k_side_forms_its_tile_sized_v_reductions_in_loops():
    # the same in Gated DeltaNet's C and KB kernels; a column per chunk stays passed
    p, on, off = _loop_stages("gated_delta_rule", ["grad_c", "grad_kb"])
    assert any(s.size == "BT * 1" for s in on.grad_v.writes_passed)
    assert "b_vr0" in on.grad_kb.loop.live and ("h", "h") in on.grad_kb.loop_args
    assert not off.grad_kb.loop and not off.grad_kb.loop_args
    assert "h" in on.freed_after()["grad_kb"] and "h" in off.freed_after()["grad_v"]
    # and its KB kernel runs K blocks of 64 (gen.K_BLOCK_LOOPED: 32 miscompiles on Hopper)
    assert gen.tiling_of(p.variant, on.grad_kb).grad_BK == 64


@pytest.mark.parametrize("name,blocked", [("gla", True), ("rwkv6", True), ("retention", True), ("simple_gla", False)])
def test_the_one_k_kernel_is_blocked_over_k_where_nothing_in_it_sums_over_k(name, blocked):
    # GLA's, RWKV-6's and RetNet's K kernel: every line per K column, one program per K
    # block (a C x 64 tile instead of C x K: GLA's spilled 2.8 KB offline at K = 128, and
    # ran 1.2x slower on the H100, docs/measurements.md).  Simple GLA's scalar gate
    # gradient sums dQ . Q - dK . K over K: whole K rows
    p, bwd = planned(name)
    bw = emit.backward_stages(p, bwd)
    assert bw.grad_k and not bw.grad_kb and bw.grad_k.k_blocked is blocked
    assert (bw.k_blocks() is bw.grad_k) is blocked
    assert gen.tiling_of(p.variant, bw.k_blocks()).grad_BK == (64 if blocked else None)
    src = open(os.path.join(gen.OUT_DIR, f"{name}.py"), encoding="utf-8").read()
    assert ("[(triton.cdiv(K, spec.BKB), NT, B * H)]" in src) is blocked


@pytest.mark.parametrize("name", ["kda", "dplr_delta_rule"])
def test_a_vector_gated_split_k_side_reads_its_v_reductions(name):
    # its KB kernel would carry C x BK gate tiles through the loop in both passes: slower
    # on the H200 (docs/measurements.md); it reads them as passed, at K blocks of 32
    p, bwd = planned(name)
    bw = emit.backward_stages(p, bwd)
    assert bw.grad_c and bw.grad_kb and not bw.grad_c.loop and not bw.grad_kb.loop
    assert any(s.size == "BT * BKF" for s in bw.grad_v.writes_passed)
    assert gen.tiling_of(p.variant, bw.grad_kb).grad_BK == 32


@pytest.mark.parametrize("name", ALL)
def test_every_printed_definition_cites_its_claim(name):
    p, bwd = planned(name)
    bw = emit.backward_stages(p, bwd)
    for st in [s for s in emit.forward_stages(p) + tuple(vars(bw).values()) if s]:
        for ln in st.lines:
            assert not ln.comment or "   [claim " in ln.comment or ", under claims " in ln.comment, ln.comment


@pytest.mark.parametrize("name", ALL)
def test_no_computed_tile_goes_unread(name):
    # every line's tile is read by a later line, stored, or written for another kernel
    import re
    p, bwd = planned(name)
    intra, state, out = emit.forward_stages(p)
    bw = emit.backward_stages(p, bwd)
    roots = {"b_" + p.program.state, "b_" + p.program.output, "b_dS_prev"}
    for st in [s for s in (intra, state, out) + tuple(vars(bw).values()) if s]:
        reads = set(roots) | {"b_" + f for f in st.finals} | {f"b_{w}" for w in st.writes} \
            | {f"b_{w}_log" for w in st.writes}
        reads |= {t for s in st.writes_passed for t in re.findall(r"b_\w+", s.value)}
        for ln in st.lines:
            reads |= set(re.findall(r"b_\w+", ln.code))
        assert all(ln.target in reads for ln in st.lines)


@pytest.mark.parametrize("name", ALL)
def test_generated_modules_hold_only_the_kernels_they_run(name):
    # the backward's shape follows the planner: a hoisted reverse scan where something is
    # state-free, a K-blocked gradient kernel where a tile needs whole K rows
    import importlib
    m = importlib.import_module(f"chunkproof.kernels.{name}")
    p, claims = planned(name)
    bw = emit.backward_stages(p, claims)
    kernels = {k for k in vars(m) if k.endswith("_kernel")}
    want = {"_intra_kernel", "_state_kernel", "_out_kernel", "_dgradv_kernel", "_recurrent_kernel"}
    want |= {"_intra_wide_kernel"} if p.wide else set()
    want |= {"_dstate_kernel"} if bw.reverse else {"_dstate_pre_kernel", "_dstateh_kernel"}
    want |= {"_dgradk_kernel"} if bw.grad_k else {"_dgradc_kernel", "_dgradkb_kernel"}
    assert kernels == want
    assert (m.TILING.grad_BK is None) == (bw.k_blocks() is None)
    assert max(len(ln.encode()) for ln in open(m.__file__, encoding="utf-8").read().splitlines()) <= gen.MAX_LINE


def test_tiling_refuses_unknown_keys_and_bad_values():
    v = BY_NAME["gla"]
    with pytest.raises(plan.CodegenError, match=r"variant gla.*unknown TILING key\(s\) 'grad_split'.*the keys: BT, BV"):
        gen.render_variant(dataclasses.replace(v, tiling=dict(v.tiling, grad_split=True)))
    with pytest.raises(plan.CodegenError, match=r"grad_dots must be one of 'input', 'tf32', 'tf32_mixed', got 'tf32x3'"):
        gen.render_variant(dataclasses.replace(v, tiling=dict(v.tiling, grad_dots="tf32x3")))
    with pytest.raises(plan.CodegenError, match=r"missing TILING key\(s\) 'BV'"):
        gen.render_variant(dataclasses.replace(v, tiling={k: x for k, x in v.tiling.items() if k != "BV"}))
    sg = BY_NAME["simple_gla"]
    with pytest.raises(plan.CodegenError, match="grad_BK is 32, but its gradient stage has no K-blocked kernel"):
        gen.render_variant(dataclasses.replace(sg, tiling=dict(sg.tiling, grad_BK=32)))
    t = Tiling.of(**dict(v.tiling, grad_BK=None))
    with pytest.raises(ValueError, match="BT must be a power of two >= 16, got 48"):
        t.replace(BT=48)
    assert all(Tiling.doc(k) for k in Tiling.keys())


def test_run_time_override_is_validated_and_restored():
    import chunkproof.kernels.kda as m
    before = m.TILING
    with m.tiling_override(grad_BV=16) as t:
        assert m.TILING is t and t.grad_BV == 16 and t.BT == before.BT
    assert m.TILING is before
    with pytest.raises(ValueError, match=r"unknown TILING key\(s\) 'schedule'"):
        with m.tiling_override(schedule="fused"):
            pass
    with pytest.raises(ValueError, match="keep_forward must be True or False, got 1"):
        with m.tiling_override(keep_forward=1):
            pass
    assert m.TILING is before


class _LaunchRecorder:
    """Stands in for a kernel: records each launch's keyword arguments and checks that
    the call binds to the kernel's signature, without running it (the host code never
    reads what a kernel wrote)."""

    def __init__(self, name, fn, seen):
        self.name, self.fn, self.seen = name, fn, seen

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            options = {"num_warps", "num_stages"}
            inspect.signature(self.fn.fn).bind(*args, **{k: x for k, x in kwargs.items() if k not in options})
            self.seen.append((self.name, kwargs))
        return launch


# the run-time (not constexpr) arguments the launch code passes by keyword
_RUNTIME_KWARGS = {"H", "HQ", "cu", "ci", "co", "NP", "use_h0", "store_ht", "use_dht"}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype, K, V", [("bfloat16", 16, 32), ("float32", 32, 160)])
@pytest.mark.parametrize("keep", [True, False])
def test_launch_code_takes_every_launch_from_launch_specs(name, dtype, K, V, keep, monkeypatch):
    # forward + backward launch exactly the kernels of launch_specs, each with its
    # constexprs, warps and stages (benchmarks/compile_check.py compiles those)
    import importlib
    import torch
    from chunkproof.fuzz.cases import kernel, make_inputs
    m = importlib.import_module(f"chunkproof.kernels.{name}")
    dtype = getattr(torch, dtype)
    seen = []
    for k in [k for k in vars(m) if k.endswith("_kernel")]:
        monkeypatch.setattr(m, k, _LaunchRecorder(k, getattr(m, k), seen))
    args, _, h0 = make_inputs(name, 1, 20, 1, K, V, seed=0, dtype=dtype, h0=True)
    leaves = [a.detach().requires_grad_() for a in args] + [h0.detach().requires_grad_()]
    with m.tiling_override(keep_forward=keep):
        o, ht = kernel(name)(*leaves[:-1], initial_state=leaves[-1], output_final_state=True)
        torch.autograd.grad((o, ht), leaves, (torch.ones_like(o), torch.ones_like(ht)))
        spec = m.launch_specs(dtype, torch.device("cpu"), K, V)
    assert {k for k, _ in seen} == set(spec.kernels) == \
        {k for k in vars(m) if k.endswith("_kernel")} - {"_recurrent_kernel"}      # the recurrent form's: below
    if keep:      # the backward does not run the intra kernel and the state scan again
        # a guarded kernel (Launch guarded) runs once per pass, in a row
        assert [k for k, _ in seen] == [k for k in spec.kernels for _ in spec[k].passes()]
    for k, kwargs in seen:
        want = spec[k].kwargs
        assert {n: x for n, x in kwargs.items() if n in want} == want, k
        assert set(kwargs) - set(want) - {"BLOCKED"} <= _RUNTIME_KWARGS, k
    for k in spec.kernels:
        blocked = [kw.get("BLOCKED") for n, kw in seen if n == k]
        passes = [e.get("BLOCKED") for e in spec[k].passes()]
        assert blocked == passes * (len(blocked) // len(passes)) and len(blocked) % len(passes) == 0, k
    assert any(spec[k].guarded for k in spec.kernels) == (name in ("gla", "kda", "dplr_delta_rule", "rwkv6"))


@pytest.mark.parametrize("name", ["gla", "retention", "rwkv6"])
def test_the_recurrent_form_takes_its_launch_from_recurrent_spec(name, monkeypatch):
    import importlib
    import torch
    from chunkproof.fuzz.cases import make_inputs, recurrent
    m = importlib.import_module(f"chunkproof.kernels.{name}")
    seen = []
    monkeypatch.setattr(m, "_recurrent_kernel", _LaunchRecorder("_recurrent_kernel", m._recurrent_kernel, seen))
    args, _, _ = make_inputs(name, 1, 5, 1, 16, 40, seed=0)
    recurrent(name)(*args)
    want = m.recurrent_spec(torch.float32, torch.device("cpu"), 16, 40).kwargs
    assert [k for k, _ in seen] == ["_recurrent_kernel"]
    kwargs = seen[0][1]
    assert {n: x for n, x in kwargs.items() if n in want} == want
    assert set(kwargs) - set(want) <= _RUNTIME_KWARGS


def test_a_row_or_column_gate_goes_on_the_product_in_parallel_kernels_only():
    """(X exp(f)) Yᵀ with f one value per row: a parallel kernel multiplies the tiles as
    read and scales the product's rows (X reaches the tensor cores unrounded); a scan
    keeps the gate on its operand (TritonPrinter.pull_gates)."""
    from chunkproof.codegen.printer import TritonPrinter, Val
    X, Y = ir.Var("X", "C", "Dk"), ir.Var("Y", "Dv", "Dk")
    env = {"X": Val("b_X", ("C", "Dk"), raw=True, fac="b_f", facshape=("C", "1")),
           "Y": Val("b_Y", ("Dv", "Dk"), raw=True)}
    printed = {}
    for pull in (False, True):
        pr = TritonPrinter(env, lambda e: False, "test")
        pr.pull_gates = pull
        printed[pull] = [pr.p(ir.MatMul(X, Y.T)), pr.p(ir.MatMul(Y, X.T))]
    rows, cols = printed[True]
    assert rows.code == "tl.dot(b_X.to(DT).to(CT), tl.trans(b_Y).to(DT).to(CT), input_precision=PREC)"
    assert (rows.fac, rows.facshape) == ("b_f", ("C", "1"))
    assert cols.code == "tl.dot(b_Y.to(DT).to(CT), tl.trans(b_X).to(DT).to(CT), input_precision=PREC)"
    assert (cols.fac, cols.facshape) == ("tl.trans(b_f)", ("1", "C"))
    rows, cols = printed[False]
    assert rows.fac is None and "tl.dot((b_X * tl.exp(b_f))" in rows.code
    assert cols.fac is None and "(tl.trans(b_X) * tl.exp(tl.trans(b_f)))" in cols.code


def test_a_contraction_gate_goes_on_the_operand_rounded_anyway_or_the_v_block():
    """Y exp(f) with f per index of the contraction, Y read from memory: f goes to the
    other operand where that one is computed, or read too but spanning V where Y spans
    K; two tiles read from memory over the same free size keep it where it was."""
    from chunkproof.codegen.printer import TritonPrinter, Val
    g = dict(fac="b_f", facshape=("C", "1"))
    env = {"Kg": Val("b_K", ("C", "Dk"), raw=True, **g), "Vg": Val("b_V", ("C", "Dv"), raw=True, **g),
           "X": Val("b_X", ("Dv", "C")), "V": Val("b_V", ("C", "Dv"), raw=True),
           "Q": Val("b_Q", ("C", "Dk"), raw=True)}
    pr = TritonPrinter(env, lambda e: False, "test")
    var = lambda n, r, c: ir.Var(n, r, c)      # noqa: E731
    computed = pr.p(ir.MatMul(var("X", "Dv", "C"), var("Kg", "C", "Dk")))
    assert "tl.dot((b_X * tl.exp(tl.trans(b_f))).to(DT3" in computed.code and "b_K.to(DT3" in computed.code
    v_block = pr.p(ir.MatMul(var("V", "C", "Dv").T, var("Kg", "C", "Dk")))
    assert "(tl.trans(b_V) * tl.exp(tl.trans(b_f)))" in v_block.code and "b_K.to(" in v_block.code
    k_side = pr.p(ir.MatMul(var("Q", "C", "Dk").T, var("Vg", "C", "Dv")))
    assert "(b_V * tl.exp(b_f))" in k_side.code and "tl.trans(b_Q).to(" in k_side.code


def test_bundled_retention_scales_its_outputs_rows_and_its_state_scans_v_block():
    p = plan.load_variant(BY_NAME["retention"])
    _, state, out = emit.forward_stages(p)
    o = next(ln.code for ln in out.lines if ln.target == "b_O")
    assert "tl.dot(b_Q.to(" in o and "* tl.exp(b_Ql_f))" in o
    s = next(ln.code for ln in state.lines if ln.target == "b_S")
    assert "(tl.trans(b_V) * tl.exp(" in s and "b_K.to(" in s
