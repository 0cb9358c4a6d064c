"""The fp64 recurrences in FLA's layout: the oracle of the generated kernels.

States are V x K here (the notes' form); the API's states are [B, H, K, V].
Vectorised over batch and heads, sequential over time."""
import torch


def _transition(name, S, k, g, beta, a, b):
    """The S_{t-1}-dependent part of S_t.  S: [B, H, V, K]; k, g, a, b: [B, H, K]
    (g [B, H] for the scalar gate); beta: [B, H]."""
    if name == "gla":
        return S * torch.exp(g)[:, :, None, :]
    if name == "gated_delta_rule":
        Sk = torch.einsum("bhvk,bhk->bhv", S, k)
        return torch.exp(g)[:, :, None, None] * (S - beta[:, :, None, None] * Sk[..., None] * k[:, :, None, :])
    if name == "kda":
        Sd = S * torch.exp(g)[:, :, None, :]
        Sk = torch.einsum("bhvk,bhk->bhv", Sd, k)
        return Sd - beta[:, :, None, None] * Sk[..., None] * k[:, :, None, :]
    if name == "dplr_delta_rule":
        Sa = torch.einsum("bhvk,bhk->bhv", S, a)
        return S * torch.exp(g)[:, :, None, :] + Sa[..., None] * b[:, :, None, :]
    raise KeyError(name)


HAND_WRITTEN = ("gla", "gated_delta_rule", "kda", "dplr_delta_rule")


def _oracle(name, inputs, scale, initial_state):
    from chunkproof.codegen.variants import BY_NAME
    from .oracle import run
    return run(BY_NAME[name], inputs, scale=scale, initial_state=initial_state)


def recurrence(name, scale=None, initial_state=None, **inputs):
    """o [B, T, H, V] and final state [B, H, K, V], in float64 on the inputs' device.
    The four variants first generated run the recurrences written out below (their
    kwargs: q, k, v, g, beta, a, b); every other one its derivation's own recurrence
    (chunkproof.fuzz.oracle; kwargs: the API's names)."""
    if name not in HAND_WRITTEN:
        with torch.no_grad():
            o, ht = _oracle(name, {n: x.detach() for n, x in inputs.items()}, scale, initial_state)
        return o, ht.contiguous()
    return _hand_recurrence(name, scale=scale, initial_state=initial_state, **inputs)


def _hand_recurrence(name, q, k, v, g, beta=None, a=None, b=None, scale=None, initial_state=None):
    f = lambda x: None if x is None else x.detach().to(torch.float64)  # noqa: E731
    with torch.no_grad():
        o, ht = _recurrence_graph(name, *map(f, (q, k, v, g, beta, a, b)), scale=scale,
                                  initial_state=f(initial_state))
    return o, ht.contiguous()


def rel_rms(x, ref):
    x = x.detach().to(torch.float64).to(ref.device)
    return float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref).clamp_min(1e-30))


def gate_grad_scale(inputs, grads):
    """The size of the terms a log-gate gradient is the (suffix) sum of: ||q . dq|| +
    ||k . dk|| (+ a, b).  At strong decay those terms cancel to a gradient many orders
    smaller (1e-8 of them at -20 per step), which fp32 can only resolve to its rounding of
    the terms: a gate gradient is compared with max(||its reference||, this scale)."""
    return sum(float((inputs[n].detach().double().to(grads[n].device) * grads[n]).norm())
               for n in SCALE_TERMS if n in grads and inputs.get(n) is not None)


# the inputs whose q . dq-like terms a log gate's gradient sums (FLA's names; RWKV-6's r)
SCALE_TERMS = ("q", "r", "k", "a", "b")
# the log gates' names (FLA's): their gradients are measured against gate_grad_scale
LOG_GATES = ("g", "gk", "w")


def grad_errors(grads, want, inputs):
    """{name: ||got - want|| / scale} for the kernels' gradients (the API's names; DPLR's
    gk is the reference's g) against reference_grads' `want`.  The scale is the
    reference's own norm, but at least 1e-3 of the largest reference gradient (a gradient
    that is 0 in exact arithmetic, like the gate's at T = 1 without h0, cancels only to
    rounding) and, for a log-gate gradient, at least gate_grad_scale.  Where every
    reference gradient is 0 the errors are absolute."""
    floor = 1e-3 * max(float(w.norm()) for w in want.values())
    if floor == 0.0:   # every reference gradient is 0 (beta = 0, no state): absolute errors
        floor = 1.0
    gfloor = max(floor, gate_grad_scale(inputs, want))
    out = {}
    for n, g in grads.items():
        w = want[{"gk": "g"}.get(n, n)]
        out[n] = float((g.detach().double().to(w.device) - w).norm()) / \
            max(float(w.norm()), gfloor if n in LOG_GATES else floor)
    return out


def reference_grads(name, inputs, do, dht, scale=None, initial_state=None):
    """Gradients of L = <dO, O> + <dS_T, S_T> through the fp64 recurrence, by autograd:
    the oracle of the backward kernels.  `inputs` maps q, k, v, g (and beta, or a, b) to
    tensors; returns {name: gradient (float64)} for every input and 'initial_state'
    when one is given."""
    leaves = {n: x.detach().to(torch.float64).requires_grad_(True) for n, x in inputs.items() if x is not None}
    h0 = None
    if initial_state is not None:
        h0 = initial_state.detach().to(torch.float64).requires_grad_(True)
        leaves["initial_state"] = h0
    with torch.enable_grad():
        kw = {n: x for n, x in leaves.items() if n != "initial_state"}
        if name in HAND_WRITTEN:
            o, ht = _recurrence_graph(name, scale=scale, initial_state=h0, **kw)
        else:
            o, ht = _oracle(name, kw, scale, h0)
        loss = (o * do.to(torch.float64)).sum() + (ht * dht.to(torch.float64)).sum()
        grads = torch.autograd.grad(loss, list(leaves.values()))
    return dict(zip(leaves, grads))


def _recurrence_graph(name, q, k, v, g, beta=None, a=None, b=None, scale=None, initial_state=None):
    # float64 inputs; differentiable (reference_grads) unless called under no_grad
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    S = torch.zeros(B, H, V, K, dtype=torch.float64, device=q.device)
    if initial_state is not None:
        S = initial_state.transpose(-1, -2)
    pick = lambda x, t: None if x is None else x[:, t]  # noqa: E731
    outs = []
    for t in range(T):
        kt, bt = k[:, t], pick(beta, t)
        S = _transition(name, S, kt, g[:, t], bt, pick(a, t), pick(b, t))
        w = v[:, t] * bt[..., None] if name in ("gated_delta_rule", "kda") else v[:, t]
        S = S + w[..., None] * kt[:, :, None, :]
        outs.append(torch.einsum("bhvk,bhk->bhv", S, q[:, t] * scale))
    return torch.stack(outs, dim=1), S.transpose(-1, -2)
