# Session 54's first call, from the repository root on the lent machine (carry .whl,
# ab_s54k64: GLA printed with TILING prep_BK 64 from its record's choice).
# 1. GLA forward + backward as shipped (A, FLA beside) against its intra kernel looped
#    over K blocks of 64 (B), at (2, 16384, 16, 128).
# 2. Gated DeltaNet, then DeltaNet, kernel by kernel beside FLA's at (2, 16384, 16, 128), as shipped and with
#    their scans at 3 pipeline stages (FLA's autotune picks 3 for its state kernels).
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
# END: the seconds the whole call may take (the device time left decides it)
END="${END:-585}"
S=2x16384x16x128
AB_FLA=1 AB_DIR=ab_s54k64 AB_VARIANTS=gla AB_SHAPES=$S LIMIT=200 bash benchmarks/gpu_ab.sh > "$OUT/ab_stdout.log" 2>&1
mkdir -p "$OUT/k64" && mv "$OUT/ab.md" "$OUT/text.tar" "$OUT/k64/" 2>/dev/null
cat "$OUT/k64/ab.md"
. benchmarks/gpu_setup.sh > /dev/null 2>&1; rm -f "$OUT/setup.log"
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
timeout $(((END > 500 ? 400 : END) - (SECONDS - T0))) python benchmarks/profile_kernels.py --variants gated_delta_rule \
    --fla gated_delta_rule --fla-force --shape 2,16384,16,128 --mode fwd+bwd --configs ";scan_stages=3" \
    --out "$OUT/profile_gdn.md" > "$OUT/profile_gdn.log" 2>&1
echo "== gdn rc=$? at $((SECONDS - T0)) s"; grep -A20 "^### " "$OUT/profile_gdn.md" | grep -v "^- "
[ $((END - (SECONDS - T0))) -gt 60 ] && timeout $((END - (SECONDS - T0))) python benchmarks/profile_kernels.py --variants delta_rule \
    --fla delta_rule --fla-force --shape 2,16384,16,128 --mode fwd+bwd --configs ";scan_stages=3" \
    --out "$OUT/profile_dn.md" > "$OUT/profile_dn.log" 2>&1
echo "== dn rc=$? at $((SECONDS - T0)) s"; grep -A20 "^### " "$OUT/profile_dn.md" | grep -v "^- "
