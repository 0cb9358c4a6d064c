"""Timing-only edits of a generated state kernel (results are not checked): which part costs.
Produced results/logs/state_kernel_exp.log (on the kernels before the gate prefix moved to
the intra kernel, with the stacked inverse patched in); on today's kernels the
"no_cumsum" edits find nothing to remove and are reported as not applicable.

    python benchmarks/state_kernel_exp.py gated_delta_rule,kda      (CUDA)"""
import importlib.util
import os
import re
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
from fwd_vs_fla import OURS_NAME, make_inputs  # noqa: E402
from profile_kernels import profile  # noqa: E402


def load(variant, edits, tag):
    src = open(f"generated_kernels/{variant}.py").read()
    src = src.replace("from ._runtime import", "from generated_kernels._runtime import")
    head, _, tail = src.partition("def _state_kernel")
    body, sep, rest = tail.partition("@triton.jit")
    for a, b in edits:
        if not re.search(a, body):
            return None   # today's kernel has nothing for this edit to remove
        body = re.sub(a, b, body)
    path = f"/tmp/exp_{variant}_{tag}.py"
    open(path, "w").write(head + "def _state_kernel" + body + sep + rest)
    spec = importlib.util.spec_from_file_location(f"exp_{variant}_{tag}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m

CUMSUM = r"b_Gamma_log = tl\.(sum\(tl\.where\(m_incl, tl\.trans\(b_Alpha_log\), 0\.\), axis=1, keep_dims=True\)|cumsum\(b_Alpha_log, axis=0\))"
STORE = r"tl\.store\(h \+ [^\n]*\n"
EXPS = {"base": [], "no_cumsum": [(CUMSUM, "b_Gamma_log = b_Alpha_log")], "no_hstore": [(STORE, "\n")],
        "neither": [(CUMSUM, "b_Gamma_log = b_Alpha_log"), (STORE, "\n")]}
B, T, H, D = 4, 4096, 16, 128
for variant in sys.argv[1].split(","):
    inp = make_inputs(variant, B, T, H, D, torch.bfloat16, torch.float32, "cuda", seed=0)
    for tag, edits in EXPS.items():
        for cfg in ({"computed_dots": "tf32"}, {"computed_dots": "input"}, {"computed_dots": "input", "scan_warps": 4}):
            m = load(variant, edits, tag)
            if m is None:
                print(f"{variant:18s} {tag:10s} not applicable: an edit's pattern is absent", flush=True)
                break
            m.TILING.update(schedule="split", prep_warps=4, out_warps=4, **cfg)
            fn = getattr(m, OURS_NAME[variant])
            call = lambda: fn(*inp.values(), scale=D ** -0.5, output_final_state=True)
            rows = profile(call, 5)
            st = [us for k, (n, us) in rows.items() if "state" in k]
            print(f"{variant:18s} {tag:10s} {str(cfg):50s} state {st[0]:7.1f} us  total {sum(us for _, us in rows.values()):7.1f} us", flush=True)
