#!/usr/bin/env python3
"""Forward kernels: chunkproof's generated kernels vs flash-linear-attention (FLA).

Run on the H200 (CUDA), normally through ``benchmarks/gpu_run.sh``:

    python benchmarks/fwd_vs_fla.py --out benchmarks/results/fwd_vs_fla.md \
        [--shape 4,4096,16,128] [--dtype bf16] [--reps 3] [--total-budget 380]

Here, without a GPU (our kernels only, Triton interpreter, CPU, shape 1,70,1,16):

    TRITON_INTERPRET=1 python benchmarks/fwd_vs_fla.py --smoke

For each variant (gla, gated_delta_rule, kda, dplr_delta_rule) it times our
forward and FLA's on the same inputs (a timed first call that compiles and, for
FLA, autotunes; then ``triton.testing.do_bench`` medians; forward only, under
``torch.no_grad``, ``output_final_state=True`` on both sides), reports the
fraction of the memory floor (bytes of all inputs + o + final state /
bandwidth), and the relative RMS error ``||x - ref|| / ||ref||`` of o and of
the final state against a chunk-free fp64 recurrence on an accuracy slice, in
the benchmark dtype and with genuine fp32 inputs (FLA's fp32 run only with
``--fla-fp32``).  A failure of one variant, side or phase is recorded in the
table, not raised.

Our side: one row per (TILING["schedule"], TILING["computed_dots"]) of the
generated module (``--ours-schedules``, ``--ours-modes``; default: every
schedule the module has, x {tf32, input}); the module's TILING is set around
each call and restored afterwards.  FLA is measured once per configuration and
its numbers are repeated on each of our rows.

Accuracy slice: all B batches and H heads, the first ``--acc-t`` steps.  The
FLA 0.6.0 autotune keys of the kernels these four forwards launch contain no T
(nor NT), but chunk_local_cumsum's keys contain B (and B is a constexpr there):
keeping B and H and cutting T means FLA reuses the configs autotuned for the
timing call instead of autotuning again.  Our kernels do not specialise on T.

Time: every phase prints "[variant] phase ... N s" to stderr.  Each variant gets
a budget (``--variant-budget``, and a fair share of ``--total-budget``); it is
checked between phases, and with ``--isolate`` (default on CUDA) each variant
runs in a child process that is killed ``--kill-grace`` seconds past its budget
(a compile or autotune cannot be interrupted otherwise).  What was measured up
to then is kept.  The markdown/JSON are rewritten after every phase.

Recurrences (state S is V x K here; q is scaled by K**-0.5, o_t = S_t q_t):

    GLA   S_t = S_{t-1} Diag(exp g_t) + v_t k_t^T
    GDN   S_t = S_{t-1} exp(g_t) (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    KDA   S_t = S_{t-1} Diag(exp g_t) (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    DPLR  S_t = S_{t-1} (Diag(exp g_t) + a_t b_t^T) + v_t k_t^T

Both APIs return the final state as [B, H, K, V] fp32, i.e. S^T.

FLA autotune keys (fla_core 0.6.0, forward kernels of these four entry points)
-------------------------------------------------------------------------
  utils/cumsum.py        chunk_local_cumsum_{scalar,vector}_kernel: [B, H, (S,) BT, IS_VARLEN, REVERSE]
  gla/chunk.py           fwd_A_intra_sub_inter [BC], _sub_intra [BK, BT], _split [BC, BK], _merge [BC],
                         chunk_gla_fwd_kernel_o [BT, HV, STATE_V_FIRST, K, V] (also KDA's output)
  common/chunk_h.py      chunk_fwd_kernel_h [BT, USE_G, USE_GK, USE_GV, STATE_V_FIRST, K, V]
  common/chunk_delta_h.py chunk_gated_delta_rule_fwd_kernel_h_blockdim64 [H, HV, K, V, BT, STATE_V_FIRST]
  common/chunk_o.py      chunk_fwd_kernel_o [H, HV, K, V, BT, STATE_V_FIRST]
  gated_delta_rule/chunk_fwd.py [H, HV, K, BC]; {gated_delta_rule,kda}/wy_fast.py [H, HV, K, V, BT, BK, BV, IS_VARLEN]
  kda/chunk_intra.py     inter_solve_fused [H, HV, K, BT, BC, NC], intra_sub_chunk (safe_gate) [BT, BC, HV];
                         kda/chunk_intra_token_parallel.py [K, H, HV]
  generalized_delta_rule/dplr: chunk_A_fwd [BK, BT], wy_fast_fwd [BT] / [BC] / wu_fwd [H, K, V, BT, BK, BV,
                         IS_VARLEN], chunk_h_fwd [BT, BK, BV], chunk_o_fwd [BT, K, V]
  utils/solve_tril.py    [BT], [H, BT, IS_VARLEN]
Triton's Autotuner adds the dtype of every tensor argument to the key, so fp32
inputs autotune again.  The chunk sizes do not depend on T once T >= 64 (GLA:
min(64, max(16, next_pow2(T))); GDN/KDA 64; DPLR 16 unless lower_bound allows
64).  FLA_CACHE_MODE is unset (disabled), and the wheel ships no tuned configs,
so every new key autotunes; FLA_CACHE_RESULTS=1 (default) caches the result on
disk under TRITON_CACHE_DIR for later processes on the same machine.

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
import contextlib  # noqa: E402
import datetime  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

T_START = time.time()
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
# FLA configurations (extra keyword arguments; ours takes none); the first is the
# default one, shown next to every row of ours; the others get a row each
FLA_ROWS = {
    "gla": [("gla", {})],
    "gated_delta_rule": [("gated_delta_rule", {"use_qk_l2norm_in_kernel": False})],
    "kda": [("kda", {}),
            ("kda [FLA safe_gate, lower_bound=-5]", {"safe_gate": True, "lower_bound": -5.0})],
    "dplr_delta_rule": [("dplr_delta_rule", {})],
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_SCHEDULES = ("fused", "split")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:160]


class BudgetExceeded(Exception):
    def __init__(self, phase):
        super().__init__(phase)
        self.phase = phase


class Terminated(BaseException):
    """SIGTERM (e.g. from `timeout`): unwind, keep what was measured, exit."""


def _on_sigterm(signum, frame):
    # `timeout` signals the process and then its whole group: ignore the second one, so
    # that the clean-up (saving what was measured) is not cut short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


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


def slice_inputs(inp, t_max):
    """All batches and heads, the first t_max steps (contiguous copies): FLA's autotune
    keys hold B and H but not T, so this reuses the timing call's configs."""
    return {n: x[:, :t_max].contiguous() for n, x in inp.items()}


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

