#!/usr/bin/env bash
# On the lent GPU machine (no network): install the carried wheels, run the GPU
# tests, then the forward benchmark against FLA.  From the repository root:
#
#     bash benchmarks/gpu_run.sh [extra fwd_vs_fla.py arguments, e.g. --shape 2,16384,16,128]
#
# Needs .whl/ (carried; see benchmarks/fwd_vs_fla.py): fla_core, einops, packaging
# wheels at top level; .whl/test/ holds pytest + hypothesis and their pure-python
# deps, installed only if the machine lacks them.  Writes under $OUT (default
# /tmp/out): gpu_tests.log, bench.log, fwd_vs_fla.md, fwd_vs_fla.json.
# A failing test run does not stop the benchmark; the exit status is the
# benchmark's, or the tests' if the benchmark passed and the tests failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"

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
for m in ("torch", "triton", "fla", "einops", "packaging", "pytest", "hypothesis", "sympy", "numpy"):
    try:
        mod = __import__(m)
        print(f"{m:12s}", getattr(mod, "__version__", "?"), getattr(mod, "__file__", ""))
    except Exception as e:
        print(f"{m:12s} MISSING ({type(e).__name__}: {e})")
import torch
print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name() if torch.cuda.is_available() else "")
EOF
} 2>&1 | tee "$OUT/versions.log"

echo "== benchmarks/fwd_vs_fla.py"
timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/fwd_vs_fla.py --out "$OUT/fwd_vs_fla.md" --json "$OUT/fwd_vs_fla.json" "$@" 2>&1 \
    | tee "$OUT/bench.log"
bench_rc=$?
echo "benchmark exit status: $bench_rc"

echo "== pytest -m gpu"
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu -q tests 2>&1 | tee "$OUT/gpu_tests.log"
test_rc=$?
if [ "$test_rc" -eq 5 ]; then
    echo "(pytest: no tests marked gpu were collected)"
    test_rc=0
fi
echo "pytest exit status: $test_rc"

if [ "$bench_rc" -ne 0 ]; then exit "$bench_rc"; fi
exit "$test_rc"
