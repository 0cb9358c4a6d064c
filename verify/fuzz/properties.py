"""The properties a generated forward kernel must have, each a function of one drawn
example.  Every example is a pure function of (variant, property, seed, device, dtype),
so a failing seed replays exactly.  A property returns (error, tolerance, detail); it
fails when error > tolerance, when the error is not finite, or when it raises.

Gradient properties join these when the backward kernels exist (issue 4)."""
from __future__ import annotations

import contextlib
import math
import random
from dataclasses import dataclass

import torch

from .cases import BETAS, module, kernel, make_inputs
from .reference import recurrence, rel_rms

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (B, T, H, K, V): T = 1, T below, at and above the chunk size 64, K != V
BUCKETS = {
    "cpu": [(1, 1, 1, 16, 16), (1, 37, 2, 16, 32), (2, 64, 1, 32, 16), (1, 130, 1, 16, 24)],
    "cuda": [(2, 1000, 4, 128, 64), (1, 2049, 3, 128, 64), (3, 1, 2, 128, 64), (2, 333, 3, 128, 64)],
}
SCHEDULES = ("fused", "split")


def tolerance(dtype, fp32, low):
    return fp32 if dtype == "fp32" else low


@dataclass
class Example:
    variant: str
    prop: str
    seed: int
    device: str
    dtype: str
    bucket: tuple
    h0: bool
    schedule: str
    gates: str = "typical"
    beta: str = "random"
    split: int = 0            # a position 1 <= p < T (causality, split_sequence)

    def describe(self):
        B, T, H, K, V = self.bucket
        return (f"B={B} T={T} H={H} K={K} V={V} {self.dtype} h0={self.h0} {self.schedule} "
                f"gates={self.gates} beta={self.beta}" + (f" p={self.split}" if self.split else ""))

    def inputs(self, seed_offset=0):
        return make_inputs(self.variant, *self.bucket, seed=self.seed + seed_offset,
                           dtype=DTYPES[self.dtype], device=self.device, h0=self.h0,
                           gates=self.gates, beta=self.beta)


def draw(variant, prop, seed, device, dtype) -> Example:
    rng = random.Random(f"{variant}/{prop}/{seed}")
    buckets = BUCKETS[device]
    if prop in ("causality", "split_sequence"):
        buckets = [b for b in buckets if b[1] > 1]
    bucket = rng.choice(buckets)
    ex = Example(variant, prop, seed, device, dtype, bucket, rng.random() < 0.5, rng.choice(SCHEDULES))
    if prop == "extreme_gates":
        ex.gates = rng.choice(("near0", "strong", "underflow"))
        ex.beta = rng.choice(BETAS)
    if prop in ("causality", "split_sequence"):
        ex.split = rng.randrange(1, bucket[1])
    return ex


class _PoisonedTorch:
    """torch, except that empty / empty_like return NaN-filled float tensors: a kernel
    that leaves part of an output unwritten then shows NaN there."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def _poison(t):
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    def empty(self, *a, **k):
        return self._poison(torch.empty(*a, **k))

    def empty_like(self, *a, **k):
        return self._poison(torch.empty_like(*a, **k))


@contextlib.contextmanager
def _setup(variant, schedule, poison):
    mod = module(variant)
    old_sched, old_torch = mod.TILING["schedule"], mod.torch
    mod.TILING["schedule"] = schedule
    if poison:
        mod.torch = _PoisonedTorch()
    try:
        yield
    finally:
        mod.TILING["schedule"] = old_sched
        mod.torch = old_torch


def run(ex: Example, args, state, poison=False):
    with torch.no_grad(), _setup(ex.variant, ex.schedule, poison):
        return kernel(ex.variant)(*args, initial_state=state, output_final_state=True)


def _err_vs_reference(ex, args, ref, state, o, ht):
    ro, rh = recurrence(ex.variant, initial_state=state, **ref)
    if not (torch.isfinite(ro).all() and torch.isfinite(rh).all()):
        return 0.0, "the fp64 reference is not finite here: nothing to compare"
    eo, eh = rel_rms(o, ro), rel_rms(ht, rh)
    bad = [n for n, t in (("o", o), ("final state", ht)) if not torch.isfinite(t).all()]
    if bad:
        return math.inf, f"non-finite values in {', '.join(bad)} where the fp64 reference is finite"
    return max(eo, eh), f"rel RMS o {eo:.2e}, final state {eh:.2e}"


def matches_fp64(ex):
    args, ref, state = ex.inputs()
    o, ht = run(ex, args, state, poison=True)
    err, detail = _err_vs_reference(ex, args, ref, state, o, ht)
    return err, tolerance(ex.dtype, 1e-4, 5e-2), detail


def extreme_gates(ex):
    return matches_fp64(ex)


def _cut(x, lo, hi):
    return x[:, lo:hi].contiguous()


def causality(ex):
    args, _, state = ex.inputs()
    other, _, _ = ex.inputs(seed_offset=1)
    p = ex.split
    mixed = tuple(torch.cat([a[:, :p], b[:, p:]], dim=1) for a, b in zip(args, other))
    o1, _ = run(ex, args, state)
    o2, _ = run(ex, mixed, state)
    err = rel_rms(o2[:, :p], o1[:, :p].to(torch.float64))
    return err, tolerance(ex.dtype, 1e-5, 1e-2), f"outputs before p={p} moved by rel {err:.2e} when later tokens changed"


def split_sequence(ex):
    args, _, state = ex.inputs()
    p, T = ex.split, ex.bucket[1]
    o, ht = run(ex, args, state)
    oa, sa = run(ex, tuple(_cut(a, 0, p) for a in args), state)
    ob, sb = run(ex, tuple(_cut(a, p, T) for a in args), sa)
    eo = rel_rms(torch.cat([oa, ob], dim=1), o.to(torch.float64))
    eh = rel_rms(sb, ht.to(torch.float64))
    return max(eo, eh), tolerance(ex.dtype, 1e-4, 5e-2), \
        f"[0, {p}) then [{p}, {T}) with the carried state vs one call: o {eo:.2e}, final state {eh:.2e}"


def poisoned_outputs(ex):
    args, _, state = ex.inputs()
    o1, h1 = run(ex, args, state)
    o2, h2 = run(ex, args, state, poison=True)
    diffs = []
    for n, a, b in (("o", o1, o2), ("final state", h1, h2)):
        if not torch.equal(a, b):
            nan = torch.isnan(b) & ~torch.isnan(a)
            diffs.append(f"{n}: {int(nan.sum())} entries left unwritten (NaN)" if nan.any()
                         else f"{n}: differs between runs")
    return (math.inf if diffs else 0.0), 0.0, "; ".join(diffs) or "outputs identical with poisoned buffers"


PROPERTIES = {f.__name__: f for f in (matches_fp64, extreme_gates, causality, split_sequence, poisoned_outputs)}
