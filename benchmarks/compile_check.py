"""Compile every generated kernel for a GPU target without a GPU (Triton's bundled
LLVM and ptxas), to catch lowering failures and see shared memory, registers, spills
and compile times before spending device time.  Uses this machine's Triton, which may
be newer than the GPU's.

Each kernel is compiled with the launch its module gives it (the module's
launch_specs: constexprs, num_warps, num_stages, the same call its launch code makes),
so nothing here restates a launch.  --list prints those launches and checks them
against the kernels' signatures without compiling.

    python benchmarks/compile_check.py [--arch 90] [--dtype bf16] [--K 128 --V 128] [--list]
"""
import importlib
import inspect
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import triton.language as tl

from chunkproof.bench import args as A, tiling

PROG = "compile_check.py"
PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
INTS = ("T", "NP", "H", "HQ", "NCH", "use_h0", "store_ht", "use_dht")
FP32_STATES = ("h0", "ht", "dh", "dht", "dh0")     # states and their gradients: fp32 (dh: but see Launches.dh_type)
SEQ_TABLES = ("cu", "ci", "co")     # cu_seqlens' tables (int32; never read without VARLEN)


def constexpr_params(fn):
    # from the annotations, not fn.params: the interpreter's functions have none
    return [n for n, p in inspect.signature(fn.fn).parameters.items() if p.annotation is tl.constexpr]


def signature(fn, launch, mod, dtype, extra=None, spec=None):
    """The kernel's argument types as the module's launch code passes them on the
    benchmarks' inputs (gates fp32, the other tensors in ``dtype``).  A constexpr the
    launch gives (with ``extra``, a pass's: Launch.passes) that the kernel lacks, or the
    reverse, is a ValueError."""
    wanted, given = constexpr_params(fn), set(launch.constexprs) | set(extra or {})
    if set(wanted) != given:
        raise ValueError(f"{launch.kernel}: launch_specs gives constexprs {sorted(given - set(wanted))} it does "
                         f"not take, and not {sorted(set(wanted) - given)}")
    ptr = PTR[dtype]
    tensors = {n: "*fp32" if kind.startswith("gate") else ptr for n, kind in mod.ARGS}
    tensors.update({"d_" + n: t for n, t in tensors.items()})     # gradients: torch.empty_like
    tensors.update(h=ptr, do=ptr, o=ptr)
    sig = {}
    stored_types = getattr(mod, "STORED_TYPES", {}) if spec is not None else {}
    for name in inspect.signature(fn.fn).parameters:
        tile = name.split("_", 1)[-1]
        # a boundary tile, or delta S (dh), stored in the type its readers round it to
        stored = "dh" if name == "dh" else tile if name.startswith(("in_", "out_")) else None
        if name in given:
            sig[name] = "constexpr"
        elif name == "scale":
            sig[name] = "fp32"
        elif name in INTS:
            sig[name] = "i32"
        elif name in SEQ_TABLES or name == "rng":     # rng: a guarded kernel's chunk flags
            sig[name] = "*i32"
        elif stored == "dh" and spec is not None:     # Launches.dh_type (TILING dh_store)
            t = spec.dh_type(TORCH_DTYPES[dtype], stored_types.get("dh", []))
            sig[name] = "*fp32" if t == torch.float32 else ptr
        elif stored in stored_types:     # Launches.stored_type
            t = spec.stored_type(TORCH_DTYPES[dtype], stored_types[stored])
            sig[name] = "*fp32" if t == torch.float32 else ptr
        elif name.startswith(("r_", "w_")) and name[2:] in getattr(mod, "NARROWED", {}) and spec is not None:
            # Variant.narrowed: the inputs' dtype (a V reduction where one V block covers V)
            sig[name] = ptr if mod.NARROWED[name[2:]] != "vsum" or spec.NV == 1 else "*fp32"
        elif name in FP32_STATES or name.startswith(("r_", "w_")):   # r_, w_: tiles passed between kernels
            sig[name] = "*fp32"
        elif name in tensors:
            sig[name] = tensors[name]
        elif name.startswith(("in_", "out_")):
            sig[name] = "*fp32" if tile in mod.FP32_TILES else ptr
        else:
            raise ValueError(f"{launch.kernel}: no type known for argument {name!r}")
    return sig


