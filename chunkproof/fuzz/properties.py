"""The properties the generated kernels must have, forward and backward, each a
function of one drawn example.  An example's inputs are a pure function of its Example
(shape, regime, the seed of the tensor values), so a failing one replays exactly.  A
property returns (error, tolerance, detail); it fails when error > tolerance, when the
error is not finite, or when it raises.

Gradients go through the public functions under torch.autograd, for the loss
<dO, O> + <dS_T, S_T> with random cotangents (<dO, O> alone when the example does
not ask for the final state, output_final_state=False).  The gradients of the gates and
of beta have ten times the tolerance of the others (issue 4's targets); the error a property
returns divides theirs by ten, so that one tolerance applies to all (the detail gives
the raw values).  A gradient that is 0 in exact arithmetic is measured against 1e-3 of
the largest gradient; a log-gate gradient against at least the size of the terms it
sums (reference.gate_grad_scale: at -20 per step they cancel to 1e-8 of themselves)."""
from __future__ import annotations

import contextlib
import math

import torch

from .cases import kernel, module, recurrent
from .example import DTYPES, Example
from .reference import SCALE_TERMS, grad_errors, recurrence, reference_grads, rel_rms


def tolerance(dtype, fp32, low):
    return fp32 if dtype == "fp32" else low


GUARD = 1024         # elements after each buffer that no kernel may write
GUARD_VALUE = 12345.0


class _PoisonedTorch:
    """torch, except that empty / empty_like return NaN-filled float tensors, each the
    head of a larger allocation whose tail (GUARD elements of GUARD_VALUE) no kernel may
    write: a kernel that leaves part of an output unwritten then shows NaN there, one
    that writes past a buffer's end shows a changed guard (``overwritten``)."""

    def __init__(self):
        self.guarded = []

    def __getattr__(self, name):
        return getattr(torch, name)

    def _poison(self, t):
        if not t.is_floating_point():
            return t
        base = torch.full((t.numel() + GUARD,), GUARD_VALUE, dtype=t.dtype, device=t.device)
        out = base[:t.numel()].view(t.shape)
        out.fill_(float("nan"))
        self.guarded.append((base, t.numel(), tuple(t.shape)))
        return out

    def empty(self, *a, **k):
        return self._poison(torch.empty(*a, **k))

    def empty_like(self, *a, **k):
        return self._poison(torch.empty_like(*a, **k))

    def overwritten(self):
        """[(shape, how many guard elements changed)] of the buffers written past their end."""
        return [(shape, int((base[n:] != GUARD_VALUE).sum())) for base, n, shape in self.guarded
                if bool((base[n:] != GUARD_VALUE).any())]


@contextlib.contextmanager
def _setup(variant, poison, seen=None):
    """The module's torch NaN-poisoned and guarded (``poison``) for the block; ``seen``
    (a list) receives the poisoned torch, to read its guards after."""
    mod = module(variant)
    old_torch = mod.torch
    if poison:
        mod.torch = _PoisonedTorch()
        if seen is not None:
            seen.append(mod.torch)
    try:
        yield
    finally:
        mod.torch = old_torch


GATE_GRADS = ("g", "gk", "w", "beta")   # FLA's names of the log gates, and beta


def cotangents(ex):
    """dO ([B, T, H, V], o's dtype) and dS_T ([B, H, K, V], fp32) for the example."""
    B, T, H, K, V = ex.bucket
    gen = torch.Generator().manual_seed(ex.seed + 7)
    do = torch.randn(B, T, H, V, generator=gen).to(DTYPES[ex.dtype]).to(ex.device)
    dht = torch.randn(B, H, K, V, generator=gen).to(ex.device)
    # drawn even when unused, so that dO is the same with and without a final state
    return do, (dht if ex.fs else torch.zeros_like(dht))


def names(ex):
    return [n for n, _ in module(ex.variant).ARGS]


def per_token(ex):
    """The arguments with a time axis; the others (a parameter per head, RWKV-6's u
    [H, K]) are whole in every call and their gradients sum over all tokens."""
    return [kind != "param_k" for _, kind in module(ex.variant).ARGS]


def leaves_of(args, state):
    return [a.detach().clone().requires_grad_() for a in args], \
        (None if state is None else state.detach().clone().requires_grad_())


def grads_of(outputs, cotans, leaves, h0, arg_names):
    # a final state that was not asked for is None: it has no cotangent
    pairs = [(o, c) for o, c in zip(outputs, cotans) if o is not None]
    wrt = list(leaves) + ([h0] if h0 is not None else [])
    gs = torch.autograd.grad([o for o, _ in pairs], wrt, [c for _, c in pairs])
    return dict(zip(arg_names + (["initial_state"] if h0 is not None else []), gs))


