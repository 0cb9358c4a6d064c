#!/usr/bin/env bash
# The first failing example of fuzz cells on the GPU, each cell in its own process
# (benchmarks/fuzz_probe.py), with CUDA_LAUNCH_BLOCKING=1.  CELLS: "variant:property:n ...".
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl .whl/test/*.whl > "$OUT/setup.log" 2>&1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$OUT/setup.log" 2>&1
for cell in ${CELLS:-delta_rule:split_sequence:40}; do
    IFS=: read -r v p n <<< "$cell"
    CUDA_LAUNCH_BLOCKING=1 timeout "${EACH:-150}" python3 benchmarks/fuzz_probe.py "$v" "$p" "$n" > "$OUT/probe_${v}_$p.txt" 2>&1
    echo "== $cell rc=$?"; grep -E "^\[|FAILS|Error|error" "$OUT/probe_${v}_$p.txt" | tail -6
done
