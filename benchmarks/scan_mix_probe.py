"""Which product types make Gated DeltaNet's reverse state scan (`_dstateh_kernel`) slow,
and what each costs in accuracy, on the GPU.

The scan multiplies three products per chunk step:
  P1  dU      = (K gated) dS^T            (two computed tiles: DT2 in the family types)
  P2  dS     += dO^T (Q gated)            (a tile read from memory times a computed one: DT3)
  P3  dS     -= dU^T W                    (idem)
The planner types them per kernel family (reverse_dots), so it cannot give one product
tf32 with fp32 operands and the others bf16, which is what FLA's dhu kernel does (P2 in
tf32, P1 and P3 in bf16, and P1's row gate applied after the product on raw K).  This
probe prints copies of the generated module with each product's types written in
literally ("bf16": both operands rounded to bf16; "tf32": fp32 operands, tf32 product;
"pull": P1 on raw K in bf16 with the gate applied to the product) and measures, per
mix: the scan's device time and the whole forward + backward (torch.profiler, do_bench),
the compiled scan's registers and spills, and every tensor's relative RMS error against
the fp64 recurrence on the benchmark's inputs.  An experiment, not a product path: the
copies live in a temporary package.

    python benchmarks/scan_mix_probe.py --out $OUT/scan_mix.md [--shape 2,16384,16,128]
        [--err-shape 1,2048,2,128] [--mixes m0,m1,...] [--warps 4,8] [--stages 1,2,3]
"""
import argparse
import importlib
import os
import re
import shutil
import sys
import tempfile
import time

import torch
import triton

from chunkproof.bench import calls, inputs, metrics, tiling, timing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "generated_kernels")
VARIANT = "gated_delta_rule"

# P1, P2, P3 as printed by `chunkproof gen` (whitespace-insensitive)
P1 = (r"tl\.dot\(\(b_K \* tl\.exp\(\(b_Kr_f \+ b_gC_log\)\)\)\.to\(DT[23]\)\.to\(CT[23]\), "
      r"tl\.trans\(b_ds\)\.to\(DT[23]\)\.to\(CT[23]\),\s*input_precision=PREC[23]\)")
# (since session 48 q is read as it is and its factor, the gate and the scale, is on dO;
# the hand-written copies below put it there too)
P2 = (r"tl\.dot\(\(tl\.trans\(b_dO\) \* tl\.exp\(tl\.trans\(b_Ql_f\)\)\)\.to\(DT[23]\)\.to\(CT[23]\), "
      r"b_Q\.to\(DT[23]\)\.to\(CT[23]\),\s*input_precision=PREC[23]\)")
P3 = (r"tl\.dot\(tl\.trans\(b_dU\)\.to\(DT[23]\)\.to\(CT[23]\), "
      r"b_Wl\.to\(DT[23]\)\.to\(CT[23]\),\s*input_precision=PREC[23]\)")