def run_grad(ex: Example, args, state, do, dht, poison=False, seen=None, pre=None, fn=None, **kw):
    """(o, final state or None, {name: gradient}) through the public function's autograd
    (``fn``: another function of the module, default its chunk function); ``pre`` maps
    the leaves to the call's arguments (gradients are the leaves'), ``kw`` goes to the call."""
    leaves, h0 = leaves_of(args, state)
    with torch.enable_grad(), _setup(ex.variant, poison, seen):
        call = pre(leaves) if pre else leaves
        o, ht = (fn or kernel(ex.variant))(*call, initial_state=h0, output_final_state=ex.fs, **kw)
        grads = grads_of((o, ht), (do, dht), leaves, h0, names(ex))
    return o.detach(), (None if ht is None else ht.detach()), grads


def _scaled(n, err):
    return err / 10 if n in GATE_GRADS else err


def _grad_diffs(got, want, args, ex):
    """{name: difference} between two runs' gradients, scaled as against the fp64
    reference (reference.grad_errors): a gradient that is 0 in exact arithmetic (the
    gate's at t = 0 without h0, v's at beta = 0) is measured against 1e-3 of the largest,
    not against its own rounding, and a log-gate gradient against the terms it sums."""
    ref_name = {"gk": "g"}
    want = {ref_name.get(n, n): w.detach().double() for n, w in want.items()}
    inputs = {n: a for n, a in zip(names(ex), args) if n in SCALE_TERMS}
    return {n: _scaled(n, e) for n, e in grad_errors(got, want, inputs).items()}


def _err_vs_reference(ex, ref, state, o, ht, grads, do, dht):
    ro, rh = recurrence(ex.variant, initial_state=state, **ref)
    if not (torch.isfinite(ro).all() and torch.isfinite(rh).all()):
        return 0.0, "the fp64 reference is not finite here: nothing to compare"
    if (ht is None) == ex.fs:
        return math.inf, (f"output_final_state={ex.fs} but the final state returned is "
                          f"{'None' if ht is None else 'a tensor'}")
    got = dict({"o": o}, **({"final state": ht} if ex.fs else {}), **{"d" + n: g for n, g in grads.items()})
    bad = [n for n, t in got.items() if not torch.isfinite(t).all()]
    if bad:
        return math.inf, f"non-finite values in {', '.join(bad)} where the fp64 reference is finite"
    errs = {"o": rel_rms(o, ro)}
    if ex.fs:
        errs["final state"] = rel_rms(ht, rh)
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


def _cut(x, lo, hi, timed=True):
    return x[:, lo:hi].contiguous() if timed else x


def causality(ex):
    # tokens after p change: outputs before p do not move; with dO zero from p on (and no
    # dS_T), the gradients of the tokens before p do not move and those after p are 0
    args, _, state = ex.inputs()
    other, _, _ = ex.inputs(seed_offset=1)
    p = ex.split
    timed = per_token(ex)
    mixed = tuple(torch.cat([a[:, :p], b[:, p:]], dim=1) if t else a for a, b, t in zip(args, other, timed))
    do, dht = cotangents(ex)
    do[:, p:] = 0
    dht = torch.zeros_like(dht)
    o1, _, g1 = run_grad(ex, args, state, do, dht)
    o2, _, g2 = run_grad(ex, mixed, state, do, dht)
    errs = {"o": rel_rms(o2[:, :p], o1[:, :p].to(torch.float64))}
    tok = [n for n, t in zip(names(ex), timed) if t]
    # a per-head argument's gradient sums over tokens whose dO is 0 from p on: unchanged
    before = _grad_diffs({n: g2[n][:, :p] if n in tok else g2[n] for n in names(ex)},
                         {n: g1[n][:, :p] if n in tok else g1[n] for n in names(ex)},
                         [a[:, :p] if t else a for a, t in zip(args, timed)], ex)
    floor = 1e-3 * max(float(g1[n].double().norm()) for n in names(ex))
    for n in names(ex):
        scale = max(float(g1[n].double().norm()), floor, 1e-30)
        errs["d" + n] = before[n]
        if n in tok:
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
    p, T = ex.split, ex.T
    do, dht = cotangents(ex)
    o, ht, g = run_grad(ex, args, state, do, dht)
    leaves, h0 = leaves_of(args, state)
    with torch.enable_grad(), _setup(ex.variant, False):
        f = kernel(ex.variant)
        # the first call's final state is what the second starts from: always asked for
        timed = per_token(ex)
        oa, sa = f(*(_cut(a, 0, p, t) for a, t in zip(leaves, timed)), initial_state=h0, output_final_state=True)
        ob, sb = f(*(_cut(a, p, T, t) for a, t in zip(leaves, timed)), initial_state=sa, output_final_state=ex.fs)
        gs = grads_of((torch.cat([oa, ob], dim=1), sb), (do, dht), leaves, h0, names(ex))
    errs = {"o": rel_rms(torch.cat([oa, ob], dim=1), o.to(torch.float64))}
    if ex.fs:
        errs["final state"] = rel_rms(sb, ht.to(torch.float64))
    errs.update(("d" + n, e) for n, e in _grad_diffs(gs, g, args, ex).items())
    return max(errs.values()), tolerance(ex.dtype, 1e-4, 5e-2), \
        f"[0, {p}) then [{p}, {T}) with the carried state vs one call: " + \
        ", ".join(f"{n} {e:.1e}" for n, e in errs.items())


