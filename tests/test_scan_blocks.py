"""The sequential kernels' V block (TILING scan_BV) apart from the output kernel's and the
reverse scan's parallel part's (TILING BV): every product in a scan sums over K or over
a chunk's rows, never over V, so its V block changes which program computes a column,
not the column.  Their state in K pieces (TILING scan_BK, codegen/ksplit.py): the same
values cut along K, a product over K summed piece by piece.  Under the interpreter here; on a Hopper GPU (`pytest -m gpu`), where
V blocks of 32 miscompiled other kernels (docs/measurements.md, "Blocks of 32 on
Hopper"), the scans at 32 against the same scans at 64."""
import importlib
import os

import pytest
import torch

from chunkproof.bench.calls import fwd_bwd_state
from chunkproof.bench.inputs import fuzz_case
from chunkproof.fuzz import cases, chunked
from chunkproof.fuzz.reference import rel_rms

SEQUENTIAL = ("_state_kernel", "_dstate_kernel", "_dstateh_kernel")


def _agree(want, got, tol, what):
    for a, b in zip(want[:2], got[:2]):
        assert rel_rms(b, a) < tol, what
    for n in want[2]:
        assert rel_rms(got[2][n], want[2][n]) < tol, (what, n, rel_rms(got[2][n], want[2][n]))


def _scan_blocks(m, dtype, device, K, V, **changes):
    with m.tiling_override(**changes):
        spec = m.launch_specs.__wrapped__(dtype, torch.device(device), K, V)
    return {k: spec[k].constexprs["BV"] for k in SEQUENTIAL if k in spec.kernels}, spec.BV


@pytest.mark.parametrize("name", cases.VARIANTS)
def test_the_scans_v_block_leaves_every_output_as_it_was(name):
    m = cases.module(name)
    x, h0, do, dht = fuzz_case(name, 1, 70, 2, 32, 64, seed=6, dtype=torch.bfloat16)
    fn = cases.kernel(name)
    want = fwd_bwd_state(fn, x, h0, do, dht)
    for bv in (32, 16):
        scans, out = _scan_blocks(m, torch.bfloat16, "cpu", 32, 64, scan_BV=bv)
        assert set(scans.values()) == {bv} and out == m.TILING.BV, (scans, out)
        with m.tiling_override(scan_BV=bv):
            got = fwd_bwd_state(fn, x, h0, do, dht)
        _agree(want, got, 1e-6, (name, bv))


@pytest.mark.parametrize("name", cases.VARIANTS)
def test_the_state_in_k_pieces_leaves_every_output_as_it_was(name):
    # codegen/ksplit.py: the state as 1, 2 and 4 pieces of a K = 128 head (and 2 of a
    # padded K = 100 one); a product summed over K is the sum of its pieces' products
    m = cases.module(name)
    for K in (128, 100):
        x, h0, do, dht = fuzz_case(name, 1, 70, 2, K, 32, seed=8, dtype=torch.bfloat16)
        fn = cases.kernel(name)
        with m.tiling_override(scan_BK=128):
            want = fwd_bwd_state(fn, x, h0, do, dht)
        for bk, kp in ((64, 2), (32, 4)) if K == 128 else ((64, 2),):
            with m.tiling_override(scan_BK=bk):
                spec = m.launch_specs.__wrapped__(torch.bfloat16, torch.device("cpu"), K, 32)
                assert {spec[k].constexprs["KP"] for k in SEQUENTIAL if k in spec.kernels} == {kp}
                got = fwd_bwd_state(fn, x, h0, do, dht)
            _agree(want, got, 1e-5, (name, K, bk))


def test_the_scans_v_block_is_capped_as_the_others(fake_gpu):
    # at most the padded head; fp32 inputs and huge heads cap it as they cap BV
    rt = importlib.import_module("chunkproof.kernels._runtime")
    m = cases.module("gated_delta_rule")
    assert _scan_blocks(m, torch.bfloat16, "cpu", 128, 32, scan_BV=64)[0]["_state_kernel"] == 32
    assert _scan_blocks(m, torch.float32, "cpu", 64, 64, scan_BV=64)[0]["_state_kernel"] == m.TILING.fp32_BV
    assert _scan_blocks(m, torch.bfloat16, "cpu", 512, 512, scan_BV=64)[0]["_state_kernel"] == 32
    fake_gpu(9)
    scans, out = _scan_blocks(m, torch.bfloat16, "cuda", 128, 128, scan_BV=16)
    assert set(scans.values()) == {rt.HOPPER_MIN_SCAN_BLOCK} and out == rt.HOPPER_MIN_BLOCK


