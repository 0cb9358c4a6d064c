"""The Python DSL a derivation is written in: inputs, programs, claims.

A derivation file builds a :class:`Derivation` named ``DERIVATION`` (or a list
``DERIVATIONS``).  See README.md for a walk-through and derivations/gla.py etc.
for the bundled notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import ir
from .ir import Var


@dataclass(frozen=True)
class Citation:
    note: str          # note file name, e.g. "003_c008d497ea0f70e6.txt"
    section: str       # section heading as written in the note
    line: int          # 1-based line of the note file holding the display
    row: int = 0       # 1-based row of an aligned display (0: whole line)
    what: str = ""     # short description of the line, e.g. "delta V, combined"

    def __str__(self):
        s = f"{self.note} §{self.section}"
        if self.line:
            s += f", line {self.line}"
        return s + (f", row {self.row}" if self.row else "")


@dataclass(frozen=True)
class Input:
    """A per-step input of the recurrence.  ``seq`` is the tile name (Q), ``step``
    the per-step vector name (q), ``dim`` its length; ``kind`` picks sampling:
    'any', 'gate' (nonzero, decays in (0.8, 1) for floats), 'beta' (in (0, 1)),
    'loggate' (the log of a gate, g = log alpha: read it inside exp(...); over GF(p)
    it is held as the atom alpha, since the field has no logarithm)."""
    seq: str
    step: str
    dim: str
    kind: str = "any"
    tex: str = ""
    step_tex: str = ""


@dataclass
class Program:
    """Named definitions evaluated per block.  ``block`` is 'chunk' (C steps,
    inputs are C x d tiles) or 'step' (one step, inputs are d x 1 vectors).
    The definition named ``state`` is the state after the block, ``output``
    the block's outputs; ``S_prev`` is the state before the block and ``dO``
    the loss seed for the outputs."""
    name: str
    block: str
    defs: List[Tuple[str, ir.Expr]] = field(default_factory=list)
    state: str = "S"
    output: str = "O"
    description: str = ""

    def define(self, name: str, expr: ir.Expr, tex: str = "", arrow: str = "", base: str = "") -> Var:
        """Append the definition ``name = expr`` and return its handle, a Var whose
        shape is the formula's: the shape is declared once.  A formula that is
        ill-formed raises here, naming the definition."""
        try:
            rows, cols = expr.shape()
        except ir.ShapeError as e:
            raise ir.ShapeError(f"program {self.name}, definition {name}: ill-formed: {e}") from None
        self.defs.append((name, expr))
        return Var(name, rows, cols, tex or name, arrow, base)

    def names(self):
        return [n for n, _ in self.defs]

    def expr(self, name):
        for n, e in self.defs:
            if n == name:
                return e
        return None


@dataclass
class Claim:
    id: str
    citation: Citation
    latex: str                      # the note's LaTeX for this line, verbatim
    kind: str                       # 'forward' | 'adjoint' | 'identity'
    lhs: ir.Expr                    # adjoint: an ir.Adj target
    rhs: ir.Expr
    program: str                    # the program giving the context
    over: Tuple[Tuple[str, str, str], ...] = ()   # (var, lo, hi) index quantifiers
    blocks: str = "all"             # 'all' | 'not_last' | 'first'
    assume: Tuple[str, ...] = ()    # e.g. ('zero_initial_state',)
    corrected_of: Optional[str] = None
    why: str = ""                   # for corrections: what the note got wrong
    derivation: str = ""            # filled in by Derivation.add
    recurrence: str = ""            # ground-truth recurrence name (default: derivation's)

    @property
    def note(self):
        return self.citation.note


@dataclass
class Recurrence:
    """Ground truth: S_t = S_{t-1} A_t + B_t, o_t = S_t q_t, given as a step program
    (defs 'S' and 'O' at least), over the listed inputs."""
    name: str
    inputs: List[Input]
    program: Program
    tex: str = ""
    params: List[ir.Param] = field(default_factory=list)

    def parameters(self) -> Dict[str, ir.Param]:
        """The declared parameters and every one the step program reads."""
        out = {p.name: p for p in self.params}
        out.update(_params_in(e for _, e in self.program.defs))
        return out


class DeclarationError(ValueError):
    """One name declared two ways: a tile handle with a shape other than its
    definition's, a parameter with two shapes or kinds."""


def _params_in(exprs) -> Dict[str, ir.Param]:
    out: Dict[str, ir.Param] = {}
    for e in exprs:
        for n in ir.walk(e):
            if isinstance(n, ir.Param):
                if n.name in out and out[n.name] != n:
                    raise DeclarationError(f"parameter {n.name!r} is declared twice, differently: "
                                     f"{n.rows}x{n.cols} {n.kind!r} and {out[n.name].rows}x"
                                     f"{out[n.name].cols} {out[n.name].kind!r}")
                out[n.name] = n
    return out


