#!/usr/bin/env bash
# One device call: per-kernel device time (profile_kernels.py) of the forward for
# FWD_VARIANTS (default all) and of forward + backward for FWDBWD_VARIANTS (default all)
# with CONFIGS (default ";grad_BV=128": the module's own TILING, then one override; the
# forward's: FWD_CONFIGS, default the module's own TILING alone), at
# SHAPE (default 4,4096,16,128), bf16, within LIMIT seconds (default 570; the forward gets
# FWD_S of them, default 150).  Writes under $OUT: setup.log, fwd.{md,log}, fwdbwd.{md,log}.
# Needs .whl/ (gpu_run.sh says how to fetch it).
set -u -o pipefail
cd "$(dirname "$0")/.."
. benchmarks/gpu_setup.sh
export PYTHONUNBUFFERED=1
T0=$SECONDS
LIMIT="${LIMIT:-570}"
SHAPE="${SHAPE:-4,4096,16,128}"
FWD_S="${FWD_S:-150}"
if [ -n "${FWD_VARIANTS-all}" ]; then
    timeout "$FWD_S" python3 benchmarks/profile_kernels.py --mode fwd --iters 5 --shape "$SHAPE" \
        --variants "${FWD_VARIANTS:-all}" --configs "${FWD_CONFIGS-}" --budget $((FWD_S - 30)) --out "$OUT/fwd.md" > "$OUT/fwd.log" 2>&1
    echo "fwd rc=$? at $((SECONDS - T0)) s"
fi
left=$((LIMIT - (SECONDS - T0) - 10))
timeout "$left" python3 benchmarks/profile_kernels.py --mode fwd+bwd --iters 5 --shape "$SHAPE" \
    --variants "${FWDBWD_VARIANTS:-all}" --configs "${CONFIGS-;grad_BV=128}" --budget $((left - 60)) \
    --out "$OUT/fwdbwd.md" > "$OUT/fwdbwd.log" 2>&1
echo "fwd+bwd rc=$? at $((SECONDS - T0)) s"
grep -h "^## \|^### " "$OUT/fwd.md" "$OUT/fwdbwd.md" 2>/dev/null
