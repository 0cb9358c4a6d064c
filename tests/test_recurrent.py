"""The recurrent form, fused_recurrent_<op> (issue 18 item 4): a kernel printed from the
recurrence's own step program (codegen/recurrent.py), token by token.  The properties:
it is the chunk function (outputs, final states, gradients), on fixed-length batches,
packed sequences and grouped value heads, equals the fp64 recurrence, and decoding one
token per call with the carried state equals one call."""
import warnings

import pytest
import torch

from chunkproof.codegen import recurrent
from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module, recurrent as recurrent_form
from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms


def _fns(name):
    """(chunk function, its recurrent form)."""
    return kernel(name), recurrent_form(name)


def _grads(fn, args, h0, **kw):
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = fn(*leaves, initial_state=h, output_final_state=True, **kw)
    gen = torch.Generator().manual_seed(3)
    ((o * torch.randn(o.shape, generator=gen)).sum() + (ht * torch.randn(ht.shape, generator=gen)).sum()).backward()
    return [o.detach(), ht.detach()] + [x.grad for x in leaves] + [h.grad]


@pytest.mark.parametrize("name", VARIANTS)
def test_the_recurrent_form_is_the_chunk_function(name):
    args, ref, h0 = make_inputs(name, 2, 37, 2, 16, 24, seed=4, h0=True)
    chunk, rec = _fns(name)
    got, want = _grads(rec, args, h0), _grads(chunk, args, h0)
    ro, rh = recurrence(name, initial_state=h0, **ref)
    assert rel_rms(got[0], ro) < 1e-5 and rel_rms(got[1], rh) < 1e-5, name
    labels = ["o", "final state"] + [n for n, _ in module(name).ARGS] + ["initial_state"]
    for n, g, w in zip(labels, got, want):
        assert rel_rms(g, w.double()) < 1e-5, (name, n, rel_rms(g, w.double()))


