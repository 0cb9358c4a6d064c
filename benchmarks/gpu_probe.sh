#!/usr/bin/env bash
# The first failing example of fuzz cells on the GPU, each cell in its own process
# (benchmarks/fuzz_probe.py), with CUDA_LAUNCH_BLOCKING=1.  CELLS: "variant:property:n ...".
set -u
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
for cell in ${CELLS:-delta_rule:split_sequence:40}; do
    IFS=: read -r v p n <<< "$cell"
    CUDA_LAUNCH_BLOCKING=1 timeout "${EACH:-150}" python3 benchmarks/fuzz_probe.py "$v" "$p" "$n" > "$OUT/probe_${v}_$p.txt" 2>&1
    echo "== $cell rc=$?"; grep -E "^\[|FAILS|Error|error" "$OUT/probe_${v}_$p.txt" | tail -6
done
