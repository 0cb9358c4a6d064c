#!/usr/bin/env bash
# One device call for the recurrent forms and the backward's profile; PHASES (default
# "tests recurrent") picks, in order:
#   tests:     `pytest -m gpu -k recurrent` (tests/test_recurrent.py, the fuzz property
#              recurrent_form), given TESTS_S seconds (default 200);
#   profile:   benchmarks/profile_kernels.py --mode fwd+bwd for PROFILE_VARIANTS (default
#              gla,kda,dplr_delta_rule), FLA's too for FLA_VARIANTS (default gla), given
#              PROFILE_S seconds (default 300);
#   recurrent: benchmarks/recurrent_vs_fla.py for VARIANTS (default all) at SHAPES (B,T,H,D
#              separated by spaces; default the script's), in what is left of LIMIT.
# LIMIT: seconds for the whole call (default 570).  Writes under $OUT: setup.log,
# pytest_gpu.txt, profile_fwdbwd.{md,log}, recurrent.{json,md,log}.
# Needs .whl/ and .whl/test/ (gpu_run.sh says how to fetch them).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
T0=$SECONDS
LIMIT="${LIMIT:-570}"
for phase in ${PHASES:-tests recurrent}; do
    case "$phase" in
    tests)
        timeout "${TESTS_S:-200}" python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -n "${WORKERS:-8}" \
            -k recurrent tests/test_recurrent.py tests/test_fuzz.py > "$OUT/pytest_gpu.txt" 2>&1
        echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"; tail -3 "$OUT/pytest_gpu.txt" ;;
    profile)
        s="${PROFILE_S:-300}"
        timeout "$s" python3 benchmarks/profile_kernels.py --mode fwd+bwd --iters 5 --budget $((s - 90)) \
            --variants "${PROFILE_VARIANTS:-gla,kda,dplr_delta_rule}" --fla "${FLA_VARIANTS:-gla}" \
            --out "$OUT/profile_fwdbwd.md" > "$OUT/profile_fwdbwd.log" 2>&1
        echo "profile rc=$? at $((SECONDS - T0)) s" >> "$OUT/profile_fwdbwd.log"; tail -3 "$OUT/profile_fwdbwd.log" ;;
    recurrent)
        left=$((LIMIT - (SECONDS - T0) - 10))
        v="${VARIANTS:-all}"
        shapes=(); for s in ${SHAPES:-}; do shapes+=(--shape "$s"); done
        timeout "$left" python3 benchmarks/recurrent_vs_fla.py --variant "${v// /,}" "${shapes[@]}" --out "$OUT" \
            > "$OUT/recurrent.log" 2>&1
        echo "recurrent rc=$? at $((SECONDS - T0)) s" >> "$OUT/recurrent.log"
        grep -v "^$" "$OUT/recurrent.log" | tail -40 ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
    esac
done