def poisoned_outputs(ex):
    # every output and gradient buffer is written, and nothing past a buffer's end:
    # NaN-filled buffers change nothing, and their guard tails stay as they were
    args, _, state = ex.inputs()
    do, dht = cotangents(ex)
    o1, h1, g1 = run_grad(ex, args, state, do, dht)
    seen = []
    o2, h2, g2 = run_grad(ex, args, state, do, dht, poison=True, seen=seen)
    if ex.device == "cuda":
        torch.cuda.synchronize()
    diffs = [f"a buffer {list(shape)} written {k} elements past its end" for p in seen
             for shape, k in p.overwritten()]
    pairs = [("o", o1, o2)] + ([("final state", h1, h2)] if ex.fs else []) + \
        [("d" + n, g1[n], g2[n]) for n in g1]
    for n, a, b in pairs:
        if not torch.equal(a, b):
            nan = torch.isnan(b) & ~torch.isnan(a)
            diffs.append(f"{n}: {int(nan.sum())} entries left unwritten (NaN)" if nan.any()
                         else f"{n}: differs between runs")
    return (math.inf if diffs else 0.0), 0.0, \
        "; ".join(diffs) or "outputs and gradients identical with poisoned buffers, no guard written"


def _pair(a, b, head_dim):
    """Two tensors' heads interleaved: value heads 2h and 2h + 1 from head h of a and b."""
    return torch.stack([a, b], dim=head_dim + 1).flatten(head_dim, head_dim + 1)


def grouped_heads(ex):
    # grouped value attention: two value heads per query/key head (the example's values,
    # gates, parameters and state, and another draw's) equals the same call with q and k
    # repeated over the heads, forward and backward (dq, dk summed over each pair)
    from chunkproof.codegen.fla_api import grouped as is_grouped
    args, _, state = ex.inputs()
    other, _, state2 = ex.inputs(seed_offset=1)
    kinds = module(ex.variant).ARGS
    grouped = [is_grouped(n, kind) for n, kind in kinds]
    gva = [a if g else _pair(a, b, 0 if kind == "param_k" else 2)
           for a, b, g, (_, kind) in zip(args, other, grouped, kinds)]
    rep = [a.repeat_interleave(2, dim=2) if g else a for a, g in zip(gva, grouped)]
    if state is not None:
        state = _pair(state, state2, 1)
    do, dht = cotangents(ex)
    gen = torch.Generator().manual_seed(ex.seed + 8)
    do = _pair(do, torch.randn(do.shape, generator=gen).to(do.dtype).to(do.device), 2)
    dht = _pair(dht, torch.randn(dht.shape, generator=gen).to(dht.device) if ex.fs else torch.zeros_like(dht), 1)
    o1, h1, g1 = run_grad(ex, gva, state, do, dht)
    o2, h2, g2 = run_grad(ex, rep, state, do, dht)
    for n, g in zip(names(ex), grouped):
        if g:
            B, T, H2, K = g2[n].shape
            g2[n] = g2[n].view(B, T, H2 // 2, 2, K).sum(3)
    return _same_call(ex, (o1, h1, g1), (o2, h2, g2), gva, "two value heads per q/k head vs q and k repeated")


def _same_call(ex, got, want, args, what):
    """Two runs of what should be one function, outputs and gradients, as a property's result."""
    (o1, h1, g1), (o2, h2, g2) = got, want
    errs = {"o": rel_rms(o1, o2.to(torch.float64))}
    if ex.fs:
        errs["final state"] = rel_rms(h1, h2.to(torch.float64))
    errs.update(("d" + n, e) for n, e in _grad_diffs(g1, g2, args, ex).items())
    return max(errs.values()), tolerance(ex.dtype, 1e-5, 1e-2), \
        f"{what}: " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items())


