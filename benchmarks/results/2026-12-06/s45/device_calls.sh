# The device calls of session 45 (from the repository root on the lent machine; .whl
# carried).  bash device_calls.sh N runs call N.
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore > "$OUT/tcache.log" 2>&1
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/gpu.txt" 2>&1
case "$call" in
1)  # Gated DeltaNet's passed tiles narrowed (hr0, vr1, vr4: each and all three), every
    # tensor's error beside FLA's on the same inputs, at (2, 16384, 16, 128) and (4, 4096, 16, 128)
    timeout 300 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 \
        --mode fwd+bwd --iters 5 --narrow "hr0,vr1,vr4;hr0;vr1;vr4" --fla gated_delta_rule --fla-force \
        --out "$OUT/profile_gdn_narrow_16k.md" 2> "$OUT/profile.log"
    timeout 150 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 4,4096,16,128 \
        --mode fwd+bwd --iters 5 --narrow "hr0,vr1,vr4" --fla gated_delta_rule --fla-force \
        --out "$OUT/profile_gdn_narrow_4k.md" 2>> "$OUT/profile.log"
    ;;
2)  # the same narrowings at heads of 64 ((8, 2048, 16, 64), every tensor's error beside
    # FLA's); then chunkproof bench at (8, 2048, 16, 64) for the eight variants, as far as the time goes
    timeout 150 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 8,2048,16,64 \
        --mode fwd+bwd --iters 5 --narrow "hr0,vr1,vr4;hr0;vr1;vr4" --fla gated_delta_rule --fla-force \
        --out "$OUT/profile_gdn_narrow_d64.md" 2> "$OUT/profile.log"
    timeout 350 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_d64.json" --variant \
        gated_delta_rule,kda,gla,dplr_delta_rule,delta_rule,simple_gla,retention,rwkv6 --mode fwd+bwd \
        --budget 320 --no-sdpa --shapes 8x2048x16x64 > "$OUT/bench_d64.txt" 2>&1
    grep "^|" "$OUT/bench_d64.txt" | tail -n +3
    timeout 40 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
3)  # GLA at (8, 2048, 16, 64), forward + backward, per kernel beside FLA's: kernels or host time?
    timeout 200 python3 benchmarks/profile_kernels.py --variants gla --shape 8,2048,16,64 \
        --mode fwd+bwd --iters 5 --fla gla --out "$OUT/profile_gla_d64.md" 2> "$OUT/profile.log"
    ;;
4)  # the host's time to issue a forward + backward beside the device's, ours and FLA's, at (8, 2048, 16, 64)
    timeout 150 python3 benchmarks/host_time.py --variants gla,gated_delta_rule --fla gla,gated_delta_rule \
        --fla-force --shape 8,2048,16,64 --out "$OUT/host_d64.md" 2> "$OUT/host.log"
    tail -3 "$OUT/host.log"
    ;;
# Written for the next session (not run in this one)
5)  # where the host's 2 ms per forward + backward go at (8, 2048, 16, 64): cProfile of ours and FLA's
    timeout 200 python3 benchmarks/host_time.py --variants gla,gated_delta_rule --fla gla,gated_delta_rule \
        --fla-force --shape 8,2048,16,64 --profile-top 30 --out "$OUT/host_profile_d64.md" 2> "$OUT/host.log"
    tail -3 "$OUT/host.log"
    ;;
6)  # the reverse scan as printed now against session 41's hand-written copies (m9: 1099 us
    # there, the printed one 1455 in session 43, under other settings), the same process
    timeout 400 python3 benchmarks/scan_mix_probe.py --mixes shipped,lazy,m9,m16,m18 --shape 2,16384,16,128 \
        --err-shape 1,1024,2,128 --budget 330 --out "$OUT/scan_mix.md" 2> "$OUT/scan_mix.log"
    cat "$OUT/scan_mix.md"; tail -3 "$OUT/scan_mix.log"
    ;;
7)  # after autotune offers the parallel kernels twice their V block: the output kernel's pick
    # and the forward against FLA, four variants at (2, 16384, 16, 128) and (4, 4096, 16, 128)
    timeout 200 python3 benchmarks/profile_kernels.py --variants gated_delta_rule,gla,kda,dplr_delta_rule \
        --shape 2,16384,16,128 --mode fwd --iters 5 --out "$OUT/profile_fwd_16k.md" 2> "$OUT/profile.log"
    timeout 330 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_fwd.json" --variant \
        gated_delta_rule,gla,kda,dplr_delta_rule --mode fwd --budget 300 --no-sdpa \
        --shapes 2x16384x16x128,4x4096x16x128 > "$OUT/bench_fwd.txt" 2>&1
    grep "^|" "$OUT/bench_fwd.txt" | tail -n +3
    ;;
8)  # the rows not yet run against FLA: simple GLA, RetNet, RWKV-6 at (8, 2048, 16, 64), then
    # DeltaNet, simple GLA, RetNet, RWKV-6 at (2, 16384, 16, 128) (FLA's first compiles: minutes)
    timeout 560 chunkproof bench --fla-force --reps 3 -o "$OUT/bench_rest.json" --variant \
        simple_gla,retention,rwkv6,delta_rule --mode fwd+bwd --budget 500 --no-sdpa \
        --shapes 8x2048x16x64,2x16384x16x128 > "$OUT/bench_rest.txt" 2>&1
    grep "^|" "$OUT/bench_rest.txt" | tail -n +3
    timeout 30 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
esac
grep -h "^###\|^- narrowed\|^- the record\|^- FLA" "$OUT"/profile_*.md 2>/dev/null | head -60
tail -3 "$OUT/profile.log" 2>/dev/null
