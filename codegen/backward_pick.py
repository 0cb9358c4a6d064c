"""A kernel's backward claims, where its declaration names none: picked from the
derivation's own adjoint claims by what each left-hand side is, and the slots no
claim fills taken from `chunkproof derive` (verified first, as every claim is).

Slots (codegen/plan.backward_claims checks each): dS, the whole adjoint of the state
for t < N-1; dS_prev, the whole adjoint of S_[t-1]; one gradient per argument (a log
gate's: delta tile . tile); inner, the adjoints of the definitions those read."""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation
from .printer import CodegenError


def _full(e, name) -> bool:
    return isinstance(e, ir.Adj) and e.var.name == name and not e.via and not e.excl


def _log_grad(e, tile) -> bool:
    return isinstance(e, ir.Had) and _full(e.a, tile) and e.b == e.a.var


def _adjoints_read(e) -> List[str]:
    return [n.var.name for n in ir.walk(e) if isinstance(n, ir.Adj)]


def _usable(c: Claim, program: str) -> bool:
    return c.program == program and c.kind in ("adjoint", "identity") and not c.over and not c.assume


class Picker:
    """``holds(claim) -> bool`` decides between two claims for one slot."""

    def __init__(self, deriv: Derivation, v, holds: Callable[[Claim], bool]):
        self.deriv, self.v, self.holds = deriv, v, holds
        self.prog = deriv.programs[v.program]
        self.derived: List[Claim] = []
        # the slots the declaration names (a partial backward=): taken as named
        byid = {c.id: c for c in deriv.claims}
        named = dict(v.backward or {})

        def get(cid, slot):
            if cid not in byid:
                raise CodegenError(f"kernel {v.func}: backward {slot} names claim {cid!r}, which derivation "
                                   f"{deriv.name} does not have")
            return byid[cid]
        self.fixed = {k: get(named[k], k) for k in ("dS", "dS_prev") if k in named}
        self.fixed.update({a: get(c, f"grads[{a!r}]") for a, c in dict(named.get("grads", {})).items()})
        inner = [get(c, "inner") for c in named.get("inner", [])]
        self.fixed_inner = {c.lhs.var.name: c for c in inner if isinstance(c.lhs, ir.Adj)}

    def _one(self, pool: List[Claim], ok) -> Optional[Claim]:
        found = [c for c in pool if ok(c)]
        if len(found) > 1:
            found = [c for c in found if self.holds(c)] or found
        return found[0] if found else None

    def pick(self, derive: Callable[[], List[Claim]]) -> Dict[str, object]:
        own = [c for c in self.deriv.claims if _usable(c, self.v.program)]
        spec = self._fill(own)
        missing = self._missing(spec)
        if missing:
            derived = derive()
            spec = self._fill(own, derived)
            still = self._missing(spec)
            if still:
                raise CodegenError(f"kernel {self.v.func}: no verified backward claim gives {', '.join(still)}, "
                                   f"and `chunkproof derive` did not either")
        return spec

    def _fill(self, own: List[Claim], derived: List[Claim] = ()) -> Dict[str, object]:
        state = self.prog.state

        def slot(name, ok):
            if name in self.fixed:
                return self.fixed[name]
            c = self._one(own, ok) or self._one(list(derived), ok)
            if c is not None and c in derived and c not in self.derived:
                self.derived.append(c)
            return c
        spec = {"dS": slot("dS", lambda c: _full(c.lhs, state) and c.blocks == "not_last"),
                "dS_prev": slot("dS_prev", lambda c: _full(c.lhs, "S_prev") and c.blocks == "all"),
                "grads": {}, "inner": []}
        for a in self.v.args:
            if a.kind.startswith("gate"):
                spec["grads"][a.name] = slot(a.name, lambda c, t=a.tile: _log_grad(c.lhs, t) and c.blocks == "all")
            else:
                spec["grads"][a.name] = slot(a.name, lambda c, t=a.tile: _full(c.lhs, t) and c.blocks == "all")
        # the adjoints of definitions the chosen claims read, recursively
        defs = set(self.prog.names()) - {state}
        todo = [c for c in [spec["dS"], spec["dS_prev"], *spec["grads"].values()] if c is not None]
        seen = set()
        while todo:
            for n in _adjoints_read(todo.pop().rhs):
                if n in defs and n not in seen:
                    seen.add(n)
                    c = self.fixed_inner.get(n) or slot(n, lambda c, n=n: _full(c.lhs, n) and c.blocks == "all")
                    spec["inner"].append(c if c is not None else n)
                    if c is not None:
                        todo.append(c)
        return spec

    @staticmethod
    def _missing(spec) -> List[str]:
        out = [k for k in ("dS", "dS_prev") if spec[k] is None]
        out += [f"the gradient of {n}" for n, c in spec["grads"].items() if c is None]
        out += [f"the adjoint of {n}" for n in spec["inner"] if isinstance(n, str)]
        return out


def as_ids(spec) -> Dict[str, object]:
    return {"dS": spec["dS"].id, "dS_prev": spec["dS_prev"].id,
            "grads": {n: c.id for n, c in spec["grads"].items()}, "inner": [c.id for c in spec["inner"]]}


def _derived(deriv: Derivation, v) -> List[Claim]:
    """`chunkproof derive`'s backward of the kernel's program, every line decided
    exactly first; a log gate's input adjoint is restated as delta tile . tile."""
    from chunkproof.derivations.loader import InputError
    from chunkproof.verify.derived import DerivedAdjointError, derive_checked
    try:
        claims = derive_checked(deriv, v.program).claims
    except (InputError, DerivedAdjointError) as e:
        raise CodegenError(f"kernel {v.func}: its backward could not be derived: {e}") from None
    logs = {a.tile for a in v.args if a.kind.startswith("gate")}
    out = []
    for c in claims:
        if isinstance(c.lhs, ir.Adj) and c.lhs.var.name in logs and _full(c.lhs, c.lhs.var.name):
            t = c.lhs.var
            # an adjoint claim's left side is an adjoint: this one relates two formulas
            c = Claim(id=c.id + ".log", citation=c.citation, latex=c.latex, kind="identity",
                      lhs=ir.Had(c.lhs, t), rhs=ir.Had(c.rhs, t), program=c.program, blocks=c.blocks,
                      assume=c.assume, recurrence=c.recurrence)
        if not any(o.id == c.id for o in deriv.claims):
            deriv.add(c)
        out.append(c)
    return out


def complete(v) -> bool:
    """Whether ``v``'s declaration names every backward slot but the inner adjoints."""
    named = v.backward or {}
    return {"dS", "dS_prev", "grads"} <= set(named) and set(named["grads"]) == {a.name for a in v.args}


def resolve(v, deriv: Derivation, check: bool = True):
    """``v`` with its backward claims named: as declared, or picked (see the module's doc).
    Returns (variant, the derived claims it uses)."""
    if complete(v):
        return v, []
    if check:
        from chunkproof.verify.check import check as verify_claim

        def holds(c):
            return verify_claim(deriv, c, floats=False, diagnose=False).verdict == "holds"
    else:
        def holds(c):
            return True
    p = Picker(deriv, v, holds)
    spec = p.pick(lambda: _derived(deriv, v))
    return dataclasses.replace(v, backward=as_ids(spec)), p.derived
