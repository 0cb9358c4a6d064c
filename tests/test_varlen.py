"""Variable-length batches (issue 18 item 1, FLA's cu_seqlens): N sequences packed along T
with B = 1, one state per sequence.  The property: a packed call equals a loop of calls,
one per sequence (outputs and final states bit for bit, every gradient), no row after
cu_seqlens[-1] gets anything but zeros, and each sequence equals the fp64 recurrence."""
import warnings

import pytest
import torch

from chunkproof.fuzz.cases import VARIANTS, kernel, make_inputs, module
from chunkproof.fuzz.reference import recurrence, rel_rms

LENS = [7, 0, 40, 2]           # an empty sequence; one over a 32-row chunk; a tail of 3 rows
H, K, V = 2, 16, 16


def _cu(lens, dtype=torch.int32):
    return torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=dtype)


def _run(fn, args, h0, weights, **kw):
    leaves = [a.detach().requires_grad_() for a in args]
    h = h0.detach().requires_grad_()
    o, ht = fn(*leaves, initial_state=h, output_final_state=True, **kw)
    do, dht = weights(o, ht)
    ((o * do).sum() + (ht * dht).sum()).backward()
    return o.detach(), ht.detach(), [x.grad for x in leaves] + [h.grad]


def _weights(o, ht):
    gen = torch.Generator().manual_seed(9)
    return torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)


def _rows(x, T):
    """Whether x has a row per token ([1, T, ...])."""
    return x.dim() >= 3 and x.shape[:2] == (1, T)


@pytest.mark.parametrize("name", VARIANTS)
def test_a_packed_batch_equals_a_loop_over_its_sequences(name):
    T = sum(LENS) + 3
    args, ref, _ = make_inputs(name, 1, T, H, K, V, seed=5)
    N = len(LENS)
    h0 = torch.randn(N, H, K, V, generator=torch.Generator().manual_seed(6))
    cu = _cu(LENS)
    fn = kernel(name)
    names = [n for n, _ in module(name).ARGS] + ["initial_state"]
    o, ht, grads = _run(fn, args, h0, _weights, cu_seqlens=cu)
    assert o.shape == (1, T, H, V) and ht.shape == (N, H, K, V)
    end = int(cu[-1])
    assert torch.count_nonzero(o[:, end:]) == 0
    for n, g in zip(names, grads):
        if _rows(g, T):
            assert torch.count_nonzero(g[:, end:]) == 0, f"{name}: d{n} after cu_seqlens[-1]"
    do, dht = _weights(o, ht)
    loop_params = {}
    for i in range(N):
        a, b = int(cu[i]), int(cu[i + 1])
        if a == b:       # an empty sequence: its final state is its initial state, gradient dht
            assert torch.equal(ht[i], h0[i])
            torch.testing.assert_close(grads[-1][i], dht[i])
            continue
        part = [x[:, a:b] if _rows(x, T) else x for x in args]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # T = 2 < H: the head-first warning
            o1, ht1, g1 = _run(fn, part, h0[i:i + 1], lambda o_, ht_: (do[:, a:b], dht[i:i + 1]))
        assert torch.equal(o[:, a:b], o1) and torch.equal(ht[i:i + 1], ht1), (name, i)
        for n, g, w in zip(names, grads, g1):
            if _rows(g, T):
                torch.testing.assert_close(g[:, a:b], w, rtol=1e-6, atol=1e-7, msg=lambda m: f"{name} d{n} {i}: {m}")
            elif n == "initial_state":
                torch.testing.assert_close(g[i:i + 1], w, rtol=1e-6, atol=1e-7)
            else:     # a per-head parameter: its gradient sums over every sequence
                loop_params[n] = loop_params.get(n, 0) + w
        # and the sequence is the fp64 recurrence from its own initial state
        want_o, want_ht = recurrence(name, initial_state=h0[i:i + 1],
                                     **{k_: (x[:, a:b] if _rows(x, T) else x) for k_, x in ref.items()})
        assert rel_rms(o[:, a:b], want_o) < 1e-5 and rel_rms(ht[i:i + 1], want_ht) < 1e-5, name
    for n, w in loop_params.items():
        torch.testing.assert_close(grads[names.index(n)], w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["gla", "gated_delta_rule"])
def test_int64_offsets_and_a_host_copy_give_the_same_call(name):
    T = sum(LENS)
    args, _, _ = make_inputs(name, 1, T, H, K, V, seed=7)
    fn = kernel(name)
    o, ht = fn(*args, output_final_state=True, cu_seqlens=_cu(LENS))
    for kw in (dict(cu_seqlens=_cu(LENS, torch.int64)), dict(cu_seqlens=_cu(LENS), cu_seqlens_cpu=_cu(LENS))):
        o2, ht2 = fn(*args, output_final_state=True, **kw)
        assert torch.equal(o, o2) and torch.equal(ht, ht2)