def tiling_value(text):
    """A TILING override's value as the command line gives it: JSON where it parses (8,
    null, "tf32", [16, 32]), else the bare word (tf32)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@contextlib.contextmanager
def tiling(mod, settings):
    """Set mod.TILING[...] for the duration; the dict is restored in place afterwards."""
    if mod is None or not settings:
        yield
        return
    saved = dict(mod.TILING)
    try:
        mod.TILING.update(settings)
        yield
    finally:
        mod.TILING.clear()
        mod.TILING.update(saved)


def ours_combos(variant, mod, args):
    """[(label, tag, settings)] for our rows, the module's own TILING first."""
    til = getattr(mod, "TILING", {})
    if "schedule" in til:
        have = tuple(getattr(mod, "SCHEDULES", DEFAULT_SCHEDULES))
        want = have if args.ours_schedules in ("auto", "all") else [
            s.strip() for s in args.ours_schedules.split(",") if s.strip()]
        scheds = sorted(dict.fromkeys(want), key=lambda s: s != til["schedule"])
    else:
        if args.ours_schedules not in ("auto", "all"):
            log(f"[{variant}] chunkproof.kernels.{variant}.TILING has no 'schedule'; --ours-schedules ignored")
        scheds = [None]
    if "computed_dots" in til:
        modes = [m.strip() for m in args.ours_modes.split(",") if m.strip()]
        modes = sorted(dict.fromkeys(modes), key=lambda m: m != til["computed_dots"])
    else:
        log(f"[{variant}] chunkproof.kernels.{variant}.TILING has no 'computed_dots'; --ours-modes ignored")
        modes = [None]
    out = []
    extra = {}
    for kv in args.ours_set:
        key, val = kv.split("=", 1)
        extra[key] = int(val) if val.lstrip("-").isdigit() else val
    for s in scheds:
        for m in modes:
            settings = dict(extra)
            if s is not None:
                settings["schedule"] = s
            if m is not None:
                settings["computed_dots"] = m
            diff = [f"{k}={v}" for k, v in settings.items() if til.get(k) != v]
            label = variant + (f" [{', '.join(diff)}]" if diff else "")
            tag = "/".join(str(x) for x in (s, m) if x is not None) or "default"
            out.append((label, tag, settings))
    return out


def call_ours(fn, mod, settings, inp, scale):
    with tiling(mod, settings):
        return fn(*inp.values(), scale=scale, output_final_state=True)


