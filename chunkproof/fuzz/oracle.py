"""The fp64 oracle of any generated kernel: its derivation's own recurrence (the step
program in the IR), run step by step on torch tensors batched over [B, H], so that
autograd gives the reference gradients.  Nothing here knows a variant by name.

The kernel's arguments bind to the recurrence's inputs by tile (derivations/kernel.py);
a log-gate argument is the log of its input; q is multiplied by ``scale`` first, as
FLA's kernels do; states are V x K here and [B, H, K, V] in the API."""
from __future__ import annotations

import torch


class OracleError(ValueError):
    """The recurrence has a construct the oracle cannot run (named)."""


def _shape(d, K, V):
    return {"Dk": K, "Dv": V, "1": 1}[d]


class _Step:
    """One step of the recurrence on [B, H, r, c] tensors."""

    def __init__(self, prog, env, K, V, params):
        self.prog, self.env, self.K, self.V, self.params = prog, dict(env), K, V, params
        self.defs = dict(prog.defs)

    def value(self, name):
        if name not in self.env:
            if name not in self.defs:
                raise OracleError(f"recurrence {self.prog.name}: {name} has no value")
            self.env[name] = self.ev(self.defs[name])
        return self.env[name]

    def ev(self, e):
        m = getattr(self, "_" + type(e).__name__, None)
        if m is None:
            raise OracleError(f"recurrence {self.prog.name}: the oracle cannot run {type(e).__name__}")
        return m(e)

    def _Var(self, e):
        return self.value(e.name)

    def _Param(self, e):
        if e.name not in self.params:
            raise OracleError(f"recurrence {self.prog.name} reads parameter {e.name}, which has no value")
        return self.params[e.name]

    def _Add(self, e):
        return self.ev(e.a) + self.ev(e.b)

    def _Sub(self, e):
        return self.ev(e.a) - self.ev(e.b)

    def _Neg(self, e):
        return -self.ev(e.a)

    def _Had(self, e):
        return self.ev(e.a) * self.ev(e.b)

    def _MatMul(self, e):
        return self.ev(e.a) @ self.ev(e.b)

    def _Scale(self, e):
        return self.ev(e.a) * self.ev(e.b)

    def _Exp(self, e):
        return torch.exp(self.ev(e.a))

    def _Transpose(self, e):
        return self.ev(e.a).transpose(-1, -2)

    def _DiagM(self, e):
        return torch.diag_embed(self.ev(e.a)[..., 0])

    def _Eye(self, e):
        return torch.eye(_shape(e.n, self.K, self.V), dtype=torch.float64, device=self._device())

    def _Ones(self, e):
        return torch.ones(_shape(e.rows, self.K, self.V), _shape(e.cols, self.K, self.V),
                          dtype=torch.float64, device=self._device())

    def _Const(self, e):
        return torch.tensor(float(e.value), dtype=torch.float64, device=self._device())

    def _device(self):
        return next(iter(self.env.values())).device


_LOADED = {}


def _derivation(v):
    """The derivation that declares variant ``v``, loaded once per process."""
    from chunkproof.codegen.plan import derivation_of
    key = (v.derivation, v.name)
    if key not in _LOADED:
        _LOADED[key] = derivation_of(v)
    return _LOADED[key]


def recurrence_of(v):
    """(recurrence, {tile: input}) of a generated variant (codegen/variants.Variant)."""
    d = _derivation(v)
    rec = d.recurrences[d.program_recurrence[v.program]]
    return rec, {i.seq: i for i in rec.inputs}


def bound_params(v, H, device=None):
    """name -> value of the recurrence's parameters as kernel ``v``'s declaration binds
    them (derivations/kernel.py ParamBinding), float64, broadcasting over [B, H, r, c]:
    a per-head gate exp(code(h)) is [1, H, 1, 1], a constant a scalar."""
    out = {}
    for k in _derivation(v).kernels:
        if k.module != v.name:
            continue
        for p in k.params:
            if p.kind == "head_arg":
                continue      # an argument of the kernel: run() takes it from the inputs
            if p.kind == "head_log":
                h = torch.arange(H, dtype=torch.float64)
                val = torch.exp(eval(p.code, {"torch": torch, "h": h}))   # noqa: S307 (the declaration's own code)
                out[p.name] = val.to(device).reshape(1, H, 1, 1)
            else:
                out[p.name] = torch.tensor(float(p.value), dtype=torch.float64, device=device)
    return out


def param_args(v):
    """The names of kernel ``v``'s parameter arguments (head_arg bindings), in order."""
    return [p.name for k in _derivation(v).kernels if k.module == v.name for p in k.params if p.kind == "head_arg"]


def run(v, inputs, scale=None, initial_state=None, params=None):
    """o [B, T, H, V] and the final state [B, H, K, V] of variant ``v``'s recurrence, in
    float64, differentiable.  ``inputs``: argument name -> tensor, FLA's layout.
    ``params``: values of the recurrence's parameters; those not given take the kernel
    declaration's bindings (bound_params)."""
    rec, by_tile = recurrence_of(v)
    q = inputs[v.args[0].name]
    B, T, H, K = q.shape
    params = dict(bound_params(v, H, q.device), **(params or {}))
    for n in param_args(v):
        if n in inputs and n not in params:      # [H, K]: a Dk x 1 value per head
            params[n] = inputs[n].to(torch.float64).reshape(1, H, -1, 1)
    steps = {}
    for a in v.args:
        x = inputs[a.name].to(torch.float64)
        x = x if x.dim() == 4 else x[..., None]           # [B, T, H, d]
        if a.kind.startswith("gate"):
            x = torch.exp(x)
        steps[by_tile[a.tile].step] = x
    V = next(steps[i.step].shape[-1] for i in rec.inputs if i.dim == "Dv")
    qstep = by_tile["Q"].step if "Q" in by_tile else None
    if qstep is not None:
        steps[qstep] = steps[qstep] * (K ** -0.5 if scale is None else scale)
    S = torch.zeros(B, H, V, K, dtype=torch.float64, device=q.device)
    if initial_state is not None:
        S = initial_state.to(torch.float64).transpose(-1, -2)
    prog = rec.program
    outs = []
    for t in range(T):
        env = {n: x[:, t, :, :, None] for n, x in steps.items()}
        env["S_prev"] = S
        st = _Step(prog, env, K, V, params or {})
        S = st.value(prog.state)
        outs.append(st.value(prog.output)[..., 0])
    return torch.stack(outs, dim=1), S.transpose(-1, -2)
