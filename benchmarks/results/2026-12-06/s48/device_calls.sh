# Device calls written in session 48 for the next session (from the repository root on
# the lent machine; .whl carried).  bash device_calls.sh N runs call N.
# Before calls 1 and 2, on this machine: the modules before the reference-error planner
# (125ebda) as AB_DIR, an untracked folder that travels with the tree:
#   rm -rf ab_old && mkdir ab_old && git archive 125ebda generated_kernels | tar -x -C /tmp/s48_old \
#     && cp /tmp/s48_old/generated_kernels/*.py ab_old/      (mkdir -p /tmp/s48_old first)
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
case "$call" in
1)  # what the re-planned types (FLA's errors as a bound, lines promoted together, q as
    # read) cost: A = now, B = 125ebda, forward + backward at (2, 16384, 16, 128), FLA
    # beside A, the variants whose choice moved the most first
    AB_DIR=ab_old AB_FLA=1 AB_VARIANTS="gla kda gated_delta_rule" AB_SHAPES=2x16384x16x128 LIMIT=540 \
        bash benchmarks/gpu_ab.sh
    ;;
2)  AB_DIR=ab_old AB_FLA=1 AB_VARIANTS="dplr_delta_rule delta_rule simple_gla retention rwkv6" \
        AB_SHAPES=2x16384x16x128 LIMIT=540 bash benchmarks/gpu_ab.sh
    ;;
3)  # errors and times against FLA at heads of 64, every variant
    . benchmarks/gpu_setup.sh
    . benchmarks/tcache.sh
    tcache_restore > "$OUT/tcache.log" 2>&1
    timeout 540 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_d64.json" --mode fwd+bwd --budget 500 \
        --no-sdpa --shapes 8x2048x16x64 > "$OUT/bench_d64.txt" 2>&1
    grep "^|\|over FLA" "$OUT/bench_d64.txt" | tail -n +3
    ;;
esac
