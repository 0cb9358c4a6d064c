"""The correctness gate of `chunkproof bench`: a side's outputs on the benchmark's own
inputs against the fp64 recurrence (chunkproof.fuzz.reference, the fuzz campaign's
oracle), before anything of it is timed.

The oracle is sequential over time and its autograd keeps every step's state, so it runs
on a prefix: every batch and head, the first `t` steps (t = T when T is small).  The
side is then called on that prefix too (o, the final state and, forward + backward,
every gradient are compared), and the o of its full-length call is compared on its
first t steps (causality makes them the same numbers), with every full-length output
checked finite.  Tolerances are the fuzz campaign's (chunkproof.fuzz.properties): rel RMS
5e-2 for bf16 / fp16, 1e-4 for fp32, ten times that for the gate and beta gradients;
gradients are measured as the campaign measures them (reference.grad_errors)."""
import math

import torch

from chunkproof.bench.metrics import reference_names
from chunkproof.fuzz.properties import GATE_GRADS, tolerance
from chunkproof.fuzz.reference import grad_errors, recurrence, reference_grads, rel_rms

GATE_FACTOR = 10
FULL_O = "o (full-length call, first t steps)"


def base_tolerance(dtype):
    return tolerance(dtype, 1e-4, 5e-2)


def tolerance_of(name, base):
    """A tensor's tolerance: gradient names are 'd' + the input's ('dg', 'dbeta')."""
    return base * GATE_FACTOR if name[:1] == "d" and name[1:] in GATE_GRADS else base


class Reference:
    """The fp64 recurrence on the prefix inputs, each part computed once and shared by
    every side and mode of one (variant, shape)."""

    def __init__(self, variant, inputs, h0, do, dht, scale):
        self.variant, self.inputs, self.h0, self.do, self.dht, self.scale = variant, inputs, h0, do, dht, scale
        self.ref_inputs = reference_names(inputs)
        self._fwd = self._grads = None

    def forward(self):
        if self._fwd is None:
            o, ht = recurrence(self.variant, scale=self.scale, initial_state=self.h0, **self.ref_inputs)
            self._fwd = {"o": o, "final_state": ht}
        return self._fwd

    def grads(self):
        if self._grads is None:
            self._grads = reference_grads(self.variant, self.ref_inputs, self.do, self.dht,
                                          scale=self.scale, initial_state=self.h0)
        return self._grads


def nonfinite(tensors):
    """Names of the tensors holding a NaN or an infinity."""
    return [n for n, x in tensors.items() if not torch.isfinite(x.detach()).all()]


class Verdict:
    def __init__(self, errors, base):
        self.errors, self.base = errors, base
        self.over = [n for n, e in errors.items() if not e <= tolerance_of(n, base)]

    @property
    def passed(self):
        return not self.over

    @property
    def max_err(self):
        return max(self.errors.values()) if self.errors else None

    def why(self):
        return "; ".join(f"{n} {self.errors[n]:.2e} > {tolerance_of(n, self.base):.0e}" for n in self.over)


def judge(ref, outs, grads, base, o_full=None):
    """Verdict on `outs` ({'o', 'final_state'} of the prefix call), `grads` ({input name or
    'initial_state': gradient} of the prefix call, or None) and `o_full` (the full-length
    call's o, or None).  A non-finite tensor has an infinite error."""
    want = ref.forward()
    errors = {}
    for n, x in outs.items():
        errors[n] = math.inf if nonfinite({n: x}) else rel_rms(x, want[n])
    if o_full is not None:
        t = want["o"].shape[1]
        errors[FULL_O] = math.inf if nonfinite({"o": o_full}) else rel_rms(o_full[:, :t], want["o"])
    if grads is not None:
        bad = set(nonfinite(grads))
        for n, e in grad_errors(grads, ref.grads(), ref.ref_inputs).items():
            errors["d" + n] = math.inf if n in bad or not math.isfinite(e) else e
    return Verdict(errors, base)
