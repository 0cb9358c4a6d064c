"""Bad input to the generated API: a ValueError that names the argument and what was expected."""
import pytest
import torch

import chunkproof.kernels as G
from chunkproof.fuzz.cases import make_inputs, module


def _gla(**over):
    (q, k, v, g), _, _ = make_inputs("gla", 1, 8, 2, 16, 32, seed=0)
    kw = dict(q=q, k=k, v=v, g=g)
    kw.update(over)
    return kw


@pytest.mark.parametrize("over, words", [
    (dict(k=torch.randn(1, 8, 2, 17)), ["k must be [B, T, H, K]", "[1, 8, 2, 16]", "[1, 8, 2, 17]"]),
    (dict(v=torch.randn(1, 9, 2, 32)), ["v must be [B, T, HV, V]", "[1, 8, HV, V]"]),
    (dict(g=torch.randn(1, 8, 2)), ["g must be [B, T, H, K]"]),
    (dict(q=torch.randn(8, 2, 16)), ["q must be [B, T, H, K]", "3-d"]),
    (dict(k=torch.randn(1, 8, 2, 16, dtype=torch.float64)), ["k has dtype torch.float64", "q has torch.float32"]),
    (dict(q=torch.randn(1, 8, 2, 16).to(torch.int32)), ["q has dtype torch.int32"]),
    (dict(q=torch.randn(1, 8, 2, 600), k=torch.randn(1, 8, 2, 600), g=torch.randn(1, 8, 2, 600)),
     ["head size K", "600", "512"]),
    (dict(g=[1, 2]), ["g must be a torch.Tensor"]),
])
def test_gla_bad_tensors(over, words):
    with pytest.raises(ValueError) as e:
        G.chunk_gla(**_gla(**over))
    for w in words:
        assert w in str(e.value), str(e.value)
    assert str(e.value).startswith("chunk_gla: ")


def test_bad_initial_state_and_scale():
    kw = _gla()
    with pytest.raises(ValueError, match=r"initial_state must be \[B, H, K, V\] = \[1, 2, 16, 32\]"):
        G.chunk_gla(**kw, initial_state=torch.zeros(1, 2, 32, 16))
    with pytest.raises(ValueError, match="initial_state must be float32"):
        G.chunk_gla(**kw, initial_state=torch.zeros(1, 2, 16, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="scale must be a finite Python number"):
        G.chunk_gla(**kw, scale=float("nan"))
    for bad in (0.0, -0.125):      # the kernels carry its log (q's factor, emit.Q_SCALE)
        with pytest.raises(ValueError, match=f"scale must be positive.*got {bad!r}"):
            G.chunk_gla(**kw, scale=bad)
    with pytest.raises(ValueError, match="output_final_state must be a bool"):
        G.chunk_gla(**kw, output_final_state="yes")


def test_delta_rule_beta_shape_named():
    args, _, _ = make_inputs("kda", 1, 8, 2, 16, 16, seed=0)
    q, k, v, g, beta = args
    with pytest.raises(ValueError, match=r"chunk_kda: beta must be \[B, T, H\] = \[1, 8, 2\], got \[1, 8, 2, 1\]"):
        G.chunk_kda(q, k, v, g, beta[..., None])
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 2, 16, 16, seed=0)
    q, k, v, g, beta = args
    with pytest.raises(ValueError, match=r"chunk_gated_delta_rule: g must be \[B, T, H\]"):
        G.chunk_gated_delta_rule(q, k, v, g[..., None].expand(1, 8, 2, 16), beta)


def test_non_contiguous_inputs_are_copied_not_misread():
    args, _, _ = make_inputs("gla", 1, 20, 2, 16, 16, seed=1)
    q, k, v, g = args
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)       # same values, other strides
    assert not qt.is_contiguous()
    o1, _ = G.chunk_gla(q, k, v, g)
    o2, _ = G.chunk_gla(qt, k, v, g)
    assert torch.equal(o1, o2)


def test_autograd_only_when_a_gradient_is_wanted():
    # the forward-only path when nothing requires grad (or under no_grad); the autograd
    # Function otherwise (its gradients: tests/test_backward.py)
    args, _, _ = make_inputs("gla", 1, 8, 1, 16, 16, seed=0)
    q = args[0].clone().requires_grad_()
    o, _ = G.chunk_gla(q, *args[1:])
    assert o.grad_fn is not None and "_Chunk" in type(o.grad_fn).__name__
    with torch.no_grad():
        o, _ = G.chunk_gla(q, *args[1:])
    assert o.grad_fn is None
    o, _ = G.chunk_gla(*args)
    assert o.grad_fn is None


