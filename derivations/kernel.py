"""What a derivation declares to become a kernel (`chunkproof gen FILE.py`): the public
function's name, the chunk program and the two forward claims it is printed from, and
how each of FLA's arguments binds to a tile of that program.

    from chunkproof.derivations.kernel import kernel, log_of
    kernel(D, "chunk_gla", P, outputs="gla.O", state="gla.S_C",
           args=dict(q="Q", k="K", v="V", g=log_of("Alpha")))

An argument binds to one of the recurrence's inputs, by its tile name or tile.

A tile's shape gives the argument's layout: C x Dk is [B, T, H, K], C x Dv is
[B, T, H, V], C x 1 is [B, T, H].  ``log_of(tile)``: the argument holds the tile's
log (FLA's log-space gates), and its gradient is the log gate's, delta tile . tile.
The backward is printed from the adjoint claims named in ``backward`` (keys dS, dS_prev,
grads, inner: docs/gen.md), or, where ``backward`` is left out, from the derivation's
own adjoint claims of that program, picked by what each one's left-hand side is.
The recurrence's parameters (ir.Param) are bound by ``params``: ``per_head_log(code)`` (a
fixed per-head gate by its log, RetNet's gamma), ``const(value)`` (tau = 1 where FLA's
scale multiplies q), ``head_arg(grad=claim)`` (an [H, K] argument after the tiles' ones,
RWKV-6's u, whose gradient the claim gives per chunk and the wrapper sums).
Everything is checked again when the kernel is printed; this module only records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from . import ir
from .dsl import DeclarationError, Derivation, Program

LAYOUT = {("C", "Dk"): "k", ("C", "Dv"): "v", ("C", "1"): "head"}
LOG_LAYOUT = {("C", "Dk"): "gate_k", ("C", "1"): "gate_h"}
BACKWARD_KEYS = ("dS", "dS_prev", "grads", "inner")
PARAM_KINDS = ("head_log", "const", "head_arg")


@dataclass(frozen=True)
class ParamBinding:
    """How a kernel gets a parameter of the recurrence (``ir.Param``), with no gradient:
    ``head_log``: a per-head scalar gate given by its log, ``code`` a torch expression in
    ``h`` (float64 head indices, shape [H]) that the wrapper and the oracle evaluate (FLA's
    retention: log(1 - 2^(-5-h))); ``const``: the number ``value`` (tau = 1 where FLA's
    ``scale`` already multiplies q, which is the same function: the outputs are linear in q);
    ``head_arg``: a tensor argument of the public function after the tiles' ones, one value
    per head (a Dk x 1 parameter is [H, K], as FLA's u), whose gradient is printed from
    claim ``grad``: chunk t's part of the parameter's adjoint, which the wrapper sums over
    chunks and batch."""
    name: str
    kind: str
    code: str = ""
    value: float = 1.0
    grad: str = ""


def per_head_log(code: str) -> ParamBinding:
    return ParamBinding("", "head_log", code=code)


def const(value: float) -> ParamBinding:
    return ParamBinding("", "const", value=float(value))


def head_arg(grad: str) -> ParamBinding:
    return ParamBinding("", "head_arg", grad=grad)


@dataclass(frozen=True)
class LogOf:
    """An argument that holds the log of a tile (a log-space gate)."""
    tile: ir.Var


def log_of(tile) -> LogOf:
    if not isinstance(tile, (ir.Var, str)):
        raise DeclarationError(f"log_of() takes a tile (a Var or an input's name), got {type(tile).__name__}")
    return LogOf(tile)


@dataclass(frozen=True)
class KernelArg:
    name: str          # FLA's argument name
    tile: str          # the program's input tile it binds to
    kind: str          # 'k', 'v', 'head', 'gate_k', 'gate_h' (codegen/variants.Arg)


@dataclass(frozen=True)
class Kernel:
    func: str                          # the public function, FLA's name (chunk_<module>)
    program: str
    outputs: str                       # claim id: O_[t]
    state: str                         # claim id: S_[t]^C
    args: Tuple[KernelArg, ...]
    backward: Optional[Dict[str, object]] = None   # None: picked from the adjoint claims
    module: str = ""                   # generated_kernels/<module>.py
    doc: str = ""                      # the recurrence in FLA's terms, for docstrings
    derivation: str = field(default="", compare=False)
    params: Tuple[ParamBinding, ...] = ()   # the recurrence's parameters, bound (no gradient)


def _module_of(func: str) -> str:
    if not func.startswith("chunk_") or not func[6:].isidentifier():
        raise DeclarationError(f"kernel {func!r}: the public function is named chunk_<name>, as FLA's "
                               f"(chunk_gla, chunk_delta_rule), with <name> a Python identifier")
    return func[6:]


def _input_tile(deriv: Derivation, prog: Program, name: str) -> ir.Var:
    rec = deriv.recurrences.get(deriv.program_recurrence.get(prog.name, ""))
    for i in (rec.inputs if rec else ()):
        if i.seq == name:
            return ir.Var(name, "C", i.dim)
    known = ", ".join(i.seq for i in rec.inputs) if rec else "none"
    raise DeclarationError(f"kernel argument binds to {name!r}, which is not an input of program "
                           f"{prog.name}'s recurrence (its inputs: {known})")


def _arg(deriv: Derivation, name: str, bound, prog: Program) -> KernelArg:
    if not name.isidentifier():
        raise DeclarationError(f"kernel argument {name!r} is not a Python identifier")
    log = isinstance(bound, LogOf)
    tile = bound.tile if log else bound
    if isinstance(tile, str):
        tile = _input_tile(deriv, prog, tile)
    if not isinstance(tile, ir.Var):
        raise DeclarationError(f"kernel argument {name}: binds to a tile (a Var or an input's name, "
                               f"or log_of(either)), got {type(tile).__name__}")
    if tile.name in prog.names():
        raise DeclarationError(f"kernel argument {name}: {tile.name} is defined by program {prog.name}; "
                               f"an argument binds to an input tile of the chunk")
    table = LOG_LAYOUT if log else LAYOUT
    kind = table.get(tile.shape())
    if kind is None:
        rows, cols = tile.shape()
        allowed = ", ".join(f"{r} x {c}" for r, c in table)
        raise DeclarationError(f"kernel argument {name}: tile {tile.name} is {rows} x {cols}; "
                               f"{'a log gate' if log else 'an argument'} binds to a {allowed} tile")
    return KernelArg(name, tile.name, kind)


def kernel(deriv: Derivation, func: str, program, outputs: str, state: str,
           args: Dict[str, object], backward: Optional[Dict[str, object]] = None,
           doc: str = "", params: Optional[Dict[str, ParamBinding]] = None) -> Kernel:
    """Declare ``func`` (FLA's name) as printed from ``program``; see the module's doc."""
    if isinstance(program, str):
        program = deriv.programs.get(program, program)
    if not isinstance(program, Program) or deriv.programs.get(program.name) is not program:
        raise DeclarationError(f"kernel {func}: program {getattr(program, 'name', program)!r} is not one "
                               f"added to derivation {deriv.name} (D.add_program(P)) before the kernel")
    if not args:
        raise DeclarationError(f"kernel {func}: no arguments")
    bound = tuple(_arg(deriv, n, b, program) for n, b in args.items())
    if backward is not None:
        unknown = sorted(set(backward) - set(BACKWARD_KEYS))
        if unknown:
            raise DeclarationError(f"kernel {func}: backward has unknown key(s) {', '.join(unknown)} "
                                   f"(the keys: {', '.join(BACKWARD_KEYS)})")
    pbound = []
    for pn, pb in (params or {}).items():
        if not isinstance(pb, ParamBinding) or pb.kind not in PARAM_KINDS:
            raise DeclarationError(f"kernel {func}: parameter {pn} binds to per_head_log(...) or const(...), "
                                   f"got {pb!r}")
        if not pn.isidentifier() or pn in args:
            raise DeclarationError(f"kernel {func}: parameter {pn!r} is not an identifier or clashes with an argument")
        pbound.append(ParamBinding(pn, pb.kind, pb.code, pb.value, pb.grad))
    k = Kernel(func, program.name, outputs, state, bound, dict(backward) if backward else None,
               _module_of(func), doc or deriv.title, deriv.name, tuple(pbound))
    if any(o.module == k.module for o in deriv.kernels):
        raise DeclarationError(f"derivation {deriv.name} declares kernel {func} twice")
    deriv.kernels.append(k)
    return k
