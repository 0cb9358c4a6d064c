"""The forward's bf16 errors on the CPU (Triton's interpreter, the H200's rounding
emulated as cpu_grad_accuracy.py does), for TILING settings side by side: o and the
final state against the fp64 recurrence (relative RMS), on the benchmark's inputs
(chunkproof.bench.inputs.bench_inputs, cut to the first T steps) with no initial state,
as the bench's forward rows call it.  Where docs/measurements.md's emulated o and final
state errors of the per-kernel product types come from.

    TRITON_INTERPRET=1 python benchmarks/cpu_forward_accuracy.py --variant kda --set "" \
        --set prep_dots=tf32,out_dots=tf32
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interp_rounding import MODES, emulate  # noqa: E402
from chunkproof.bench import args as A, calls, inputs, metrics, tiling  # noqa: E402

PROG = "cpu_forward_accuracy.py"


def main(argv=None):
    ap = A.Parser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="K=V[,K=V]",
                    help="one row per --set: TILING overrides ('' for the defaults)")
    ap.add_argument("--shape", default="1,512,2,128", help="B,T,H,D (drawn at T = --bench-t, cut to T)")
    ap.add_argument("--bench-t", type=int, default=4096)
    ap.add_argument("--tf32", choices=MODES, default="trunc")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        A.variant(a.variant)
        B, T, H, D = A.shape(a.shape)
        rows = [(text, tiling.parse_overrides(text)) for text in a.set or [""]]
        mod, fn = calls.ours(a.variant)
        for _, sets in rows:       # an unknown key is refused before anything runs
            with tiling.applied(mod, sets):
                pass
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("run with TRITON_INTERPRET=1 (this is the CPU's emulation)")
    except ValueError as e:
        return A.fail(PROG, e)
    x = inputs.first_steps(inputs.bench_inputs(a.variant, B, max(T, a.bench_t), H, D, torch.bfloat16,
                                               torch.float32, "cpu", seed=0), T)
    o_ref, ht_ref = metrics.reference_forward(a.variant, x)
    undo = emulate(a.tf32)
    try:
        for text, sets in rows:
            with tiling.applied(mod, sets):
                o, ht = calls.forward(fn, x)
            print(f"{a.variant} {text or 'planned'}: o {metrics.rel_rms(o, o_ref):.3e} "
                  f"final state {metrics.rel_rms(ht, ht_ref):.3e}", flush=True)
    finally:
        undo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