def _l2(x):
    xf = x.float()      # FLA's l2norm (fla/modules/l2norm.py), written out
    return (xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + 1e-6)).to(x.dtype)


def l2norm_in_kernel(ex):
    # use_qk_l2norm_in_kernel=True on q and k of other lengths equals normalising them
    # before the call, forward and backward (the gradients of the unnormalised q and k)
    from chunkproof.codegen.fla_api import grouped as is_grouped
    args, _, state = ex.inputs()
    grouped = [is_grouped(n, kind) for n, kind in module(ex.variant).ARGS]
    gen = torch.Generator().manual_seed(ex.seed + 9)
    raw = [a * (0.5 + 3 * torch.rand(a.shape[:-1] + (1,), generator=gen)).to(a.dtype).to(a.device) if g else a
           for a, g in zip(args, grouped)]
    do, dht = cotangents(ex)
    inside = run_grad(ex, raw, state, do, dht, use_qk_l2norm_in_kernel=True)
    outside = run_grad(ex, raw, state, do, dht, pre=lambda ls: [_l2(x) if g else x for x, g in zip(ls, grouped)])
    return _same_call(ex, inside, outside, raw, "use_qk_l2norm_in_kernel vs normalising first")


def _packed(xs, lens, tail):
    """[B, T, ...] rows b cut to lens[b] tokens, packed along T (B = 1), then ``tail`` rows
    (row 0's first ones) that no sequence holds."""
    return torch.cat([xs[b:b + 1, :n] for b, n in enumerate(lens)] + [xs[:1, :tail]], dim=1)


def packed_sequences(ex):
    # the example's B rows cut to lengths of their own (T, T - p, T - 2p, ... mod T) and
    # packed along T (B = 1, cu_seqlens, 3 rows after the last sequence) equals a loop of
    # calls, one per sequence, forward and backward; the rows after the last are 0
    args, _, state = ex.inputs()
    timed = per_token(ex)
    B, T = ex.B, ex.T
    p = ex.split or 1
    lens = [T - (b * p) % T for b in range(B)]
    tail = min(3, T)
    cu = torch.tensor([0] + [sum(lens[:b + 1]) for b in range(B)], dtype=torch.int32, device=ex.device)
    do, dht = cotangents(ex)
    packed = [_packed(a, lens, tail) if t else a for a, t in zip(args, timed)]
    got = run_grad(ex, packed, state, _packed(do, lens, tail), dht, cu_seqlens=cu)
    runs = [run_grad(ex, [a[b:b + 1, :n] if t else a for a, t in zip(args, timed)],
                     None if state is None else state[b:b + 1], do[b:b + 1, :n], dht[b:b + 1])
            for b, n in enumerate(lens)]
    zeros = lambda x: torch.zeros_like(x[:, :tail])  # noqa: E731
    o = torch.cat([r[0] for r in runs] + [zeros(runs[0][0])], dim=1)
    ht = torch.cat([r[1] for r in runs]) if ex.fs else None
    grads = {}
    for n, t in zip(names(ex) + ["initial_state"], timed + [False]):
        if n not in got[2]:
            continue
        parts = [r[2][n] for r in runs]
        grads[n] = torch.cat(parts + [zeros(parts[0])], dim=1) if t else \
            torch.cat(parts) if n == "initial_state" else sum(parts)
    return _same_call(ex, got, (o, ht, grads), packed,
                      f"sequences of {lens} packed (and {tail} rows after them) vs a loop of calls")


def recurrent_form(ex):
    # fused_recurrent_<op> (the recurrent kernel printed from the recurrence, token by
    # token) equals the chunk function on the same inputs, forward and backward
    args, _, state = ex.inputs()
    do, dht = cotangents(ex)
    rec = recurrent(ex.variant)
    got = run_grad(ex, args, state, do, dht, poison=True, fn=rec)
    want = run_grad(ex, args, state, do, dht)
    return _same_call(ex, got, want, args, "the recurrent form vs the chunk function")


PROPERTIES = {f.__name__: f for f in (matches_fp64, extreme_gates, causality, split_sequence, poisoned_outputs,
                                      grouped_heads, l2norm_in_kernel, packed_sequences, recurrent_form)}


def _has_keyword(variant, name):
    return any(k[0] == name and k[3] for k in getattr(module(variant), "FLA_KEYWORDS", ()))


# the properties of an option some functions have; every other property holds for every variant
APPLIES = {"l2norm_in_kernel": lambda v: _has_keyword(v, "use_qk_l2norm_in_kernel")}


def applies(prop, variant):
    return APPLIES.get(prop, lambda v: True)(variant)
