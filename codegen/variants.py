"""The generated variants: which verified claims each kernel is printed from, how the
FLA-style arguments bind to the derivation's tiles, and the tiling (data, not code)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple


@dataclass(frozen=True)
class Arg:
    """One tensor argument of the public function.  ``tile`` is the derivation's
    input tile it binds to; ``kind``: 'k' ([B,T,H,K]), 'v' ([B,T,H,V]), 'gate_k' (log
    gate [B,T,H,K]), 'gate_h' (log gate [B,T,H]), 'head' ([B,T,H])."""
    name: str
    tile: str
    kind: str


@dataclass(frozen=True)
class Variant:
    name: str                      # module name under generated_kernels/
    func: str                      # public function, FLA's name
    derivation: str                # bundled derivation module (derivations/<name>.py)
    program: str                   # the chunk program the kernel is printed from
    out_claim: str                 # forward claim giving O_[t]   (must hold)
    state_claim: str               # forward claim giving S_[t]^C (must hold)
    args: Tuple[Arg, ...]
    recurrence_doc: str            # the recurrence in FLA's terms, for docstrings
    tiling: Dict[str, int] = field(default_factory=dict)
    # the backward's claims (issue 4; checked by codegen.plan.backward_claims): 'dS' the
    # recursion of delta S_[t]^C over chunks, 'dS_prev' delta S_[t-1]^C in full (the
    # initial state's gradient at the first chunk), 'grads' one claim per argument (gates:
    # delta log alpha), 'inner' the adjoints of the program's definitions they read
    backward: Dict[str, object] = field(default_factory=dict)
    # the lines (definitions or finals g_<arg>) whose gated intra-chunk products take
    # TILING grad_gprec; the others' take the stage's PREC2.  Empty: every line.
    gprec_tiles: Tuple[str, ...] = ()
    # the split V kernel also writes each row sum over Dk of a V reduction times a tile
    # free of any, (X ⊙ Y) 1, as a C x 1 V reduction (backward.split_gradients), so that
    # a kernel that reads X only for that sum reads a column instead
    vred_rowsums: bool = False

    def tile_of(self) -> Dict[str, Arg]:
        return {a.tile: a for a in self.args}


_QKV = (Arg("q", "Q", "k"), Arg("k", "K", "k"), Arg("v", "V", "v"))
# computed_dots: the type of products that involve a computed tile, for bf16 inputs (see
# generated_kernels/_runtime.py dot_types): "tf32" (two computed tiles in tf32, a computed
# tile times an input tile in bf16), "tf32_mixed" (both kinds in tf32; on the CPU it
# halves GLA's bf16 output error; GPU time and error not yet measured) or "input" (bf16).  schedule: 'fused' (one sequential kernel
# computes states and outputs) or 'split' (the sequential kernel writes every chunk's
# S_[t-1]^C, a parallel kernel computes the outputs).  inverse16: the product type of
# triangular inverses for 16-bit inputs.  Benchmarks may flip these at run time.
# Measured on the H200 at (4, 4096, 16, 128) bf16 (benchmarks/results/profile.md):
# split beats fused for every variant (the fused scan runs the output math inside the
# sequential loop); the parallel intra and output kernels are faster at 4 warps (GDN
# intra 644 -> 419 us, output 540 -> 279 us), the state scan at 8.  BV 32 doubled the
# state scan (255 registers at 8 warps: one program per SM, two waves).
# gate_products: how a masked product with vector gates is formed ("stable": by 16-row
# blocks, never overflowing; "rebalanced": one product shifted by the middle row, which
# overflows past about -170 of decay per chunk).  Not yet timed on the GPU.
# fp32_products: "ieee" (measured: fp32 rel RMS 5e-7..5e-6 on the H200, but FMA loops:
# slow, 10-300 s compiles) or "tf32x3" (tensor cores, about fp32 accuracy; not yet measured).
# "fp32" and "fp32_wide" (K or V over 128) override the rest for fp32 inputs: fp32
# products ("ieee") stage their operands in shared memory at twice the bytes, and the
# offline check put the fused scans at 229-475 KB (limit 227 KB) with 2 stages and V
# blocks of 64; one stage and V blocks of 32 (16 when wide) keep them under it.
# grad_*: the backward's per-chunk gradient kernel: V blocks of grad_BV (several blocks
# write fp32 partial sums that torch adds after the launch); grad_groups splits its
# gradients over several launches, each compiling only the math its gradients need;
# grad_dots: computed_dots for the gradient kernel alone (None: the same).  Measured on the
# H200 at (4, 4096, 16, 128) bf16 (benchmarks/results/gpu_backward.md, the sweep of
# benchmarks/sweeps/grad.txt): one V block of 128 beats two of 64 (GDN forward + backward
# 7.79 -> 5.65 ms, GLA 7.44 -> 5.03: the V-independent work is not repeated and the partial
# sums and their reduction go away); splitting into launches and 4 warps were slower
# (GDN 9.73 and 8.30 ms, GLA 7.74 and 10.79, KDA 30.7 for three launches).  V blocks of
# 32 end in an illegal memory access on the H200 (GDN, KDA, DPLR; not reproduced under the
# interpreter, not yet understood).  bf16 products in the gradient kernel (grad_dots
# "input") keep GDN's and DPLR's kernels within the 227 KB of shared memory, at a cost in
# the gate gradient's bf16 error unless its claim pairs the terms that cancel (GDN: 2.6e-2
# printed from gdn.bwd.dlogalpha, 2.2e-3 from gdn.bwd.dlogalpha_pairs, FLA 3.0e-3; KDA:
# 2.3e-2 with bf16 products, 5.0e-3 with tf32); see gpu_backward.md.  The paired claim
# costs GDN's gradient kernel 3.54 -> 4.80 ms.  GLA and DPLR print their gate gradients from
# claims that group the state term the same way (gla.bwd.dlogalpha_grouped,
# dplr.fla.dlogalpha.grouped; CPU bf16 emulation: GLA 2.8e-2 -> 4.9e-3, DPLR 3.2e-2 ->
# 1.7e-2; not yet run on the GPU).  computed_dots "tf32_mixed" (a computed tile
# times an input tile in tf32, not bf16), measured on the H200 (gpu_backward.md), bf16 rel
# RMS against FLA's on the same inputs: GLA forward 0.73 -> 1.02 ms (FLA 0.72), o 2.47e-3
# -> 2.00e-3 (FLA 2.36e-3), d initial_state 1.6e-3 -> 4.2e-4 (FLA 2.3e-3): default.  KDA
# forward 1.45 -> 1.76 ms (FLA 0.94), o 2.7e-3 -> 2.6e-3 (FLA 3.2e-3), d initial_state
# 1.7e-3 -> 4.4e-4: default.  Gated DeltaNet forward 0.83 -> 1.13 ms (FLA 0.56: over 2x),
# so only its reverse scan takes it (dstate_dots: d initial_state 1.7e-3 -> 4.3e-4, FLA
# 4.7e-4; the scan 0.68 -> 1.33 ms).  The gradient kernels keep their own products: the
# mixed form would push them over the shared memory (GLA: 262 KB offline).  KDA and DPLR stay at V blocks of 64
# (not yet timed at 128; offline, KDA's kernel at 128 had not finished compiling in 8 min).
# fp32 inputs: `pytest -m gpu` failed on Gated DeltaNet's fp32 example (the log was cut
# before the details); offline its gradient kernel needs 278 KB of shared memory at chunks
# of 64, over the H200's 227 KB (246 / 238 KB even in two launches), 156 KB at chunks of 32: the delta-rule variants take chunks of 32 for fp32
# (fp32 products are FMA loops; speed is not what fp32 inputs are for).  KDA's and DPLR's
# fp32 backward has not been run on the GPU.
# grad_split: the gradient stage as a V kernel and a K kernel (codegen/backward.py
# split_gradients; gradk_warps sizes the K kernel, None: grad_warps) instead of one kernel;
# grad_groups applies to the single kernel only.  Measured on the H200, (4, 4096, 16, 128)
# bf16, fwd + bwd (benchmarks/results/gpu_backward.md): one kernel -> split -> split with
# the K split and the hoisted scan: GLA 6.10 -> 3.95 -> 3.94 ms (FLA 3.01), GDN 6.96 ->
# 6.47 -> 4.83 (3.15), KDA 19.4 -> 16.7 -> 12.5 (4.89), DPLR 42.0 -> 20.6 -> 17.4 (7.61).
# V blocks of 128 beat 64 for GLA and GDN (3.95 vs 4.63, 6.47 vs 8.58); KDA's and DPLR's V
# kernels need over 227 KB of shared memory at 128 (offline 262 / 246 KB), so they stay
# at 64.  K blocks of 32 beat 64 for KDA (12.5 vs 12.9).  DPLR's gradient products in tf32
# (grad_dots) put every DPLR gradient's bf16 error at FLA's or under but dq's (d gk
# 1.70e-2 -> 2.55e-3, FLA 7.06e-3) for 1.5 ms; GDN's split kernels with tf32 products need
# 278 KB of shared memory, so GDN keeps bf16 there.  grad_ksplit (a K block size, or None):
# the split's K kernel as a C kernel (the C x C tiles that need whole K rows, and the
# gradients without a K dimension) and a KB kernel blocked over K (split_k).
# dstate_hoist: the reverse scan's state-free C x V products (the intra-chunk part of
# delta U) computed first for all chunks in parallel (backward.hoist_reverse), so the
# sequential loop keeps only what reads delta S.
# grad_gprec: the gradient kernels' gated intra-chunk products (_masked_mix,
# _masked_gated_dot) of fp32 operands in this input precision (None: as the others);
# gradv_dots: the split stage's V kernel's own computed_dots (None: grad_dots);
# grad_gate_products: the gradient kernels' own gate_products.  The defaults below were
# chosen on the CPU with benchmarks/cpu_grad_accuracy.py --inputs bench --tf32 trunc (it
# reproduces the H200's bf16 errors) and measured on the H200 side by side with FLA
# (benchmarks/results/gpu_backward.md, 2026-11-30 last): every bf16 gradient at or under
# FLA's; forward + backward GLA 1.57x, KDA 1.51x, DPLR 1.89x FLA's (tf32x3 in dQ's and
# dK's gated products only, Variant.gprec_tiles), GDN 4.48 ms (vred_rowsums; 1.47x and
# 1.75x side by side, FLA's own time moving between processes: 2.26-3.05 ms).  K blocks
# of 128 took GDN to 4.39 ms (not yet fuzzed on the GPU).  grad_gate_products="blocks" in
# the gradient kernels is exact but ran DPLR's 10x slower on the H200 (83 ms).
# keep_forward: autograd keeps the forward's intra tiles and (split schedule) its chunk
# states h for the backward instead of recomputing them: at (4, 4096, 16, 128) bf16 that
# is h's 134 MB plus W/U/Gamma, for the intra kernel and the state scan that the backward
# would run again (about 0.8 ms of GDN's and 1.2 ms of KDA's measured forward + backward).
_TILING = {"BT": 64, "BV": 64, "scan_warps": 8, "scan_stages": 2, "prep_warps": 4, "prep_stages": 1,
           "grad_BV": 128, "grad_warps": 8, "grad_stages": 1, "grad_groups": None, "grad_dots": None,
           "grad_split": False, "gradk_warps": None, "grad_ksplit": None, "dstate_hoist": True,
           "dstate_dots": None,
           "out_warps": 4, "out_stages": 2, "computed_dots": "tf32", "inverse16": "tf32", "gate_products": "stable",
           "grad_gate_products": None, "grad_gprec": None, "gradv_dots": None,
           "fp32_products": "ieee",
           "schedule": "split", "keep_forward": True,
           "fp32": {"scan_stages": 1, "out_stages": 1, "BV": 32},
           "fp32_wide": {"BV": 16}}
_FP32_DELTA = dict(_TILING["fp32"], BT=32)    # the fp32 override of the delta-rule variants

VARIANTS: List[Variant] = [
    Variant("gla", "chunk_gla", "gla", "gla_chunk", "gla.O", "gla.S_C",
            _QKV + (Arg("g", "Alpha", "gate_k"),),
            "S_t = S_{t-1} Diag(exp g_t) + v_t k_t^T,  o_t = S_t q_t",
            dict(_TILING, computed_dots="tf32_mixed", grad_dots="tf32_mixed", grad_gprec="tf32x3", grad_split=True),
            dict(dS="gla.dS", dS_prev="gla.bwd.dS_prev",
                 grads=dict(q="gla.dQ", k="gla.dK", v="gla.dV", g="gla.bwd.dlogalpha_grouped"),
                 inner=["gla.dQl", "gla.dKr"])),
    Variant("gated_delta_rule", "chunk_gated_delta_rule", "gated_deltanet", "gdn_chunk_kda",
            "gdn.bwd.fwd_O", "gdn.bwd.fwd_S",
            _QKV + (Arg("g", "Alpha", "gate_h"), Arg("beta", "Beta", "head")),
            "S_t = S_{t-1} exp(g_t)(I - beta_t k_t k_t^T) + beta_t v_t k_t^T,  o_t = S_t q_t",
            dict(_TILING, dstate_dots="tf32_mixed", grad_dots="input", gradv_dots="tf32", grad_BV=64, grad_split=True,
                 grad_ksplit=64,
                 fp32=_FP32_DELTA),
            dict(dS="gdn.bwd.dS_rec", dS_prev="gdn.bwd.dS_prev",
                 grads=dict(q="gdn.bwd.dQ", k="gdn.bwd.dK", v="gdn.bwd.dV", g="gdn.bwd.dlogalpha_pairs",
                            beta="gdn.bwd.dbeta"),
                 inner=["gdn.bwd.dVnew", "gdn.bwd.dU", "gdn.bwd.dW", "gdn.bwd.dQl", "gdn.bwd.dA",
                        "gdn.bwd.dX", "gdn.bwd.dKl", "gdn.bwd.dKr"]),
            # its C kernel read delta O S_[t-1] and V_new delta S (C x Dk, fp32, per V
            # block) only for the gate gradient's row sums
            vred_rowsums=True),
    Variant("kda", "chunk_kda", "kda", "kda_chunk", "kda.O", "kda.S",
            _QKV + (Arg("g", "Alpha", "gate_k"), Arg("beta", "Beta", "head")),
            "S_t = S_{t-1} Diag(exp g_t)(I - beta_t k_t k_t^T) + beta_t v_t k_t^T,  o_t = S_t q_t",
            dict(_TILING, grad_BV=64, computed_dots="tf32_mixed", grad_dots="tf32", grad_split=True,
                 grad_ksplit=32, fp32=_FP32_DELTA),
            dict(dS="kda.dS", dS_prev="kda.bwd.dS_prev",
                 grads=dict(q="kda.dQ", k="kda.dK", v="kda.dV", g="kda.dlogAlpha_grouped", beta="kda.dBeta"),
                 inner=["kda.dU", "kda.dVnew", "kda.dW", "kda.dQl", "kda.dAt", "kda.dXt", "kda.dKl",
                        "kda.dKr.corrected", "kda.dDiagBeta"])),
    Variant("dplr_delta_rule", "chunk_dplr_delta_rule", "dplr", "dplr_fla_chunk",
            "dplr.fla.O", "dplr.fla.S",
            _QKV + (Arg("a", "A", "k"), Arg("b", "B", "k"), Arg("gk", "Alpha", "gate_k")),
            "S_t = S_{t-1} (Diag(exp gk_t) + a_t b_t^T) + v_t k_t^T,  o_t = S_t q_t",
            dict(_TILING, grad_BV=64, grad_dots="tf32", grad_gprec="tf32x3", gradv_dots="input", grad_split=True,
                 grad_ksplit=32, fp32=_FP32_DELTA),
            dict(dS="dplr.fla.dS", dS_prev="dplr.fla.dS_prev",
                 grads=dict(q="dplr.fla.dQ", k="dplr.fla.dK", v="dplr.fla.dV", a="dplr.fla.da",
                            b="dplr.fla.db", gk="dplr.fla.dlogalpha.grouped"),
                 inner=["dplr.fla." + n for n in ("dV2", "dC", "dV1", "dW", "dE", "dF", "dQl", "dBl",
                                                  "dKr", "dAr")]),
            # tf32x3 only where the H200 needs it: dq is 1.85e-3 in tf32 (FLA 1.76e-3), and
            # the grouped gate gradient reads q dq - k dk, whose terms cancel, so dK's
            # products take the same type (dQ's alone: d gk 5.62e-3, with dK's 1.38e-3,
            # FLA 7.06e-3).  All eight of the KB kernel's gated products in tf32x3 took it
            # from 3.5 to 8.5 ms; these four: 5.5 ms (sweeps/final7a.txt, final7b.txt)
            gprec_tiles=("dQ", "g_q", "dK", "g_k")),
]

BY_NAME = {v.name: v for v in VARIANTS}