def test_chunk_indices_are_accepted_when_they_are_the_calls_and_refused_otherwise():
    T = sum(LENS)
    args, _, _ = make_inputs("gated_delta_rule", 1, T, H, K, V, seed=8)
    fn = kernel("gated_delta_rule")
    cu = _cu(LENS)
    # FLA's chunk indices at chunk size 32 (fp32 inputs' default): (sequence, chunk in it)
    ci = torch.tensor([[0, 0], [2, 0], [2, 1], [3, 0]], dtype=torch.int32)
    o, _ = fn(*args, cu_seqlens=cu)
    o2, _ = fn(*args, cu_seqlens=cu, chunk_indices=ci)
    assert torch.equal(o, o2)
    with pytest.raises(ValueError, match=r"chunk_indices .* are not the \[4, 2\] \(sequence, chunk\) pairs of "
                                         r"cu_seqlens at this call's chunk size 32"):
        fn(*args, cu_seqlens=cu, chunk_indices=ci[:3])
    with pytest.raises(ValueError, match=r"chunk_indices is used only with cu_seqlens"):
        fn(*args, chunk_indices=ci)


@pytest.mark.parametrize("bad, match", [
    (dict(cu_seqlens=torch.tensor([0, 5, 3, 49], dtype=torch.int32)), r"never decrease .* \(decreasing at 2\)"),
    (dict(cu_seqlens=torch.tensor([1, 49], dtype=torch.int32)), r"must start at 0"),
    (dict(cu_seqlens=torch.tensor([0, 50], dtype=torch.int32)), r"end at most at T = 49"),
    (dict(cu_seqlens=torch.tensor([0.0, 49.0])), r"cu_seqlens must be a 1-d int32 or int64 tensor"),
    (dict(cu_seqlens=torch.tensor([49], dtype=torch.int32)), r"cu_seqlens must be a 1-d int32 or int64 tensor"),
    (dict(cu_seqlens=_cu(LENS), cu_seqlens_cpu=_cu(LENS[:2])), r"cu_seqlens_cpu has 3 offsets, cu_seqlens 5"),
    (dict(cu_seqlens_cpu=_cu(LENS)), r"cu_seqlens_cpu is used only with cu_seqlens"),
])
def test_bad_offsets_are_named(bad, match):
    args, _, _ = make_inputs("gla", 1, sum(LENS), H, K, V, seed=0)
    with pytest.raises(ValueError, match=match):
        kernel("gla")(*args, **bad)


def test_shapes_that_do_not_fit_the_sequences_are_named():
    args, _, _ = make_inputs("gla", 2, 10, H, K, V, seed=0)
    with pytest.raises(ValueError, match=r"packed along T with B = 1 \(as in FLA\), got B = 2"):
        kernel("gla")(*args, cu_seqlens=_cu([4, 6]))
    args, _, h0 = make_inputs("gla", 1, 10, H, K, V, seed=0, h0=True)
    with pytest.raises(ValueError, match=r"initial_state must be \[N \(the sequences of cu_seqlens\), H, K, V\] = "
                                         r"\[2, 2, 16, 16\], got \[1, 2, 16, 16\]"):
        kernel("gla")(*args, initial_state=h0, cu_seqlens=_cu([4, 6]))
    from chunkproof.kernels._runtime import Sequences, check_grads
    q, v = args[0], args[2]
    with pytest.raises(ValueError, match=r"gradient of the final state must be \[N, H, K, V\] = \[2, 2, 16, 16\]"):
        check_grads("chunk_gla", q, v, torch.zeros_like(v), torch.zeros(1, H, K, V), Sequences("chunk_gla", [0, 4, 6]))


def test_an_offsets_tensor_is_read_once_until_it_changes():
    # reading cu_seqlens synchronises with the GPU: a model's layers share one tensor
    from chunkproof.kernels._runtime import sequences
    q = torch.zeros(1, 49, H, K)
    cu = _cu(LENS)
    first = sequences("chunk_gla", dict(cu_seqlens=cu), q)
    assert sequences("chunk_gla", dict(cu_seqlens=cu), q) is first
    assert sequences("chunk_gla", dict(cu_seqlens=_cu(LENS)), q) is not first     # another tensor
    cu[2] += 1                                                                   # changed in place
    again = sequences("chunk_gla", dict(cu_seqlens=cu), q)
    assert again is not first and again.offsets == [0, 7, 8, 47, 49]
    with pytest.raises(ValueError, match=r"end at most at T = 40"):            # checked against each T
        sequences("chunk_gla", dict(cu_seqlens=cu), q[:, :40])
