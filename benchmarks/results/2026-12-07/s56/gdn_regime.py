# Session 56, CPU (TRITON_INTERPRET=1, the planner's H200 rounding emulated): Gated
# DeltaNet's errors against FLA's, each on the same draw, in the planner's regime (a
# T = 256 sequence, every step measured) and in the benchmark gate's (the first 256 steps
# of a longer sequence, T = 1024 here), for the module as planned and for bf16 gradient
# products with dh and the six passed tiles in bf16 (4.268 ms against FLA's 4.539 on the
# H100, every GPU error under FLA's: call1/).  Another variant (its module as planned
# alone): VARIANT as the second argument; a third, FAMILY=TYPE[,FAMILY=TYPE][;...], adds
# the planned choice with those families changed (narrow=TILE+TILE: those passed tiles in
# the inputs' dtype), one choice per ';'.  From the repository root:
#   TRITON_INTERPRET=1 python benchmarks/results/2026-12-07/s56/gdn_regime.py [DRAWS [VARIANT [FAMILY=TYPE,...]]]
# REGIME_SHAPES="B,T,H,K,V:STEPS;..." (STEPS 0: every step) measures other regimes than the
# two above (session 57: longer sequences at narrower heads); REGIME_TF32 the tf32 rounding
# emulated (chunkproof.fuzz.rounding.MODES; default trunc, the planner's).
import math
import os
import sys
import tempfile

from chunkproof.bench import fla
from chunkproof.bench.calls import fwd_bwd_state
from chunkproof.bench.fla_interp import patched
from chunkproof.codegen import gen, precision
from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz.chunked import case, errors, reference
from chunkproof.fuzz.precision_measure import _as_kernel, _no_overflow_checks, import_printed
from chunkproof.fuzz.rounding import emulate

DRAWS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
GATE_T = 256
v = BY_NAME[sys.argv[2] if len(sys.argv) > 2 else "gated_delta_rule"]
runtime = open("generated_kernels/_runtime.py", encoding="utf-8").read()
planned = precision.Choice.from_dict(precision.read_record(gen.OUT_DIR, v.name)["choice"])
choices = [("planned", planned)]
if v.name == "gated_delta_rule":
    cheap = planned.with_family("gradv_dots", "input").with_family("grad_dots", "input").with_family("dh_store", "input")
    for t in ("hr0", "vr1", "vr4", "vr5", "vr6", "At"):
        cheap = cheap.with_narrow(t)
    choices.append(("cheap", cheap))
for alt in (sys.argv[3].split(";") if len(sys.argv) > 3 else ()):
    other = planned
    for kv in alt.split(","):
        fam, kind = kv.split("=")
        if fam == "narrow":     # narrow=TILE+TILE: those passed tiles in the inputs' dtype too
            for t in kind.split("+"):
                other = other.with_narrow(t)
        else:
            other = other.with_family(fam, kind)
    choices.append((alt, other))
root = tempfile.mkdtemp()
mods = {name: import_printed(root, f"regime_{i}", runtime, v.name, gen.render_variant(precision.apply(v, c)))
        for i, (name, c) in enumerate(choices)}


def errs(fn, x, h0, do, dht, scale, want, steps):
    """Each tensor's relative RMS error; a T-indexed one on its first ``steps`` steps."""
    undo = emulate(os.environ.get("REGIME_TF32", "trunc"))
    try:
        with _no_overflow_checks():
            o, ht, grads = fwd_bwd_state(fn, x, h0, do, dht, scale)
    finally:
        undo()
    wo, wht, wg = want
    cut = (lambda t: t[:, :steps]) if steps else (lambda t: t)

    def first(grads):
        return {n: g if n == "initial_state" else cut(g) for n, g in grads.items()}
    return errors(cut(o), ht, first(grads), (cut(wo), wht, first(wg)))


REGIMES = [(tuple(int(n) for n in sh.split(",")), int(st) or None) for sh, st in
           (r.split(":") for r in os.environ["REGIME_SHAPES"].split(";"))] if os.environ.get("REGIME_SHAPES") \
    else [((1, 256, 2, 128, 128), None), ((1, 1024, 2, 128, 128), GATE_T)]
for shape, steps in REGIMES:
    logs = {}
    for seed in range(DRAWS):
        x, h0, do, dht = case(v.name, shape, precision.SEED + seed, "bench")
        scale = shape[3] ** -0.5
        want = reference(v.name, x, h0, do, dht, scale)
        with patched():
            ref = errs(fla.load(v.name, True), x, h0, do, dht, scale, want, steps)
        for name, mod in mods.items():
            with _as_kernel(v, mod):
                mine = errs(getattr(mod, v.func), x, h0, do, dht, scale, want, steps)
            r = {k: mine[k] / ref[k] for k in ref if ref[k] > 0}
            for k, x_ in r.items():
                logs.setdefault((name, k), []).append(math.log(x_))
            print(f"{shape} {'first %d steps' % steps if steps else 'every step'} seed +{seed} {name}: "
                  + ", ".join(f"{k} {mine[k]:.2e}/{ref[k]:.2e}={r[k]:.2f}" for k in sorted(r)), flush=True)
    for (name, k), xs in sorted(logs.items()):
        if k != "ht":
            print(f"  {shape} {name} {k}: geomean ours/FLA {math.exp(sum(xs) / len(xs)):.3f} over {len(xs)} draws")
