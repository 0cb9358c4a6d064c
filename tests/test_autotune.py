"""triton.autotune in the generated modules: which configurations each kernel is tuned
over, that the interpreter runs the stated one, and that every configuration autotune
may pick computes the same result (run here under the interpreter, one at a time)."""
import pytest
import torch
import triton

from chunkproof.fuzz import cases
from chunkproof.fuzz.reference import rel_rms

# the scans' and output kernel's V block, and that of a gradient K-side kernel's V loop
# (Variant.loop_reductions: Gated DeltaNet's C and KB kernels)
TUNED_BV = ("_state_kernel", "_out_kernel", "_dstate_kernel", "_dstateh_kernel", "_dgradk_kernel", "_dgradc_kernel",
            "_dgradkb_kernel")
SEQUENTIAL = ("_state_kernel", "_dstate_kernel", "_dstateh_kernel")


def _uncached_specs(m):
    # launch_specs without its cache (cached_specs): a spec built under a faked GPU or
    # autotuning would otherwise be what later calls of the same arguments in this process get
    return m.launch_specs.__wrapped__


def _runtime():
    import importlib
    return importlib.import_module("chunkproof.kernels._runtime")


def test_the_interpreter_runs_the_stated_configuration():
    m = cases.module("gla")
    rt = _runtime()
    spec = m.launch_specs(torch.bfloat16, torch.device("cpu"), 128, 128)
    assert not any(k.autotune for k in spec.kernels.values())
    st = spec["_state_kernel"]
    assert st.kwargs["num_warps"] == m.TILING.scan_warps and st.kwargs["BV"] == m.TILING.scan_BV
    assert st.on(m._state_kernel).f is m._state_kernel      # under the launch's name (_Named)
    assert not rt.autotuning(m.TILING, torch.device("cuda"))      # TRITON_INTERPRET=1 here


