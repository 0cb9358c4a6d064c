"""A float64 field on torch tensors, for the tests that hold the checker's own float
truths (numpy, reverse mode) to torch autograd.  The checker does not import torch
(its start-up would cost 2.5 s); the field is the fuzz layer's, which does."""
import torch

from chunkproof.verify.evaluate import Point
from chunkproof.fuzz.chunked import torch_field


def TorchFloat():
    """The fuzz layer's torch field (chunkproof.fuzz.chunked), in float64."""
    return torch_field(torch.float64)


def _t(a):
    return None if a is None else torch.as_tensor(a, dtype=torch.float64)


def on_torch(pt: Point, params=None) -> Point:
    """The same point (a numpy Float one) with torch tensors; ``params`` replaces the
    parameters' values (autograd leaves, say)."""
    ps = params if params is not None else {n: _t(pt.param_value(n)) for n in pt.param_decl}
    return Point(pt.deriv, pt.rec.name, TorchFloat(), pt.sizes, {k: _t(v) for k, v in pt.seq.items()},
                 _t(pt.S0), _t(pt.dO), _t(pt.dST), ps)
