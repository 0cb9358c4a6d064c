# Run from the repository root with TRITON_INTERPRET=1 (FLA installed): python benchmarks/results/2026-12-07/s55/gdn_stores.py
"""Gated DeltaNet's errors over FLA's (emulated H200 rounding, bench inputs at the
planner's STORE_SHAPES, 3 draws pooled) for the record's choice and cheaper stores."""
import os, sys, time
from chunkproof.codegen import gen, precision
from chunkproof.codegen.variants import VARIANTS
from chunkproof.fuzz.precision_measure import Measure
name = sys.argv[1] if len(sys.argv) > 1 else "gated_delta_rule"
v = next(x for x in VARIANTS if x.name == name)
env = gen._env()
runtime = open(os.path.join(gen.OUT_DIR, "_runtime.py")).read()     # what gen rendered (gen --check)
plan = gen.load_variant(v)
rec = precision.read_record(gen.OUT_DIR, name)
base = dict(rec["choice"])
m = precision._Pooled([Measure(v, runtime, precision.STORE_SHAPES, precision.SEED + i, inputs=precision.STORE_INPUTS)
                       for i in range(precision.REF_DRAWS)])
t0 = time.time()
ref, what = m.reference()
print("reference", what, f"{time.time()-t0:.0f} s", flush=True)
trials = [("record", {}), ("dh_store input", {"dh_store": "input"}),
          ("dh input + hr0 narrowed", {"dh_store": "input", "narrowed": base["narrowed"] + ["hr0"]}),
          ("dh input + all passed narrowed", {"dh_store": "input", "narrowed": rec["passed_tiles"]}),
          ("gradv/grad dots input", {"gradv_dots": "input", "grad_dots": "input"}),
          ("dh input, gradv/grad input", {"dh_store": "input", "gradv_dots": "input", "grad_dots": "input"})]
for label, ch in trials:
    c = precision.Choice.from_dict(dict(base, **ch))
    src = gen.render_variant(precision.apply(v, c), plan=plan, env=env, check=False)
    t = time.time()
    r = m.ratios(label, src)
    worst = {}
    for k, x in r.items():
        worst[k] = x / ref[k] if ref.get(k) else float("nan")
    print(f"\n## {label} ({time.time()-t:.0f} s): ours / FLA per tensor")
    for shp in sorted({k.split(' ')[0] for k in r}):
        print(shp, "  ".join(f"{k.split(' ')[1]} {worst[k]:.2f}" for k in sorted(r) if k.startswith(shp)), flush=True)
