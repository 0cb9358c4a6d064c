"""The recurrent form for decoding: our fused_recurrent_<op> and FLA's same-named
function side by side in one process, and our chunk_<op> at the same shape.

Both recurrent forms are called the same way, by FLA's parameter names (our modules'
RECURRENT_PARAMS): bf16 inputs, fp32 gates, an fp32 initial state, the final state out,
no gradient.  Shapes (B, T, H, D): T = 1 is one decoding step; a larger T is a prompt
read token by token.  Before a side is timed its output and final state are held to the
fp64 recurrence on the same inputs (the first min(T, 64) steps, every batch and head; the
fuzz campaign's bf16 tolerance, 5e-2 rel RMS): a side that fails is reported, not timed.
Times: triton.testing.do_bench medians after warm-up (chunkproof.bench.timing); at T = 1
they include the host's per-call work (argument checks, launch), as a decoder sees it.

    python benchmarks/recurrent_vs_fla.py [--variant gla,kda] [--shape 64,1,16,128] [--out DIR]
    python benchmarks/recurrent_vs_fla.py --device cpu --variant gla --shape 2,3,2,16

--device cpu runs Triton's interpreter at the shape given (tiny: the path is exercised,
the times mean nothing; FLA is not called).  Writes DIR/recurrent.json and
DIR/recurrent.md (default: print only).
"""
import importlib
import sys

import torch

from chunkproof.bench import args as A

PROG = "recurrent_vs_fla.py"
SHAPES = [(64, 1, 16, 128), (256, 1, 16, 128), (4, 256, 16, 128)]
# FLA's recurrent forms (FLA 0.6.0), called with the same keywords as ours
FLA_MODULE = {"gla": "fla.ops.gla", "gated_delta_rule": "fla.ops.gated_delta_rule", "kda": "fla.ops.kda",
              "dplr_delta_rule": "fla.ops.generalized_delta_rule", "delta_rule": "fla.ops.delta_rule",
              "simple_gla": "fla.ops.simple_gla", "retention": "fla.ops.retention", "rwkv6": "fla.ops.rwkv6"}
STEPS = 64


def _fla(variant, name):
    """FLA's function of that name, or why there is none."""
    if variant not in FLA_MODULE:
        return None, "no FLA namesake"
    try:
        return getattr(importlib.import_module(FLA_MODULE[variant]), name), ""
    except Exception as e:  # noqa: BLE001  (FLA missing or broken: reported, not fatal)
        return None, f"{type(e).__name__}: {str(e)[:120]}"


def _gate(call, x, h0, ref, steps):
    """max rel RMS error of (o, final state) on the first ``steps`` steps, against ref."""
    from chunkproof.fuzz.reference import rel_rms
    o, ht = call({n: t[:, :steps].contiguous() if t.dim() >= 3 else t for n, t in x.items()}, h0)
    return max(rel_rms(o.float(), ref[0]), rel_rms(ht.float(), ref[1]))


def measure(variant, shape, device):
    from chunkproof.bench import inputs as I, timing
    from chunkproof.bench.metrics import reference_forward
    from chunkproof.codegen.fla_api import recurrent_name
    from chunkproof.fuzz.cases import API, kernel, module
    from chunkproof.kernels._runtime import fla_names
    B, T, H, D = shape
    cuda = device == "cuda"
    m = module(variant)
    x = I.bench_inputs(variant, B, T, H, D, torch.bfloat16, torch.float32, device)
    h0, _, _ = I.cotangents(B, T, H, D, D, torch.bfloat16, device)
    steps = min(T, STEPS)
    first = {n: t[:, :steps].double() if t.dim() >= 3 else t.double() for n, t in x.items()}
    ref = reference_forward(variant, first, initial_state=h0.double())
    by_arg = fla_names(m.RECURRENT_PARAMS)
    fname = recurrent_name(API[variant])
    sides = [("ours recurrent", getattr(m, fname), True), ("ours chunk", kernel(variant), False)]
    if cuda:
        f, why = _fla(variant, fname)
        sides.append(("FLA recurrent", f or why, True))
    rows = []
    for side, fn, by_name in sides:
        row = dict(variant=variant, B=B, T=T, H=H, D=D, side=side, func=fname if by_name else API[variant])
        if isinstance(fn, str):
            rows.append(dict(row, ms=None, err=None, note=fn))
            continue

        def call(inp, state, fn=fn, by_name=by_name):
            with torch.no_grad():
                if by_name:
                    return fn(**{by_arg[n]: t for n, t in inp.items()}, initial_state=state, output_final_state=True)
                return fn(*inp.values(), initial_state=state, output_final_state=True)
        try:
            err = _gate(call, x, h0, ref, steps)
        except Exception as e:  # noqa: BLE001  (a side that cannot run is reported)
            rows.append(dict(row, ms=None, err=None, note=f"{type(e).__name__}: {str(e)[:160]}"))
            continue
        if not err <= 5e-2:
            rows.append(dict(row, ms=None, err=err, note="over the bf16 tolerance 5e-2: not timed"))
            continue
        rows.append(dict(row, ms=timing.median_ms(lambda: call(x, h0), cuda), err=err, note=""))
    return rows


def table(rows):
    out = ["| variant | shape | side | ms | rel err (fp64) | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        ms = "-" if r["ms"] is None else f"{r['ms']:.4f}"
        err = "-" if r["err"] is None else f"{r['err']:.2e}"
        out.append(f"| {r['variant']} | ({r['B']}, {r['T']}, {r['H']}, {r['D']}) | {r['side']} | {ms} | {err} | "
                   f"{r['note']} |")
    return "\n".join(out)


def main(argv=None):
    p = A.Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="all", help="comma-separated generated variants, or all (default)")
    p.add_argument("--shape", action="append", default=[],
                   help="B,T,H,D (repeatable; default " + " ".join(",".join(map(str, s)) for s in SHAPES) + ")")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: Triton's interpreter (tiny shapes; the times mean nothing)")
    p.add_argument("--out", default="", help="folder for recurrent.json and recurrent.md (default: print only)")
    a = p.parse_args(argv)
    try:
        variants = A.variants(a.variant)
        shapes = [A.shape(s) for s in a.shape] or SHAPES
        device = A.device(a.device)
    except ValueError as e:
        return A.fail(PROG, e)
    from chunkproof.bench import fla
    meta = A.run_meta(device, fla=fla.version())
    rows = []
    for v in variants:
        for s in shapes:
            new = measure(v, s, device)
            rows += new
            print(table(new), flush=True)
            A.write_rows(a.out, "recurrent", meta, rows, table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
