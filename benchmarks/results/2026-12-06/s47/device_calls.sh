# The device calls of session 47 (from the repository root on the lent machine; .whl
# carried).  bash device_calls.sh N runs call N.  Call 1 (session 46's call 1) and call
# 2 (the d64 errors) were written ahead of a session whose first machine starts failed;
# what ran instead is in README.md.  Call 5 is written for the next session.
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
here=benchmarks/results/2026-12-06
case "$call" in
1)  bash "$here/s46/device_calls.sh" 1 ;;
2)  # after the row gates moved onto the products (printer._pulled_gate): forward +
    # backward errors and times against FLA at (8, 2048, 16, 64) for the variants whose
    # output or dV kernel changed, and RWKV-6 (unchanged) beside them
    . benchmarks/gpu_setup.sh
    . benchmarks/tcache.sh
    tcache_restore > "$OUT/tcache.log" 2>&1
    { nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/gpu.txt" 2>&1
    timeout 540 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_d64.json" --variant \
        retention,simple_gla,gated_delta_rule,rwkv6 --mode fwd+bwd --budget 500 --no-sdpa \
        --shapes 8x2048x16x64 > "$OUT/bench_d64.txt" 2>&1
    grep "^|\|over FLA" "$OUT/bench_d64.txt" | tail -n +3
    timeout 30 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
3|4) bash "$here/s46/device_calls.sh" "$call" ;;
5)  # every `pytest -m gpu` test: not run since session 46's runtime change (whose
    # autotune key failed every launch on the GPU, fixed in session 47)
    LIMIT=540 bash benchmarks/gpu_tests_all.sh
    tail -15 "$OUT/pytest_gpu.txt"
    ;;
esac
