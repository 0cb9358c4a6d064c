"""The generated kernels' fp32 values on fixed inputs, under Triton's interpreter:
each public function's output, final state and gradients (its autograd) against the
fp64 recurrence, as rel. RMS errors, plus a float64 checksum of every tensor.  Run it
before and after a change that must not alter the kernels' math and diff the JSON:

    python benchmarks/kernel_values.py -o before.json   # on the old commit
    python benchmarks/kernel_values.py -o after.json && diff before.json after.json
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import torch  # noqa: E402

from chunkproof.bench.calls import fwd_bwd_state  # noqa: E402
from chunkproof.bench.inputs import fuzz_case  # noqa: E402
from chunkproof.bench.metrics import reference_names  # noqa: E402
from chunkproof.fuzz.cases import VARIANTS, kernel  # noqa: E402
from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms  # noqa: E402

SHAPE = dict(B=1, T=45, H=2, K=16, V=24)   # a partial last chunk, K != V


def values(variant, seed=3):
    inputs, state, do, dht = fuzz_case(variant, **SHAPE, seed=seed, dtype=torch.float32)
    ref = reference_names(inputs)
    o, ht, grads = fwd_bwd_state(kernel(variant), inputs, state, do, dht)
    ro, rh = recurrence(variant, initial_state=state, **ref)
    errs = {"o": rel_rms(o, ro), "final_state": rel_rms(ht, rh)}
    errs.update(("d" + n, e) for n, e in grad_errors(
        grads, reference_grads(variant, ref, do, dht, initial_state=state), ref).items())
    sums = {n: float(t.detach().double().sum())
            for n, t in dict(o=o, final_state=ht, **{"d" + k: g for k, g in grads.items()}).items()}
    return {"rel_rms_vs_fp64": {n: f"{e:.6e}" for n, e in errs.items()},
            "checksum": {n: f"{s:.10e}" for n, s in sums.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", help="write the JSON here (default: stdout)")
    ap.add_argument("--variant", action="append", choices=VARIANTS, help="default: all")
    a = ap.parse_args(argv)
    res = {"shape": SHAPE, "dtype": "fp32", "torch": torch.__version__}
    for v in a.variant or VARIANTS:
        sys.stderr.write(f"kernel_values: {v}\n")
        res[v] = values(v)
    text = json.dumps(res, indent=1, sort_keys=True) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
