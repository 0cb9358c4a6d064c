"""True adjoints at one point: reverse mode through a block's program definitions
and through the recurrence's steps, over the point's own field."""
from __future__ import annotations

from typing import Dict

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Program
from chunkproof.derivations.reverse import NO_REVERSE_RULE
from chunkproof.derivations.visitor import Visitor
from .evaluate import BlockEval, EvalError, Point, UndefinedFormula, idx_value, mask


class _Reverse(Visitor):
    """``visit(e, ev, g, acc, env)`` sends the cotangent g of e to the names e reads:
    acc(name, gradient).  Values of subexpressions come from ``ev`` (memoised);
    ``env`` binds the index variables of Sum, Prod and Stack bodies."""

    def visit_object(self, e, ev, g, acc, env):
        raise EvalError(f"no reverse mode for {type(e).__name__} inside a program definition")

    def _refused(self, e, ev, g, acc, env):
        raise EvalError(f"no reverse mode for {type(e).__name__} inside a program definition: "
                        f"{NO_REVERSE_RULE[type(e).__name__]}")

    visit_Shift = visit_SumBlocks = visit_RowRec = visit_Truth = visit_Adj = _refused

    def visit_Var(self, e, ev, g, acc, env):
        acc(e.name, g)

    def visit_Tex(self, e, ev, g, acc, env):
        self.visit(e.a, ev, g, acc, env)

    def _constant(self, e, ev, g, acc, env):
        pass

    visit_Eye = visit_Zeros = visit_Ones = visit_Const = _constant

    def visit_Add(self, e, ev, g, acc, env):
        self.visit(e.a, ev, g, acc, env)
        self.visit(e.b, ev, g, acc, env)

    def visit_Sub(self, e, ev, g, acc, env):
        self.visit(e.a, ev, g, acc, env)
        self.visit(e.b, ev, ev.f.neg(g), acc, env)

    def visit_Neg(self, e, ev, g, acc, env):
        self.visit(e.a, ev, ev.f.neg(g), acc, env)

    def visit_MatMul(self, e, ev, g, acc, env):
        # a constant factor (1 g^T: a broadcast log-gate) takes no cotangent, and its
        # partner's value, which may be in log space, is not needed
        f = ev.f
        if not isinstance(e.a, _CONSTANT):
            self.visit(e.a, ev, f.matmul(g, f.T(ev.ev(e.b, env))), acc, env)
        if not isinstance(e.b, _CONSTANT):
            self.visit(e.b, ev, f.matmul(f.T(ev.ev(e.a, env)), g), acc, env)

    def visit_Had(self, e, ev, g, acc, env):
        f = ev.f
        self.visit(e.a, ev, f.had(g, ev.ev(e.b, env)), acc, env)
        self.visit(e.b, ev, f.had(g, ev.ev(e.a, env)), acc, env)

    def visit_HDiv(self, e, ev, g, acc, env):
        f = ev.f
        rb = f.recip(ev.ev(e.b, env))
        self.visit(e.a, ev, f.had(g, rb), acc, env)
        self.visit(e.b, ev, f.neg(f.had(f.had(g, ev.ev(e.a, env)), f.had(rb, rb))), acc, env)

    def visit_Scale(self, e, ev, g, acc, env):
        f = ev.f
        s, x = ev.ev(e.a, env), ev.ev(e.b, env)
        r, c = f.shape(x)
        self.visit(e.a, ev, f.matmul(f.matmul(f.ones(1, r), f.had(g, x)), f.ones(c, 1)), acc, env)
        self.visit(e.b, ev, f.had(f.matmul(f.matmul(f.ones(r, 1), s), f.ones(1, c)), g), acc, env)

    def visit_Inner(self, e, ev, g, acc, env):
        f = ev.f
        a, b = ev.ev(e.a, env), ev.ev(e.b, env)
        r, c = f.shape(a)
        gg = f.matmul(f.matmul(f.ones(r, 1), g), f.ones(1, c))
        self.visit(e.a, ev, f.had(gg, b), acc, env)
        self.visit(e.b, ev, f.had(gg, a), acc, env)

    def visit_Transpose(self, e, ev, g, acc, env):
        self.visit(e.a, ev, ev.f.T(g), acc, env)

    def visit_Inv(self, e, ev, g, acc, env):
        f = ev.f
        y = ev.ev(e, env)
        self.visit(e.a, ev, f.neg(f.matmul(f.matmul(f.T(y), g), f.T(y))), acc, env)

    def visit_DiagM(self, e, ev, g, acc, env):
        f = ev.f
        n = f.shape(g)[0]
        self.visit(e.a, ev, f.matmul(f.had(g, f.eye(n)), f.ones(n, 1)), acc, env)

    def visit_DiagV(self, e, ev, g, acc, env):
        f = ev.f
        n = f.shape(g)[0]
        self.visit(e.a, ev, f.had(f.eye(n), f.matmul(g, f.ones(1, n))), acc, env)

    def visit_Mask(self, e, ev, g, acc, env):
        f = ev.f
        self.visit(e.a, ev, f.had(g, f.const(mask(f.shape(g)[0], e.kind))), acc, env)

    def visit_CumProd(self, e, ev, g, acc, env):
        f = ev.f
        x, y = ev.ev(e.a, env), ev.ev(e, env)
        n = f.shape(x)[0]
        self.visit(e.a, ev, f.had(f.matmul(f.const(mask(n, "MT")), f.had(g, y)), f.recip(x)), acc, env)

    def visit_CumSum(self, e, ev, g, acc, env):
        f = ev.f
        self.visit(e.a, ev, f.matmul(f.const(mask(f.shape(g)[0], "MT")), g), acc, env)

    def visit_RevCumSum(self, e, ev, g, acc, env):
        f = ev.f
        self.visit(e.a, ev, f.matmul(f.const(mask(f.shape(g)[0], "M")), g), acc, env)

    def visit_LastRow(self, e, ev, g, acc, env):
        f = ev.f
        n = ev.dim(e.a.shape()[0])  # from the shape: the value may be in log space
        gt = f.T(g)
        self.visit(e.a, ev, f.vstack([f.zeros(n - 1, f.shape(gt)[1]), gt]) if n > 1 else gt, acc, env)

    def visit_PlaceLast(self, e, ev, g, acc, env):
        f = ev.f
        n = f.shape(g)[0]
        self.visit(e.a, ev, f.T(f.rows(g, n - 1, n)), acc, env)

    def visit_Exp(self, e, ev, g, acc, env):
        self.visit(e.a, ev, ev.f.had(g, ev.ev(e, env)), acc, env)

    def visit_Log(self, e, ev, g, acc, env):
        self.visit(e.a, ev, ev.f.had(g, ev.f.recip(ev.ev(e.a, env))), acc, env)

    # index level: the body's cotangent at each binding of its index
    def visit_Row(self, e, ev, g, acc, env):
        if e.glob:
            raise EvalError("no reverse mode for a global row (glob=True) inside a program "
                            "definition: read the chunk's tile instead")
        f = ev.f
        i = idx_value(e.idx, ev.idx_env(env))
        n = ev.dim(e.a.shape()[0])
        if not 1 <= i <= n:
            raise UndefinedFormula(f"row {e.idx}={i} outside 1..{n} in {ir.latex_of(e)}")
        gt = f.T(g)
        c = f.shape(gt)[1]
        parts = ([f.zeros(i - 1, c)] if i > 1 else []) + [gt] + ([f.zeros(n - i, c)] if i < n else [])
        self.visit(e.a, ev, f.vstack(parts), acc, env)

    def visit_Sum(self, e, ev, g, acc, env):
        for i in range(idx_value(e.lo, ev.idx_env(env)), idx_value(e.hi, ev.idx_env(env)) + 1):
            self.visit(e.body, ev, g, acc, {**env, e.var: i})

    def visit_Prod(self, e, ev, g, acc, env):
        f = ev.f
        envs = [{**env, e.var: i} for i in range(idx_value(e.lo, ev.idx_env(env)),
                                                   idx_value(e.hi, ev.idx_env(env)) + 1)]
        vals = [ev.ev(e.body, en) for en in envs]
        n = f.shape(g)[0]
        before = [f.eye(n)]
        for v in vals[:-1]:
            before.append(f.matmul(before[-1], v))
        after = f.eye(n)
        for k in range(len(vals) - 1, -1, -1):
            # d(P_<k B_k P_>k) / dB_k sends g to P_<k^T g P_>k^T
            self.visit(e.body, ev, f.matmul(f.matmul(f.T(before[k]), g), f.T(after)), acc, envs[k])
            after = f.matmul(vals[k], after)

    def visit_Stack(self, e, ev, g, acc, env):
        f = ev.f
        for i in range(1, ev.dim(e.n) + 1):
            self.visit(e.body, ev, f.T(f.rows(g, i - 1, i)), acc, {**env, e.var: i})