# mix name -> (P1, P2, P3) types
MIXES = {
    "m0": ("tf32", "tf32", "tf32"),        # what reverse_dots=tf32_mixed prints (shipped)
    "m1": ("bf16", "bf16", "bf16"),        # reverse_dots=input
    "m2": ("tf32", "bf16", "bf16"),        # reverse_dots=tf32
    "m3": ("bf16", "tf32", "bf16"),
    "m4": ("tf32", "tf32", "bf16"),
    "m5": ("pull", "tf32", "bf16"),        # FLA's dhu
    "m6": ("pull", "bf16", "bf16"),
    # dO read transposed from memory (as FLA reads q and w) instead of a register transpose
    "m7": ("tf32", "tf32", "tf32", "tload"),
    "m8": ("tf32", "tf32", "bf16", "tload"),
    # the state and the K-wide tiles in two halves of 64 columns (FLA's dhu holds its
    # state as up to four [64, BV] tiles): fewer registers live at once?  K <= 128,
    # fixed-length inputs only
    "m9": ("tf32", "tf32", "tf32", "ksplit"),
    "m10": ("bf16", "bf16", "bf16", "ksplit"),
    # and the state held transposed, [K, V] as FLA's dhu holds it, with Q and W read
    # transposed from memory: no tile transposed in registers
    "m13": ("tf32", "tf32", "tf32", "kfirst"),
    "m14": ("bf16", "bf16", "bf16", "kfirst"),
    "m15": ("pull", "tf32", "bf16", "kfirst"),     # FLA's types
    # and each tile addressed from a per-sequence base pointer by 32-bit offsets (ours
    # add a 64-bit sequence offset per element), as FLA's kernels address them
    "m16": ("tf32", "tf32", "tf32", "kfirst", "base32"),
    "m17": ("bf16", "bf16", "bf16", "kfirst", "base32"),
    "m18": ("pull", "tf32", "bf16", "kfirst", "base32"),
    # the module as `chunkproof gen` prints it now (its state in K pieces, its recorded
    # types: the copies above are edits of its whole-state form), the row to compare with
    "shipped": ("as", "recorded", "types"),
    # the same with m9's order in its chunk step: dO loaded after delta U is stored, and
    # each K piece's Q and W loaded just before that piece's state update (session 46's
    # trial; the printer has issued them so since, codegen/schedule.py, so this row now
    # differs from "shipped" only in the order of dO and the first piece's loads)
    "lazy": ("as", "recorded", "types", "lazy"),
}

# the hand-written bodies' common parts: the program's indices, and the loop's head
# (the state's initial value, its store per chunk, the parallel part's dU read)
_HEAD = """
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_hq = i_h // (H // HQ)
    bos = i_b.to(tl.int64) * T
    boh = i_b.to(tl.int64) * tl.cdiv(T, BT)
    o_t = tl.arange(0, BT)
    o_k1 = tl.arange(0, 64)
    o_k2 = 64 + tl.arange(0, 64)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    NT = tl.cdiv(T, BT)
"""
# and the δU product with the δO read after it (its products' text formatted in later)
_DU = """
        m_1 = m_r[:, None] & (o_k1 < K)[None, :]
        m_2 = m_r[:, None] & (o_k2 < K)[None, :]
        b_kf = tl.exp(b_gl - b_g)
        b_k1 = tl.load(k + p_qk + o_k1[None, :], mask=m_1, other=0.)
        b_k2 = tl.load(k + p_qk + o_k2[None, :], mask=m_2, other=0.)
        b_dU = ({p1a} + {p1b} + b_hr0)
        tl.store(p_r, b_dU.to(r_hr0.dtype.element_ty))
        b_dO = tl.load(do + ((bos + r_t[:, None]) * H + i_h) * V + o_v[None, :], mask=m_r[:, None] & m_v[None, :],
                       other=0.)
"""
_LOOP = """
    if use_dht != 0:
        b_ds1 += tl.load(dht + i_bh.to(tl.int64) * K * V + p_s1, mask=m_s1, other=0.)
        b_ds2 += tl.load(dht + i_bh.to(tl.int64) * K * V + p_s2, mask=m_s2, other=0.)
    for i_r in range(0, NT):
        i_t = NT - 1 - i_r
        r_t = i_t * BT + o_t
        m_r = r_t < T
        n_r = tl.minimum(T - i_t * BT, BT)
        p_h = dh + ((boh + i_t) * H + i_h) * K * V
        tl.store(p_h + p_s1, b_ds1, mask=m_s1)
        tl.store(p_h + p_s2, b_ds2, mask=m_s2)
        p_c = (boh + i_t) * H + i_h
        p_r = r_hr0 + p_c * (BT * BVF) + (o_t[:, None] * BVF + o_v[None, :])
        b_hr0 = tl.load(p_r, mask=m_v[None, :], other=0.).to(tl.float32)
"""

