# Session 55's first call, from the repository root on the lent machine (carry .whl):
# the scans at 3 pipeline stages (TILING scan_stages; stated 2) gated and timed on every
# variant before 3 becomes the default.  Session 54 timed it on the delta rules alone
# (Gated DeltaNet 5.992 -> 5.690 ms, DeltaNet 3.963 -> 3.545 at (2, 16384, 16, 128), H100),
# without their errors: profile_kernels.py now prints each configuration's errors against
# fp64 (first 256 steps, as `chunkproof bench` gates them).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
END="${END:-585}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
# Gated DeltaNet also with its gradient kernels at V blocks of 64 (grad_BV; stated 128:
# offline its V kernel takes 196 KB of shared memory at 128, one program per SM; 106 KB
# at 64), then with delta S stored in bf16 (dh_store; the planner keeps fp32, as bf16
# grew an error over STORE_SLACK against its own fp32 kernel), then with the gradient
# kernels' products in bf16 (what the planner's tf32 costs; errors printed beside)
cfg() { if [ "$1" = gated_delta_rule ]; then
    echo ";scan_stages=3;scan_stages=3,grad_BV=64;scan_stages=3,grad_BV=64,dh_store=input;scan_stages=3,grad_BV=64,gradv_dots=input,grad_dots=input"
    else echo ";scan_stages=3"; fi; }
mkdir -p /tmp/prof    # at most 8 files come back: the profiles are joined at the end
for v in gated_delta_rule delta_rule kda rwkv6 gla dplr_delta_rule retention simple_gla; do
    left=$((END - (SECONDS - T0)))
    [ "$left" -gt 60 ] || { echo "no time left for $v"; continue; }
    timeout "$left" python benchmarks/profile_kernels.py --variants $v --shape 2,16384,16,128 --mode fwd+bwd \
        --configs "$(cfg $v)" --out "/tmp/prof/$v.md" >> "$OUT/profile.log" 2>&1
    echo "== $v rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- ours" "/tmp/prof/$v.md"
done
cat /tmp/prof/*.md > "$OUT/profiles.md"
