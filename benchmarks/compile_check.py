"""Compile every generated kernel for a GPU target without a GPU (Triton's bundled
LLVM and ptxas), to catch lowering failures and see compile times before spending
device time.  Uses this machine's Triton, which may be newer than the GPU's.

    python benchmarks/compile_check.py [--arch 90] [--dtype bf16] [--K 128 --V 128]
"""
import importlib
import inspect
import os
import tempfile
import sys
import time

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from chunkproof.bench import args as A, tiling
from chunkproof.kernels import _runtime

PROG = "compile_check.py"
PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def signature(fn, dtype, consts, fp32_tiles=()):
    sig = {}
    for name in inspect.signature(fn.fn).parameters:
        if name in consts:
            sig[name] = "constexpr"
        elif name in ("scale",):
            sig[name] = "fp32"
        elif name in ("T", "H", "NTOK", "NCH", "use_h0", "store_ht", "use_dht"):
            sig[name] = "i32"
        elif name in ("h0", "ht", "dh", "dht", "dh0") or name.endswith("_Gamma") or name in ("g", "gk") \
                or name.split("_", 1)[-1] in fp32_tiles and name.startswith(("in_", "out_")):
            sig[name] = "*fp32"
        elif name.startswith(("r_", "w_")):   # tiles passed between the backward's kernels
            sig[name] = "*fp32"
        elif name.startswith("d_") and name != "d_v":   # per-V-block partial sums (V > BV)
            sig[name] = "*fp32"
        else:
            sig[name] = PTR[dtype]
    return sig


def ptxas_usage(ptx, arch):
    """Registers and spills as ptxas reports them (the bundled ptxas)."""
    import os
    import re
    import subprocess
    import tempfile
    out = ""
    # the bundled ptxas may be older than the PTX this Triton prints; try the newer one too
    for name in ("ptxas", "ptxas-blackwell"):
        ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
        if not os.path.exists(ptxas):
            continue
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "k.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            arch_s = f"sm_{arch}a" if arch == 90 else f"sm_{arch}"
            r = subprocess.run([ptxas, "-v", f"--gpu-name={arch_s}", path, "-o", os.path.join(d, "k.o")],
                               capture_output=True, text=True)
        out = r.stderr + r.stdout
        if r.returncode == 0:
            break
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out)
    return (f"regs {regs.group(1) if regs else '?'}, spill stores/loads "
            f"{spill.group(1) + '/' + spill.group(2) if spill else '?'} B")


def compile_one(v, kname, fn, args, til, BT, BK, BVF, BV, go, target, mod=None):
    # each kernel with the product types the generated module launches it with
    grad = kname in ("_dgrad_kernel", "_dgradv_kernel", "_dgradk_kernel", "_dgradc_kernel", "_dgradkb_kernel")
    stage = "dstate" if kname in ("_dstate_kernel", "_dstateh_kernel", "_dstate_pre_kernel") else ("grad" if grad else None)
    types = _runtime.kernel_types(TORCH_DTYPES[args.dtype], torch.device("cuda"), til, stage)
    consts = dict(K=args.K, V=args.V, BT=BT, BK=BK, BV=BVF if kname == "_intra_kernel" else BV, **types)
    role = "grad" if grad else {"_intra_kernel": "prep", "_out_kernel": "out", "_dstate_pre_kernel": "out"}.get(kname, "scan")
    if kname in ("_dstateh_kernel", "_dstate_pre_kernel", "_dgradv_kernel"):
        consts.update(BVF=BVF)
    if grad:   # the gradient kernels: their own V blocks
        consts.update(BV=min(til["grad_BV"], BVF))
    if go is not None:
        consts.update(GO=go)
    if kname in ("_dgradv_kernel", "_dgradk_kernel", "_dgradc_kernel", "_dgradkb_kernel"):
        consts.update(BKF=BK)
        if kname != "_dgradv_kernel":
            consts.update(NV=-(-args.V // consts["BV"]))
        if kname == "_dgradkb_kernel":    # blocked over K (TILING grad_ksplit)
            consts.update(BK=min(til.get("grad_ksplit") or BK, BK))
    label = kname if go is None else f"{kname}[GO={go}]"
    t0 = time.time()
    try:
        src = ASTSource(fn, signature(fn, args.dtype, consts, getattr(mod, "FP32_TILES", ())), constexprs=consts)
        opts = {"num_warps": til[role + "_warps"], "num_stages": til[role + "_stages"]}
        if kname in ("_dgradk_kernel", "_dgradc_kernel", "_dgradkb_kernel") and til.get("gradk_warps"):
            opts["num_warps"] = til["gradk_warps"]
        k = triton.compile(src, target=target, options=opts)
        print(f"{v:18s} {label:22s} ok   {time.time() - t0:6.1f} s  shared {k.metadata.shared} B"
              f"  {ptxas_usage(k.asm['ptx'], args.arch)}", flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - report every kernel
        msg = str(e).strip().splitlines()
        print(f"{v:18s} {label:22s} FAIL {time.time() - t0:6.1f} s  {msg[-1] if msg else type(e).__name__}",
              flush=True)
        return 1


def main(argv=None):
    ap = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--dtype", default="bf16", choices=sorted(PTR))
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--V", type=int, default=128)
    ap.add_argument("--variants", default="all")
    ap.add_argument("--kernels", default="", help="comma-separated kernel names (default: all)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a TILING override: JSON (8, null, [16, 32]) or a bare word; repeatable")
    args = ap.parse_args(argv)
    try:
        variants = A.variants(args.variants)
        overrides = tiling.parse_overrides(args.set)
        for v in variants:      # an unknown key is refused before anything compiles
            with tiling.applied(importlib.import_module(f"chunkproof.kernels.{v}"), overrides):
                pass
    except ValueError as e:
        return A.fail(PROG, e)
    tdt = TORCH_DTYPES[args.dtype]
    target = GPUTarget("cuda", args.arch, 32)
    bad = 0
    for v in variants:
        mod = importlib.import_module(f"chunkproof.kernels.{v}")
        with tiling.applied(mod, overrides) as settings:
            bad += check_variant(v, mod, settings, args, tdt, target)
    return 1 if bad else 0


def check_variant(v, mod, settings, args, tdt, target):
    """Compile each kernel of mod with the launch options its tiling gives (the launch
    code of the generated module, mirrored: keep the two in step)."""
    bad = 0
    til = _runtime.effective_tiling(settings, tdt, args.K, args.V)
    BT, BK, BVF, BV = _runtime.block_sizes(args.K, args.V, til["BT"], til["BV"])
    for kname in ("_intra_kernel", "_scan_kernel", "_state_kernel", "_out_kernel", "_dstate_kernel",
                  "_dstate_pre_kernel", "_dstateh_kernel",
                  "_dgrad_kernel", "_dgradv_kernel", "_dgradk_kernel", "_dgradc_kernel", "_dgradkb_kernel"):
        fn = getattr(mod, kname, None)
        if fn is None or (args.kernels and kname not in args.kernels.split(",")):
            continue
        # the gradient kernel is compiled once per launch group (TILING grad_groups)
        groups = _runtime.grad_launches(til, mod.ARGS) if kname == "_dgrad_kernel" else [None]
        for go in groups:
            bad += compile_one(v, kname, fn, args, til, BT, BK, BVF, BV, go, target, mod)
    return bad


if __name__ == "__main__":
    # a private cache, so that compile times are real
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="chunkproof_cc_")
    sys.exit(main())
