"""A float64 field on torch tensors, for the tests that hold the checker's own float
truths (numpy, reverse mode) to torch autograd.  The checker does not import torch:
its start-up would cost 2.5 s; the independence check lives here instead."""
import torch

from chunkproof.verify.evaluate import Point
from chunkproof.verify.fields import Float


class TorchFloat(Float):
    name = "float64 (torch)"

    def const(self, a):
        return torch.as_tensor(a, dtype=torch.float64)

    def eye(self, n):
        return torch.eye(n, dtype=torch.float64)

    def zeros(self, r, c):
        return torch.zeros(r, c, dtype=torch.float64)

    def ones(self, r, c):
        return torch.ones(r, c, dtype=torch.float64)

    def inv(self, a):
        return torch.linalg.inv(a)

    def exp(self, a):
        return torch.exp(a)

    def log(self, a):
        return torch.log(a)

    def T(self, a):
        return a.transpose(-1, -2)

    def vstack(self, xs):
        return torch.cat(xs, dim=-2)

    def hstack(self, xs):
        return torch.cat(xs, dim=-1)


def _t(a):
    return None if a is None else torch.as_tensor(a, dtype=torch.float64)


def on_torch(pt: Point, params=None) -> Point:
    """The same point (a numpy Float one) with torch tensors; ``params`` replaces the
    parameters' values (autograd leaves, say)."""
    ps = params if params is not None else {n: _t(pt.param_value(n)) for n in pt.param_decl}
    return Point(pt.deriv, pt.rec.name, TorchFloat(), pt.sizes, {k: _t(v) for k, v in pt.seq.items()},
                 _t(pt.S0), _t(pt.dO), _t(pt.dST), ps)
