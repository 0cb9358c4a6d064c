#!/usr/bin/env bash
# benchmarks/cuda_grad_probe.py on the GPU machine, each variant in its own process.
set -u
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
S1="B=2 T=2 H=1 K=73 V=16 beta=zero seed=7134646"
S2="B=2 T=2 H=1 K=73 V=16 beta=random seed=7134646"
S3="B=2 T=2 H=1 K=64 V=16 beta=zero seed=7134646"
S4="B=1 T=2 H=1 K=73 V=16 beta=zero seed=7134646"
S5="B=2 T=2 H=1 K=73 V=16 beta=zero seed=7134646 dtype=fp32"
for v in delta_rule gated_delta_rule kda; do
    CUDA_LAUNCH_BLOCKING=1 timeout 100 python3 benchmarks/cuda_grad_probe.py $v "$S1" "$S2" "$S3" "$S4" "$S5" 2>&1 | tail -6
done
