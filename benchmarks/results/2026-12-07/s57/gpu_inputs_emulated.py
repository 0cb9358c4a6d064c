# Session 57, CPU: the GPU profile's error measurement (benchmarks/profile_kernels.py
# errors(): the benchmark's inputs drawn as it draws them, seed 0 and cotangents seed 1 on
# the CPU generator, the first 256 steps called as a sequence of their own, gate.judge
# against the fp64 recurrence) repeated under Triton's interpreter with the planner's
# H200 rounding emulated, for the shipped module and FLA's op: the same inputs as the GPU
# rows of results/2026-12-07/s56/call1/profile_gdn.md, so any difference is the emulation.
#   TRITON_INTERPRET=1 python benchmarks/results/2026-12-07/s57/gpu_inputs_emulated.py VARIANT B,T,H,D [ours|fla] [SEED]
# SEED (default 0, the GPU's) draws other inputs (cotangents SEED + 1); PER_HEAD=dg prints that
# gradient's error per (batch, head) and the fp64 reference's norm there; PLANNER_METRIC=1
# also prints the planner's errors of the same outputs (chunkproof.fuzz.chunked: errors
# against chunked.reference, each tensor's plain relative RMS).
import os
import sys

import torch

from chunkproof.bench import calls, fla, gate, inputs
from chunkproof.bench.fla_interp import patched
from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz.precision_measure import _as_kernel, _no_overflow_checks
from chunkproof.fuzz.rounding import emulate

name = sys.argv[1]
B, T, H, D = (int(n) for n in sys.argv[2].split(","))
sides = sys.argv[3].split(",") if len(sys.argv) > 3 else ["ours", "fla"]
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
v = BY_NAME[name]
x = inputs.bench_inputs(name, B, T, H, D, torch.bfloat16, torch.float32, "cpu", seed=seed)
h0, do, dht = inputs.cotangents(B, T, H, D, D, torch.bfloat16, "cpu", seed=seed + 1)
t = min(256, T)
xp, dop = inputs.first_steps(x, t), do[:, :t].contiguous()
ref = gate.Reference(name, xp, h0, dop, dht, D ** -0.5)
for side in sides:
    undo = emulate("trunc")
    try:
        with _no_overflow_checks():
            if side == "fla":
                with patched():
                    o, ht, grads = calls.fwd_bwd_state(fla.load(name, True), xp, h0, dop, dht, D ** -0.5)
            else:
                import importlib
                mod = importlib.import_module(f"chunkproof.kernels.{name}")
                with _as_kernel(v, mod):
                    o, ht, grads = calls.fwd_bwd_state(getattr(mod, v.func), xp, h0, dop, dht, D ** -0.5)
    finally:
        undo()
    errs = gate.judge(ref, {"o": o, "final_state": ht}, grads, gate.base_tolerance(torch.bfloat16)).errors
    print(f"- {side} (emulated): " + ", ".join(f"{k} {e:.2e}" for k, e in sorted(errs.items(), key=lambda kv: -kv[1])),
          flush=True)
    if os.environ.get("PLANNER_METRIC"):
        from chunkproof.fuzz.chunked import errors as planner_errors, reference as planner_reference
        want = planner_reference(name, xp, h0, dop, dht, D ** -0.5)
        pe = planner_errors(o, ht, grads, want)
        print(f"  planner's metric, {side}: " + ", ".join(f"{k} {e:.2e}" for k, e in sorted(pe.items(), key=lambda kv: -kv[1])),
              flush=True)
    per = os.environ.get("PER_HEAD")
    if per:
        want = ref.grads()[per[1:]].double()
        got = grads[per[1:]].double()
        # [B, T, H(, D)]: per (batch, head), over steps and the rest
        e = (got - want).transpose(1, 2).reshape(B, H, -1).norm(dim=-1)
        n = want.transpose(1, 2).reshape(B, H, -1).norm(dim=-1)
        print(f"  {per} per (batch, head) of {side}: error norm / reference norm: "
              + ", ".join(f"{a:.2e}/{b:.2e}" for a, b in zip(e.flatten().tolist(), n.flatten().tolist())), flush=True)
