"""The evidence levels of one claim: exact over GF(p) (dual numbers for adjoints) at
several size sets, then for a failure the smallest failing sizes and a sympy
residual, and a float64 error.  ``decide`` weighs them for a claim on its own; the
program it is read through is judged in programs.py, and check.py combines both."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim, Derivation, summed_parameter
from .adjoints import adjoint_value
from .evaluate import BlockEval, EvalError, UndefinedFormula, Point, Sizes, run_steps
from .fields import Dual, Float, ModP, ZeroDivision
from .residual import sympy_residual
from .sites import sites

# One exact point at each size set.  Index slips hide at powers of two and at one or
# two sub-chunks (a claim that reads sub-chunk bt-1 where bs is meant holds whenever
# bs can only be bt-1), and transpositions hide where Dk = Dv: the sets have chunk
# sizes 6 and 5, three sub-chunks of 2 (five of 1), three chunks, Dk < Dv and Dk > Dv.
# ``EXACT_SIZES`` is the first set (callers that sample one point use it).
EXACT_SIZES = Sizes(C=6, Dk=3, Dv=5, N=3, T=2)
EXACT_SIZE_SETS = (EXACT_SIZES, Sizes(C=5, Dk=4, Dv=2, N=3, T=1))
# float64 is evidence, not the verdict: three sub-chunks of 4 in a chunk of 12
FLOAT_SIZES = Sizes(C=12, Dk=24, Dv=40, N=3, T=4)
TRIALS = 1              # points per size set

_default_sets = EXACT_SIZE_SETS   # what check() uses when given no sizes (`--sizes`)


def use_sizes(sets):
    """Make ``sets`` (Sizes, several) the exact level's default for this process;
    forked workers inherit it.  None restores the built-in sets."""
    global _default_sets
    _default_sets = tuple(sets) if sets else EXACT_SIZE_SETS


def size_sets(sizes=None):
    if sizes is None:
        return _default_sets
    return (sizes,) if isinstance(sizes, Sizes) else tuple(sizes)


_SIZE_KEYS = {"C": "C", "Dk": "Dk", "Dv": "Dv", "chunks": "N", "N": "N", "T": "T"}


def parse_sizes(text: str):
    """``C=6,Dk=3,Dv=5,chunks=3,T=2;C=5,Dk=4,Dv=2,chunks=3``: size sets separated by
    ';', each key=value pairs separated by ','.  C, Dk and Dv are required; chunks
    defaults to 3 and T (sub-chunk size) to 1.  Raises ValueError saying what is wrong."""
    sets = []
    for part in [p.strip() for p in text.split(";")]:
        if not part:
            continue
        vals = {}
        for item in [i.strip() for i in part.split(",") if i.strip()]:
            key, eq, num = item.partition("=")
            key = key.strip()
            if not eq or key not in _SIZE_KEYS:
                raise ValueError(f"{item!r} in {part!r}: expected KEY=N with KEY one of C, Dk, Dv, chunks, T")
            if _SIZE_KEYS[key] in vals:
                raise ValueError(f"{key} given twice in {part!r}")
            try:
                n = int(num)
            except ValueError:
                raise ValueError(f"{item!r} in {part!r}: {num.strip()!r} is not an integer") from None
            if n < 1:
                raise ValueError(f"{item!r} in {part!r}: sizes are at least 1")
            vals[_SIZE_KEYS[key]] = n
        missing = [k for k in ("C", "Dk", "Dv") if k not in vals]
        if missing:
            raise ValueError(f"{part!r}: missing {', '.join(missing)}")
        vals.setdefault("N", 3)
        vals.setdefault("T", 1)
        if vals["N"] < 2:
            raise ValueError(f"{part!r}: chunks must be at least 2 (claims on chunk t+1 need a next chunk)")
        if vals["C"] % vals["T"]:
            raise ValueError(f"{part!r}: the sub-chunk size T={vals['T']} does not divide C={vals['C']}")
        sets.append(Sizes(**vals))
    if not sets:
        raise ValueError("no size set given")
    return tuple(sets)


@dataclass
class Mismatch:
    sizes: str
    seed: int
    block: int
    binding: dict
    entries: list          # [(row, col), ...] 0-based
    lhs: list = field(default_factory=list)
    rhs: list = field(default_factory=list)


@dataclass
class Result:
    claim: Claim
    verdict: str                       # holds | fails | ill-formed | error
    evidence: List[str] = field(default_factory=list)
    message: str = ""
    mismatch: Optional[Mismatch] = None
    smallest: str = ""
    residual: str = ""
    float_error: Optional[float] = None
    seconds: float = 0.0
    # the repair search (verify/repair.py), for a claim that does not hold
    suggestion: str = ""               # the suggested line, LaTeX
    suggestion_verified: bool = False  # decided to hold at every exact size set
    edit: str = ""                     # what the suggestion changed
    suggestion_residual: str = ""      # the line's residual in named tiles (LaTeX)
    suggestion_note: str = ""          # why there is none, or where the search stopped
    suggestion_seconds: float = 0.0


def _prog(deriv: Derivation, claim: Claim):
    if claim.program not in deriv.programs:
        raise EvalError(f"claim {claim.id}: unknown program {claim.program!r}")
    return deriv.programs[claim.program]


def shape_check(claim: Claim):
    sl = claim.lhs.shape()
    sr = claim.rhs.shape()
    if sl != sr:
        raise ir.ShapeError(f"the two sides have shapes {sl[0]}x{sl[1]} and {sr[0]}x{sr[1]}")


def _inner(f, a, b):
    """<a, b> as a 1 x 1 value of any field (dual numbers included)."""
    r, c = f.shape(a)
    return f.matmul(f.matmul(f.ones(1, r), f.had(a, b)), f.ones(c, 1))


def _loss_from(pt, f, start, S, outs):
    """The part of L after step ``start`` given the state there, plus the
    outputs ``outs`` (step -> column) of the block that was changed."""
    L, base = pt.sizes.L, pt.field
    lift = f.lift if isinstance(f, Dual) else (lambda v: v)
    states, more = run_steps(pt, f, S, start, L)
    total = _inner(f, lift(pt.dST), states[L])
    for t, o in list(outs.items()) + list(more.items()):
        total = f.add(total, _inner(f, lift(base.T(base.rows(pt.dO, t - 1, t))), o))
    return total


def loss_given(pt: Point, prog, b: int, target: ir.Adj, value, f):
    """L with ``target`` at block b replaced by ``value`` (only inside the
    definitions named by via/excl, if given), over field ``f``: with a dual
    number the tangent is the JVP.
    Inputs and states go through the recurrence; other names through the
    program cut at that definition.  Terms that do not depend on the target
    (outputs before block b) are left out."""
    states, _ = pt.trajectory()
    lift = f.lift if isinstance(f, Dual) else (lambda v: v)
    width = pt.sizes.C if prog.block == "chunk" else 1
    lo, hi = b * width, (b + 1) * width
    name = target.var.name
    seq_name = {i.step: i.seq for i in pt.rec.inputs}.get(name, name)
    restricted = bool(target.via or target.excl)
    if not restricted and seq_name in pt.seq and name not in prog.names():
        seq = {k: lift(v) for k, v in pt.seq.items()}
        rows = value if prog.block == "chunk" else f.T(value)
        whole = seq[seq_name]
        seq[seq_name] = f.vstack([f.rows(whole, 0, lo), rows, f.rows(whole, hi, pt.sizes.L)])
        st, outs = run_steps(pt, f, lift(states[lo]), lo, hi, seq=seq)
        return _loss_from(pt, f, hi, st[hi], outs)
    if not restricted and name == "S_prev":
        return _loss_from(pt, f, lo, value, {})
    if target.excl:
        consumers = set(prog.names()) - set(target.excl)
    elif target.via:
        consumers = set(target.via)
    else:
        consumers = None
    ev = BlockEval(pt, prog, b, f, overrides={name: (value, consumers)})
    S_out = ev.var_value(prog.state)
    O = ev.var_value(prog.output)
    if prog.block == "chunk":
        outs = {lo + i + 1: f.T(f.rows(O, i, i + 1)) for i in range(width)}
    else:
        outs = {lo + 1: O}
    return _loss_from(pt, f, hi, S_out, outs)


def jvp_loss(pt: Point, prog, b: int, target: ir.Adj, D):
    """d/d eps of L when ``target`` (at block b) is moved by eps * D, exactly."""
    f = pt.field
    primal = BlockEval(pt, prog, b, f).var_value(target.var.name)
    val = loss_given(pt, prog, b, target, (primal, D), Dual(f))
    return int(val[1][0, 0] % f.p)


def jvp_param(pt: Point, name: str, D):
    """d/d eps of L when parameter ``name`` moves by eps * D at every step at once,
    exactly: dual numbers through the whole recurrence (a parameter's gradient is
    the sum of every step's part, which no single block's JVP sees)."""
    f, d = pt.field, Dual(pt.field)
    params = {n: pt.param_value(n) for n in pt.param_decl}
    params[name] = (params[name], D)
    q = Point(pt.deriv, pt.rec.name, f, pt.sizes, pt.seq, pt.S0, pt.dO, pt.dST, params)
    L = pt.sizes.L
    states, outs = run_steps(q, d, d.lift(pt.S0), 0, L)
    total = _inner(d, d.lift(pt.dST), states[L])
    for t, o in outs.items():
        total = d.add(total, _inner(d, d.lift(f.T(f.rows(pt.dO, t - 1, t))), o))
    return int(total[1][0, 0] % f.p)


def _sample_point(deriv, claim, field, sizes, seed):
    rng = np.random.default_rng(seed)
    return Point.sample(deriv, claim.recurrence, field, sizes, rng,
                        zero_init="zero_initial_state" in claim.assume)


def exact_once(deriv: Derivation, claim: Claim, sizes: Sizes, seed: int) -> Optional[Mismatch]:
    """One random point over GF(p).  Returns the first mismatch, or None."""
    prog = _prog(deriv, claim)
    for attempt in range(8):
        # the field's own stream (random directions) must be independent of the point's
        f = ModP(np.random.default_rng([seed, attempt, 0xD1]))
        pt = _sample_point(deriv, claim, f, sizes, seed * 1000 + attempt)
        try:
            return _exact_at(pt, claim, prog, report_seed=seed)
        except ZeroDivision:
            continue
    raise UndefinedFormula("undefined at every sampled point: the formula divides by zero "
                          "identically (e.g. inverts a singular matrix)")


def _exact_at(pt, claim, prog, report_seed=None):
    f = pt.field
    for b, ev, env in sites(pt, claim, prog):
        rhs = ev.ev(claim.rhs, env)
        if claim.kind == "adjoint":
            r, c = f.shape(rhs)
            D = f.rand(r, c)
            want = jvp_param(pt, claim.lhs.var.name, D) if summed_parameter(claim.lhs) \
                else jvp_loss(pt, prog, b, claim.lhs, D)
            got = int((f.had(rhs, D)).sum() % f.p)
            if want != got:
                truth = adjoint_value(pt, prog, b, claim.lhs)
                return _mismatch(f, pt, report_seed, b, env, truth, rhs)
        else:
            lhs = ev.ev(claim.lhs, env)
            if not f.equal(lhs, rhs):
                return _mismatch(f, pt, report_seed, b, env, lhs, rhs)
    return None


def _mismatch(f, pt, seed, b, env, lhs, rhs):
    pos = [tuple(int(x) for x in p) for p in f.differ(lhs, rhs)]
    lf, rf = f.to_float(lhs), f.to_float(rhs)
    return Mismatch(str(pt.sizes), seed, b, dict(env), pos[:8],
                    [lf[p] for p in pos[:4]], [rf[p] for p in pos[:4]])


def _uses_subchunks(claim):
    return any(isinstance(n, ir.SubBlock) for e in (claim.lhs, claim.rhs) for n in ir.walk(e))


def _candidate_sizes(claim):
    sub = _uses_subchunks(claim)
    # sub-chunk claims need at least two sub-chunks of size 2 to exercise i > j
    for C in ((4,) if sub else (1, 2, 3, 4)):
        for dk, dv in ((1, 1), (2, 1), (1, 2), (2, 2)):
            yield Sizes(C=C, Dk=dk, Dv=dv, N=2, T=2 if sub else 1)
    # some slips only show from the second chunk on, or need a third chunk
    for C in ((4,) if sub else (1, 2, 3, 4)):
        yield Sizes(C=C, Dk=2, Dv=2, N=3, T=2 if sub else 1)
    # index slips that hold at powers of two or with two sub-chunks (the exact level's
    # sizes find them): a third sub-chunk, chunk sizes 5 and 6
    for C in ((6,) if sub else (5, 6)):
        for dk, dv in ((1, 1), (2, 1), (1, 2), (2, 2)):
            yield Sizes(C=C, Dk=dk, Dv=dv, N=3, T=2 if sub else 1)


def smallest_failure(deriv, claim):
    for s in _candidate_sizes(claim):
        try:
            m = exact_once(deriv, claim, s, 11)
        except (EvalError, ZeroDivision):
            continue
        if m is not None:
            return s, m
    return None, None


def float_error(deriv, claim, sizes=FLOAT_SIZES, seed=5):
    """Relative error ||lhs - rhs|| / max(||lhs||, ||rhs||) in float64 at realistic
    sizes (adjoint truths by reverse mode through the recurrence, which
    tests/test_adjoint_truth.py holds to torch autograd)."""
    prog = _prog(deriv, claim)
    pt = _sample_point(deriv, claim, Float(), sizes, seed)
    worst = 0.0
    for b, ev, env in sites(pt, claim, prog):
        rhs = ev.ev(claim.rhs, env)
        lhs = adjoint_value(pt, prog, b, claim.lhs) if claim.kind == "adjoint" \
            else ev.ev(claim.lhs, env)
        den = max(float(np.linalg.norm(lhs)), float(np.linalg.norm(rhs)))
        # where both sides vanish (a "= 0" claim) a relative error means nothing:
        # the absolute error, itself rounding-sized, is reported instead
        err = float(np.linalg.norm(lhs - rhs))
        worst = max(worst, err / den if den > 1e-8 else err)
    return worst


def _exact_level(deriv, claim, sets, trials, seed):
    """One point per size set (``trials`` each); returns (first mismatch or None,
    evidence).  Point i uses seed + i + 1."""
    tried = []
    k = 0
    for sizes in sets:
        for _ in range(trials):
            k += 1
            mism = exact_once(deriv, claim, sizes, seed + k)
            if mism is not None:
                done = "; ".join(tried + [f"fails at {sizes}"])
                return mism, f"exact GF(2^31-1), {k} point(s): {done}"
        tried.append(f"{trials} at {sizes}")
    return None, f"exact GF(2^31-1), {k} point(s): " + "; ".join(tried)


def decide(deriv: Derivation, claim: Claim, sets, trials=TRIALS,
           diagnose=True, floats=True, seed=0) -> Result:
    """The verdict of one claim from its own evidence at the exact size sets ``sets``
    (``trials`` points at each, with seeds seed+1, seed+2, ...; a reported seed
    reproduces the point with ``--seed`` (seed - 1))."""
    t0 = time.perf_counter()
    res = Result(claim, "holds")
    try:
        shape_check(claim)
    except ir.ShapeError as e:
        res.verdict, res.message = "ill-formed", str(e)
        res.evidence.append("shape check")
        res.seconds = time.perf_counter() - t0
        return res
    try:
        mism, said = _exact_level(deriv, claim, sets, trials, seed)
        res.evidence.append(said)
        if mism is not None:
            res.verdict, res.mismatch = "fails", mism
            if diagnose:
                small, m2 = smallest_failure(deriv, claim)
                if small is not None:
                    res.smallest = str(small)
                    res.mismatch = m2
                    res.residual = sympy_residual(deriv, claim, small)
                    if res.residual:
                        res.evidence.append(f"sympy residual at {small}")
        if floats:
            try:
                res.float_error = float_error(deriv, claim)
                res.evidence.append(f"float64 at {FLOAT_SIZES}: rel. error {res.float_error:.1e}")
            except (EvalError, ZeroDivision, ir.ShapeError) as e:
                # the exact verdict stands; say why the float level has no number
                res.evidence.append(f"float64 at {FLOAT_SIZES}: not evaluated ({e})")
    except (ir.ShapeError, UndefinedFormula) as e:
        res.verdict, res.message = "ill-formed", str(e)
    except (EvalError, ZeroDivision) as e:
        res.verdict, res.message = "error", str(e)
    res.seconds = time.perf_counter() - t0
    return res