def fla_callable(variant, extra):
    mod_name, fn_name = FLA_IMPORT[variant]
    fn = getattr(importlib.import_module(mod_name), fn_name)
    return lambda inp, scale: fn(*inp.values(), scale=scale, output_final_state=True, **extra)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def bench_ms(fn, reps, warmup_ms, rep_ms):
    import triton.testing
    with torch.no_grad():
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


def forward_bytes(inp, h0=None):
    """The fewest bytes a forward moves: every input (and the initial state) read once,
    o (v's shape and dtype) and the fp32 final state written once."""
    v = inp["v"]
    B, _, H, V = v.shape
    return (sum(nbytes(t) for t in inp.values()) + nbytes(v) + B * H * inp["q"].shape[-1] * V * 4
            + (nbytes(h0) if h0 is not None else 0))


def errors(o, st, ref):
    """Relative RMS of o and the final state against ref (o, state)."""
    if st is None:
        raise ValueError("no final state returned")
    if not (torch.isfinite(o.float()).all() and torch.isfinite(st.float()).all()):
        bad = "o" if not torch.isfinite(o.float()).all() else "final state"
        raise FloatingPointError(f"non-finite values in {bad}")
    return rel_rms(o, ref[0]), rel_rms(st, ref[1])


# --------------------------------------------------------------------------- one variant

