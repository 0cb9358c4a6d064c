"""Evaluate IR over a field and run programs block by block, for one sampled point.
The true adjoints of a point are in :mod:`adjoints`."""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Dict

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Derivation, Program
from chunkproof.derivations.visitor import Visitor
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


# ------------------------------------------------------------------ indices
def _idx_names(s: str):
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", s or ""))


class _FreeIndices(Visitor):
    """The index variables a node's value depends on: its children's, plus the
    names its own index expressions read, less the ones it binds."""

    def _below(self, e):
        out = set()
        for ch in e.children():
            out |= free_indices(ch)
        return out

    def visit_Expr(self, e):
        return self._below(e)

    def visit_Adj(self, e):
        return self._below(e) | free_indices(e.var)

    def visit_Sum(self, e):
        return (self._below(e) - {e.var}) | _idx_names(e.lo) | _idx_names(e.hi)

    visit_Prod = visit_Sum

    def visit_Stack(self, e):
        return self._below(e) - {e.var}

    visit_RowRec = visit_Stack

    def visit_Row(self, e):
        return self._below(e) | _idx_names(e.idx)

    def visit_SubBlock(self, e):
        return self._below(e) | _idx_names(e.bi) | _idx_names(e.bj)

    def visit_Truth(self, e):
        return self._below(e) | _idx_names(e.idx)


_FREE = _FreeIndices()
_NAMES = weakref.WeakKeyDictionary()


def free_indices(e) -> frozenset:
    """Index variables an expression's value depends on (bound ones removed),
    so that memoisation ignores unrelated outer bindings."""
    hit = _NAMES.get(e)
    if hit is None:
        hit = _NAMES[e] = frozenset(_FREE.visit(e))
    return hit


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
    """Sequence inputs (name -> L x d), initial state and loss seeds over one field,
    plus the recurrence trajectory, computed when first asked for.  ``sample`` draws
    a random point; a symbolic one is built from matrices of symbols."""

    def __init__(self, deriv: Derivation, rec_name: str, field, sizes: Sizes,
                 seq: dict, S0, dO, dST, params=None):
        self.deriv, self.field, self.sizes = deriv, field, sizes
        self.rec = deriv.recurrences[rec_name]
        self.seq, self.S0, self.dO, self.dST = seq, S0, dO, dST
        self.param_decl = deriv.parameters()
        self.params = dict(params or {})
        self.states = None
        self.outs = None
        self.derived: Dict = {}   # values computed once from the point (true adjoints)

    @classmethod
    def sample(cls, deriv: Derivation, rec_name: str, field, sizes: Sizes,
               rng: np.random.Generator, zero_init=False) -> "Point":
        rec = deriv.recurrences[rec_name]
        L, Dv, Dk = sizes.L, sizes.Dv, sizes.Dk
        seq = {inp.seq: _sample(field, inp.kind, L, sizes.dim(inp.dim), rng) for inp in rec.inputs}
        S0 = field.zeros(Dv, Dk) if zero_init else _sample(field, "any", Dv, Dk, rng)
        dO = _sample(field, "any", L, Dv, rng)
        dST = _sample(field, "any", Dv, Dk, rng)
        # drawn last, so that a derivation without parameters sees the points it always did
        params = {p.name: _sample(field, p.kind, sizes.dim(p.rows), sizes.dim(p.cols), rng)
                  for p in deriv.parameters().values()}
        return cls(deriv, rec_name, field, sizes, seq, S0, dO, dST, params)

    def param_value(self, name):
        """A parameter's value; a symbolic point names it by symbols of its own."""
        v = self.params.get(name)
        if v is None:
            p = self.param_decl[name]
            if not _is_sym(self.field):
                raise EvalError(f"parameter {name!r} has no value at this point")
            import sympy as sp
            r, c = self.sizes.dim(p.rows), self.sizes.dim(p.cols)
            v = self.params[name] = sp.Matrix(r, c, lambda i, j: sp.Symbol(
                name if r * c == 1 else f"{name}_{i + 1}{j + 1}"))
        return v

    # -- the unrolled recurrence ----------------------------------------
    def trajectory(self):
        if self.states is None:
            self.states, self.outs = run_steps(self, self.field, self.S0, 0, self.sizes.L)
        return self.states, self.outs


