# The device calls of session 42, as run (each from the repository root on the lent
# machine; .whl and .tcache carried).  bash device_calls.sh N runs call N.
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore > "$OUT/tcache.log" 2>&1
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/gpu.txt" 2>&1
case "$call" in
1)  # the scans at V blocks of 32 against 64 and the state in K pieces against one, every
    # variant, both warp counts (32 tests)
    LIMIT=170 WORKERS=15 TESTS=tests/test_scan_blocks.py bash benchmarks/gpu_tests_all.sh > /dev/null 2>&1
    mv "$OUT/pytest_gpu.txt" "$OUT/tests_scan_blocks.txt"
    # Gated DeltaNet per kernel: the scans as before (one piece, V blocks of 64 stated),
    # and the defaults (pieces of 64, autotuned)
    for shape in 2,16384,16,128; do
        timeout 100 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape $shape --mode fwd+bwd \
            --iters 5 --configs "autotune=false,scan_BV=64,scan_BK=128;" \
            --out "$OUT/profile_gdn_$shape.md" > /dev/null 2>> "$OUT/profile.log"
    done
    ;;
2)  # call 1's tests alone (what the device time left allows)
    LIMIT=200 WORKERS=15 TESTS=tests/test_scan_blocks.py bash benchmarks/gpu_tests_all.sh > /dev/null 2>&1
    mv "$OUT/pytest_gpu.txt" "$OUT/tests_scan_blocks.txt"
    ;;
3)  # the state in K pieces alone (16 tests: what shipping scan_BK = 64 needs)
    LIMIT=150 WORKERS=16 TEST_K=k_pieces TESTS=tests/test_scan_blocks.py bash benchmarks/gpu_tests_all.sh > /dev/null 2>&1
    mv "$OUT/pytest_gpu.txt" "$OUT/tests_scan_blocks.txt"
    ;;
esac
tail -n 25 "$OUT/tests_scan_blocks.txt" 2>/dev/null
grep -h "^###\|^- \`\|_kernel" "$OUT"/profile_*.md 2>/dev/null | head -80
