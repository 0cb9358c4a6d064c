"""The fp64 recurrences in FLA's layout: the oracle of the generated kernels.

States are V x K here (the notes' form); the API's states are [B, H, K, V]."""
import torch


def _step(name, S, k, g, beta, a, b):
    """S_{t-1} -> the transition part of S_t, for one (batch, head): S is [V, K]."""
    if name == "gla":
        return S * torch.exp(g)[None, :]
    if name == "gated_delta_rule":
        return torch.exp(g) * (S - beta * (S @ k)[:, None] * k[None, :])
    if name == "kda":
        Sd = S * torch.exp(g)[None, :]
        return Sd - beta * (Sd @ k)[:, None] * k[None, :]
    if name == "dplr_delta_rule":
        return S * torch.exp(g)[None, :] + (S @ a)[:, None] * b[None, :]
    raise KeyError(name)


def recurrence(name, q, k, v, g, beta=None, a=None, b=None, scale=None, initial_state=None):
    """o [B, T, H, V] and final state [B, H, K, V], in float64."""
    f = lambda x: None if x is None else x.detach().to(torch.float64)  # noqa: E731
    q, k, v, g, beta, a, b = map(f, (q, k, v, g, beta, a, b))
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    o = torch.zeros(B, T, H, V, dtype=torch.float64)
    hT = torch.zeros(B, H, K, V, dtype=torch.float64)
    for bb in range(B):
        for h in range(H):
            S = torch.zeros(V, K, dtype=torch.float64)
            if initial_state is not None:
                S = initial_state[bb, h].detach().to(torch.float64).T.clone()
            for t in range(T):
                kt = k[bb, t, h]
                gt = g[bb, t, h]
                bt = None if beta is None else beta[bb, t, h]
                at_ = None if a is None else a[bb, t, h]
                btv = None if b is None else b[bb, t, h]
                S = _step(name, S, kt, gt, bt, at_, btv)
                w = bt * v[bb, t, h] if name in ("gated_delta_rule", "kda") else v[bb, t, h]
                S = S + w[:, None] * kt[None, :]
                o[bb, t, h] = S @ (q[bb, t, h] * scale)
            hT[bb, h] = S.T
    return o, hT


def rel_rms(x, ref):
    x = x.detach().to(torch.float64).cpu()
    return float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