class Progress:
    """Phases of one variant: progress lines, the soft budget, saving after each phase."""

    def __init__(self, variant, res, budget, save):
        self.variant, self.res, self.budget, self.save = variant, res, budget, save
        self.v0 = time.time()

    def elapsed(self):
        return time.time() - self.v0

    def run(self, label, fn, notes=None):
        """Run fn() as phase `label`; (True, value) or (False, None) with the error in notes.
        Raises BudgetExceeded before starting when the variant is over its budget."""
        if self.budget is not None and self.elapsed() > self.budget:
            raise BudgetExceeded(label)
        v = self.variant
        self.res["phase"] = label
        self.res["phases"].append([label, None])
        self.save()
        log(f"[{v}] {label} ...")
        t = time.time()
        ok, val, err = True, None, None
        try:
            val = fn()
        except (BudgetExceeded, Terminated, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001
            ok, err = False, e
        dt = time.time() - t
        self.res["phases"][-1][1] = round(dt, 2)
        tail = f"(variant {self.elapsed():.1f} s, total {time.time() - T_START:.1f} s)"
        if ok:
            log(f"[{v}] {label} ... {dt:.1f} s {tail}")
        else:
            log(f"[{v}] {label} ... FAILED after {dt:.1f} s {tail}: {first_line(err)}")
            if getattr(self, "debug", False):
                traceback.print_exception(type(err), err, err.__traceback__)
            (notes if notes is not None else self.res["notes"]).append(f"{label}: {first_line(err)}")
        self.save()
        return ok, val


def new_result(variant):
    return {"variant": variant, "ours": {}, "fla": {}, "notes": [], "phases": [], "phase": None,
            "ours_order": [], "fla_order": [], "floor_ms": None, "bytes": None}


def run_variant(variant, args, device, budget, save, res=None):
    """Measure one variant into `res` (JSON-able); `save()` is called after every phase."""
    res = res if res is not None else new_result(variant)
    prog = Progress(variant, res, budget, save)
    prog.debug = args.debug
    try:
        _run_variant(variant, args, device, prog, res)
        res["phase"] = "done"
    except BudgetExceeded as e:
        res["notes"].append(f"budget exceeded at {e.phase} ({prog.elapsed():.0f} s > {budget:.0f} s)")
        log(f"[{variant}] budget exceeded ({prog.elapsed():.0f} s > {budget:.0f} s); skipped from: {e.phase}")
    except Terminated:
        res["notes"].append(f"terminated (SIGTERM) during {res.get('phase')} after {prog.elapsed():.0f} s")
        save()
        raise
    save()
    log(f"[{variant}] finished in {prog.elapsed():.1f} s")
    return res


def _run_variant(variant, args, device, prog, res):
    B, T, H, D = args.shape
    dtype, gate_dtype = DTYPES[args.dtype], DTYPES[args.gate_dtype]
    dn = args.dtype
    scale = D ** -0.5
    seed = args.seed + VARIANTS.index(variant)
    smoke = args.smoke
    Ts = min(T, args.acc_t)

    # ---- imports
    def imp_ours():
        mod = importlib.import_module(f"chunkproof.kernels.{variant}")
        fn = getattr(mod, OURS_NAME[variant])
        return mod, fn
    ok, val = prog.run("import ours", imp_ours)
    mod, ours_fn = val if ok else (None, None)
    combos = ours_combos(variant, mod, args) if ok else []
    for label, tag, settings in combos:
        res["ours_order"].append(label)
        res["ours"][label] = {"tag": tag, "settings": settings, "notes": []}

    def fla_name(label):
        inner = label[len(variant):].strip().strip("[]")
        inner = inner[4:] if inner.startswith("FLA ") else inner
        return f"FLA [{inner}]" if inner else "FLA"

    fla_rows = FLA_ROWS[variant] if not args.no_extra_rows else FLA_ROWS[variant][:1]
    fla = {}
    for label, extra in fla_rows:
        res["fla_order"].append(label)
        res["fla"][label] = {"kwargs": extra, "notes": []}
    if not smoke or args.smoke_fla:
        for label, extra in fla_rows:
            ok, f = prog.run(f"import {fla_name(label)}",
                             lambda extra=extra: fla_callable(variant, extra), res["fla"][label]["notes"])
            if ok:
                fla[label] = f
    else:
        for label, _ in fla_rows:
            res["fla"][label]["notes"].append("FLA not run in --smoke (see --smoke-fla)")

    def ours_name(o):
        return "ours" if len(combos) == 1 else f"ours {o['tag']}"

    compiled = {}  # label / ("fla", label) -> its first call at the timing shape succeeded
    low = {}       # the accuracy slice in the benchmark dtype: inputs "sl", reference "ref"

    def time_ours(label, inp):
        o = res["ours"][label]

        def first():
            t = time.time()
            with torch.no_grad():
                call_ours(ours_fn, mod, o["settings"], inp, scale)
            sync(device)
            return time.time() - t
        ok, dt = prog.run(f"{ours_name(o)} {dn} first call (compile)", first, o["notes"])
        if not ok:
            return
        o["first_call_s"] = round(dt, 2)
        compiled[label] = True

        def timing():
            with tiling(mod, o["settings"]):
                return bench_ms(lambda: ours_fn(*inp.values(), scale=scale, output_final_state=True),
                                args.reps, args.warmup_ms, args.rep_ms)
        ok, ms = prog.run(f"{ours_name(o)} {dn} timing", timing, o["notes"])
        if ok:
            o["ms"] = ms

    def time_fla(label, inp):
        r, f = res["fla"][label], fla.get(label)
        if f is None:
            return

        def first():
            t = time.time()
            with torch.no_grad():
                f(inp, scale)
            sync(device)
            return time.time() - t
        ok, dt = prog.run(f"{fla_name(label)} {dn} first call (compile+autotune)", first, r["notes"])
        if not ok:
            return
        r["first_call_s"] = round(dt, 2)
        compiled[("fla", label)] = True
        ok, ms = prog.run(f"{fla_name(label)} {dn} timing",
                          lambda: bench_ms(lambda: f(inp, scale), args.reps, args.warmup_ms, args.rep_ms),
                          r["notes"])
        if ok:
            r["ms"] = ms

    def low_ref(inp):
        """The slice and its fp64 reference, once (a failure is recorded once, too)."""
        if "ok" not in low:
            def build():
                sl = slice_inputs(inp, Ts) if inp is not None else make_inputs(
                    variant, B, Ts, H, D, dtype, gate_dtype, device, seed, args.gate_normalizer)
                return sl, reference(variant, sl, scale)
            low["ok"], val = prog.run(f"accuracy slice ({B}, {Ts}, {H}, {D}) {dn}: inputs + fp64 reference", build)
            if low["ok"]:
                low["sl"], low["ref"] = val
        return low["ok"]

    def acc_ours(label, inp):
        o = res["ours"][label]
        if (timed and not compiled.get(label)) or not low_ref(inp):
            return

        def acc():
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = call_ours(ours_fn, mod, o["settings"], low["sl"], scale)
            return errors(*out, low["ref"])
        what = "accuracy slice" if not smoke else "first call (compile) + accuracy slice"
        ok, e = prog.run(f"{ours_name(o)} {dn} {what}", acc, o["notes"])
        if ok:
            o["low_o"], o["low_state"] = e

    def acc_fla(label, inp):
        f, r = fla.get(label), res["fla"][label]
        if f is None or (timed and not compiled.get(("fla", label))) or not low_ref(inp):
            return

        def acc():
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = f(low["sl"], scale)
            return errors(*out, low["ref"])
        ok, e = prog.run(f"{fla_name(label)} {dn} accuracy slice", acc, r["notes"])
        if ok:
            r["low_o"], r["low_state"] = e

    # ---- the headline pair (timing, then accuracy), then our other configurations, then
    # FLA's extra ones: each completed configuration is complete when the budget runs out
    inp = None
    if not smoke:
        def setup():
            x = make_inputs(variant, B, T, H, D, dtype, gate_dtype, device, seed, args.gate_normalizer)
            moved = forward_bytes(x)
            res["bytes"], res["floor_ms"] = moved, moved / args.bandwidth * 1e3
            return x
        ok, inp = prog.run(f"setup: {dn} inputs {args.shape}", setup)
    timed = inp is not None  # else (smoke, or no inputs at the full shape): accuracy only
    for i, (label, _, _) in enumerate(combos):
        if timed:
            time_ours(label, inp)
            if i == 0 and fla_rows:
                time_fla(fla_rows[0][0], inp)
        acc_ours(label, inp)
        if i == 0 and fla_rows:
            acc_fla(fla_rows[0][0], inp)
    for label, _ in fla_rows[0 if not combos else 1:]:
        if timed:
            time_fla(label, inp)
        acc_fla(label, inp)
    inp = None
    low.clear()
    if device == "cuda":
        torch.cuda.empty_cache()

    # ---- accuracy with genuine fp32 inputs (a new dtype: compiles ours again; FLA would autotune again)
    if args.no_fp32:
        return
    ok, val = prog.run(f"accuracy slice ({B}, {Ts}, {H}, {D}) fp32: inputs + fp64 reference", lambda: (
        lambda sl: (sl, reference(variant, sl, scale)))(
        make_inputs(variant, B, Ts, H, D, torch.float32, torch.float32, device, seed + 1000, args.gate_normalizer)))
    if not ok:
        return
    sl, ref = val
    for label, _, _ in combos:
        o = res["ours"][label]

        def acc32(o=o):
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = call_ours(ours_fn, mod, o["settings"], sl, scale)
            return errors(*out, ref)
        ok, e = prog.run(f"{ours_name(o)} fp32 first call (compile) + accuracy slice", acc32, o["notes"])
        if ok:
            o["fp32_o"], o["fp32_state"] = e
    if args.fla_fp32:
        for label, _ in fla_rows:
            f, r = fla.get(label), res["fla"][label]
            if f is None:
                continue

            def acc32_f(f=f):
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = f(sl, scale)
                return errors(*out, ref)
            ok, e = prog.run(f"{fla_name(label)} fp32 first call (compile+autotune) + accuracy slice", acc32_f,
                             r["notes"])
            if ok:
                r["fp32_o"], r["fp32_state"] = e


# --------------------------------------------------------------------------- one variant in a child process

def save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, default=str)
    os.replace(tmp, path)


