"""Symbolic reverse mode of a chunk program: the adjoint of every definition, input,
parameter and of S_[t-1], as formulas of the IR.

API (what other modules call; pure IR, nothing of verify):

    derive_adjoints(deriv, program) -> Backward
        ``program`` a Program or its name in ``deriv``.  ``Backward.equations`` lists
        named Equations in an order that can be computed chunk by chunk (the state's
        reverse recurrence first, then every definition from the last to the first,
        then the inputs, S_[t-1] and the initial state, then parameters).
    adjoint_formula(deriv, program, name, via=()) -> Equation   (cached per program)
        the derived formula of the adjoint named ``name`` (a definition, an input,
        'S_prev', 'S' for the recurrence, or a parameter; ``via`` the consumers for a
        parameter's per-chunk part).

Each Equation's ``lhs`` is an ``ir.Adj`` and ``rhs`` the derived formula, in which
``adj(X)`` stands for the adjoint of a consumer X computed on an earlier line (as in
the notes: each line is one chain-rule step), dO for δO and adj(S) for δS_[t]^C.
Nothing here is trusted: verify/derived.py checks each line exactly.

The rules are the notes' matrix rules (Y the node's value, G its adjoint):
A B -> δA = G Bᵀ, δB = Aᵀ G;  A ⊙ B, A ⊘ B -> G ⊙ B, G ⊘ B, -G ⊙ A ⊘ B ⊘ B;
s X -> ⟨G, X⟩, s G;  Y = X⁻¹ -> -Yᵀ G Yᵀ;  Diag(v) -> diag(G);  X ⊙ M -> G ⊙ M;
Y = cumprod(X) -> suffix_sum(G ⊙ Y) ⊘ X;  cumsum -> suffix sum and back;
last row -> [0, ..., G]ᵀ;  Y = exp(X) -> G ⊙ Y;  log X -> G ⊘ X;  and for the index
level (inside definitions): rows, Σ, ∏ and stacks of rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from . import ir
from .dsl import DO, S_PREV, Derivation, Program
from .simplify import Simplifier, add, def_names, symmetric_tiles, hdiv, had, mm, neg, scale, transpose, zeros_of
from .visitor import Visitor


class DeriveError(ValueError):
    """The program has a construct reverse mode cannot go through symbolically; the
    message names the node and the definition."""


@dataclass(frozen=True)
class Equation:
    id: str                 # 'dKr', 'dS_prev', 'dS', 'dgamma'
    name: str               # the tile whose adjoint it is
    role: str               # see ROLES
    lhs: ir.Expr            # an ir.Adj
    rhs: ir.Expr
    blocks: str = "all"     # the chunks it speaks of, as claims say it
    kind: str = "adjoint"   # 'identity' for a parameter's gradient over all chunks
    what: str = ""


ROLES = {
    "state": "reverse recurrence of the state over chunks",
    "definition": "adjoint of a definition",
    "output": "adjoint of the output",
    "unused": "definition that O and S do not read",
    "input": "adjoint of an input",
    "state_prev": "adjoint of the state before the chunk",
    "initial": "gradient of the initial state",
    "parameter": "a parameter's part from one chunk",
    "parameter_total": "a parameter's gradient, summed over every chunk",
}


@dataclass
class Backward:
    program: str
    equations: List[Equation] = field(default_factory=list)
    handles: Dict[str, ir.Var] = field(default_factory=dict)

    def get(self, eq_id) -> Optional[Equation]:
        return next((e for e in self.equations if e.id == eq_id), None)


# ------------------------------------------------------------------ index expressions
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SIZES = {"C", "T", "L", "Dk", "Dv", "t"}


def _rename(s: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, s) if s else s


def rename_index(e: ir.Expr, old: str, new: str) -> ir.Expr:
    """e with the free index variable ``old`` renamed ``new`` (bound ones kept)."""
    if isinstance(e, (ir.Sum, ir.Prod)):
        lo, hi = _rename(e.lo, old, new), _rename(e.hi, old, new)
        body = e.body if e.var == old else rename_index(e.body, old, new)
        return type(e)(e.var, lo, hi, body)
    if isinstance(e, (ir.Stack, ir.RowRec)) and e.var == old:
        return e
    if isinstance(e, ir.Row):
        return ir.Row(rename_index(e.a, old, new), _rename(e.idx, old, new), e.glob)
    if isinstance(e, ir.SubBlock):
        return ir.SubBlock(rename_index(e.a, old, new), _rename(e.bi, old, new), _rename(e.bj, old, new))
    if isinstance(e, ir.Truth):
        return ir.Truth(e.what, _rename(e.idx, old, new), e.tex)
    return e.map_children(lambda c: rename_index(c, old, new))


def index_names(e: ir.Expr) -> set:
    """Every identifier an expression's index fields and binders use."""
    out = set()
    for n in ir.walk(e):
        for f in ("idx", "lo", "hi", "bi", "bj", "var"):
            v = getattr(n, f, None)
            if isinstance(v, str):
                out |= set(_IDENT.findall(v))
    return out


