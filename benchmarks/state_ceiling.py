"""Each bundled variant's final state (ht) and initial state's gradient (dh0) at the
precision planner's STORE_SHAPES on the benchmark's inputs: the error of its planned
choice over that of its most precise choice, both by the planner's own measure
(chunkproof.fuzz.precision_measure; the interpreter with the tensor cores' rounding
emulated).  The planner's target does not hold these (docs/gen.md); what it found:
docs/measurements.md, "A row gate pulled out of its product".

    python benchmarks/state_ceiling.py        (about 3 minutes on 2 cores)
"""
import os
os.environ["TRITON_INTERPRET"] = "1"
from chunkproof.codegen import gen, precision
from chunkproof.codegen.plan import load_variant
from chunkproof.codegen.variants import VARIANTS
from chunkproof.fuzz.precision_measure import Measure
runtime = open(os.path.join(gen.OUT_DIR, "_runtime.py")).read()
for v in VARIANTS:
    plan = load_variant(v, check=False)
    rec = precision.read_record(gen.OUT_DIR, v.name)
    cur = precision.Choice.from_dict(rec["choice"])
    stores = gen.planned_stores(v, plan)
    lines = gen.candidate_lines(v, plan)[0]
    top = precision.Choice.most_precise(lines, stores)
    ml = Measure(v, runtime, precision.STORE_SHAPES, precision.SEED, inputs="bench")
    out = {}
    for name, c in (("planned", cur), ("most precise", top)):
        src = gen.render_variant(precision.apply(v, c), plan=plan, check=False)
        out[name] = ml.ratios(precision._describe(c), src)
    keys = [k for k in out["planned"] if k.endswith((" dh0", " ht", " dinitial_state"))]
    print(v.name, ", ".join(f"{k}: {out['planned'][k]/out['most precise'][k]:.2f}x" for k in keys), flush=True)
