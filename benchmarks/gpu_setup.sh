# Sourced by the GPU probe scripts: installs the carried wheels (.whl/, .whl/test/ where
# present: the machine's image already has pytest and hypothesis) under /tmp/site and
# chunkproof itself (editable) on the lent machine, which has no network.
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
shopt -s nullglob
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl .whl/test/*.whl > "$OUT/setup.log" 2>&1
shopt -u nullglob
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$OUT/setup.log" 2>&1
