# Device calls of session 57 (from the repository root on the lent machine; .whl carried):
# `chunkproof bench` over every variant at every default shape, split over three calls of
# at most 540 s (each writes its JSON under $OUT; `chunkproof bench --merge` joins them),
# the shapes not timed since sessions 44-48 first.  bash device_calls.sh N runs call N
# (LIMIT, BUDGET: the call's seconds and bench's --budget, default 560 and 500).
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore > "$OUT/tcache.log" 2>&1
bench() {   # NAME MODE SHAPES [more bench arguments]
    local name="$1" mode="$2" shapes="$3"; shift 3
    timeout "${LIMIT:-560}" chunkproof bench --fla-force --reps 3 --no-sdpa -o "$OUT/$name.json" --mode "$mode" \
        --budget "${BUDGET:-500}" --shapes "$shapes" "$@" > "$OUT/$name.txt" 2>&1
    echo "== $name rc=$?"; grep "^|\|over FLA\|not run" "$OUT/$name.txt" | tail -n +3
}
case "$call" in
1) bench fwdbwd_a fwd+bwd 8x2048x16x64,4x4096x16x128 ;;
2) bench fwdbwd_b fwd+bwd 1x8192x96x128,2x16384x16x128 ;;
3) bench fwd_all fwd 4x4096x16x128,2x16384x16x128,8x2048x16x64,1x8192x96x128 ;;
# the emulation's regime question (gdn_regime.py): RWKV-6's and Gated DeltaNet's errors on
# the first 256 steps of T = 1024 beside FLA's
4) timeout 560 python benchmarks/profile_kernels.py --variants rwkv6,gated_delta_rule \
        --fla rwkv6,gated_delta_rule --fla-force --shape 16,1024,16,128 --mode fwd+bwd --iters 3 \
        --out "$OUT/t1024.md" > "$OUT/profile.log" 2>&1
   echo "== t1024 rc=$?"; grep "^## \|^- " "$OUT/t1024.md" ;;
esac
