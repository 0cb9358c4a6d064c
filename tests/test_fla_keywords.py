"""FLA's keywords (codegen/fla_api.py, docs/fla_api.md): accepted at the value that asks
for nothing, refused by name at any other, an unknown one named with what the function
takes; and the head-first warning."""
import os
import warnings

import pytest
import torch

import chunkproof.kernels as G
from chunkproof.codegen import fla_api
from chunkproof.fuzz.cases import VARIANTS, kernel, log_gates, make_inputs, module
from chunkproof.fuzz.reference import recurrence, rel_rms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _func(name):
    return next(f for f in dir(module(name)) if f.startswith("chunk_"))


@pytest.mark.parametrize("name", VARIANTS)
def test_every_fla_keyword_at_its_default_changes_nothing(name):
    m = module(name)
    args, _, _ = make_inputs(name, 1, 8, 2, 16, 16, seed=0)
    fn = getattr(m, _func(name))
    plain, _ = fn(*args)
    defaults = {k: d for k, d, _, _ in m.FLA_KEYWORDS}
    assert defaults, f"{name}: no FLA keywords printed"
    o, _ = fn(*args, **defaults)
    assert torch.equal(o, plain)


@pytest.mark.parametrize("name", VARIANTS)
def test_an_fla_keyword_asking_for_something_is_refused_by_name(name):
    m = module(name)
    args, _, _ = make_inputs(name, 1, 8, 2, 16, 16, seed=0)
    fn = getattr(m, _func(name))
    for k, default, what, allowed in m.FLA_KEYWORDS:
        if allowed:
            continue      # supported: test_a_supported_chunk_size_...
        value = torch.tensor([0, 8]) if default is None else (True if default is False else default // 2)
        with pytest.raises(ValueError) as e:
            fn(*args, **{k: value})
        msg = str(e.value)
        assert msg.startswith(f"{_func(name)}: {k}=") and what in msg and "output_final_state" in msg, msg


def test_a_keyword_fla_does_not_have_is_named_with_what_is_taken():
    args, _, _ = make_inputs("gla", 1, 8, 2, 16, 16, seed=0)
    with pytest.raises(TypeError) as e:
        G.chunk_gla(*args, use_qk_l2norm_in_kernel=True)     # Gated DeltaNet's, not GLA's
    msg = str(e.value)
    assert "'use_qk_l2norm_in_kernel'" in msg and "q, k, v, g, scale, initial_state" in msg
    assert "cu_seqlens" in msg


def test_fla_layers_call_pattern_with_none_keywords():
    # as fla/layers/gated_deltanet.py calls it in a fixed-length batch
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 2, 16, 16, seed=0)
    o, ht = G.chunk_gated_delta_rule(*args, initial_state=None, output_final_state=True, cu_seqlens=None,
                                     use_qk_l2norm_in_kernel=False)
    assert o.shape == (1, 8, 2, 16) and ht.shape == (1, 2, 16, 16)


