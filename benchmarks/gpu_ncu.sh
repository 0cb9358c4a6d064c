#!/usr/bin/env bash
# One device call: Nsight Compute's counters for every kernel of one call of each variant
# in VARIANTS (default "kda delta_rule") and mode in MODES (default fwd), at SHAPE (default
# 4,4096,16,128) bf16, plus each compiled kernel's registers, spills and shared memory
# (benchmarks/ncu_kernels.py).  The resources pass runs first, without the profiler, so a
# machine where ncu cannot read counters still answers that part.  Writes under $OUT:
# setup.log, resources.md, ncu_<variant>_<mode>.csv (ncu --csv --page details), run.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
. benchmarks/tcache.sh
tcache_restore >> "$OUT/setup.log" 2>&1
export PYTHONUNBUFFERED=1
T0=$SECONDS
LIMIT="${LIMIT:-540}"
SHAPE="${SHAPE:-4,4096,16,128}"
SECTIONS="SpeedOfLight LaunchStats Occupancy WarpStateStats MemoryWorkloadAnalysis ComputeWorkloadAnalysis SchedulerStats"
sec=(); for s in $SECTIONS; do sec+=(--section "$s"); done
for v in ${VARIANTS:-kda delta_rule}; do
    for m in ${MODES:-fwd}; do
        left=$((LIMIT - (SECONDS - T0)))
        [ "$left" -gt 40 ] || { echo "out of time before $v $m"; break 2; }
        timeout "$left" python3 benchmarks/ncu_kernels.py --variant "$v" --mode "$m" --shape "$SHAPE" \
            --out "$OUT/resources.md" >> "$OUT/run.log" 2>&1
        echo "$v $m resources rc=$? at $((SECONDS - T0)) s"
        left=$((LIMIT - (SECONDS - T0)))
        timeout "$left" ncu --profile-from-start off --clock-control none "${sec[@]}" --csv --page details \
            --log-file "$OUT/ncu_${v}_${m/+/}.csv" \
            python3 benchmarks/ncu_kernels.py --variant "$v" --mode "$m" --shape "$SHAPE" >> "$OUT/run.log" 2>&1
        echo "$v $m ncu rc=$? at $((SECONDS - T0)) s"
    done
done
