#!/usr/bin/env bash
# The delta-rule variants with a short device budget: compile and autotune all three
# in parallel processes (Triton's compiles are CPU-bound and cached on disk), then
# time them one at a time from the warm cache.  Writes $OUT/<variant>.md/.json.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="$PWD:/tmp/site:${PYTHONPATH:-}" TRITON_CACHE_DIR=/tmp/tcache PYTHONUNBUFFERED=1
VS="${VARIANTS:-gated_delta_rule kda dplr_delta_rule}"
for v in $VS; do
    timeout "${WARM_TIMEOUT:-200}" python3 benchmarks/fwd_vs_fla.py --variants "$v" --no-extra-rows \
        --out "/tmp/warm_$v.md" > "$OUT/warm_$v.log" 2>&1 &
done
wait
for v in $VS; do
    timeout "${TIME_TIMEOUT:-65}" python3 benchmarks/fwd_vs_fla.py --variants "$v" --no-extra-rows \
        --out "$OUT/$v.md" > "/tmp/bench_$v.log" 2>&1
    echo "$v: exit $?"; grep -v "^ *%" "/tmp/bench_$v.log" | tail -4
done