# KFIRST_BODY's loads and stores from per-sequence base pointers by int32 offsets
BASE32 = (
    ("    NT = tl.cdiv(T, BT)\n",
     "    NT = tl.cdiv(T, BT)\n    q_b = q + (bos * HQ + i_hq) * K\n    k_b = k + (bos * HQ + i_hq) * K\n"
     "    w_b = in_Wl + (bos * H + i_h) * K\n    do_b = do + (bos * H + i_h) * V\n    g_b = in_Gamma + bos * H + i_h\n"),
    ("p_g = in_Gamma + (bos + tl.minimum(r_t, T - 1)) * H + i_h", "p_g = g_b + tl.minimum(r_t, T - 1) * H"),
    ("tl.load(in_Gamma + (bos + i_t * BT + n_r - 1) * H + i_h)", "tl.load(g_b + (i_t * BT + n_r - 1) * H)"),
    ("p_qk = ((bos + r_t[:, None]) * HQ + i_hq) * K", "p_qk = r_t[:, None] * (HQ * K)"),
    ("tl.load(k + p_qk", "tl.load(k_b + p_qk"),
    ("tl.load(do + ((bos + r_t[:, None]) * H + i_h) * V + o_v[None, :]", "tl.load(do_b + r_t[:, None] * (H * V) + o_v[None, :]"),
    ("p_qt = ((bos + r_t[None, :]) * HQ + i_hq) * K", "p_qt = r_t[None, :] * (HQ * K)"),
    ("p_wt = ((bos + r_t[None, :]) * H + i_h) * K", "p_wt = r_t[None, :] * (H * K)"),
    ("tl.load(q + p_qt", "tl.load(q_b + p_qt"),
    ("tl.load(in_Wl + p_wt", "tl.load(w_b + p_wt"),
)

# KSPLIT_BODY with the state as its transpose: two [64, BV] tiles
KFIRST_BODY = _HEAD + """
    p_s1 = o_k1[:, None] * V + o_v[None, :]
    p_s2 = o_k2[:, None] * V + o_v[None, :]
    m_s1 = (o_k1 < K)[:, None] & m_v[None, :]
    m_s2 = (o_k2 < K)[:, None] & m_v[None, :]
    b_ds1 = tl.zeros([64, BV], dtype=tl.float32)
    b_ds2 = tl.zeros([64, BV], dtype=tl.float32)
""" + _LOOP + """        p_g = in_Gamma + (bos + tl.minimum(r_t, T - 1)) * H + i_h
        b_g = tl.load(p_g).to(tl.float32)[:, None]
        b_gl = tl.load(in_Gamma + (bos + i_t * BT + n_r - 1) * H + i_h).to(tl.float32)
        p_qk = ((bos + r_t[:, None]) * HQ + i_hq) * K
""" + _DU + """        b_qf = tl.exp(b_g) * scale
        b_sf = tl.exp(b_gl)
        p_qt = ((bos + r_t[None, :]) * HQ + i_hq) * K
        p_wt = ((bos + r_t[None, :]) * H + i_h) * K
        mt_1 = (o_k1 < K)[:, None] & m_r[None, :]
        mt_2 = (o_k2 < K)[:, None] & m_r[None, :]
        b_q1 = tl.load(q + p_qt + o_k1[:, None], mask=mt_1, other=0.).to(tl.float32)
        b_w1 = tl.load(in_Wl + p_wt + o_k1[:, None], mask=mt_1, other=0.)
        b_ds1 = b_ds1 * b_sf + {p2a} - {p3a}
        b_q2 = tl.load(q + p_qt + o_k2[:, None], mask=mt_2, other=0.).to(tl.float32)
        b_w2 = tl.load(in_Wl + p_wt + o_k2[:, None], mask=mt_2, other=0.)
        b_ds2 = b_ds2 * b_sf + {p2b} - {p3b}
    tl.store(dh0 + i_bh.to(tl.int64) * K * V + p_s1, b_ds1, mask=m_s1)
    tl.store(dh0 + i_bh.to(tl.int64) * K * V + p_s2, b_ds2, mask=m_s2)
"""

