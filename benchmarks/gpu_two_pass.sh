#!/usr/bin/env bash
# One device call: the guarded (two-pass) kernels on the H200 (docs/measurements.md, "The
# blocked branch").  First profile_kernels.py --mode fwd+bwd for VARIANTS (default the
# vector-gated ones: gla, rwkv6, kda, dplr_delta_rule) with CONFIGS (default the module's
# own TILING and grad_BV=128), in PROFILE_S seconds (default 330); then the GPU property
# campaign's strong-gate cases (tests/test_fuzz.py, extreme_gates, bf16 and fp32) for
# the same variants, in what is left of LIMIT (default 570 s).  Writes under $OUT:
# setup.log, profile.md, profile.log, pytest_gpu.txt.  Needs .whl/ and .whl/test/
# (gpu_run.sh says how to fetch them).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
T0=$SECONDS
LIMIT="${LIMIT:-570}"
VARIANTS="${VARIANTS:-gla,rwkv6,kda,dplr_delta_rule}"
P="${PROFILE_S:-330}"
timeout "$P" python3 benchmarks/profile_kernels.py --mode fwd+bwd --iters 5 --variants "$VARIANTS" \
    --configs "${CONFIGS-;grad_BV=128}" --budget $((P - 60)) --out "$OUT/profile.md" > "$OUT/profile.log" 2>&1
echo "profile rc=$? at $((SECONDS - T0)) s" | tee -a "$OUT/profile.log"
grep -h "^## \|^### " "$OUT/profile.md"
k="extreme_gates and ($(echo "$VARIANTS" | sed 's/,/ or /g'))"
left=$((LIMIT - (SECONDS - T0) - 15))
timeout "$left" python3 -m pytest -o addopts= -m gpu -q -rf -p no:cacheprovider tests/test_fuzz.py -k "$k" \
    > "$OUT/pytest_gpu.txt" 2>&1
echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"; tail -6 "$OUT/pytest_gpu.txt"
