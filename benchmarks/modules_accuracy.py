"""Two generations of the kernels side by side: each tensor's bf16 error against the fp64
recurrence, on the benchmark's inputs, under the interpreter with the H200's rounding
(chunkproof.fuzz.rounding, tf32 truncated), for module folders A and B (copies of
generated_kernels/, e.g. before and after a printing change re-planned by `chunkproof
gen`).  Prints one line per variant: each tensor's error in A, in B, and A / B.

    TRITON_INTERPRET=1 python benchmarks/modules_accuracy.py --a /tmp/gk_after --b /tmp/gk_before \\
        --variants gated_delta_rule,delta_rule --shape 1,256,2,64

Session 47 (docs/measurements.md, "q as read, its scale a gate factor") ran it on the
modules re-planned after results/2026-12-06/s47/q_scale_as_factor.patch (A) against
46e537b's (B).
"""
import argparse
import importlib
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from chunkproof.bench import metrics  # noqa: E402
from chunkproof.bench.inputs import bench_case, first_steps  # noqa: E402
from chunkproof.fuzz.rounding import emulate  # noqa: E402

PROG = "modules_accuracy.py"


def _fail(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def _package(folder, name, root):
    """``folder`` copied as package ``name`` under ``root`` (both folders hold modules of
    the same names: each needs its own package)."""
    shutil.copytree(folder, os.path.join(root, name))
    return name


def errors(pkg, variant, x, h0, do, dht, want):
    m = importlib.import_module(f"{pkg}.{variant}")
    fn = next(getattr(m, n) for n in m.__all__ if n.startswith("chunk_")) if hasattr(m, "__all__") else \
        next(getattr(m, n) for n in dir(m) if n.startswith("chunk_") and callable(getattr(m, n)))
    leaves = {n: t.clone().requires_grad_(t.is_floating_point()) for n, t in x.items()}
    hh = h0.float().clone().requires_grad_()
    undo = emulate("trunc")
    try:
        o, ht = fn(**leaves, initial_state=hh, output_final_state=True)
        ((o.float() * do.float()).sum() + (ht * dht.float()).sum()).backward()
    finally:
        undo()
    got = {"o": o.float(), **{n: t.grad for n, t in leaves.items() if t.grad is not None}, "initial_state": hh.grad}
    return metrics.errors(got, want)


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="a copy of generated_kernels/")
    ap.add_argument("--b", required=True, help="another copy of generated_kernels/")
    ap.add_argument("--variants", default="gated_delta_rule")
    ap.add_argument("--shape", default="1,256,2,64", help="B,T,H,D (the inputs are the benchmark's at T = 2048, "
                                                          "their first T steps)")
    args = ap.parse_args(argv)
    try:
        B, T, H, D = (int(s) for s in args.shape.split(","))
    except ValueError:
        _fail(f"--shape {args.shape!r} is not B,T,H,D")
    variants = args.variants.split(",")
    for folder in (args.a, args.b):
        if not os.path.isfile(os.path.join(folder, "_runtime.py")):
            _fail(f"{folder} holds no _runtime.py: not a copy of generated_kernels/")
        for v in variants:
            if not os.path.isfile(os.path.join(folder, f"{v}.py")):
                _fail(f"{folder} has no module {v}.py")
    root = tempfile.mkdtemp(prefix="modules_accuracy_")
    sys.path.insert(0, root)
    pkgs = [_package(args.a, "side_a", root), _package(args.b, "side_b", root)]
    for v in variants:
        x, h0, do, dht = bench_case(v, B, 2048, H, D, D, 0)
        x, do = first_steps(x, T), do[:, :T].contiguous()
        o_ref, g_ref = metrics.reference_backward(v, x, h0.float(), do, dht)
        want = {"o": o_ref, **g_ref}
        ea, eb = (errors(p, v, x, h0, do, dht, want) for p in pkgs)
        print(v, " ".join(f"{n} {ea[n]:.2e} / {eb[n]:.2e} = {ea[n] / eb[n]:.2f}" for n in ea), flush=True)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
