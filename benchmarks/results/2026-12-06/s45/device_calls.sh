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
esac
grep -h "^###\|^- narrowed\|^- the record\|^- FLA" "$OUT"/profile_*.md 2>/dev/null | head -60
tail -3 "$OUT/profile.log" 2>/dev/null
