#!/usr/bin/env bash
# One device call for the recurrent forms and the backward's profile:
#   JOB=recurrent (default): `pytest -m gpu -k recurrent` (tests/test_recurrent.py, the fuzz
#     property recurrent_form), given TESTS_S seconds (default 200), then
#     benchmarks/recurrent_vs_fla.py for VARIANTS (default all) in what is left of LIMIT;
#   JOB=profile: benchmarks/profile_kernels.py --mode fwd+bwd for VARIANTS (default
#     gla,kda,dplr_delta_rule), FLA's too for FLA_VARIANTS (default gla), within LIMIT.
# LIMIT: seconds for the whole call (default 570).  Writes under $OUT: setup.log and
# pytest_gpu.txt, recurrent.{json,md,log} or profile_fwdbwd.{md,log}.
# Needs .whl/ and .whl/test/ (gpu_run.sh says how to fetch them).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
T0=$SECONDS
LIMIT="${LIMIT:-570}"
if [ "${JOB:-recurrent}" = profile ]; then
    timeout $((LIMIT - 20)) python3 benchmarks/profile_kernels.py --mode fwd+bwd \
        --variants "${VARIANTS:-gla,kda,dplr_delta_rule}" --fla "${FLA_VARIANTS:-gla}" --iters 5 \
        --budget $((LIMIT - 150)) --out "$OUT/profile_fwdbwd.md" > "$OUT/profile_fwdbwd.log" 2>&1
    echo "profile rc=$? at $((SECONDS - T0)) s" >> "$OUT/profile_fwdbwd.log"
    tail -5 "$OUT/profile_fwdbwd.log"
    exit 0
fi
timeout "${TESTS_S:-200}" python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -n "${WORKERS:-8}" \
    -k recurrent tests/test_recurrent.py tests/test_fuzz.py > "$OUT/pytest_gpu.txt" 2>&1
echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"
left=$((LIMIT - (SECONDS - T0) - 10))
v="${VARIANTS:-all}"
timeout "$left" python3 benchmarks/recurrent_vs_fla.py --variant "${v// /,}" --out "$OUT" > "$OUT/recurrent.log" 2>&1
echo "recurrent rc=$? at $((SECONDS - T0)) s" >> "$OUT/recurrent.log"
tail -12 "$OUT/pytest_gpu.txt"; grep -v "^$" "$OUT/recurrent.log" | tail -40
