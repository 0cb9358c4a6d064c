"""FLA's layer classes' calls, keyword for keyword (issue 18 item 7): how
fla/layers/gated_deltanet.py, kda.py and gla.py (flash-linear-attention at bc3b101d)
call chunk_gated_delta_rule, chunk_kda and chunk_gla in chunk mode, on a fixed-length
batch (cu_seqlens=None) and, for the two delta rules, on sequences packed as FLA's layers
pack a padded batch (cu_seqlens from the attention mask, B = 1), each held to the fp64 recurrence (chunkproof.fuzz.reference)
of the inputs as FLA's layer means them: q, k L2-normalised, the gate from FLA's gate
formula, beta = sigmoid(beta) (x 2 with allow_neg_eigval), states V-first, grouped value
heads.  Outputs, final states and the gradients of every input and parameter, fp32."""
import pytest
import torch
import torch.nn.functional as F

import chunkproof.kernels as G
from chunkproof.fuzz.reference import _recurrence_graph, rel_rms

B, T, H, HV, K, V = 1, 40, 1, 2, 16, 16        # GVA (two value heads per q/k head), partial chunk


def _r(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _l2(x):
    return x * torch.rsqrt(x.square().sum(-1, keepdim=True) + 1e-6)


def _check(call, reference, raw):
    """call(**fp32 leaves) and reference(**fp64 leaves) -> (o, final state); compared,
    with the gradients of <dO, o> + <dS, S> in every leaf."""
    gen = torch.Generator().manual_seed(11)
    lo = {n: x.float().requires_grad_() for n, x in raw.items()}
    hi = {n: x.clone().requires_grad_() for n, x in raw.items()}
    o, ht = call(**lo)
    wo, wht = reference(**hi)
    do, dht = _r(gen, *wo.shape), _r(gen, *wht.shape)
    ((o.double() * do).sum() + (ht.double() * dht).sum()).backward()
    ((wo * do).sum() + (wht * dht).sum()).backward()
    wo, wht = wo.detach(), wht.detach()
    assert rel_rms(o, wo) <= 1e-4 and rel_rms(ht, wht) <= 1e-4, (rel_rms(o, wo), rel_rms(ht, wht))
    for n in raw:
        tol = 1e-3 if n in ("g", "gk", "beta", "A_log", "dt_bias") else 1e-4
        assert rel_rms(lo[n].grad, hi[n].grad) <= tol, (n, rel_rms(lo[n].grad, hi[n].grad))


def _gqa(x):
    return x.repeat_interleave(HV // H, dim=2)


# the sequences of a packed batch (two, as FLA's layers unpad a batch of two by its mask)
PACKED = [13, T - 13]


def _offsets(lens):
    return None if lens is None else torch.tensor([0, lens[0], sum(lens)], dtype=torch.int32)


def _per_sequence(fn, lens, timed, state, **x):
    """The fp64 recurrence fn(state row, **x) on each sequence of ``lens`` (all of T: one
    sequence per batch row), outputs concatenated along T and states stacked."""
    if lens is None:
        return fn(state, **x)
    outs = []
    for i, (a, b) in enumerate(zip([0, lens[0]], [lens[0], sum(lens)])):
        outs.append(fn(state[i:i + 1], **{n: (t[:, a:b] if n in timed else t) for n, t in x.items()}))
    return torch.cat([o for o, _ in outs], dim=1), torch.cat([h for _, h in outs])


@pytest.mark.parametrize("lens", [None, PACKED])
@pytest.mark.parametrize("neg", [False, True])
def test_gated_deltanet_layer_call(neg, lens):
    gen = torch.Generator().manual_seed(1)
    N = B if lens is None else len(lens)
    raw = dict(q=_r(gen, B, T, H, K), k=_r(gen, B, T, H, K), v=_r(gen, B, T, HV, V), g=_r(gen, B, T, HV),
               beta=_r(gen, B, T, HV), A_log=torch.rand(HV, generator=gen, dtype=torch.float64),
               dt_bias=_r(gen, HV), state=_r(gen, N, HV, V, K))

    def call(q, k, v, g, beta, A_log, dt_bias, state):
        return G.chunk_gated_delta_rule(
            q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=state,
            output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, allow_neg_eigval=neg, state_v_first=True, cu_seqlens=_offsets(lens))

    def one(state, q, k, v, g, beta, A_log, dt_bias):
        gate = -A_log.exp() * F.softplus(g + dt_bias)
        o, ht = _recurrence_graph("gated_delta_rule", _gqa(_l2(q)), _gqa(_l2(k)), v, gate,
                                  torch.sigmoid(beta) * (2 if neg else 1), scale=K ** -0.5,
                                  initial_state=state.transpose(-1, -2))
        return o, ht.transpose(-1, -2)

    def reference(state, **x):
        return _per_sequence(one, lens, ("q", "k", "v", "g", "beta"), state, **x)
    _check(call, reference, raw)


@pytest.mark.parametrize("lens", [None, PACKED])
@pytest.mark.parametrize("safe_gate, lower_bound", [(False, None), (True, -5.0)])
def test_kda_layer_call(safe_gate, lower_bound, lens):
    gen = torch.Generator().manual_seed(2)
    N = B if lens is None else len(lens)
    raw = dict(q=_r(gen, B, T, H, K), k=_r(gen, B, T, H, K), v=_r(gen, B, T, HV, V), g=_r(gen, B, T, HV, K),
               beta=_r(gen, B, T, HV), A_log=torch.rand(HV, generator=gen, dtype=torch.float64),
               dt_bias=_r(gen, HV * K), state=_r(gen, N, HV, V, K))

    def call(q, k, v, g, beta, A_log, dt_bias, state):
        return G.chunk_kda(
            q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=state,
            output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, allow_neg_eigval=False, safe_gate=safe_gate,
            lower_bound=lower_bound, state_v_first=True, cu_seqlens=_offsets(lens))

    def one(state, q, k, v, g, beta, A_log, dt_bias):
        x = g + dt_bias.view(HV, K)
        a = A_log.exp().view(HV, 1)
        gate = -a * F.softplus(x) if lower_bound is None else lower_bound * torch.sigmoid(a * x)
        o, ht = _recurrence_graph("kda", _gqa(_l2(q)), _gqa(_l2(k)), v, gate, torch.sigmoid(beta),
                                  scale=K ** -0.5, initial_state=state.transpose(-1, -2))
        return o, ht.transpose(-1, -2)

    def reference(state, **x):
        return _per_sequence(one, lens, ("q", "k", "v", "g", "beta"), state, **x)
    _check(call, reference, raw)


def test_gla_layer_call():
    gen = torch.Generator().manual_seed(3)
    raw = dict(q=_r(gen, B, T, HV, K), k=_r(gen, B, T, HV, K), v=_r(gen, B, T, HV, V),
               gk=F.logsigmoid(_r(gen, B, T, HV, K)) / 16, state=_r(gen, B, HV, V, K))

    def call(q, k, v, gk, state):
        return G.chunk_gla(q=q, k=k, v=v, g=gk, initial_state=state, output_final_state=True,
                           state_v_first=True, cu_seqlens=None)

    def reference(q, k, v, gk, state):
        o, ht = _recurrence_graph("gla", q, k, v, gk, scale=K ** -0.5, initial_state=state.transpose(-1, -2))
        return o, ht.transpose(-1, -2)
    _check(call, reference, raw)
