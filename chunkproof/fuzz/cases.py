"""Inputs for the generated kernels, drawn the way FLA's tests draw them: log-sigmoid
gates, unit keys for the delta rules, beta in (0, 1), a stable DPLR transition; and
the extreme regimes the fuzz campaign adds (gates near 0, -20 per step, a chunk whose
cumulative decay underflows fp32; beta at 0 and 1)."""
import importlib

import torch
import torch.nn.functional as F

from chunkproof.codegen.variants import BY_NAME, VARIANTS as _GENERATED

VARIANTS = [v.name for v in _GENERATED]
API = {v.name: v.func for v in _GENERATED}      # module name -> public function
# the variants whose inputs are drawn as FLA's own tests draw them, by hand below;
# every other one by what its arguments bind to (generic_inputs)
HAND_DRAWN = ("gla", "gated_delta_rule", "kda", "dplr_delta_rule")
GATES = ("typical", "near0", "strong", "underflow")
BETAS = ("random", "zero", "one")


def module(name):
    """chunkproof.kernels.<name>, imported on first use (so that a caller can set
    TRITON_INTERPRET before triton is imported)."""
    return importlib.import_module(f"chunkproof.kernels.{name}")


def kernel(name):
    return getattr(module(name), API[name])


def recurrent(name):
    """The recurrent form of ``name``'s kernel, called with the tensors in ARGS order:
    bound by keyword to FLA's parameter names (RECURRENT_PARAMS), which differ from the
    chunk function's in name or order for some ops (fused_recurrent_gla's gk)."""
    from chunkproof.codegen.fla_api import recurrent_name
    from chunkproof.kernels._runtime import fla_names
    m = module(name)
    fn = getattr(m, recurrent_name(API[name]))
    by_arg = fla_names(m.RECURRENT_PARAMS)

    def call(*tensors, **kw):
        return fn(**{by_arg[n]: t for (n, _), t in zip(m.ARGS, tensors)}, **kw)
    call.__name__ = fn.__name__
    return call


def _gates(shape, regime, r, gen):
    if regime == "typical":
        return F.logsigmoid(r(*shape))
    if regime == "near0":
        return -1e-4 * torch.rand(*shape, generator=gen, dtype=torch.float64)
    if regime == "strong":
        return -20.0 + 0.5 * torch.rand(*shape, generator=gen, dtype=torch.float64)
    if regime == "underflow":
        # typical gates, and one 64-step window at -3 per step: -192 over a chunk, past
        # fp32's exp range (about -103)
        g = F.logsigmoid(r(*shape))
        T = shape[1]
        start = int(torch.randint(0, max(1, T - 63), (1,), generator=gen))
        g[:, start:start + 64] = -3.0
        return g
    raise ValueError(f"unknown gate regime {regime!r}; expected one of {', '.join(GATES)}")


def make_inputs(name, B, T, H, K, V, seed, dtype=torch.float32, device="cpu", h0=False,
                gates="typical", beta="random"):
    """(positional args of the API, reference kwargs, initial state or None)."""
    if name not in HAND_DRAWN:
        return generic_inputs(name, B, T, H, K, V, seed, dtype, device, h0, gates, beta)
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    q, k, v = r(B, T, H, K), r(B, T, H, K), r(B, T, H, V)
    b_ = torch.rand(B, T, H, generator=gen, dtype=torch.float64)
    if beta == "zero":
        b_ = torch.zeros_like(b_)
    elif beta == "one":
        b_ = torch.ones_like(b_)
    elif beta != "random":
        raise ValueError(f"unknown beta regime {beta!r}; expected one of {', '.join(BETAS)}")
    g = _gates((B, T, H) if name == "gated_delta_rule" else (B, T, H, K), gates, r, gen)
    if name in ("gated_delta_rule", "kda"):
        k = F.normalize(k, dim=-1)
    a = b = None
    if name == "dplr_delta_rule":
        u = F.normalize(r(B, T, H, K), dim=-1)
        a, b = -b_[..., None] * u, u       # Diag(alpha) - beta u u^T: contracting
    state = r(B, H, K, V) if h0 else None
    cast = lambda x: None if x is None else x.to(dtype).to(device)  # noqa: E731
    q, k, v, g, b_, a, b = map(cast, (q, k, v, g, b_, a, b))
    if state is not None:
        state = state.to(torch.float32).to(device)
    args = {"gla": (q, k, v, g), "gated_delta_rule": (q, k, v, g, b_), "kda": (q, k, v, g, b_),
            "dplr_delta_rule": (q, k, v, a, b, g)}[name]
    ref = dict(q=q, k=k, v=v, g=g)
    if name in ("gated_delta_rule", "kda"):
        ref["beta"] = b_
    if name == "dplr_delta_rule":
        ref.update(a=a, b=b)
    return args, ref, state


def log_gates(name):
    """The arguments of ``name`` that hold a log gate: log_of() arguments, and those
    bound to a recurrence input of kind 'loggate'."""
    from .oracle import recurrence_of
    v = BY_NAME[name]
    _, by_tile = recurrence_of(v)
    return [a.name for a in v.args if a.kind.startswith("gate") or by_tile[a.tile].kind == "loggate"]


def generic_inputs(name, B, T, H, K, V, seed, dtype=torch.float32, device="cpu", h0=False,
                   gates="typical", beta="random"):
    """make_inputs for any generated variant, by what each argument binds to: log gates
    in the gate regime, beta-kind inputs in (0, 1) (or the beta regime), the rest
    standard normal; keys of unit length where the recurrence has a beta (the delta
    rules').  The reference kwargs are the API's own names (chunkproof.fuzz.oracle)."""
    from .oracle import recurrence_of
    v = BY_NAME[name]
    _, by_tile = recurrence_of(v)
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    shape = {"k": (B, T, H, K), "v": (B, T, H, V), "gate_k": (B, T, H, K), "gate_h": (B, T, H), "head": (B, T, H)}
    logs = set(log_gates(name))
    has_beta = any(i.kind == "beta" for i in by_tile.values())
    ref = {}
    for a in v.args:
        kind = by_tile[a.tile].kind
        if a.name in logs:
            x = _gates(shape[a.kind], gates, r, gen)
        elif kind == "beta":
            x = {"zero": torch.zeros, "one": torch.ones}.get(beta, None)
            if x is None and beta != "random":
                raise ValueError(f"unknown beta regime {beta!r}; expected one of {', '.join(BETAS)}")
            x = x(*shape[a.kind], dtype=torch.float64) if x else torch.rand(*shape[a.kind], generator=gen,
                                                                             dtype=torch.float64)
        elif kind == "gate":
            x = torch.exp(_gates(shape[a.kind], gates, r, gen))
        else:
            x = r(*shape[a.kind])
            if has_beta and a.tile == "K":
                x = F.normalize(x, dim=-1)
        ref[a.name] = x.to(dtype).to(device)
    # the kernel's parameter arguments (a Dk x 1 parameter per head, as RWKV-6's u: [H, K]),
    # after the tiles' ones
    from .oracle import param_args
    extra = param_args(v)
    for n in extra:
        ref[n] = r(H, K).to(dtype).to(device)
    state = r(B, H, K, V).to(torch.float32).to(device) if h0 else None
    return tuple(ref[a.name] for a in v.args) + tuple(ref[n] for n in extra), ref, state
