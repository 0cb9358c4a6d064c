"""What `chunkproof bench` puts side by side, each called one way: ours (the generated
module), FLA's same-named op, and torch's causal softmax attention as a yardstick.

A side's `step(mode, ...)` is the callable that is timed; `outputs(mode, ...)` is one
call's results as the gate reads them."""
import contextlib

import torch
import torch.nn.functional as F

from chunkproof.bench import calls, fla


class Unavailable(Exception):
    """A side that cannot run for this variant here (the message says why)."""


class Side:
    gated = True        # its outputs go through the correctness gate

    def __init__(self, name, fn):
        self.name, self.fn = name, fn
        self.log = None

    def context(self):
        return contextlib.nullcontext()

    def step(self, mode, x, h0, do, dht, scale):
        if mode == "fwd":
            return lambda: calls.forward(self.fn, x, h0, scale)
        return lambda: calls.fwd_bwd_state(self.fn, x, h0, do, dht, scale)

    @staticmethod
    def split(mode, result):
        """({'o', 'final_state'}, {name: gradient} or None) of one step's result."""
        if mode == "fwd":
            o, ht = result
            return {"o": o, "final_state": ht}, None
        o, ht, grads = result
        return {"o": o, "final_state": ht}, grads


class FLASide(Side):
    """FLA's op as its dispatch routes it; `context` records which backend ran."""

    def __init__(self, variant, force):
        if variant not in fla.ENTRY:
            raise Unavailable("FLA: no entry point known for this variant (chunkproof.bench.fla.ENTRY)")
        if not fla.importable():
            raise Unavailable("FLA: not installed")
        super().__init__("fla", fla.load(variant, force))
        self.log = fla.DispatchLog()

    def context(self):
        return self.log


def ours(variant):
    _, fn = calls.ours(variant)
    return Side("ours", fn)


class SDPA:
    """scaled_dot_product_attention(is_causal=True) on q, k, v in [B, H, T, D]: softmax
    attention at the same shape, ungated (it computes something else)."""
    name = "sdpa"

    def __init__(self, x, do):
        self.q, self.k, self.v = (x[n].transpose(1, 2).contiguous() for n in ("q", "k", "v"))
        self.do = do.transpose(1, 2).contiguous()

    def step(self, mode):
        if mode == "fwd":
            def fwd():
                with torch.no_grad():
                    return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
            return fwd

        def fwd_bwd():
            leaves = [t.detach().requires_grad_() for t in (self.q, self.k, self.v)]
            with torch.enable_grad():
                o = F.scaled_dot_product_attention(*leaves, is_causal=True)
                return torch.autograd.grad(o, leaves, self.do)
        return fwd_bwd
