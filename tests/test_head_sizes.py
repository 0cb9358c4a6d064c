"""Head sizes up to 512 (issue 18 item 3: every variant to FLA's largest, 256, and GLA's
test sizes 320 and 512; MAX_HEAD_DIM): the chunk function, forward and backward, and its
recurrent form at K = V = 256, at K != V (256 and 160: padded V blocks) and at K = V =
320 and 512 (the huge tiling: Tiling.for_inputs), against the fp64 recurrence, fp32, T
over one chunk with a partial one."""
import pytest
import torch

from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module, recurrent
from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("K, V", [(256, 256), (160, 256), (320, 320), (512, 512)])
def test_largest_head_sizes_match_the_recurrence(name, K, V):
    m, chunk = module(name), kernel(name)
    args, ref, h0 = make_inputs(name, 1, 40, 1, K, V, seed=2, h0=True)
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = chunk(*leaves, initial_state=h, output_final_state=True)
    gen = torch.Generator().manual_seed(5)
    do, dht = torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)
    ((o * do).sum() + (ht * dht).sum()).backward()
    ro, rh = recurrence(name, initial_state=h0, **ref)
    assert rel_rms(o, ro) < 1e-4 and rel_rms(ht, rh) < 1e-4, name
    names = [n for n, _ in m.ARGS]
    got = dict(zip([{"gk": "g"}.get(n, n) for n in names], [x.grad for x in leaves]), initial_state=h.grad)
    want = reference_grads(name, ref, do.double(), dht.double(), initial_state=h0)
    for n, e in grad_errors({k: got[k] for k in want}, want, ref).items():
        assert e < (1e-3 if n in ("g", "gk", "w", "beta") else 1e-4), (name, n, e)
    o2, ht2 = recurrent(name)(*args, initial_state=h0, output_final_state=True)
    assert rel_rms(o2, ro) < 1e-4 and rel_rms(ht2, rh) < 1e-4, name


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("B, T, H, D, dtype", [(1, 128, 4, 512, torch.bfloat16), (1, 64, 2, 320, torch.float16)])
def test_gpu_huge_heads(name, B, T, H, D, dtype, monkeypatch):
    # FLA's GLA test_chunk sizes over 256 (tests/ops/test_gla.py) on the GPU, which the
    # API refuses until this passes (GPU_MAX_HEAD_DIM)
    from chunkproof.kernels import _runtime
    monkeypatch.setattr(_runtime, "GPU_MAX_HEAD_DIM", _runtime.MAX_HEAD_DIM)
    _gpu_matches_the_recurrence(name, B, T, H, D, D, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("K, V", [(128, 32), (32, 32), (32, 128)])
def test_gpu_heads_of_32(name, K, V):
    # heads under the 64-wide blocks Hopper's 64-row chunks take (HOPPER_MIN_BLOCK): KDA's
    # and DPLR's outputs were wrong at V = 32 there before the padding (docs/measurements.md,
    # "Blocks of 32 on Hopper"); the fuzz examples of the GPU tests all have K = 128, V = 64
    _gpu_matches_the_recurrence(name, 2, 300, 2, K, V, torch.bfloat16)


def _gpu_matches_the_recurrence(name, B, T, H, K, V, dtype):
    # forward and backward against the fp64 recurrence at the fuzz campaign's 16-bit
    # tolerances
    import os
    from chunkproof.fuzz.properties import GATE_GRADS
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    args, ref, h0 = make_inputs(name, B, T, H, K, V, seed=3, dtype=dtype, device="cuda", h0=True)
    leaves = [a.detach().requires_grad_() for a in args]
    o, ht = kernel(name)(*leaves, initial_state=h0, output_final_state=True)
    gen = torch.Generator().manual_seed(5)
    do, dht = torch.randn(o.shape, generator=gen).to(o), torch.randn(ht.shape, generator=gen).to(ht)
    ((o * do).float().sum() + (ht * dht).sum()).backward()
    ro, rh = recurrence(name, initial_state=h0, **ref)
    assert rel_rms(o, ro) < 5e-2 and rel_rms(ht, rh) < 5e-2, (name, rel_rms(o, ro), rel_rms(ht, rh))
    names = [{"gk": "g"}.get(n, n) for n, _ in module(name).ARGS]
    got = dict(zip(names, [x.grad for x in leaves]))
    want = reference_grads(name, ref, do.double(), dht.double(), initial_state=h0)
    for n, e in grad_errors({k: got[k] for k in want if k in got}, {k: want[k] for k in want if k in got}, ref).items():
        assert e < (5e-1 if n in GATE_GRADS else 5e-2), (name, n, e)


@pytest.mark.parametrize("cap, K, BKB, refused", [
    ((9, 0), 128, 32, "set TILING grad_BK to 64"), ((9, 0), 32, 32, "heads of K >= 64, or 16-bit inputs"),
    ((9, 0), 128, 64, None), ((8, 0), 32, 32, None)])
def test_a_looped_k_block_under_64_is_refused_on_hopper(monkeypatch, fake_gpu, cap, K, BKB, refused):
    # Triton 3.6 miscompiles the looped KB kernel at K blocks of 32 on Hopper
    # (docs/measurements.md, "The illegal memory access"): refused by name, elsewhere run
    import importlib
    rt = importlib.import_module("chunkproof.kernels._runtime")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    fake_gpu(cap[0])

    def call():
        rt.check_looped_k_block("chunk_gated_delta_rule", torch.device("cuda"), K, BKB)
    if refused:
        with pytest.raises(ValueError, match=f"chunk_gated_delta_rule: .*K blocks of {BKB} .*{refused}"):
            call()
    else:
        call()


@pytest.mark.parametrize("name", VARIANTS)
def test_the_hopper_check_guards_every_looped_k_blocked_kernel(name):
    import inspect
    import re
    # the KB kernel, or the one K kernel where it is blocked over K (one program per K block)
    src = inspect.getsource(module(name))
    kb = re.search(r"def _dgradkb?_kernel\(.*?(?=\n@triton\.jit|\ndef |\nclass )", src, re.S)
    blocked = bool(kb) and "i_k, i_t, i_bh = tl.program_id(0)" in kb.group(0)
    looped = blocked and "for i_v in range" in kb.group(0)
    assert looped == ("check_looped_k_block(" in src), name