def _fresh(avoid, prefer=("j", "k", "l", "m", "n", "p")):
    for p in prefer:
        if p not in avoid and p not in _SIZES:
            return p
    k = 1
    while f"i{k}" in avoid:
        k += 1
    return f"i{k}"


# ------------------------------------------------------------------ the rules
_CONSTANT = (ir.Eye, ir.Zeros, ir.Ones, ir.Const)
# what neither reverse mode (this symbolic one, nor verify/adjoints.py's numeric one)
# differentiates inside a program definition, and what to write instead
NO_REVERSE_RULE = {
    "Shift": "it reads another chunk; keep it in a claim's formula",
    "SumBlocks": "it reads every chunk; keep it in a claim's formula",
    "RowRec": "a row recursion has no reverse rule; where the tile is differentiated, "
              "define it in closed form (e.g. with inv)",
    "Truth": "it is a value of the recurrence; keep it in a claim's formula",
    "Adj": "it is a true adjoint; keep it in a claim's formula",
    "SubBlock": "sub-chunk blocks have no symbolic reverse rule; derive the whole-chunk form",
    "GatedInner": "the gated inner product has no symbolic reverse rule; write it with exp and ⊙",
}


class _Reverse(Visitor):
    """``visit(e, g, acc)`` sends the adjoint g of e (an IR formula) to the tiles e
    reads: ``acc(name, formula)``.  ``where`` names the definition, for errors."""

    def __init__(self, where: str):
        self.where = where

    def _refuse(self, e, why):
        raise DeriveError(f"definition {self.where}: cannot derive the adjoint through "
                          f"{type(e).__name__} {ir.latex_of(e)}: {why}")

    def visit_Expr(self, e, g, acc):
        self._refuse(e, "no reverse rule for this node")

    def visit_Shift(self, e, g, acc):
        self._refuse(e, NO_REVERSE_RULE[type(e).__name__])

    visit_SumBlocks = visit_RowRec = visit_Truth = visit_Adj = visit_Shift
    visit_SubBlock = visit_GatedInner = visit_Shift

    def visit_Var(self, e, g, acc):
        if e.rows == "L":
            self._refuse(e, "it is the whole sequence; read the chunk's tile instead")
        acc(e.name, g)

    def visit_Tex(self, e, g, acc):
        self.visit(e.a, g, acc)

    def _constant(self, e, g, acc):
        pass

    visit_Eye = visit_Zeros = visit_Ones = visit_Const = _constant

    def visit_Add(self, e, g, acc):
        self.visit(e.a, g, acc)
        self.visit(e.b, g, acc)

    def visit_Sub(self, e, g, acc):
        self.visit(e.a, g, acc)
        self.visit(e.b, neg(g), acc)

    def visit_Neg(self, e, g, acc):
        self.visit(e.a, neg(g), acc)

    def visit_MatMul(self, e, g, acc):
        if not isinstance(e.a, _CONSTANT):
            self.visit(e.a, mm(g, transpose(e.b)), acc)
        if not isinstance(e.b, _CONSTANT):
            self.visit(e.b, mm(transpose(e.a), g), acc)

    def visit_Had(self, e, g, acc):
        self.visit(e.a, had(g, e.b), acc)
        self.visit(e.b, had(g, e.a), acc)

    def visit_HDiv(self, e, g, acc):
        self.visit(e.a, hdiv(g, e.b), acc)
        self.visit(e.b, neg(hdiv(hdiv(had(g, e.a), e.b), e.b)), acc)

    def visit_Scale(self, e, g, acc):
        self.visit(e.a, ir.Inner(g, e.b), acc)
        self.visit(e.b, scale(e.a, g), acc)

    def visit_Inner(self, e, g, acc):
        self.visit(e.a, scale(g, e.b), acc)
        self.visit(e.b, scale(g, e.a), acc)

    def visit_Transpose(self, e, g, acc):
        self.visit(e.a, transpose(g), acc)

    def visit_Inv(self, e, g, acc):
        yt = transpose(e)
        self.visit(e.a, neg(mm(mm(yt, g), yt)), acc)

    def visit_DiagM(self, e, g, acc):
        self.visit(e.a, ir.DiagV(g), acc)

    def visit_DiagV(self, e, g, acc):
        self.visit(e.a, ir.DiagM(g), acc)

    def visit_Mask(self, e, g, acc):
        self.visit(e.a, ir.Mask(g, e.kind), acc)

    def visit_CumProd(self, e, g, acc):
        self.visit(e.a, hdiv(ir.RevCumSum(had(g, e)), e.a), acc)

    def visit_CumSum(self, e, g, acc):
        self.visit(e.a, ir.RevCumSum(g), acc)

    def visit_RevCumSum(self, e, g, acc):
        self.visit(e.a, ir.CumSum(g), acc)

    def visit_LastRow(self, e, g, acc):
        if e.a.shape()[0] != "C":
            self._refuse(e, f"the last row of a {e.a.shape()[0]}-row tile (only C-row tiles "
                            f"have [0, ..., 0, v]ᵀ)")
        self.visit(e.a, ir.PlaceLast(g), acc)

    def visit_PlaceLast(self, e, g, acc):
        self.visit(e.a, ir.LastRow(g), acc)

    def visit_Exp(self, e, g, acc):
        self.visit(e.a, had(g, e), acc)

    def visit_Log(self, e, g, acc):
        self.visit(e.a, hdiv(g, e.a), acc)

    # -- the index level: a body's adjoint at each value of its index, summed over it
    def visit_Row(self, e, g, acc):
        if e.glob:
            self._refuse(e, "a global row reads the whole sequence; read the chunk's tile")
        rows = e.a.shape()[0]
        self.visit(e.a, mm(ir.Row(ir.Eye(rows), e.idx), transpose(g)), acc)

    def _bound(self, var, g):
        """The binder's variable, renamed where the adjoint already reads that name."""
        return var if var not in index_names(g) else _fresh(index_names(g) | {var})

    def _under(self, var, lo, hi, acc):
        return lambda name, c: acc(name, ir.Sum(var, lo, hi, c))

    def visit_Sum(self, e, g, acc):
        v = self._bound(e.var, g)
        body = e.body if v == e.var else rename_index(e.body, e.var, v)
        self.visit(body, g, self._under(v, e.lo, e.hi, acc))

    def visit_Stack(self, e, g, acc):
        v = self._bound(e.var, g)
        body = e.body if v == e.var else rename_index(e.body, e.var, v)
        self.visit(body, ir.Row(g, v), self._under(v, "1", e.n, acc))

    def visit_Prod(self, e, g, acc):
        # d(P_<i B_i P_>i) sends G to P_<iᵀ G P_>iᵀ, for each factor i
        v = self._bound(e.var, g)
        body = e.body if v == e.var else rename_index(e.body, e.var, v)
        j = _fresh(index_names(g) | index_names(body) | {v})
        bj = rename_index(body, v, j)
        before = ir.Prod(j, e.lo, f"{v}-1", bj)
        after = ir.Prod(j, f"{v}+1", e.hi, bj)
        self.visit(body, mm(mm(transpose(before), g), transpose(after)), self._under(v, e.lo, e.hi, acc))