def test_head_first_shape_warns_and_a_proper_one_does_not():
    args, _, _ = make_inputs("gla", 1, 3, 4, 16, 16, seed=0)        # T = 3 < H = 4
    with pytest.warns(UserWarning, match=r"T = 3 < H = 4.*head-first"):
        G.chunk_gla(*args)
    args, _, _ = make_inputs("gla", 1, 8, 2, 16, 16, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        G.chunk_gla(*args)


def test_the_docs_table_lists_every_keyword():
    with open(os.path.join(ROOT, "docs", "fla_api.md"), encoding="utf-8") as f:
        text = f.read()
    for func, kws in list(fla_api.KEYWORDS.items()) + list(fla_api.RECURRENT_KEYWORDS.items()):
        for k in kws:
            assert f"| `{func}` | `{k.name}` | `{k.default!r}` |" in text, (func, k.name)
    for func, params in fla_api.PARAMS.items():
        for p in params:
            if p.arg != p.name or p.none:
                assert f"| `{func}` | `{p.name}` |" in text, (func, p.name)


def _fwd_bwd(fn, args, **kw):
    leaves = [a.detach().requires_grad_() for a in args]
    o, ht = fn(*leaves, output_final_state=True, **kw)
    (o.sum() + ht.square().sum()).backward()
    return [o, ht] + [x.grad for x in leaves]


@pytest.mark.parametrize("name", [n for n in VARIANTS if any(k[0] == "chunk_size" for k in module(n).FLA_KEYWORDS)])
def test_a_supported_chunk_size_gives_the_same_function(name):
    m = module(name)
    _, default, _, allowed = next(k for k in m.FLA_KEYWORDS if k[0] == "chunk_size")
    args, _, _ = make_inputs(name, 1, 40, 2, 16, 16, seed=2)      # partial chunks at 16, 32 and 64
    fn = getattr(m, _func(name))
    want = _fwd_bwd(fn, args)
    names = ["o", "final_state"] + [n for n, _ in m.ARGS]
    loose = set(log_gates(name)) | {"beta"}      # the fuzz campaign's tolerances: 1e-4, gates and beta 1e-3
    for c in allowed:
        got = [t.detach() for t in _fwd_bwd(fn, args, chunk_size=c)]
        for n, w, g in zip(names, [t.detach() for t in want], got):
            assert rel_rms(g, w) <= (1e-3 if n in loose else 1e-4), (name, c, n, rel_rms(g, w))
    with pytest.raises(ValueError, match=f"chunkproof supports chunk_size in {', '.join(map(str, allowed))}"):
        fn(*args, chunk_size=128)


def test_chunk_size_is_refused_where_fla_has_none():
    args, _, _ = make_inputs("gla", 1, 8, 2, 16, 16, seed=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunk_size'"):
        G.chunk_gla(*args, chunk_size=32)


def _has(name, kw):
    return any(k[0] == kw for k in module(name).FLA_KEYWORDS)


def _grads(fn, args, h0, pre=None, **kw):
    # ``pre`` maps the leaves to the call's arguments: the gradients stay the leaves'
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = fn(*(pre(leaves) if pre else leaves), initial_state=h, output_final_state=True, **kw)
    gen = torch.Generator().manual_seed(9)
    ((o * torch.randn(o.shape, generator=gen)).sum() + (ht * torch.randn(ht.shape, generator=gen)).sum()).backward()
    return [o.detach(), ht.detach()] + [x.grad for x in leaves] + [h.grad]


def _l2(x):
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + 1e-6)).to(x.dtype)


@pytest.mark.parametrize("name", [n for n in VARIANTS if _has(n, "use_qk_l2norm_in_kernel")])
def test_l2norm_in_kernel_equals_normalising_outside(name):
    m = module(name)
    args, _, h0 = make_inputs(name, 1, 20, 2, 16, 16, seed=5, h0=True)
    args = [a * 3 if n in ("q", "k") else a for (n, _), a in zip(m.ARGS, args)]    # not unit length
    fn = getattr(m, _func(name))
    inside = _grads(fn, args, h0, use_qk_l2norm_in_kernel=True)
    outside = _grads(fn, args, h0, pre=lambda ls: [_l2(x) if n in ("q", "k") else x for (n, _), x in zip(m.ARGS, ls)])
    for a, b in zip(inside, outside):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", [n for n in VARIANTS if _has(n, "use_beta_sigmoid_in_kernel")])
@pytest.mark.parametrize("neg", [False, True])
def test_beta_sigmoid_in_kernel_equals_the_sigmoid_outside(name, neg):
    m = module(name)
    args, _, h0 = make_inputs(name, 1, 20, 2, 16, 16, seed=6, h0=True)
    i = [n for n, _ in m.ARGS].index("beta")
    raw = list(args)
    raw[i] = torch.randn(args[i].shape, generator=torch.Generator().manual_seed(1))
    fn = getattr(m, _func(name))
    o1, ht1 = fn(*raw, initial_state=h0, output_final_state=True, use_beta_sigmoid_in_kernel=True,
                 allow_neg_eigval=neg)
    out = list(raw)
    out[i] = torch.sigmoid(raw[i]) * (2 if neg else 1)
    o2, ht2 = fn(*out, initial_state=h0, output_final_state=True)
    assert torch.equal(o1, o2) and torch.equal(ht1, ht2)
    with pytest.raises(ValueError, match="allow_neg_eigval=True needs use_beta_sigmoid_in_kernel=True"):
        fn(*raw, allow_neg_eigval=True)


