"""Inputs at benchmark shapes in FLA's argument conventions (what its tests/ops and
benchmarks/ops/registry.py draw), which chunkproof.fuzz.cases does not make: fp32 draws
from one CPU generator, cast to the benchmark dtype, gates kept in their own dtype, K = V
= D.  The order of the draws is that of the H200 runs in benchmarks/results, so a seed
gives the same numbers as there.

- gla: g = logsigmoid(randn) / N clamped to >= -5 (the registry's logsigmoid_clamp);
- gated_delta_rule: q, k L2-normalised over D (FLA is then called with
  use_qk_l2norm_in_kernel off, so both sides see the same tensors); g = logsigmoid(randn
  [B, T, H]) / N; beta = sigmoid(randn);
- kda: as gated_delta_rule, g per channel and clamped to >= -5 (valid for FLA's
  safe_gate path);
- dplr_delta_rule: as FLA's test_dplr_delta.py: a = normalize(rand) >= 0, b = -a (the
  transition Diag(exp g) - a a^T is stable); q, k unnormalised.

N is the gate normalizer (1 as FLA's registry; its tests also use 16, 0.1, 10)."""
import torch
import torch.nn.functional as F

from chunkproof.fuzz.cases import make_inputs as fuzz_inputs


def fla_inputs(variant, B, T, H, D, dtype=torch.bfloat16, gate_dtype=torch.float32, device="cpu", seed=0,
               gate_normalizer=1.0):
    """{name: tensor} in the positional order of both APIs (q, k, v, g[, beta] or
    q, k, v, a, b, gk)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(device)

    def rand(*shape):
        return torch.rand(*shape, generator=gen, dtype=torch.float32).to(device)

    q, k, v = randn(B, T, H, D), randn(B, T, H, D), randn(B, T, H, D)
    lo = dict(q=q, k=k, v=v)
    if variant == "gla":
        gates = dict(g=(F.logsigmoid(randn(B, T, H, D)) / gate_normalizer).clamp_min(-5))
    elif variant in ("gated_delta_rule", "kda"):
        lo["q"], lo["k"] = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
        if variant == "gated_delta_rule":
            g = F.logsigmoid(randn(B, T, H)) / gate_normalizer
        else:
            g = (F.logsigmoid(randn(B, T, H, D)) / gate_normalizer).clamp_min(-5)
        gates = dict(g=g)
        lo["beta"] = torch.sigmoid(randn(B, T, H))
    elif variant == "dplr_delta_rule":
        lo["a"] = F.normalize(rand(B, T, H, D), p=2, dim=-1)
        lo["b"] = -lo["a"]
        gates = dict(gk=F.logsigmoid(randn(B, T, H, D)) / gate_normalizer)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    out = {n: x.to(dtype) for n, x in lo.items()}
    out.update((n, x.to(gate_dtype)) for n, x in gates.items())
    order = {"gla": "q k v g", "gated_delta_rule": "q k v g beta", "kda": "q k v g beta",
             "dplr_delta_rule": "q k v a b gk"}[variant].split()
    return {n: out[n] for n in order}


def cotangents(B, T, H, K, V, dtype=torch.bfloat16, device="cpu", seed=1):
    """(initial state, dO, d final state) for a forward + backward: h0 and dS_T fp32
    [B, H, K, V], dO in the inputs' dtype."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    h0 = torch.randn(B, H, K, V, generator=gen).to(device)
    do = torch.randn(B, T, H, V, generator=gen).to(dtype).to(device)
    dht = torch.randn(B, H, K, V, generator=gen).to(device)
    return h0, do, dht


def fuzz_case(variant, B, T, H, K, V, seed, dtype=torch.bfloat16, device="cpu"):
    """The fuzz campaign's inputs (chunkproof.fuzz.cases, with an initial state) as
    {name: tensor}, with cotangents from seed + 1: (inputs, h0, dO, dS_T)."""
    from chunkproof.fuzz.cases import module
    args, _, h0 = fuzz_inputs(variant, B, T, H, K, V, seed=seed, h0=True, dtype=dtype, device=device)
    gen = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(B, T, H, V, generator=gen).to(dtype).to(device)
    dht = torch.randn(B, H, K, V, generator=gen).to(device)
    return dict(zip([n for n, _ in module(variant).ARGS], args)), h0, do, dht


def bench_case(variant, B, T, H, K, V, seed):
    """The benchmark's inputs (bench_inputs, K = V) with an initial state and cotangents
    (cotangents, seed + 1), bf16 on the CPU: (inputs, h0, dO, dS_T)."""
    if K != V:
        raise ValueError(f"the benchmark's inputs have K = V, not K = {K}, V = {V}")
    x = bench_inputs(variant, B, T, H, K, torch.bfloat16, torch.float32, "cpu", seed=seed)
    h0, do, dht = cotangents(B, T, H, K, V, torch.bfloat16, "cpu", seed=seed + 1)
    return x, h0, do, dht


def first_steps(tensors, t):
    """Every batch and head, the first t steps (contiguous copies); a parameter ([H, K],
    as RWKV-6's u) has no steps and is kept whole.  FLA's autotune keys hold B and H but
    not T, so a slice reuses the configs autotuned at the full shape."""
    return {n: x[:, :t].contiguous() if x.dim() >= 3 else x for n, x in tensors.items()}


KNOWN = ("gla", "gated_delta_rule", "kda", "dplr_delta_rule")


def bench_inputs(variant, B, T, H, D, dtype=torch.bfloat16, gate_dtype=torch.float32, device="cpu", seed=0):
    """fla_inputs for the variants it knows; for another generated variant, a draw from
    its module's ARGS kinds in the same conventions (unit keys, log-sigmoid log gates
    clamped to >= -5 in the gate dtype (in q's when declared on a K tile), sigmoid per-head values, standard normal
    parameters [H, D] in the inputs' dtype, as RWKV-6's u), K = V = D."""
    if variant in KNOWN:
        return fla_inputs(variant, B, T, H, D, dtype, gate_dtype, device, seed)
    from chunkproof.fuzz.cases import log_gates, module
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shapes = {"k": (B, T, H, D), "v": (B, T, H, D), "gate_k": (B, T, H, D), "gate_h": (B, T, H), "head": (B, T, H),
              "param_k": (H, D)}
    logs = set(log_gates(variant))     # log_of() arguments and log-space inputs (simple GLA's g)
    out = {}
    for name, kind in module(variant).ARGS:
        x = torch.randn(*shapes[kind], generator=gen, dtype=torch.float32)
        if name in logs:
            x = F.logsigmoid(x).clamp_min(-5)
        elif kind == "k":
            x = F.normalize(x, p=2, dim=-1)
        elif kind == "head":
            x = torch.sigmoid(x)
        # a log gate declared on a K tile (RWKV-6's w) shares q's dtype, as the API asks
        wide = name in logs and kind not in ("k", "v")
        out[name] = x.to(gate_dtype if wide else dtype).to(device)
    return out
