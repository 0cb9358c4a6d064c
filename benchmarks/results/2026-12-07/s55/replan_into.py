# With autotune_stages.patch applied (a worktree, installed in its own venv), from the repository root:
#   mkdir OUT && cp generated_kernels/*.precision.json OUT/ && TRITON_INTERPRET=1 python benchmarks/results/2026-12-07/s55/replan_into.py OUT VARIANT...
"""Re-plan the named variants into OUT (pre-filled with the bundled records), then print."""
import os, sys, time
from chunkproof.codegen import gen
from chunkproof.codegen.variants import VARIANTS
from chunkproof.fuzz.precision_measure import Measure
out, names = sys.argv[1], sys.argv[2:]
vs = [v for v in VARIANTS if v.name in names]
t0 = time.time()
files = gen.render_all(vs, progress=lambda m: print(f"[{time.time() - t0:7.1f} s] {m}", flush=True), out_dir=out, measure=Measure)
for name, text in files.items():
    if name != "_runtime.py":
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
print("done", time.time() - t0, flush=True)