@pytest.mark.parametrize("name", [n for n in VARIANTS if _has(n, "state_v_first")])
def test_state_v_first_transposes_the_states_in_and_out(name):
    m = module(name)
    args, _, h0 = make_inputs(name, 1, 20, 2, 16, 24, seed=7, h0=True)       # K != V
    fn = getattr(m, _func(name))
    o1, ht1 = fn(*args, initial_state=h0, output_final_state=True)
    o2, ht2 = fn(*args, initial_state=h0.transpose(-1, -2).contiguous(), output_final_state=True,
                 state_v_first=True)
    assert torch.equal(o1, o2) and ht2.shape == (1, 2, 24, 16) and torch.equal(ht2, ht1.transpose(-1, -2))
    if not _has(name, "transpose_state_layout"):      # FLA's function has no such keyword
        with pytest.raises(TypeError, match="unexpected keyword argument 'transpose_state_layout'"):
            fn(*args, transpose_state_layout=True)
        return
    with pytest.warns(DeprecationWarning, match="transpose_state_layout is deprecated"):
        o3, _ = fn(*args, initial_state=h0.transpose(-1, -2), transpose_state_layout=True)
    assert torch.equal(o3, o1)
    with pytest.raises(ValueError, match="not both"):
        fn(*args, state_v_first=True, transpose_state_layout=True)


def _naive_gate(g, A_log, dt_bias, lower_bound=None):
    # FLA's naive_gdn_gate / naive_kda_gate (fla/ops/*/gate.py), written out
    HV = g.shape[2]
    per = g.shape[3:]
    x = g.float() + (dt_bias.float().view(HV, *per) if dt_bias is not None else 0)
    if lower_bound is None:
        return -A_log.float().exp().view(HV, *[1] * len(per)) * torch.nn.functional.softplus(x)
    a = A_log.float().exp().view(HV, *[1] * len(per)) if A_log is not None else 1
    return lower_bound * torch.sigmoid(a * x)


@pytest.mark.parametrize("name, form", [
    (n, form) for n in VARIANTS if _has(n, "use_gate_in_kernel")
    for form in ("softplus", "softplus, no dt_bias", "lower_bound", "lower_bound, no A_log")
    if "lower_bound" not in form or _has(n, "lower_bound")])