# ------------------------------------------------------------------ the program
def _reads(e) -> set:
    return {n.name for n in ir.walk(e) if type(n) in (ir.Var, ir.Param)}


def _topological(prog: Program) -> List[str]:
    """Definitions in an order where each follows those it reads (the program's own
    order where it already is one)."""
    defs = dict(prog.defs)
    deps = {n: _reads(e) & set(defs) - {n} for n, e in prog.defs}
    out, done = [], set()

    def visit(n, path):
        if n in done:
            return
        if n in path:
            raise DeriveError(f"program {prog.name}, definition {n}: reads itself")
        for m in sorted(deps[n], key=list(defs).index):
            visit(m, path | {n})
        done.add(n)
        out.append(n)

    for n, _ in prog.defs:
        visit(n, set())
    return out


def _cone(prog: Program, roots) -> set:
    defs = dict(prog.defs)
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n in seen or n not in defs:
            continue
        seen.add(n)
        todo.extend(_reads(defs[n]) & set(defs))
    return seen


def handles_of(deriv: Derivation, prog: Program) -> Dict[str, ir.Var]:
    """name -> the tile (with its LaTeX) by which the program and the derivation's
    claims on it read each definition and leaf; a name never read gets a plain one."""
    out: Dict[str, ir.Var] = {}
    shapes = {}
    for n, e in prog.defs:
        try:
            shapes[n] = e.shape()
        except ir.ShapeError as err:
            raise DeriveError(f"program {prog.name}, definition {n}: ill-formed: {err}") from None
    exprs = [e for _, e in prog.defs]
    exprs += [x for c in deriv.claims if c.program == prog.name for x in (c.lhs, c.rhs)]
    for e in exprs:
        for n in ir.walk(e):
            if type(n) not in (ir.Var, ir.Param) or n.name in out:
                continue
            if n.name in shapes and (n.rows, n.cols) != shapes[n.name]:
                continue
            if n.rows == "L":
                continue
            out[n.name] = n
    for n, s in shapes.items():
        out.setdefault(n, ir.Var(n, s[0], s[1], n))
    return out


