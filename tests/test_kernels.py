"""The generated forward kernels against the fp64 recurrence.

CPU: Triton's interpreter at small shapes (TRITON_INTERPRET=1, set in conftest.py).
GPU (`pytest -m gpu`): the same properties at real shapes on CUDA."""
import importlib
import os
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz.cases import HAND_DRAWN, VARIANTS, kernel, log_gates, make_inputs
from chunkproof.fuzz.reference import recurrence, rel_rms

# (B, T, H, K, V): T = 1, T below, at and above the chunk size 64, K != V
CPU_BUCKETS = [(1, 1, 1, 16, 16), (1, 37, 2, 16, 32), (2, 64, 1, 32, 16), (1, 130, 1, 16, 24)]
# one (K, V), with K != V: each (K, V, dtype, schedule) compiles its own kernels, and
# compiles dominate a GPU run; B, T and H are run-time values
GPU_BUCKETS = [(2, 1000, 4, 128, 64), (1, 2049, 3, 128, 64), (3, 1, 2, 128, 64), (2, 333, 3, 128, 64)]
FP32_TOL = 1e-4


def _run(name, bucket, seed, h0, dtype, device, **tiling):
    args, ref, state = make_inputs(name, *bucket, seed=seed, dtype=dtype, device=device, h0=h0)
    mod = importlib.import_module(f"chunkproof.kernels.{name}")
    with torch.no_grad(), mod.tiling_override(**tiling):
        o, ht = kernel(name)(*args, initial_state=state, output_final_state=True)
    ro, rh = recurrence(name, initial_state=state, **ref)
    assert o.shape == ro.shape and o.dtype == args[0].dtype
    assert ht.shape == rh.shape and ht.dtype == torch.float32
    return rel_rms(o, ro), rel_rms(ht, rh)


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16), bucket=st.sampled_from(CPU_BUCKETS), h0=st.booleans())
def test_interpreter_fp32_matches_recurrence(name, seed, bucket, h0):
    eo, eh = _run(name, bucket, seed, h0, torch.float32, "cpu")
    assert eo <= FP32_TOL and eh <= FP32_TOL, \
        f"{name} {bucket} seed={seed} h0={h0}: o {eo:.2e}, state {eh:.2e}"


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_interpreter_16bit_runs_close(name, dtype):
    # a loose bound against gross errors; the comparison with FLA's bf16 error is a benchmark
    eo, eh = _run(name, (1, 70, 1, 16, 32), 3, True, dtype, "cpu")
    assert eo <= 5e-2 and eh <= 5e-2, f"{name} {dtype}: o {eo:.2e}, state {eh:.2e}"


def test_no_final_state_unless_asked():
    args, _, _ = make_inputs("gla", 1, 5, 1, 16, 16, seed=0)
    o, ht = kernel("gla")(*args)
    assert ht is None and o.shape == (1, 5, 1, 16)


def test_chunk_size_is_data():
    # the same kernel source at a smaller chunk gives the same answer (and runs 3 chunks)
    import chunkproof.kernels.kda as m
    args, ref, state = make_inputs("kda", 1, 40, 1, 16, 16, seed=4, h0=True)
    o, ht = m._forward(*args, scale=16 ** -0.5, initial_state=state, output_final_state=True, chunk_size=16)
    ro, rh = recurrence("kda", initial_state=state, **ref)
    assert rel_rms(o, ro) <= FP32_TOL and rel_rms(ht, rh) <= FP32_TOL


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2 ** 16), bucket=st.sampled_from(GPU_BUCKETS), h0=st.booleans())
def test_gpu_fp32_matches_recurrence(name, seed, bucket, h0):
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    eo, eh = _run(name, bucket, seed, h0, torch.float32, "cuda")
    assert eo <= FP32_TOL and eh <= FP32_TOL, \
        f"{name} {bucket} seed={seed} h0={h0}: o {eo:.2e}, state {eh:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_16bit_close(name, dtype):
    eo, eh = _run(name, (2, 1000, 4, 128, 64), 11, True, dtype, "cuda")
    assert eo <= 5e-2 and eh <= 5e-2, f"{name} {dtype}: o {eo:.2e}, state {eh:.2e}"


