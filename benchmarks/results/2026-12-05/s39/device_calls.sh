# The device calls of session 39, as run (each: bash <this part> from the repository root on the lent machine, .whl carried)

### call 2
. benchmarks/gpu_setup.sh
E="h0=True fs=True"
P=benchmarks/gpu_replay_probe.py
export PROBE_TIMEOUT=170
(OUT=$OUT/a python3 $P dplr_delta_rule extreme_gates bf16 "B=2 T=1000 H=4 K=128 V=64 $E gates=underflow beta=zero seed=1" "B=2 T=1000 H=4 K=128 V=128 $E gates=underflow beta=zero seed=1" "B=2 T=1024 H=4 K=128 V=64 $E gates=typical beta=random seed=1" > $OUT/a.txt 2>&1) &
(OUT=$OUT/b python3 $P dplr_delta_rule extreme_gates bf16 "B=2 T=1000 H=4 K=128 V=64 $E gates=underflow beta=zero seed=1 | autotune=False" "B=2 T=1000 H=4 K=128 V=64 $E gates=underflow beta=zero seed=1 | autotune=False grad_BK=64" "B=2 T=1000 H=4 K=64 V=64 $E gates=typical beta=random seed=1" > $OUT/b.txt 2>&1) &
(OUT=$OUT/c python3 $P dplr_delta_rule extreme_gates bf16 "san:B=2 T=1000 H=4 K=128 V=64 $E gates=underflow beta=zero seed=1" > $OUT/c.txt 2>&1) &
(OUT=$OUT/d python3 $P dplr_delta_rule recurrent_form bf16 "B=2 T=300 H=2 K=128 V=64 $E gates=typical beta=random seed=1" "B=2 T=300 H=2 K=128 V=128 $E gates=typical beta=random seed=1" > $OUT/d.txt 2>&1) &
wait
tail -n 5 $OUT/?.txt

### call 3
. benchmarks/gpu_setup.sh
E="h0=True fs=True"
P=benchmarks/gpu_replay_probe.py
R="B=2 T=300 H=2 K=128 V=128 $E gates=typical beta=random seed=1"
X="B=2 T=1000 H=4 K=128 V=64 $E gates=underflow beta=zero seed=1"
export PROBE_TIMEOUT=200 TRITON_PRINT_AUTOTUNING=1
(OUT=$OUT/s1 python3 $P dplr_delta_rule recurrent_form bf16 "$R" "$R" "$R" > $OUT/s1.txt 2>&1) &
(OUT=$OUT/s2 python3 $P dplr_delta_rule recurrent_form bf16 "$R | autotune=False" "$R | autotune=False grad_warps=4" "$R | autotune=False scan_warps=4 out_warps=8 prep_warps=8" > $OUT/s2.txt 2>&1) &
(OUT=$OUT/s3 python3 $P dplr_delta_rule recurrent_form bf16 "san:$R" > $OUT/s3.txt 2>&1) &
(OUT=$OUT/s4 python3 $P dplr_delta_rule extreme_gates bf16 "$X" "$X" "$X | autotune=False grad_warps=4" > $OUT/s4.txt 2>&1) &
wait
cd $OUT && tar -cf logs.tar s1 s2 s3 s4 && rm -rf s1 s2 s3 s4
tail -n 5 $OUT/s?.txt

