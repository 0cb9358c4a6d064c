"""The backward's first generated stage: the reverse scan over chunks (delta S), printed
from each variant's verified delta S_[t-1] claim.  Its last value is the initial state's
gradient, checked against autograd of the fp64 recurrence."""
import functools
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkproof.codegen import emit, gen, plan
from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module
from chunkproof.fuzz.properties import GATE_GRADS
from chunkproof.fuzz.reference import grad_errors, reference_grads, rel_rms
from tests.helpers import fresh_derivation, planned, with_claim_rhs

BUCKETS = [(1, 1, 1, 16, 16), (1, 37, 2, 16, 32), (2, 64, 1, 32, 16), (1, 130, 1, 16, 24)]


def _dh0(name, bucket, seed, with_dht):
    B, T, H, K, V = bucket
    args, ref, state = make_inputs(name, *bucket, seed=seed, h0=True)
    gen_ = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(B, T, H, V, generator=gen_)
    dht = torch.randn(B, H, K, V, generator=gen_) if with_dht else None
    dh, dh0 = module(name)._backward_states(*args, do, dht, K ** -0.5)
    want = reference_grads(name, ref, do, dht if with_dht else torch.zeros(B, H, K, V), initial_state=state)
    from chunkproof.kernels._runtime import effective_tiling
    BT = effective_tiling(module(name).TILING, args[0].dtype, K, V).BT    # 32 for fp32 delta rules
    assert dh.shape == (B, -(-T // BT), H, K, V) and dh0.shape == (B, H, K, V)
    return rel_rms(dh0, want["initial_state"])


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16), bucket=st.sampled_from(BUCKETS), with_dht=st.booleans())
def test_initial_state_gradient_matches_autograd(name, seed, bucket, with_dht):
    err = _dh0(name, bucket, seed, with_dht)
    assert err <= 1e-4, f"{name} {bucket} seed={seed} dht={with_dht}: d initial_state rel RMS {err:.2e}"


def test_reverse_scan_is_printed_from_its_claim():
    v = BY_NAME["gla"]
    bw = emit.backward_stages(*planned("gla"))
    assert bw.reverse.finals == ["dS_prev"] and "[claim gla.bwd.dS_prev" in bw.reverse.lines[-1].comment
    d = fresh_derivation(v)
    c = next(c for c in d.claims if c.id == "gla.bwd.dS_prev")
    with_claim_rhs(d, "gla.bwd.dS_prev", c.rhs.a)          # drop the delta S Diag(gamma^C) term
    with pytest.raises(plan.Refused, match="claim gla.bwd.dS_prev .* fails"):
        plan.backward_claims(v, d)
    # and the generator will not print the file from it
    with pytest.raises(plan.Refused, match="gla.bwd.dS_prev"):
        gen.render_variant(v, plan=plan.build(v, d, check=False))


# the API's names -> the reference's (the hand-written oracle names DPLR's gk g; every
# other variant's oracle takes the API's own names)
def _ref(n):
    return {"gk": "g"}.get(n, n)
# V = 40: one gradient-kernel V block at the default grad_BV; test_v_blocked_gradients splits it
GRAD_BUCKETS = [(1, 1, 1, 16, 16), (1, 37, 2, 16, 32), (2, 64, 1, 32, 16), (1, 130, 1, 16, 24), (1, 70, 1, 16, 40)]


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16), bucket=st.sampled_from(GRAD_BUCKETS), h0=st.booleans(),
       with_dht=st.booleans())
def test_every_gradient_matches_autograd(name, seed, bucket, h0, with_dht):
    # the generated backward (state scan, reverse scan, per-chunk gradients) against
    # autograd of the fp64 recurrence, loss <dO, O> + <dS_T, S_T>
    _check_grads(name, bucket, seed, h0, with_dht)


