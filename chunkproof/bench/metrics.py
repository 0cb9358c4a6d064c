"""Errors against the fp64 recurrence of chunkproof.fuzz.reference (the fuzz campaign's
oracle), for inputs in the APIs' names (DPLR's gate gk is the reference's g), and the
memory floor of a forward."""
import math

import torch

from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms  # noqa: F401


def reference_names(inputs):
    """inputs renamed as the fp64 oracle names them (DPLR's gate gk is its g)."""
    return {("g" if n == "gk" else n): x for n, x in inputs.items()}


def reference_forward(variant, inputs, scale=None, initial_state=None):
    """o [B, T, H, V] and final state [B, H, K, V], float64."""
    return recurrence(variant, scale=scale, initial_state=initial_state, **reference_names(inputs))


def reference_backward(variant, inputs, h0, do, dht, scale=None):
    """o and {name: gradient} (the APIs' names, and 'initial_state'), float64."""
    ref = reference_names(inputs)
    o, _ = recurrence(variant, scale=scale, initial_state=h0, **ref)
    grads = reference_grads(variant, ref, do, dht, scale=scale, initial_state=h0)
    return o, {("gk" if n == "g" and "gk" in inputs else n): g for n, g in grads.items()}


def errors(got, want):
    """{name: rel RMS} of each tensor of `got` against `want` (same names); a
    non-finite tensor is an error, named."""
    out = {}
    for n, x in got.items():
        if x is None:
            raise ValueError(f"{n}: nothing returned")
        if not torch.isfinite(x.detach().float()).all():
            raise FloatingPointError(f"non-finite values in {n}")
        out[n] = rel_rms(x, want[n])
        if not math.isfinite(out[n]):
            raise FloatingPointError(f"non-finite error of {n}")
    return out


def nbytes(t):
    return t.numel() * t.element_size()


def forward_bytes(inputs, h0=None):
    """The fewest bytes a forward moves: every input (and h0) read once, o (v's shape and
    dtype) and the fp32 final state written once."""
    v = inputs["v"]
    B, _, H, V = v.shape
    K = inputs["q"].shape[-1]
    return sum(nbytes(t) for t in inputs.values()) + nbytes(v) + B * H * K * V * 4 + (nbytes(h0) if h0 is not None else 0)


def fwd_bwd_bytes(inputs, h0):
    """The fewest bytes a forward then a backward move as two calls: the forward's, then
    the backward reading every input, h0, dO and dS_T once and writing one gradient per
    input and h0 (each its input's size and dtype).  Nothing the forward could keep for the
    backward is counted: a floor, not a model of either implementation."""
    v = inputs["v"]
    B, _, H, V = v.shape
    K = inputs["q"].shape[-1]
    ins = sum(nbytes(t) for t in inputs.values()) + nbytes(h0)
    cotangents = nbytes(v) + B * H * K * V * 4
    return forward_bytes(inputs, h0) + 2 * ins + cotangents
