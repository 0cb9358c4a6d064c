"""benchmarks/bf16_vs_chunked.py: its baseline (the kernel's chunk program evaluated chunk
by chunk on torch tensors) computes the variant's function, and bad input is refused."""
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bf16_vs_chunked.py")


def _script():
    spec = importlib.util.spec_from_file_location("bf16_vs_chunked", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)      # importing it sets nothing (TRITON_INTERPRET is set in main)
    return mod


@pytest.mark.parametrize("name", ["delta_rule", "rwkv6"])
@pytest.mark.parametrize("form", ["kernel", "program"])
def test_baseline_in_float64_is_the_recurrence(name, form):
    """In float64 the baseline's o, final state and every gradient equal autograd of the
    fp64 recurrence: two batches and heads, a last chunk of 5 rows (37 = 2 x 16 + 5)."""
    M = _script()
    shape = (2, 37, 2, 8, 6)
    x, h0, do, dht = M.case(name, shape, 3)
    x = {n: t.double() for n, t in x.items()}
    scale = shape[3] ** -0.5
    want = M.reference(name, x, h0, do, dht, scale)
    got = M.Chunked(name, form, C=16).fwd_bwd(x, scale, h0.double(), do, dht, torch.float64)
    errs = M.errors(*got, want)
    assert set(errs) >= {"o", "ht", "dq", "dk", "dv", "dh0"}
    assert max(errs.values()) < 1e-12, errs


def test_baseline_log_gates_fp32_keeps_the_function():
    """The fp32-log-gate baseline in bf16 is near the all-bf16 one's function (loose)."""
    M = _script()
    shape = (1, 20, 1, 8, 8)
    x, h0, do, dht = M.case("simple_gla", shape, 4)
    scale = shape[3] ** -0.5
    want = M.reference("simple_gla", x, h0, do, dht, scale)
    errs = M.errors(*M.Chunked("simple_gla", logs="wide", C=16).fwd_bwd(x, scale, h0, do, dht, torch.bfloat16),
                    want)
    assert max(errs.values()) < 0.1, errs


def test_unknown_variant_exits_2_with_one_line():
    out = subprocess.run([sys.executable, SCRIPT, "--variant", "nosuch", "--out", ""],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown variant 'nosuch'" in lines[0], out.stderr
    assert out.stdout == ""
