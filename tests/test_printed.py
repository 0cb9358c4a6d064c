"""A variant printed with more passed tiles narrowed than its record says
(chunkproof.bench.printed, for benchmarks/profile_kernels.py --narrow): printed by the
generator into a package of its own, its buffers in the inputs' dtype, the gradients
those of the recorded module within bf16 rounding, generated_kernels/ untouched."""
import os

import pytest
import torch

from chunkproof.bench import calls, inputs, printed
from chunkproof.codegen import gen
from chunkproof.fuzz.reference import rel_rms


def _snapshot():
    return {n: os.path.getmtime(os.path.join(gen.OUT_DIR, n)) for n in sorted(os.listdir(gen.OUT_DIR))}


def test_a_narrowed_print_stores_those_tiles_in_the_inputs_dtype_and_computes_the_same():
    before = _snapshot()
    mod, fn = printed.narrowed("delta_rule", ["hr0"])
    assert _snapshot() == before
    src = open(mod.__file__, encoding="utf-8").read()
    assert "r_hr0 = torch.empty(B * NT * H, BT * BV_full, dtype=q.dtype" in src
    assert '"hr0"' in src[src.index("NARROWED = "):].splitlines()[0]
    recorded = open(os.path.join(gen.OUT_DIR, "delta_rule.py"), encoding="utf-8").read()
    assert "r_hr0 = torch.empty(B * NT * H, BT * BV_full, dtype=torch.float32" in recorded
    x = inputs.bench_inputs("delta_rule", 1, 70, 2, 32, torch.bfloat16, torch.float32, "cpu", seed=0)
    h0, do, dht = inputs.cotangents(1, 70, 2, 32, 32, torch.bfloat16, "cpu")
    o, grads = calls.fwd_bwd(fn, x, h0, do, dht)
    o0, grads0 = calls.fwd_bwd(calls.ours("delta_rule")[1], x, h0, do, dht)
    assert torch.equal(o, o0)      # the forward is the same code
    for n in grads:
        assert rel_rms(grads[n], grads0[n]) < 2e-2, n


def test_a_tile_that_is_not_passed_is_named():
    with pytest.raises(ValueError, match=r"delta_rule has no passed tile S \(its passed tiles: .*hr0"):
        printed.narrowed("delta_rule", ["S"])