def load_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except Exception:  # noqa: BLE001  (missing, or cut short)
        return None


def run_isolated(variant, argv, soft, hard, on_update):
    """Run `variant` in a child process (same argv + --child-*); kill it `hard` seconds in.
    Returns the child's result, with a note when it was killed or crashed."""
    fd, path = tempfile.mkstemp(prefix=f"fwd_vs_fla_{variant}_", suffix=".json")
    os.close(fd)
    os.unlink(path)
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--variants", variant,
           "--child-out", path, "--child-budget", f"{soft:.1f}", "--t0", repr(T_START)]
    t0 = time.time()
    proc = subprocess.Popen(cmd)  # same process group: `timeout`'s group signal reaches it too
    killed, seen, rc = False, None, None
    try:
        while True:
            try:
                rc = proc.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                pass
            try:
                m = os.stat(path).st_mtime
            except OSError:
                m = None
            if m is not None and m != seen:
                seen = m
                r = load_json(path)
                if r is not None:
                    on_update(r)
            if time.time() - t0 > hard:
                r = load_json(path) or {}
                log(f"[{variant}] hard limit {hard:.0f} s reached during {r.get('phase')}; killing the child "
                    f"(pid {proc.pid})")
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                killed = True
                break
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        r = load_json(path)
        if r is not None:
            r["notes"].append(f"terminated during {r.get('phase')} after {time.time() - t0:.0f} s")
            on_update(r)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    r = load_json(path)
    with contextlib.suppress(OSError):
        os.unlink(path)
    if r is None:
        r = new_result(variant)
        r["notes"].append(f"child process wrote nothing (exit status {rc})")
    if killed:
        r["notes"] = [n for n in r["notes"] if not n.startswith("terminated (SIGTERM)")]
        r["notes"].append(f"killed during {r.get('phase')} after {time.time() - t0:.0f} s (hard limit {hard:.0f} s)")
    elif r.get("phase") != "done" and not any(n.startswith("budget exceeded") for n in r["notes"]):
        r["notes"].append(f"child exited with status {rc} during {r.get('phase')}")
    return r


