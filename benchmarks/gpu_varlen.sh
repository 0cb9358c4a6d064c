#!/usr/bin/env bash
# One device call for what issue 18 added: `pytest -m gpu` on the tests named by TESTS_K
# (a pytest -k expression; default: the GPU properties of grouped value heads, packed
# sequences and in-kernel l2norm, and every variant's fp32 / 16-bit kernel tests), given
# TESTS_S seconds (default 330), then benchmarks/varlen_vs_fixed.py for VARIANTS (default
# all) at SHAPE (default 4,4096,16,128) in what is left of LIMIT (default 570 s).
# Writes under $OUT: pytest_gpu.txt, varlen.json, varlen.md, varlen.log, setup.log.
# Needs .whl/ and .whl/test/ (gpu_run.sh says how to fetch them).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
T0=$SECONDS
LIMIT="${LIMIT:-570}"
k="${TESTS_K:-grouped_heads or packed_sequences or l2norm_in_kernel or gpu_fp32 or gpu_16bit}"
timeout "${TESTS_S:-330}" python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider -n "${WORKERS:-8}" -k "$k" \
    tests/test_kernels.py tests/test_recurrent.py \
    tests/test_fuzz.py > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest rc=$? at $((SECONDS - T0)) s" >> "$OUT/pytest_gpu.txt"
left=$((LIMIT - (SECONDS - T0) - 10))
variants="${VARIANTS:-all}"
timeout "$left" python3 benchmarks/varlen_vs_fixed.py --variant "${variants// /,}" --shape "${SHAPE:-4,4096,16,128}" \
    --out "$OUT" > "$OUT/varlen.log" 2>&1; echo "varlen rc=$? at $((SECONDS - T0)) s" >> "$OUT/varlen.log"
tail -12 "$OUT/pytest_gpu.txt"; grep -v "^$" "$OUT/varlen.log" | tail -30