def _sum(parts, like):
    out = None
    for p in parts:
        out = p if out is None else add(out, p)
    return zeros_of(like) if out is None else out


def derive_adjoints(deriv: Derivation, program) -> Backward:
    """The derived backward of a chunk program (see the module's docstring)."""
    prog = deriv.programs.get(program) if isinstance(program, str) else program
    if prog is None:
        raise DeriveError(f"derivation {deriv.name} has no program {program!r} "
                          f"(programs: {', '.join(deriv.programs)})")
    if prog.block != "chunk":
        raise DeriveError(f"program {prog.name} is a {prog.block} program; derive works on chunk programs")
    defs = dict(prog.defs)
    for need in (prog.state, prog.output):
        if need not in defs:
            raise DeriveError(f"program {prog.name} defines no {need!r}")
    order = _topological(prog)
    used = _cone(prog, (prog.state, prog.output))
    handles = handles_of(deriv, prog)
    params = deriv.parameters()
    S, O = prog.state, prog.output

    # contributions: tile -> [(consumer, formula)], in the order reverse mode meets them
    contrib: Dict[str, List[Tuple[str, ir.Expr]]] = {}
    consumers = {n: [m for m in order if m in used and n in _reads(defs[m])] for n in defs}

    def cot(name):
        """The adjoint a consumer's uses are differentiated with."""
        if name == O and not consumers[O]:
            return DO
        return ir.Adj(handles[name])

    for name in reversed(order):
        if name not in used:
            continue
        rev = _Reverse(name)
        rev.visit(defs[name], cot(name),
                  lambda n, c, who=name: contrib.setdefault(n, []).append((who, c)))

    if "dO" in contrib:
        raise DeriveError(f"program {prog.name}: definition {contrib['dO'][0][0]} reads the loss "
                          f"seed dO; an objective program has no chunk backward to derive")

    names = def_names(prog.defs, handles)
    simp = Simplifier(names, symmetric=symmetric_tiles(prog.defs))
    pos = {n: i for i, n in enumerate(order)}

    def total(n, like):
        parts = sorted(contrib.get(n, ()), key=lambda p: pos[p[0]])
        return simp(_sum([c for _, c in parts], like))

    eqs: List[Equation] = []
    sprev_rhs = total("S_prev", S_PREV)
    rec = ir.Shift(sprev_rhs)
    if S in contrib:
        rec = add(rec, total(S, handles[S]))
    eqs.append(Equation("dS", S, "state", ir.Adj(handles[S]), rec, "not_last",
                        what="δS_[t]^C from chunk t+1 (the last chunk's is the seed δS_T)"))
    for n in reversed(order):
        if n == S:
            continue
        h = handles[n]
        if n not in used:
            eqs.append(Equation("d" + n, n, "unused", ir.Adj(h), zeros_of(h),
                                what=f"{n} is not read by {O} or {S}"))
            continue
        if n == O:
            if not consumers[O]:
                continue
            rhs = simp(add(DO, _sum([c for _, c in contrib.get(O, ())], h)))
            eqs.append(Equation("d" + n, n, "output", ir.Adj(h), rhs))
            continue
        eqs.append(Equation("d" + n, n, "definition", ir.Adj(h), total(n, h)))
    leaves = [n for n in _leaf_order(prog, order) if n in contrib and n not in defs
              and n not in params and n != "S_prev"]
    for n in leaves:
        h = handles[n]
        eqs.append(Equation("d" + n, n, "input", ir.Adj(h), total(n, h)))
    eqs.append(Equation("dS_prev", "S_prev", "state_prev", ir.Adj(S_PREV), sprev_rhs,
                        what="δS_[t-1]^C, what chunk t-1 receives"))
    eqs.append(Equation("dS_init", "S_prev", "initial", ir.Adj(S_PREV), sprev_rhs, "first",
                        what="the initial state's gradient δS_[-1] (chunk t = 0)"))
    for n in [p for p in params if p in contrib]:
        h = handles.get(n, params[n])
        via = tuple(sorted({who for who, _ in contrib[n]}, key=pos.get))
        part = total(n, h)
        eqs.append(Equation(f"d{n}_chunk", n, "parameter", ir.Adj(h, via), part,
                            what=f"chunk t's part, through {', '.join(via)}"))
        eqs.append(Equation("d" + n, n, "parameter_total", ir.Adj(h), ir.SumBlocks(part), "first",
                            kind="identity", what="summed over every chunk"))
    return Backward(prog.name, eqs, handles)


