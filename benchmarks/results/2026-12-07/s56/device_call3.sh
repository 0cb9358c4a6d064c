# Session 56, device call 3, from the repository root on the lent machine (carry .whl),
# after autotune_stages.patch and its re-plan landed: each variant beside FLA at
# (2, 16384, 16, 128), forward + backward, as shipped (autotune picks each scan's stages),
# FLA's backward forced past #640 where it refuses (Gated DeltaNet, simple GLA); then, if
# time is left, Gated DeltaNet's errors at T = 256 (the planner's regime: the whole
# sequence measured) as planned, with bf16 products and dh bf16, and with the six passed
# tiles narrowed too, beside FLA's; then RWKV-6's and Gated DeltaNet's errors on the
# first 256 steps of T = 1024 beside FLA's (the emulation puts RWKV-6's dv and dw at
# 1.42x and 1.50x FLA's there, against 1.01x on the GPU at T = 16384: gdn_regime.py).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
END="${END:-560}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
mkdir -p /tmp/prof    # at most 8 files come back: each profile joins one file when done
for v in gated_delta_rule delta_rule simple_gla gla kda rwkv6 retention dplr_delta_rule; do
    left=$((END - (SECONDS - T0)))
    [ "$left" -gt 50 ] || { echo "no time left for $v"; continue; }
    timeout "$left" python benchmarks/profile_kernels.py --variants $v --fla $v --fla-force \
        --shape 2,16384,16,128 --mode fwd+bwd --iters 3 --out "/tmp/prof/$v.md" >> "$OUT/profile.log" 2>&1
    echo "== $v rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- ours\|^- FLA" "/tmp/prof/$v.md"
    cat "/tmp/prof/$v.md" >> "$OUT/profiles.md"
done
left=$((END - (SECONDS - T0)))
if [ "$left" -gt 60 ]; then
    timeout "$left" python benchmarks/profile_kernels.py --variants gated_delta_rule --fla gated_delta_rule --fla-force \
        --shape 16,256,16,128 --mode fwd+bwd --iters 3 \
        --configs ";gradv_dots=input,grad_dots=input,dh_store=input" --narrow "hr0,vr1,vr4,vr5,vr6,At" \
        --out "$OUT/gdn_t256.md" >> "$OUT/profile.log" 2>&1
    echo "== gdn t256 rc=$?"; grep "^### \|^- " "$OUT/gdn_t256.md"
fi
left=$((END - (SECONDS - T0)))
if [ "$left" -gt 60 ]; then
    timeout "$left" python benchmarks/profile_kernels.py --variants rwkv6,gated_delta_rule \
        --fla rwkv6,gated_delta_rule --fla-force --shape 16,1024,16,128 --mode fwd+bwd --iters 3 \
        --out "$OUT/t1024.md" >> "$OUT/profile.log" 2>&1
    echo "== t1024 rc=$?"; grep "^## \|^- " "$OUT/t1024.md"
fi
