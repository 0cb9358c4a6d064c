"""Simplify IR formulas built by reverse mode, and name their pieces after a program's
definitions.

Reverse mode (reverse.py) writes every chain-rule step literally: transposes of
products, negations inside products, ones and identities, one term per use.  Here
those are rewritten to the notes' shapes of formula: transposes pushed to the leaves
((←Q →Kᵀ ⊙ M)ᵀ becomes →K ←Qᵀ ⊙ Mᵀ), signs and integer factors pulled out of products,
equal terms collected, a factor shared by several products taken out once, and every
subexpression that a definition of the program computes replaced by that definition's
tile (inv(X̃) becomes Ã, K ⊙ exp(-Gᶜ) becomes →K, also inside longer products).

Every rewrite is an identity of matrices; none needs a value.  The results are
checked exactly anyway (verify/derived.py), so a wrong rule here is caught there.
Pure IR: nothing of verify is imported.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from . import ir

_ONE = ("1", "1")


# ------------------------------------------------------------------ constructors that fold
def zeros_of(e: ir.Expr) -> ir.Zeros:
    r, c = e.shape()
    return ir.Zeros(r, c)


def is_zero(e) -> bool:
    return isinstance(e, ir.Zeros)


def add(a, b):
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return ir.Add(a, b)


def neg(a):
    if is_zero(a):
        return a
    if isinstance(a, ir.Neg):
        return a.a
    return ir.Neg(a)


def mm(a, b):
    if is_zero(a) or is_zero(b):
        return ir.Zeros(a.shape()[0], b.shape()[1])
    if isinstance(a, ir.Eye):
        return b
    if isinstance(b, ir.Eye):
        return a
    return ir.MatMul(a, b)


def had(a, b):
    if is_zero(a) or is_zero(b):
        return zeros_of(a)
    return ir.Had(a, b)


def hdiv(a, b):
    if is_zero(a):
        return a
    return ir.HDiv(a, b)


def scale(s, x):
    if is_zero(s) or is_zero(x):
        return zeros_of(x)
    if isinstance(s, ir.Const) and s.value == 1:
        return x
    return ir.Scale(s, x)


def tr(a):
    return transpose(a)


# ------------------------------------------------------------------ transposes
_MASK_T = {"M": "MT", "MT": "M"}   # the strictly lower M_{-1} has no transposed kind


def transpose(a):
    """aᵀ with the transpose pushed as far down as the notes write it."""
    if a.shape() == _ONE:
        return a
    if isinstance(a, ir.Transpose):
        return a.a
    if isinstance(a, (ir.Zeros, ir.Ones)):
        return type(a)(a.cols, a.rows)
    if isinstance(a, (ir.Eye, ir.DiagM)):
        return a
    if isinstance(a, ir.MatMul):
        return mm(transpose(a.b), transpose(a.a))
    if isinstance(a, ir.Neg):
        return neg(transpose(a.a))
    if isinstance(a, ir.Scale):
        return scale(a.a, transpose(a.b))
    if isinstance(a, ir.Mask) and a.kind in _MASK_T:
        return ir.Mask(transpose(a.a), _MASK_T[a.kind])
    if isinstance(a, ir.Inv):
        inner = transpose(a.a)
        if not isinstance(inner, ir.Transpose):
            return ir.Inv(inner)
    return ir.Transpose(a)


# ------------------------------------------------------------------ signed terms
def _factor(e) -> Tuple[int, ir.Expr]:
    """(k, x) with e = k x, x carrying no sign or integer factor at its top."""
    if isinstance(e, ir.Neg):
        k, x = _factor(e.a)
        return -k, x
    if isinstance(e, ir.Scale) and isinstance(e.a, ir.Const):
        k, x = _factor(e.b)
        return e.a.value * k, x
    if isinstance(e, (ir.MatMul, ir.Had)):
        ka, xa = _factor(e.a)
        kb, xb = _factor(e.b)
        return ka * kb, _rebuild(e, xa, xb)
    if isinstance(e, ir.HDiv):
        ka, xa = _factor(e.a)
        return ka, _rebuild(e, xa, e.b)
    if isinstance(e, ir.Scale):
        kb, xb = _factor(e.b)
        return kb, _rebuild(e, e.a, xb)
    if isinstance(e, _LINEAR):
        k, x = _factor(e.a)
        return k, (e if x is e.a else _rebuild1(e, x))
    return 1, e


_LINEAR = (ir.Transpose, ir.Mask, ir.DiagM, ir.DiagV, ir.CumSum, ir.RevCumSum, ir.LastRow,
           ir.PlaceLast)


def _rebuild(e, a, b):
    if a is e.a and b is e.b:
        return e
    if isinstance(e, ir.MatMul):
        return mm(a, b)
    return type(e)(a, b)


def _rebuild1(e, a):
    return e.map_children(lambda _: a)


def terms(e) -> List[Tuple[int, ir.Expr]]:
    """e as a list of (integer coefficient, term)."""
    if isinstance(e, ir.Add):
        return terms(e.a) + terms(e.b)
    if isinstance(e, ir.Sub):
        return terms(e.a) + [(-k, t) for k, t in terms(e.b)]
    if isinstance(e, ir.Neg):
        return [(-k, t) for k, t in terms(e.a)]
    if is_zero(e):
        return []
    k, x = _factor(e)
    if k != 1 and isinstance(x, (ir.Add, ir.Sub, ir.Neg)):
        return [(k * j, t) for j, t in terms(x)]
    return [(k, x)]


def from_terms(ts: List[Tuple[int, ir.Expr]], shape) -> ir.Expr:
    """The sum of the terms; a positive one first, so that a formula rarely opens with a minus."""
    ts = [(k, t) for k, t in ts if k]
    if not ts:
        return ir.Zeros(*shape)
    first = next((i for i, (k, _) in enumerate(ts) if k > 0), 0)
    ts = [ts[first]] + ts[:first] + ts[first + 1:]
    out = None
    for k, t in ts:
        body = t if abs(k) == 1 else ir.Scale(ir.Const(abs(k)), t)
        if out is None:
            out = body if k > 0 else ir.Neg(body)
        else:
            out = ir.Add(out, body) if k > 0 else ir.Sub(out, body)
    return out


def collect(ts):
    """Equal terms added up (their coefficients), in order of first appearance."""
    acc: Dict[ir.Expr, int] = {}
    for k, t in ts:
        acc[t] = acc.get(t, 0) + k
    return [(k, t) for t, k in acc.items() if k]


# ------------------------------------------------------------------ products as chains
def chain(e) -> List[ir.Expr]:
    if isinstance(e, ir.MatMul):
        return chain(e.a) + chain(e.b)
    return [e]


def from_chain(fs):
    out = fs[0]
    for f in fs[1:]:
        out = mm(out, f)
    return out


def _had_parts(e):
    """(numerators, denominators) of a Hadamard product and quotient chain."""
    if isinstance(e, ir.Had):
        na, da = _had_parts(e.a)
        nb, db = _had_parts(e.b)
        return na + nb, da + db
    if isinstance(e, ir.HDiv):
        na, da = _had_parts(e.a)
        return na, da + [e.b]
    return [e], []


def _from_had(nums, dens):
    out = nums[0] if nums else None
    for n in nums[1:]:
        out = ir.Had(out, n)
    if out is None:
        r, c = dens[0].shape()
        out = ir.Ones(r, c)
    for d in dens:
        out = ir.HDiv(out, d)
    return out


def _factor_out(ts, shape, depth=0):
    """Σ terms with a factor shared by several products taken out once:
    A X + A Y = A (X + Y), X B + Y B = (X + Y) B."""
    if len(ts) < 2 or depth > 6:
        return from_terms(ts, shape)
    best = None
    for side in (0, -1):
        count: Dict[ir.Expr, int] = {}
        for _, t in ts:
            c = chain(t)
            if len(c) > 1:
                count[c[side]] = count.get(c[side], 0) + 1
        for f, n in count.items():
            if n >= 2 and (best is None or n > best[0]):
                best = (n, side, f)
    if best is None:
        return from_terms(ts, shape)
    _, side, f = best
    inside, rest = [], []
    for k, t in ts:
        c = chain(t)
        if len(c) > 1 and c[side] == f:
            inside.append((k, from_chain(c[1:] if side == 0 else c[:-1])))
        else:
            rest.append((k, t))
    inner_shape = inside[0][1].shape()
    inner = _factor_out(collect(inside), inner_shape, depth + 1)
    if isinstance(inner, ir.Neg):
        grouped = (-1, mm(f, inner.a) if side == 0 else mm(inner.a, f))
    else:
        grouped = (1, mm(f, inner) if side == 0 else mm(inner, f))
    if not rest:
        return from_terms([grouped], shape)
    rest_expr = _factor_out(rest, shape, depth + 1)
    return from_terms([grouped] + terms(rest_expr), shape)


# ------------------------------------------------------------------ the rewrite
class Simplifier:
    """``simplify(e)``: local rewrites bottom-up, then sums collected and factored.
    ``names`` maps a definition's formula to its tile: a subexpression equal to one,
    or a product or Hadamard chain containing one's factors, reads the tile."""

    def __init__(self, names: Dict[ir.Expr, ir.Var] = None, factor=True, symmetric=()):
        self.names = dict(names or {})
        self.symmetric = set(symmetric)
        self.factor = factor
        self._memo: Dict[ir.Expr, ir.Expr] = {}
        self._chains = [(chain(k), v) for k, v in self.names.items()
                        if isinstance(k, ir.MatMul)]
        self._hads = [(_had_parts(k), v) for k, v in self.names.items()
                      if isinstance(k, (ir.Had, ir.HDiv))]

    def __call__(self, e):
        prev = None
        for _ in range(4):   # a named tile can make a new rewrite possible
            if e == prev:
                break
            prev, e = e, self._simp(e)
        return e

    def _simp(self, e):
        hit = self._memo.get(e)
        if hit is not None:
            return hit
        out = self._local(e.map_children(self._simp))
        out = self._named(out)
        self._memo[e] = out
        return out

    def _local(self, e):
        if isinstance(e, (ir.Add, ir.Sub, ir.Neg)):
            shape = e.shape()
            ts = _merge_linear(collect([(k, self._named(t)) for k, t in terms(e)]), self)
            return _factor_out(ts, shape) if self.factor else from_terms(ts, shape)
        if isinstance(e, ir.Transpose):
            if isinstance(e.a, ir.Var) and e.a.name in self.symmetric:
                return e.a
            return transpose(e.a)
        if isinstance(e, ir.MatMul):
            k, x = _factor(e)
            x = from_chain(chain(x)) if isinstance(x, ir.MatMul) else x
            return from_terms([(k, x)], e.shape()) if k != 1 else x
        if isinstance(e, (ir.Had, ir.HDiv, ir.Scale) + _LINEAR):
            if isinstance(e, ir.Scale) and isinstance(e.a, ir.Const) and e.a.value == 1:
                return e.b
            if any(is_zero(c) for c in _linear_zero_children(e)):
                return zeros_of(e)
            if isinstance(e, ir.DiagV) and isinstance(e.a, ir.DiagM):
                return e.a.a
            if isinstance(e, ir.LastRow) and isinstance(e.a, ir.PlaceLast):
                return e.a.a
            k, x = _factor(e)
            return from_terms([(k, x)], e.shape()) if k != 1 else x
        return e

    def _named(self, e):
        hit = self.names.get(e)
        if hit is not None:
            return hit
        if isinstance(e, ir.MatMul) and self._chains:
            return self._named_chain(e)
        if isinstance(e, (ir.Had, ir.HDiv)) and self._hads:
            return self._named_had(e)
        return e

    def _named_chain(self, e):
        fs = chain(e)
        changed = True
        while changed:
            changed = False
            for pat, var in self._chains:
                n = len(pat)
                for i in range(len(fs) - n + 1):
                    if fs[i:i + n] == pat and len(fs) > n:
                        fs = fs[:i] + [var] + fs[i + n:]
                        changed = True
                        break
        return from_chain(fs) if len(fs) > 1 else fs[0]

    def _named_had(self, e):
        nums, dens = _had_parts(e)
        if not nums:
            return e
        changed = True
        while changed:
            changed = False
            for (pn, pd), var in self._hads:
                if not pn or (len(pn) + len(pd) >= len(nums) + len(dens)):
                    continue
                left_n, left_d = _take(nums, pn), _take(dens, pd)
                if left_n is not None and left_d is not None:
                    nums, dens = left_n + [var], left_d
                    changed = True
                    break
        out = _from_had(nums, dens)
        return out if out != e else e