@pytest.mark.parametrize("name", cases.VARIANTS)
def test_the_scans_autotune_per_number_of_programs(name):
    # the best V block follows the GPU's waves: (2, 16384, 16) and (4, 4096, 16) are
    # tuned apart (docs/measurements.md, "The scans' V block on Hopper")
    rt = importlib.import_module("chunkproof.kernels._runtime")
    m = cases.module(name)
    for k in SEQUENTIAL:
        if hasattr(m, k):
            assert "NP" in getattr(m, k).arg_names, (name, k)
    kernel = getattr(m, "_state_kernel")
    tuned = rt._autotuned(kernel, (((("BV", 64),), 8, 2), ((("BV", 32),), 8, 2)))
    assert "NP" in tuned.tuner.keys and "NP" in [n for n, _ in tuned.at]     # autotune's key and the pick's
    assert [rt.programs_key(n) for n in (32, 33, 64, 96)] == [32, 64, 64, 128]


def _gpu_against(name, K, V, seed, stated, tried, same=True):
    """Forward + backward on the GPU under each of ``tried`` (TILING changes) at 4 and 8
    warps (both of which autotune tries), against the same under ``stated``: with
    ``same``, outputs within 1e-4 of each other (a tiling that changes which program
    computes a value, not how); without, every output's error against the fp64
    recurrence no more than 10% over the stated tiling's (a product over K summed in
    another order rounds differently, and over 1000 steps of an ungated delta rule that
    moved bf16 gradients by 1e-3 against each other, session 43, H100, as far as either
    is from the recurrence; a miscompile moves them further)."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    m = cases.module(name)
    x, h0, do, dht = fuzz_case(name, 2, 1000, 4, K, V, seed=seed, dtype=torch.bfloat16, device="cuda")
    fn = cases.kernel(name)
    ref = None if same else chunked.reference(name, x, h0, do, dht, None)

    def run():
        out = fwd_bwd_state(fn, x, h0, do, dht)
        return out if same else chunked.errors(*out, ref)
    with m.tiling_override(autotune=False, **stated):
        want = run()
    for warps in (4, 8):
        with m.tiling_override(autotune=False, scan_warps=warps, **tried):
            got = run()
        if same:
            _agree(want, got, 1e-4, (name, K, V, warps))
            continue
        worse = {n: (got[n], want[n]) for n in want if not got[n] <= 1.1 * want[n] + 1e-6}
        assert not worse, (name, K, V, warps, tried, worse)
    return m


@pytest.mark.gpu
@pytest.mark.parametrize("name", cases.VARIANTS)
@pytest.mark.parametrize("V", [128, 64])
def test_gpu_scans_at_v_blocks_of_32(name, V, monkeypatch):
    # what HOPPER_MIN_SCAN_BLOCK = 32 lets autotune pick on Hopper (set here whatever the
    # runtime ships): each scan at 32 computes what it computes at 64
    rt = importlib.import_module("chunkproof.kernels._runtime")
    monkeypatch.setattr(rt, "HOPPER_MIN_SCAN_BLOCK", 32)
    m = _gpu_against(name, 128, V, 7, dict(scan_BV=64), dict(scan_BV=32))
    assert set(_scan_blocks(m, torch.bfloat16, "cuda", 128, V, scan_BV=32)[0].values()) == {32}


@pytest.mark.gpu
@pytest.mark.parametrize("name", cases.VARIANTS)
@pytest.mark.parametrize("K, piece", [(128, 64), (256, 64), (256, 128)])
def test_gpu_state_in_k_pieces(name, K, piece):
    # codegen/ksplit.py compiled: the state in pieces (2 or 4 of them) against one
    _gpu_against(name, K, 64, 9, dict(scan_BK=K), dict(scan_BK=piece), same=False)
