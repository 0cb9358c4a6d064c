#!/usr/bin/env bash
# On the lent GPU machine (no network): install the carried wheels, run ours vs FLA
# (benchmarks/vs_fla.py, one process per variant), then the GPU tests.  From the
# repository root:
#
#     bash benchmarks/gpu_run.sh [extra vs_fla.py arguments, e.g. --set KEY=VALUE --tag NAME]
#     JOB=fwdbwd SKIP_TESTS=1 bash benchmarks/gpu_run.sh   (forward + backward)
#
# JOB=fwd (the default) times the forwards only (vs_fla.py --mode fwd); JOB=fwdbwd also
# forward + backward.  VARIANTS (or FWDBWD_VARIANTS): which, default all four.  Each
# variant's process is bounded by `timeout`: VARIANT_TIMEOUT seconds if set (JOB=fwdbwd:
# default 130), else a fair share of what is left of BENCH_TIMEOUT (default 400 s).  Then
# `pytest -m gpu` (TEST_TIMEOUT, default 110 s; `-o addopts=`: one process, without the
# suite's xdist workers, which the GPU machine has no plugin for).  SKIP_TESTS=1 skips the tests.
# Sized for one ~9-minute call (about 15 s of setup).
#
# Needs .whl/ (git-ignored, carried with the run; fetch it here first with
#   for p in fla-core==0.6.0 einops==0.8.2 packaging==26.2; do python3 -m pip download --no-deps \
#     --only-binary=:all: --python-version 3.12 --implementation cp --platform any -d .whl "$p"; done
# ): fla_core, einops, packaging
# wheels at top level; .whl/test/ holds pytest + hypothesis and their pure-python
# deps, installed only if the machine lacks them.  Writes under $OUT (default /tmp/out):
# versions.log, $JOB.log, vs_fla_$JOB.md, vs_fla_$JOB.tar (the per-variant JSON: the
# device tool brings back few files), gpu_tests.log.  The JSON is rewritten after every
# phase, so a variant cut short keeps what it measured; $JOB.log has a line per phase.
# A failing benchmark does not stop the tests; the exit status is the benchmark's, or
# the tests' if the benchmark passed and the tests failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-400}"
TEST_TIMEOUT="${TEST_TIMEOUT:-110}"
export PYTHONUNBUFFERED=1
T0=$SECONDS

# TCACHE=1: Triton's cache and autotune results from .tcache/, packed back into
# $OUT/tcache.part* at the end (benchmarks/tcache.sh)
if [ "${TCACHE:-0}" = 1 ]; then
    . benchmarks/tcache.sh
    tcache_restore
    trap 'tcache_pack "$OUT"; ls -la "$OUT"' EXIT
fi

shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "${wheels[@]}" \
    || { echo "pip failed; unpacking the (pure-python) wheels instead" >&2
         for w in "${wheels[@]}"; do python3 -m zipfile -e "$w" /tmp/site; done; }
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
else
    echo "warning: no wheels under .whl/ (FLA will be missing)" >&2
fi
if ! python3 -c "import pytest, hypothesis" 2>/dev/null; then
    twheels=(.whl/test/*.whl)
    if ((${#twheels[@]})); then
        # appended, not prepended: whatever the machine already has wins
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site-test "${twheels[@]}" && export PYTHONPATH="${PYTHONPATH:-}:/tmp/site-test"
    fi
fi
export PYTHONPATH="$PWD:${PYTHONPATH}"
# chunkproof itself, editable: its import names map folders (pyproject.toml), which a bare
# PYTHONPATH does not do
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
    || echo "warning: pip install -e . failed (chunkproof.codegen, .kernels will not import)" >&2

{
    nvidia-smi || true
    python3 - <<'EOF'
import platform, sys
print("python", platform.python_version(), sys.executable)
# fla is not imported here (slow); its version is read from the installed metadata
for m in ("torch", "triton", "einops", "packaging", "pytest", "hypothesis", "sympy", "numpy"):
    try:
        mod = __import__(m)
        print(f"{m:12s}", getattr(mod, "__version__", "?"), getattr(mod, "__file__", ""))
    except Exception as e:
        print(f"{m:12s} MISSING ({type(e).__name__}: {e})")
import importlib.metadata, importlib.util
spec = importlib.util.find_spec("fla")
try:
    print(f"{'fla':12s}", importlib.metadata.version("fla-core"), spec.origin if spec else "MISSING")
except Exception as e:
    print(f"{'fla':12s} MISSING ({type(e).__name__}: {e})")
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name() if torch.cuda.is_available() else "")
EOF
    echo "setup took $((SECONDS - T0)) s"
} 2>&1 | tee "$OUT/versions.log"

JOB="${JOB:-fwd}"
case "$JOB" in
    fwd) mode=fwd; per_variant="${VARIANT_TIMEOUT:-}" ;;
    fwdbwd) mode=fwd+bwd; per_variant="${VARIANT_TIMEOUT:-130}" ;;
    *) echo "JOB must be fwd or fwdbwd, got $JOB" >&2; exit 2 ;;
esac
variants=(${VARIANTS:-${FWDBWD_VARIANTS:-gla gated_delta_rule kda dplr_delta_rule}})
bench_rc=0
for i in "${!variants[@]}"; do
    v="${variants[$i]}"
    # without VARIANT_TIMEOUT: a fair share of what is left of BENCH_TIMEOUT
    lim="${per_variant:-$(( (BENCH_TIMEOUT - (SECONDS - T0)) / (${#variants[@]} - i) ))}"
    [ "$lim" -gt 20 ] || { echo "== $v: not run, BENCH_TIMEOUT spent"; continue; }
    echo "== benchmarks/vs_fla.py --variant $v --mode $mode (limit $lim s, at $((SECONDS - T0)) s)"
    # -k: SIGKILL 10 s after the SIGTERM, should the process hang
    timeout -k 10 "$lim" python3 benchmarks/vs_fla.py --variant "$v" --mode "$mode" \
        --json-dir "$OUT/$JOB" "$@" 2>&1 | grep -v _warn_once | tee -a "$OUT/$JOB.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || bench_rc=$rc
done
python3 benchmarks/vs_fla.py --table "$OUT/$JOB" --out "$OUT/vs_fla_$JOB.md" || bench_rc=$?
tar -C "$OUT" -cf "$OUT/vs_fla_$JOB.tar" "$JOB" && rm -rf "${OUT:?}/$JOB"
echo "benchmark exit status: $bench_rc (at $((SECONDS - T0)) s)"

test_rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    echo "== pytest -m gpu (limit ${TEST_TIMEOUT} s)"
    timeout -k 10 "$TEST_TIMEOUT" python3 -m pytest -o addopts= -m gpu -v --durations=15 -p no:cacheprovider tests 2>&1 \
        | tee "$OUT/gpu_tests.log"
    test_rc=$?
    if [ "$test_rc" -eq 5 ]; then
        echo "(pytest: no tests marked gpu were collected)"
        test_rc=0
    fi
    echo "pytest exit status: $test_rc (at $((SECONDS - T0)) s)"
fi

if [ "$bench_rc" -ne 0 ]; then exit "$bench_rc"; fi
exit "$test_rc"