def test_on_a_gpu_each_kernel_autotunes_over_its_neighbours(monkeypatch):
    rt = _runtime()
    m = cases.module("gated_delta_rule")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert rt.autotuning(m.TILING, torch.device("cuda"))
    assert not rt.autotuning(m.TILING.replace(autotune=False), torch.device("cuda"))
    assert not rt.autotuning(m.TILING, torch.device("cpu"))
    monkeypatch.setattr(m, "autotuning", lambda til, dev: True)
    spec = _uncached_specs(m)(torch.bfloat16, torch.device("cpu"), 128, 128)
    for name, launch in spec.kernels.items():
        configs = launch.configs()
        stated = ({"BV": launch.constexprs["BV"]} if "BV" in launch.tuned else {}, launch.num_warps,
                  launch.num_stages)
        assert configs[0] == stated, name
        blocks = {b["BV"] for b, _, _ in configs} if name in TUNED_BV else set()
        if name in TUNED_BV:
            bv = launch.constexprs["BV"]
            # half the V block; twice it for a parallel kernel, up to V = 128 here
            assert blocks == {bv, bv // 2} | ({2 * bv} if name not in SEQUENTIAL and 2 * bv <= 128 else set()), \
                (name, blocks)
        # a sequential kernel (its loop over chunks pipelined) also at the other of 2 and 3 stages
        stages = {2, 3} if name in SEQUENTIAL else {launch.num_stages}
        assert {st for _, _, st in configs} == stages, (name, configs)
        assert len(configs) == 2 * len(stages) * max(1, len(blocks)), (name, configs)
        assert len({(tuple(sorted(b.items())), w, st) for b, w, st in configs}) == len(configs), (name, configs)
        assert {w for _, w, _ in configs} == {4, 8}
        kw = launch.kwargs
        assert "num_warps" not in kw and ("BV" in kw) == (name not in TUNED_BV), name
        tuned = launch.on(getattr(m, name)).f
        assert isinstance(tuned.tuner, triton.runtime.autotuner.Autotuner) and len(tuned.tuner.configs) == len(configs)
        # a kernel that writes a tile over one it reads (the reverse scan's delta U over
        # hr0) has autotune put that back after each trial run, and only that one
        assert list(tuned.tuner.restore_value) == list(launch.restore), name
        assert bool(launch.restore) == (name == "_dstateh_kernel"), name
        assert launch.on(getattr(m, name)).f is tuned        # built once


@pytest.mark.parametrize("name", ["gla", "gated_delta_rule", "rwkv6"])
def test_every_configuration_autotune_may_pick_computes_the_same(name):
    # half the V block in the V-tiled kernels (warps do not change the interpreter's result)
    from chunkproof.bench.calls import fwd_bwd_state
    from chunkproof.bench.inputs import fuzz_case
    m = cases.module(name)
    x, h0, do, dht = fuzz_case(name, 1, 70, 2, 32, 64, seed=3, dtype=torch.float32)
    fn = cases.kernel(name)
    with m.tiling_override(fp32_BV=64):
        want = fwd_bwd_state(fn, x, h0, do, dht)
    with m.tiling_override(fp32_BV=32):
        got = fwd_bwd_state(fn, x, h0, do, dht)
    for a, b in zip(want[:2], got[:2]):
        assert rel_rms(b, a) < 1e-6
    for n in want[2]:
        assert rel_rms(got[2][n], want[2][n]) < 1e-6, n


def _loop_block_scaled(name, monkeypatch, V, override, scale, seed):
    # (every result with the gradient kernels' V loops at their stated V block, the same
    # with those loops' V block times ``scale``), under the interpreter
    import dataclasses
    from chunkproof.bench.calls import fwd_bwd_state
    from chunkproof.bench.inputs import fuzz_case
    m = cases.module(name)
    x, h0, do, dht = fuzz_case(name, 1, 70, 2 if V < 128 else 1, 32, V, seed=seed, dtype=torch.float32)
    fn = cases.kernel(name)
    stated = m.launch_specs
    scaled_any = []

    def scaled(*args, **kwargs):
        spec = stated(*args, **kwargs)
        kernels = {}
        for kname, launch in spec.kernels.items():
            if kname.startswith("_dgrad") and "BV" in launch.tuned:
                bv = int(launch.constexprs["BV"] * scale)
                assert 16 <= bv <= launch.constexprs["BVF"], (kname, launch.constexprs)
                launch = dataclasses.replace(launch, constexprs=dict(launch.constexprs, BV=bv))
                scaled_any.append(kname)
            kernels[kname] = launch
        return dataclasses.replace(spec, kernels=kernels)
    with m.tiling_override(**override):
        want = fwd_bwd_state(fn, x, h0, do, dht)
        monkeypatch.setattr(m, "launch_specs", scaled)
        got = fwd_bwd_state(fn, x, h0, do, dht)
    assert scaled_any
    return want, got


@pytest.mark.parametrize("name, V, override, scale", [
    # autotune may halve the V block of a gradient kernel's V loop apart from the V
    # kernel's (the passed V reductions' NV stays the V kernel's)
    ("gla", 64, {}, 0.5), ("rwkv6", 64, {}, 0.5), ("gated_delta_rule", 64, {}, 0.5),
    # and double it where the V kernel's block is under the head's (grad_BV 64, V = 128):
    # the loop then reads two of the V kernel's blocks of each V-wide tile at once
    ("gla", 128, dict(grad_BV=64), 2), ("gated_delta_rule", 128, dict(grad_BV=64), 2)])
def test_a_v_loop_at_another_v_block_computes_the_same(name, V, override, scale, monkeypatch):
    want, got = _loop_block_scaled(name, monkeypatch, V, override, scale, seed=4 if scale < 1 else 6)
    for a, b in zip(want[:2], got[:2]):
        assert rel_rms(b, a) < 1e-6
    for n in want[2]:
        assert rel_rms(got[2][n], want[2][n]) < 1e-6, n


@pytest.mark.parametrize("major, halved", [(9, False), (8, True), (10, True)])
def test_on_hopper_autotune_offers_v_blocks_of_32_to_the_scans_alone(monkeypatch, fake_gpu, major, halved):
    # Triton miscompiles KDA's and DPLR's output kernel at V blocks of 32 with 64-row
    # chunks on Hopper (docs/measurements.md, "Blocks of 32 on Hopper"): there its half V
    # block is offered only down to 64, the sequential kernels' down to 32 (HOPPER_MIN_SCAN_BLOCK);
    # fp32 inputs' 32-row chunks keep it
    rt = _runtime()
    fake_gpu(major)
    for name in ("kda", "dplr_delta_rule", "gla", "gated_delta_rule"):
        m = cases.module(name)
        monkeypatch.setattr(m, "autotuning", lambda til, dev: True)
        for dtype, V in ((torch.bfloat16, 128), (torch.bfloat16, 64), (torch.float32, 128)):
            spec = _uncached_specs(m)(dtype, torch.device("cuda"), 128, V)
            for kname in set(TUNED_BV[:4]) & set(spec.kernels):
                launch = spec[kname]
                blocks = sorted({b["BV"] for b, _, _ in launch.configs()})
                bv = launch.constexprs["BV"]
                hopper_least = rt.HOPPER_MIN_SCAN_BLOCK if kname in SEQUENTIAL else rt.HOPPER_MIN_BLOCK
                least = 16 if halved or launch.constexprs["BT"] < 64 else hopper_least
                want = ([bv // 2] if bv // 2 >= least else []) + [bv] + \
                    ([2 * bv] if kname not in SEQUENTIAL and 2 * bv <= V else [])
                assert blocks == want, (name, dtype, V, kname, blocks)
                if major == 9 and dtype != torch.float32:
                    assert (32 in blocks) == (hopper_least <= 32), (name, V, kname, blocks)


@pytest.mark.parametrize("name", ["gated_delta_rule", "kda"])
def test_autotune_offers_a_parallel_kernel_twice_its_v_block_up_to_the_head_and_128(name, monkeypatch):
    # the output kernel forms its K-side products once per V block: at the head's width,
    # once per chunk; never wider than the head, nor than MAX_TUNED_BLOCK, and never for a scan
    rt = _runtime()
    m = cases.module(name)
    monkeypatch.setattr(m, "autotuning", lambda til, dev: True)
    for V, widest in ((128, 128), (64, 64), (256, 128)):
        spec = _uncached_specs(m)(torch.bfloat16, torch.device("cpu"), 128, V)
        for kname, launch in spec.kernels.items():
            if "BV" not in launch.tuned:
                continue
            blocks = {b["BV"] for b, _, _ in launch.configs()}
            assert max(blocks) <= max(widest, launch.constexprs["BV"]) and max(blocks) <= max(
                rt.MAX_TUNED_BLOCK, launch.constexprs["BV"]), (name, V, kname, blocks)
            if kname in SEQUENTIAL:
                assert max(blocks) == launch.constexprs["BV"], (name, V, kname, blocks)
        out = {b["BV"] for b, _, _ in spec["_out_kernel"].configs()}
        assert (128 in out) == (V >= 128), (name, V, out)


@pytest.mark.parametrize("major", [9, 8])
def test_on_hopper_heads_of_32_take_blocks_of_64(fake_gpu, major):
    # the same miscompile at heads of V = 32 (K = 128): on Hopper the K and V blocks of
    # 64-row chunks are padded to 64 (masked past the head); fp32's 32-row chunks are not
    fake_gpu(major)
    least = 64 if major == 9 else 32
    for name in ("kda", "gated_delta_rule"):
        m = cases.module(name)
        for K, V in ((128, 32), (32, 32), (32, 128)):
            spec = _uncached_specs(m)(torch.bfloat16, torch.device("cuda"), K, V)
            assert (spec.BK, spec.BV_full) == (max(least, K), max(least, V)), (name, K, V, spec)
            assert spec.BV >= least and spec.BVG >= least, (name, K, V, spec)
            assert spec.BKB is None or spec.BKB >= min(least, m.TILING.grad_BK), (name, K, V, spec)
            spec = _uncached_specs(m)(torch.float32, torch.device("cuda"), K, V)
            assert (spec.BK, spec.BV_full) == (K, V), (name, K, V, spec)


def test_the_blocks_follow_the_inputs_device(fake_gpu):
    # GPUs of two kinds in one process: each input's device decides, not the current
    # one; each device's capability is asked once, and a CPU's never
    rt = _runtime()
    asked = fake_gpu(8, 9)
    specs = rt.cached_specs(_uncached_specs(cases.module("kda")))      # a cache of this test's own
    for _ in range(2):
        for device, least in (("cuda:0", 32), ("cuda:1", 64), ("cuda", 32), ("cpu", 32)):
            spec = specs(torch.bfloat16, torch.device(device), 32, 32)
            assert (spec.BK, spec.BV_full) == (least, least), (device, spec)
            assert all(k.hopper == (least == 64) for k in spec.kernels.values()), device
    assert [rt._on_hopper(d) for d in (None, "cuda:1", torch.device("cpu"))] == [False, True, False]
    assert sorted(asked) == [0, 1]


def test_blocks_padded_past_the_heads_compute_the_same(monkeypatch):
    # what Hopper's padding runs, under the interpreter: KDA at K = V = 32 with K and V
    # blocks of 64, against its stated blocks of 32
    from chunkproof.bench.calls import fwd_bwd_state
    from chunkproof.bench.inputs import fuzz_case
    rt = _runtime()
    x, h0, do, dht = fuzz_case("kda", 1, 70, 2, 32, 32, seed=5, dtype=torch.bfloat16)
    fn = cases.kernel("kda")
    want = fwd_bwd_state(fn, x, h0, do, dht)
    m = cases.module("kda")
    for mod in (rt, m):      # the cache's key and launch_specs each ask
        monkeypatch.setattr(mod, "_on_hopper", lambda device: True)
    assert m.launch_specs(torch.bfloat16, torch.device("cpu"), 32, 32).BV_full == 64
    got = fwd_bwd_state(fn, x, h0, do, dht)
    for a, b in zip(want[:2], got[:2]):
        assert rel_rms(b, a) < 1e-2
    for n in want[2]:
        assert rel_rms(got[2][n], want[2][n]) < 1e-2, n


class _FakeTuner:
    # triton.autotune's launch path as _Tuned uses it: it tunes, launches, sets best_config
    def __init__(self, picks):
        self.picks, self.calls, self.cache = picks, [], {}

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.calls.append((grid, args, kwargs))
            self.best_config = triton.Config(self.picks.pop(0), num_warps=4, num_stages=2)
        return run


class _FakeKernel:
    arg_names = ["x", "y", "H", "K", "BV"]

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, args, kwargs))


def test_a_tuned_key_launches_the_kernel_with_autotunes_pick():
    # the first call of a key goes through autotune; later calls of that key launch the
    # kernel with the pick (BV and warps), and another size or dtype goes to autotune again
    rt = _runtime()
    fn, tuner = _FakeKernel(), _FakeTuner([{"BV": 32}, {"BV": 64}, {"BV": 16}])
    t = rt._Tuned(fn, ["H", "K"], tuner)
    x, y = torch.zeros(2), torch.zeros(2, dtype=torch.bfloat16)
    t[(1,)](x, y, 4, K=64)
    assert len(tuner.calls) == 1 and not fn.calls
    t[(2,)](x, y, 4, K=64)
    assert len(tuner.calls) == 1
    pick = triton.Config({"BV": 32}, num_warps=4, num_stages=2).all_kwargs()
    assert fn.calls == [((2,), (x, y, 4), {"K": 64, **pick})]
    t[(1,)](x, y, 8, K=64)                       # another H
    t[(1,)](x, x, 4, K=64)                       # another dtype
    assert len(tuner.calls) == 3 and len(fn.calls) == 1
    t[(3,)](x, y, 8, K=64)
    assert fn.calls[-1][2]["BV"] == 64
    assert t.cache is tuner.cache


def test_a_launch_builds_what_it_launches_once_per_kernel(monkeypatch):
    # on() is asked on every call; the launch (from cached_specs) keeps what it built,
    # per kernel, and a launch made anew builds its own
    import dataclasses
    m = cases.module("gla")
    monkeypatch.setattr(m, "autotuning", lambda til, dev: True)
    launch = _uncached_specs(m)(torch.bfloat16, torch.device("cpu"), 64, 64)["_state_kernel"]
    first = launch.on(m._state_kernel)
    assert launch.on(m._state_kernel) is first and first.f.fn is m._state_kernel
    other = launch.on(m._dstate_kernel)
    assert other is not first and other.f.fn is m._dstate_kernel
    again = dataclasses.replace(launch, num_warps=8 if launch.num_warps == 4 else 4)
    assert again.on(m._state_kernel) is not first and again.on(m._state_kernel).f is not first.f


def test_a_block_autotune_sets_itself_is_out_of_the_key_and_a_passed_one_in():
    # _autotuned keys on BV wherever the kernel has it: a BV that autotune sets (the scans'
    # and parallel kernels') is passed by no caller and stays out of the key, as in
    # autotune's own; a BV passed in (the gradient kernels' narrowed block) is in it.  An
    # H100 run failed on every variant when the key read it from the arguments anyway
    rt = _runtime()
    fn, tuner = _FakeKernel(), _FakeTuner([{"BV": 32}, {}, {}])
    t = rt._Tuned(fn, ["H", "K", "BV"], tuner)
    x = torch.zeros(2)
    t[(1,)](x, x, 4, 64)
    t[(1,)](x, x, 4, 64)
    assert len(tuner.calls) == 1 and fn.calls[-1][2]["BV"] == 32
    t[(1,)](x, x, 4, 64, BV=64)
    t[(1,)](x, x, 4, 64, BV=32)
    t[(1,)](x, x, 4, 64, BV=64)
    assert len(tuner.calls) == 3 and fn.calls[-1][2]["BV"] == 64