# the scan's body with the state in two halves of 64 columns (P1, P2, P3: the types)
KSPLIT_BODY = _HEAD + """
    p_s1 = o_k1[None, :] * V + o_v[:, None]
    p_s2 = o_k2[None, :] * V + o_v[:, None]
    m_s1 = m_v[:, None] & (o_k1 < K)[None, :]
    m_s2 = m_v[:, None] & (o_k2 < K)[None, :]
    b_ds1 = tl.zeros([BV, 64], dtype=tl.float32)
    b_ds2 = tl.zeros([BV, 64], dtype=tl.float32)
""" + _LOOP + """        b_g = tl.load(in_Gamma + (bos + tl.minimum(r_t, T - 1)) * H + i_h).to(tl.float32)[:, None]
        b_gl = tl.load(in_Gamma + (bos + i_t * BT + n_r - 1) * H + i_h).to(tl.float32)
        p_qk = ((bos + r_t[:, None]) * HQ + i_hq) * K
        p_w = ((bos + r_t[:, None]) * H + i_h) * K
""" + _DU + """        b_qf = tl.exp(b_g) * scale
        b_sf = tl.exp(b_gl)
        b_q1 = tl.load(q + p_qk + o_k1[None, :], mask=m_1, other=0.).to(tl.float32)
        b_w1 = tl.load(in_Wl + p_w + o_k1[None, :], mask=m_1, other=0.)
        b_ds1 = b_ds1 * b_sf + {p2a} - {p3a}
        b_q2 = tl.load(q + p_qk + o_k2[None, :], mask=m_2, other=0.).to(tl.float32)
        b_w2 = tl.load(in_Wl + p_w + o_k2[None, :], mask=m_2, other=0.)
        b_ds2 = b_ds2 * b_sf + {p2b} - {p3b}
    tl.store(dh0 + i_bh.to(tl.int64) * K * V + p_s1, b_ds1, mask=m_s1)
    tl.store(dh0 + i_bh.to(tl.int64) * K * V + p_s2, b_ds2, mask=m_s2)
"""


def kfirst_source(text, start, end, k1, k2, k3, base32=False):
    """The module's text with _dstateh_kernel's body replaced by KFIRST_BODY."""
    head = text.index("use_dht):", start) + len("use_dht):")
    if k1 == "pull":
        p1a = f"({typed('b_k1', 'b_ds1', 'bf16')} * b_kf)"
        p1b = f"({typed('b_k2', 'b_ds2', 'bf16')} * b_kf)"
    else:
        p1a, p1b = typed("(b_k1 * b_kf)", "b_ds1", k1), typed("(b_k2 * b_kf)", "b_ds2", k1)
    body = KFIRST_BODY
    if base32:
        for a, b in BASE32:
            if a not in body:
                raise SystemExit(f"scan_mix_probe: {a!r} not in KFIRST_BODY")
            body = body.replace(a, b)
    body = body.format(
        p1a=p1a, p1b=p1b,
        p2a=typed("b_q1", "(b_dO * b_qf)", k2), p2b=typed("b_q2", "(b_dO * b_qf)", k2),
        p3a=typed("b_w1", "b_dU", k3), p3b=typed("b_w2", "b_dU", k3))
    return text[:head] + body.rstrip("\n") + text[end:]


def ksplit_source(text, start, end, k1, k2, k3):
    """The module's text with _dstateh_kernel's body replaced by KSPLIT_BODY."""
    head = text.index("use_dht):", start) + len("use_dht):")
    body = KSPLIT_BODY.format(
        p1a=typed("(b_k1 * b_kf)", "tl.trans(b_ds1)", k1), p1b=typed("(b_k2 * b_kf)", "tl.trans(b_ds2)", k1),
        p2a=typed("tl.trans(b_dO * b_qf)", "b_q1", k2), p2b=typed("tl.trans(b_dO * b_qf)", "b_q2", k2),
        p3a=typed("tl.trans(b_dU)", "b_w1", k3), p3b=typed("tl.trans(b_dU)", "b_w2", k3))
    return text[:head] + body.rstrip("\n") + text[end:]
DO_LOAD = (r"b_dO = tl\.load\(do \+ \(\(bos \+ r_t\[:, None\]\) \* H \+ i_h\) \* V \+ o_v\[None, :\], "
           r"mask=m_r\[:, None\] & \(o_v < V\)\[None, :\],\s*other=0\.\)")
DO_LOAD_T = ("b_dOT = tl.load(do + ((bos + r_t[None, :]) * H + i_h) * V + o_v[:, None], "
             "mask=m_r[None, :] & (o_v < V)[:, None], other=0.)")


