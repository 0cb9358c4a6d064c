"""The Python DSL a derivation is written in: inputs, programs, claims.

A derivation file builds a :class:`Derivation` named ``DERIVATION`` (or a list
``DERIVATIONS``).  See README.md for a walk-through and derivations/gla.py etc.
for the bundled notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

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
    'any', 'gate' (nonzero, decays in (0.8, 1) for floats), 'beta' (in (0, 1))."""
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
    defs: List[Tuple[str, ir.Expr]]
    state: str = "S"
    output: str = "O"
    description: str = ""

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
    source: str = ""

    def add_recurrence(self, rec: Recurrence, default=False):
        self.recurrences[rec.name] = rec
        self.programs[rec.program.name] = rec.program
        self.program_recurrence[rec.program.name] = rec.name
        if default or not self.default_recurrence:
            self.default_recurrence = rec.name
        return rec

    def add_program(self, prog: Program, recurrence: str = ""):
        self.programs[prog.name] = prog
        self.program_recurrence[prog.name] = recurrence or self.default_recurrence
        return prog

    def add(self, claim: Claim):
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"duplicate claim id {claim.id!r} in derivation {self.name}")
        claim.derivation = self.name
        if not claim.recurrence:
            claim.recurrence = self.program_recurrence.get(claim.program, self.default_recurrence)
        self.claims.append(claim)
        return claim


# ------------------------------------------------------------------ helpers
def tile(name, rows, cols, tex="", arrow="", base=""):
    return Var(name, rows, cols, tex or name, arrow, base)


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

    def forward(self, id, line, latex, lhs, rhs, program, **kw):
        return self._add("forward", id, line, latex, lhs, rhs, program, **kw)

    def adjoint(self, id, line, latex, lhs, rhs, program, **kw):
        return self._add("adjoint", id, line, latex, lhs, rhs, program, **kw)

    def identity(self, id, line, latex, lhs, rhs, program, **kw):
        return self._add("identity", id, line, latex, lhs, rhs, program, **kw)

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
