# Session 56, device call 2, from the repository root on the lent machine (carry .whl):
# Gated DeltaNet's errors in the planner's regime (short sequences) against the
# benchmark's (the first 256 steps of long ones): the module as planned, bf16 gradient
# products with dh in bf16, and that with the six passed tiles narrowed, beside FLA, at
# T = 256 (the whole sequence measured: the planner's STORE_SHAPES' length) and T = 2048.
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
for shape in 16,256,16,128 4,2048,16,128; do
    timeout 270 python benchmarks/profile_kernels.py --variants gated_delta_rule --fla gated_delta_rule --fla-force \
        --shape $shape --mode fwd+bwd --iters 3 --budget 200 \
        --configs ";gradv_dots=input,grad_dots=input,dh_store=input" --narrow "hr0,vr1,vr4,vr5,vr6,At" \
        --out "$OUT/gdn_$shape.md" >> "$OUT/profile.log" 2>&1
    echo "== $shape rc=$?"; grep "^### \|^- " "$OUT/gdn_$shape.md"
done
