# Session 52's call for session 51's regression, from the repository root on the lent machine.
# Carry .whl, ab_s52_batched (main's runtime with diag_blocks_batched.patch applied),
# ab_old (125ebda's GLA module and runtime: 5.899 ms in session 49) and ab_s51_nosplit
# (main's modules, the split forms off in the runtime), all untracked.
# GLA's forward + backward profiled kernel by kernel at (2, 16384, 16, 128), per side.
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu.txt" 2>&1
mkdir -p /tmp/main_mods && cp generated_kernels/*.py /tmp/main_mods/
for side in ${SIDES:-main batched old nosplit}; do
    cp /tmp/main_mods/*.py generated_kernels/
    case $side in
        batched) cp ab_s52_batched/_runtime.py generated_kernels/ ;;
        nosplit) cp ab_s51_nosplit/_runtime.py generated_kernels/ ;;
        old) cp ab_old/gla.py ab_old/_runtime.py generated_kernels/ ;;
    esac
    t0=$(date +%s)
    timeout ${PER:-125} python benchmarks/profile_kernels.py --variants ${VAR:-gla} --shape 2,16384,16,128 --mode fwd+bwd \
        > "$OUT/profile_$side.md" 2>&1
    echo "== $side rc=$? $(( $(date +%s) - t0 )) s"; grep -A16 "^### ours" "$OUT/profile_$side.md" | grep -v "^- "
done
cp /tmp/main_mods/*.py generated_kernels/
