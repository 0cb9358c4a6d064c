"""FLA's Triton kernels under Triton's interpreter, on the CPU, to compare their bf16
errors with ours on the same inputs and the same rounding (benchmarks/fla_accuracy_cpu.py).

Four things stop FLA's kernels there, and `patched()` undoes each for its block:

- bf16 tiles are computed on their bit patterns (chunkproof.fuzz.interp_bf16 fixes it);
- autotune times every config with a GPU driver: here it keeps the first config that
  its pruning leaves (the interpreter computes the same numbers for any tiling, up to
  summation order);
- a kernel's `for i in range(n)` yields Python ints in the interpreter where compiled
  code has int32 scalars, and FLA calls `.to` on them: while a kernel runs, FLA's
  modules see a `range` of int32 scalars;
- FLA binds `tl.gather` to a module name at import, before the interpreter swaps its
  own in while a kernel runs: the name is looked up again at each call.

Measured against the GPU (docs/measurements.md, "FLA under the interpreter"): GLA's
per-tensor errors and their ratios to ours match the H100's to a few percent; not every
variant was checked."""
import builtins
import contextlib
import os
import sys
import warnings


@contextlib.contextmanager
def patched():
    """FLA runnable under the interpreter (TRITON_INTERPRET=1 must be set before Triton
    is imported) for the block; FLA is imported here."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("FLA on the CPU needs TRITON_INTERPRET=1 set before triton is imported")
    import numpy as np
    import triton.language as tl
    import triton.runtime.autotuner as at
    from triton.runtime import interpreter as interp

    from chunkproof.fuzz import interp_bf16

    with warnings.catch_warnings():
        # FLA says at import that it found no GPU and "rolls back to CPU": here that is the point
        warnings.filterwarnings("ignore", message="Triton is not supported on current platform")
        import fla.ops  # noqa: F401  (every op module, so the range patch reaches each)

    depth = [0]
    prune, call = at.Autotuner.prune_configs, interp.GridExecutor.__call__

    def first_config(self, kwargs, *a, **k):
        return prune(self, kwargs, *a, **k)[:1]

    def counted(self, *a, **k):
        depth[0] += 1
        try:
            return call(self, *a, **k)
        finally:
            depth[0] -= 1

    def kernel_range(*args):
        if not depth[0]:     # host code of the same module
            return builtins.range(*args)
        ints = [int(a.handle.data.item()) if isinstance(a, tl.tensor) else int(a) for a in args]
        return (tl.tensor(interp.TensorHandle(np.array(i, dtype=np.int32), tl.int32), tl.int32)
                for i in builtins.range(*ints))

    def late_gather(*a, **k):
        return tl.gather(*a, **k)

    mods = [m for n, m in list(sys.modules.items())
            if (n == "fla" or n.startswith("fla.")) and m is not None and "range" not in vars(m)]
    gathers = [m for m in mods if vars(m).get("gather") is tl.gather]
    undo = interp_bf16.patch()
    at.Autotuner.prune_configs, interp.GridExecutor.__call__ = first_config, counted
    for m in mods:
        m.range = kernel_range
    for m in gathers:
        m.gather = late_gather
    try:
        yield
    finally:
        for m in gathers:
            m.gather = tl.gather
        for m in mods:
            del m.range
        at.Autotuner.prune_configs, interp.GridExecutor.__call__ = prune, call
        undo()