def test_gate_in_kernel_equals_fla_gate_outside(name, form):
    m = module(name)
    args, _, h0 = make_inputs(name, 1, 20, 2, 16, 16, seed=8, h0=True)
    names = [n for n, _ in m.ARGS]
    i = names.index("g")
    gen = torch.Generator().manual_seed(3)
    raw = list(args)
    raw[i] = torch.randn(args[i].shape, generator=gen)
    HV, per = args[i].shape[2], args[i].shape[3:]
    A_log = None if "no A_log" in form else torch.rand(HV, generator=gen)
    dt_bias = None if "no dt_bias" in form else torch.randn(HV * (per[0] if per else 1), generator=gen)
    bound = -3.0 if "lower_bound" in form else None
    kw = dict(use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
    if bound is not None:
        kw["lower_bound"] = bound
    leaves = [t.detach().requires_grad_() for t in raw]
    params = [t.detach().requires_grad_() if t is not None else None for t in (A_log, dt_bias)]
    fn = getattr(m, _func(name))
    o1, ht1 = fn(*leaves, initial_state=h0, output_final_state=True, **dict(kw, A_log=params[0], dt_bias=params[1]))
    (o1.sum() + ht1.square().sum()).backward()
    got = [o1.detach(), ht1.detach()] + [x.grad for x in leaves] + [p.grad for p in params if p is not None]
    leaves2 = [t.detach().requires_grad_() for t in raw]
    params2 = [t.detach().requires_grad_() if t is not None else None for t in (A_log, dt_bias)]
    out = list(leaves2)
    out[i] = _naive_gate(leaves2[i], params2[0], params2[1], bound)
    o2, ht2 = fn(*out, initial_state=h0, output_final_state=True)
    (o2.sum() + ht2.square().sum()).backward()
    want = [o2.detach(), ht2.detach()] + [x.grad for x in leaves2] + [p.grad for p in params2 if p is not None]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_gate_in_kernel_mistakes_are_named():
    args, _, _ = make_inputs("gated_delta_rule", 1, 8, 2, 16, 16, seed=0)
    fn = G.chunk_gated_delta_rule
    with pytest.raises(ValueError, match="A_log is used only with use_gate_in_kernel=True"):
        fn(*args, A_log=torch.zeros(2))
    with pytest.raises(ValueError, match="use_gate_in_kernel=True needs A_log"):
        fn(*args, use_gate_in_kernel=True)
    with pytest.raises(ValueError, match=r"A_log must have HV = 2 elements"):
        fn(*args, use_gate_in_kernel=True, A_log=torch.zeros(3))
    with pytest.raises(ValueError, match=r"dt_bias must have HV = 2 elements"):
        fn(*args, use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(4))
    with pytest.raises(TypeError, match="unexpected keyword argument 'lower_bound'"):
        fn(*args, use_gate_in_kernel=True, lower_bound=-3.0)     # KDA's, not Gated DeltaNet's


@pytest.mark.parametrize("name", [n for n in VARIANTS if _has(n, "disable_recompute")])
def test_disable_recompute_keeps_the_forward_tiles_and_gives_the_same_gradients(name):
    fn = kernel(name)
    args, _, h0 = make_inputs(name, 1, 40, 2, 16, 16, seed=11, h0=True)
    kept, recomputed = _grads(fn, args, h0, disable_recompute=True), _grads(fn, args, h0)
    for a, b in zip(kept, recomputed):
        assert rel_rms(a, b) < 1e-6, name


@pytest.mark.parametrize("v_first", [False, True])
def test_return_intermediate_states_are_the_recurrences_states_at_each_chunk_start(v_first):
    args, ref, h0 = make_inputs("kda", 2, 70, 2, 16, 24, seed=12, h0=True)
    kw = dict(chunk_size=32, output_final_state=True, state_v_first=v_first)
    h_in = h0.transpose(-1, -2) if v_first else h0
    with torch.inference_mode():
        o, ht, h = G.chunk_kda(*args, initial_state=h_in, return_intermediate_states=True, **kw)
    o2, ht2 = G.chunk_kda(*args, initial_state=h_in, **kw)
    assert torch.equal(o, o2) and torch.equal(ht, ht2)
    assert h.shape == (2, 3, 2) + ((24, 16) if v_first else (16, 24)) and h.dtype == args[0].dtype
    for c, start in enumerate((0, 32, 64)):
        _, rh = recurrence("kda", initial_state=h0, **{n: t[:, :start] if t.dim() >= 3 else t for n, t in ref.items()}) \
            if start else (None, h0.double())
        got = h[:, c].transpose(-1, -2) if v_first else h[:, c]
        assert rel_rms(got, rh) < 1e-5, (c, rel_rms(got, rh))
    leaves = [a.detach().requires_grad_() for a in args]
    with pytest.raises(ValueError, match=r"chunk_kda: return_intermediate_states=True returns states with no "
                                         r"gradient: call it under torch.no_grad\(\)"):
        G.chunk_kda(*leaves, return_intermediate_states=True)


def test_dplr_gate_promises_are_accepted_and_checked():
    args, _, _ = make_inputs("dplr_delta_rule", 1, 20, 2, 16, 16, seed=13)
    plain = G.chunk_dplr_delta_rule(*args)[0]
    for kw in (dict(safe_gate=True), dict(lower_bound=-30.0), dict(safe_gate=True, lower_bound=-30.0)):
        assert torch.equal(G.chunk_dplr_delta_rule(*args, **kw)[0], plain), kw
    with pytest.raises(ValueError, match=r"lower_bound=0.5 \(gates promised >= lower_bound .*\): chunkproof "
                                         r"supports lower_bound in a negative number"):
        G.chunk_dplr_delta_rule(*args, lower_bound=0.5)
