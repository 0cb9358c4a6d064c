"""Inputs for the generated kernels, drawn the way FLA's tests draw them: log-sigmoid
gates, unit keys for the delta rules, beta in (0, 1), a stable DPLR transition."""
import torch
import torch.nn.functional as F

import generated_kernels as G

VARIANTS = ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"]
FUNCS = {"gla": G.chunk_gla, "gated_delta_rule": G.chunk_gated_delta_rule, "kda": G.chunk_kda,
         "dplr_delta_rule": G.chunk_dplr_delta_rule}


def make_inputs(name, B, T, H, K, V, seed, dtype=torch.float32, device="cpu", h0=False):
    """(positional args of the API, reference kwargs, initial state or None)."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V)
    beta = torch.rand(B, T, H, generator=gen, dtype=torch.float64)
    if name == "gated_delta_rule":
        g = F.logsigmoid(r(B, T, H))
    else:
        g = F.logsigmoid(r(B, T, H, K))
    if name in ("gated_delta_rule", "kda"):
        k = F.normalize(k, dim=-1)
    a = b = None
    if name == "dplr_delta_rule":
        u = F.normalize(r(B, T, H, K), dim=-1)
        a, b = -beta[..., None] * u, u       # Diag(alpha) - beta u u^T: contracting
    state = r(B, H, K, V) if h0 else None
    cast = lambda x: None if x is None else x.to(dtype).to(device)  # noqa: E731
    q, k, v, g, beta, a, b = map(cast, (q, k, v, g, beta, a, b))
    if state is not None:
        state = state.to(torch.float32).to(device)
    args = {"gla": (q, k, v, g), "gated_delta_rule": (q, k, v, g, beta), "kda": (q, k, v, g, beta),
            "dplr_delta_rule": (q, k, v, a, b, g)}[name]
    ref = dict(q=q, k=k, v=v, g=g)
    if name in ("gated_delta_rule", "kda"):
        ref["beta"] = beta
    if name == "dplr_delta_rule":
        ref.update(a=a, b=b)
    return args, ref, state