# under Triton's interpreter (--cpu) a bf16 operand is rounded to bf16 and multiplied in
# fp32 (the interpreter cannot multiply bf16 tiles); tf32 products are rounded as the
# tensor cores round them by interp_rounding.emulate
CPU = os.environ.get("TRITON_INTERPRET") == "1"


def typed(a, b, kind):
    t = "tl.float32" if kind == "tf32" else ("tl.bfloat16).to(tl.float32" if CPU else "tl.bfloat16")
    return f"tl.dot({a}.to({t}), {b}.to({t}), input_precision=\"tf32\")"


def mixed_source(text, mix):
    """The generated module's text with the scan's three products typed by ``mix``."""
    k1, k2, k3 = MIXES[mix][:3]
    edits = MIXES[mix][3:]
    start = text.index("def _dstateh_kernel(")
    end = text.index("\n\n\n", start)
    if "ksplit" in edits:
        return ksplit_source(text, start, end, k1, k2, k3)
    if "kfirst" in edits:
        return kfirst_source(text, start, end, k1, k2, k3, "base32" in edits)
    body = text[start:end]
    if k1 == "pull":
        p1 = f"({typed('b_K', 'tl.trans(b_ds)', 'bf16')} * tl.exp(b_Kr_f + b_gC_log))"
    else:
        p1 = typed("(b_K * tl.exp((b_Kr_f + b_gC_log)))", "tl.trans(b_ds)", k1)
    new = body
    dot = "b_dOT" if "tload" in edits else "tl.trans(b_dO)"
    subs = [(P1, p1), (P2, typed(f"({dot} * tl.exp(tl.trans(b_Ql_f)))", "b_Q", k2)), (P3, typed("tl.trans(b_dU)", "b_Wl", k3))]
    if "tload" in edits:
        subs.append((DO_LOAD, DO_LOAD_T))
    for pat, rep in subs:
        new, n = re.subn(pat, lambda _m, r=rep: r, new)
        if n != 1:
            raise SystemExit(f"scan_mix_probe: product {pat[:40]}... found {n} times in _dstateh_kernel: "
                             "the generated kernel changed; update the patterns")
    return text[:start] + new + text[end:]


def _groups(body):
    """The statements of a chunk step's body (its lines at 8 spaces and what they hold)."""
    out = []
    for ln in body.split("\n"):
        if ln.startswith("        ") and not ln.startswith("         ") or not out:
            out.append([ln])
        else:
            out[-1].append(ln)
    return ["\n".join(g) for g in out]


def lazy_source(text):
    """The generated module's text with its reverse scan's loads of dO, Q and W moved
    down (m9's order; see MIXES["lazy"])."""
    start = text.index("def _dstateh_kernel(")
    head = text.index("    for i_r in range(0, NT):\n", start) + len("    for i_r in range(0, NT):\n")
    end = text.index("\n    tl.store(dh0", head)
    groups = _groups(text[head:end])

    def piece(g):
        m = re.match(r"\s*b_(Q|Wl|dS_prev)_k(\d) = ", g.split("\n")[1] if g.lstrip().startswith("if KP") else g)
        return (m.group(1), int(m.group(2))) if m else None
    loads = {piece(g): g for g in groups if piece(g) and piece(g)[0] in ("Q", "Wl")}
    d_o = [g for g in groups if g.lstrip().startswith("b_dO = tl.load(")]
    if len(d_o) != 1 or not loads:
        raise SystemExit("scan_mix_probe: the reverse scan's dO, Q or W loads were not found: update lazy_source")
    rest = [g for g in groups if g not in d_o and g not in loads.values()]
    out = []
    for g in rest:
        p = piece(g)
        if p and p[0] == "dS_prev":
            out += [loads[(k, p[1])] for k in ("Q", "Wl") if (k, p[1]) in loads]
        out.append(g)
        if "tl.store(r_hr0" in g:
            out += d_o
    if len(out) != len(groups):
        raise SystemExit("scan_mix_probe: lazy_source lost a statement: update it")
    return text[:head] + "\n".join(out) + text[end:]


