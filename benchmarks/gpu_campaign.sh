#!/usr/bin/env bash
# One device call on a two-GPU machine (kind nvidia-h200-x2), everything bounded by DEADLINE
# seconds so that the results are always packed:
#   GPU 0 (timing, one process at a time): fwdbwd_vs_fla.py for each line of FWDBWD_SPEC
#         ("variant tag [--fla] [@SECONDS] [KEY=VALUE ...]"; --fla: FLA side by side, else
#         ours alone; @SECONDS: this line's time limit, else what is left);
#   GPU 1 (no timing): the fuzz campaign, one process per variant (FUZZ_EXAMPLES per
#         property, FUZZ_DTYPE), and `pytest -m gpu`, side by side.
# Writes $OUT/results.tar (logs, tables, JSON) and $OUT/tcache.part* (Triton's cache and
# autotune results, xz; copy them into .tcache/ and carry .tcache next time).  Carry .whl.
#   DEADLINE=500 FUZZ_EXAMPLES=40 FWDBWD_SPEC=benchmarks/sweeps/final.txt bash benchmarks/gpu_campaign.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"; R="$OUT/r"; mkdir -p "$R/fwdbwd" "$R/fuzz"
DEADLINE="${DEADLINE:-500}"; T0=$SECONDS
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/tcache
compgen -G ".tcache/part*" >/dev/null && cat .tcache/part* | xz -d | tar -x -C /tmp
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:$PWD"
left() { echo $((DEADLINE - (SECONDS - T0))); }

(   # GPU 1: fuzz campaign + gpu tests
    export CUDA_VISIBLE_DEVICES=1
    for v in gla gated_delta_rule kda dplr_delta_rule; do
        timeout -s INT -k 15 "$(( $(left) - 20 ))" python3 -m verify.cli fuzz --variant "$v" --device cuda \
            --dtype "${FUZZ_DTYPE:-bf16}" --examples "${FUZZ_EXAMPLES:-40}" --quiet --save "$R/fuzz/failures_$v.json" \
            --out "$R/fuzz/$v.md" > "$R/fuzz/$v.log" 2>&1 &
    done
    timeout -k 10 "$(( $(left) - 20 ))" python3 -m pytest -m gpu -v --tb=short -p no:cacheprovider tests > "$R/gpu_tests.log" 2>&1 &
    wait
) &
gpu1=$!

export CUDA_VISIBLE_DEVICES=0     # GPU 0: timing, one process at a time
while read -r variant tag rest; do
    case "$variant" in ''|'#'*) continue ;; esac
    args=(--variant "$variant" --tag "$tag" --json-dir "$R/fwdbwd" --fla-force)
    fla=0; lim=$(( $(left) - 15 ))
    for kv in $rest; do
        case "$kv" in
            --fla) fla=1 ;;
            @*) [ "${kv#@}" -lt "$lim" ] && lim="${kv#@}" ;;
            *) args+=(--ours-set "$kv") ;;
        esac
    done
    [ "$fla" = 1 ] || args+=(--no-fla)
    [ "$lim" -gt 20 ] || break
    echo "== $variant [$tag] $rest (limit $lim s, at $((SECONDS - T0)) s)"
    timeout -k 10 "$lim" python3 benchmarks/fwdbwd_vs_fla.py "${args[@]}" 2>&1 | grep -v -i warn | grep '^\['
done < "${FWDBWD_SPEC:-benchmarks/sweeps/final.txt}" 2>&1 | tee "$R/fwdbwd.log"
python3 benchmarks/fwdbwd_vs_fla.py --table "$R/fwdbwd" --out "$R/fwdbwd_vs_fla.md" >/dev/null
wait "$gpu1"
echo "done at $((SECONDS - T0)) s"
tail -n 3 "$R"/fuzz/*.log "$R/gpu_tests.log"
tar -C "$OUT" -cf "$OUT/results.tar" r && rm -rf "$R"
tar -C /tmp -cf - tcache | xz -T0 -6 | split -b 15M - "$OUT/tcache.part"
ls -la "$OUT"
