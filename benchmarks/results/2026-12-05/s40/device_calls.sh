# The device calls of session 40, as run (each from the repository root on the lent machine; .whl carried, .tcache from call 3 on)

### call 1
LIMIT=550 WORKERS=12 TEST_K="not huge_heads" bash benchmarks/gpu_tests_all.sh

### call 2
LIMIT=560 VARIANTS="gated_delta_rule kda" bash benchmarks/gpu_bench.sh --mode both --fla-force

### call 3 (.tcache: call 2's tcache.part*; benchmarks/autotune_cache: call 2's autotune.tar)
LIMIT=565 VARIANTS="gated_delta_rule kda" bash benchmarks/gpu_bench.sh --mode both --fla-force --shapes 8x2048x16x64,2x16384x16x128,1x8192x96x128

### call 4
. benchmarks/gpu_setup.sh; . benchmarks/tcache.sh; tcache_restore
timeout 115 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 --mode fwd+bwd --dtype bf16 --iters 5 --out $OUT/profile.md

### call 5
. benchmarks/gpu_setup.sh; . benchmarks/tcache.sh; tcache_restore
timeout 30 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 4,4096,16,128 --mode fwd+bwd --dtype bf16 --iters 5 --out $OUT/p4096.md
timeout 60 python3 benchmarks/profile_kernels.py --variants gated_delta_rule --shape 2,16384,16,128 --mode fwd+bwd --dtype bf16 --iters 5 --configs 'reverse_dots=input' --out $OUT/p16k_rev.md
