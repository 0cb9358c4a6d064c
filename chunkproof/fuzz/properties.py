"""The properties the generated kernels must have, forward and backward, each a
function of one drawn example.  Every example is a pure function of (variant, property,
seed, device, dtype), so a failing seed replays exactly.  A property returns (error,
tolerance, detail); it fails when error > tolerance, when the error is not finite, or
when it raises.

Gradients go through the public functions under torch.autograd, for the loss
<dO, O> + <dS_T, S_T> with random cotangents.  The gradients of the gates and of beta
have ten times the tolerance of the others (issue 4's targets); the error a property
returns divides theirs by ten, so that one tolerance applies to all (the detail gives
the raw values).  A gradient that is 0 in exact arithmetic is measured against 1e-3 of
the largest gradient; a log-gate gradient against at least the size of the terms it
sums (reference.gate_grad_scale: at -20 per step they cancel to 1e-8 of themselves)."""
from __future__ import annotations

import contextlib
import math
import random
from dataclasses import dataclass

import torch

from .cases import BETAS, module, kernel, make_inputs
from .reference import grad_errors, recurrence, reference_grads, rel_rms

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (B, T, H, K, V): T = 1, T below, at and above the chunk size 64, K != V
BUCKETS = {
    "cpu": [(1, 1, 1, 16, 16), (1, 37, 2, 16, 32), (2, 64, 1, 32, 16), (1, 130, 1, 16, 24)],
    "cuda": [(2, 1000, 4, 128, 64), (1, 2049, 3, 128, 64), (3, 1, 2, 128, 64), (2, 333, 3, 128, 64)],
}
# the schedules an example used to draw from; the draw is kept (its value unused) so that a
# saved seed still replays the same inputs (tests/fuzz_failures.json)
_DRAWN_SCHEDULES = ("fused", "split")


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
    gates: str = "typical"
    beta: str = "random"
    split: int = 0            # a position 1 <= p < T (causality, split_sequence)

    def describe(self):
        B, T, H, K, V = self.bucket
        return (f"B={B} T={T} H={H} K={K} V={V} {self.dtype} h0={self.h0} "
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
    ex = Example(variant, prop, seed, device, dtype, bucket, rng.random() < 0.5)
    rng.choice(_DRAWN_SCHEDULES)
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
def _setup(variant, poison):
    """The module's torch NaN-poisoned (``poison``) for the block."""
    mod = module(variant)
    old_torch = mod.torch
    if poison:
        mod.torch = _PoisonedTorch()
    try:
        yield
    finally:
        mod.torch = old_torch


GATE_GRADS = ("g", "gk", "beta")


def cotangents(ex):
    """dO ([B, T, H, V], o's dtype) and dS_T ([B, H, K, V], fp32) for the example."""
    B, T, H, K, V = ex.bucket
    gen = torch.Generator().manual_seed(ex.seed + 7)
    do = torch.randn(B, T, H, V, generator=gen).to(DTYPES[ex.dtype]).to(ex.device)
    dht = torch.randn(B, H, K, V, generator=gen).to(ex.device)
    return do, dht


def names(ex):
    return [n for n, _ in module(ex.variant).ARGS]


def leaves_of(args, state):
    return [a.detach().clone().requires_grad_() for a in args], \
        (None if state is None else state.detach().clone().requires_grad_())


def grads_of(outputs, cotans, leaves, h0, arg_names):
    wrt = list(leaves) + ([h0] if h0 is not None else [])
    gs = torch.autograd.grad(list(outputs), wrt, list(cotans))
    return dict(zip(arg_names + (["initial_state"] if h0 is not None else []), gs))


def run_grad(ex: Example, args, state, do, dht, poison=False):
    """(o, final state, {name: gradient}) through the public function's autograd."""
    leaves, h0 = leaves_of(args, state)
    with torch.enable_grad(), _setup(ex.variant, poison):
        o, ht = kernel(ex.variant)(*leaves, initial_state=h0, output_final_state=True)
        grads = grads_of((o, ht), (do, dht), leaves, h0, names(ex))
    return o.detach(), ht.detach(), grads


def _scaled(n, err):
    return err / 10 if n in GATE_GRADS else err


def _err_vs_reference(ex, ref, state, o, ht, grads, do, dht):
    ro, rh = recurrence(ex.variant, initial_state=state, **ref)
    if not (torch.isfinite(ro).all() and torch.isfinite(rh).all()):
        return 0.0, "the fp64 reference is not finite here: nothing to compare"
    got = dict({"o": o, "final state": ht}, **{"d" + n: g for n, g in grads.items()})
    bad = [n for n, t in got.items() if not torch.isfinite(t).all()]
    if bad:
        return math.inf, f"non-finite values in {', '.join(bad)} where the fp64 reference is finite"
    errs = {"o": rel_rms(o, ro), "final state": rel_rms(ht, rh)}
    errs.update(("d" + n, e) for n, e in
                grad_errors(grads, reference_grads(ex.variant, ref, do, dht, initial_state=state), ref).items())
    worst = max(_scaled(n[1:] if n.startswith("d") else n, e) for n, e in errs.items())
    return worst, "rel RMS " + ", ".join(f"{n} {e:.2e}" for n, e in errs.items())


def matches_fp64(ex):
    # every output and every gradient (NaN-poisoned buffers, forward and backward)
    args, ref, state = ex.inputs()
    do, dht = cotangents(ex)
    o, ht, grads = run_grad(ex, args, state, do, dht, poison=True)
    err, detail = _err_vs_reference(ex, ref, state, o, ht, grads, do, dht)
    return err, tolerance(ex.dtype, 1e-4, 5e-2), detail


def extreme_gates(ex):
    return matches_fp64(ex)


def _cut(x, lo, hi):
    return x[:, lo:hi].contiguous()


def causality(ex):
    # tokens after p change: outputs before p do not move; with dO zero from p on (and no
    # dS_T), the gradients of the tokens before p do not move and those after p are 0
    args, _, state = ex.inputs()
    other, _, _ = ex.inputs(seed_offset=1)
    p = ex.split
    mixed = tuple(torch.cat([a[:, :p], b[:, p:]], dim=1) for a, b in zip(args, other))
    do, dht = cotangents(ex)
    do[:, p:] = 0
    dht = torch.zeros_like(dht)
    o1, _, g1 = run_grad(ex, args, state, do, dht)
    o2, _, g2 = run_grad(ex, mixed, state, do, dht)
    errs = {"o": rel_rms(o2[:, :p], o1[:, :p].to(torch.float64))}
    for n in names(ex):
        scale = max(float(g1[n].double().norm()), 1e-30)
        errs["d" + n] = _scaled(n, rel_rms(g2[n][:, :p], g1[n][:, :p].to(torch.float64)))
        errs["d" + n + " after p"] = _scaled(n, float(g2[n][:, p:].double().norm()) / scale)
    worst = max(errs.values())
    return worst, tolerance(ex.dtype, 1e-5, 1e-2), \
        f"changing the tokens from p={p} on moved, before p (after p: size of the gradient): " + \
        ", ".join(f"{n} {e:.1e}" for n, e in errs.items())


def split_sequence(ex):
    # [0, p) then [p, T) with the carried state equals one call, forward and backward
    # (the backward through the carried state: the initial state's gradient of the
    # second call and the final state's gradient of the first)
    args, _, state = ex.inputs()
    p, T = ex.split, ex.bucket[1]
    do, dht = cotangents(ex)
    o, ht, g = run_grad(ex, args, state, do, dht)
    leaves, h0 = leaves_of(args, state)
    with torch.enable_grad(), _setup(ex.variant, False):
        f = kernel(ex.variant)
        oa, sa = f(*(_cut(a, 0, p) for a in leaves), initial_state=h0, output_final_state=True)
        ob, sb = f(*(_cut(a, p, T) for a in leaves), initial_state=sa, output_final_state=True)
        gs = grads_of((torch.cat([oa, ob], dim=1), sb), (do, dht), leaves, h0, names(ex))
    errs = {"o": rel_rms(torch.cat([oa, ob], dim=1), o.to(torch.float64)),
            "final state": rel_rms(sb, ht.to(torch.float64))}
    for n, x in gs.items():
        errs["d" + n] = _scaled(n, rel_rms(x, g[n].to(torch.float64)))
    return max(errs.values()), tolerance(ex.dtype, 1e-4, 5e-2), \
        f"[0, {p}) then [{p}, {T}) with the carried state vs one call: " + \
        ", ".join(f"{n} {e:.1e}" for n, e in errs.items())


def poisoned_outputs(ex):
    # every output and gradient buffer is written: NaN-filled buffers change nothing
    args, _, state = ex.inputs()
    do, dht = cotangents(ex)
    o1, h1, g1 = run_grad(ex, args, state, do, dht)
    o2, h2, g2 = run_grad(ex, args, state, do, dht, poison=True)
    diffs = []
    pairs = [("o", o1, o2), ("final state", h1, h2)] + [("d" + n, g1[n], g2[n]) for n in g1]
    for n, a, b in pairs:
        if not torch.equal(a, b):
            nan = torch.isnan(b) & ~torch.isnan(a)
            diffs.append(f"{n}: {int(nan.sum())} entries left unwritten (NaN)" if nan.any()
                         else f"{n}: differs between runs")
    return (math.inf if diffs else 0.0), 0.0, "; ".join(diffs) or "outputs and gradients identical with poisoned buffers"


PROPERTIES = {f.__name__: f for f in (matches_fp64, extreme_gates, causality, split_sequence, poisoned_outputs)}