def _leaf_order(prog: Program, order) -> List[str]:
    """Leaves in the order the definitions first read them."""
    defs = dict(prog.defs)
    out = []
    for n in order:
        for m in ir.walk(defs[n]):
            if type(m) in (ir.Var, ir.Param) and m.name not in defs and m.name not in out:
                out.append(m.name)
    return out


_CACHE: Dict[tuple, tuple] = {}


def cached_backward(deriv: Derivation, program) -> Backward:
    """derive_adjoints, once per program (a caller asking line by line, such as a
    repair search, pays for one derivation).  A program grown since is derived again."""
    prog = deriv.programs.get(program) if isinstance(program, str) else program
    key = (id(deriv), id(prog), len(prog.defs) if prog is not None else 0)
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not prog:
        hit = _CACHE[key] = (prog, deriv, derive_adjoints(deriv, program))
    return hit[2]


def adjoint_formula(deriv: Derivation, program, name: str, via: Sequence[str] = ()) -> Equation:
    """The derived equation of the adjoint of ``name`` in ``program``: 'S' the state's
    recurrence, 'S_prev' δS_[t-1]^C, a parameter's total (``via`` empty) or per-chunk
    part (``via`` its consumers, any order).  Not yet checked: verify/derived.py's
    ``verified_backward`` gives lines that are."""
    bw = cached_backward(deriv, program)
    for e in bw.equations:
        if e.name != name or e.role == "initial":
            continue
        if e.role == "parameter" and not via:
            continue
        if e.role == "parameter_total" and via:
            continue
        return e
    raise DeriveError(f"program {bw.program}: no adjoint of {name!r} to derive "
                      f"(names: {', '.join(dict.fromkeys(e.name for e in bw.equations))})")