# entries above the diagonal may overflow before the causal mask discards them
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", [n for n in VARIANTS if log_gates(n)])
@pytest.mark.parametrize("per_step", [-2.0, -20.0])
def test_strong_decay(name, per_step):
    # scalar gates form exp(G_i - G_j) <= 1 directly; vector gates go through
    # _masked_gated_dot, which takes its blocked form (all exponents <= 0) when a chunk's
    # decay is out of the rebalanced form's range.  At -20 per step a chunk decays by
    # -1280 (and T = 130 ends in a partial chunk, whose padded rows must not overflow)
    args, ref, state = make_inputs(name, 1, 130, 1, 16, 16, seed=2, h0=True)
    args = list(args)
    for n in log_gates(name):
        gi = [a.name for a in BY_NAME[name].args].index(n)
        args[gi] = torch.full_like(args[gi], per_step)
        ref["g" if name in HAND_DRAWN else n] = args[gi]
    o, ht = kernel(name)(*args, initial_state=state, output_final_state=True)
    ro, rh = recurrence(name, initial_state=state, **ref)
    assert torch.isfinite(o).all() and torch.isfinite(ht).all()
    assert rel_rms(o, ro) <= FP32_TOL and rel_rms(ht, rh) <= FP32_TOL


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("name", ["gla", "kda"])
def test_strong_decay_needs_the_blocked_pass(name, monkeypatch):
    # a guarded kernel's first pass computes every chunk in the rebalanced form only and
    # flags those out of its range; without the second (blocked) pass a chunk decaying by
    # -1280 is left as the first pass wrote it (the guarded forward kernel is the intra
    # kernel, which forms the chunk's gated Q K^T for the output kernel)
    from chunkproof.kernels import _runtime
    args, ref, state = make_inputs(name, 1, 130, 1, 16, 16, seed=2, h0=True)
    args = list(args)
    for n in log_gates(name):
        gi = [a.name for a in BY_NAME[name].args].index(n)
        args[gi] = torch.full_like(args[gi], -20.0)
        ref["g" if name in HAND_DRAWN else n] = args[gi]
    ro, rh = recurrence(name, initial_state=state, **ref)
    both = _runtime.Launch.passes
    runs = []

    def first_only(launch):
        runs.append(launch.kernel)
        return both(launch)[:1]
    monkeypatch.setattr(_runtime.Launch, "passes", first_only)
    # launches made afresh on each call: a launch builds what it runs once (Launch.on),
    # and the cached ones may have been built by an earlier test
    mod = sys.modules[kernel(name).__module__]
    monkeypatch.setattr(mod, "launch_specs", mod.launch_specs.__wrapped__)
    o, ht = kernel(name)(*args, initial_state=state, output_final_state=True)
    assert "_intra_kernel" in runs
    assert not (torch.isfinite(o).all() and rel_rms(o, ro) <= FP32_TOL)
    monkeypatch.setattr(_runtime.Launch, "passes", both)
    o, ht = kernel(name)(*args, initial_state=state, output_final_state=True)
    assert rel_rms(o, ro) <= FP32_TOL and rel_rms(ht, rh) <= FP32_TOL


@pytest.mark.parametrize("name", VARIANTS)
def test_odd_wide_heads(name):
    # K and V not powers of two, V over 128 (fp32: V blocks of 16, many of them)
    eo, eh = _run(name, (1, 70, 1, 100, 200), 3, True, torch.float32, "cpu")
    assert eo <= FP32_TOL and eh <= FP32_TOL, f"{name}: o {eo:.2e}, state {eh:.2e}"


def test_a_bad_tiling_override_is_refused():
    mod = importlib.import_module("chunkproof.kernels.gla")
    before = mod.TILING
    with pytest.raises(ValueError, match=r"out_dots must be one of 'input', 'tf32', 'tf32_mixed', got 'fast'"):
        _run("gla", (1, 5, 1, 16, 16), 0, False, torch.float32, "cpu", out_dots="fast")
    with pytest.raises(ValueError, match=r"unknown TILING key\(s\) 'gate_products'.*the keys: BT"):
        _run("gla", (1, 5, 1, 16, 16), 0, False, torch.float32, "cpu", gate_products="blocks")
    assert mod.TILING is before


@pytest.mark.parametrize("name", ["gated_delta_rule", "delta_rule"])
def test_tf32_mixed_keeps_computed_operands_out_of_bf16(name):
    # "tf32_mixed" in the forward's kernels multiplies an input tile by a computed one
    # without rounding the computed one to bf16: on the CPU (bf16 rounding emulated, tf32
    # as fp32) its final state's error on bf16 inputs is clearly below tf32's (the
    # output's no longer shows it: since q is multiplied as read, session 48, o's error is
    # mostly its own rounding to bf16).  Shown where the computed operand (the inverse At)
    # is stored in fp32: GLA's and DPLR's C x C tiles are stored in bf16 (the planner's
    # choice), which no product type undoes
    errs = {mode: sum(_run(name, (1, 130, 2, 32, 32), s, True, torch.bfloat16, "cpu", prep_dots=mode, scan_dots=mode,
                           out_dots=mode)[1]
                      for s in range(2)) for mode in ("tf32", "tf32_mixed")}
    assert errs["tf32_mixed"] < 0.8 * errs["tf32"], errs
