# The device calls of session 44 (from the repository root on the lent machine; .whl and
# .tcache carried).  bash device_calls.sh N runs call N.
set -u
call="${1:?which call}"
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore > "$OUT/tcache.log" 2>&1
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/gpu.txt" 2>&1
bench() {  # bench LIMIT NAME ARGS...: chunkproof bench as shipped, FLA forced past its #640 refusal
    local limit="$1" name="$2"; shift 2
    timeout "$limit" chunkproof bench --fla-force --reps 3 -o "$OUT/bench_$name.json" "$@" > "$OUT/bench_$name.txt" 2>&1
    grep "^|" "$OUT/bench_$name.txt" | tail -n +3
}
case "$call" in
1)  # FLA's Gated DeltaNet forward + backward kernel by kernel beside ours at (2,16384,16,128);
    # then the four first variants at (1, 8192, 96, 128), both modes; the compile cache back
    timeout 200 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 \
        --mode fwd+bwd --iters 5 --fla gated_delta_rule --fla-force --out "$OUT/profile_gdn_fla.md" 2> "$OUT/profile.log"
    bench 330 h96 --variant gla,gated_delta_rule,kda,dplr_delta_rule --mode both --budget 300 --no-sdpa --shapes 1x8192x96x128
    timeout 60 bash -c '. benchmarks/tcache.sh; tcache_pack "$0"' "$OUT"
    ;;
2)  # Nsight Compute's counters for every Gated DeltaNet kernel of one forward + backward at
    # (2, 16384, 16, 128) bf16 (benchmarks/gpu_ncu.sh: resources first, then ncu)
    LIMIT=420 VARIANTS=gated_delta_rule MODES=fwd+bwd SHAPE=2,16384,16,128 bash benchmarks/gpu_ncu.sh > "$OUT/ncu.log" 2>&1
    cat "$OUT/ncu.log"; tail -5 "$OUT/run.log"
    ;;
3)  # the gradient KB kernel at one K block of 128 (no V-wide tile read twice per chunk)
    # against the shipped 64 (Gated DeltaNet) and 32 (KDA), autotune on, forward + backward
    for spec in "gated_delta_rule 2,16384,16,128 grad_BK=128" "gated_delta_rule 4,4096,16,128 grad_BK=128" \
                "kda 2,16384,16,128 grad_BK=64;grad_BK=128"; do
        set -- $spec
        timeout 150 python3 benchmarks/profile_kernels.py --variants "$1" --shape "$2" --mode fwd+bwd --iters 5 \
            --configs ";$3" --out "$OUT/profile_$1_${2//,/x}.md" 2>> "$OUT/profile.log"
    done
    ;;
4)  # after dbeta from dA's products (and Gated DeltaNet's gate gradient so): Gated DeltaNet
    # per kernel, then against FLA (with KDA and DeltaNet, the other two changed) forward + backward
    timeout 70 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 \
        --mode fwd+bwd --iters 5 --out "$OUT/profile_gdn.md" 2> "$OUT/profile.log"
    bench 200 grouped --variant gated_delta_rule,kda,delta_rule --mode fwd+bwd --budget 180 --no-sdpa \
        --shapes 2x16384x16x128,4x4096x16x128
    ;;
# Written for the next session (not run in this one).  At most 8 files come back from a
# call: these write 2 bench files, gpu.txt, setup.log, tcache.log and FLA's autotune.tar
5)  # DPLR at (2, 16384, 16, 128); the four at (8, 2048, 16, 64) as the budget allows
    bench 480 rest --variant dplr_delta_rule,gla,gated_delta_rule,kda --mode both --budget 450 --no-sdpa \
        --shapes 2x16384x16x128,8x2048x16x64
    timeout 60 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
6)  # Gated DeltaNet, KDA and DPLR at (1, 8192, 96, 128); the regrouped dbeta at (4, 4096, 16, 128)
    bench 300 h96 --variant gated_delta_rule,kda,dplr_delta_rule --mode both --budget 280 --no-sdpa \
        --shapes 1x8192x96x128
    bench 200 grouped4k --variant gated_delta_rule,kda,delta_rule --mode fwd+bwd --budget 180 --no-sdpa \
        --shapes 4x4096x16x128
    timeout 60 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
7)  # DeltaNet, simple GLA, RetNet and RWKV-6 at (2, 16384, 16, 128) (FLA's first compiles: minutes each)
    bench 540 rest4 --variant delta_rule,simple_gla,retention,rwkv6 --mode both --budget 500 --no-sdpa \
        --shapes 2x16384x16x128
    timeout 50 bash -c '. benchmarks/tcache.sh; tcache_pack "$0" && rm -f "$0"/tcache.part*' "$OUT"
    ;;
8)  # Gated DeltaNet's leads, per kernel at (2, 16384, 16, 128) forward + backward: the parallel
    # kernels at V blocks of 128 (BV: the output and dO-side kernels read Q and K once per
    # chunk, not per V block), and its fp32 passed tiles narrowed (bytes against errors)
    timeout 540 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 \
        --mode fwd+bwd --iters 5 --configs ";BV=128" --narrow "hr0;vr1;vr4;hr0,vr1,vr4" \
        --out "$OUT/profile_gdn_leads.md" 2> "$OUT/profile.log"
    ;;
esac
grep -h "^###\|_kernel" "$OUT"/profile_*.md 2>/dev/null | head -60
tail -3 "$OUT/profile.log" 2>/dev/null
