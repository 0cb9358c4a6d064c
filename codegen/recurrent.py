"""The recurrent (token-by-token) kernel's step, printed from the recurrence's own step
program in the IR (the one the checker unrolls and the fp64 oracle runs): the lines
that take the state S_{t-1} (a [BV, BK] fp32 tile, V x K) and one token's inputs to S_t
and o_t.  Nothing here knows a variant by name.

The step's values are printed by shape: scalars ([1, 1]), vectors (a [Dk, 1] or
[Dv, 1] column, or its transpose: 1-d tiles of BK or BV), the state's V x K tiles, and
K x K matrices, which are never formed: they are kept as c I + Diag(d) + sum_i s_i u_i
w_i^T and applied to the state from the right (S Diag(d) is a column scaling, S u w^T
a row reduction then an outer product).  A V x V factor would couple the state's rows
(the kernel blocks them over V): it is refused by name, as is any construct outside
this algebra."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from chunkproof.derivations import ir
from .printer import CodegenError
from .variants import Variant


class RecurrentRefused(CodegenError):
    """The recurrence has a step the recurrent kernel cannot print (named)."""


@dataclass
class Val:
    kind: str                  # "s" scalar, "vec", "m" (Dv x Dk tile), "kk" (lazy Dk x Dk)
    code: str = ""
    dim: str = ""              # a vector's length: "Dk" or "Dv"
    col: bool = True           # a vector's orientation
    eye: Optional[str] = None  # kk: c I, Diag(d), sum s u w^T
    diag: Optional[str] = None
    outers: List[Tuple[Optional[str], str, str]] = field(default_factory=list)


def _shape(rows, cols):
    if (rows, cols) == ("1", "1"):
        return "s"
    if cols == "1" or rows == "1":
        return "vec"
    if (rows, cols) == ("Dv", "Dk"):
        return "m"
    if (rows, cols) == ("Dk", "Dk"):
        return "kk"
    return (rows, cols)


def _mul(a: Optional[str], b: Optional[str]) -> Optional[str]:
    if a is None:
        return b
    if b is None:
        return a
    return f"({a} * {b})"


class StepPrinter:
    """Prints one step.  ``inputs``: step variable -> (its code, "s" or the vector's dim);
    ``params``: parameter name -> (code, "s" or "Dk")."""

    def __init__(self, rec_name: str, prog, inputs: Dict[str, Tuple[str, str]], params: Dict[str, Tuple[str, str]]):
        self.rec, self.prog = rec_name, prog
        self.defs = dict(prog.defs)
        self.env: Dict[str, Val] = {"S_prev": Val("m", "b_s")}
        for name, (code, d) in inputs.items():
            self.env[name] = Val("s", code) if d == "1" else Val("vec", code, d)
        self.params = params
        self.lines: List[str] = []
        self.n = 0

    def refuse(self, what):
        raise RecurrentRefused(f"recurrence {self.rec}: the recurrent kernel cannot print {what}")

    def temp(self, code: str) -> str:
        self.n += 1
        name = f"b_r{self.n}"
        self.lines.append(f"{name} = {code}")
        return name

    def value(self, name: str) -> Val:
        if name not in self.env:
            if name not in self.defs:
                self.refuse(f"{name}: it has no value")
            v = self.ev(self.defs[name])
            if v.kind in ("s", "vec", "m") and not v.code.startswith("b_"):
                v = Val(v.kind, self.temp(v.code), v.dim, v.col)
            self.env[name] = v
        return self.env[name]

    def ev(self, e) -> Val:
        m = getattr(self, "_" + type(e).__name__, None)
        if m is None:
            self.refuse(f"{type(e).__name__}")
        return m(e)

    # -- leaves
    def _Var(self, e):
        if isinstance(e, ir.Param):
            return self._Param(e)
        v = self.value(e.name)
        if _shape(e.rows, e.cols) != v.kind:
            self.refuse(f"{e.name} as a {e.rows} x {e.cols} value")
        return v

    def _Param(self, e):
        if e.name not in self.params:
            self.refuse(f"parameter {e.name}: it has no binding")
        code, d = self.params[e.name]
        return Val("s", code) if d == "1" else Val("vec", code, d)

    def _Const(self, e):
        return Val("s", repr(float(e.value)))

    def _Eye(self, e):
        if e.n != "Dk":
            self.refuse(f"a {e.n} x {e.n} identity (it would couple the state's rows)")
        return Val("kk", eye="1.0")

    def _DiagM(self, e):
        a = self.ev(e.a)
        if a.kind != "vec" or a.dim != "Dk":
            self.refuse("Diag of anything but a Dk vector")
        return Val("kk", diag=a.code)

    # -- elementwise
    def _Exp(self, e):
        a = self.ev(e.a)
        if a.kind not in ("s", "vec"):
            self.refuse("exp of a matrix")
        return Val(a.kind, f"tl.exp({a.code})", a.dim, a.col)

    def _Had(self, e):
        a, b = self.ev(e.a), self.ev(e.b)
        if a.kind != b.kind or a.kind == "kk":
            self.refuse("a Hadamard product of these shapes")
        return Val(a.kind, f"({a.code} * {b.code})", a.dim, a.col)

    def _Neg(self, e):
        return self._scale("-1.0", self.ev(e.a))

    def _Scale(self, e):
        a, b = self.ev(e.a), self.ev(e.b)
        if a.kind != "s":
            a, b = b, a
        if a.kind != "s":
            self.refuse("Scale by a non-scalar")
        return self._scale(a.code, b)

    def _scale(self, c, b: Val) -> Val:
        if b.kind == "kk":
            return Val("kk", eye=_mul(c, b.eye) if b.eye else None, diag=_mul(c, b.diag) if b.diag else None,
                       outers=[(_mul(c, s), u, w) for s, u, w in b.outers])
        return Val(b.kind, f"({c} * {b.code})", b.dim, b.col)

    def _Add(self, e):
        return self._add(self.ev(e.a), self.ev(e.b), "+")

    def _Sub(self, e):
        return self._add(self.ev(e.a), self.ev(e.b), "-")

    def _add(self, a: Val, b: Val, op: str) -> Val:
        if a.kind != b.kind:
            self.refuse(f"a sum of a {a.kind} and a {b.kind} value")
        if a.kind != "kk":
            return Val(a.kind, f"({a.code} {op} {b.code})", a.dim, a.col)
        neg = (lambda x: x) if op == "+" else (lambda x: _mul("-1.0", x) if x else "-1.0")

        def join(x, y):
            if x is None and y is None:
                return None
            y = neg(y) if y is not None else None
            return y if x is None else x if y is None else f"({x} + {y})"
        return Val("kk", eye=join(a.eye, b.eye), diag=join(a.diag, b.diag),
                   outers=a.outers + [(neg(s) if op == "-" else s, u, w) for s, u, w in b.outers])

    def _Transpose(self, e):
        a = self.ev(e.a)
        if a.kind == "s":
            return a
        if a.kind == "vec":
            return Val("vec", a.code, a.dim, not a.col)
        if a.kind == "kk":
            return Val("kk", eye=a.eye, diag=a.diag, outers=[(s, w, u) for s, u, w in a.outers])
        self.refuse("the transpose of the state")

    # -- products
    def _MatMul(self, e):
        a, b = self.ev(e.a), self.ev(e.b)
        if a.kind == "s" or b.kind == "s":
            return self._scale(a.code, b) if a.kind == "s" else self._scale(b.code, a)
        if a.kind == "vec" and b.kind == "vec":
            if not a.col and b.col and a.dim == b.dim:           # row @ column: a scalar
                return Val("s", f"tl.sum({a.code} * {b.code})")
            if a.col and not b.col:                               # column @ row: an outer product
                if (a.dim, b.dim) == ("Dv", "Dk"):
                    return Val("m", f"({a.code}[:, None] * {b.code}[None, :])")
                if (a.dim, b.dim) == ("Dk", "Dk"):
                    return Val("kk", outers=[(None, a.code, b.code)])
            self.refuse(f"a product of a {a.dim} {'column' if a.col else 'row'} and a {b.dim} "
                        f"{'column' if b.col else 'row'}")
        if a.kind == "m" and b.kind == "vec" and b.col and b.dim == "Dk":
            return Val("vec", f"tl.sum({a.code} * {b.code}[None, :], axis=1)", "Dv")
        if a.kind == "m" and b.kind == "kk":
            return self._state_times(a.code, b)
        self.refuse(f"a product of a {a.kind} and a {b.kind} value")

    def _state_times(self, m: str, b: Val) -> Val:
        """m @ (c I + Diag(d) + sum s u w^T), m a [BV, BK] tile, from the right."""
        m = m if m.startswith("b_") else self.temp(m)
        terms = []
        if b.eye:
            terms.append(f"({b.eye} * {m})")
        if b.diag:
            terms.append(f"({m} * {b.diag}[None, :])")
        for s, u, w in b.outers:
            mu = self.temp(f"tl.sum({m} * {u}[None, :], axis=1)")
            terms.append(f"({_mul(s, f'{mu}[:, None]')} * {w}[None, :])")
        if not terms:
            self.refuse("a product with a zero K x K matrix")
        return Val("m", "(" + " + ".join(terms) + ")")

    def print(self) -> Tuple[List[str], str, str]:
        """(lines, the code of S_t, the code of o_t)."""
        S = self.value(self.prog.state)
        if S.kind != "m":
            self.refuse(f"a state {self.prog.state} that is not a V x K matrix")
        O = self.value(self.prog.output)
        if O.kind != "vec" or O.dim != "Dv":
            self.refuse(f"an output {self.prog.output} that is not a Dv vector")
        return self.lines, S.code, O.code


def recurrence(v: Variant):
    """(the recurrence, {tile: its input}) that variant ``v``'s program unrolls."""
    from .plan import derivation_of
    d = derivation_of(v)
    rec = d.recurrences[d.program_recurrence[v.program]]
    return d, rec, {i.seq: i for i in rec.inputs}


def step_lines(v: Variant, load_names: Dict[str, str]) -> Tuple[List[str], str, str]:
    """The recurrent step of variant ``v``: (lines, S_t, o_t).  ``load_names``: the
    kernel argument name -> the tile variable the kernel loads it into (b_<name>, fp32,
    exp taken for a log-gate argument, q scaled)."""
    from .plan import param_bindings
    d, rec, by_tile = recurrence(v)
    inputs = {}
    for a in v.args:
        i = by_tile[a.tile]
        inputs[i.step] = (load_names[a.name], i.dim)
    params = {}
    for name, p in param_bindings(d, v.name).items():
        if p.kind == "head_log":
            params[name] = (f"tl.exp(b_{name}_log)", "1")
        elif p.kind == "const":
            params[name] = (repr(float(p.value)), "1")
        else:
            params[name] = (load_names[name], "Dk")
    return StepPrinter(rec.name, rec.program, inputs, params).print()


@dataclass
class RecurrentKernel:
    """What variant.py.j2 prints for the recurrent kernel: its pointer arguments, the
    per-head loads before the loop, the per-token loads, the step's lines, S_t and o_t."""
    args: List[str]
    param_loads: List[str]
    loads: List[str]
    lines: List[str]
    S: str
    O: str
    logs: List[str]            # the per-head parameters' log arguments (in_<name>_log)


_ROW = {"k": "(row * H + i_h) * K + o_k", "kq": "(row * HQ + i_hq) * K + o_k", "v": "(row * H + i_h) * V + o_v",
        "gate_k": "(row * H + i_h) * K + o_k", "gate_h": "row * H + i_h", "head": "row * H + i_h"}
_MASK = {"k": ", mask=m_k, other=0.", "kq": ", mask=m_k, other=0.", "v": ", mask=m_v, other=0.",
         "gate_k": ", mask=m_k, other=0.", "gate_h": "", "head": ""}


def kernel(v: Variant, plan) -> RecurrentKernel:
    """The recurrent kernel of variant ``v`` (its chunk Plan gives the parameters): each
    argument loaded in fp32 per token (a log gate's exp taken, q times scale), as the
    fp64 oracle binds them (chunkproof.fuzz.oracle.run)."""
    from .fla_api import grouped
    _, rec, by_tile = recurrence(v)
    names, loads = {}, []
    for a in v.args:
        kind = "kq" if grouped(a.name, a.kind) else a.kind
        x = f"tl.load({a.name} + {_ROW[kind]}{_MASK[kind]}).to(tl.float32)"
        if a.kind.startswith("gate"):
            x = f"tl.exp({x})"
        if by_tile[a.tile].seq == "Q":
            x = f"{x} * scale"
        names[a.name] = f"b_{a.name}"
        loads.append(f"b_{a.name} = {x}")
    param_loads = [f"b_{p.name} = tl.load({p.name} + i_h * K + o_k, mask=m_k, other=0.).to(tl.float32)"
                   for p in plan.param_args]
    names.update({p.name: f"b_{p.name}" for p in plan.param_args})
    param_loads += [f"b_{p.name}_log = tl.load(in_{p.name}_log + i_h).to(tl.float32)" for p in plan.param_logs]
    lines, S, O = step_lines(v, names)
    logs = [f"in_{p.name}_log" for p in plan.param_logs]
    args = [a.name for a in v.args] + [p.name for p in plan.param_args] + logs
    return RecurrentKernel(args, param_loads, loads, lines, S, O, logs)
