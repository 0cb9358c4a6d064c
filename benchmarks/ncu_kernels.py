"""Why a kernel takes its time, on the GPU: one call of a variant's forward (or forward
and backward) after two warm-up calls (compiles, autotune), with the CUDA profiler range
around that one call only, so that Nsight Compute (started with --profile-from-start off)
reads the counters of exactly its kernels; then every compiled kernel's registers, spills
and shared memory as ptxas left them (no profiler needed).

    ncu --profile-from-start off --clock-control none --section SpeedOfLight ... \
        python3 benchmarks/ncu_kernels.py --variant kda --mode fwd [--shape 4,4096,16,128]
    python3 benchmarks/ncu_kernels.py --variant kda --mode fwd --out resources.md

benchmarks/gpu_ncu.sh runs both on the lent machine."""
import sys

import torch
import triton

from chunkproof.bench import args as A, calls, inputs

PROG = "ncu_kernels.py"


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--mode", choices=["fwd", "fwd+bwd"], default="fwd")
    p.add_argument("--shape", default="4,4096,16,128", help="B,T,H,D")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--out", default=None, help="append the resources table here")
    a = p.parse_args(argv)
    a.variant = A.variants(a.variant)[0]
    a.shape = A.shape(a.shape)
    a.torch_dtype = A.dtype(a.dtype)
    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU")
    return a


def compiled(mod):
    """(kernel name, CompiledKernel) for every specialisation the module's kernels hold."""
    for name in sorted(vars(mod)):
        fn = getattr(mod, name)
        if not isinstance(fn, triton.runtime.jit.JITFunction):
            continue
        for caches in fn.device_caches.values():
            for kern in caches[0].values():
                kern._init_handles()
                yield name, fn, kern


BLOCKS = ("BT", "BK", "BV", "BLOCKED", "DT2", "PREC2")


def constexprs(fn, kern):
    """(argument name, value) of the constexprs a specialisation was compiled with; the
    source keys them by argument position, as a tuple path or a bare index."""
    for key, val in getattr(kern.src, "constants", {}).items():
        i = key[0] if isinstance(key, tuple) else key
        name = fn.arg_names[i] if isinstance(i, int) and i < len(fn.arg_names) else str(i)
        yield name, val


def resources(mod, title):
    lines = [f"## {title}", "", "| kernel | warps | stages | regs/thread | spills (B) | shared (B) | constexprs |",
             "|---|---|---|---|---|---|---|"]
    for name, fn, k in compiled(mod):
        try:
            md = k.metadata
        except Exception as e:  # noqa: BLE001  (one unreadable kernel must not hide the rest)
            lines.append(f"| `{name}` | unreadable: {type(e).__name__} |")
            continue
        brief = ", ".join(f"{arg}={val}" for arg, val in constexprs(fn, k) if arg in BLOCKS)
        lines.append(f"| `{name}` | {md.num_warps} | {md.num_stages} | {k.n_regs} | {k.n_spills} | "
                     f"{md.shared} | {brief} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        return A.fail(PROG, e)
    B, T, H, D = a.shape
    x = inputs.bench_inputs(a.variant, B, T, H, D, a.torch_dtype, torch.float32, "cuda", seed=0)
    h0, do, dht = inputs.cotangents(B, T, H, D, D, a.torch_dtype, "cuda")
    mod, fn = calls.ours(a.variant)
    call = calls.of_mode(a.mode, fn, x, h0, do, dht, D ** -0.5)
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    table = resources(mod, f"{a.variant} {a.mode} at {a.shape} {a.dtype}")
    print(table)
    if a.out:
        with open(a.out, "a") as f:
            f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