def child_main(args):
    """--child-out: measure the one variant in args.variants, saving after every phase."""
    device = "cpu" if args.smoke else "cuda"
    variant = args.variants[0]
    res = new_result(variant)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        run_variant(variant, args, device, args.child_budget, lambda: save_json(args.child_out, res), res)
    except Terminated:
        return 143
    return 0


# --------------------------------------------------------------------------- report

def rows_of(variant, res):
    """Table rows of one variant: one per configuration of ours (FLA's default configuration
    repeated on each), then one per extra FLA configuration (next to ours' first row)."""
    ours = [res["ours"][k] | {"label": k} for k in res.get("ours_order", [])]
    flas = [res["fla"][k] | {"label": k} for k in res.get("fla_order", [])]
    fla0 = flas[0] if flas else {"notes": []}
    our0 = ours[0] if ours else {"notes": []}
    rows = []

    def row(label, o, f, notes):
        r = {"variant": label, "base": variant, "floor_ms": res.get("floor_ms"), "bytes": res.get("bytes"),
             "notes": notes}
        for k in ("ms", "first_call_s", "low_o", "low_state", "fp32_o", "fp32_state"):
            r[f"ours_{k}"], r[f"fla_{k}"] = o.get(k), f.get(k)
        return r
    for i, o in enumerate(ours or [{"label": variant, "notes": []}]):
        notes = list(res.get("notes", [])) + list(fla0.get("notes", [])) if i == 0 else []
        rows.append(row(o["label"], o, fla0, notes + list(o.get("notes", []))))
    for f in flas[1:]:
        rows.append(row(f["label"], our0, f, list(f.get("notes", []))
                        + ([f"ours = row '{our0['label']}'"] if ours else [])))
    return rows


def fmt(x, kind):
    if x is None:
        return "-"
    if kind == "ms":
        return f"{x:.4f}"
    if kind == "ratio":
        return f"{x:.2f}"
    if kind == "frac":
        return f"{x:.0%}"
    if kind == "s":
        return f"{x:.1f}"
    return f"{x:.1e}"


def pair(a, b, kind):
    return f"{fmt(a, kind)} / {fmt(b, kind)}"