@pytest.mark.parametrize("name", VARIANTS)
def test_packed_sequences_and_grouped_heads(name):
    lens = [5, 0, 30, 2]
    T = sum(lens) + 2
    args, _, _ = make_inputs(name, 1, T, 4, 16, 16, seed=5)
    names = [n for n, _ in module(name).ARGS]
    args = [a[:, :, ::2].contiguous() if n in ("q", "k") else a for n, a in zip(names, args)]   # HQ = 2, HV = 4
    h0 = torch.randn(len(lens), 4, 16, 16, generator=torch.Generator().manual_seed(6))
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    chunk, rec = _fns(name)
    o1, h1 = rec(*args, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    o2, h2 = chunk(*args, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    assert torch.count_nonzero(o1[:, sum(lens):]) == 0
    assert rel_rms(o1, o2.double()) < 1e-5 and rel_rms(h1, h2.double()) < 1e-5, name


@pytest.mark.parametrize("name", ["gla", "gated_delta_rule", "rwkv6"])
def test_decoding_token_by_token_equals_one_call(name):
    args, _, h0 = make_inputs(name, 1, 9, 2, 16, 16, seed=7, h0=True)
    _, rec = _fns(name)
    o, ht = rec(*args, initial_state=h0, output_final_state=True)
    state, outs = h0, []
    for t in range(9):
        step = [a[:, t:t + 1] if a.dim() >= 3 else a for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # T = 1 < H = 2: no head-first warning for a decoding step
            o_t, state = rec(*step, initial_state=state, output_final_state=True)
        outs.append(o_t)
    assert torch.equal(torch.cat(outs, dim=1), o) and torch.equal(state, ht)


def _flip(x):
    """Tokens in reverse order (x [B, T, ...]; a per-head parameter stays)."""
    return x.flip(1) if x is not None and x.dim() >= 3 else x


@pytest.mark.parametrize("name", VARIANTS)
def test_reverse_is_the_recurrence_over_the_tokens_reversed(name):
    # FLA's reverse: token T - 1 first.  Held to the fp64 recurrence of the reversed
    # tokens (outputs, final state, every gradient)
    args, ref, h0 = make_inputs(name, 2, 37, 2, 16, 24, seed=9, h0=True)
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = recurrent_form(name)(*leaves, initial_state=h, output_final_state=True, reverse=True)
    gen = torch.Generator().manual_seed(5)
    do, dht = torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)
    ((o * do).sum() + (ht * dht).sum()).backward()
    rev = {n: _flip(t) for n, t in ref.items()}
    ro, rh = recurrence(name, initial_state=h0, **rev)
    assert rel_rms(_flip(o), ro) < 1e-5 and rel_rms(ht, rh) < 1e-5, name
    names = [{"gk": "g"}.get(n, n) for n, _ in module(name).ARGS]
    got = dict(zip(names, [_flip(x.grad) for x in leaves]), initial_state=h.grad)
    want = reference_grads(name, rev, _flip(do).double(), dht.double(), initial_state=h0)
    for n, e in grad_errors({k: got[k] for k in want}, want, rev).items():
        assert e < 1e-4, (name, n, e)


@pytest.mark.parametrize("name", ["gla", "dplr_delta_rule", "rwkv6"])
def test_reverse_on_packed_sequences_reverses_each_sequence(name):
    lens = [5, 0, 30, 2]
    args, _, _ = make_inputs(name, 1, sum(lens) + 3, 2, 16, 16, seed=10)
    h0 = torch.randn(len(lens), 2, 16, 16, generator=torch.Generator().manual_seed(6))
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    rec = recurrent_form(name)
    leaves = [a.detach().requires_grad_() for a in args]
    o, ht = rec(*leaves, initial_state=h0, output_final_state=True, cu_seqlens=cu, reverse=True)
    o.square().sum().backward()
    assert torch.count_nonzero(o[:, sum(lens):]) == 0
    assert all(torch.count_nonzero(x.grad[:, sum(lens):]) == 0 for x in leaves if x.dim() >= 3)
    for i, (bos, eos) in enumerate(zip(cu.tolist(), cu.tolist()[1:])):
        if bos == eos:
            assert torch.equal(ht[i], h0[i]), (name, i)       # an empty sequence keeps its state
            continue
        one = [a[:, bos:eos] if a.dim() >= 3 else a for a in args]
        o1, h1 = rec(*one, initial_state=h0[i:i + 1], output_final_state=True, reverse=True)
        assert torch.equal(o[:, bos:eos], o1) and torch.equal(ht[i:i + 1], h1), (name, i)


def test_a_step_outside_the_algebra_is_refused_by_name():
    from chunkproof.derivations import ir
    S = ir.Var("S_prev", "Dv", "Dk")
    v = ir.Var("v", "Dv", "1")
    bad = ir.MatMul(ir.MatMul(v, ir.Transpose(v)), S)            # a V x V factor: rows coupled
    prog = type("P", (), dict(defs=[("S", bad), ("O", S)], state="S", output="O", name="p"))
    with pytest.raises(recurrent.RecurrentRefused, match=r"recurrence r: the recurrent kernel cannot print"):
        recurrent.StepPrinter("r", prog, {"v": ("b_v", "Dv")}, {}).print()


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_gpu_recurrent_form_is_the_chunk_function(name):
    # at a real head size on the GPU, fp32: forward (and with packed sequences)
    import os
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    args, ref, h0 = make_inputs(name, 2, 300, 4, 128, 64, seed=8, device="cuda", h0=True)
    chunk, rec = _fns(name)
    o1, h1 = rec(*args, initial_state=h0, output_final_state=True)
    o2, h2 = chunk(*args, initial_state=h0, output_final_state=True)
    ro, rh = recurrence(name, initial_state=h0, **ref)
    assert rel_rms(o1, ro) < 1e-4 and rel_rms(h1, rh) < 1e-4, name
    assert rel_rms(o1, o2.double()) < 1e-4 and rel_rms(h1, h2.double()) < 1e-4, name


def _keyword_calls(m):
    """Each supported keyword of the module's recurrent form (other than cu_seqlens and reverse, tested
    above), as the keywords of a call that uses it."""
    HV = 2
    calls = {"use_qk_l2norm_in_kernel": dict(use_qk_l2norm_in_kernel=True),
             "use_beta_sigmoid_in_kernel": dict(use_beta_sigmoid_in_kernel=True),
             "allow_neg_eigval": dict(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True),
             "use_gate_in_kernel": dict(use_gate_in_kernel=True, A_log=torch.randn(HV)),
             "A_log": dict(use_gate_in_kernel=True, A_log=torch.randn(HV)),
             "dt_bias": dict(use_gate_in_kernel=True, A_log=torch.randn(HV), dt_bias=torch.randn(HV * 16)),
             "lower_bound": dict(use_gate_in_kernel=True, lower_bound=-5.0),
             "state_v_first": dict(state_v_first=True)}
    names = [k[0] for k in getattr(m, "RECURRENT_KEYWORDS") if k[3]]
    return [(n, calls[n]) for n in names if n in calls]


@pytest.mark.parametrize("name", VARIANTS)
def test_every_recurrent_keyword_is_the_chunk_functions(name):
    m = module(name)
    args, _, h0 = make_inputs(name, 1, 20, 2, 16, 16, seed=14, h0=True)
    if name == "kda":
        args = list(args)
        args[3] = torch.randn(args[3].shape, generator=torch.Generator().manual_seed(1))   # raw gates
    chunk, rec = _fns(name)
    assert _keyword_calls(m) or name in ("dplr_delta_rule", "rwkv6"), name
    for kw_name, kw in _keyword_calls(m):
        if name == "gated_delta_rule" and "dt_bias" in kw:
            kw = dict(kw, dt_bias=kw["dt_bias"][:2])       # a gate per head
        if kw_name == "state_v_first":           # states given and returned [N, H, V, K]
            got = rec(*args, initial_state=h0.transpose(-1, -2), output_final_state=True, **kw)
            got = got[0], got[1].transpose(-1, -2)
            kw = {}
        else:
            got = rec(*args, initial_state=h0, output_final_state=True, **kw)
        want = chunk(*args, initial_state=h0, output_final_state=True, **kw)
        assert rel_rms(got[0], want[0].double()) < 1e-5 and rel_rms(got[1], want[1].double()) < 1e-5, (name, kw_name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_gpu_reverse_and_packed_recurrent_form(name):
    # fp32 on the GPU: reverse against the fp64 recurrence of the reversed tokens, and a
    # packed batch against its sequences one call each
    import os
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    args, ref, h0 = make_inputs(name, 2, 200, 4, 128, 64, seed=9, device="cuda", h0=True)
    rec = recurrent_form(name)
    o, ht = rec(*args, initial_state=h0, output_final_state=True, reverse=True)
    ro, rh = recurrence(name, initial_state=h0, **{n: _flip(t) for n, t in ref.items()})
    assert rel_rms(_flip(o), ro) < 1e-4 and rel_rms(ht, rh) < 1e-4, name
    flat = [a.reshape(1, 400, *a.shape[2:]) if a.dim() >= 3 else a for a in args]
    cu = torch.tensor([0, 200, 400], dtype=torch.int32, device="cuda")
    o2, ht2 = rec(*flat, initial_state=h0, output_final_state=True, cu_seqlens=cu, reverse=True)
    assert torch.equal(o2.reshape(o.shape), o) and torch.equal(ht2, ht), name
