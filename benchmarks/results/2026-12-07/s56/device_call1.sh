# Session 56, device call 1, from the repository root on the lent machine (carry .whl):
# Gated DeltaNet at (2, 16384, 16, 128), forward + backward, each row with its errors
# against fp64, beside FLA's in the same process:
#  - what its backward gains from bf16 gradient products with dh stored in bf16, and from
#    narrowing the passed tiles the planner kept in fp32 (profile_kernels --narrow, under
#    each config);
#  - the same module with every kernel's loads moved to first use (loads_at_use.py; its
#    own process, the module's config and the bf16 one): what the loads' placement costs.
set -u
OUT="${OUT:-/tmp/out}"
S=benchmarks/results/2026-12-07/s56
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
CFG=";gradv_dots=input,grad_dots=input,dh_store=input"
timeout 150 python $S/profile_moved.py gated_delta_rule -- --shape 2,16384,16,128 --mode fwd+bwd \
    --configs "$CFG" --out "$OUT/profile_moved.md" > "$OUT/profile_moved.log" 2>&1
echo "moved rc=$?"; grep "^### \|^- " "$OUT/profile_moved.md"
timeout 400 python benchmarks/profile_kernels.py --variants gated_delta_rule --fla gated_delta_rule --fla-force \
    --shape 2,16384,16,128 --mode fwd+bwd --budget 280 --configs "$CFG" \
    --narrow "hr0,vr1,vr4,vr5,vr6,At;hr0;vr1,vr4" \
    --out "$OUT/profile_gdn.md" > "$OUT/profile.log" 2>&1
echo "rc=$?"; grep "^### \|^- " "$OUT/profile_gdn.md"
