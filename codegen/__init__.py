"""Triton code generation from verified claims: `chunkproof gen` prints
generated_kernels/ (plan.py stages, printer.py IR -> Triton, emit.py stage data,
backward.py the backward's stages, templates/ the skeletons)."""