_MERGED = (ir.DiagV, ir.Mask, ir.PlaceLast, ir.RevCumSum, ir.CumSum, ir.LastRow)


def _merge_linear(ts, simp):
    """diag(A) + diag(B) = diag(A + B), and so for masks, suffix sums, [0, ..., v]ᵀ: a
    linear map applied to several terms is applied once to their sum (which may then
    share a factor)."""
    groups: Dict[tuple, list] = {}
    for i, (k, t) in enumerate(ts):
        if isinstance(t, _MERGED):
            groups.setdefault((type(t), getattr(t, "kind", None)), []).append(i)
    out, gone = list(ts), set()
    for (cls, kind), idx in groups.items():
        if len(idx) < 2:
            continue
        inner = [(ts[i][0], ts[i][1].a) for i in idx]
        shape = inner[0][1].shape()
        body = simp._simp(from_terms(inner, shape))
        out[idx[0]] = (1, ir.Mask(body, kind) if cls is ir.Mask else cls(body))
        gone |= set(idx[1:])
    return [x for i, x in enumerate(out) if i not in gone]


def symmetric_tiles(defs) -> set:
    """Definitions that equal their transpose by their form: Diag(v), its inverse, I."""
    out = set()
    for name, e in defs:
        body = e.a if isinstance(e, ir.Tex) else e
        if isinstance(body, ir.Inv):
            body = body.a
        if isinstance(body, (ir.DiagM, ir.Eye)):
            out.add(name)
    return out


def _linear_zero_children(e):
    # a product or a linear map of zero is zero; a quotient is zero only by its numerator
    if isinstance(e, ir.HDiv):
        return (e.a,)
    if isinstance(e, ir.Scale):
        return (e.a, e.b)
    return e.children()


def _take(have, want):
    """have less the multiset want, or None where want is not inside have."""
    left = list(have)
    for w in want:
        for i, h in enumerate(left):
            if h == w:
                del left[i]
                break
        else:
            return None
    return left


def def_names(defs, handles) -> Dict[ir.Expr, ir.Var]:
    """formula -> tile for the definitions worth naming: not a bare tile (V1 = V would
    rename every V), not a constant."""
    out = {}
    for name, e in defs:
        body = e.a if isinstance(e, ir.Tex) else e
        if isinstance(body, (ir.Var, ir.Eye, ir.Zeros, ir.Ones, ir.Const)):
            continue
        if name in handles and body not in out:
            out[body] = handles[name]
    return out