def test_cpu_without_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        G.chunk_gla(**_gla())


def test_fp32_tiling_overrides():
    # fp32 products stage twice the bytes: fewer stages and narrower V blocks; the delta
    # rules take chunks of 32 (codegen/variants.py)
    from chunkproof.kernels._runtime import effective_tiling
    import chunkproof.kernels.kda as m
    base = effective_tiling(m.TILING, torch.bfloat16, 128, 128)
    f32 = effective_tiling(m.TILING, torch.float32, 128, 128)
    wide = effective_tiling(m.TILING, torch.float32, 256, 64)
    assert base == m.TILING and f32.BV == m.TILING.fp32_BV and f32.BT == 32
    assert f32.scan_stages == f32.out_stages == 1 and wide.BV == m.TILING.fp32_wide_BV
    # K or V over 256: a whole K row is one block, so chunks and V blocks halve (HUGE)
    from chunkproof.codegen.tiling import HUGE
    huge, huge32 = effective_tiling(m.TILING, torch.bfloat16, 512, 320), effective_tiling(m.TILING, torch.float32, 320, 64)
    assert (huge.BT, huge.BV, huge.grad_BV) == (HUGE, HUGE, HUGE) and huge32.BT == huge32.BV == HUGE // 2
    assert effective_tiling(m.TILING, torch.bfloat16, 256, 256) == m.TILING


def test_out_of_resources_names_the_function_and_the_knobs(monkeypatch):
    # a kernel over the GPU's shared memory (seen on the H200: Gated DeltaNet's fp32
    # gradient kernel) is reported with the function, stage, dtype, head sizes and the
    # TILING entries that size it, not as Triton's bare OutOfResources
    from triton.runtime.errors import OutOfResources

    class TooBig:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise OutOfResources(278528, 232448, "shared memory")
            return launch
    m = module("gated_delta_rule")
    monkeypatch.setattr(m, "_intra_kernel", TooBig())
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 1, 16, 32, seed=0)
    with pytest.raises(RuntimeError, match=r"chunk_gated_delta_rule \(forward, float32, K=16, V=32\).*"
                                           r"278528 of shared memory.*232448.*grad_BV.*"
                                           r"gated_delta_rule\.tiling_override"):
        m.chunk_gated_delta_rule(*args)


class _FitsUpTo:
    """A kernel that, like a GPU's shared memory, takes its constexpr ``key`` (a gradient
    kernel's V block BV, a scan's number of state pieces KP) up to ``most``, and runs out
    of ``needs`` bytes over it."""
    def __init__(self, kernel, most, key="BV", needs=262144):
        self.kernel, self.most, self.key, self.needs, self.asked = kernel, most, key, needs, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            from triton.runtime.errors import OutOfResources
            self.asked.append(kwargs[self.key])
            if kwargs[self.key] > self.most:
                raise OutOfResources(self.needs, 232448, "shared memory")
            return self.kernel[grid](*args, **kwargs)
        return launch


def _outputs_and_grads(fn, args):
    leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    o, _ = fn(*leaves)
    o.sum().backward()
    return [o] + [a.grad for a in leaves if a.grad is not None]


@pytest.mark.parametrize("name", ["gla", "kda"])
def test_gradient_block_narrows_until_it_fits(monkeypatch, name):
    # TILING grad_BV asks for the widest V block; a launch over the GPU's shared memory
    # (RWKV-6's at 128 on the H200) makes the backward halve it until it fits, keep that
    # block for these inputs, and compute what the narrower tiling computes
    from chunkproof.kernels import _runtime
    m = module(name)
    monkeypatch.setattr(_runtime, "_FITTED_BV", {})
    fake = _FitsUpTo(m._dgradv_kernel, 16)
    monkeypatch.setattr(m, "_dgradv_kernel", fake)
    args, _, _ = make_inputs(name, 1, 20, 1, 16, 64, seed=3)
    fn = getattr(m, f"chunk_{name}")
    assert m.launch_specs(torch.float32, "cpu", 16, 64).BVG == 64
    narrowed = _outputs_and_grads(fn, args)
    assert fake.asked[:3] == [64, 32, 16]
    assert m.launch_specs(torch.float32, "cpu", 16, 64).BVG == 16          # kept for these inputs
    assert m.launch_specs(torch.float32, "cpu", 16, 128).BVG == 128        # not for others
    with m.tiling_override(grad_warps=2):                                  # nor under another tiling
        assert m.launch_specs(torch.float32, "cpu", 16, 64).BVG == 64
    with m.tiling_override(grad_BV=16):
        direct = _outputs_and_grads(fn, args)
    assert all(torch.equal(a, b) for a, b in zip(narrowed, direct))