def handle_mismatches(prog: Program, exprs, where) -> None:
    """A handle (a Var named after a definition of ``prog``) whose declared shape
    differs from its definition's formula is an input error, not a silent guess.
    ``where`` is a string, or a callable naming the place of each expression (a
    handle can be read by a definition appended after the program was added, so the
    check runs again before any claim is checked)."""
    defs = dict(prog.defs)
    shapes: Dict[str, Optional[Tuple[str, str]]] = {}
    for k, e in enumerate(exprs):
        for n in ir.walk(e):
            if type(n) is not Var or n.name not in defs:
                continue
            if n.name not in shapes:
                try:
                    shapes[n.name] = defs[n.name].shape()
                except ir.ShapeError:  # reported as the definition's own error by validation
                    shapes[n.name] = None
            s = shapes[n.name]
            if s is not None and s != (n.rows, n.cols):
                place = where(k) if callable(where) else where
                raise DeclarationError(f"{place}: tile {n.name!r} is declared {n.rows}x{n.cols}, but "
                                       f"definition {n.name!r} of program {prog.name} is {s[0]}x{s[1]}; "
                                       f"declare it once: {n.name} = {prog.name}.define({n.name!r}, ...) "
                                       f"returns the handle with the definition's shape")


def _def_place(prog: Program):
    return lambda k: f"program {prog.name}, definition {prog.defs[k][0]}"


@dataclass
class Derivation:
    name: str
    title: str
    note: str
    recurrences: Dict[str, Recurrence] = field(default_factory=dict)
    default_recurrence: str = ""
    programs: Dict[str, Program] = field(default_factory=dict)
    program_recurrence: Dict[str, str] = field(default_factory=dict)
    claims: List[Claim] = field(default_factory=list)
    kernels: list = field(default_factory=list)       # derivations/kernel.py's declarations
    source: str = ""
    _params: Optional[tuple] = field(default=None, repr=False, compare=False)

    def parameters(self) -> Dict[str, ir.Param]:
        """Every parameter the recurrences, programs or claims read (cached: the
        evaluator asks for each sampled point)."""
        key = (len(self.recurrences), len(self.programs), len(self.claims))
        if self._params is None or self._params[0] != key:
            out: Dict[str, ir.Param] = {}
            for r in self.recurrences.values():
                out.update(r.parameters())
            exprs = [e for p in self.programs.values() for _, e in p.defs]
            exprs += [e for c in self.claims for e in (c.lhs, c.rhs)]
            out.update(_params_in(exprs))
            self._params = (key, out)
        return self._params[1]

    def add_recurrence(self, rec: Recurrence, default=False):
        handle_mismatches(rec.program, [e for _, e in rec.program.defs], _def_place(rec.program))
        self.recurrences[rec.name] = rec
        self.programs[rec.program.name] = rec.program
        self.program_recurrence[rec.program.name] = rec.name
        if default or not self.default_recurrence:
            self.default_recurrence = rec.name
        return rec

    def add_program(self, prog: Program, recurrence: str = ""):
        handle_mismatches(prog, [e for _, e in prog.defs], _def_place(prog))
        self.programs[prog.name] = prog
        self.program_recurrence[prog.name] = recurrence or self.default_recurrence
        return prog

    def add(self, claim: Claim):
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"duplicate claim id {claim.id!r} in derivation {self.name}")
        claim.derivation = self.name
        if claim.program in self.programs:
            handle_mismatches(self.programs[claim.program], (claim.lhs, claim.rhs),
                              f"claim {claim.id} ({claim.citation})")
        if claim.kind == "adjoint" and summed_parameter(claim.lhs):
            # a parameter's gradient is one value for the whole sequence: the checker
            # moves the parameter at every step at once (verify/levels.py, jvp_param)
            if not claim.citation.what:
                c = claim.citation
                claim.citation = Citation(c.note, c.section, c.line, c.row,
                                          f"gradient of {claim.lhs.var.name}, summed over every step")
        if not claim.recurrence:
            claim.recurrence = self.program_recurrence.get(claim.program, self.default_recurrence)
        self.claims.append(claim)
        return claim


def summed_parameter(lhs) -> bool:
    """Whether ``lhs`` is a parameter's whole gradient (summed over every step that
    reads it), rather than its part through some definitions (via=, excl=)."""
    return isinstance(lhs, ir.Adj) and isinstance(lhs.var, ir.Param) and not (lhs.via or lhs.excl)


# ------------------------------------------------------------------ helpers
def tile(name, rows, cols, tex="", arrow="", base=""):
    return Var(name, rows, cols, tex or name, arrow, base)


