#!/usr/bin/env python3
"""Forward kernels: chunkproof's generated kernels vs flash-linear-attention (FLA).

Run on the H200 (one process, CUDA), e.g. through ``benchmarks/gpu_run.sh``:

    python benchmarks/fwd_vs_fla.py --out benchmarks/results/fwd_vs_fla.md \
        [--shape 4,4096,16,128] [--dtype bf16] [--reps 5]

Here, without a GPU (our kernels only, Triton interpreter, CPU, shape 1,70,1,16):

    TRITON_INTERPRET=1 python benchmarks/fwd_vs_fla.py --smoke

For each variant (gla, gated_delta_rule, kda, dplr_delta_rule) it times our
forward and FLA's on the same inputs (``triton.testing.do_bench``, median after
a warm-up call that triggers autotuning, forward only, under ``torch.no_grad``,
``output_final_state=True`` on both sides), reports the fraction of the memory
floor (bytes of all inputs + o + final state / bandwidth), and the relative RMS
error ``||x - ref|| / ||ref||`` of o and of the final state against a
chunk-free fp64 recurrence, on a slice (batch 0, the first 2 heads, the first
1024 steps; both kernels are rerun on that slice), in the benchmark dtype and
with genuine fp32 inputs.  A failure of one variant (or one side) is recorded
in the table, not raised.

Recurrences (state S is V x K here; q is scaled by K**-0.5, o_t = S_t q_t):

    GLA   S_t = S_{t-1} Diag(exp g_t) + v_t k_t^T
    GDN   S_t = S_{t-1} exp(g_t) (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    KDA   S_t = S_{t-1} Diag(exp g_t) (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    DPLR  S_t = S_{t-1} (Diag(exp g_t) + a_t b_t^T) + v_t k_t^T

Both APIs return the final state as [B, H, K, V] fp32, i.e. S^T.

FLA API (read from the fla-core 0.6.0 wheel, fla_core-0.6.0-py3-none-any.whl;
it needs ``einops`` and ``packaging`` besides torch/triton)
-------------------------------------------------------------------------
All four take [B, T, H, D] ("seq-first") tensors; ``head_first`` has been
removed (passing it raises).  ``scale`` defaults to K**-0.5.  The final state
is [N, H, K, V] fp32 (``state_v_first=True``, where offered, gives [V, K]).
``initial_state`` must be fp32.  All gates are natural-log decays (the kernels
multiply the chunk cumsum by 1/ln 2 internally and use exp2).

* ``from fla.ops.gla import chunk_gla``  (fla/ops/gla/chunk.py)
  ``chunk_gla(q, k, v, g, scale=None, initial_state=None,
  output_final_state=False, state_v_first=False, cu_seqlens=None,
  cu_seqlens_cpu=None) -> (o, final_state)``; g [B,T,H,K] log decay
  (asserts q.shape == k.shape == g.shape).  Its chunk size is
  min(64, max(16, next_pow2(T))).

* ``from fla.ops.gated_delta_rule import chunk_gated_delta_rule`` (alias
  ``chunk_gdn``; fla/ops/gated_delta_rule/chunk.py, wrapped by
  ``@dispatch('gated_delta_rule')``)
  ``chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
  output_final_state=False, use_qk_l2norm_in_kernel=False,
  use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
  state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
  chunk_indices=None, cp_context=None, **kwargs)``; g [B,T,HV] log decay
  (``use_gate_in_kernel=True`` + ``A_log``/``dt_bias`` kwargs instead takes
  raw g and computes -exp(A_log) softplus(g + dt_bias)); beta [B,T,HV]
  post-sigmoid unless ``use_beta_sigmoid_in_kernel``; k is expected to be
  L2-normalised by the caller unless ``use_qk_l2norm_in_kernel=True``
  (FLA's own benchmark registry passes True).  kwargs ``chunk_size`` in
  {16, 32, 64}, default 64.  Supports GVA (HV a multiple of H).

* ``from fla.ops.kda import chunk_kda``  (fla/ops/kda/chunk.py, ``@dispatch``)
  ``chunk_kda(q, k, v, g, beta, scale=None, initial_state=None,
  output_final_state=False, use_qk_l2norm_in_kernel=False,
  use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
  allow_neg_eigval=False, safe_gate=False, lower_bound=None,
  disable_recompute=False, return_intermediate_states=False,
  state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
  cp_context=None, use_graph=False, max_num_seqs=None, **kwargs)``;
  g [B,T,HV,K] is the already-activated log decay when
  ``use_gate_in_kernel=False`` (default) -- no pre-activation needed; with
  ``use_gate_in_kernel=True`` it is raw and ``A_log`` [HV] / ``dt_bias``
  [HV*K] kwargs give -exp(A_log) softplus(g + dt_bias).  beta [B,T,HV]
  post-sigmoid by default.  ``safe_gate=True`` (caller guarantees g in
  [lower_bound, 0), lower_bound >= -5) enables an M=16 tensor-core path;
  FLA's benchmark registry uses ``use_qk_l2norm_in_kernel=True,
  safe_gate=True, lower_bound=-5``.  K <= 256; kwargs ``chunk_size`` in
  {32, 64}, default 64.  Order inside a step: decay first, then the delta
  update with the decayed state (matches KDA above).

* ``from fla.ops.generalized_delta_rule import chunk_dplr_delta_rule``
  (fla/ops/generalized_delta_rule/dplr/chunk.py)
  ``chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
  output_final_state=False, cu_seqlens=None, cu_seqlens_cpu=None,
  safe_gate=False, chunk_size=None, disable_recompute=False,
  cp_context=None, lower_bound=None, **kwargs)``; argument order
  q, k, v, a, b, gk, all [B,T,H,K] (v [B,T,H,V]); gk log decay.  FLA's
  recurrence (K x V state): S <- Diag(exp gk) S + b (a^T S) + k v^T, i.e.
  exactly our DPLR with the same a, b (a multiplies the old state, b is the
  written direction; the a b^T term uses the *undecayed* S_{t-1}).  Chunk
  size 16 unless ``lower_bound`` satisfies |lb| (C/2+1)/ln2 <= 124 (64 needs
  gk >= about -2.6); warns for fp32 inputs.

The GDN/KDA/DPLR entry points go through ``fla.backends`` dispatch; the
alternative backends (flash_kda, tilelang, flash_qla) need packages that are
not on the GPU machine, so the Triton path runs (FLA_DISABLE_BACKEND_DISPATCH=1
forces it).

Inputs (as FLA's tests/ops and benchmarks/ops/registry.py build them)
--------------------------------------------------------------------
q, k, v = randn [B,T,H,D] in --dtype; gates are computed in fp32 and stored in
--gate-dtype (default fp32):

* gla:  g = logsigmoid(randn [B,T,H,D]) / N, clamped to >= -5 (registry's
  ``logsigmoid_clamp``).
* gated_delta_rule: q, k L2-normalised over D (what FLA's registry gets with
  use_qk_l2norm_in_kernel=True; we normalise outside so both sides see the
  same tensors and call FLA with the flag off); g = logsigmoid(randn [B,T,H]) / N;
  beta = sigmoid(randn [B,T,H]).
* kda:  q, k L2-normalised; g = logsigmoid(randn [B,T,H,D]) / N clamped to
  >= -5 (so FLA's safe_gate path, timed as an extra row, is valid);
  beta = sigmoid(randn [B,T,H]).
* dplr_delta_rule: as FLA's tests/ops/test_dplr_delta.py: a = normalize(rand
  [B,T,H,D]) (non-negative, unit norm), b = -a, so the transition is
  Diag(exp g) - a a^T (eigenvalues in [-1, 1]: stable); gk = logsigmoid(randn
  [B,T,H,D]) / N.  q, k unnormalised randn.

N is --gate-normalizer (default 1, as FLA's benchmark registry; FLA's tests
also use 16 / 0.1 / 10).
"""
import os
import sys

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VARIANTS = ["gla", "gated_delta_rule", "kda", "dplr_delta_rule"]
OURS_NAME = {
    "gla": "chunk_gla",
    "gated_delta_rule": "chunk_gated_delta_rule",
    "kda": "chunk_kda",
    "dplr_delta_rule": "chunk_dplr_delta_rule",
}
FLA_IMPORT = {
    "gla": ("fla.ops.gla", "chunk_gla"),
    "gated_delta_rule": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
    "kda": ("fla.ops.kda", "chunk_kda"),
    "dplr_delta_rule": ("fla.ops.generalized_delta_rule", "chunk_dplr_delta_rule"),
}
# extra keyword arguments for FLA (ours takes none); one row per entry
FLA_ROWS = {
    "gla": [("gla", {})],
    "gated_delta_rule": [("gated_delta_rule", {"use_qk_l2norm_in_kernel": False})],
    "kda": [("kda", {}),
            ("kda [FLA safe_gate, lower_bound=-5]", {"safe_gate": True, "lower_bound": -5.0})],
    "dplr_delta_rule": [("dplr_delta_rule", {})],
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


# --------------------------------------------------------------------------- inputs

def make_inputs(variant, B, T, H, D, dtype, gate_dtype, device, seed, gate_normalizer=1.0):
    """Inputs in the positional order of both APIs (q, k, v, g[, beta] / q, k, v, a, b, gk)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(device)

    def rand(*shape):
        return torch.rand(*shape, generator=gen, dtype=torch.float32).to(device)

    q, k, v = randn(B, T, H, D), randn(B, T, H, D), randn(B, T, H, D)
    if variant == "gla":
        g = (F.logsigmoid(randn(B, T, H, D)) / gate_normalizer).clamp_min(-5)
        return {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype), "g": g.to(gate_dtype)}
    if variant in ("gated_delta_rule", "kda"):
        q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
        if variant == "gated_delta_rule":
            g = F.logsigmoid(randn(B, T, H)) / gate_normalizer
        else:
            g = (F.logsigmoid(randn(B, T, H, D)) / gate_normalizer).clamp_min(-5)
        beta = torch.sigmoid(randn(B, T, H))
        return {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype), "g": g.to(gate_dtype),
                "beta": beta.to(dtype)}
    if variant == "dplr_delta_rule":
        a = F.normalize(rand(B, T, H, D), p=2, dim=-1)
        b = -a
        gk = F.logsigmoid(randn(B, T, H, D)) / gate_normalizer
        return {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype), "a": a.to(dtype),
                "b": b.to(dtype), "gk": gk.to(gate_dtype)}
    raise ValueError(variant)


def slice_inputs(inp, t_max, h_max):
    """Batch 0, the first h_max heads, the first t_max steps (contiguous copies)."""
    return {n: x[:1, :t_max, :h_max].contiguous() for n, x in inp.items()}


# --------------------------------------------------------------------------- fp64 reference

@torch.no_grad()
def reference(variant, inp, scale):
    """Chunk-free fp64 recurrence; returns o [B,T,H,V] and final state [B,H,K,V] (= S^T)."""
    x = {n: t.to(torch.float64) for n, t in inp.items()}
    q, k, v = x["q"], x["k"], x["v"]
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = torch.zeros(B, H, V, K, dtype=torch.float64, device=q.device)
    o = torch.zeros(B, T, H, V, dtype=torch.float64, device=q.device)
    for t in range(T):
        qt, kt, vt = q[:, t], k[:, t], v[:, t]          # [B,H,K], [B,H,K], [B,H,V]
        if variant == "gla":
            S = S * torch.exp(x["g"][:, t])[:, :, None, :] + vt[..., :, None] * kt[..., None, :]
        elif variant in ("gated_delta_rule", "kda"):
            if variant == "gated_delta_rule":
                S = S * torch.exp(x["g"][:, t])[:, :, None, None]
            else:
                S = S * torch.exp(x["g"][:, t])[:, :, None, :]
            Sk = torch.einsum("bhvk,bhk->bhv", S, kt)
            S = S + x["beta"][:, t][:, :, None, None] * (vt - Sk)[..., :, None] * kt[..., None, :]
        elif variant == "dplr_delta_rule":
            Sa = torch.einsum("bhvk,bhk->bhv", S, x["a"][:, t])
            S = (S * torch.exp(x["gk"][:, t])[:, :, None, :] + Sa[..., :, None] * x["b"][:, t][..., None, :]
                 + vt[..., :, None] * kt[..., None, :])
        else:
            raise ValueError(variant)
        o[:, t] = torch.einsum("bhvk,bhk->bhv", S, qt * scale)
    return o, S.transpose(-1, -2).contiguous()


def rel_rms(x, ref):
    if x is None:
        return None
    x = x.to(torch.float64)
    if x.shape != ref.shape:
        raise ValueError(f"shape {tuple(x.shape)} != reference {tuple(ref.shape)}")
    den = ref.norm().item()
    err = (x - ref).norm().item()
    return err / den if den > 0 else err


# --------------------------------------------------------------------------- callables

def ours_callable(variant):
    import generated_kernels
    fn = getattr(generated_kernels, OURS_NAME[variant], None)
    if fn is None:
        raise ImportError(f"generated_kernels has no {OURS_NAME[variant]}")
    return lambda inp, scale: fn(*inp.values(), scale=scale, output_final_state=True)


def fla_callable(variant, extra):
    import importlib
    mod_name, fn_name = FLA_IMPORT[variant]
    fn = getattr(importlib.import_module(mod_name), fn_name)
    return lambda inp, scale: fn(*inp.values(), scale=scale, output_final_state=True, **extra)


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:160]


def bench_ms(fn, reps, warmup_ms, rep_ms):
    import triton.testing
    with torch.no_grad():
        fn()  # autotuning / compilation
        torch.cuda.synchronize()
        times = [triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
                 for _ in range(reps)]
    return statistics.median(times)


def copy_bandwidth(nbytes=1 << 30):
    import triton.testing
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median")
    return 2 * nbytes / (ms * 1e-3)


def nbytes(t):
    return t.numel() * t.element_size()


# --------------------------------------------------------------------------- one variant

def accuracy(call, variant, inp, scale, ref):
    """Run `call` on `inp`; relative RMS of o and the final state against ref (o, state)."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o, st = call(inp, scale)
    if st is None:
        raise ValueError("no final state returned")
    if not (torch.isfinite(o.float()).all() and torch.isfinite(st.float()).all()):
        bad = "o" if not torch.isfinite(o.float()).all() else "final state"
        raise FloatingPointError(f"non-finite values in {bad}")
    return rel_rms(o, ref[0]), rel_rms(st, ref[1])


def run_variant(variant, args, device, smoke):
    B, T, H, D = args.shape
    dtype, gate_dtype = DTYPES[args.dtype], DTYPES[args.gate_dtype]
    scale = D ** -0.5
    seed = args.seed + VARIANTS.index(variant)
    rows = [{"variant": name, "base": variant, "fla_kwargs": extra, "notes": []}
            for name, extra in FLA_ROWS[variant]]
    if (smoke and not args.smoke_fla) or args.no_extra_rows:
        rows = rows[:1]

    def note(who, e, tb=False):
        for r in rows:
            r["notes"].append(f"{who}: {first_line(e)}")
        print(f"[{variant}] {who} failed: {first_line(e)}", file=sys.stderr)
        if args.debug or tb:
            traceback.print_exc()

    try:
        ours = ours_callable(variant)
    except Exception as e:  # noqa: BLE001
        ours = None
        note("ours", e)
    fla = {}
    if not smoke or args.smoke_fla:
        for r in rows:
            try:
                fla[r["variant"]] = fla_callable(variant, r["fla_kwargs"])
            except Exception as e:  # noqa: BLE001
                r["notes"].append(f"FLA: {first_line(e)}")
                print(f"[{r['variant']}] FLA import failed: {first_line(e)}", file=sys.stderr)

    # ---- timing and memory floor at the full shape
    if not smoke:
        try:
            inp = make_inputs(variant, B, T, H, D, dtype, gate_dtype, device, seed, args.gate_normalizer)
            V = inp["v"].shape[-1]
            moved = (sum(nbytes(t) for t in inp.values())
                     + B * T * H * V * torch.empty((), dtype=dtype).element_size()  # o
                     + B * H * D * V * 4)  # final state, fp32
            floor_ms = moved / args.bandwidth * 1e3
            for r in rows:
                r["bytes"], r["floor_ms"] = moved, floor_ms
            if ours is not None:
                try:
                    t = bench_ms(lambda: ours(inp, scale), args.reps, args.warmup_ms, args.rep_ms)
                    for r in rows:
                        r["ours_ms"] = t
                except Exception as e:  # noqa: BLE001
                    note("ours timing", e)
            for r in rows:
                f = fla.get(r["variant"])
                if f is None:
                    continue
                try:
                    r["fla_ms"] = bench_ms(lambda: f(inp, scale), args.reps, args.warmup_ms, args.rep_ms)
                except Exception as e:  # noqa: BLE001
                    r["notes"].append(f"FLA timing: {first_line(e)}")
                    print(f"[{r['variant']}] FLA timing failed: {first_line(e)}", file=sys.stderr)
                    if args.debug:
                        traceback.print_exc()
        except Exception as e:  # noqa: BLE001
            note("setup", e, tb=True)
            inp = None
        sl_low = slice_inputs(inp, args.acc_t, args.acc_h) if inp is not None else None
        del inp
        if device == "cuda":
            torch.cuda.empty_cache()
    else:
        sl_low = None

    # ---- accuracy on a slice, in the benchmark dtype and in fp32
    Ts, Hs = min(T, args.acc_t), min(H, args.acc_h)
    for label, build in (
        ("low", lambda: sl_low if sl_low is not None else
         make_inputs(variant, 1, Ts, Hs, D, dtype, gate_dtype, device, seed, args.gate_normalizer)),
        ("fp32", lambda: make_inputs(variant, 1, Ts, Hs, D, torch.float32, torch.float32, device,
                                     seed + 1000, args.gate_normalizer)),
    ):
        try:
            sl = build()
            ref = reference(variant, sl, scale)
        except Exception as e:  # noqa: BLE001
            note(f"reference ({label})", e, tb=True)
            continue
        if ours is not None:
            try:
                eo, es = accuracy(ours, variant, sl, scale, ref)
                for r in rows:
                    r[f"ours_{label}_o"], r[f"ours_{label}_state"] = eo, es
            except Exception as e:  # noqa: BLE001
                note(f"ours {label}", e)
        for r in rows:
            f = fla.get(r["variant"])
            if f is None:
                continue
            try:
                r[f"fla_{label}_o"], r[f"fla_{label}_state"] = accuracy(f, variant, sl, scale, ref)
            except Exception as e:  # noqa: BLE001
                r["notes"].append(f"FLA {label}: {first_line(e)}")
                print(f"[{r['variant']}] FLA {label} failed: {first_line(e)}", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------- report

def fmt(x, kind):
    if x is None:
        return "-"
    if kind == "ms":
        return f"{x:.4f}"
    if kind == "ratio":
        return f"{x:.2f}"
    if kind == "frac":
        return f"{x:.0%}"
    return f"{x:.1e}"


def pair(a, b, kind):
    return f"{fmt(a, kind)} / {fmt(b, kind)}"


def compact_notes(notes):
    """'who: message' entries; the same message from several steps is listed once."""
    groups = {}
    for n in notes:
        who, _, msg = n.partition(": ")
        groups.setdefault(msg, []).append(who)
    return "; ".join(f"{', '.join(dict.fromkeys(w))}: {m}" for m, w in groups.items()).replace("|", "/")


def table(rows, dtype_name):
    head = ["variant", "ours ms", "FLA ms", "ratio ours/FLA", "floor ms",
            "fraction of floor (ours / FLA)", f"rel RMS o {dtype_name} (ours / FLA)",
            f"rel RMS state {dtype_name} (ours / FLA)", "fp32 rel RMS o (ours / FLA)",
            "fp32 rel RMS state (ours / FLA)", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        o, f, fl = r.get("ours_ms"), r.get("fla_ms"), r.get("floor_ms")
        ratio = o / f if o and f else None
        cells = [
            r["variant"], fmt(o, "ms"), fmt(f, "ms"), fmt(ratio, "ratio"), fmt(fl, "ms"),
            pair(fl / o if fl and o else None, fl / f if fl and f else None, "frac"),
            pair(r.get("ours_low_o"), r.get("fla_low_o"), "err"),
            pair(r.get("ours_low_state"), r.get("fla_low_state"), "err"),
            pair(r.get("ours_fp32_o"), r.get("fla_fp32_o"), "err"),
            pair(r.get("ours_fp32_state"), r.get("fla_fp32_state"), "err"),
            compact_notes(r["notes"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def header(args, device, bw_measured):
    import triton
    try:
        import fla
        fla_v = getattr(fla, "__version__", "?")
    except Exception as e:  # noqa: BLE001
        fla_v = f"not importable ({first_line(e)})"
    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (CPU, TRITON_INTERPRET=1)"
    B, T, H, D = args.shape
    lines = [
        "# Forward: chunkproof generated kernels vs FLA" + (" (smoke)" if args.smoke else ""),
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- GPU: {gpu}",
        f"- python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, fla {fla_v}",
        f"- shape (B, T, H, D) = ({B}, {T}, {H}, {D}); q/k/v dtype {args.dtype}; gate dtype {args.gate_dtype}; "
        f"gate normalizer {args.gate_normalizer}; seed {args.seed}",
    ]
    if not args.smoke:
        lines.append(f"- timing: triton.testing.do_bench median (warmup {args.warmup_ms} ms, rep {args.rep_ms} ms), "
                     f"median of {args.reps} calls, after one warm-up call; forward only, no grad, "
                     "output_final_state=True on both sides")
        bw = f"; measured D2D copy bandwidth {bw_measured / 1e12:.2f} TB/s" if bw_measured else ""
        lines.append(f"- memory floor: bytes of all inputs + o + fp32 final state, / {args.bandwidth / 1e12:.2f} TB/s"
                     f"{bw}; fraction = floor / time")
    lines.append(f"- accuracy: relative RMS vs a chunk-free fp64 recurrence on batch 0, heads [0, {min(H, args.acc_h)}), "
                 f"steps [0, {min(T, args.acc_t)}); 'fp32' = fresh fp32 inputs of the same construction")
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--json", help="write the raw results here")
    p.add_argument("--shape", default=None, help="B,T,H,D (default 4,4096,16,128; smoke 1,70,1,16)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--gate-dtype", default="fp32", choices=sorted(DTYPES))
    p.add_argument("--gate-normalizer", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=5, help="do_bench calls per kernel (median taken)")
    p.add_argument("--warmup-ms", type=int, default=100)
    p.add_argument("--rep-ms", type=int, default=500)
    p.add_argument("--bandwidth", type=float, default=4.8e12, help="B/s for the memory floor (H200: 4.8e12)")
    p.add_argument("--acc-t", type=int, default=1024)
    p.add_argument("--acc-h", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="CPU + TRITON_INTERPRET=1, ours vs fp64 only")
    p.add_argument("--smoke-fla", action="store_true", help="in --smoke, also try FLA (its kernels query a GPU driver, so they "
                   "normally fail under the CPU interpreter; the failure is recorded)")
    p.add_argument("--smoke-tol", default="5e-2,1e-3",
                   help="--smoke fails above these rel RMS errors: low-precision,fp32")
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    p.add_argument("--no-extra-rows", action="store_true", help="only FLA's default configuration per variant")
    args = p.parse_args(argv)
    shape = args.shape or ("1,70,1,16" if args.smoke else "4,4096,16,128")
    args.shape = tuple(int(s) for s in shape.split(","))
    if len(args.shape) != 4:
        p.error("--shape needs B,T,H,D")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {VARIANTS}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.smoke:
        device = "cpu"
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("--smoke needs TRITON_INTERPRET=1 set before triton is imported", file=sys.stderr)
            return 2
    else:
        if not torch.cuda.is_available():
            print("no CUDA device; use --smoke for the CPU interpreter check", file=sys.stderr)
            return 2
        device = "cuda"
    torch.manual_seed(args.seed)

    bw_measured = None
    if device == "cuda":
        try:
            bw_measured = copy_bandwidth()
        except Exception as e:  # noqa: BLE001
            print(f"copy bandwidth measurement failed: {first_line(e)}", file=sys.stderr)

    rows = []
    md = ""
    for v in args.variants:
        print(f"== {v}", file=sys.stderr, flush=True)
        try:
            rows.extend(run_variant(v, args, device, args.smoke))
        except Exception as e:  # noqa: BLE001  (anything run_variant did not catch itself)
            traceback.print_exc()
            rows.append({"variant": v, "base": v, "notes": [f"harness: {first_line(e)}"]})
        # rewrite the results after every variant, so a run cut short keeps what it measured
        md = header(args, device, bw_measured) + "\n\n" + table(rows, args.dtype) + "\n"
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as fh:
                fh.write(md)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"shape": args.shape, "dtype": args.dtype, "rows": rows}, fh, indent=1, default=str)
    print(md)

    if args.smoke:
        tol_low, tol_32 = (float(s) for s in args.smoke_tol.split(","))
        bad = []
        for r in rows:
            for key, tol in (("ours_low_o", tol_low), ("ours_low_state", tol_low),
                             ("ours_fp32_o", tol_32), ("ours_fp32_state", tol_32)):
                val = r.get(key)
                if val is None or not math.isfinite(val) or val > tol:
                    bad.append(f"{r['variant']}.{key}={val}")
        if bad:
            print("SMOKE FAILED: " + ", ".join(bad), file=sys.stderr)
            return 1
        print("smoke ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
