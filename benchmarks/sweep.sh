#!/usr/bin/env bash
# Run vs_fla.py for each line of a spec file, one process per line, and write one
# table.  From the repository root:
#
#     [DEADLINE=SECONDS] bash benchmarks/sweep.sh SPEC OUT_DIR [LINE_TIMEOUT]
#
# Spec lines: `variant tag [--fla] [--fwd] [@SECONDS] [fla.KEY=VALUE ...] [KEY=VALUE ...]`:
# --fla times FLA side by side (else ours alone); --fwd times the forwards only;
# @SECONDS bounds this line (else LINE_TIMEOUT, default 120); fla.KEY=VALUE is a keyword
# argument of FLA's entry point (vs_fla.py --fla-set); KEY=VALUE is a TILING override of
# ours (vs_fla.py --set), without spaces.  '#' starts a comment.  DEADLINE bounds the
# whole run: each line gets at most what is left, and the run stops when too little is.
# Writes OUT_DIR/sweep.md (the table, rewritten after every line, so a call cut short
# keeps what ran), OUT_DIR/sweep.log and OUT_DIR/sweep_json.tar (the raw results: the
# device tool brings back at most 8 files).  Past campaigns' specs and tables:
# benchmarks/results/<date>/sweeps/ and benchmarks/results/<date>/.
set -u -o pipefail
spec="$1"; out="$2"; limit="${3:-120}"
mkdir -p "$out/sweep_json"
export PYTHONUNBUFFERED=1
T0=$SECONDS
while read -r variant tag rest; do
    case "$variant" in ''|'#'*) continue ;; esac
    args=(--variant "$variant" --tag "$tag" --json-dir "$out/sweep_json" --fla-force)
    fla=0; lim="$limit"
    [ -n "${DEADLINE:-}" ] && [ $((DEADLINE - (SECONDS - T0) - 15)) -lt "$lim" ] && lim=$((DEADLINE - (SECONDS - T0) - 15))
    for kv in $rest; do
        case "$kv" in
            --fla) fla=1 ;;
            --fwd) args+=(--mode fwd) ;;
            @*) [ "${kv#@}" -lt "$lim" ] && lim="${kv#@}" ;;
            fla.*) args+=(--fla-set "${kv#fla.}") ;;
            *) args+=(--set "$kv") ;;
        esac
    done
    [ "$fla" = 1 ] || args+=(--no-fla)
    [ "$lim" -gt 20 ] || break
    echo "== $variant [$tag] ${rest:-defaults} (limit $lim s, at $((SECONDS - T0)) s)"
    # the whole output goes to a per-line log; a line that fails shows its last lines
    timeout -k 10 "$lim" python3 benchmarks/vs_fla.py "${args[@]}" > "$out/line.log" 2>&1
    rc=$?
    grep '^\[' "$out/line.log"
    [ "$rc" = 0 ] || { echo "   (exit $rc)"; grep -v -i warn "$out/line.log" | grep -v '^\[' | tail -n 4; }
    python3 benchmarks/vs_fla.py --table "$out/sweep_json" --out "$out/sweep.md" >/dev/null
    tar -C "$out" -cf "$out/sweep_json.tar" sweep_json
done < "$spec" 2>&1 | tee "$out/sweep.log"
