# Session 56: one reference-side draw of the planner's measure (Gated DeltaNet, STORE_SHAPES,
# benchmark inputs), timed three times with and without the interpreter's overflow checks.
#   python benchmarks/results/2026-12-07/s56/time_checks.py checks|default
import time, os, sys, contextlib
os.environ["TRITON_INTERPRET"] = "1"
import chunkproof.fuzz.precision_measure as pm
if sys.argv[1] == "checks":     # the measure as before session 56: the interpreter's checks kept
    pm._no_overflow_checks = contextlib.nullcontext
from chunkproof.codegen import gen, precision
from chunkproof.codegen.variants import BY_NAME
v = BY_NAME["gated_delta_rule"]
runtime = open("generated_kernels/_runtime.py").read()
src = gen.render_variant(precision.apply(v, precision.Choice.from_dict(precision.read_record(gen.OUT_DIR, v.name)["choice"])))
ml = pm.Measure(v, runtime, precision.STORE_SHAPES, precision.SEED, inputs="bench"); ml.ratios("x", src)
ts = []
for i in range(3):
    t = time.time(); r = ml.ratios(f"y{i}", src + "\n" * (i + 1)); ts.append(time.time() - t)
print(sys.argv[1], "one bench draw s:", " ".join(f"{t:.2f}" for t in ts), sorted(r.items())[1])
