"""Evaluate IR over a field, run programs block by block, and compute true
adjoints (reverse mode over programs) for one sampled point."""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Dict

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Derivation, Program
from .fields import Dual, Float, ModP


@dataclass(frozen=True)
class Sizes:
    C: int
    Dk: int
    Dv: int
    N: int          # number of chunks
    T: int = 1      # sub-chunk size (note 003 section 5.3)

    @property
    def L(self):
        return self.C * self.N

    def dim(self, d: str) -> int:
        if d == "1":
            return 1
        if d == "L":
            return self.L
        return getattr(self, d)

    def __str__(self):
        s = f"C={self.C}, Dk={self.Dk}, Dv={self.Dv}, chunks={self.N}"
        return s + (f", T={self.T}" if self.T != 1 else "")


class EvalError(ValueError):
    """An expression cannot be evaluated (unknown name, exp of a non-log, ...)."""


class UndefinedFormula(EvalError):
    """A formula has no value: it reads an entry that does not exist (row 0,
    row C+1, ...) or divides by zero identically.  The claim is ill-formed;
    the derivation file itself is fine."""


_NAMES = weakref.WeakKeyDictionary()


def _idx_names(s: str):
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", s or ""))


def free_indices(e) -> frozenset:
    """Index variables an expression's value depends on (bound ones removed),
    so that memoisation ignores unrelated outer bindings."""
    hit = _NAMES.get(e)
    if hit is not None:
        return hit
    out = set()
    for ch in e.children():
        out |= free_indices(ch)
    if isinstance(e, ir.Adj):
        out |= free_indices(e.var)
    if isinstance(e, (ir.Sum, ir.Prod)):
        out = (out - {e.var}) | _idx_names(e.lo) | _idx_names(e.hi)
    elif isinstance(e, (ir.Stack, ir.RowRec)):
        out = out - {e.var}
    elif isinstance(e, ir.Row):
        out |= _idx_names(e.idx)
    elif isinstance(e, ir.SubBlock):
        out |= _idx_names(e.bi) | _idx_names(e.bj)
    elif isinstance(e, ir.Truth):
        out |= _idx_names(e.idx)
    res = frozenset(out)
    _NAMES[e] = res
    return res


_CODE: Dict[str, object] = {}


def idx_value(s: str, env: dict) -> int:
    try:
        code = _CODE.get(s)
        if code is None:
            code = _CODE[s] = compile(s, "<index>", "eval")
        return int(eval(code, {"__builtins__": {}}, env))  # trusted derivation code
    except Exception as e:  # noqa: BLE001 - turned into a clear message
        raise EvalError(f"cannot evaluate index expression {s!r} with {env}: {e}") from None


# ------------------------------------------------------------------ the point
class Point:
    """Sampled sequence inputs, initial state and loss seeds, plus the
    recurrence trajectory, over one field."""

    def __init__(self, deriv: Derivation, rec_name: str, field, sizes: Sizes,
                 rng: np.random.Generator, zero_init=False):
        self.deriv, self.field, self.sizes = deriv, field, sizes
        self.rec = deriv.recurrences[rec_name]
        f, L = field, sizes.L
        self.seq = {}
        for inp in self.rec.inputs:
            self.seq[inp.seq] = self._sample(inp.kind, L, sizes.dim(inp.dim), rng)
        Dv, Dk = sizes.Dv, sizes.Dk
        self.S0 = f.zeros(Dv, Dk) if zero_init else self._sample("any", Dv, Dk, rng)
        self.dO = self._sample("any", L, Dv, rng)
        self.dST = self._sample("any", Dv, Dk, rng)
        self.states = None
        self.outs = None

    def _sample(self, kind, r, c, rng):
        f = self.field
        if isinstance(f, ModP):
            return f.rand(r, c, nonzero=(kind in ("gate", "beta")))
        if isinstance(f, Float):
            import torch
            if kind == "gate":
                a = rng.uniform(0.85, 1.0, size=(r, c))
            elif kind == "beta":
                a = rng.uniform(0.05, 1.0, size=(r, c))
            else:
                a = rng.standard_normal((r, c)) / np.sqrt(max(c, 1))
            return torch.tensor(a, dtype=torch.float64)
        raise TypeError(f"cannot sample over {f.name}")

    # -- the unrolled recurrence ----------------------------------------
    def trajectory(self):
        if self.states is None:
            self.states, self.outs = run_steps(self, self.field, self.S0, 0, self.sizes.L)
        return self.states, self.outs


