"""Round in Triton's interpreter as the H200 does (the precision planner, codegen/precision.py,
and the accuracy benchmarks use it).

Two ways the plain interpreter (Triton 3.9) rounds differently from the GPU, which make
a CPU look at bf16 gradient errors misleading:

- it casts fp32 to bf16 by dropping the low 16 bits (toward zero: a biased error, about
  1.8x the GPU's rel RMS on GLA's gradients), where the GPU rounds to nearest even;
- it multiplies every fp32 product in full fp32 whatever its input_precision, where a
  "tf32" product on the tensor cores keeps 10 mantissa bits of each operand.

`emulate(tf32)` patches both: fp32 -> bf16 casts (and stores) round to nearest even, and
both fp32 operands of a "tf32" product are rounded first, by ``tf32``:

- "rna": round to nearest, ties away from zero (cvt.rna.tf32.f32);
- "trunc": drop the low 13 bits (what an mma reads from a plain fp32 register);
- "exact": no rounding (the interpreter's own products).

"tf32x3" and "ieee" products stay exact; a product of bf16-rounded operands is exact in
fp32 already.  Returns a function that undoes the patches.
"""
import numpy as np

MODES = ("exact", "rna", "trunc")
_LOW = np.uint32(0x1FFF)      # the 13 mantissa bits that tf32 drops


def to_tf32(x, mode):
    """x (float32 ndarray) rounded to tf32's mantissa by ``mode``."""
    if mode == "exact" or x.dtype != np.float32:
        return x
    bits = np.ascontiguousarray(x).view(np.uint32)
    if mode == "rna":
        bits = bits + np.uint32(0x1000)       # half of the dropped unit: ties go away from 0
    elif mode != "trunc":
        raise ValueError(f"tf32 emulation must be one of {MODES}, got {mode!r}")
    out = (bits & ~_LOW).view(np.float32)
    return np.where(np.isfinite(x), out, x).reshape(x.shape)     # inf and nan keep their bits


def to_bf16_bits(x):
    """float32 ndarray -> bf16 bit patterns (uint16), rounded to nearest even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    up = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    keep = (bits >> np.uint32(16)).astype(np.uint16) | np.uint16(0x40)     # nan stays a (quiet) nan
    return np.where(np.isnan(x), keep, up).reshape(x.shape)


def emulate(tf32):
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter as interp

    if tf32 not in MODES:
        raise ValueError(f"tf32 emulation must be one of {MODES}, got {tf32!r}")
    builder = interp.InterpreterBuilder
    orig_dot, orig_cast = builder.create_dot, builder.cast_impl

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == ir.INPUT_PRECISION.TF32 and tf32 != "exact":
            a = interp.TensorHandle(to_tf32(a.data, tf32), a.dtype)
            b = interp.TensorHandle(to_tf32(b.data, tf32), b.dtype)
        return orig_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interp.TensorHandle(to_bf16_bits(src.data), tl.bfloat16)
        return orig_cast(self, src, dst_type)

    builder.create_dot, builder.cast_impl = create_dot, cast_impl

    def undo():
        builder.create_dot, builder.cast_impl = orig_dot, orig_cast
    return undo
