#!/usr/bin/env bash
# One device call: `chunkproof bench` side by side with FLA for VARIANTS (gpu_bench.sh,
# given BENCH_S seconds, default 330), then `pytest -m gpu` on the tests named by TESTS_K
# (a pytest -k expression, default: the same variants) in what is left of LIMIT (default
# 570 s).  Extra arguments go to `chunkproof bench`.  Writes under $OUT: gpu_bench.sh's
# files, pytest_gpu.txt.  Needs .whl/ and .whl/test/ (gpu_run.sh says how to fetch them).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
T0=$SECONDS
LIMIT="${LIMIT:-570}"
VARIANTS="${VARIANTS:-gla}"
LIMIT="${BENCH_S:-330}" VARIANTS="$VARIANTS" bash benchmarks/gpu_bench.sh "$@" > "$OUT/bench_stdout.md" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/test/*.whl >> "$OUT/tests.log" 2>&1
export PYTHONPATH=/tmp/site
k="${TESTS_K:-$(echo "$VARIANTS" | sed 's/ / or /g')}"
left=$((LIMIT - (SECONDS - T0) - 15))
timeout "$left" python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -k "$k" tests/test_kernels.py \
    tests/test_backward.py > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"
tail -8 "$OUT/pytest_gpu.txt"; grep -v "^$" "$OUT/bench_stdout.md" | tail -24
