# Run from the repository root with TRITON_INTERPRET=1 (FLA installed): python benchmarks/results/2026-12-07/s55/gdn_draws.py 8
"""Gated DeltaNet's dg and dbeta over FLA's per draw (emulated rounding, bench inputs at
(1, 256, 2, 128, 128)), for the record's choice and the gradient products in bf16: how
much of the planner's verdict is the draw."""
import math, os, sys, time
from chunkproof.codegen import gen, precision
from chunkproof.codegen.variants import VARIANTS
from chunkproof.fuzz.precision_measure import Measure
name = "gated_delta_rule"
v = next(x for x in VARIANTS if x.name == name)
env = gen._env()
runtime = open(os.path.join(gen.OUT_DIR, "_runtime.py")).read()     # what gen rendered (gen --check)
plan = gen.load_variant(v)
rec = precision.read_record(gen.OUT_DIR, name)
base = dict(rec["choice"])
srcs = {}
for label, ch in [("record", {}), ("bf16 gradient products", {"gradv_dots": "input", "grad_dots": "input"})]:
    c = precision.Choice.from_dict(dict(base, **ch))
    srcs[label] = gen.render_variant(precision.apply(v, c), plan=plan, env=env, check=False)
shape = (1, 256, 2, 128, 128)
acc = {k: [] for k in srcs}
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    m = Measure(v, runtime, (shape,), precision.SEED + i, inputs=precision.STORE_INPUTS)
    ref, _ = m.reference()
    line = [f"draw {i}:"]
    for label, s in srcs.items():
        r = m.ratios(label, s)
        q = {t: r[f"{','.join(map(str, shape))} {t}"] / ref[f"{','.join(map(str, shape))} {t}"] for t in ("dg", "dbeta", "dk")}
        acc[label].append(q)
        line.append(f"{label}: " + " ".join(f"{t} {x:.2f}" for t, x in q.items()))
    print("  ".join(line), flush=True)
for label, qs in acc.items():
    for t in ("dg", "dbeta", "dk"):
        xs = [q[t] for q in qs]
        print(f"{label} {t}: geomean {math.exp(sum(map(math.log, xs)) / len(xs)):.2f}, min {min(xs):.2f}, max {max(xs):.2f}")