def run_steps(pt: Point, field, S, start, stop, seq=None):
    """Run the recurrence for steps start+1..stop from state S; returns the
    states list (index = step) and outputs dict."""
    prog = pt.rec.program
    states = {start: S}
    outs = {}
    for b in range(start, stop):
        ev = BlockEval(pt, prog, b, field, S_prev=S, seq=seq)
        S = ev.var_value(prog.state)
        states[b + 1] = S
        outs[b + 1] = ev.var_value(prog.output)
    return states, outs


# ------------------------------------------------------------------ blocks
class BlockEval:
    """Evaluates expressions in the context of one block (chunk or step) of a
    program.  ``overrides`` replaces a name's value, optionally only inside the
    listed consumer definitions (for partial, "from X" adjoints)."""

    def __init__(self, pt: Point, prog: Program, b: int, field=None, S_prev=None,
                 overrides=None, seq=None, adjoints=None, shared=None):
        self.pt, self.prog, self.b = pt, prog, b
        self.f = field or pt.field
        self.sizes = pt.sizes
        self.width = pt.sizes.C if prog.block == "chunk" else 1
        self.S_prev = S_prev
        self.overrides = overrides or {}
        self.seq = seq or pt.seq
        self.adjoints = adjoints   # callable (Adj, BlockEval) -> value
        self.shared = shared if shared is not None else {}
        self.defs = dict(prog.defs)
        self.memo: Dict = {}
        self.cur_def = None
        self.recs: Dict[str, object] = {}
        self.alias = {i.step: i.seq for i in pt.rec.inputs if i.step != i.seq}

    # -- index environment
    def idx_env(self, extra=None):
        s = self.sizes
        env = {"C": s.C, "T": s.T, "L": s.L, "Dk": s.Dk, "Dv": s.Dv}
        env["t"] = self.b if self.prog.block == "chunk" else self.b + 1
        if extra:
            env.update(extra)
        return env

    def dim(self, d):
        return self.sizes.dim(d)

    # -- names
    def _input_tile(self, name, var):
        f = self.f
        seqv = self._lift(self.seq[name])
        if var.rows == "L":
            return seqv
        lo = self.b * self.width
        tile = f.rows(seqv, lo, lo + self.width)
        if self.prog.block == "step":  # per-step inputs are column vectors
            tile = f.T(tile)
        return tile

    def _state_before(self):
        if self.S_prev is not None:
            return self.S_prev
        states, _ = self.pt.trajectory()
        return states[self.b * self.width]

    def var_value(self, name, var=None):
        ov = self.overrides.get(name)
        if ov is not None:
            value, consumers = ov
            if consumers is None or self.cur_def in consumers:
                return value
        if name in self.recs:
            return self.recs[name]
        if name in self.defs:
            key = ("def", name)
            if key not in self.memo:
                saved = self.cur_def
                self.cur_def = name
                try:
                    self.memo[key] = self.ev(self.defs[name], {})
                finally:
                    self.cur_def = saved
            return self.memo[key]
        if name == "S_prev":
            return self._lift(self._state_before())
        if name == "dO":
            lo = self.b * self.width
            t = self.f.rows(self._lift(self.pt.dO), lo, lo + self.width)
            return self.f.T(t) if self.prog.block == "step" else t
        name = self.alias.get(name, name)
        if name in self.seq:
            return self._input_tile(name, var or ir.Var(name, "C", "Dk"))
        raise EvalError(f"unknown symbol {name!r} in program {self.prog.name}")

    def _lift(self, v):
        """Base-field values enter a dual evaluation with a zero tangent."""
        if isinstance(self.f, Dual) and not isinstance(v, tuple):
            return self.f.lift(v)
        return v

    # -- expressions
    def ev(self, e: ir.Expr, env: dict):
        fv = free_indices(e)
        key = (id(e), self.cur_def, tuple(sorted((k, v) for k, v in env.items() if k in fv)))
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        val = self._ev(e, env)
        self.memo[key] = val
        return val

    def _ev(self, e, env):
        f = self.f
        if isinstance(e, ir.Var):
            if e.rows == "L" and e.name in self.seq:
                return self._lift(self.seq[e.name])
            return self.var_value(e.name, e)
        if isinstance(e, ir.Tex):
            return self.ev(e.a, env)
        if isinstance(e, ir.Adj):
            if self.adjoints is None:
                raise EvalError("adjoint values are not available in this context")
            return self._lift(self.adjoints(e, self))
        if isinstance(e, ir.Truth):
            return self._lift(self._truth(e, env))
        if isinstance(e, ir.Eye):
            return f.eye(self.dim(e.n))
        if isinstance(e, ir.Zeros):
            return f.zeros(self.dim(e.rows), self.dim(e.cols))
        if isinstance(e, ir.Ones):
            return f.ones(self.dim(e.rows), self.dim(e.cols))
        if isinstance(e, ir.Const):
            return f.const([[e.value]])
        if isinstance(e, ir.Add):
            return f.add(self.ev(e.a, env), self.ev(e.b, env))
        if isinstance(e, ir.Sub):
            return f.sub(self.ev(e.a, env), self.ev(e.b, env))
        if isinstance(e, ir.Neg):
            return f.neg(self.ev(e.a, env))
        if isinstance(e, ir.Had):
            return f.had(self.ev(e.a, env), self.ev(e.b, env))
        if isinstance(e, ir.HDiv):
            return f.had(self.ev(e.a, env), f.recip(self.ev(e.b, env)))
        if isinstance(e, ir.MatMul):
            return f.matmul(self.ev(e.a, env), self.ev(e.b, env))
        if isinstance(e, ir.Scale):
            s = self.ev(e.a, env)
            x = self.ev(e.b, env)
            r, c = f.shape(x)
            return f.had(f.matmul(f.matmul(f.ones(r, 1), s), f.ones(1, c)), x)
        if isinstance(e, ir.Inner):
            a, b = self.ev(e.a, env), self.ev(e.b, env)
            r, c = f.shape(a)
            return f.matmul(f.matmul(f.ones(1, r), f.had(a, b)), f.ones(c, 1))
        if isinstance(e, ir.Transpose):
            return f.T(self.ev(e.a, env))
        if isinstance(e, ir.Inv):
            return f.inv(self.ev(e.a, env))
        if isinstance(e, ir.Exp):
            if f.exact and not _is_sym(f):
                return self._exp_of_logs(e.a, env)
            return f.exp(self.ev(e.a, env))
        if isinstance(e, ir.Log):
            if f.exact and not _is_sym(f):
                raise EvalError("log has no exact value; only exp(log ...) combinations can be evaluated")
            return f.log(self.ev(e.a, env))
        if isinstance(e, ir.DiagM):
            v = self.ev(e.a, env)
            n = f.shape(v)[0]
            return f.had(f.eye(n), f.matmul(v, f.ones(1, n)))
        if isinstance(e, ir.DiagV):
            x = self.ev(e.a, env)
            n = f.shape(x)[0]
            return f.matmul(f.had(x, f.eye(n)), f.ones(n, 1))
        if isinstance(e, ir.Mask):
            x = self.ev(e.a, env)
            n = f.shape(x)[0]
            return f.had(x, f.const(mask(n, e.kind)))
        if isinstance(e, ir.CumProd):
            x = self.ev(e.a, env)
            rows = [f.rows(x, 0, 1)]
            for i in range(1, f.shape(x)[0]):
                rows.append(f.had(rows[-1], f.rows(x, i, i + 1)))
            return f.vstack(rows)
        if isinstance(e, ir.CumSum):
            x = self.ev(e.a, env)
            n = f.shape(x)[0]
            return f.matmul(f.const(mask(n, "M")), x)
        if isinstance(e, ir.RevCumSum):
            x = self.ev(e.a, env)
            n = f.shape(x)[0]
            return f.matmul(f.const(mask(n, "MT")), x)
        if isinstance(e, ir.LastRow):
            x = self.ev(e.a, env)
            n = f.shape(x)[0]
            return f.T(f.rows(x, n - 1, n))
        if isinstance(e, ir.PlaceLast):
            v = self.ev(e.a, env)
            n = self.dim("C")
            return f.vstack([f.zeros(n - 1, f.shape(v)[0]), f.T(v)]) if n > 1 else f.T(v)
        if isinstance(e, ir.Row):
            i = idx_value(e.idx, self.idx_env(env))
            if e.glob:
                x = self._lift(self.seq[e.a.name]) if isinstance(e.a, ir.Var) and e.a.name in self.seq \
                    else self.ev(e.a, env)
            else:
                x = self.ev(e.a, env)
            n = f.shape(x)[0]
            if not 1 <= i <= n:
                raise UndefinedFormula(f"row {e.idx}={i} outside 1..{n} in {ir.latex_of(e)}")
            return f.T(f.rows(x, i - 1, i))
        if isinstance(e, ir.Sum):
            lo = idx_value(e.lo, self.idx_env(env))
            hi = idx_value(e.hi, self.idx_env(env))
            acc = None
            for i in range(lo, hi + 1):
                v = self.ev(e.body, {**env, e.var: i})
                acc = v if acc is None else f.add(acc, v)
            if acc is None:
                r, c = e.shape()
                acc = f.zeros(self.dim(r), self.dim(c))
            return acc
        if isinstance(e, ir.Prod):
            lo = idx_value(e.lo, self.idx_env(env))
            hi = idx_value(e.hi, self.idx_env(env))
            acc = None
            for i in range(lo, hi + 1):
                v = self.ev(e.body, {**env, e.var: i})
                acc = v if acc is None else f.matmul(acc, v)
            if acc is None:
                acc = f.eye(self.dim(e.shape()[0]))
            return acc
        if isinstance(e, ir.Stack):
            n = self.dim(e.n)
            return f.vstack([f.T(self.ev(e.body, {**env, e.var: i})) for i in range(1, n + 1)])
        if isinstance(e, ir.RowRec):
            n, c = self.dim(e.rows), self.dim(e.cols)
            rows = []
            for i in range(1, n + 1):
                self.recs[e.name] = f.vstack(rows + [f.zeros(n - len(rows), c)]) if rows else f.zeros(n, c)
                env_i = {**env, e.var: i}
                # the body depends on rows computed so far: never reuse a memo across rows
                v = self._ev_fresh(e.body, env_i)
                rows.append(f.T(v))
            self.recs.pop(e.name, None)
            return f.vstack(rows)
        if isinstance(e, ir.Shift):
            other = self.shifted(e.k)
            return other.ev(e.a, env)
        if isinstance(e, ir.SubBlock):
            x = self.ev(e.a, env)
            T = self.sizes.T
            bi = idx_value(e.bi, self.idx_env(env))
            x = f.rows(x, bi * T, (bi + 1) * T)
            if e.bj:
                bj = idx_value(e.bj, self.idx_env(env))
                x = f.cols(x, bj * T, (bj + 1) * T)
            return x
        if isinstance(e, ir.GatedInner):
            q, k, g = self.ev(e.q, env), self.ev(e.k, env), self.ev(e.g, env)
            acc = None
            for d in range(f.shape(q)[1]):
                qd = f.had(f.cols(q, d, d + 1), f.cols(g, d, d + 1))
                kd = f.had(f.cols(k, d, d + 1), f.recip(f.cols(g, d, d + 1)))
                term = f.matmul(qd, f.T(kd))
                acc = term if acc is None else f.add(acc, term)
            return acc
        raise EvalError(f"cannot evaluate node {type(e).__name__}")

    def _ev_fresh(self, e, env):
        saved = self.memo
        self.memo = {k: v for k, v in saved.items() if k[0] == "def"}
        try:
            return self._ev(e, env)
        finally:
            self.memo = saved

    def _exp_of_logs(self, e, env):
        f = self.f
        if isinstance(e, ir.Log):
            return self.ev(e.a, env)
        if isinstance(e, ir.Neg):
            return f.recip(self._exp_of_logs(e.a, env))
        if isinstance(e, ir.Add):
            return f.had(self._exp_of_logs(e.a, env), self._exp_of_logs(e.b, env))
        if isinstance(e, ir.Sub):
            return f.had(self._exp_of_logs(e.a, env), f.recip(self._exp_of_logs(e.b, env)))
        if isinstance(e, ir.Tex):
            return self._exp_of_logs(e.a, env)
        if isinstance(e, ir.Sum):  # exp of a sum of logs is a product
            lo = idx_value(e.lo, self.idx_env(env))
            hi = idx_value(e.hi, self.idx_env(env))
            r, c = e.shape()
            acc = f.ones(self.dim(r), self.dim(c))
            for i in range(lo, hi + 1):
                acc = f.had(acc, self._exp_of_logs(e.body, {**env, e.var: i}))
            return acc
        if isinstance(e, (ir.SubBlock, ir.Row, ir.Transpose, ir.LastRow, ir.Shift)):
            # exp commutes with selecting entries
            inner = ir.Exp(e.a)
            return self.ev(type(e)(**{**e.__dict__, "a": inner}), env)
        raise EvalError(f"exp of {type(e).__name__} cannot be rewritten to products of gates")

    def _truth(self, e: ir.Truth, env):
        states, outs = self.pt.trajectory()
        ienv = self.idx_env(env)
        if e.what == "state":
            return states[idx_value(e.idx, ienv)]
        if e.what == "out":
            return outs[idx_value(e.idx, ienv)]
        if e.what == "outs":
            lo = self.b * self.width
            return self.f.vstack([self.f.T(outs[i]) for i in range(lo + 1, lo + self.width + 1)])
        raise EvalError(f"unknown truth {e.what}")

    def shifted(self, k):
        key = ("shift", self.prog.name, self.b + k, id(self.f))
        if key not in self.shared:
            nb = self.b + k
            nblocks = self.sizes.N if self.prog.block == "chunk" else self.sizes.L
            if not 0 <= nb < nblocks:
                raise EvalError(f"block t{k:+d} is outside the sequence")
            self.shared[key] = BlockEval(self.pt, self.prog, nb, self.f, None, None,
                                         self.seq, self.adjoints, self.shared)
        return self.shared[key]