def _check_grads(name, bucket, seed, h0, with_dht, gates="typical"):
    B, T, H, K, V = bucket
    args, ref, state = make_inputs(name, *bucket, seed=seed, h0=h0, gates=gates)
    gen_ = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(B, T, H, V, generator=gen_)
    dht = torch.randn(B, H, K, V, generator=gen_) if with_dht else None
    got = module(name)._backward(*args, do, dht, K ** -0.5, initial_state=state)
    want = reference_grads(name, ref, do, dht if with_dht else torch.zeros(B, H, K, V),
                           initial_state=state if h0 else torch.zeros(B, H, K, V))
    # measured against the reference's norm with grad_errors' floors (a gradient that is
    # 0 in exact arithmetic; a gate's, against the size of the terms it sums)
    errs = grad_errors(got, want, ref)
    for n, g in got.items():
        tol = 1e-3 if n in GATE_GRADS else 1e-4
        assert g.shape == want[_ref(n)].shape
        assert torch.isfinite(g).all(), f"{name} {gates} d{n}: not finite"
        assert errs[n] <= tol, f"{name} {bucket} {gates} seed={seed} h0={h0} dht={with_dht}: d{n} rel RMS {errs[n]:.2e}"


# gradients of the gated tiles meet their row and column factors inside a masked product
# (_masked_mix), which takes its blocked form once a chunk's decay is out of range
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("gates", ["strong", "underflow"])
def test_gradients_at_strong_decay(name, gates):
    _check_grads(name, (1, 130, 1, 16, 24), 3, True, True, gates)


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16), bucket=st.sampled_from(GRAD_BUCKETS[:4]), with_final=st.booleans())
def test_public_function_is_differentiable(name, seed, bucket, with_final):
    # the FLA-style entry point under torch.autograd: .backward() fills every .grad,
    # initial_state's included, and a gradient on the final state is accepted
    B, T, H, K, V = bucket
    args, ref, state = make_inputs(name, *bucket, seed=seed, h0=True)
    leaves = [a.clone().requires_grad_() for a in args]
    h0 = state.clone().requires_grad_()
    o, ht = kernel(name)(*leaves, initial_state=h0, output_final_state=with_final)
    gen_ = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(B, T, H, V, generator=gen_)
    dht = torch.randn(B, H, K, V, generator=gen_) if with_final else torch.zeros(B, H, K, V)
    loss = (o * do).sum() + ((ht * dht).sum() if with_final else 0)
    loss.backward()
    want = reference_grads(name, ref, do, dht, initial_state=state)
    floor = 1e-3 * max(float(w.norm()) for w in want.values())
    names = [n for n, _ in module(name).ARGS] + ["initial_state"]
    for n, leaf in zip(names, leaves + [h0]):
        assert leaf.grad is not None and leaf.grad.shape == leaf.shape and leaf.grad.dtype == leaf.dtype, n
        w = want[_ref(n)]
        err = float((leaf.grad.double() - w).norm()) / max(float(w.norm()), floor)
        tol = 1e-3 if n in GATE_GRADS else 1e-4
        assert err <= tol, f"{name} {bucket} seed={seed}: d{n} rel RMS {err:.2e}"


KEPT_SIZES = (1, 45, 2, 16, 24)


