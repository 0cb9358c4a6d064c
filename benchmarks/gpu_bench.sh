#!/usr/bin/env bash
# `chunkproof bench` on the lent GPU machine (no network), with all its defaults unless
# told otherwise, inside one device call.  From the repository root:
#
#     bash benchmarks/gpu_bench.sh [extra `chunkproof bench` arguments, e.g. --mode fwd]
#
# Carry .whl (fla_core, einops, packaging wheels at its top level; see gpu_run.sh for how
# they were fetched) and, from the second call on, .tcache (Triton's compile cache and
# FLA's autotune results, benchmarks/tcache.sh): without it FLA's first compile and
# autotune take 33-97 s per variant, and a default run may not finish in one call.
#
# INSTALL=0 skips the installs (a machine already set up; a dry run elsewhere).
# LIMIT (default 480) bounds the whole script in seconds.  `chunkproof bench --budget`
# starts no new side once LIMIT - 150 s have gone (a first call of FLA's cannot be cut
# short, and the cache must be packed), and `timeout` stops it at LIMIT - 45 s whatever
# it is doing; its JSON is rewritten whole after every row, so a run cut short keeps what
# it measured ("complete": false).  VARIANTS (default: every generated variant) are
# shared out over the GPUs when there are several (SPLIT=0: all on GPU 0), one process
# per GPU, each ours and FLA's side by side; the parts are merged into one JSON.
#
# Writes under $OUT (default /tmp/out), at most 8 files as the device tool brings back:
# latest.json, bench.md (the table), bench.log (versions, progress of every process),
# tcache.part* (copy them into .tcache/ here for the next call).  Exit status: that of
# `chunkproof bench` (1: a row without a time of ours; its notes say why).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
LIMIT="${LIMIT:-480}"
T0=$SECONDS
export PYTHONUNBUFFERED=1
LOG="$OUT/bench.log"
: > "$LOG"

. benchmarks/tcache.sh
tcache_restore >> "$LOG" 2>&1
trap 'tcache_pack "$OUT"; ls -la "$OUT" >> "$LOG"' EXIT

shopt -s nullglob
wheels=(.whl/*.whl)
if [ "${INSTALL:-1}" = 0 ]; then
    echo "INSTALL=0: the environment as it is" >> "$LOG"
elif ((${#wheels[@]})); then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "${wheels[@]}" >> "$LOG" 2>&1 \
    || { echo "pip failed; unpacking the (pure-python) wheels instead" >> "$LOG"
         for w in "${wheels[@]}"; do python3 -m zipfile -e "$w" /tmp/site; done; }
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
else
    echo "warning: no wheels under .whl/ (FLA will be missing)" | tee -a "$LOG" >&2
fi
# editable: the package maps folders to import names (pyproject.toml), which PYTHONPATH alone does not
[ "${INSTALL:-1}" = 0 ] || python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$LOG" 2>&1 \
    || echo "warning: pip install -e . failed" | tee -a "$LOG" >&2
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  echo "setup took $((SECONDS - T0)) s"; } >> "$LOG" 2>&1

budget=$((LIMIT - (SECONDS - T0) - 150))
hard=$((LIMIT - (SECONDS - T0) - 45))
[ "$budget" -gt 30 ] || { echo "LIMIT=$LIMIT leaves no time to measure" | tee -a "$LOG" >&2; exit 2; }
variants=(${VARIANTS:-$(python3 -c "from chunkproof.fuzz.cases import VARIANTS; print(' '.join(VARIANTS))")})
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "${SPLIT:-1}" = 1 ] || ngpu=1
[ "$ngpu" -ge 1 ] || ngpu=1
[ "$ngpu" -le "${#variants[@]}" ] || ngpu=${#variants[@]}

parts=()
pids=()
for ((g = 0; g < ngpu; g++)); do
    mine=()
    for ((i = g; i < ${#variants[@]}; i += ngpu)); do mine+=(--variant "${variants[$i]}"); done
    part="/tmp/bench_part$g.json"
    parts+=("$part")
    echo "== GPU $g: ${mine[*]} (budget $budget s, stopped at $hard s)" >> "$LOG"
    CUDA_VISIBLE_DEVICES=$g timeout -k 10 "$hard" python3 -m chunkproof bench "${mine[@]}" --budget "$budget" \
        -o "$part" "$@" > "/tmp/bench_part$g.md" 2> "/tmp/bench_part$g.log" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for ((g = 0; g < ngpu; g++)); do
    echo "== GPU $g progress" >> "$LOG"
    grep -v _warn_once "/tmp/bench_part$g.log" >> "$LOG"
done
have=()
for p in "${parts[@]}"; do [ -s "$p" ] && have+=("$p"); done
if ((${#have[@]})); then
    python3 -m chunkproof bench --merge "${have[@]}" -o "$OUT/latest.json" > "$OUT/bench.md" 2>> "$LOG" || true
else
    echo "no JSON came out of any process" | tee -a "$LOG" >&2
    [ "$rc" -ne 0 ] || rc=1
fi
cat "$OUT/bench.md" 2>/dev/null
echo "chunkproof bench exit status: $rc (at $((SECONDS - T0)) s)" | tee -a "$LOG"
exit "$rc"