def whole_state_source():
    """The module as generated, but with its scans' state printed in one piece: the
    copies below are edits of that form (session 41; codegen/ksplit.py came after)."""
    from chunkproof.codegen import gen
    env = gen._env()
    env.filters["ksplit"] = lambda text, axes, where: text
    return gen.render_recorded(VARIANT, env=env)


def package(mixes):
    """A temporary package holding _runtime.py and one module per mix."""
    unknown = [m for m in mixes if m not in MIXES]
    if unknown:
        raise SystemExit(f"scan_mix_probe.py: unknown mix(es) {', '.join(unknown)}; choose from {', '.join(MIXES)}")
    d = tempfile.mkdtemp(prefix="scanmix_")
    pkg = os.path.join(d, "scanmix")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    shutil.copy(os.path.join(SRC, "_runtime.py"), pkg)
    text = whole_state_source()
    for m in mixes:
        if m in ("shipped", "lazy"):
            with open(os.path.join(SRC, f"{VARIANT}.py")) as f:
                shipped = f.read()
            with open(os.path.join(pkg, f"{m}.py"), "w") as f:
                f.write(shipped if m == "shipped" else lazy_source(shipped))
            continue
        with open(os.path.join(pkg, f"{m}.py"), "w") as f:
            f.write(mixed_source(text, m))
    sys.path.insert(0, d)
    return {m: importlib.import_module(f"scanmix.{m}") for m in mixes}


def resources(mod):
    """(registers, spills, shared bytes, warps, stages) of each compiled _dstateh_kernel."""
    out = []
    try:       # Triton's private cache layout: a changed one loses this column, not the row
        for caches in mod._dstateh_kernel.device_caches.values():
            for kern in caches[0].values():
                kern._init_handles()
                md = kern.metadata
                out.append((kern.n_regs, kern.n_spills, md.shared, md.num_warps, md.num_stages))
    except Exception as e:  # noqa: BLE001
        return f"? ({type(e).__name__})"
    return out


