"""bf16 tiles in Triton's interpreter computed as the GPU computes them.

The interpreter keeps a bf16 tile as its bit patterns (uint16) and applies numpy to
those bits: a product of two bf16 tiles, bf16 * bf16, a sum or cumsum of a bf16 tile and
a bf16 constant (bf16 * 0.5) come out as garbage or raise.  Our generated kernels never
do any of these on bf16 (dot_types multiplies bf16-rounded operands in fp32 on the CPU),
but third-party kernels do (FLA's: benchmarks/fla_accuracy_cpu.py runs them here to
compare bf16 errors on the same inputs).  `patch()` makes each of them compute as the
GPU does, as far as one rounding rule says it:

- a product of bf16 tiles: exact products, fp32 accumulation (as a tensor-core mma);
- an elementwise op or math function of bf16 operands: in fp32, the result rounded to
  bf16 (for one op of bf16 operands this is what the GPU's native bf16 op gives);
- a comparison: in fp32 (the bits of a negative number order backwards);
- tl.sum / tl.cumsum of a bf16 tile (Triton keeps bf16 for these): every partial sum
  rounded to bf16, a pairwise tree for sum and a running sum for cumsum.  The GPU's
  order (per thread, then across lanes and warps) is not reproduced, only the rounding
  at each add;
- min / max: on the values, not the bits.

Returns a function that undoes the patches.  rounding.emulate (the H200's fp32 -> bf16
rounding and tf32 products) is independent of this and composes with it."""
import numpy as np

# the InterpreterBuilder methods that compute a float result from float operands
_ARITH = ("create_fadd", "create_fmul", "create_fdiv", "create_fsub", "create_fneg", "create_fma",
          "create_minimumf", "create_minnumf", "create_maximumf", "create_maxnumf", "create_exp", "create_exp2",
          "create_log", "create_log2", "create_sqrt", "create_precise_sqrt", "create_rsqrt", "create_precise_divf",
          "create_clampf", "create_cos", "create_sin", "create_erf")


_ABSENT = object()


def bf16_to_f32(bits):
    """bf16 bit patterns (uint16 ndarray) -> float32 (exact)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def patch():
    import triton.language as tl
    from triton.runtime import interpreter as interp

    from chunkproof.fuzz.rounding import to_bf16_bits

    H, B = interp.TensorHandle, interp.InterpreterBuilder
    saved = []

    def setattr_saved(obj, name, value):
        saved.append((obj, name, obj.__dict__.get(name, _ABSENT)))
        setattr(obj, name, value)

    def is_bf16(a):
        return isinstance(a, H) and a.dtype.scalar == tl.bfloat16

    def widen(a):
        return H(bf16_to_f32(a.data), tl.float32) if is_bf16(a) else a

    def narrow(a):
        return H(to_bf16_bits(a.data), tl.bfloat16)

    def wrapped(orig, compare):
        def f(self, *args):
            if not any(is_bf16(a) for a in args):
                return orig(self, *args)
            out = orig(self, *[widen(a) for a in args])
            return out if compare or out.dtype.scalar != tl.float32 else narrow(out)
        return f

    for name in dir(B):
        if name.startswith("create_fcmp"):
            setattr_saved(B, name, wrapped(getattr(B, name), True))
        elif name in _ARITH and hasattr(B, name):
            setattr_saved(B, name, wrapped(getattr(B, name), False))

    dot = B.create_dot
    setattr_saved(B, "create_dot", lambda self, a, b, d, *rest: dot(self, widen(a), widen(b), d, *rest))
    setattr_saved(B, "get_bf16", lambda self, value: narrow(H(np.array([value], dtype=np.float32), tl.float32)))

    rsum, rminmax, cumsum = interp.ReduceOps.sum, interp.ReduceOps.min_max, interp.ScanOps.cumsum

    def tree_sum(x, axis, keep_dims):
        x = np.moveaxis(x, axis, 0)
        while x.shape[0] > 1:
            if x.shape[0] % 2:
                x = np.concatenate([x, np.zeros_like(x[:1])])
            x = bf16_to_f32(to_bf16_bits(x[0::2] + x[1::2]))
        return np.expand_dims(x[0], axis) if keep_dims else x[0]

    def red_sum(self, input):
        if input.dtype.scalar != tl.bfloat16:
            return rsum(self, input)
        data, axis = bf16_to_f32(input.handle.data), self.axis
        if axis is None:
            data, axis = data.reshape(-1), 0
        out = np.asarray(tree_sum(data, axis, self.keep_dims), dtype=np.float32)
        return self.to_tensor(to_bf16_bits(out), input.dtype)

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        x = input[0] if isinstance(input, tuple) else input
        if x.dtype.scalar != tl.bfloat16:
            return rminmax(self, input, val_reduce_op, idx_reduce_op)
        ty = x.type.with_element_ty(tl.float32) if hasattr(x.type, "with_element_ty") else tl.float32
        out = rminmax(self, tl.core.tensor(H(bf16_to_f32(x.handle.data), tl.float32), ty), val_reduce_op,
                      idx_reduce_op)
        back = lambda t: self.to_tensor(to_bf16_bits(t.handle.data), tl.bfloat16)     # noqa: E731
        if isinstance(out, tuple):
            return back(out[0]), out[1]
        return back(out) if val_reduce_op else out

    def scan_sum(self, input):
        if input.dtype.scalar != tl.bfloat16:
            return cumsum(self, input)
        x = np.moveaxis(bf16_to_f32(input.handle.data), self.axis, 0).copy()
        for i in range(1, x.shape[0]):
            x[i] = bf16_to_f32(to_bf16_bits(x[i - 1] + x[i]))
        return [self.to_tensor(to_bf16_bits(np.moveaxis(x, 0, self.axis)), input.dtype)]

    setattr_saved(interp.ReduceOps, "sum", red_sum)
    setattr_saved(interp.ReduceOps, "min_max", min_max)
    setattr_saved(interp.ScanOps, "cumsum", scan_sum)

    def undo():
        for obj, name, value in reversed(saved):
            if value is _ABSENT:
                delattr(obj, name)
            else:
                setattr(obj, name, value)
    return undo
