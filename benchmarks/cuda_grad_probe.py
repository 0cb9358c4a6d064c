"""One fuzz example's gradients on CUDA and under the CPU interpreter, side by side
(norms and the rel. difference): for a CUDA-only wrong gradient the campaign found.

    python benchmarks/cuda_grad_probe.py delta_rule "B=2 T=2 H=1 K=73 V=16 beta=zero seed=7134646" [more...]
Run on the GPU machine; each argument after the variant is one example (B T H K V beta seed)."""
import sys

import torch

from chunkproof.fuzz.example import Example
from chunkproof.fuzz.properties import cotangents, run_grad


def example(variant, spec, device):
    kv = dict(p.split("=") for p in spec.split())
    return Example(variant, "matches_fp64", device, kv.get("dtype", "bf16"), int(kv["B"]), int(kv["T"]),
                   int(kv["H"]), int(kv["K"]), int(kv["V"]), h0=kv.get("h0") == "True", fs=False,
                   gates="typical", beta=kv.get("beta", "random"), seed=int(kv["seed"]), split=0)


def grads(ex):
    args, _, st = ex.inputs()
    do, dht = cotangents(ex)
    o, _, g = run_grad(ex, args, st, do, dht)
    torch.cuda.synchronize() if ex.device == "cuda" else None
    return dict(o=o.detach().double().cpu(), **{n: x.detach().double().cpu() for n, x in g.items()})


def main(variant, *specs):
    for spec in specs:
        gpu = grads(example(variant, spec, "cuda"))
        line = ", ".join(f"{n} |{x.norm():.3g}|" for n, x in gpu.items())
        print(f"{variant} {spec}: cuda {line}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:])