def _value(x):
    return str(x) if isinstance(x, (tl.dtype, str)) else repr(x)


def describe(launch, extra=None):
    """One line: the launch's options, then its constexprs, as KEY=VALUE."""
    return " ".join([f"num_warps={launch.num_warps}", f"num_stages={launch.num_stages}"]
                    + [f"{k}={_value(x)}" for k, x in dict(launch.constexprs, **(extra or {})).items()])


def ptxas_usage(ptx, arch):
    """Registers and spills as the bundled ptxas reports them."""
    import triton
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


def compile_one(fn, launch, sig, arch, extra=None, dump=None):
    """(shared bytes, ptxas usage) of the kernel compiled for sm_<arch>; with ``dump``
    (a path without suffix) its TTGIR and PTX written there too."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    src = ASTSource(fn, sig, constexprs=dict(launch.constexprs, **(extra or {})))
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                       options={"num_warps": launch.num_warps, "num_stages": launch.num_stages})
    if dump:
        for ext in ("ttgir", "ptx"):
            with open(f"{dump}.{ext}", "w") as f:
                f.write(k.asm[ext])
    return k.metadata.shared, ptxas_usage(k.asm["ptx"], arch)


def check_variant(v, mod, args):
    """Compile (or with --list, describe) each kernel with its module's launch; the
    number of kernels that failed."""
    spec = mod.launch_specs(TORCH_DTYPES[args.dtype], torch.device("cuda"), args.K, args.V)
    launches = list(spec.kernels.values()) + [mod.recurrent_spec(TORCH_DTYPES[args.dtype], torch.device("cuda"),
                                                                  args.K, args.V)]
    bad = 0
    for launch in launches:
        if args.kernels and launch.kernel not in args.kernels.split(","):
            continue
        fn = getattr(mod, launch.kernel)
        passes = launch.passes()
        for extra in passes:
            # a guarded kernel's two passes (the rebalanced one runs for every chunk)
            name = launch.kernel + ("" if len(passes) == 1 else "[blocked]" if extra["BLOCKED"] else "[rebal.]")
            t0 = time.time()
            try:
                sig = signature(fn, launch, mod, args.dtype, extra, spec)
                if args.list:
                    print(f"{v} {name} {describe(launch, extra)}", flush=True)
                    continue
                dump = os.path.join(args.dump, f"{v}.{name}") if args.dump else None
                shared, usage = compile_one(fn, launch, sig, args.arch, extra, dump)
                print(f"{v:18s} {name:28s} ok   {time.time() - t0:6.1f} s  warps {launch.num_warps} "
                      f"stages {launch.num_stages}  shared {shared} B  {usage}", flush=True)
            except Exception as e:  # noqa: BLE001 - report every kernel
                msg = str(e).strip().splitlines()
                print(f"{v:18s} {name:28s} FAIL {time.time() - t0:6.1f} s  "
                      f"{msg[-1] if msg else type(e).__name__}", flush=True)
                bad += 1
    return bad


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
    ap.add_argument("--dump", metavar="DIR", help="also write each kernel's TTGIR and PTX into DIR "
                    "(VARIANT.KERNEL.ttgir, .ptx), to read its layouts")
    ap.add_argument("--list", action="store_true",
                    help="print each kernel's launch (checked against its signature) without compiling")
    args = ap.parse_args(argv)
    try:
        variants = A.variants(args.variants)
        overrides = tiling.parse_overrides(args.set)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
        for v in variants:      # an unknown key is refused before anything compiles
            with tiling.applied(importlib.import_module(f"chunkproof.kernels.{v}"), overrides):
                pass
    except ValueError as e:
        return A.fail(PROG, e)
    bad = 0
    for v in variants:
        mod = importlib.import_module(f"chunkproof.kernels.{v}")
        with tiling.applied(mod, overrides):
            bad += check_variant(v, mod, args)
    return 1 if bad else 0


if __name__ == "__main__":
    # a private cache, so that compile times are real
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="chunkproof_cc_")
    sys.exit(main())
