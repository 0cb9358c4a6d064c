"""Whether a regenerated kernel module computes the same bits as another version of it:
the output, the final state and every gradient of forward + backward (L = <dO, O> +
<dS_T, S_T>, with an initial state) on the same inputs, compared with torch.equal.  For
a change that must move work between kernels without changing a value:

    git show HEAD:generated_kernels/kda.py > /tmp/kda_before.py
    TRITON_INTERPRET=1 python benchmarks/same_outputs.py --variant kda --before /tmp/kda_before.py

Exit 0 when every tensor is equal at every dtype, 1 when one differs (named), 2 on bad
input.  Defaults: shape (1, 130, 2, 32) (a partial last chunk), bf16 and fp32."""
import importlib
import importlib.util
import os
import sys

import torch

from chunkproof.bench import args as A, calls, inputs

PROG = "same_outputs.py"


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--before", required=True, help="the other version of the module's source file")
    p.add_argument("--shape", default="1,130,2,32", help="B,T,H,D")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    a.variant = A.variant(a.variant)
    a.shape = A.shape(a.shape)
    a.dtypes = [(d, A.dtype(d)) for d in a.dtypes.split(",")]
    if not os.path.isfile(a.before):
        raise ValueError(f"--before {a.before}: no such file")
    if a.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("on the CPU the kernels run under Triton's interpreter: set TRITON_INTERPRET=1")
    return a


def _module_from(path, name):
    importlib.import_module("chunkproof.kernels._runtime")   # the runtime both versions import
    spec = importlib.util.spec_from_file_location(f"chunkproof.kernels.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(fn, x, h0, do, dht):
    o, ht, grads = calls.fwd_bwd_state(fn, x, h0, do, dht)
    named = {"o": o, "final state": ht, "initial state's gradient": grads.pop("initial_state")}
    named.update({f"d{k}": g for k, g in grads.items()})
    return named


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
        after, func = calls.ours(a.variant)
        before = _module_from(a.before, f"{a.variant}_before")
        if not hasattr(before, func.__name__):
            raise ValueError(f"--before {a.before} has no function {func.__name__}")
    except (ValueError, SyntaxError, ImportError) as e:
        return A.fail(PROG, e)
    B, T, H, D = a.shape
    differ = []
    for label, dt in a.dtypes:
        x = inputs.bench_inputs(a.variant, B, T, H, D, dt, torch.float32, a.device, seed=0)
        h0, do, dht = inputs.cotangents(B, T, H, D, D, dt, a.device)
        old = _run(getattr(before, func.__name__), x, h0, do, dht)
        new = _run(func, x, h0, do, dht)
        same = [n for n in new if torch.equal(old[n], new[n])]
        diff = [n for n in new if n not in same]
        print(f"{a.variant} {label} {a.shape}: {len(same)} of {len(new)} tensors equal"
              + (f"; differ: {', '.join(diff)}" if diff else ""))
        differ += diff
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