_CONSTANT = (ir.Eye, ir.Zeros, ir.Ones, ir.Const)
_REVERSE = _Reverse()


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
        _REVERSE.visit(expr, ev, total[name], lambda n, g, c=name: acc(n, c, g), {})
    ev.cur_def = None
    return total, parts


def true_dstates(pt: Point):
    """dL/dS_t for t = 0..L through the steps after t (cached on the point).
    At a chunk end this is the full adjoint of S_[t]^C, since a chunk's outputs
    read the state before it."""
    cache = pt.derived.get("dstates")
    if cache is not None:
        return cache
    states, _ = pt.trajectory()
    f = pt.field
    prog = pt.rec.program
    L = pt.sizes.L
    d = {L: pt.dST}
    dp = {}  # parameters: the parts of every step, summed
    rows = {i.seq: [None] * L for i in pt.rec.inputs}  # each input's gradient, a row per step
    for b in range(L - 1, -1, -1):
        ev = BlockEval(pt, prog, b, f, S_prev=states[b])
        dO = f.T(f.rows(pt.dO, b, b + 1))
        total, _ = vjp_program(ev, {prog.state: d[b + 1], prog.output: dO})
        d[b] = total.get("S_prev", f.zeros(*f.shape(states[b])))
        for n in pt.param_decl:
            if n in total:
                dp[n] = total[n] if n not in dp else f.add(dp[n], total[n])
        for i in pt.rec.inputs:
            g = total.get(i.step)
            rows[i.seq][b] = f.T(g) if g is not None else f.zeros(1, f.shape(pt.seq[i.seq])[1])
    pt.derived["dstates"] = d
    pt.derived["dparams by steps"] = dp
    pt.derived["dinputs"] = {n: f.vstack(r) for n, r in rows.items()}
    return d


