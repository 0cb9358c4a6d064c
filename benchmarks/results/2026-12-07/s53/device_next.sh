# The next call (session 54), from the repository root on the lent machine; carry .whl.
# 1. GLA, RWKV-6 and RetNet (changed in session 53) beside FLA at the two default shapes
#    not timed since then: (8, 2048, 16, 64) and (1, 8192, 96, 128), forward + backward.
# 2. Gated DeltaNet kernel by kernel beside FLA's own at (2, 16384, 16, 128): where its
#    0.77 goes now (session 44's profile predates sessions 45-51).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
INSTALL=0 VARIANTS="gla rwkv6 retention" LIMIT=400 bash benchmarks/gpu_bench.sh \
    --shapes 8x2048x16x64,1x8192x96x128 --mode fwd+bwd --no-sdpa --fla-force --reps 3 > "$OUT/bench_stdout.log" 2>&1
rm -f "$OUT"/tcache.part* "$OUT"/autotune.tar
tail -8 "$OUT/bench.md"
. benchmarks/tcache.sh
tcache_restore >> "$OUT/setup.log" 2>&1
timeout $((570 - (SECONDS - T0))) python benchmarks/profile_kernels.py --variants gated_delta_rule \
    --fla gated_delta_rule --fla-force --shape 2,16384,16,128 --mode fwd+bwd > "$OUT/profile_gdn.md" 2>&1
echo "== gdn rc=$? at $((SECONDS - T0)) s"; grep -A18 "^### " "$OUT/profile_gdn.md" | grep -v "^- "