def _is_sym(f):
    return f.name == "sympy"


def mask(n, kind):
    m = np.tril(np.ones((n, n), dtype=np.int64))
    if kind == "M-1":
        m = m - np.eye(n, dtype=np.int64)
    elif kind == "MT":
        m = m.T.copy()
    elif kind != "M":
        raise EvalError(f"unknown mask {kind}")
    return m


# ------------------------------------------------------------------ adjoints
def vjp_program(ev: BlockEval, seeds: Dict[str, object]):
    """Reverse mode through the block's definitions.  Returns (total, parts):
    total[name] = dL/d name, parts[name][consumer] = the part through consumer."""
    f = ev.f
    prog = ev.prog
    total: Dict[str, object] = {}
    parts: Dict[str, Dict[str, object]] = {}

    def acc(name, consumer, g):
        total[name] = g if name not in total else f.add(total[name], g)
        p = parts.setdefault(name, {})
        p[consumer] = g if consumer not in p else f.add(p[consumer], g)

    for name, g in seeds.items():
        total[name] = g
    for name, expr in reversed(prog.defs):
        if name not in total:
            continue
        ev.cur_def = name
        _vjp(ev, expr, total[name], lambda n, g, c=name: acc(n, c, g))
    ev.cur_def = None
    return total, parts


