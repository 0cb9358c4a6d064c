# Session 55's second call, from the repository root on the lent machine (carry .whl):
# Gated DeltaNet beside FLA at (2, 16384, 16, 128) with its scans at 3 stages, as the
# planner chose its products and with the gradient kernels' products in bf16 and with
# delta S stored in bf16 (the first call saw both under FLA's errors there, at V blocks
# of 64, where the planner's emulated check at (1, 256, 2, 128, 128) did not); then
# KDA, RWKV-6 and RetNet beside FLA at 3 stages (their FLA / ours last timed in 52-53).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
END="${END:-500}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
S=2,16384,16,128
timeout $((END - (SECONDS - T0))) python benchmarks/profile_kernels.py --variants gated_delta_rule \
    --fla gated_delta_rule --fla-force --shape $S --mode fwd+bwd \
    --configs "scan_stages=3;scan_stages=3,gradv_dots=input,grad_dots=input;scan_stages=3,dh_store=input" \
    --out "$OUT/profile_gdn.md" > "$OUT/profile_gdn.log" 2>&1
echo "== gdn rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- " "$OUT/profile_gdn.md"
for v in kda rwkv6 retention; do
    left=$((END - (SECONDS - T0)))
    [ "$left" -gt 70 ] || { echo "no time left for $v"; continue; }
    timeout "$left" python benchmarks/profile_kernels.py --variants $v --fla $v --shape $S --mode fwd+bwd \
        --configs "scan_stages=3" --out "$OUT/profile_$v.md" >> "$OUT/profile.log" 2>&1
    echo "== $v rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- " "$OUT/profile_$v.md"
done
