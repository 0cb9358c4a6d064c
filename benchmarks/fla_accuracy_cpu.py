"""Our kernels' bf16 errors beside FLA's on the CPU: both sides under Triton's interpreter
with the H200's rounding (chunkproof.fuzz.rounding, tf32 truncated), FLA's kernels made
runnable there by chunkproof.bench.fla_interp, on the benchmark's inputs (their first T
steps), forward + backward against autograd of the fp64 recurrence, measured as
`chunkproof bench`'s gate measures them.  Prints one markdown row per (variant, tensor):
ours, FLA's, ours / FLA's.

    python benchmarks/fla_accuracy_cpu.py --variants gla,retention --shape 1,256,2,64 --out /tmp/acc.md

Needs FLA's kernels installed (pip install fla-core, in the test extra; Triton, no GPU
needed here).  Times mean nothing (interpreter): FLA's side takes 10-60 s per variant at
(1, 256, 2, 64).
"""
import argparse
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported, by us or by FLA
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from chunkproof.bench import fla, gate, inputs, sides  # noqa: E402
from chunkproof.fuzz.rounding import emulate  # noqa: E402

PROG = "fla_accuracy_cpu.py"


def _fail(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def side_errors(side, variant, x, h0, do, dht, scale, ref):
    """{tensor: rel error} of one side's forward + backward, under the H200's rounding."""
    undo = emulate("trunc")
    try:
        outs, grads = side.split("fwd+bwd", side.step("fwd+bwd", x, h0, do, dht, scale)())
    finally:
        undo()
    return gate.judge(ref, outs, grads, gate.base_tolerance(torch.bfloat16)).errors


def compare(variant, B, T, H, D, log=print):
    """({tensor: ours}, {tensor: FLA's}) on the benchmark's inputs at T = 2048, first T steps."""
    from chunkproof.bench.fla_interp import patched

    x = inputs.bench_inputs(variant, B, 2048, H, D, torch.bfloat16, torch.float32, "cpu", 0)
    h0, do, dht = inputs.cotangents(B, 2048, H, D, D, torch.bfloat16, "cpu", seed=1)
    x, do = inputs.first_steps(x, T), do[:, :T].contiguous()
    scale = D ** -0.5
    ref = gate.Reference(variant, x, h0, do, dht, scale)
    t0 = time.time()
    ours = side_errors(sides.ours(variant), variant, x, h0, do, dht, scale, ref)
    log(f"{PROG}: {variant} ours {time.time() - t0:.0f} s")
    t0 = time.time()
    with patched():
        theirs = side_errors(sides.FLASide(variant, True), variant, x, h0, do, dht, scale, ref)
    log(f"{PROG}: {variant} FLA {time.time() - t0:.0f} s")
    return ours, theirs


def table(rows, shape):
    out = [f"Shape (B, T, H, D) = {shape}, bf16, h0 and dht given; rel errors against the fp64 recurrence "
           "(`chunkproof bench`'s gate), both under the interpreter with the H200's rounding.", "",
           "| variant | tensor | ours | FLA | ours / FLA |", "|---|---|---|---|---|"]
    for variant, ours, theirs in rows:
        for n, e in ours.items():
            f = theirs.get(n)
            cells = ("-", "-") if f is None else (f"{f:.3e}", f"{e / f:.3f}" if f else "-")
            out.append(f"| {variant} | {n} | {e:.3e} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="gla", help="comma-separated, from: " + ", ".join(fla.ENTRY))
    ap.add_argument("--shape", default="1,256,2,64", help="B,T,H,D (T at most 2048)")
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args(argv)
    try:
        B, T, H, D = (int(s) for s in args.shape.split(","))
    except ValueError:
        _fail(f"--shape {args.shape!r} is not B,T,H,D")
    if min(B, T, H, D) < 1 or T > 2048:
        _fail(f"--shape {args.shape!r}: every size must be positive and T at most 2048")
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in fla.ENTRY]
    if unknown or not variants:
        _fail(f"--variants: {', '.join(unknown) or 'none given'}; FLA has ops of: {', '.join(fla.ENTRY)}")
    if not fla.importable():
        _fail("FLA is not installed (pip install fla-core)")
    rows = []
    for v in variants:
        rows.append((v, *compare(v, B, T, H, D, log=lambda m: print(m, file=sys.stderr, flush=True))))
    text = table(rows, (B, T, H, D))
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