def _vjp(ev, e, g, acc):
    f = ev.f
    env = {}
    val = lambda x: ev.ev(x, env)  # noqa: E731
    if isinstance(e, ir.Var):
        acc(e.name, g)
    elif isinstance(e, ir.Tex):
        _vjp(ev, e.a, g, acc)
    elif isinstance(e, (ir.Eye, ir.Zeros, ir.Ones, ir.Const)):
        pass
    elif isinstance(e, ir.Add):
        _vjp(ev, e.a, g, acc)
        _vjp(ev, e.b, g, acc)
    elif isinstance(e, ir.Sub):
        _vjp(ev, e.a, g, acc)
        _vjp(ev, e.b, f.neg(g), acc)
    elif isinstance(e, ir.Neg):
        _vjp(ev, e.a, f.neg(g), acc)
    elif isinstance(e, ir.MatMul):
        _vjp(ev, e.a, f.matmul(g, f.T(val(e.b))), acc)
        _vjp(ev, e.b, f.matmul(f.T(val(e.a)), g), acc)
    elif isinstance(e, ir.Had):
        _vjp(ev, e.a, f.had(g, val(e.b)), acc)
        _vjp(ev, e.b, f.had(g, val(e.a)), acc)
    elif isinstance(e, ir.HDiv):
        rb = f.recip(val(e.b))
        _vjp(ev, e.a, f.had(g, rb), acc)
        _vjp(ev, e.b, f.neg(f.had(f.had(g, val(e.a)), f.had(rb, rb))), acc)
    elif isinstance(e, ir.Scale):
        s, x = val(e.a), val(e.b)
        r, c = f.shape(x)
        _vjp(ev, e.a, f.matmul(f.matmul(f.ones(1, r), f.had(g, x)), f.ones(c, 1)), acc)
        _vjp(ev, e.b, f.had(f.matmul(f.matmul(f.ones(r, 1), s), f.ones(1, c)), g), acc)
    elif isinstance(e, ir.Inner):
        a, b = val(e.a), val(e.b)
        r, c = f.shape(a)
        gg = f.matmul(f.matmul(f.ones(r, 1), g), f.ones(1, c))
        _vjp(ev, e.a, f.had(gg, b), acc)
        _vjp(ev, e.b, f.had(gg, a), acc)
    elif isinstance(e, ir.Transpose):
        _vjp(ev, e.a, f.T(g), acc)
    elif isinstance(e, ir.Inv):
        y = val(e)
        _vjp(ev, e.a, f.neg(f.matmul(f.matmul(f.T(y), g), f.T(y))), acc)
    elif isinstance(e, ir.DiagM):
        n = f.shape(g)[0]
        _vjp(ev, e.a, f.matmul(f.had(g, f.eye(n)), f.ones(n, 1)), acc)
    elif isinstance(e, ir.DiagV):
        n = f.shape(g)[0]
        _vjp(ev, e.a, f.had(f.eye(n), f.matmul(g, f.ones(1, n))), acc)
    elif isinstance(e, ir.Mask):
        _vjp(ev, e.a, f.had(g, f.const(mask(f.shape(g)[0], e.kind))), acc)
    elif isinstance(e, ir.CumProd):
        x, y = val(e.a), val(e)
        n = f.shape(x)[0]
        _vjp(ev, e.a, f.had(f.matmul(f.const(mask(n, "MT")), f.had(g, y)), f.recip(x)), acc)
    elif isinstance(e, ir.CumSum):
        _vjp(ev, e.a, f.matmul(f.const(mask(f.shape(g)[0], "MT")), g), acc)
    elif isinstance(e, ir.RevCumSum):
        _vjp(ev, e.a, f.matmul(f.const(mask(f.shape(g)[0], "M")), g), acc)
    elif isinstance(e, ir.LastRow):
        n = f.shape(val(e.a))[0]
        gt = f.T(g)
        _vjp(ev, e.a, f.vstack([f.zeros(n - 1, f.shape(gt)[1]), gt]) if n > 1 else gt, acc)
    elif isinstance(e, ir.Exp):
        _vjp(ev, e.a, f.had(g, val(e)), acc)
    elif isinstance(e, ir.Log):
        _vjp(ev, e.a, f.had(g, f.recip(val(e.a))), acc)
    else:
        raise EvalError(f"no reverse mode for {type(e).__name__} inside a program definition")


