"""The recurrent form, fused_recurrent_<op> (issue 18 item 4): a kernel printed from the
recurrence's own step program (codegen/recurrent.py), token by token.  The properties:
it is the chunk function (outputs, final states, gradients), on fixed-length batches,
packed sequences and grouped value heads, equals the fp64 recurrence, and decoding one
token per call with the carried state equals one call."""

import pytest
import torch

from chunkproof.codegen import recurrent
from chunkproof.codegen.fla_api import recurrent_name
from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module
from chunkproof.fuzz.reference import recurrence, rel_rms


def _fns(name):
    """(chunk function, its recurrent form)."""
    chunk = kernel(name)
    return chunk, getattr(module(name), recurrent_name(chunk.__name__))


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
    args, _, h0 = make_inputs(name, 1, 9, 1, 16, 16, seed=7, h0=True)
    _, rec = _fns(name)
    o, ht = rec(*args, initial_state=h0, output_final_state=True)
    state, outs = h0, []
    for t in range(9):
        step = [a[:, t:t + 1] if a.dim() >= 3 else a for a in args]
        o_t, state = rec(*step, initial_state=state, output_final_state=True)
        outs.append(o_t)
    assert torch.equal(torch.cat(outs, dim=1), o) and torch.equal(state, ht)


def test_reverse_is_refused_by_name():
    args, _, _ = make_inputs("gla", 1, 8, 2, 16, 16, seed=0)
    _, rec = _fns("gla")
    rec(*args, reverse=False)
    with pytest.raises(ValueError, match=r"reverse=True \(the recurrence run from the last token to the first\) "
                                         r"is not supported by chunkproof yet"):
        rec(*args, reverse=True)


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
