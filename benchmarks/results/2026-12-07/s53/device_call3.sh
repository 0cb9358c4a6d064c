# Session 53's third call, from the repository root on the lent machine (carry .whl):
# after the one K kernel went blocked over K (GLA, RWKV-6, RetNet re-planned).
# 1. GLA kernel by kernel beside FLA's own kernels, forward + backward at (2, 16384, 16,
#    128), in one process (FLA's compile cache restored first: benchmarks/tcache.sh).
# 2. `chunkproof bench` of RWKV-6 and RetNet beside FLA in what time is left.
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
# the K-blocked modules (this session's ab_s53/, as the re-plan prints them) on the lent machine's copy
[ -d ab_s53 ] && cp ab_s53/*.py generated_kernels/
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore >> "$OUT/setup.log" 2>&1
timeout 280 python benchmarks/profile_kernels.py --variants gla --fla gla --fla-force --shape 2,16384,16,128 \
    --mode fwd+bwd > "$OUT/profile_gla.md" 2>&1
echo "== gla rc=$? at $((SECONDS - T0)) s"; grep -A16 "^### " "$OUT/profile_gla.md" | grep -v "^- "
INSTALL=0 VARIANTS="rwkv6 retention" LIMIT=$((575 - (SECONDS - T0))) bash benchmarks/gpu_bench.sh \
    --shapes 2x16384x16x128 --mode fwd+bwd --no-sdpa --fla-force --reps 3 > "$OUT/bench_stdout.log" 2>&1
rm -f "$OUT"/tcache.part* "$OUT"/autotune.tar
tail -8 "$OUT/bench.md"
