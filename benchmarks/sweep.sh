#!/usr/bin/env bash
# Time several TILING configurations of our kernels (no FLA) on the GPU, one process per
# line of a spec file, and write one table.  From the repository root:
#
#     bash benchmarks/sweep.sh benchmarks/sweeps/grad.txt OUT_DIR [LINE_TIMEOUT]
#
# Spec lines: `variant tag [KEY=VALUE ...]` (values as fwdbwd_vs_fla.py --ours-set takes
# them, without spaces); '#' starts a comment.  Writes OUT_DIR/sweep.md (the table, rewritten
# after every line, so a call cut short keeps what ran), OUT_DIR/sweep.log and
# OUT_DIR/sweep_json.tar (the raw results).  The device tool brings back at most 8 files,
# hence the tar.
set -u -o pipefail
spec="$1"; out="$2"; limit="${3:-120}"
mkdir -p "$out/sweep_json"
export PYTHONUNBUFFERED=1
while read -r variant tag rest; do
    case "$variant" in ''|'#'*) continue ;; esac
    sets=()
    for kv in $rest; do sets+=(--ours-set "$kv"); done
    echo "== $variant [$tag] ${rest:-defaults} (limit $limit s, at $SECONDS s)"
    timeout -k 10 "$limit" python3 benchmarks/fwdbwd_vs_fla.py --variant "$variant" --no-fla --tag "$tag" \
        "${sets[@]}" --json-dir "$out/sweep_json" 2>&1 | grep -v -i warn | grep -v '^|' | grep -v '^- ' | grep -v '^$'
    python3 benchmarks/fwdbwd_vs_fla.py --table "$out/sweep_json" --out "$out/sweep.md" >/dev/null
    tar -C "$out" -cf "$out/sweep_json.tar" sweep_json
done < "$spec" 2>&1 | tee "$out/sweep.log"
