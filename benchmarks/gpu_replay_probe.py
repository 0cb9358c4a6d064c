"""Which shapes and launch settings raise an illegal memory access (or a wrong result) in
a fuzz example on the GPU: each CASE is replayed in its own process (an illegal access
ends the CUDA context) with CUDA_LAUNCH_BLOCKING=1, so the last launch named in its log
is the failing kernel.

    python benchmarks/gpu_replay_probe.py VARIANT PROPERTY DTYPE 'CASE' ['CASE' ...]

CASE: a fuzz example as `chunkproof fuzz` prints it ('B=2 T=1000 H=4 K=128 V=64 h0=True
fs=True gates=typical seed=1'), optionally followed by ' | KEY=VALUE ...' tiling overrides
(autotune=False grad_BK=64 ...), optionally prefixed 'san:' / 'init:' / 'race:' (under
compute-sanitizer's memcheck / initcheck / racecheck).  CHUNKPROOF_FUZZ_DEBUG=1 prints a
raising case's traceback.  Each case's output goes to $OUT/replay.N.log; PROBE_TIMEOUT seconds each
(default 200)."""
import os
import sys
import time

from chunkproof.bench.isolated import run_isolated, split_tool


def one(variant, prop, dtype, case):
    from chunkproof.bench.tiling import parse_value    # the CLI's own KEY=VALUE reading
    from chunkproof.fuzz import cases
    from chunkproof.fuzz.campaign import check
    from chunkproof.fuzz.example import parse
    text, _, sets = case.partition("|")
    til = {k: parse_value(v) for k, _, v in (s.partition("=") for s in sets.split())}
    ex = parse(text.strip(), variant, prop, "cuda", dtype)
    with cases.module(variant).tiling_override(**til):
        ok, err, tol, rec = check(ex)
    print(f"{'holds' if ok else 'FAILS'}: error {err:.2e} (tolerance {tol:.1e}); {rec.get('detail', '')}", flush=True)


def main():
    if sys.argv[1] == "--one":
        one(*sys.argv[2:6])
        return
    variant, prop, dtype, *todo = sys.argv[1:]
    out = os.environ.get("OUT", "/tmp/out")
    os.makedirs(out, exist_ok=True)
    for n, case in enumerate(todo):
        tool, bare = split_tool(case)
        t0 = time.time()
        text, rc = run_isolated([sys.executable, __file__, "--one", variant, prop, dtype, bare], tool,
                                float(os.environ.get("PROBE_TIMEOUT", 200)))
        with open(os.path.join(out, f"replay.{n}.log"), "w") as f:
            f.write(f"{variant} {prop} {dtype} {case}\n{text}")
        lines = text.strip().splitlines()
        verdict = [ln for ln in lines if ln.startswith(("holds", "FAILS"))]
        kern = [ln.strip() for ln in lines if "_kernel" in ln]
        print(f"[{n}] {case}: {time.time() - t0:.0f} s rc={rc}; "
              f"{verdict[-1] if verdict else (kern[-1] if kern else (lines[-1] if lines else ''))}", flush=True)


if __name__ == "__main__":
    main()