### call 4
. benchmarks/gpu_setup.sh
E="h0=True fs=True"
P=benchmarks/gpu_replay_probe.py
R="B=2 T=300 H=2 K=128 V=128 $E gates=typical beta=random seed=1"
R64="B=2 T=300 H=2 K=128 V=64 $E gates=typical beta=random seed=1"
export PROBE_TIMEOUT=200
(CHUNKPROOF_FUZZ_DEBUG=1 OUT=$OUT/a python3 $P dplr_delta_rule recurrent_form bf16 "$R" "$R | autotune=False BV=32" "$R | autotune=False BV=32 scan_warps=4" "$R | autotune=False BV=32 out_warps=8" "$R64 | autotune=False BV=32" > $OUT/a.txt 2>&1) &
(OUT=$OUT/b python3 $P dplr_delta_rule recurrent_form bf16 "init:$R | autotune=False BV=32" > $OUT/b.txt 2>&1) &
(OUT=$OUT/c python3 $P kda recurrent_form bf16 "$R" "$R | autotune=False BV=32" > $OUT/c.txt 2>&1) &
(OUT=$OUT/d python3 $P gated_delta_rule recurrent_form bf16 "$R" "$R | autotune=False BV=32" > $OUT/d.txt 2>&1) &
(OUT=$OUT/e python3 $P dplr_delta_rule matches_fp64 bf16 "$R | autotune=False BV=32" "B=2 T=1024 H=2 K=128 V=128 $E gates=typical beta=random seed=1 | autotune=False BV=32" > $OUT/e.txt 2>&1) &
wait
cd $OUT && tar -cf logs.tar a b c d e && rm -rf a b c d e
tail -n 6 $OUT/?.txt

### call 5
. benchmarks/gpu_setup.sh
E="h0=True fs=True gates=typical beta=random seed=1"
P=benchmarks/gpu_replay_probe.py
export PROBE_TIMEOUT=200
(OUT=$OUT/p python3 $P kda matches_fp64 bf16 "B=2 T=300 H=2 K=128 V=32 $E | autotune=False out_warps=4" "B=2 T=300 H=2 K=32 V=32 $E | autotune=False out_warps=4" "B=2 T=300 H=2 K=128 V=128 $E" > $OUT/p_kda.txt 2>&1;
 OUT=$OUT/q python3 $P dplr_delta_rule matches_fp64 bf16 "B=2 T=300 H=2 K=128 V=32 $E | autotune=False out_warps=4" "B=2 T=300 H=2 K=32 V=32 $E | autotune=False out_warps=4" > $OUT/p_dplr.txt 2>&1) &
LIMIT=520 WORKERS=12 bash benchmarks/gpu_tests_all.sh > /dev/null 2>&1
wait
cd $OUT && tar -cf logs.tar p q 2>/dev/null; rm -rf p q
tail -n 4 $OUT/p_*.txt; grep -E "^(FAILED|ERROR)|passed|failed|rc=" $OUT/pytest_gpu.txt | tail -40

### call 6
. benchmarks/gpu_setup.sh
E="h0=True fs=True gates=typical beta=random seed=1"
P=benchmarks/gpu_replay_probe.py
export PROBE_TIMEOUT=200
(OUT=$OUT/p python3 $P kda matches_fp64 bf16 "B=2 T=300 H=2 K=128 V=32 $E | autotune=False out_warps=4" "B=2 T=300 H=2 K=128 V=32 $E" > $OUT/p_kda.txt 2>&1;
 OUT=$OUT/r python3 $P gated_delta_rule matches_fp64 bf16 "B=2 T=300 H=2 K=32 V=32 $E" "B=2 T=300 H=2 K=32 V=128 $E" > $OUT/p_gdn.txt 2>&1) &
(OUT=$OUT/q python3 $P dplr_delta_rule matches_fp64 bf16 "B=2 T=300 H=2 K=128 V=32 $E | autotune=False out_warps=4" "B=2 T=300 H=2 K=128 V=128 $E | BV=32 autotune=False" > $OUT/p_dplr.txt 2>&1;
 OUT=$OUT/s python3 $P dplr_delta_rule recurrent_form bf16 "B=2 T=300 H=2 K=128 V=128 $E" > $OUT/p_dplr_rec.txt 2>&1) &
LIMIT=330 WORKERS=12 TESTS="tests/test_fuzz.py tests/test_kernels.py" TEST_K="(bf16 or 16bit) and (kda or dplr)" bash benchmarks/gpu_tests_all.sh > /dev/null 2>&1
wait
cd $OUT && tar -cf logs.tar p q r s 2>/dev/null; rm -rf p q r s
tail -n 4 $OUT/p_*.txt; grep -E "^(FAILED|ERROR)|passed|failed|rc=" $OUT/pytest_gpu.txt | tail -30
