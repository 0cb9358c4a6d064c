# The next call (session 53), from the repository root on the lent machine; carry .whl and .tcache.
# 1. GLA and RWKV-6 kernel by kernel beside FLA's own kernels at (2, 16384, 16, 128),
#    forward + backward: where the remaining gap to FLA is (GLA's gradient K and V kernels
#    with the precise lines dQ and dK; RWKV-6's gradient K kernel).
# 2. GLA side by side with FLA in one process (session 52's 9.652 ms was a profile, FLA's
#    7.109 ms from another call).
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
for v in gla rwkv6; do
    timeout 150 python benchmarks/profile_kernels.py --variants $v --fla $v --fla-force --shape 2,16384,16,128 \
        --mode fwd+bwd > "$OUT/profile_$v.md" 2>&1
    echo "== $v rc=$?"; grep -A14 "^### " "$OUT/profile_$v.md" | grep -v "^- "
done
INSTALL=0 VARIANTS="gla" LIMIT=200 bash benchmarks/gpu_bench.sh --shapes 2x16384x16x128 --mode fwd+bwd --no-sdpa \
    --fla-force --reps 3 > "$OUT/bench_stdout.log" 2>&1
tail -12 "$OUT/bench.md"
