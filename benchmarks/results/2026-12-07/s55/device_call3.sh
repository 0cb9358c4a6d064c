# Session 55's third call (carry .whl): the other four variants beside FLA at
# (2, 16384, 16, 128) with their scans at 3 stages.
set -u
OUT="${OUT:-/tmp/out}"
T0=$SECONDS
END="${END:-380}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
. benchmarks/tcache.sh
tcache_restore > /dev/null 2>&1
for v in simple_gla delta_rule gla dplr_delta_rule; do
    left=$((END - (SECONDS - T0)))
    [ "$left" -gt 50 ] || { echo "no time left for $v"; continue; }
    timeout "$left" python benchmarks/profile_kernels.py --variants $v --fla $v --shape 2,16384,16,128 --mode fwd+bwd \
        --configs "scan_stages=3" --out "$OUT/profile_$v.md" >> "$OUT/profile.log" 2>&1
    echo "== $v rc=$? at $((SECONDS - T0)) s"; grep "^### \|^- ours\|^- FLA" "$OUT/profile_$v.md"
done
