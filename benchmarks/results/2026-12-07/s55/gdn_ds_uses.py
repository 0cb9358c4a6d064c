# Run from the repository root with TRITON_INTERPRET=1 (FLA installed): python benchmarks/results/2026-12-07/s55/gdn_ds_uses.py
"""Which use of delta S in Gated DeltaNet's V kernel makes dg sensitive to its bf16
rounding: the record's module with b_ds rounded to bf16 in one use at a time."""
import os, sys, time
from chunkproof.codegen import gen, precision
from chunkproof.codegen.variants import VARIANTS
from chunkproof.fuzz.precision_measure import Measure
name = "gated_delta_rule"
v = next(x for x in VARIANTS if x.name == name)
runtime = open(os.path.join(gen.OUT_DIR, "_runtime.py")).read()     # what gen rendered (gen --check)
src = gen.render_recorded(name)
m = precision._Pooled([Measure(v, runtime, precision.STORE_SHAPES, precision.SEED + i, inputs=precision.STORE_INPUTS)
                       for i in range(precision.REF_DRAWS)])
ref, what = m.reference()
a = src.index("def _dgradv_kernel"); b = src.index("@triton.jit", a)
kern = src[a:b]
R = "b_ds.to(tl.bfloat16).to(tl.float32)"
uses = {
  "vr4 (dk's state part)": ("b_vr4 = tl.dot(b_Vnew.to(DT2).to(CT2), b_ds.to(DT2)", "b_vr4 = tl.dot(b_Vnew.to(DT2).to(CT2), " + R + ".to(DT2)"),
  "vr6 (E)": ("b_vr6 = tl.sum((tl.dot(b_Vnew.to(DT2).to(CT2), b_ds.to(DT2)", "b_vr6 = tl.sum((tl.dot(b_Vnew.to(DT2).to(CT2), " + R + ".to(DT2)"),
  "vr7 (<S, dS>)": ("b_vr7 = tl.sum(tl.sum(b_s * b_ds,", "b_vr7 = tl.sum(tl.sum(b_s * " + R + ","),
}
def show(label, s):
    t = time.time(); r = m.ratios(label, s)
    print(f"## {label} ({time.time()-t:.0f} s)")
    for shp in sorted({k.split(' ')[0] for k in r}):
        print(shp, "  ".join(f"{k.split(' ')[1]} {r[k]/ref[k]:.2f}" for k in sorted(r) if k.startswith(shp)), flush=True)
show("record", src)
for label, (old, new) in uses.items():
    assert kern.count(old) == 1, label
    show("ds in bf16 in " + label, src[:a] + kern.replace(old, new) + src[b:])
allk = kern
for old, new in uses.values():
    allk = allk.replace(old, new)
show("ds in bf16 in all three", src[:a] + allk + src[b:])
