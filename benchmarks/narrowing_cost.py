"""What narrowing Gated DeltaNet's reverse scan from tf32_mixed would cost: the precision
planner's own measure (chunkproof.fuzz.precision_measure, the interpreter with the tensor
cores' rounding emulated) at its shapes and at STORE_SHAPES on the benchmark's inputs,
for the family at tf32 with some of its products mixed, each error over the family at
tf32_mixed's (the rest of the planned choice as recorded).  docs/measurements.md, "The
reverse scan's products one by one", quotes it.

    python benchmarks/narrowing_cost.py [--mixed "dS_prev#1,hr0#1,hr0#2;dS_prev#1,dS_prev#2;dS_prev#1"]
"""
import argparse
import os

os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported: the planner's measure runs kernels on the CPU
from chunkproof.codegen import gen, precision  # noqa: E402
from chunkproof.codegen.plan import load_variant  # noqa: E402
from chunkproof.codegen.variants import BY_NAME  # noqa: E402
from chunkproof.fuzz.precision_measure import Measure  # noqa: E402

VARIANT = "gated_delta_rule"


def main():
    p = argparse.ArgumentParser(prog="narrowing_cost.py", description=__doc__.split("\n")[0])
    p.add_argument("--mixed", default="dS_prev#1,hr0#1,hr0#2;dS_prev#1,dS_prev#2;dS_prev#1",
                   help="';'-separated sets of mixed products, each ','-separated")
    a = p.parse_args()
    v = BY_NAME[VARIANT]
    plan = load_variant(v)
    rec = precision.read_record(gen.OUT_DIR, v.name)
    with open(os.path.join(gen.OUT_DIR, "_runtime.py")) as f:
        runtime = f.read()
    base = dict(rec["choice"], mixed_lines=[], reverse_dots="tf32_mixed")
    short = Measure(v, runtime, precision.SHAPES, precision.SEED)
    long = Measure(v, runtime, precision.STORE_SHAPES, precision.SEED, inputs=precision.STORE_INPUTS)

    def ratios(choice):
        c = precision.Choice.from_dict(choice)
        src = gen.render_variant(precision.apply(v, c), plan=plan, check=False)
        return dict(short.ratios(precision._describe(c), src), **long.ratios(precision._describe(c), src))
    wide = ratios(base)
    for text in a.mixed.split(";"):
        mixed = [n.strip() for n in text.split(",") if n.strip()]
        r = ratios(dict(base, reverse_dots="tf32", mixed_lines=mixed))
        grown = sorted(((r[k] / wide[k], k) for k in wide if wide[k] > 0), reverse=True)[:4]
        print(f"reverse_dots=tf32, mixed {', '.join(mixed)}: worst ratio {max(r.values()):.3f}; grew most: "
              + ", ".join(f"{k} {g:.3f}x" for g, k in grown), flush=True)


if __name__ == "__main__":
    main()
