#!/usr/bin/env bash
# One device call in four phases, each bounded: (1) the GPU kernel tests of TEST_K
# (default the 16-bit cases session 34 did not reach: GLA's, RetNet's, RWKV-6's and
# simple GLA's) for TESTS_S seconds (default 130); (1b) the forward's per-kernel
# profile (PROFILE, PROFILE_S: below); (2) FLA's layer
# classes with our ops patched in (benchmarks/fla_layers_patched.py --quick-autotune) for
# LAYERS_S seconds (default 150, shared equally by the layers of LAYERS, each in its own
# process; default all seven, comma-separated); TESTS_S=0 skips (1), LAYERS_S=0 skips (2); (3) `chunkproof
# bench --mode both` at SHAPES (default 4x4096x16x128) for VARIANTS (default "retention simple_gla gated_delta_rule": the rows not re-run since their last change) in what
# is left of LIMIT (default 575); profile.md and profile.log go into text.tar.  Triton's cache from .tcache/ is restored first
# (benchmarks/tcache.sh).  Writes under $OUT: fla_layers.md, bench.md, text.tar (setup.log,
# pytest_gpu.txt, fla_layers.json, fla_layers.log, latest.json, bench.log), tcache.part*,
# autotune.tar (benchmarks/tcache.sh says where each goes): 8 files at most with up to four
# pieces of the cache.  Needs .whl/ with fla_core,
# flash_linear_attention (the layers), einops and packaging wheels.
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
export PYTHONUNBUFFERED=1
T0=$SECONDS
LIMIT="${LIMIT:-575}"
. benchmarks/tcache.sh
tcache_restore > "$OUT/bench.log" 2>&1
# the device tool brings back 8 files at most: the two tables stay as they are, every
# other text file goes into text.tar (tar -xf text.tar), then the cache's pieces
pack_text() {
    ( cd "$OUT" && shopt -s nullglob && files=(setup.log pytest_gpu.txt profile.md profile.log fla_layers.json fla_layers.log latest.json bench.log)
      have=(); for f in "${files[@]}"; do [ -f "$f" ] && have+=("$f"); done
      [ ${#have[@]} -eq 0 ] || { tar -cf text.tar "${have[@]}" && rm -f "${have[@]}"; } )
}
trap 'pack_text; tcache_pack "$OUT"' EXIT

if [ "${TESTS_S:-130}" -gt 0 ]; then
    k="${TEST_K:-16bit_close and (gla or retention or rwkv6)}"
    timeout "${TESTS_S:-130}" python3 -m pytest -o addopts= -m gpu -q -rA -p no:cacheprovider tests/test_kernels.py \
        -k "$k" > "$OUT/pytest_gpu.txt" 2>&1
    echo "pytest rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/pytest_gpu.txt"
fi

# per-kernel device time of the forward, ours and FLA's, for PROFILE (default the two
# forwards behind FLA's; PROFILE_S seconds, default 120; PROFILE_S=0 skips; PROFILE_CONFIGS:
# profile_kernels.py's --configs, default "" = the modules' own TILING; PROFILE_FLA: the
# variants whose FLA forward is profiled too, default PROFILE's, "" none)
if [ "${PROFILE_S:-120}" -gt 0 ]; then
    timeout "${PROFILE_S:-120}" python3 benchmarks/profile_kernels.py --mode fwd --iters 5 \
        --variants "${PROFILE:-gated_delta_rule,kda}" --fla "${PROFILE_FLA-${PROFILE:-gated_delta_rule,kda}}" --configs "${PROFILE_CONFIGS:-}" \
        --budget $(( ${PROFILE_S:-120} - 30 )) --out "$OUT/profile.md" > "$OUT/profile.log" 2>&1
    echo "profile rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/profile.log"
fi

# each layer in its own process with an equal share of LAYERS_S, so that a slow one (a
# first compile of FLA's) does not take the others' time; one table of all at the end.
# LAYERS_S=0 skips this phase (a share of 0 s would mean no limit to timeout)
if [ "${LAYERS_S:-150}" -gt 0 ]; then
    IFS=, read -r -a layers <<< "${LAYERS:-gla,gated_deltanet,kda,delta_net,retention,rwkv6,simple_gla}"
    each=$(( ${LAYERS_S:-150} / ${#layers[@]} ))
    dirs=()
    : > "$OUT/fla_layers.log"
    for l in "${layers[@]}"; do
        dirs+=("/tmp/layers/$l")
        timeout "$each" python3 benchmarks/fla_layers_patched.py --quick-autotune --layers "$l" --out "/tmp/layers/$l" \
            >> "$OUT/fla_layers.log" 2>&1
        echo "layer $l rc=$? at $((SECONDS - T0)) s (its share: $each s)" | tee -a "$OUT/fla_layers.log"
    done
    python3 benchmarks/fla_layers_patched.py --merge "${dirs[@]}" --out "$OUT" >> "$OUT/fla_layers.log" 2>&1
    cat "$OUT/fla_layers.md" 2>/dev/null
fi

left=$((LIMIT - (SECONDS - T0) - 15))
if [ "$left" -gt 90 ]; then
    vs=()
    for v in ${VARIANTS:-retention simple_gla gated_delta_rule}; do vs+=(--variant "$v"); done
    timeout -k 10 "$left" python3 -m chunkproof bench "${vs[@]}" --mode both --shapes "${SHAPES:-4x4096x16x128}" \
        --budget $((left - 100)) -o "$OUT/latest.json" > "$OUT/bench.md" 2>> "$OUT/bench.log"
    echo "bench rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/bench.log"
    cat "$OUT/bench.md"
else
    echo "no time left for the bench ($left s)" | tee -a "$OUT/bench.log"
fi