def param(name, rows="1", cols="1", tex="", kind="any"):
    """A tile constant over time, e.g. ``gamma = param("gamma", kind="gate")``."""
    return ir.Param(name, rows, cols, tex or name, kind=kind)


S_PREV = Var("S_prev", "Dv", "Dk", r"\mathbf{S}_{[t-1]}^{C}")
DO = Var("dO", "C", "Dv", r"\delta \mathbf{O}_{[t]}")
DO_STEP = Var("dO", "Dv", "1", r"\delta \boldsymbol{o}_t")


def adj(var: Var, via: Sequence[str] = (), excl: Sequence[str] = (), tex=""):
    return ir.Adj(var, tuple(via), tuple(excl), tex)


def diag(v):
    return ir.DiagM(v)


def tril(x, kind="M"):
    return ir.Mask(x, kind)


def inv(x):
    return ir.Inv(x)


def eye(n):
    return ir.Eye(n)


def row(x, idx, glob=False):
    return ir.Row(x, idx, glob)


def summ(var, lo, hi, body):
    return ir.Sum(var, lo, hi, body)


def prod(var, lo, hi, body):
    return ir.Prod(var, lo, hi, body)


def scal(s, x):
    return ir.Scale(s, x)


def shift(x, k=1):
    return ir.Shift(x, k)


def sum_blocks(x):
    """sum over every chunk t of x_[t] (or every step, in a step program)."""
    return ir.SumBlocks(x)


def stack(var, body, n="C"):
    return ir.Stack(var, body, n)


def exp(x):
    return ir.Exp(x)


def log(x):
    return ir.Log(x)


def cumsum(x):
    return ir.CumSum(x)


def revcumsum(x):
    return ir.RevCumSum(x)


def cumprod(x):
    return ir.CumProd(x)


def last_row(x):
    return ir.LastRow(x)


def ones(rows, cols):
    return ir.Ones(rows, cols)


_CLAIM_ARGS = ("latex", "lhs", "rhs", "program")


def _claim_args(args, kw) -> dict:
    """(line, latex, lhs, rhs, program) with the line optional: a file with no note
    has no line to cite, so ``nb.forward(id, latex, lhs, rhs, program)`` is accepted
    next to ``nb.forward(id, line, latex, ...)``."""
    args = list(args)
    if "line" not in kw:
        first = args[0] if args else 0
        kw["line"] = args.pop(0) if (first is None or (isinstance(first, int) and not isinstance(first, bool))) else 0
    kw["line"] = kw["line"] or 0
    if len(args) > len(_CLAIM_ARGS):
        raise TypeError(f"too many positional arguments: {len(args)}")
    for name, a in zip(_CLAIM_ARGS, args):
        if name in kw:
            raise TypeError(f"{name} given twice")
        kw[name] = a
    return kw


class Notebook:
    """Collects the claims of one note section by section:

        nb = Notebook(D, "003_c008d497ea0f70e6.txt")
        nb.section("5.2 分块递推模式（Chunkwise Recurrent Mode）")
        nb.forward("gla.O_matrix", line=57, row=1, latex=r"...", lhs=..., rhs=..., program="gla_chunk")
    """

    def __init__(self, deriv: Derivation, note: str):
        self.d, self.note, self.sec = deriv, note, ""

    def section(self, heading: str):
        self.sec = heading
        return self

    def _add(self, kind, id, line, latex, lhs, rhs, program, row=0, what="", **kw):
        cite = Citation(self.note, self.sec, line, row, what)
        return self.d.add(Claim(id=id, citation=cite, latex=latex, kind=kind, lhs=lhs, rhs=rhs,
                                program=program, **kw))

    # (id, [line,] latex, lhs, rhs, program, row=, over=, blocks=, assume=, what=)
    def forward(self, id, *args, **kw):
        return self._add("forward", id, **_claim_args(args, kw))

    def adjoint(self, id, *args, **kw):
        return self._add("adjoint", id, **_claim_args(args, kw))

    def identity(self, id, *args, **kw):
        return self._add("identity", id, **_claim_args(args, kw))

    def corrected(self, of: str, why: str, rhs, lhs=None, latex="", id=None, what="", **kw):
        """A corrected claim next to the literal claim ``of`` (same citation/kind)."""
        orig = next(c for c in self.d.claims if c.id == of)
        cite = orig.citation
        if what:
            cite = Citation(cite.note, cite.section, cite.line, cite.row, what)
        return self.d.add(Claim(id=id or of + ".corrected", citation=cite,
                                latex=latex or orig.latex, kind=orig.kind,
                                lhs=orig.lhs if lhs is None else lhs, rhs=rhs,
                                program=kw.pop("program", orig.program),
                                over=kw.pop("over", orig.over), blocks=kw.pop("blocks", orig.blocks),
                                assume=kw.pop("assume", orig.assume), corrected_of=of, why=why, **kw))
