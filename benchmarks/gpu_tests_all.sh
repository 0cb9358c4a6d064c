#!/usr/bin/env bash
# One device call: every `pytest -m gpu` test (the GPU fuzz properties included) spread
# over WORKERS xdist processes (default: one per 12 GiB of GPU memory, at most 12: the
# kernels' first compiles are CPU-bound and the machine has 16 cores, and the tests time
# nothing, so sharing the GPU is harmless while it has the memory; a worker peaked at
# 11.6 GiB, and 12 of them on an 80 GB H100 failed 35 tests out of memory in session 48),
# bounded by LIMIT seconds (default 540; SIGINT, so pytest still prints what ran); TESTS:
# which files (default tests), TEST_K: a pytest -k expression.
# Needs .whl/ (gpu_setup.sh) and .whl/test/ with the pytest_xdist and execnet wheels.
# Writes under $OUT: setup.log, pytest_gpu.txt.
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
T0=$SECONDS
MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
WORKERS="${WORKERS:-$(( MIB / 12288 < 12 ? MIB / 12288 : 12 ))}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/pytest_gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/pytest_gpu.txt"
echo "workers: $WORKERS" >> "$OUT/pytest_gpu.txt"
timeout -s INT "${LIMIT:-540}" python3 -m pytest -o addopts= -m gpu -p no:cacheprovider -q -rfE \
    -n "$WORKERS" --durations=15 ${TEST_K:+-k "$TEST_K"} ${TESTS:-tests} >> "$OUT/pytest_gpu.txt" 2>&1
echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"
tail -n 30 "$OUT/pytest_gpu.txt"
