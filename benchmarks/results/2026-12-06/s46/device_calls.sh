# The device calls of session 46 written for its own tree (from the repository root on
# the lent machine; .whl carried).  bash device_calls.sh N runs call N.
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore > "$OUT/tcache.log" 2>&1
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/gpu.txt" 2>&1
case "$call" in
1)  # after _Tuned (autotune's pick launched directly once tuned) and late_loads (the
    # reverse scan's second-phase loads issued where first read): the host's issue time
    # at (8, 2048, 16, 64), the reverse scan as now printed beside copy m9, and
    # forward + backward against FLA for the four variants whose reverse scan changed
    timeout 120 python3 benchmarks/host_time.py --variants gla,gated_delta_rule --fla gla,gated_delta_rule \
        --fla-force --shape 8,2048,16,64 --out "$OUT/host_d64.md" 2> "$OUT/host.log"
    cat "$OUT/host_d64.md" | head -12
    timeout 130 python3 benchmarks/scan_mix_probe.py --mixes shipped,m9 --shape 2,16384,16,128 \
        --err-shape 1,1024,2,128 --budget 110 --out "$OUT/scan_mix.md" 2> "$OUT/scan_mix.log"
    cut -c1-60 "$OUT/scan_mix.md"
    timeout 170 chunkproof bench --fla-force --reps 3 -o "$OUT/bench.json" --variant \
        gated_delta_rule,kda,dplr_delta_rule,delta_rule --mode fwd+bwd --budget 150 --no-sdpa \
        --shapes 4x4096x16x128 > "$OUT/bench.txt" 2>&1
    grep "^|" "$OUT/bench.txt" | tail -n +3
    ;;
2)  # call 1 without its bench, GLA's host time alone (what the device time left
    # allowed): the host's issue time, and the reverse scan as now printed beside copy m9
    timeout 80 python3 benchmarks/host_time.py --variants gla --fla gla \
        --shape 8,2048,16,64 --out "$OUT/host_d64.md" 2> "$OUT/host.log"
    head -12 "$OUT/host_d64.md"
    timeout 110 python3 benchmarks/scan_mix_probe.py --mixes shipped,m9 --shape 2,16384,16,128 \
        --err-shape 1,1024,2,128 --budget 85 --out "$OUT/scan_mix.md" 2> "$OUT/scan_mix.log"
    cut -c1-60 "$OUT/scan_mix.md"
    ;;
3)  # rows never run against FLA, a whole call for FLA's first compiles: DeltaNet at
    # (8, 2048, 16, 64), then DeltaNet and simple GLA at (2, 16384, 16, 128)
    timeout 560 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_rest1.json" --variant \
        delta_rule,simple_gla --mode fwd+bwd --budget 520 --no-sdpa \
        --shapes 8x2048x16x64,2x16384x16x128 > "$OUT/bench_rest1.txt" 2>&1
    grep "^|\|over FLA" "$OUT/bench_rest1.txt" | tail -n +3
    timeout 30 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
4)  # RetNet and RWKV-6 at (2, 16384, 16, 128)
    timeout 560 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_rest2.json" --variant \
        retention,rwkv6 --mode fwd+bwd --budget 520 --no-sdpa \
        --shapes 2x16384x16x128 > "$OUT/bench_rest2.txt" 2>&1
    grep "^|\|over FLA" "$OUT/bench_rest2.txt" | tail -n +3
    timeout 30 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
esac