def _input_gradient(pt: Point, prog: Program, b: int, name: str):
    """dL/d(an input's tile in block b) through the recurrence, not through ``prog``:
    the truth an input's adjoint claim is judged by (a wrong program must not make
    its consistent backward look right), or None where ``name`` is no plain input.
    A log-gate input is left to the program's reverse mode, which knows its log."""
    seq = {i.step: i.seq for i in pt.rec.inputs}.get(name, name)
    kinds = {i.seq: i.kind for i in pt.rec.inputs}
    if seq not in pt.seq or name in prog.names() or kinds.get(seq) == "loggate":
        return None
    true_dstates(pt)
    width = pt.sizes.C if prog.block == "chunk" else 1
    g = pt.field.rows(pt.derived["dinputs"][seq], b * width, (b + 1) * width)
    return g if prog.block == "chunk" else pt.field.T(g)


def param_gradients(pt: Point):
    """dL/d theta for every parameter theta, summed over every step that reads it:
    reverse mode through the recurrence's steps."""
    hit = pt.derived.get("dparams")
    if hit is not None:
        return hit
    f = pt.field
    true_dstates(pt)
    hit = dict(pt.derived["dparams by steps"])
    for n in pt.param_decl:
        if n not in hit:  # a parameter the recurrence does not read
            hit[n] = f.zeros(*f.shape(pt.param_value(n)))
    pt.derived["dparams"] = hit
    return hit


def block_adjoints(pt: Point, prog: Program, b: int):
    """(total, parts) adjoints of every name in block b of ``prog`` (cached)."""
    key = ("block adjoints", prog.name, b)
    if key in pt.derived:
        return pt.derived[key]
    f = pt.field
    width = pt.sizes.C if prog.block == "chunk" else 1
    ds = true_dstates(pt)[(b + 1) * width]
    ev = BlockEval(pt, prog, b, f)
    lo = b * width
    dO = f.rows(pt.dO, lo, lo + width)
    if prog.block == "step":
        dO = f.T(dO)
    res = vjp_program(ev, {prog.state: ds, prog.output: dO})
    pt.derived[key] = res
    return res


def adjoint_value(pt: Point, prog: Program, b: int, a: ir.Adj):
    f = pt.field
    name = a.var.name
    if name in pt.param_decl and not a.via and not a.excl:
        return param_gradients(pt)[name]
    if not a.via and not a.excl:
        g = _input_gradient(pt, prog, b, name)
        if g is not None:
            return g
    total, parts = block_adjoints(pt, prog, b)

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


def adjoint_fn(pt: Point):
    """What a BlockEval reads adj() nodes through: the true adjoint at ``pt``, in
    the evaluating block of its program."""
    def value(a: ir.Adj, ev: BlockEval):
        return adjoint_value(pt, ev.prog, ev.b, a)
    return value