def test_gradient_block_at_its_narrowest_is_reported(monkeypatch):
    from chunkproof.kernels import _runtime
    m = module("gla")
    monkeypatch.setattr(_runtime, "_FITTED_BV", {})
    monkeypatch.setattr(m, "_dgradv_kernel", _FitsUpTo(m._dgradv_kernel, 8))
    (q, k, v, g), _, _ = make_inputs("gla", 1, 8, 1, 16, 32, seed=0)
    q.requires_grad_()
    o, _ = m.chunk_gla(q, k, v, g)
    with pytest.raises(RuntimeError, match=r"chunk_gla \(backward, float32, K=16, V=32\).*262144 of shared memory"):
        o.sum().backward()


@pytest.mark.parametrize("name, kernel", [("kda", "_dstateh_kernel"), ("dplr_delta_rule", "_state_kernel"),
                                          ("gla", "_dstate_kernel")])
def test_a_scan_narrows_its_v_block_until_it_fits(monkeypatch, name, kernel):
    # a stated scan V block over the GPU's shared memory (KDA's reverse scan and DPLR's
    # state scan at K = 256, V blocks of 64, Triton 3.6 on an H100) is halved, kept for
    # these inputs, and the call computes what that tiling computes
    from chunkproof.kernels import _runtime
    m = module(name)
    monkeypatch.setattr(_runtime, "_FITTED_BV", {})
    fake = _FitsUpTo(getattr(m, kernel), 16, "BV", 286720)
    monkeypatch.setattr(m, kernel, fake)
    args, _, _ = make_inputs(name, 1, 20, 1, 16, 64, seed=3)
    fn = getattr(m, f"chunk_{name}")

    def scan_bv(V):
        return m.launch_specs(torch.float32, "cpu", 16, V).kernels[kernel].constexprs["BV"]
    with m.tiling_override(scan_BV=64, fp32_BV=64):
        assert scan_bv(64) == 64
        narrowed = _outputs_and_grads(fn, args)
        assert fake.asked[:3] == [64, 32, 16], fake.asked
        assert scan_bv(64) == 16                  # kept for these inputs
        assert scan_bv(32) == 32                  # not for others
    with m.tiling_override(scan_BV=16, fp32_BV=64):
        direct = _outputs_and_grads(fn, args)
    assert all(torch.equal(a, b) for a, b in zip(narrowed, direct))


def test_a_scan_at_its_narrowest_is_reported_by_name(monkeypatch):
    from chunkproof.kernels import _runtime
    m = module("gated_delta_rule")
    monkeypatch.setattr(_runtime, "_FITTED_BV", {})
    monkeypatch.setattr(m, "_state_kernel", _FitsUpTo(m._state_kernel, 8, "BV", 286720))
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 1, 16, 32, seed=0)
    with pytest.raises(RuntimeError, match=r"chunk_gated_delta_rule \(forward, float32, K=16, V=32\): "
                                           r"_state_kernel needs 286720 of shared memory.*scan_BV"):
        m.chunk_gated_delta_rule(*args)


def test_head_sizes_over_the_gpu_limit_are_refused_on_a_gpu(monkeypatch):
    # over GPU_MAX_HEAD_DIM the kernels have passed under the interpreter only: a CUDA
    # tensor is refused by name before anything launches (checked here with a stand-in
    # device type, as this machine has no GPU)
    from chunkproof.kernels import _runtime
    q = torch.randn(1, 8, 2, 320)
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)))
    with pytest.raises(ValueError, match=r"head size K \(q.shape\[-1\]\) = 320: over 256 the kernels are verified "
                                         r"under Triton's interpreter only"):
        _runtime.check_args("chunk_gla", (("q", "k"), ("k", "k"), ("v", "v"), ("g", "gate_k")),
                            (q, q, torch.randn(1, 8, 2, 16), q), None, None, False)
