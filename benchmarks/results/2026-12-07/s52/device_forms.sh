# Session 52: the two batched forms of the diagonal blocks kernel by kernel at
# (2, 16384, 16, 128), forward + backward: the working tree's runtime (tf32x3) and
# ab_s52_batched/_runtime.py (ieee), for the SIDES given as variant:form.
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
cp generated_kernels/_runtime.py /tmp/runtime_x3.py
for side in ${SIDES:-gla:x3 kda:ieee rwkv6:ieee}; do
    v=${side%%:*}; form=${side##*:}
    if [ "$form" = ieee ]; then cp ab_s52_batched/_runtime.py generated_kernels/; else cp /tmp/runtime_x3.py generated_kernels/_runtime.py; fi
    t0=$(date +%s)
    timeout ${PER:-130} python benchmarks/profile_kernels.py --variants $v --shape 2,16384,16,128 --mode fwd+bwd \
        > "$OUT/profile_${v}_$form.md" 2>&1
    echo "== $v $form rc=$? $(( $(date +%s) - t0 )) s"; grep -A12 "^### ours" "$OUT/profile_${v}_$form.md" | grep -v "^- \|^$\|^|---"
done
cp /tmp/runtime_x3.py generated_kernels/_runtime.py
