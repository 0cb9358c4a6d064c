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


def recurrence(name, q, k, v, g, beta=None, a=None, b=None, scale=None, initial_state=None):
    """o [B, T, H, V] and final state [B, H, K, V], in float64 on the inputs' device."""
    f = lambda x: None if x is None else x.detach().to(torch.float64)  # noqa: E731
    q, k, v, g, beta, a, b = map(f, (q, k, v, g, beta, a, b))
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    o = torch.zeros(B, T, H, V, dtype=torch.float64, device=q.device)
    S = torch.zeros(B, H, V, K, dtype=torch.float64, device=q.device)
    if initial_state is not None:
        S = f(initial_state).transpose(-1, -2).clone()
    pick = lambda x, t: None if x is None else x[:, t]  # noqa: E731
    for t in range(T):
        kt, bt = k[:, t], pick(beta, t)
        S = _transition(name, S, kt, g[:, t], bt, pick(a, t), pick(b, t))
        w = v[:, t] * bt[..., None] if name in ("gated_delta_rule", "kda") else v[:, t]
        S = S + w[..., None] * kt[:, :, None, :]
        o[:, t] = torch.einsum("bhvk,bhk->bhv", S, q[:, t] * scale)
    return o, S.transpose(-1, -2).contiguous()


def rel_rms(x, ref):
    x = x.detach().to(torch.float64).to(ref.device)
    return float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