def table(rows, dtype_name):
    head = ["variant", "ours ms", "FLA ms", "ratio ours/FLA", "floor ms",
            "fraction of floor (ours / FLA)", "first call s (ours / FLA)",
            f"rel RMS o {dtype_name} (ours / FLA)", f"rel RMS state {dtype_name} (ours / FLA)",
            "fp32 rel RMS o (ours / FLA)", "fp32 rel RMS state (ours / FLA)", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        o, f, fl = r.get("ours_ms"), r.get("fla_ms"), r.get("floor_ms")
        ratio = o / f if o and f else None
        cells = [
            r["variant"], fmt(o, "ms"), fmt(f, "ms"), fmt(ratio, "ratio"), fmt(fl, "ms"),
            pair(fl / o if fl and o else None, fl / f if fl and f else None, "frac"),
            pair(r.get("ours_first_call_s"), r.get("fla_first_call_s"), "s"),
            pair(r.get("ours_low_o"), r.get("fla_low_o"), "err"),
            pair(r.get("ours_low_state"), r.get("fla_low_state"), "err"),
            pair(r.get("ours_fp32_o"), r.get("fla_fp32_o"), "err"),
            pair(r.get("ours_fp32_state"), r.get("fla_fp32_state"), "err"),
            "; ".join(dict.fromkeys(r["notes"])).replace("|", "/"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def phases_table(results):
    """Where the time went: seconds per phase, per variant."""
    lines = []
    for v, res in results.items():
        ph = res.get("phases", [])
        if not ph:
            continue
        parts = [f"{lab} {'(running / cut off)' if s is None else f'{s:.1f} s'}" for lab, s in ph]
        lines.append(f"- {v}: " + "; ".join(parts))
    return "\n".join(lines)


def header(args, device, bw_measured, fla_v):
    import triton
    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (CPU, TRITON_INTERPRET=1)"
    B, T, H, D = args.shape
    Ts = min(T, args.acc_t)
    lines = [
        "# Forward: chunkproof generated kernels vs FLA" + (" (smoke)" if args.smoke else ""),
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- GPU: {gpu}",
        f"- python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, fla {fla_v}",
        f"- shape (B, T, H, D) = ({B}, {T}, {H}, {D}); q/k/v dtype {args.dtype}; gate dtype {args.gate_dtype}; "
        f"gate normalizer {args.gate_normalizer}; seed {args.seed}",
        f"- ours: one row per TILING (schedule, computed_dots) of the generated module (--ours-schedules "
        f"{args.ours_schedules}, --ours-modes {args.ours_modes}); the plain variant name is the module's own "
        "TILING. FLA's default configuration is measured once per variant and repeated on each of our rows",
    ]
    if not args.smoke:
        lines.append(f"- timing: a timed first call (compile; FLA: compile + autotune), then "
                     f"triton.testing.do_bench median (warmup {args.warmup_ms} ms, rep {args.rep_ms} ms), "
                     f"median of {args.reps} calls; forward only, no grad, output_final_state=True on both sides")
        bw = f"; measured D2D copy bandwidth {bw_measured / 1e12:.2f} TB/s" if bw_measured else ""
        lines.append(f"- memory floor: bytes of all inputs + o + fp32 final state, / {args.bandwidth / 1e12:.2f} TB/s"
                     f"{bw}; fraction = floor / time")
        lines.append(f"- budgets: {args.variant_budget:.0f} s per variant (checked between phases)"
                     + (f", a fair share of {args.total_budget:.0f} s in all" if args.total_budget else "")
                     + (f"; each variant in its own process, killed {args.kill_grace:.0f} s past its budget"
                        if args.isolate else ""))
    lines.append(f"- accuracy: relative RMS vs a chunk-free fp64 recurrence on all {B} batches and {H} heads, "
                 f"steps [0, {Ts}) (FLA 0.6.0's autotune keys hold B and H but not T, so the slice reuses the "
                 "timing call's autotuned configs: no second autotune); 'fp32' = fresh fp32 inputs of the same "
                 "construction and shape" + ("" if args.fla_fp32 else
                                             "; FLA's fp32 run is off (--fla-fp32: fp32 is a new autotune key "
                                             "and FLA warns on fp32)"))
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="write the markdown table here (rewritten after every phase)")
    p.add_argument("--json", help="write the raw results here")
    p.add_argument("--shape", default=None, help="B,T,H,D (default 4,4096,16,128; smoke 1,70,1,16)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--gate-dtype", default="fp32", choices=sorted(DTYPES))
    p.add_argument("--gate-normalizer", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=3, help="do_bench calls per kernel (median taken)")
    p.add_argument("--warmup-ms", type=int, default=100)
    p.add_argument("--rep-ms", type=int, default=500)
    p.add_argument("--bandwidth", type=float, default=4.8e12, help="B/s for the memory floor (H200: 4.8e12)")
    p.add_argument("--acc-t", type=int, default=1024, help="steps of the accuracy slice (all B and H are kept)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--ours-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a TILING entry on all of our rows, e.g. --ours-set scan_warps=4")
    p.add_argument("--ours-modes", default="tf32,input", help="TILING['computed_dots'] values, one row each")
    p.add_argument("--ours-schedules", default="auto",
                   help="TILING['schedule'] values, one row each (auto: every schedule the module has)")
    p.add_argument("--fla-fp32", action="store_true", help="also run FLA on fp32 inputs (autotunes again)")
    p.add_argument("--no-fp32", action="store_true", help="skip the fp32 accuracy runs entirely")
    p.add_argument("--variant-budget", type=float, default=150.0,
                   help="seconds per variant; checked between phases, the rest is skipped")
    p.add_argument("--total-budget", type=float, default=None,
                   help="seconds for the whole run; each variant gets at most a fair share of what is left")
    p.add_argument("--kill-grace", type=float, default=45.0,
                   help="with --isolate: kill a variant's process this long past its budget")
    iso = p.add_mutually_exclusive_group()
    iso.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                     help="each variant in its own process (default on CUDA)")
    iso.add_argument("--no-isolate", dest="isolate", action="store_false")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="CPU + TRITON_INTERPRET=1, ours vs fp64 only")
    p.add_argument("--smoke-fla", action="store_true", help="in --smoke, also try FLA (its kernels query a GPU driver, so they "
                   "normally fail under the CPU interpreter; the failure is recorded)")
    p.add_argument("--smoke-tol", default="5e-2,1e-3",
                   help="--smoke fails above these rel RMS errors: low-precision,fp32")
    p.add_argument("--debug", action="store_true", help="print tracebacks")
    p.add_argument("--no-extra-rows", action="store_true", help="only FLA's default configuration per variant")
    # internal: one variant in a child process
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--child-budget", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--t0", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    shape = args.shape or ("1,70,1,16" if args.smoke else "4,4096,16,128")
    args.shape = tuple(int(s) for s in shape.split(","))
    if len(args.shape) != 4:
        p.error("--shape needs B,T,H,D")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {VARIANTS}")
    for m in args.ours_modes.split(","):
        if m.strip() and m.strip() not in ("tf32", "input"):
            p.error(f"--ours-modes: {m!r} is not tf32 or input")
    if args.isolate is None:
        args.isolate = not args.smoke
    return args


