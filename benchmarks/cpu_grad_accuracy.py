"""The generated backward's bf16 gradient errors on the CPU (Triton's interpreter), for
TILING settings side by side: a device-free look at rounding before a GPU run.

The interpreter rounds a product's operands to bf16 where the kernel casts them; tf32
products are rounded as the tensor cores round them (--tf32, benchmarks/interp_rounding.py;
"exact" leaves them in full fp32, as the plain interpreter does).  --inputs bench draws
the inputs, initial state and cotangents as benchmarks/vs_fla.py does on the H200
(so that a row here can be set beside that table's accuracy columns); --inputs fuzz
draws them as the fuzz campaign does.  Gradients come from the public function under
autograd (kept forward tiles, as in training); errors against autograd of the fp64
recurrence, as the benchmark measures them (bench: plain relative RMS) or as the fuzz
campaign does (fuzz: chunkproof.fuzz.reference.grad_errors, a gate gradient's floor).
--precise LINES adds a row for the variant printed again with those precise lines
(Variant.precise_lines, comma-separated; "" none) and the rest of its planned choice:
under the emulation a tf32x3 product is exact fp32, so it shows which lines' rounding a
gradient's error comes from.  What it found: benchmarks/results/cpu_grad_accuracy.md,
docs/measurements.md.

    TRITON_INTERPRET=1 python benchmarks/cpu_grad_accuracy.py --variant gla --set "" --set grad_dots=tf32_mixed
    TRITON_INTERPRET=1 python benchmarks/cpu_grad_accuracy.py --variant rwkv6 --inputs bench --shape 1,256,2,128,128 \
        --bench-t 256 --set "" --precise "" --precise vr3 --precise S,vr3
"""

import importlib
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interp_rounding import MODES, emulate  # noqa: E402
from chunkproof.bench import args as A, calls, inputs, metrics, tiling  # noqa: E402

PROG = "cpu_grad_accuracy.py"


def bench_case(variant, B, T, H, K, V, seed, full_t):
    """vs_fla.py's inputs, drawn at T = full_t and cut to the first T steps as its
    accuracy slice is (the same numbers, for the same B, H, D and seed)."""
    if K != V:
        raise ValueError("--inputs bench: the benchmark's inputs have K = V")
    full_t = max(full_t, T)
    x = inputs.bench_inputs(variant, B, full_t, H, K, torch.bfloat16, torch.float32, "cpu", seed=seed)
    h0, do, dht = inputs.cotangents(B, full_t, H, K, V, torch.bfloat16, "cpu", seed=seed + 1)
    return inputs.first_steps(x, T), h0, do[:, :T].contiguous(), dht


def parse(argv):
    ap = A.Parser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="K=V[,K=V]",
                    help="one row per --set: TILING overrides ('' for the defaults)")
    ap.add_argument("--precise", action="append", default=[], metavar="LINE[,LINE]",
                    help="one row per --precise: the variant printed with these precise lines ('' none)")
    ap.add_argument("--shape", default="1,192,2,64,64", help="B,T,H,K,V")
    ap.add_argument("--seed", type=int, default=None, help="default: 5 (fuzz), 0 (bench)")
    ap.add_argument("--inputs", choices=("fuzz", "bench"), default="fuzz")
    ap.add_argument("--bench-t", type=int, default=4096,
                    help="--inputs bench: the T they are drawn at (the benchmark's), before the cut to the shape's T")
    ap.add_argument("--tf32", choices=MODES, default="trunc",
                    help="how tf32 products round (default trunc: what reproduces the H200's errors)")
    a = ap.parse_args(argv)
    A.variant(a.variant)
    a.shape = A.shape(a.shape, "B,T,H,K,V")
    a.rows = [(text, tiling.parse_overrides(text)) for text in a.set or ([] if a.precise else [""])]
    a.precise = [tuple(n.strip() for n in text.split(",") if n.strip()) for text in a.precise]
    mod = calls.ours(a.variant)[0]
    for _, sets in a.rows:       # an unknown key is refused before anything runs
        with tiling.applied(mod, sets):
            pass
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("run with TRITON_INTERPRET=1 (this is the CPU's emulation)")
    return a


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
        B, T, H, K, V = a.shape
        seed = a.seed if a.seed is not None else (5 if a.inputs == "fuzz" else 0)
        if a.inputs == "fuzz":
            x, h0, do, dht = inputs.fuzz_case(a.variant, B, T, H, K, V, seed)
        else:
            x, h0, do, dht = bench_case(a.variant, B, T, H, K, V, seed, a.bench_t)
    except ValueError as e:
        return A.fail(PROG, e)
    mod, func = calls.ours(a.variant)
    rows = [(text, func, mod, sets) for text, sets in a.rows]
    folder = tempfile.mkdtemp(prefix="precise_lines_")
    try:
        for lines in a.precise:
            m = printed_with(a.variant, lines, folder)
            rows.append((f"precise lines {','.join(lines) or '(none)'}", getattr(m, func.__name__), m, {}))
    except Exception as e:  # noqa: BLE001  (a line no gradient kernel computes: the generator's CodegenError)
        shutil.rmtree(folder, ignore_errors=True)
        return A.fail(PROG, ValueError(str(e)))
    scale = K ** -0.5
    _, want = metrics.reference_backward(a.variant, x, h0, do, dht, scale)
    ref = metrics.reference_names(x)
    undo = emulate(a.tf32)
    try:
        for text, fn, m, sets in rows:
            with tiling.applied(m, sets):
                _, got = calls.fwd_bwd(fn, x, h0, do, dht, scale)
            if a.inputs == "bench":    # the benchmark's measure: plain relative RMS
                errs = {n: metrics.rel_rms(g, want[n]) for n, g in got.items()}
            else:                      # the fuzz campaign's (a gate gradient's floor)
                errs = metrics.grad_errors(got, metrics.reference_names(want), ref)
            print(f"{a.variant} {text or 'defaults'}: " + " ".join(f"d{n} {e:.2e}" for n, e in errs.items()),
                  flush=True)
    finally:
        undo()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def printed_with(variant, lines, folder):
    """The variant's module printed again with precise lines ``lines`` and the rest of its
    planned choice, imported from a package in ``folder`` beside a copy of _runtime.py."""
    from chunkproof.codegen import gen, precision
    from chunkproof.codegen.plan import load_variant
    from chunkproof.codegen.variants import VARIANTS
    v = next(x for x in VARIANTS if x.name == variant)
    choice = precision.Choice.from_dict(precision.read_record(gen.OUT_DIR, variant)["choice"])
    choice = precision.Choice(choice.dots, tuple(sorted(lines)), choice.mixed, choice.narrow)
    src = gen.render_variant(precision.apply(v, choice), plan=load_variant(v, check=False), check=False)
    pkg = os.path.join(folder, "cpu_grad_accuracy_kernels")
    if not os.path.isdir(pkg):
        os.makedirs(pkg)
        shutil.copy(os.path.join(gen.OUT_DIR, "_runtime.py"), pkg)
        open(os.path.join(pkg, "__init__.py"), "w").close()
        sys.path.insert(0, folder)
    name = f"{variant}_{abs(hash(lines))}"
    with open(os.path.join(pkg, f"{name}.py"), "w") as f:
        f.write(src)
    return importlib.import_module(f"cpu_grad_accuracy_kernels.{name}")


if __name__ == "__main__":
    sys.exit(main())
