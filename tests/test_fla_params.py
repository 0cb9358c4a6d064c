"""FLA's tensor parameters where their names or order differ from the derivation's
arguments (codegen/fla_api.PARAMS, docs/fla_api.md): RWKV-6's r, fused_recurrent_gla's
gk and gv, the Gated DeltaNet form's optional g, gk, gv and beta, KDA's A_log and dt_bias
among the tensors, simple GLA's g_gamma.  Each binding is held to the call with the
derivation's own arguments, and g_gamma to the fp64 recurrence."""
import pytest
import torch

from chunkproof.fuzz.cases import make_inputs, module
from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms


def _same(a, b):
    return all(x is None and y is None or torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("func", ["chunk_rwkv6", "fused_recurrent_rwkv6"])
def test_rwkv6_takes_r(func):
    (q, k, v, w, u), _, _ = make_inputs("rwkv6", 1, 9, 2, 16, 16, seed=0)
    fn = getattr(module("rwkv6"), func)
    assert _same(fn(r=q, k=k, v=v, w=w, u=u, output_final_state=True), fn(q, k, v, w, u, output_final_state=True))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'r'"):
        fn(q=q, k=k, v=v, w=w, u=u)


def test_fused_recurrent_gla_names_its_gate_gk():
    m = module("gla")
    (q, k, v, g), _, _ = make_inputs("gla", 1, 9, 2, 16, 16, seed=1)
    want = m.chunk_gla(q, k, v, g, output_final_state=True)
    got = m.fused_recurrent_gla(q, k, v, gk=g, output_final_state=True)
    assert rel_rms(got[0], want[0].double()) < 1e-5 and rel_rms(got[1], want[1].double()) < 1e-5
    # no gate: FLA's gk=None is a log decay of 0
    assert _same(m.fused_recurrent_gla(q, k, v), m.fused_recurrent_gla(q, k, v, torch.zeros_like(g)))
    with pytest.raises(ValueError, match=r"fused_recurrent_gla: gv \(a log decay of the value dimension\) is not "
                                         r"supported by chunkproof: pass gv=None"):
        m.fused_recurrent_gla(q, k, v, gk=g, gv=torch.zeros_like(v))


def test_the_gated_delta_rule_form_takes_fla_optional_tensors():
    m = module("gated_delta_rule")
    (q, k, v, g, beta), _, _ = make_inputs("gated_delta_rule", 1, 9, 2, 16, 16, seed=2)
    # FLA's order: q, k, v, g, gk, gv, beta
    assert _same(m.fused_recurrent_gated_delta_rule(q, k, v, g, None, None, beta),
                 m.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta))
    assert _same(m.fused_recurrent_gated_delta_rule(q, k, v, beta=beta),
                 m.fused_recurrent_gated_delta_rule(q, k, v, g=torch.zeros_like(g), beta=beta))
    assert _same(m.fused_recurrent_gated_delta_rule(q, k, v, g=g),
                 m.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=torch.ones_like(beta)))
    for name, t in (("gk", q), ("gv", v)):
        with pytest.raises(ValueError, match=f"fused_recurrent_gated_delta_rule: {name} .* pass {name}=None"):
            m.fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, **{name: t})


def test_the_delta_rule_form_defaults_beta_to_one():
    m = module("delta_rule")
    (q, k, v, beta), _, _ = make_inputs("delta_rule", 1, 9, 2, 16, 16, seed=3)
    assert _same(m.fused_recurrent_delta_rule(q, k, v), m.fused_recurrent_delta_rule(q, k, v, torch.ones_like(beta)))
    with pytest.raises(ValueError, match=r"chunk_delta_rule: beta is required"):
        m.chunk_delta_rule(q, k, v, None)


def test_the_kda_form_takes_a_log_and_dt_bias_among_the_tensors():
    m = module("kda")
    (q, k, v, g, beta), _, _ = make_inputs("kda", 1, 9, 2, 16, 16, seed=4)
    A_log, dt_bias = torch.randn(2), torch.randn(2 * 16)
    want = m.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                       output_final_state=True)
    got = m.fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, use_gate_in_kernel=True, output_final_state=True)
    assert rel_rms(got[0], want[0].double()) < 1e-5 and rel_rms(got[1], want[1].double()) < 1e-5
    with pytest.raises(ValueError, match="A_log is used only with use_gate_in_kernel=True"):
        m.fused_recurrent_kda(q, k, v, g, beta, A_log)


@pytest.mark.parametrize("func", ["chunk_simple_gla", "fused_recurrent_simple_gla"])
def test_g_gamma_is_a_fixed_decay_per_head(func):
    fn = getattr(module("simple_gla"), func)
    (q, k, v, g), ref, h0 = make_inputs("simple_gla", 2, 21, 3, 16, 16, seed=5, h0=True)
    gamma = -torch.rand(3, dtype=torch.float64) - 0.05
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    lg = gamma.float().requires_grad_()
    o, ht = fn(*leaves, g_gamma=lg, initial_state=h0, output_final_state=True)
    gen = torch.Generator().manual_seed(1)
    do, dht = torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)
    ((o * do).sum() + (ht * dht).sum()).backward()
    ref = dict(ref, g=gamma.reshape(1, 1, 3).expand(2, 21, 3).clone())
    ro, rh = recurrence("simple_gla", initial_state=h0, **ref)
    assert rel_rms(o, ro) < 1e-5 and rel_rms(ht, rh) < 1e-5
    want = reference_grads("simple_gla", ref, do.double(), dht.double(), initial_state=h0)
    got = dict(zip("qkv", [x.grad for x in leaves]))
    for n, e in grad_errors(got, {n: want[n] for n in "qkv"}, ref).items():
        assert e < 1e-4, (n, e)
    # g_gamma's gradient: the log gate's, summed over the batch and the tokens
    assert rel_rms(lg.grad, want["g"].sum((0, 1))) < 1e-4
    # neither g nor g_gamma: no decay
    assert _same(fn(q, k, v), fn(q, k, v, torch.zeros_like(g)))
    with pytest.raises(ValueError, match=f"{func}: pass one of g and g_gamma, not both"):
        fn(q, k, v, g, g_gamma=lg)
    with pytest.raises(ValueError, match=r"g_gamma must be \[HV\] = \[3\]"):
        fn(q, k, v, g_gamma=torch.zeros(2))


def test_errors_name_the_tensor_as_passed():
    # the derivation's q is RWKV-6's r, and fused_recurrent_gla's g its gk: a bad shape
    # is reported under the name the caller used
    (q, k, v, w, u), _, _ = make_inputs("rwkv6", 1, 9, 2, 16, 16, seed=0)
    with pytest.raises(ValueError, match=r"chunk_rwkv6: r must be \[B, T, H, K\], got a 3-d tensor"):
        module("rwkv6").chunk_rwkv6(q[0], k, v, w, u)
    (q, k, v, g), _, _ = make_inputs("gla", 1, 9, 2, 16, 16, seed=0)
    with pytest.raises(ValueError, match=r"fused_recurrent_gla: gk must be .* = \[1, 9, 2, 16\], got \[1, 9, 2, 8\]"):
        module("gla").fused_recurrent_gla(q, k, v, gk=g[..., :8])