def main(argv=None):
    global T_START
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.t0 is not None:
        T_START = args.t0
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
    if args.child_out:
        return child_main(args)
    torch.manual_seed(args.seed)
    signal.signal(signal.SIGTERM, _on_sigterm)

    bw_measured = None
    if device == "cuda":
        try:
            bw_measured = copy_bandwidth()
        except Exception as e:  # noqa: BLE001
            log(f"copy bandwidth measurement failed: {first_line(e)}")
    try:  # the children import it; here only its version
        import importlib.util
        import importlib.metadata
        if importlib.util.find_spec("fla") is None:
            raise ModuleNotFoundError("No module named 'fla'")
        try:
            fla_v = importlib.metadata.version("fla-core")
        except importlib.metadata.PackageNotFoundError:
            import fla
            fla_v = getattr(fla, "__version__", "?")
    except Exception as e:  # noqa: BLE001
        fla_v = f"not importable ({first_line(e)})"
    log(f"setup done at {time.time() - T_START:.1f} s (fla {fla_v})")

    results = {}

    def write():
        rows = [r for v in results for r in rows_of(v, results[v])]
        md = (header(args, device, bw_measured, fla_v) + "\n\n" + table(rows, args.dtype) + "\n\n"
              "Seconds per phase (a phase without a time was running when the variant stopped):\n\n"
              + phases_table(results) + "\n")
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out + ".tmp", "w") as fh:
                fh.write(md)
            os.replace(args.out + ".tmp", args.out)
        if args.json:
            save_json(args.json, {"shape": args.shape, "dtype": args.dtype, "args": vars(args),
                                  "variants": results, "rows": rows})
        return md, rows

    deadline = T_START + args.total_budget if args.total_budget else None
    child_argv = [a for a in argv]
    terminated = False
    try:
        for i, v in enumerate(args.variants):
            n_left = len(args.variants) - i
            soft, hard = args.variant_budget, args.variant_budget + args.kill_grace
            if deadline is not None:
                remaining = deadline - time.time()
                if remaining < 20:
                    res = new_result(v)
                    res["notes"].append(f"not run: total budget {args.total_budget:.0f} s spent")
                    results[v] = res
                    log(f"== {v}: not run, total budget spent")
                    write()
                    continue
                soft = min(soft, max(remaining / n_left, 30.0))
                hard = min(soft + args.kill_grace, remaining - 5)
            log(f"== {v} (budget {soft:.0f} s" + (f", hard limit {hard:.0f} s" if args.isolate else "")
                + f"; total {time.time() - T_START:.1f} s)")

            def update(r, v=v):
                results[v] = r
                write()
            try:
                if args.isolate:
                    results[v] = run_isolated(v, child_argv, soft, hard, update)
                else:
                    results[v] = new_result(v)
                    run_variant(v, args, device, soft, write, results[v])
            except Terminated:
                raise
            except Exception as e:  # noqa: BLE001  (anything the harness did not catch itself)
                traceback.print_exc()
                results.setdefault(v, new_result(v))["notes"].append(f"harness: {first_line(e)}")
            write()
    except Terminated:
        terminated = True
        log("terminated (SIGTERM): writing what was measured")
    md, rows = write()
    print(md)
    if terminated:
        return 124

    if args.smoke:
        tol_low, tol_32 = (float(s) for s in args.smoke_tol.split(","))
        bad = []
        for v, res in results.items():
            if not res.get("ours_order"):
                bad.append(f"{v}: no rows of ours ({'; '.join(res.get('notes', []))})")
            for label in res.get("ours_order", []):
                o = res["ours"][label]
                for key, tol in (("low_o", tol_low), ("low_state", tol_low),
                                 ("fp32_o", tol_32), ("fp32_state", tol_32)):
                    if key.startswith("fp32") and args.no_fp32:
                        continue
                    val = o.get(key)
                    if val is None or not math.isfinite(val) or val > tol:
                        bad.append(f"{label}.{key}={val}")
        if bad:
            print("SMOKE FAILED: " + ", ".join(bad), file=sys.stderr)
            return 1
        print("smoke ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
