"""Draw a (variant, property) cell's examples one at a time, print each before it runs
and stop at the first that fails, with its traceback: the example that first faulted,
which the campaign cannot report on CUDA (a fault poisons the process, so its shrinking
reports the cascade).  Run with CUDA_LAUNCH_BLOCKING=1 so that the traceback names the
launch that faulted.

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/fuzz_probe.py delta_rule split_sequence 40 [cuda bf16]
"""
import os
import sys

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st


def main(variant, prop, n, device="cuda", dtype="bf16"):
    os.environ.setdefault("CHUNKPROOF_FUZZ_DEBUG", "1")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from chunkproof.fuzz.campaign import check
    from chunkproof.fuzz.strategies import examples
    seen = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        ex = data.draw(examples(variant, prop, device, dtype))
        print(f"[{len(seen) + 1}] {ex.describe()}", flush=True)
        ok, err, tol, rec = check(ex)
        seen.append(ok)
        print(f"    {'ok' if ok else 'FAILS'}: {rec['detail']}", flush=True)
        if not ok:
            raise SystemExit(1)
    try:
        run()
    except SystemExit as e:
        return int(e.code or 0)
    print(f"{len(seen)} examples, none failed")
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(main(a[0], a[1], int(a[2]), *a[3:]))
