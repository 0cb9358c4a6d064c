#!/usr/bin/env bash
# On the lent GPU machine (no network): install the carried wheels, run the forward
# benchmark against FLA, then the GPU tests.  From the repository root:
#
#     bash benchmarks/gpu_run.sh [extra fwd_vs_fla.py arguments, e.g. --variants kda,dplr_delta_rule]
#     JOB=fwdbwd SKIP_TESTS=1 bash benchmarks/gpu_run.sh   (forward + backward, fwdbwd_vs_fla.py,
#         one process per variant: FWDBWD_VARIANTS, VARIANT_TIMEOUT seconds each, default 130)
#
# Sized for one ~9-minute call: about 15 s of setup, the benchmark (BENCH_TIMEOUT, default
# 400 s; the script itself plans for BENCH_TIMEOUT - 25 s, gives each variant a fair share of
# it, runs each variant in its own process and kills one that overruns), then
# `pytest -m gpu` (TEST_TIMEOUT, default 110 s).  SKIP_TESTS=1 skips the tests.
# (This replaces gpu_delta_run.sh: per-variant processes and budgets are in the benchmark.)
#
# Needs .whl/ (git-ignored, carried with the run; fetch it here first with
#   for p in fla-core==0.6.0 einops==0.8.2 packaging==26.2; do python3 -m pip download --no-deps \
#     --only-binary=:all: --python-version 3.12 --implementation cp --platform any -d .whl "$p"; done
# see benchmarks/fwd_vs_fla.py): fla_core, einops, packaging
# wheels at top level; .whl/test/ holds pytest + hypothesis and their pure-python
# deps, installed only if the machine lacks them.  Writes 5 files under $OUT (default
# /tmp/out): versions.log, bench.log, fwd_vs_fla.md, fwd_vs_fla.json, gpu_tests.log.
# The markdown/JSON are rewritten after every phase, so a run cut short keeps what it
# measured; bench.log has a "[variant] phase ... N s" line per phase.
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

if [ "${JOB:-fwd}" = fwdbwd ]; then
    # forward + backward vs FLA, one process per variant, each bounded by VARIANT_TIMEOUT
    for v in ${FWDBWD_VARIANTS:-gla gated_delta_rule kda dplr_delta_rule}; do
        echo "== benchmarks/fwdbwd_vs_fla.py --variant $v (limit ${VARIANT_TIMEOUT:-130} s, at $((SECONDS - T0)) s)"
        timeout -k 10 "${VARIANT_TIMEOUT:-130}" python3 benchmarks/fwdbwd_vs_fla.py --variant "$v" \
            --json-dir "$OUT/fwdbwd" "$@" 2>&1 | grep -v _warn_once | tee -a "$OUT/fwdbwd.log"
    done
    python3 benchmarks/fwdbwd_vs_fla.py --table "$OUT/fwdbwd" --out "$OUT/fwdbwd_vs_fla.md"
    bench_rc=$?
else
    echo "== benchmarks/fwd_vs_fla.py (limit ${BENCH_TIMEOUT} s)"
    # -k: SIGKILL 15 s after the SIGTERM, should the clean-up hang
    timeout -k 15 "$BENCH_TIMEOUT" python3 benchmarks/fwd_vs_fla.py \
        --out "$OUT/fwd_vs_fla.md" --json "$OUT/fwd_vs_fla.json" \
        --total-budget "$((BENCH_TIMEOUT > 60 ? BENCH_TIMEOUT - 25 : BENCH_TIMEOUT))" "$@" 2>&1 \
        | tee "$OUT/bench.log"
    bench_rc=$?
fi
echo "benchmark exit status: $bench_rc (at $((SECONDS - T0)) s)"

test_rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    echo "== pytest -m gpu (limit ${TEST_TIMEOUT} s)"
    timeout -k 10 "$TEST_TIMEOUT" python3 -m pytest -m gpu -v --durations=15 -p no:cacheprovider tests 2>&1 \
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
