#!/usr/bin/env bash
# One device call, everything bounded by DEADLINE seconds so that the results are always
# packed.  On a two-GPU machine (kind nvidia-h200-x2) the two halves below run side by
# side; on one GPU the timing runs first, alone, and the rest after it on the same GPU:
#   GPU 0 (timing, one process at a time): benchmarks/sweep.sh on FWDBWD_SPEC (its lines:
#         "variant tag [--fla] [@SECONDS] [KEY=VALUE ...]"), each line bounded by what is left;
#         without FWDBWD_SPEC, one line per variant: "VARIANT defaults --fla @SECONDS";
#   GPU 1 (no timing): the fuzz campaign, one process per variant (FUZZ_EXAMPLES per
#         property, FUZZ_DTYPE; 0 skips it), and `pytest -m gpu`, one process per variant
#         (VARIANTS: which, default all four),
#         side by side (GPU_TESTS=0 skips the tests); with GPU1_SPEC, a second timing
#         spec (r/gpu1/sweep.md) beside them.
# Writes $OUT/results.tar (r/spec.txt, r/sweep.md, r/sweep.log, r/sweep_json/, r/fuzz/,
# r/gpu_tests_<variant>.log)
# and $OUT/tcache.part* (benchmarks/tcache.sh: copy them into .tcache/ and carry .tcache
# next time).  Carry .whl.  Keep the spec with the campaign's results
# (benchmarks/results/<date>/sweeps/, benchmarks/README.md).
#   DEADLINE=500 FUZZ_EXAMPLES=40 FWDBWD_SPEC=my_spec.txt bash benchmarks/gpu_campaign.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"; R="$OUT/r"; mkdir -p "$R/fuzz"
DEADLINE="${DEADLINE:-500}"; T0=$SECONDS
export PYTHONUNBUFFERED=1
. benchmarks/tcache.sh
tcache_restore
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:$PWD"
# chunkproof itself, editable: its import names map folders (pyproject.toml), which a bare
# PYTHONPATH does not do
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    || echo "warning: pip install -e . failed (chunkproof.codegen, .kernels will not import)" >&2
left() { echo $((DEADLINE - (SECONDS - T0))); }
# the spec travels with the results (r/spec.txt); without one, each variant's defaults
# side by side with FLA, each line bounded by a fair share of the deadline
if [ -n "${FWDBWD_SPEC:-}" ]; then
    cp "$FWDBWD_SPEC" "$R/spec.txt"
else
    vs=(${VARIANTS:-gla gated_delta_rule kda dplr_delta_rule})
    for v in "${vs[@]}"; do echo "$v defaults --fla @$(( (DEADLINE - 60) / ${#vs[@]} ))"; done > "$R/spec.txt"
fi
FWDBWD_SPEC="$R/spec.txt"

NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$NGPU" -lt 2 ]; then      # one GPU: time first, with nothing beside it
    echo "one GPU: timing first, then the fuzz campaign and the tests"
    CUDA_VISIBLE_DEVICES=0 DEADLINE=$(left) bash benchmarks/sweep.sh "$FWDBWD_SPEC" "$R" "$(left)"
    [ -n "${GPU1_SPEC:-}" ] && CUDA_VISIBLE_DEVICES=0 DEADLINE=$(left) bash benchmarks/sweep.sh "$GPU1_SPEC" "$R/gpu1" "$(left)" > /dev/null 2>&1
    GPU1_SPEC=""
fi
SIDE=$([ "$NGPU" -lt 2 ] && echo 0 || echo 1)

(   # GPU 1 (or the only one, after the timing): fuzz campaign + gpu tests
    export CUDA_VISIBLE_DEVICES=$SIDE
    for v in ${VARIANTS:-gla gated_delta_rule kda dplr_delta_rule}; do
        [ "${FUZZ_EXAMPLES:-40}" = 0 ] && continue
        timeout -s INT -k 15 "$(( $(left) - 20 ))" python3 -m chunkproof fuzz --variant "$v" --device cuda \
            --dtype "${FUZZ_DTYPE:-bf16}" --examples "${FUZZ_EXAMPLES:-40}" --quiet --save "$R/fuzz/failures_$v.json" \
            --out "$R/fuzz/$v.md" > "$R/fuzz/$v.log" 2>&1 &
    done
    # a second timing spec (GPU1_SPEC) runs here, one process at a time, beside the rest
    if [ -n "${GPU1_SPEC:-}" ]; then
        DEADLINE=$(left) bash benchmarks/sweep.sh "$GPU1_SPEC" "$R/gpu1" "$(left)" > /dev/null 2>&1 &
    fi
    # one pytest process per variant: compiles are CPU-bound and single-threaded, and a run
    # cut at the deadline still reports every variant's tests so far
    for v in ${VARIANTS:-gla gated_delta_rule kda dplr_delta_rule}; do
        [ "${GPU_TESTS:-1}" = 0 ] && continue
        timeout -k 10 "$(( $(left) - 20 ))" python3 -m pytest -o addopts= -m gpu -k "$v" -v --tb=short -p no:cacheprovider tests \
            > "$R/gpu_tests_$v.log" 2>&1 &
    done
    wait
) &
gpu1=$!

# GPU 0: timing, one process at a time (on one GPU it ran above)
[ "$NGPU" -lt 2 ] || CUDA_VISIBLE_DEVICES=0 DEADLINE=$(left) bash benchmarks/sweep.sh "$FWDBWD_SPEC" "$R" "$(left)"
wait "$gpu1"
echo "done at $((SECONDS - T0)) s"
tail -n 3 "$R"/fuzz/*.log "$R"/gpu_tests_*.log 2>/dev/null
# the tables themselves, in case the files do not come back
cat "$R/sweep.md" "$R"/fuzz/*.md 2>/dev/null | grep '^|' | grep -v -- '---'
grep -h -E '^(FAILED|ERROR)|passed|failed' "$R"/gpu_tests_*.log 2>/dev/null | tail -n 20
[ -f "$R/gpu1/sweep.log" ] && cat "$R/gpu1/sweep.log"
tar -C "$OUT" -cf "$OUT/results.tar" r && rm -rf "$R"
[ "${TCACHE_PACK:-1}" = 0 ] || tcache_pack "$OUT"      # TCACHE_PACK=0: results only
ls -la "$OUT"
