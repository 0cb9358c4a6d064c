"""True adjoints at one point: reverse mode through a block's program definitions
and through the recurrence's steps, over the point's own field."""
from __future__ import annotations

from typing import Dict

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Program
from chunkproof.derivations.visitor import Visitor
from .evaluate import BlockEval, EvalError, Point, mask


class _Reverse(Visitor):
    """``visit(e, ev, g, acc)`` sends the cotangent g of e to the names e reads:
    acc(name, gradient).  Values of subexpressions come from ``ev`` (memoised)."""

    def visit_object(self, e, ev, g, acc):
        raise EvalError(f"no reverse mode for {type(e).__name__} inside a program definition")

    def visit_Var(self, e, ev, g, acc):
        acc(e.name, g)

    def visit_Tex(self, e, ev, g, acc):
        self.visit(e.a, ev, g, acc)

    def _constant(self, e, ev, g, acc):
        pass

    visit_Eye = visit_Zeros = visit_Ones = visit_Const = _constant

    def visit_Add(self, e, ev, g, acc):
        self.visit(e.a, ev, g, acc)
        self.visit(e.b, ev, g, acc)

    def visit_Sub(self, e, ev, g, acc):
        self.visit(e.a, ev, g, acc)
        self.visit(e.b, ev, ev.f.neg(g), acc)

    def visit_Neg(self, e, ev, g, acc):
        self.visit(e.a, ev, ev.f.neg(g), acc)

    def visit_MatMul(self, e, ev, g, acc):
        f = ev.f
        self.visit(e.a, ev, f.matmul(g, f.T(ev.ev(e.b, {}))), acc)
        self.visit(e.b, ev, f.matmul(f.T(ev.ev(e.a, {})), g), acc)

    def visit_Had(self, e, ev, g, acc):
        f = ev.f
        self.visit(e.a, ev, f.had(g, ev.ev(e.b, {})), acc)
        self.visit(e.b, ev, f.had(g, ev.ev(e.a, {})), acc)

    def visit_HDiv(self, e, ev, g, acc):
        f = ev.f
        rb = f.recip(ev.ev(e.b, {}))
        self.visit(e.a, ev, f.had(g, rb), acc)
        self.visit(e.b, ev, f.neg(f.had(f.had(g, ev.ev(e.a, {})), f.had(rb, rb))), acc)

    def visit_Scale(self, e, ev, g, acc):
        f = ev.f
        s, x = ev.ev(e.a, {}), ev.ev(e.b, {})
        r, c = f.shape(x)
        self.visit(e.a, ev, f.matmul(f.matmul(f.ones(1, r), f.had(g, x)), f.ones(c, 1)), acc)
        self.visit(e.b, ev, f.had(f.matmul(f.matmul(f.ones(r, 1), s), f.ones(1, c)), g), acc)

    def visit_Inner(self, e, ev, g, acc):
        f = ev.f
        a, b = ev.ev(e.a, {}), ev.ev(e.b, {})
        r, c = f.shape(a)
        gg = f.matmul(f.matmul(f.ones(r, 1), g), f.ones(1, c))
        self.visit(e.a, ev, f.had(gg, b), acc)
        self.visit(e.b, ev, f.had(gg, a), acc)

    def visit_Transpose(self, e, ev, g, acc):
        self.visit(e.a, ev, ev.f.T(g), acc)

    def visit_Inv(self, e, ev, g, acc):
        f = ev.f
        y = ev.ev(e, {})
        self.visit(e.a, ev, f.neg(f.matmul(f.matmul(f.T(y), g), f.T(y))), acc)

    def visit_DiagM(self, e, ev, g, acc):
        f = ev.f
        n = f.shape(g)[0]
        self.visit(e.a, ev, f.matmul(f.had(g, f.eye(n)), f.ones(n, 1)), acc)

    def visit_DiagV(self, e, ev, g, acc):
        f = ev.f
        n = f.shape(g)[0]
        self.visit(e.a, ev, f.had(f.eye(n), f.matmul(g, f.ones(1, n))), acc)

    def visit_Mask(self, e, ev, g, acc):
        f = ev.f
        self.visit(e.a, ev, f.had(g, f.const(mask(f.shape(g)[0], e.kind))), acc)

    def visit_CumProd(self, e, ev, g, acc):
        f = ev.f
        x, y = ev.ev(e.a, {}), ev.ev(e, {})
        n = f.shape(x)[0]
        self.visit(e.a, ev, f.had(f.matmul(f.const(mask(n, "MT")), f.had(g, y)), f.recip(x)), acc)

    def visit_CumSum(self, e, ev, g, acc):
        f = ev.f
        self.visit(e.a, ev, f.matmul(f.const(mask(f.shape(g)[0], "MT")), g), acc)

    def visit_RevCumSum(self, e, ev, g, acc):
        f = ev.f
        self.visit(e.a, ev, f.matmul(f.const(mask(f.shape(g)[0], "M")), g), acc)

    def visit_LastRow(self, e, ev, g, acc):
        f = ev.f
        n = f.shape(ev.ev(e.a, {}))[0]
        gt = f.T(g)
        self.visit(e.a, ev, f.vstack([f.zeros(n - 1, f.shape(gt)[1]), gt]) if n > 1 else gt, acc)

    def visit_Exp(self, e, ev, g, acc):
        self.visit(e.a, ev, ev.f.had(g, ev.ev(e, {})), acc)

    def visit_Log(self, e, ev, g, acc):
        self.visit(e.a, ev, ev.f.had(g, ev.f.recip(ev.ev(e.a, {}))), acc)


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
        _REVERSE.visit(expr, ev, total[name], lambda n, g, c=name: acc(n, c, g))
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
    for b in range(L - 1, -1, -1):
        ev = BlockEval(pt, prog, b, f, S_prev=states[b])
        dO = f.T(f.rows(pt.dO, b, b + 1))
        total, _ = vjp_program(ev, {prog.state: d[b + 1], prog.output: dO})
        d[b] = total.get("S_prev", f.zeros(*f.shape(states[b])))
    pt.derived["dstates"] = d
    return d


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


def adjoint_fn(pt: Point):
    """What a BlockEval reads adj() nodes through: the true adjoint at ``pt``, in
    the evaluating block of its program."""
    def value(a: ir.Adj, ev: BlockEval):
        return adjoint_value(pt, ev.prog, ev.b, a)
    return value
