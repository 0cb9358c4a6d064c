# The next call (session 56), from the repository root on the lent machine (carry .whl),
# once autotune_stages.patch is applied and every variant re-planned: each variant
# beside FLA at (2, 16384, 16, 128), forward + backward, as shipped (autotune now picks
# each scan's stages), FLA's backward forced past #640 where it refuses (Gated DeltaNet,
# simple GLA) and measured like ours.  Each row prints both sides' errors and autotune's
# picks (the stages each scan took).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
END="${END:-560}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
mkdir -p /tmp/prof    # at most 8 files come back: the profiles are joined at the end
for v in gated_delta_rule simple_gla gla delta_rule kda rwkv6 retention dplr_delta_rule; do
    left=$((END - (SECONDS - T0)))
    [ "$left" -gt 50 ] || { echo "no time left for $v"; continue; }
    timeout "$left" python benchmarks/profile_kernels.py --variants $v --fla $v --fla-force \
        --shape 2,16384,16,128 --mode fwd+bwd --out "/tmp/prof/$v.md" >> "$OUT/profile.log" 2>&1
    echo "== $v rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- ours\|^- FLA" "/tmp/prof/$v.md"
done
cat /tmp/prof/*.md > "$OUT/profiles.md"
