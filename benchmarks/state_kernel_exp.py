"""Edits of a generated state kernel, timed on the GPU (the edited results are checked
against the unedited kernel's, and say so when they differ): which part of the scan costs.

    python benchmarks/state_kernel_exp.py gated_delta_rule,kda      (CUDA)

Each experiment is a list of (regex, replacement) edits of `_state_kernel`'s body and a
TILING override.  An experiment whose pattern is absent from today's kernel is reported as
not applicable.  The previous version of this script (edits that removed the in-kernel
gate prefix sum) produced results/logs/state_kernel_exp.log."""
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
    src = src.replace("from ._runtime import", "from chunkproof.kernels._runtime import")
    head, _, tail = src.partition("def _state_kernel")
    body, sep, rest = tail.partition("@triton.jit")
    for a, b in edits:
        if not re.search(a, body):
            return None
        body = re.sub(a, b, body)
    path = f"/tmp/exp_{variant}_{tag}.py"
    open(path, "w").write(head + "def _state_kernel" + body + sep + rest)
    spec = importlib.util.spec_from_file_location(f"exp_{variant}_{tag}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


# the key's per-head gate factor ([BT, 1]) broadcast to a [BT, BK] tile (the same values):
# is the scalar-gate layout what makes Gated DeltaNet's scan slower than KDA's?
BCAST = (r"(b_Kr_f = \(-b_Gamma_log\)\n)", r"\1        b_Kr_f = b_Kr_f + tl.zeros([1, BK], dtype=tl.float32)\n")
# the chunk's last gate read as one [1, 1] load instead of a masked reduction over rows
GC_LOAD = (r"b_gC_log = tl\.trans\(tl\.sum\(tl\.where\(m_last, b_Gamma_log, 0\.\), axis=0, keep_dims=True\)\)",
           "b_gC_log = tl.load(in_Gamma + (bos + i_t * BT + n_r - 1) * H + i_h + tl.zeros([1, 1], dtype=tl.int32)).to(tl.float32)")
NO_STORE = (r"tl\.store\(h \+ [^\n]*\n", "\n")
# the h store as a [BK, BV] tile, V contiguous in memory and in the tile
STORE_T = (r"tl\.store\(h \+ (.*?) \+ p_s, b_s\.to\(h\.dtype\.element_ty\), mask=m_s\)",
           r"tl.store(h + \1 + tl.trans(p_s), tl.trans(b_s).to(h.dtype.element_ty), mask=tl.trans(m_s))")
EXPS = [
    ("base", [], {}),
    ("base", [], {"computed_dots": "input"}),
    ("base", [], {"scan_warps": 4}),
    ("base", [], {"BV": 32}),
    ("gate_bcast", [BCAST], {}),
    ("gate_bcast", [BCAST], {"computed_dots": "input"}),
    ("gate_bcast", [BCAST], {"scan_warps": 4}),
    ("gc_load", [GC_LOAD], {}),
    ("gc_load_bcast", [GC_LOAD, BCAST], {}),
    ("no_hstore", [NO_STORE], {}),
    ("hstore_T", [STORE_T], {}),
    ("bcast_store_T", [BCAST, STORE_T], {}),
    ("bcast_store_T", [BCAST, STORE_T], {"computed_dots": "input"}),
]
B, T, H, D = 4, 4096, 16, 128
for variant in sys.argv[1].split(","):
    inp = make_inputs(variant, B, T, H, D, torch.bfloat16, torch.float32, "cuda", seed=0)
    ref = None
    for tag, edits, cfg in EXPS:
        m = load(variant, edits, tag)
        if m is None:
            print(f"{variant:18s} {tag:14s} not applicable: an edit's pattern is absent", flush=True)
            continue
        m.TILING.update(cfg)
        fn = getattr(m, OURS_NAME[variant])
        call = lambda: fn(*inp.values(), scale=D ** -0.5, output_final_state=True)
        try:
            rows = profile(call, 5)
            with torch.no_grad():
                o, s = call()
        except Exception as e:
            print(f"{variant:18s} {tag:14s} {str(cfg):32s} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        if ref is None and not cfg:
            ref = (o.float(), s)
        same = "" if ref is None or "no_" in tag else \
            f" max|d o| {(o.float() - ref[0]).abs().max().item():.2e} max|d S| {(s - ref[1]).abs().max().item():.2e}"
        st = [us for k, (n, us) in rows.items() if "state" in k]
        print(f"{variant:18s} {tag:14s} {str(cfg):32s} state {st[0]:7.1f} us  total "
              f"{sum(us for _, us in rows.values()):7.1f} us{same}", flush=True)
