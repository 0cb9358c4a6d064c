# second device call of 2026-12-02 (session 23): simple_gla side by side, then the GPU
# tests and a short bf16 fuzz campaign of the two new variants
T0=$SECONDS
LIMIT=300 VARIANTS="simple_gla" bash benchmarks/gpu_bench.sh --shapes 4x4096x16x128 --fla-force > $OUT/bench_stdout.md 2>&1
cp /tmp/bench_part0.log $OUT/bench_part0.log 2>/dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/test/*.whl >> $OUT/tests.log 2>&1
export PYTHONPATH=/tmp/site
left=$((560 - (SECONDS - T0)))
timeout $((left / 2)) python3 -m pytest -o addopts= -m gpu -q -x -p no:cacheprovider -k "delta_rule or simple_gla" tests/test_kernels.py tests/test_backward.py > $OUT/pytest_gpu.txt 2>&1; echo "pytest rc=$?" >> $OUT/pytest_gpu.txt
left=$((570 - (SECONDS - T0)))
timeout -s INT $((left - 10)) python3 -m chunkproof fuzz --variant delta_rule --variant simple_gla --device cuda --dtype bf16 --examples 8 --quiet --no-save --no-db --out $OUT/fuzz_bf16.md > $OUT/fuzz.log 2>&1; echo "fuzz rc=$?" >> $OUT/fuzz.log
tail -5 $OUT/pytest_gpu.txt; cat $OUT/fuzz_bf16.md 2>/dev/null | tail -14; grep -v "^$" $OUT/bench_stdout.md | tail -8