def true_dstates(pt: Point):
    """dL/dS_t for t = 0..L through the steps after t (cached on the point).
    At a chunk end this is the full adjoint of S_[t]^C, since a chunk's outputs
    read the state before it."""
    cache = getattr(pt, "_dstates", None)
    if cache is not None:
        return cache
    states, _ = pt.trajectory()
    f = pt.field
    prog = pt.rec.program
    L = pt.sizes.L
    d = {L: pt.dST}
    for b in range(L - 1, -1, -1):
        ev = BlockEval(pt, prog, b, f, S_prev=states[b])
        dO = f.T(f.rows(pt.dO, b, b + 1))
        total, _ = vjp_program(ev, {prog.state: d[b + 1], prog.output: dO})
        d[b] = total.get("S_prev", f.zeros(*f.shape(states[b])))
    pt._dstates = d
    return d


def block_adjoints(pt: Point, prog: Program, b: int):
    """(total, parts) adjoints of every name in block b of ``prog`` (cached)."""
    cache = pt.__dict__.setdefault("_badj", {})
    key = (prog.name, b)
    if key in cache:
        return cache[key]
    f = pt.field
    width = pt.sizes.C if prog.block == "chunk" else 1
    ds = true_dstates(pt)[(b + 1) * width]
    ev = BlockEval(pt, prog, b, f)
    lo = b * width
    dO = f.rows(pt.dO, lo, lo + width)
    if prog.block == "step":
        dO = f.T(dO)
    res = vjp_program(ev, {prog.state: ds, prog.output: dO})
    cache[key] = res
    return res


def adjoint_value(pt: Point, prog: Program, b: int, a: ir.Adj):
    total, parts = block_adjoints(pt, prog, b)
    f = pt.field
    name = a.var.name

    def zero():
        # a name with no use gets a zero adjoint of its value's shape
        return f.zeros(*f.shape(BlockEval(pt, prog, b).var_value(name)))

    if name == prog.state and not a.via:
        return total[name] if name in total else zero()
    if a.via:
        acc = zero()
        for cname in a.via:
            if cname not in prog.names():
                raise EvalError(f"'from {cname}': no definition {cname!r} in program {prog.name}")
            v = parts.get(name, {}).get(cname)
            if v is not None:
                acc = f.add(acc, v)
        return acc
    v = total[name] if name in total else zero()
    for cname in a.excl:
        p = parts.get(name, {}).get(cname)
        if p is not None:
            v = f.sub(v, p)
    return v