@functools.lru_cache(maxsize=None)
def _kept_case(name):
    """Inputs, cotangents, the kept chunk states' shape and the recomputing _backward's
    gradients: the same for keep_forward on and off (the pair shares an xdist group)."""
    m = module(name)
    B, T, H, K, V = KEPT_SIZES
    args, _, state = make_inputs(name, B, T, H, K, V, seed=8, h0=True)
    _, _, kept = m._forward(*args, K ** -0.5, state, True, keep=True)
    gen_ = torch.Generator().manual_seed(9)
    do, dht = torch.randn(B, T, H, V, generator=gen_), torch.randn(B, H, K, V, generator=gen_)
    want = m._backward(*args, do, dht, K ** -0.5, initial_state=state)
    return args, state, do, dht, kept.get("h", torch.empty(0)).shape, "h" in kept, want


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(f"kept_{n}")) for n in VARIANTS])
@pytest.mark.parametrize("keep", [True, False])
def test_kept_forward_tiles_give_the_same_gradients(name, keep):
    # TILING keep_forward: autograd's backward reads the forward's intra tiles and chunk
    # states instead of recomputing them.  Same kernels on the same tiles, so the
    # gradients are bit-identical to the recomputing _backward's
    m = module(name)
    B, T, H, K, V = KEPT_SIZES
    args, state, do, dht, h_shape, has_h, want = _kept_case(name)
    from chunkproof.kernels._runtime import effective_tiling
    BT = effective_tiling(m.TILING, torch.float32, K, V).BT
    assert has_h and h_shape[:2] == (B, -(-T // BT))
    leaves = [a.clone().requires_grad_() for a in args]
    h0 = state.clone().requires_grad_()
    with m.tiling_override(keep_forward=keep):
        o, ht = kernel(name)(*leaves, initial_state=h0, output_final_state=True)
        loss = (o * do).sum() + (ht * dht).sum()
        # the first backward takes the kept tiles over and drops each after its last
        # reader; a second one through the same graph (retain_graph) recomputes them
        for _ in range(2):
            grads = torch.autograd.grad(loss, leaves + [h0], retain_graph=True)
            for (n, _), got in zip(m.ARGS, grads):
                assert torch.equal(got, want[n]), n
            assert torch.equal(grads[-1], want["initial_state"])


def test_only_some_inputs_require_grad():
    args, _, _ = make_inputs("gated_delta_rule", 1, 20, 1, 16, 16, seed=4)
    q, k, v, g, beta = args
    v = v.clone().requires_grad_()
    o, _ = kernel("gated_delta_rule")(q, k, v, g, beta)
    o.sum().backward()
    assert v.grad is not None and torch.isfinite(v.grad).all() and q.grad is None


def test_incoming_gradients_are_checked():
    from chunkproof.kernels._runtime import check_grads
    q, v = torch.zeros(1, 5, 2, 16), torch.zeros(1, 5, 2, 8)
    with pytest.raises(ValueError, match=r"gradient of o must have o's shape \[B, T, H, V\] = \[1, 5, 2, 8\]"):
        check_grads("chunk_gla", q, v, torch.zeros(1, 5, 2, 16), None)
    with pytest.raises(ValueError, match="gradient of o must have o's dtype torch.float32, got torch.float16"):
        check_grads("chunk_gla", q, v, torch.zeros(1, 5, 2, 8, dtype=torch.float16), None)
    with pytest.raises(ValueError, match=r"final state must be \[B, H, K, V\] = \[1, 2, 16, 8\]"):
        check_grads("chunk_gla", q, v, torch.zeros(1, 5, 2, 8), torch.zeros(1, 2, 8, 16))
    with pytest.raises(ValueError, match="final state must be float32"):
        check_grads("chunk_gla", q, v, torch.zeros(1, 5, 2, 8), torch.zeros(1, 2, 16, 8, dtype=torch.bfloat16))
    do, dht = check_grads("chunk_gla", q, v, None, torch.zeros(1, 2, 16, 8))
    assert do.shape == v.shape and not do.any()
    # through torch.autograd, a wrongly shaped gradient is refused before it reaches the kernels
    args, _, _ = make_inputs("gla", 1, 5, 2, 16, 8, seed=0)
    leaves = [a.clone().requires_grad_() for a in args]
    o, _ = kernel("gla")(*leaves)
    with pytest.raises(RuntimeError):
        o.backward(torch.zeros(1, 5, 2, 16))


def _grads_16bit(name, bucket, seed, dtype):
    """(inputs, the generated backward's gradients, autograd's of the fp64 recurrence) for
    16-bit inputs with an initial state and random cotangents (seed + 1)."""
    B, T, H, K, V = bucket
    args, ref, state = make_inputs(name, *bucket, seed=seed, h0=True, dtype=dtype)
    gen_ = torch.Generator().manual_seed(seed + 1)
    do, dht = torch.randn(B, T, H, V, generator=gen_).to(dtype), torch.randn(B, H, K, V, generator=gen_)
    got = module(name)._backward(*args, do, dht, K ** -0.5, initial_state=state)
    return args, got, reference_grads(name, ref, do, dht, initial_state=state)


@pytest.mark.parametrize("name", VARIANTS)
def test_gradients_odd_wide_heads_and_fp16(name):
    # K and V not powers of two, V over 128 (several V blocks of the gradient kernel);
    # fp16 inputs (tf32 products) with a loose bound
    _check_grads(name, (1, 70, 1, 100, 200), 3, True, True)
    args, got, want = _grads_16bit(name, (1, 70, 2, 32, 48), 3, torch.float16)
    for n, g in got.items():
        assert g.dtype == (torch.float32 if n == "initial_state" else dict(zip(
            [a for a, _ in module(name).ARGS], args))[n].dtype)
        assert rel_rms(g, want[_ref(n)]) <= 5e-3, f"{name} fp16 d{n}"


@pytest.mark.parametrize("name", VARIANTS)
def test_gradients_bf16(name):
    # bf16 inputs: a product of two tiles read in bf16 is formed in fp32 (the interpreter
    # has no bf16 arithmetic, and it gave RWKV-6's (dO . V) 1 as 1e30); a loose bound
    # against gross errors, the comparison with a plain bf16 implementation is
    # benchmarks/bf16_vs_chunked.py's
    _, got, want = _grads_16bit(name, (1, 70, 2, 32, 48), 4, torch.bfloat16)
    for n, g in got.items():
        assert torch.isfinite(g).all(), f"{name} bf16 d{n}: not finite"
        assert rel_rms(g, want[_ref(n)]) <= (5e-2 if n in GATE_GRADS else 2e-2), f"{name} bf16 d{n}"


@pytest.mark.parametrize("name", VARIANTS)
def test_dh_stored_in_the_type_its_reader_rounds_it_to(name, monkeypatch):
    # where the gradient V kernel, dh's only reader, multiplies delta S only after rounding
    # it to bf16 (DeltaNet, RetNet: no <S, delta S> for a gate's gradient), dh is stored
    # in bf16 for bf16 inputs, and every gradient is bit for bit the one with dh in fp32
    m = module(name)
    from chunkproof.kernels import _runtime as rt
    spec = m.launch_specs(torch.bfloat16, torch.device("cpu"), 48, 48)
    stored = "dh" in m.STORED_TYPES and spec.stored_type(torch.bfloat16, m.STORED_TYPES["dh"]) == torch.bfloat16
    assert stored == (name in ("delta_rule", "retention")), name
    if not stored:
        return
    assert m.launch_specs(torch.float32, torch.device("cpu"), 48, 48).stored_type(
        torch.float32, m.STORED_TYPES["dh"]) == torch.float32
    _, got, _ = _grads_16bit(name, (1, 70, 2, 32, 48), 4, torch.bfloat16)
    real = rt.Launches.stored_type
    monkeypatch.setattr(rt.Launches, "stored_type", lambda self, dtype, readers: torch.float32
                        if readers == m.STORED_TYPES["dh"] else real(self, dtype, readers))
    with m.tiling_override(dh_store="fp32"):     # dh_type asks stored_type (now fp32)
        _, wide, _ = _grads_16bit(name, (1, 70, 2, 32, 48), 4, torch.bfloat16)
    for n in got:
        assert torch.equal(got[n], wide[n]), f"{name} d{n}"


@pytest.mark.parametrize("name", VARIANTS)
def test_dh_store_input_and_fp32(name):
    # TILING dh_store "input": delta S stored in the 16-bit inputs' dtype even where the V
    # kernel also reads it in fp32 (<S, delta S> of a gate's gradient); "fp32": fp32 there.
    # Both settings hold the bf16 bounds; where every reader rounds it anyway they agree
    # bit for bit (elsewhere they may too: Gated DeltaNet's <S, delta S> is itself stored
    # in bf16, Variant.narrowed, and the difference rounds away)
    m = module(name)
    readers = m.STORED_TYPES.get("dh", [])
    cpu = torch.device("cpu")
    for store in ("input", "fp32"):
        with m.tiling_override(dh_store=store):
            spec = m.launch_specs(torch.bfloat16, cpu, 32, 48)
            assert m.launch_specs(torch.float16, cpu, 32, 48).dh_type(torch.float16, readers) == (
                torch.float16 if store == "input" else m.launch_specs(torch.float16, cpu, 32, 48).stored_type(
                    torch.float16, readers))
            assert m.launch_specs(torch.float32, cpu, 32, 48).dh_type(torch.float32, readers) == torch.float32
    exact = spec.stored_type(torch.bfloat16, readers) == torch.bfloat16
    assert exact == (name in ("delta_rule", "retention")), name
    got = {}
    for store in ("input", "fp32"):
        with m.tiling_override(dh_store=store):
            assert m.launch_specs(torch.bfloat16, cpu, 32, 48).dh_type(torch.bfloat16, readers) == (
                torch.bfloat16 if store == "input" or exact else torch.float32)
            _, got[store], want = _grads_16bit(name, (1, 200, 2, 32, 48), 4, torch.bfloat16)
        for n, g in got[store].items():
            assert rel_rms(g, want[_ref(n)]) <= (5e-2 if n in GATE_GRADS else 2e-2), f"{name} {store} d{n}"
    if exact:
        assert all(torch.equal(got["input"][n], got["fp32"][n]) for n in got["input"]), name
    # the backward allocates dh in that type
    src = open(m.__file__, encoding="utf-8").read()
    backward = src[src.index("def _backward("):src.index("class _Chunk")]
    assert re.search(r"dh = torch\.empty\(B, NT, H, K, V,\s+dtype=spec\.dh_type\(q\.dtype, ", backward), name


@pytest.mark.parametrize("name", VARIANTS)
def test_v_blocked_gradients(name):
    # three V blocks of 16 (V = 40): every V reduction is written per block to an fp32
    # buffer and the blocks are added by the kernels that read it
    with module(name).tiling_override(grad_BV=16):
        _check_grads(name, (1, 70, 1, 16, 40), 6, True, True)


@pytest.mark.parametrize("name,bound", [("gated_delta_rule", 1.2e-2), ("gla", 1.2e-2), ("dplr_delta_rule", 2.4e-2)])
def test_gate_gradient_rounding_bf16(name, bound):
    # the gate gradients are printed from claims grouped for rounding: terms that cancel
    # in the suffix sums are formed once (README, "Rounding in the gate gradient").  This
    # example's bf16 error, printed from the dQ/dK grouping (gdn.bwd.dlogalpha,
    # gla.bwd.dlogalpha) / the grouped claims (gdn.bwd.dlogalpha_pairs, now regrouped as
    # gdn.bwd.dlogalpha_grouped,
    # gla.bwd.dlogalpha_grouped, dplr.fla.dlogalpha.grouped): Gated DeltaNet 3.1e-2 /
    # 6.2e-3, GLA 2.8e-2 / 4.9e-3, DPLR 3.2e-2 / 1.7e-2.  The gradient kernels' own
    # products the bounds were set with (bf16 for GDN and DPLR, tf32 for GLA; DPLR's
    # default is now tf32, under which the CPU's emulation has no rounding to show)
    dots = {"gated_delta_rule": "input", "gla": "tf32", "dplr_delta_rule": "input"}[name]
    with module(name).tiling_override(grad_dots=dots, gradv_dots=dots):
        _, got, want = _grads_16bit(name, (1, 128, 2, 128, 64), 0, torch.bfloat16)
    err = rel_rms(got["gk" if name == "dplr_delta_rule" else "g"], want["g"])
    assert err <= bound, f"{name} bf16 d gate rel RMS {err:.2e}"


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", VARIANTS)
def test_blocked_gradient_kernels(name):
    # the V kernel (V reductions per V block, summed by their readers) and the K side
    # (K blocks of 16 where it is split) against the fp64 recurrence: three V blocks
    # (V = 40), three K blocks (K = 40), one of each, and a chunk whose decay underflows
    m = module(name)
    k_split = {} if m.TILING.grad_BK is None else dict(grad_BK=16)
    with m.tiling_override(grad_BV=16, **k_split):
        _check_grads(name, (1, 70, 2, 16, 40), 12, True, True)
        _check_grads(name, (1, 40, 1, 40, 24), 15, True, True)
    with m.tiling_override(grad_BV=64, **k_split):
        _check_grads(name, (2, 45, 1, 32, 24), 13, True, False)
        _check_grads(name, (1, 70, 1, 16, 24), 14, True, True, "underflow")


@pytest.mark.parametrize("name", VARIANTS)
def test_k_side_reads_no_v_tile(name):
    # the K side of the gradients (the K kernel, or the C and KB kernels) never reads a
    # tile with a V dimension: every sum over V reaches it as a V reduction that the V
    # kernel writes, each a subexpression of a checked claim
    from chunkproof.codegen import backward
    p, bwd = planned(name)
    pre, _ = backward.hoist_reverse(p, bwd)
    split = backward.split_gradients(p, bwd, pre.writes_passed)
    c, kb = backward.split_k(p, split.k_side)
    k_side = [split.k] if not c.writes_passed else [c, kb]
    written = {r.name for r in split.v.writes_passed}
    assert written
    for kp in k_side:
        defs = kp.defs()
        assert not {"S_prev", backward.ADJ_STATE, backward.D_OUT} & set().union(
            *(backward.var_names(defs[n]) for n in kp.computes))
        assert all("Dv" not in defs[n].shape() for n in kp.computes)
        assert all("Dv" not in dict(p.defs)[r].shape() for r in kp.reads)
        assert {r.name for r in kp.reads_passed if r.name.startswith(backward.VRED)} <= written
    assert all(r.name in split.v.computes for r in split.v.writes_passed)


@pytest.mark.parametrize("name", VARIANTS)
def test_no_v_reduction_holds_another_whole(name):
    # an inner product <A, V δS> is passed whole (a scalar per chunk) only where no claim
    # needs V δS itself; where one does (simple GLA's dK), the K side reads that reduction
    # and forms the inner product, and the V kernel forms V δS nowhere.  So too a row sum
    # (X ⊙ Y) 1 where the K side is one kernel (simple GLA's dg_scores)
    from chunkproof.codegen import backward
    from chunkproof.derivations import ir
    p, bwd = planned(name)
    pre, _ = backward.hoist_reverse(p, bwd)
    split = backward.split_gradients(p, bwd, pre.writes_passed)
    one_k = not backward.split_k(p, split.k_side)[0].writes_passed     # as emit.backward_stages
    reds = backward.split_gradients(p, bwd, pre.writes_passed, share_rowsums=one_k).k_side.reductions
    exprs = {r.expr for r in reds}
    # (Variant.vred_rowsums' row sums hold one on purpose: their reader skips the C x Dk one)
    for r in (r for r in reds if isinstance(r.expr, (ir.Inner, ir.DiagV))):
        assert not [c for c in r.expr.children() if c in exprs], f"{name}: {r.name} holds another V reduction"
    if name == "simple_gla":     # V δS reduced once, the inner product over it formed by the K side
        v_ds = ir.MatMul(ir.Var("V", "C", "Dv", r"\mathbf{V}"), ir.Var("dS", "Dv", "Dk", r"\delta \mathbf{S}_{[t]}"))
        assert v_ds in exprs
        assert not [r for r in reds if r.expr != v_ds and v_ds in set(ir.walk(r.expr))]


@pytest.mark.parametrize("name", ["gated_delta_rule", "kda", "dplr_delta_rule"])
def test_c_kernel_writes_what_kb_reads(name):
    # the KB kernel reads the C kernel's tiles (C x C: the inverse, delta X, ...) and the
    # V reductions, and never forms a C x C tile from whole K rows itself
    bw = emit.backward_stages(*planned(name))
    written = {s.name for s in bw.grad_c.writes_passed}
    read = {s.name for s in bw.grad_kb.reads_passed if s.layout == "chunk"}
    assert written and read == written, (written, read)
    assert not any("_inv_unit_lower" in ln.code or "_masked_gated_dot" in ln.code for ln in bw.grad_kb.lines)


@pytest.mark.parametrize("name", VARIANTS)
def test_hoisted_reverse_scan(name):
    # the state-free C x V products of the reverse scan (the intra-chunk part of delta U)
    # are computed first for all chunks in parallel; the sequential loop reads them and
    # forms no gated product.  The initial state's gradient against autograd at two V
    # blocks and a partial chunk
    with module(name).tiling_override(BV=16, fp32_BV=16):
        assert _dh0(name, (1, 70, 2, 16, 40), 21, True) <= 1e-4
    bw = emit.backward_stages(*planned(name))
    if bw.reverse_pre is None:      # no such product (GLA's, simple GLA's reverse scans)
        scan = bw.reverse
    else:
        scan = bw.reverse_scan
        assert [s.name for s in scan.reads_passed] == [s.name for s in bw.reverse_pre.writes_passed]
    assert scan is not None and not any("_masked_gated_dot" in ln.code for ln in scan.lines)


@pytest.mark.parametrize("name", VARIANTS)
def test_scan_writes_the_tiles_the_v_kernel_would_form_again(name):
    # a C x V tile with a product that the reverse scan forms at every chunk (delta U of
    # the delta rules) is written by the scan, over the hoisted tile it adds to, and read
    # by the V kernel, which neither forms it again nor reads that hoisted tile
    bw = emit.backward_stages(*planned(name))
    scan = bw.reverse_scan or bw.reverse
    written = {s.name: s for s in scan.writes_passed}
    read = {s.name for s in bw.grad_v.reads_passed}
    assert set(written) <= read
    if name in ("gated_delta_rule", "kda", "dplr_delta_rule", "delta_rule"):
        assert written and {s.over for s in written.values()} <= {s.name for s in scan.reads_passed}
        assert not read & {s.over for s in written.values()}
        formed = {ln.code for ln in scan.lines if ln.target in {f"b_{n}" for n in written}}
        assert formed and not formed & {ln.code for ln in bw.grad_v.lines}
    else:       # nothing of the kind in the linear-attention scans
        assert not written


class _PoisonedTorch:
    """torch, but every torch.empty comes filled with NaN: a kernel that reads memory no
    kernel wrote (a padded column, a V block past the last) then shows it."""

    def __init__(self, real):
        self._real = real

    def empty(self, *shape, **kw):
        t = self._real.empty(*shape, **kw)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    def empty_like(self, x, **kw):
        return self.empty(x.shape, dtype=kw.get("dtype", x.dtype), device=kw.get("device", x.device))

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.mark.parametrize("name", VARIANTS)
def test_backward_reads_only_what_it_wrote(name, monkeypatch):
    # every buffer the forward and backward allocate starts as NaN; K and V not powers of
    # two and V over 128 (fp32: V blocks of 16 in the scans, 128 in the gradient kernels,
    # K blocks of the K split), a partial chunk
    m = module(name)
    monkeypatch.setattr(m, "torch", _PoisonedTorch(torch))
    _check_grads(name, (1, 70, 1, 100, 200), 31, True, True)


def test_a_narrowed_boundary_tile_counts_at_the_inputs_width():
    # the choice between reading a hoisted tile and forming it weighs each read tile at
    # its stored width: the C x C inverse in fp32 counts twice what it counts narrowed
    import dataclasses
    p, bwd = planned("gated_delta_rule")
    st = emit.backward_stages(p, bwd).grad_c
    assert "At" in st.reads

    def per_row(narrowed):
        return emit._bytes_per_row(st, dataclasses.replace(p, variant=dataclasses.replace(p.variant, narrowed=narrowed)))
    assert per_row(()) - per_row(("At",)) == 1


def test_a_transposed_masked_product_is_read_as_the_named_tile():
    # GLA's dV claim holds (K-> Q<^T . M^T), the transpose of the scores ch0 that the
    # intra kernel writes: the V kernel reads ch0 and forms no gated product of its own
    p, bwd = planned("gla")
    bw = emit.backward_stages(p, bwd)
    assert "ch0" in bw.grad_v.reads
    assert not any("_masked_gated_dot" in ln.code for ln in bw.grad_v.lines)
    assert any("tl.trans(b_ch0)" in ln.code for ln in bw.grad_v.lines)


def test_the_transposed_masked_product_is_the_transpose():
    # (Y X^T . M^T) = (X Y^T . M)^T, numerically, for each mask with a transpose in the
    # IR; a strictly lower mask has none (not matched)
    import numpy as np
    from chunkproof.codegen import backward
    from chunkproof.derivations import ir
    from chunkproof.verify.evaluate import mask
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    X, Y = ir.Var("X", "C", "Dk"), ir.Var("Y", "C", "Dk")
    for kind in ("M", "MT"):
        t = backward._transposed_product(ir.Mask(ir.MatMul(X, ir.Transpose(Y)), kind))
        assert t == ir.Mask(ir.MatMul(Y, ir.Transpose(X)), t.kind) and t.kind != kind
        assert np.allclose((x @ y.T * mask(6, kind)).T, y @ x.T * mask(6, t.kind), rtol=0, atol=1e-12)
    assert backward._transposed_product(ir.Mask(ir.MatMul(X, ir.Transpose(Y)), "M-1")) is None
    assert backward._transposed_product(ir.Mask(ir.MatMul(X, Y), "M")) is None
