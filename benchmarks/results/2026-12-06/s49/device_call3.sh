# Session 49's third call (from the repository root on the lent machine; .whl carried,
# ab_old/ = 125ebda's modules, untracked): the precise lines' split mix (diagonal
# blocks exact, the rest tf32) timed kernel by kernel for GLA and RWKV-6, then RWKV-6's
# modules of 125ebda for where its time went before session 48's planner.
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
timeout 150 python benchmarks/profile_kernels.py --variants gla,rwkv6 --shape 2,16384,16,128 --mode fwd+bwd \
    > "$OUT/new.md" 2>&1
grep -A12 "^### ours" "$OUT/new.md" | grep -v "^- "
cp ab_old/rwkv6.py ab_old/_runtime.py generated_kernels/
timeout 80 python benchmarks/profile_kernels.py --variants rwkv6 --shape 2,16384,16,128 --mode fwd+bwd \
    > "$OUT/old_rwkv6.md" 2>&1
grep -A12 "^### ours" "$OUT/old_rwkv6.md" | grep -v "^- "