def main():
    p = argparse.ArgumentParser(prog="scan_mix_probe.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--shape", default="2,16384,16,128")
    p.add_argument("--err-shape", default="1,2048,2,128")
    p.add_argument("--mixes", default=",".join(MIXES))
    p.add_argument("--warps", default="", help="also each mix at autotune=false with these scan warps")
    p.add_argument("--stages", default="2")
    p.add_argument("--bv32", action="store_true", help="also each mix with every V block at 32")
    p.add_argument("--budget", type=float, default=1e9)
    p.add_argument("--cpu", default="", metavar="B,T,H,D",
                   help="errors alone, under TRITON_INTERPRET=1 with the tensor cores' rounding emulated, "
                        "on the benchmark's inputs cut to this shape (as cpu_grad_accuracy.py --inputs bench)")
    a = p.parse_args()
    if a.cpu:
        return cpu_errors(a)
    if not torch.cuda.is_available():
        raise SystemExit("scan_mix_probe.py: needs a CUDA GPU")
    t0 = time.time()
    mixes = [m for m in a.mixes.split(",") if m]
    mods = package(mixes)
    lines = [f"# Reverse-scan product mixes, {VARIANT}\n",
             f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}; "
             f"timing shape {a.shape}, error shape {a.err_shape}, bf16, forward + backward with h0\n",
             "| mix | P1 P2 P3 | config | scan us | fwd+bwd ms | regs/spills/smem/warps/stages | worst err | errors |",
             "|---|---|---|---|---|---|---|---|"]

    def write():
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    B, T, H, D = map(int, a.shape.split(","))
    x = inputs.bench_inputs(VARIANT, B, T, H, D, torch.bfloat16, torch.float32, "cuda", seed=0)
    h0, do, dht = inputs.cotangents(B, T, H, D, D, torch.bfloat16, "cuda")
    eB, eT, eH, eD = map(int, a.err_shape.split(","))
    ex = inputs.bench_inputs(VARIANT, eB, eT, eH, eD, torch.bfloat16, torch.float32, "cuda", seed=0)
    eh0, edo, edht = inputs.cotangents(eB, eT, eH, eD, eD, torch.bfloat16, "cuda")
    scale = D ** -0.5
    t = time.time()
    ro, rgrads = metrics.reference_backward(VARIANT, ex, eh0, edo, edht, scale=eD ** -0.5)
    want = dict(rgrads, o=ro)
    print(f"reference at {a.err_shape}: {time.time() - t:.1f} s", file=sys.stderr)
    cfgs = [("autotune", {}, None)]
    if a.bv32:
        # every V-tiled kernel at V blocks of 32 (the runtime raises them to 64 on Hopper)
        cfgs.append(("BV 32", dict(BV=32, scan_BV=32), 32))
    for w in filter(None, a.warps.split(",")):
        for s in a.stages.split(","):
            cfgs.append((f"w{w} s{s}", dict(autotune=False, scan_warps=int(w), scan_stages=int(s)), None))
    for m in mixes:
        mod = mods[m]
        fn = getattr(mod, calls.kernel(VARIANT).__name__)
        for label, cfg, least in cfgs:
            if time.time() - t0 > a.budget:
                lines.append(f"(budget reached at {m} {label})")
                write()
                return
            runtime = sys.modules["scanmix._runtime"]
            saved = runtime.HOPPER_MIN_BLOCK
            try:
                runtime.HOPPER_MIN_BLOCK = least or saved
                with tiling.applied(mod, cfg):
                    o, grads = calls.fwd_bwd(fn, ex, eh0, edo, edht, eD ** -0.5)
                    errs = metrics.errors(dict(grads, o=o), want)
                    call = calls.of_mode("fwd+bwd", fn, x, h0, do, dht, scale)
                    rows = timing.kernel_times(call, 10)
                    ms = timing.median_ms(call, True, 1, 50, 200)
                scan = sum(us for k, (n, us) in rows.items() if "_dstateh_kernel" in k)
                worst = max(errs, key=errs.get)
                lines.append(f"| {m} | {' '.join(MIXES[m])} | {label} | {scan:.0f} | {ms:.3f} | {resources(mod)} | "
                             f"{worst} {errs[worst]:.3e} | "
                             + ", ".join(f"{k} {v:.3e}" for k, v in sorted(errs.items())) + " |")
            except Exception as e:  # noqa: BLE001  (one failing mix must not hide the rest)
                lines.append(f"| {m} | {' '.join(MIXES[m])} | {label} | failed: {type(e).__name__}: {str(e)[:200]} |")
            finally:
                runtime.HOPPER_MIN_BLOCK = saved
            print(lines[-1], file=sys.stderr)
            write()
    write()


def cpu_errors(a):
    """Each mix's errors on the CPU's emulation of the tensor cores' rounding."""
    if not CPU:
        raise SystemExit("scan_mix_probe.py --cpu: run with TRITON_INTERPRET=1")
    from cpu_grad_accuracy import bench_case
    from interp_rounding import emulate
    B, T, H, D = map(int, a.cpu.split(","))
    mixes = [m for m in a.mixes.split(",") if m]
    mods = package(mixes)
    x, h0, do, dht = bench_case(VARIANT, B, T, H, D, D, 0, T)
    _, want = metrics.reference_backward(VARIANT, x, h0, do, dht, D ** -0.5)
    lines = [f"# Reverse-scan product mixes, {VARIANT}, CPU emulation (tf32 truncated), bench inputs {a.cpu}\n",
             "| mix | P1 P2 P3 | errors |", "|---|---|---|"]
    undo = emulate("trunc")
    try:
        for m in mixes:
            fn = getattr(mods[m], calls.kernel(VARIANT).__name__)
            _, got = calls.fwd_bwd(fn, x, h0, do, dht, D ** -0.5)
            errs = {n: metrics.rel_rms(g, want[n]) for n, g in got.items()}
            lines.append(f"| {m} | {' '.join(MIXES[m])} | " + ", ".join(f"d{k} {v:.3e}" for k, v in errs.items()) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
            with open(a.out, "w") as f:
                f.write("\n".join(lines) + "\n")
    finally:
        undo()


if __name__ == "__main__":
    main()
