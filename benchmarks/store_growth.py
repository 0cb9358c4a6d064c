"""What storing more of a variant's passed tiles in the inputs' dtype costs in accuracy,
by the precision planner's own measure (chunkproof.fuzz.precision_measure: the kernel
under Triton's interpreter with the tensor cores' rounding emulated, against autograd of
the fp64 recurrence, each error over the plain chunked bf16 baseline's) on the
benchmark's inputs at the shapes given: each tensor's ratio with the tiles narrowed over
its ratio as recorded, one line per tile set.  The planner holds a narrowed store to
STORE_SLACK (codegen/precision.py); this shows the growth at other shapes, e.g. more
heads than its single-head STORE_SHAPES.

    TRITON_INTERPRET=1 python benchmarks/store_growth.py --variant gated_delta_rule \\
        --narrow "hr0;vr1;vr4" --shapes "1,512,1,64,64;4,512,4,64,64"
"""
import os
import sys

from chunkproof.bench import args as A, printed

PROG = "store_growth.py"


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--narrow", required=True, help="';'-separated sets of passed tiles, each ','-separated")
    p.add_argument("--shapes", default="1,256,2,128,128;2,256,4,128,128", help="';'-separated B,T,H,K,V (K = V)")
    a = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("run with TRITON_INTERPRET=1 (the planner's measure runs the kernels on the CPU)")
    a.variant = A.variant(a.variant)
    a.narrow = [tuple(t.strip() for t in e.split(",") if t.strip()) for e in a.narrow.split(";") if e.strip()]
    if not a.narrow:
        raise ValueError("--narrow names no passed tile")
    for tiles in a.narrow:
        printed.check_tiles(a.variant, tiles)
    a.shapes = [tuple(int(x) for x in s.split(",")) for s in a.shapes.split(";") if s.strip()]
    bad = [s for s in a.shapes if len(s) != 5 or s[3] != s[4]]
    if bad:
        raise ValueError(f"--shapes: {bad[0]} is not B,T,H,K,V with K = V (the benchmark's inputs)")
    return a


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        return A.fail(PROG, e)
    from chunkproof.codegen import gen, precision
    from chunkproof.codegen.plan import load_variant
    from chunkproof.codegen.variants import BY_NAME
    from chunkproof.fuzz.precision_measure import Measure
    v = BY_NAME[a.variant]
    plan = load_variant(v)
    rec = precision.read_record(gen.OUT_DIR, v.name)
    with open(os.path.join(gen.OUT_DIR, "_runtime.py"), encoding="utf-8") as f:
        runtime = f.read()
    m = Measure(v, runtime, a.shapes, precision.SEED, inputs="bench")
    recorded = precision.Choice.from_dict(rec["choice"])

    def ratios(c):
        src = gen.render_variant(precision.apply(v, c), plan=plan, check=False)
        return m.ratios(precision._describe(c), src)
    base = ratios(recorded)
    print(f"{v.name}, as recorded (ratio to the chunked baseline): "
          + ", ".join(f"{k} {x:.3f}" for k, x in base.items()), flush=True)
    for tiles in a.narrow:
        c = recorded
        for t in tiles:
            c = c.with_narrow(t)
        r = ratios(c)
        print(f"{', '.join(tiles)} narrowed, over as recorded: "
              + ", ".join(f"{k} {r[k] / base[k]:.3f}" for k in base if base[k] > 0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