def _sample(f, kind, r, c, rng):
    if isinstance(f, ModP):
        # a log-gate is held as its gate, an atom alpha != 0
        return f.rand(r, c, nonzero=(kind in ("gate", "beta", "loggate")))
    if isinstance(f, Float):
        if kind == "gate":
            a = rng.uniform(0.85, 1.0, size=(r, c))
        elif kind == "loggate":
            a = np.log(rng.uniform(0.85, 1.0, size=(r, c)))
        elif kind == "beta":
            a = rng.uniform(0.05, 1.0, size=(r, c))
        else:
            a = rng.standard_normal((r, c)) / np.sqrt(max(c, 1))
        return np.asarray(a, dtype=np.float64)
    raise TypeError(f"cannot sample over {f.name}")


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
class BlockEval(Visitor):
    """Evaluates expressions in the context of one block (chunk or step) of a
    program: one ``visit_`` rule per node, ``ev`` memoises.  ``overrides`` replaces a
    name's value, optionally only inside the listed consumer definitions (for
    partial, "from X" adjoints)."""

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
        # over GF(p) a log-space value is held as its exponential (see _ExpOfLogs)
        self.atoms = self.f.exact and not _is_sym(self.f)
        self.log_names = {i.seq for i in pt.rec.inputs if i.kind == "loggate"}
        self.log_names |= {n for n, p in pt.param_decl.items() if p.kind == "loggate"}
        self._log_defs: Dict[str, bool] = {}
        self.any_log = bool(self.log_names) or _has_log(prog)

    def is_log(self, name) -> bool:
        """Whether ``name`` is a log-space tile: a log-gate input or parameter, or a
        definition whose formula is (cumsum of log-gates, differences of them, ...)."""
        if not self.any_log:
            return False
        name = self.alias.get(name, name)
        if name in self.log_names:
            return True
        if name not in self.defs or name in self.recs:
            return False
        hit = self._log_defs.get(name)
        if hit is None:
            self._log_defs[name] = False  # a definition cannot read itself
            hit = self._log_defs[name] = _LOG_TYPED.visit(self.defs[name], self)
        return hit

    def _from_log(self, name, v):
        """A tangent of a log-space value moves its log: exp(g + eps d) = a + eps a d."""
        if self.atoms and isinstance(self.f, Dual) and self.is_log(name):
            return (v[0], self.f.b.had(v[0], v[1]))
        return v

    def _seq(self, name):
        return self._from_log(name, self._lift(self.seq[name]))

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
        seqv = self._seq(name)
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
                return self._from_log(name, value)
        if name in self.recs:
            return self.recs[name]
        if name in self.defs:
            key = ("def", name)
            if key not in self.memo:
                saved = self.cur_def
                self.cur_def = name
                try:
                    if self.atoms and self.is_log(name):
                        self.memo[key] = _EXP_OF_LOGS.visit(self.defs[name], self, {})
                    else:
                        self.memo[key] = self.ev(self.defs[name], {})
                finally:
                    self.cur_def = saved
            return self.memo[key]
        if name in self.pt.param_decl:
            return self._from_log(name, self._lift(self.pt.param_value(name)))
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
        # a value depends on the node, the definition being evaluated (overrides apply
        # per consumer) and the bindings of its free indices.  The node is keyed by
        # identity, not by structure: a structural key would share one value between
        # equal but distinct subexpressions, which changes float64 autograd's graph
        # and with it the last bits of the reported errors.  The entry holds the node,
        # so that its id is not reused while the memo lives
        fv = free_indices(e)
        key = (id(e), self.cur_def, tuple(sorted((k, v) for k, v in env.items() if k in fv)))
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        val = self.visit(e, env)
        self.memo[key] = (e, val)
        return val

    def _ev_fresh(self, e, env):
        saved = self.memo
        self.memo = {k: v for k, v in saved.items() if k[0] == "def"}
        try:
            return self.visit(e, env)
        finally:
            self.memo = saved

    def visit_object(self, e, env):
        raise EvalError(f"cannot evaluate node {type(e).__name__}")

    # leaves
    def visit_Var(self, e, env):
        if self.atoms and self.is_log(e.name):
            raise EvalError(f"{e.name} is a log-space value (the log of a gate), which GF(p) "
                            f"cannot hold: read it inside exp(...), e.g. exp(cumsum({e.name}))")
        if e.rows == "L" and e.name in self.seq:
            return self._seq(e.name)
        return self.var_value(e.name, e)

    def visit_Tex(self, e, env):
        return self.ev(e.a, env)

    def visit_Adj(self, e, env):
        if self.adjoints is None:
            raise EvalError("adjoint values are not available in this context")
        return self._lift(self.adjoints(e, self))

    def visit_Truth(self, e, env):
        states, outs = self.pt.trajectory()
        ienv = self.idx_env(env)
        L = self.sizes.L
        if e.what in ("state", "out"):
            i = idx_value(e.idx, ienv)
            # states exist at steps 0..L (0: the initial state), outputs at 1..L
            first = 0 if e.what == "state" else 1
            if not first <= i <= L:
                raise UndefinedFormula(f"the recurrence's {e.what} at step {e.idx}={i} is outside "
                                       f"the sequence (steps {first}..{L} at {self.sizes})")
            v = (states if e.what == "state" else outs)[i]
        elif e.what == "outs":
            lo = self.b * self.width
            v = self.f.vstack([self.f.T(outs[i]) for i in range(lo + 1, lo + self.width + 1)])
        else:
            raise EvalError(f"unknown truth {e.what}")
        return self._lift(v)

    def visit_Eye(self, e, env):
        return self.f.eye(self.dim(e.n))

    def visit_Zeros(self, e, env):
        return self.f.zeros(self.dim(e.rows), self.dim(e.cols))

    def visit_Ones(self, e, env):
        return self.f.ones(self.dim(e.rows), self.dim(e.cols))

    def visit_Const(self, e, env):
        return self.f.const([[e.value]])

    # arithmetic
    def visit_Add(self, e, env):
        return self.f.add(self.ev(e.a, env), self.ev(e.b, env))

    def visit_Sub(self, e, env):
        return self.f.sub(self.ev(e.a, env), self.ev(e.b, env))

    def visit_Neg(self, e, env):
        return self.f.neg(self.ev(e.a, env))

    def visit_Had(self, e, env):
        return self.f.had(self.ev(e.a, env), self.ev(e.b, env))

    def visit_HDiv(self, e, env):
        return self.f.had(self.ev(e.a, env), self.f.recip(self.ev(e.b, env)))

    def visit_MatMul(self, e, env):
        return self.f.matmul(self.ev(e.a, env), self.ev(e.b, env))

    def visit_Scale(self, e, env):
        f = self.f
        s = self.ev(e.a, env)
        x = self.ev(e.b, env)
        r, c = f.shape(x)
        return f.had(f.matmul(f.matmul(f.ones(r, 1), s), f.ones(1, c)), x)

    def visit_Inner(self, e, env):
        f = self.f
        a, b = self.ev(e.a, env), self.ev(e.b, env)
        r, c = f.shape(a)
        return f.matmul(f.matmul(f.ones(1, r), f.had(a, b)), f.ones(c, 1))

    def visit_Transpose(self, e, env):
        return self.f.T(self.ev(e.a, env))

    def visit_Inv(self, e, env):
        return self.f.inv(self.ev(e.a, env))

    def visit_Exp(self, e, env):
        if self.f.exact and not _is_sym(self.f):
            return _EXP_OF_LOGS.visit(e.a, self, env)
        return self.f.exp(self.ev(e.a, env))

    def visit_Log(self, e, env):
        if self.f.exact and not _is_sym(self.f):
            raise EvalError("log has no exact value; only exp(log ...) combinations can be evaluated")
        return self.f.log(self.ev(e.a, env))

    # tiles from tiles
    def visit_DiagM(self, e, env):
        f = self.f
        v = self.ev(e.a, env)
        n = f.shape(v)[0]
        return f.had(f.eye(n), f.matmul(v, f.ones(1, n)))

    def visit_DiagV(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        n = f.shape(x)[0]
        return f.matmul(f.had(x, f.eye(n)), f.ones(n, 1))

    def visit_Mask(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        return f.had(x, f.const(mask(f.shape(x)[0], e.kind)))

    def visit_CumProd(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        rows = [f.rows(x, 0, 1)]
        for i in range(1, f.shape(x)[0]):
            rows.append(f.had(rows[-1], f.rows(x, i, i + 1)))
        return f.vstack(rows)

    def visit_CumSum(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        return f.matmul(f.const(mask(f.shape(x)[0], "M")), x)

    def visit_RevCumSum(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        return f.matmul(f.const(mask(f.shape(x)[0], "MT")), x)

    def visit_LastRow(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        n = f.shape(x)[0]
        return f.T(f.rows(x, n - 1, n))

    def visit_PlaceLast(self, e, env):
        f = self.f
        v = self.ev(e.a, env)
        n = self.dim("C")
        return f.vstack([f.zeros(n - 1, f.shape(v)[0]), f.T(v)]) if n > 1 else f.T(v)

    # index level
    def visit_Row(self, e, env):
        f = self.f
        i = idx_value(e.idx, self.idx_env(env))
        if e.glob and isinstance(e.a, ir.Var) and e.a.name in self.seq:
            x = self._seq(e.a.name)
        else:
            x = self.ev(e.a, env)
        n = f.shape(x)[0]
        if not 1 <= i <= n:
            raise UndefinedFormula(f"row {e.idx}={i} outside 1..{n} in {ir.latex_of(e)}")
        return f.T(f.rows(x, i - 1, i))

    def _fold(self, e, env, combine, empty):
        """body at var = lo..hi combined left to right; empty() for an empty range."""
        lo = idx_value(e.lo, self.idx_env(env))
        hi = idx_value(e.hi, self.idx_env(env))
        acc = None
        for i in range(lo, hi + 1):
            v = self.ev(e.body, {**env, e.var: i})
            acc = v if acc is None else combine(acc, v)
        return empty() if acc is None else acc

    def visit_Sum(self, e, env):
        return self._fold(e, env, self.f.add, lambda: self.f.zeros(*map(self.dim, e.shape())))

    def visit_Prod(self, e, env):
        return self._fold(e, env, self.f.matmul, lambda: self.f.eye(self.dim(e.shape()[0])))

    def visit_Stack(self, e, env):
        f = self.f
        n = self.dim(e.n)
        return f.vstack([f.T(self.ev(e.body, {**env, e.var: i})) for i in range(1, n + 1)])

    def visit_RowRec(self, e, env):
        f = self.f
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

    def visit_Shift(self, e, env):
        return self.shifted(e.k).ev(e.a, env)

    def visit_SumBlocks(self, e, env):
        n = self.sizes.N if self.prog.block == "chunk" else self.sizes.L
        acc = None
        for b in range(n):
            v = (self if b == self.b else self.shifted(b - self.b)).ev(e.a, env)
            acc = v if acc is None else self.f.add(acc, v)
        return acc

    def visit_SubBlock(self, e, env):
        f = self.f
        x = self.ev(e.a, env)
        T = self.sizes.T
        r, c = f.shape(x)
        bi = idx_value(e.bi, self.idx_env(env))
        # a slice past the tile would be silently short, and fail later as a raw shape clash
        if not 0 <= bi < r // T or (r % T):
            raise UndefinedFormula(f"sub-chunk {e.bi}={bi} outside 0..{r // T - 1} "
                                   f"({r} rows, T={T}) in {ir.latex_of(e)}")
        x = f.rows(x, bi * T, (bi + 1) * T)
        if e.bj:
            bj = idx_value(e.bj, self.idx_env(env))
            if not 0 <= bj < c // T or (c % T):
                raise UndefinedFormula(f"sub-chunk column {e.bj}={bj} outside 0..{c // T - 1} "
                                       f"({c} columns, T={T}) in {ir.latex_of(e)}")
            x = f.cols(x, bj * T, (bj + 1) * T)
        return x

    def visit_GatedInner(self, e, env):
        f = self.f
        q, k, g = self.ev(e.q, env), self.ev(e.k, env), self.ev(e.g, env)
        acc = None
        for d in range(f.shape(q)[1]):
            qd = f.had(f.cols(q, d, d + 1), f.cols(g, d, d + 1))
            kd = f.had(f.cols(k, d, d + 1), f.recip(f.cols(g, d, d + 1)))
            term = f.matmul(qd, f.T(kd))
            acc = term if acc is None else f.add(acc, term)
        return acc

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


class _ExpOfLogs(Visitor):
    """exp(e) over GF(p), where gates are atoms and have no logarithm: exp of a
    combination of logs is rewritten to products and quotients of the gates."""

    def __init__(self):
        self.moved = weakref.WeakKeyDictionary()

    def visit_object(self, e, ev, env):
        raise EvalError(f"exp of {type(e).__name__} cannot be rewritten to products of gates")

    def visit_Log(self, e, ev, env):
        return ev.ev(e.a, env)

    def visit_Neg(self, e, ev, env):
        return ev.f.recip(self.visit(e.a, ev, env))

    def visit_Add(self, e, ev, env):
        return ev.f.had(self.visit(e.a, ev, env), self.visit(e.b, ev, env))

    def visit_Sub(self, e, ev, env):
        return ev.f.had(self.visit(e.a, ev, env), ev.f.recip(self.visit(e.b, ev, env)))

    def visit_Tex(self, e, ev, env):
        return self.visit(e.a, ev, env)

    def visit_Sum(self, e, ev, env):  # exp of a sum of logs is a product
        f = ev.f
        lo = idx_value(e.lo, ev.idx_env(env))
        hi = idx_value(e.hi, ev.idx_env(env))
        r, c = e.shape()
        acc = f.ones(ev.dim(r), ev.dim(c))
        for i in range(lo, hi + 1):
            acc = f.had(acc, self.visit(e.body, ev, {**env, e.var: i}))
        return acc

    def _inside(self, e, ev, env):
        # exp commutes with selecting entries.  One rewritten node per node, kept
        # alive: the evaluator's memo keys on node identity
        moved = self.moved.get(e)
        if moved is None:
            moved = self.moved[e] = e.map_children(ir.Exp)
        return ev.ev(moved, env)

    visit_SubBlock = visit_Row = visit_Transpose = visit_LastRow = visit_Shift = _inside

    # log-space gates, as kernels write them: g = log alpha is held as alpha
    def visit_Var(self, e, ev, env):
        if not ev.is_log(e.name):
            raise EvalError(f"exp of {e.name}: {e.name} is not a log-space value; declare the "
                            f"input or parameter with kind='loggate', or write exp(log(x))")
        if e.rows == "L" and e.name in ev.seq:
            return ev._seq(e.name)
        return ev.var_value(e.name, e)

    def visit_Zeros(self, e, ev, env):
        return ev.f.ones(ev.dim(e.rows), ev.dim(e.cols))

    def visit_CumSum(self, e, ev, env):  # exp of prefix sums: prefix products
        return _cumprod(ev.f, self.visit(e.a, ev, env), reverse=False)

    def visit_RevCumSum(self, e, ev, env):
        return _cumprod(ev.f, self.visit(e.a, ev, env), reverse=True)

    def visit_MatMul(self, e, ev, env):
        # a product with ones broadcasts (1 g^T) or sums (1^T G) log values: copies and
        # products of their exponentials
        f = ev.f
        if isinstance(e.a, ir.Ones):
            x = _cumprod(f, self.visit(e.b, ev, env), reverse=True)
            return f.matmul(f.ones(ev.dim(e.a.rows), 1), f.rows(x, 0, 1))
        if isinstance(e.b, ir.Ones):
            x = f.T(_cumprod(f, f.T(self.visit(e.a, ev, env)), reverse=True))
            return f.matmul(f.cols(x, 0, 1), f.ones(1, ev.dim(e.b.cols)))
        raise EvalError("exp of a matrix product cannot be rewritten to products of gates "
                        "(only products with a ones tile, 1 g^T or 1^T G, can)")


_EXP_OF_LOGS = _ExpOfLogs()


def _cumprod(f, x, reverse):
    n = f.shape(x)[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    rows = {}
    prev = None
    for i in order:
        prev = f.rows(x, i, i + 1) if prev is None else f.had(prev, f.rows(x, i, i + 1))
        rows[i] = prev
    return f.vstack([rows[i] for i in range(n)])


class _LogTyped(Visitor):
    """Whether a formula's value is in log space: built from log-gates and logs by
    the operations that exp turns into products (sums, differences, prefix sums,
    row selection, broadcasts)."""

    def visit_Expr(self, e, ev):
        return False

    def visit_Var(self, e, ev):
        return ev.is_log(e.name)

    def visit_Log(self, e, ev):
        return True

    def _any(self, e, ev):
        return any(self.visit(c, ev) for c in e.children())

    visit_Add = visit_Sub = visit_Neg = visit_CumSum = visit_RevCumSum = visit_Row = _any
    visit_LastRow = visit_Transpose = visit_SubBlock = visit_Shift = visit_Tex = _any
    visit_Sum = visit_MatMul = _any


_LOG_TYPED = _LogTyped()
_HAS_LOG: Dict[int, tuple] = {}


def _has_log(prog) -> bool:
    """Whether a program's definitions contain a logarithm (cached per program)."""
    hit = _HAS_LOG.get(id(prog))
    if hit is None or hit[0] is not prog or hit[1] != len(prog.defs):
        has = any(isinstance(n, ir.Log) for _, e in prog.defs for n in ir.walk(e))
        hit = _HAS_LOG[id(prog)] = (prog, len(prog.defs), has)
    return hit[2]


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
