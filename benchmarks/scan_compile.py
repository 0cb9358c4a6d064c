"""Registers, spills and shared memory of scan_mix_probe.py's copies of Gated DeltaNet's
reverse scan, compiled for sm_90 without a GPU (compile_check.py's compiler and ptxas),
and of FLA's dhu kernel beside them: what docs/measurements.md's offline table says.

    python benchmarks/scan_compile.py [--mixes m0,m9,m13,m16,m17,m18] [--stages 2]
        [--no-hr0]              also m17 without the fp32 dU tile read and written each step
        [--fla DIR]             also FLA's dhu kernel, from an unpacked fla_core wheel in DIR
                                (python -m zipfile -e fla_core-0.5.2-*.whl DIR; einops too)
"""
import argparse
import importlib
import inspect
import os
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="scan_compile_"))
import compile_check as CC  # noqa: E402
import scan_mix_probe as S  # noqa: E402
from chunkproof.bench import tiling  # noqa: E402

CONFIGS = ((64, 4), (64, 8), (32, 4), (32, 8))       # (V block, warps)
# m17's body without the parallel part's dU tile (an ablation: not a correct kernel)
NO_HR0 = (("b_hr0 = tl.load(p_r, mask=m_v[None, :], other=0.).to(tl.float32)",
           "b_hr0 = tl.zeros([BT, BV], dtype=tl.float32)"),
          ("tl.store(p_r, b_dU.to(r_hr0.dtype.element_ty))", ""))


def ours(mixes, stages, label=""):
    mods = S.package(mixes)
    args = types.SimpleNamespace(dtype="bf16", K=128, V=128, kernels="_dstateh_kernel", list=False, dump=None,
                                 arch=90)
    for m in mixes:
        for bv, w in CONFIGS:
            with tiling.applied(mods[m], dict(autotune=False, scan_BV=bv, scan_warps=w, scan_stages=stages)):
                print(f"{m}{label} BV {bv} warps {w}: ", end="", flush=True)
                CC.check_variant(m, mods[m], args)
    for k in [k for k in sys.modules if k.startswith("scanmix")]:
        del sys.modules[k]


def fla(folder, stages):
    """FLA's chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64, imported without fla's
    package __init__ (which imports modules this Triton may not load)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    sys.path.insert(0, folder)
    for name, path in (("fla", "fla"), ("fla.ops", os.path.join("fla", "ops"))):
        m = types.ModuleType(name)
        m.__path__, m.__version__ = [os.path.join(folder, path)], "unknown"
        sys.modules[name] = m
    k = importlib.import_module("fla.ops.common.chunk_delta_h").chunk_gated_delta_rule_bwd_kernel_dhu_blockdim64
    while not isinstance(k, triton.runtime.jit.JITFunction):
        k = k.fn
    ptrs = dict(q="*bf16", k="*bf16", w="*bf16", g="*fp32", gk="*fp32", dht="*fp32", dh0="*fp32", do="*bf16",
                dh="*bf16", dv="*bf16", dv2="*bf16", cu_seqlens="*i32", chunk_offsets="*i32", scale="fp32", T="i32")
    sig = {n: ptrs.get(n, "constexpr") for n in inspect.signature(k.fn).parameters}
    for bv, w in CONFIGS:
        const = dict(H=16, HV=16, K=128, V=128, BT=64, BV=bv, USE_G=True, USE_GK=False, USE_INITIAL_STATE=True,
                     USE_FINAL_STATE_GRADIENT=True, STATE_V_FIRST=False, IS_VARLEN=False)
        kk = triton.compile(ASTSource(k, sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": w, "num_stages": stages})
        print(f"FLA dhu BV {bv} warps {w}: shared {kk.metadata.shared} B  {CC.ptxas_usage(kk.asm['ptx'], 90)}",
              flush=True)


def main():
    p = argparse.ArgumentParser(prog="scan_compile.py", description=__doc__.split("\n")[0])
    p.add_argument("--mixes", default="m0,m9,m13,m16,m17,m18")
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--no-hr0", action="store_true")
    p.add_argument("--fla", default=None)
    a = p.parse_args()
    ours([m for m in a.mixes.split(",") if m], a.stages)
    if a.no_hr0:
        body = S.KFIRST_BODY
        for old, new in NO_HR0:
            if old not in body:
                raise SystemExit(f"scan_compile.py: {old!r} is no longer in scan_mix_probe's KFIRST_BODY")
            body = body.replace(old, new)
        S.KFIRST_BODY = body
        ours(["m17"], a.stages, " without dU")
    if a.fla:
        fla(a.fla, a.stages)


if __name__ == "__main__":
    main()
