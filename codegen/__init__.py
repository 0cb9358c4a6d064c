"""Triton code generation from verified claims: `chunkproof gen` prints
generated_kernels/ (plan.py the forward's stages, backward.py the backward's,
kernel_plan.py what a kernel computes, reads and writes, printer.py IR -> Triton,
emit.py kernel plans -> printed stages, tiling.py the tiling schema, variants.py the
variants' claims and tilings, wrap.py line folding, templates/ the skeletons)."""
