"""The generated backward's bf16 gradient errors on the CPU (Triton's interpreter), for
TILING settings side by side: a device-free look at rounding before a GPU run.

The interpreter rounds a product's operands to bf16 where the kernel casts them; tf32
products are rounded as the tensor cores round them (--tf32, benchmarks/interp_rounding.py;
"exact" leaves them in full fp32, as the plain interpreter does).  --inputs bench draws
the inputs, initial state and cotangents as benchmarks/fwdbwd_vs_fla.py does on the H200
(so that a row here can be set beside that table's accuracy columns); --inputs fuzz
draws them as the fuzz campaign does.  Gradients come from the public function under
autograd (kept forward tiles, as in training); errors against autograd of the fp64
recurrence, as the benchmark measures them (bench: plain relative RMS) or as the fuzz
campaign does (fuzz: chunkproof.fuzz.reference.grad_errors, a gate gradient's floor).
Measured: GLA's defaults at the benchmark's accuracy slice (--inputs bench --shape
4,256,16,128,128 --tf32 trunc) give the H200's dq, dk, dv and d initial_state errors to
three digits (1.83e-3, 2.02e-3, 2.25e-3, 4.2e-4), "rna" does not (2.07e-4 for the last).

    TRITON_INTERPRET=1 python benchmarks/cpu_grad_accuracy.py --variant gla --set "" --set grad_dots=tf32_mixed
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from interp_rounding import MODES, emulate  # noqa: E402
from chunkproof.codegen.variants import BY_NAME  # noqa: E402
from chunkproof.fuzz.cases import VARIANTS, make_inputs, module  # noqa: E402


def parse_set(text):
    """'k=v,k2=v2' -> TILING overrides (fwd_vs_fla.tiling_value; None too); '' is the defaults."""
    from fwd_vs_fla import tiling_value
    out = {}
    for kv in filter(None, text.split(",")):
        key, _, val = kv.partition("=")
        out[key] = None if val == "None" else tiling_value(val)
    return out


def fuzz_case(variant, B, T, H, K, V, seed):
    args, _, state = make_inputs(variant, B, T, H, K, V, seed=seed, h0=True, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(seed + 1)
    do = torch.randn(B, T, H, V, generator=gen).to(torch.bfloat16)
    dht = torch.randn(B, H, K, V, generator=gen)
    return list(args), state, do, dht


def bench_case(variant, B, T, H, K, V, seed, full_t):
    """fwdbwd_vs_fla.py's inputs, drawn at T = full_t and cut to the first T steps as its
    accuracy slice is (the same numbers, for the same B, H, D and seed)."""
    from fwd_vs_fla import make_inputs as bench_inputs
    if K != V:
        raise SystemExit("--inputs bench: the benchmark's inputs have K = V")
    full_t = max(full_t, T)
    inp = bench_inputs(variant, B, full_t, H, K, torch.bfloat16, torch.float32, "cpu", seed=seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    h0 = torch.randn(B, H, K, V, generator=gen)
    do = torch.randn(B, full_t, H, V, generator=gen).to(torch.bfloat16)
    dht = torch.randn(B, H, K, V, generator=gen)
    return [x[:, :T].contiguous() for x in inp.values()], h0, do[:, :T].contiguous(), dht


def main(argv=None):
    from fwd_vs_fla import rel_rms, tiling
    from fwdbwd_vs_fla import fwd_bwd
    from chunkproof.fuzz.reference import grad_errors, reference_grads
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--set", action="append", default=[], metavar="K=V[,K=V]",
                    help="one row per --set: TILING overrides ('' for the defaults)")
    ap.add_argument("--shape", default="1,192,2,64,64", help="B,T,H,K,V")
    ap.add_argument("--seed", type=int, default=None, help="default: 5 (fuzz), 0 (bench)")
    ap.add_argument("--inputs", choices=("fuzz", "bench"), default="fuzz")
    ap.add_argument("--bench-t", type=int, default=4096,
                    help="--inputs bench: the T they are drawn at (the benchmark's), before the cut to the shape's T")
    ap.add_argument("--tf32", choices=MODES, default="trunc",
                    help="how tf32 products round (default trunc: what reproduces the H200's errors)")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("run with TRITON_INTERPRET=1 (this is the CPU's emulation)")
    B, T, H, K, V = (int(x) for x in args.shape.split(","))
    m = module(args.variant)
    known = set(m.TILING)
    rows = [parse_set(text) for text in args.set or [""]]
    for sets in rows:
        bad = set(sets) - known
        if bad:
            raise SystemExit(f"--set: {sorted(bad)} are not TILING keys of {args.variant}")
    seed = args.seed if args.seed is not None else (5 if args.inputs == "fuzz" else 0)
    if args.inputs == "fuzz":
        case = fuzz_case(args.variant, B, T, H, K, V, seed)
    else:
        case = bench_case(args.variant, B, T, H, K, V, seed, args.bench_t)
    ins, h0, do, dht = case
    names = [a[0] for a in m.ARGS]
    func = getattr(m, BY_NAME[args.variant].func)
    scale = K ** -0.5
    ref = {("g" if n == "gk" else n): x for n, x in zip(names, ins)}
    want = reference_grads(args.variant, ref, do, dht, scale=scale, initial_state=h0)
    undo = emulate(args.tf32)
    try:
        for text, sets in zip(args.set or [""], rows):
            with tiling(m, sets):
                _, got = fwd_bwd(func, dict(zip(names, ins)), h0, do, dht, scale)
            if args.inputs == "bench":    # the benchmark's measure: plain relative RMS
                errs = {n: rel_rms(g, want[{"gk": "g"}.get(n, n)]) for n, g in got.items()}
            else:                         # the fuzz campaign's (a gate gradient's floor)
                errs = grad_errors(got, want, ref)
            print(f"{args.variant} {text or 'defaults'}: " + " ".join(f"d{n} {e:.2e}" for n, e in errs.items()),
                  flush=True)
    finally:
        undo()


if __name__ == "__main__":
    main()
