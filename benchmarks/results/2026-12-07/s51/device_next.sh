# The next call for session 51's regression, from the repository root on the lent machine.
# Carry .whl, ab_old (125ebda's modules and runtime: GLA 5.899 ms in session 49) and
# ab_s51_nosplit (main's modules with the split forms off in the runtime), all untracked.
# It profiles GLA's forward + backward kernel by kernel at (2, 16384, 16, 128): main
# (46.760 ms in session 51), then the no-split probe, then 125ebda.
set -u
OUT="${OUT:-/tmp/out}"
. benchmarks/gpu_setup.sh > "$OUT/setup.log" 2>&1
mkdir -p /tmp/main_mods && cp generated_kernels/*.py /tmp/main_mods/
for side in main nosplit old; do
    case $side in
        main) cp /tmp/main_mods/*.py generated_kernels/ ;;
        nosplit) cp ab_s51_nosplit/_runtime.py generated_kernels/ ;;
        old) cp ab_old/gla.py ab_old/_runtime.py generated_kernels/ ;;
    esac
    timeout 170 python benchmarks/profile_kernels.py --variants gla --shape 2,16384,16,128 --mode fwd+bwd \
        > "$OUT/profile_$side.md" 2>&1
    echo "== $side"; grep -A14 "^### ours" "$OUT/profile_$side.md" | grep -v "^- "
done
cp /tmp/main_mods/*.py generated_kernels/
