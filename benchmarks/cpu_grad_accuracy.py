"""The generated backward's bf16 gradient errors on the CPU (Triton's interpreter), for
TILING settings side by side: a quick, device-free look at rounding before a GPU run.

The interpreter rounds a product's operands to bf16 where the kernel casts them (so
`grad_dots="input"` and the bf16 halves of "tf32" are emulated), but it multiplies tf32
operands in full fp32: a tf32 setting looks better here than it will on the GPU.

    TRITON_INTERPRET=1 python benchmarks/cpu_grad_accuracy.py --variant gla --set "" --set grad_dots=tf32_mixed
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verify.fuzz.cases import VARIANTS, make_inputs, module  # noqa: E402
from verify.fuzz.reference import grad_errors, reference_grads  # noqa: E402


def parse_set(text):
    """'k=v,k2=v2' -> TILING overrides (ints, None, or strings); '' is the defaults."""
    out = {}
    for kv in filter(None, text.split(",")):
        key, _, val = kv.partition("=")
        out[key] = int(val) if val.isdigit() else (None if val == "None" else val)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--set", action="append", default=[], metavar="K=V[,K=V]",
                    help="one row per --set: TILING overrides ('' for the defaults)")
    ap.add_argument("--shape", default="1,192,2,64,64", help="B,T,H,K,V")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("run with TRITON_INTERPRET=1 (this is the CPU's emulation)")
    B, T, H, K, V = (int(x) for x in args.shape.split(","))
    m = module(args.variant)
    known = set(m.TILING)
    inputs, ref, state = make_inputs(args.variant, B, T, H, K, V, seed=args.seed, h0=True, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(args.seed + 1)
    do = torch.randn(B, T, H, V, generator=gen).to(torch.bfloat16)
    dht = torch.randn(B, H, K, V, generator=gen)
    want = reference_grads(args.variant, ref, do, dht, initial_state=state)
    base = dict(m.TILING)
    for text in args.set or [""]:
        sets = parse_set(text)
        bad = set(sets) - known
        if bad:
            raise SystemExit(f"--set: {sorted(bad)} are not TILING keys of {args.variant}")
        m.TILING.clear()
        m.TILING.update(base, **sets)
        try:
            got = m._backward(*inputs, do, dht, K ** -0.5, initial_state=state)
        finally:
            m.TILING.clear()
            m.TILING.update(base)
        errs = grad_errors(got, want, ref)
        print(f"{args.variant} {text or 'defaults'}: " + " ".join(f"d{n} {e:.2e}" for n, e in errs.items()),
              flush=True)


if __name__ == "__main__":
    main()
