#!/usr/bin/env bash
# One device call: our kernels as generated (A) against another generation of them (B,
# the modules in AB_DIR, e.g. those of the commit before a printing change), forward +
# backward, variant by variant (A then B, each `chunkproof bench --no-sdpa` in its own
# process on the same warm GPU; B always --no-fla, A too unless AB_FLA=1, which times
# FLA beside A with --fla-force and restores FLA's compile cache first,
# benchmarks/tcache.sh), for AB_VARIANTS (space-separated) at AB_SHAPES (default
# 4x4096x16x128) within LIMIT seconds (default 560).  Writes under $OUT: ab.md (both
# tables), text.tar (setup.log, ab.log, the JSON and table of each side).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
export PYTHONUNBUFFERED=1
T0=$SECONDS
LIMIT="${LIMIT:-560}"
: > "$OUT/ab.log"
if [ "${AB_FLA:-0}" = 1 ]; then
    . benchmarks/tcache.sh
    tcache_restore >> "$OUT/ab.log" 2>&1
fi
AB_DIR="${AB_DIR:?AB_DIR: the folder of the B modules}"
mkdir -p /tmp/ab_a /tmp/ab_json
cp generated_kernels/*.py /tmp/ab_a/
pack() {
    ( cd "$OUT" && tar -cf text.tar setup.log ab.log -C /tmp ab_json 2>/dev/null && rm -f setup.log ab.log )
}
trap pack EXIT
: > "$OUT/ab.md"
for v in ${AB_VARIANTS:-gated_delta_rule delta_rule}; do
    for side in A B; do
        left=$((LIMIT - (SECONDS - T0) - 20))
        if [ "$left" -lt 40 ]; then echo "no time left for $v $side" | tee -a "$OUT/ab.log"; break 2; fi
        fla=(--no-fla)
        if [ "$side" = A ]; then
            cp /tmp/ab_a/*.py generated_kernels/
            [ "${AB_FLA:-0}" = 1 ] && fla=(--fla-force)
        else
            cp "$AB_DIR"/*.py generated_kernels/
        fi
        timeout -k 5 "$left" python3 -m chunkproof bench --variant "$v" --mode fwd+bwd "${fla[@]}" --no-sdpa \
            --shapes "${AB_SHAPES:-4x4096x16x128}" --bandwidth 4.22e12 --reps 3 -o "/tmp/ab_json/$v.$side.json" \
            > "/tmp/ab_json/$v.$side.md" 2>> "$OUT/ab.log"
        echo "$v $side rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/ab.log"
        { echo "## $v $side"; grep '^|' "/tmp/ab_json/$v.$side.md"; echo; } >> "$OUT/ab.md"
    done
done
cp /tmp/ab_a/*.py generated_kernels/
cat "$OUT/ab.md"
