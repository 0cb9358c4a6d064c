"""Whether a set of derivations is well formed enough for its claims to mean anything:
what is wrong with a derivation's structure (not with one claim's formula) is an
InputError naming the file and the definition or claim."""
from __future__ import annotations

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import DeclarationError, handle_mismatches
from chunkproof.derivations.loader import InputError

_BLOCKS = ("all", "not_last", "first", "not_first")


def validate(derivs):
    """Programs and recurrences must be well formed before claims mean anything.
    What is wrong with the derivation's structure (not with one claim's formula) is
    an InputError naming the file and the definition or claim."""
    for d in derivs:
        if not d.recurrences:
            raise InputError(f"{d.source}: derivation {d.name} has no recurrence to check against "
                             f"(D.add_recurrence(...))")
        try:
            d.parameters()
        except DeclarationError as e:
            raise InputError(f"{d.source}: {e}") from None
        for p in d.programs.values():
            if p.block not in ("chunk", "step"):
                raise InputError(f"{d.source}: program {p.name}: block {p.block!r} is neither "
                                 f"'chunk' nor 'step'")
            rec = d.recurrences.get(d.program_recurrence.get(p.name, ""))
            reserved = {"S_prev", "dO"}
            if rec is not None:
                reserved |= {i.seq for i in rec.inputs} | {i.step for i in rec.inputs}
            for name, e in p.defs:
                if name in reserved:
                    raise InputError(f"{d.source}: program {p.name}: definition {name!r} has the name "
                                     f"of an input; give the derived tile its own name")
                try:
                    e.shape()
                except ir.ShapeError as err:
                    raise InputError(f"{d.source}: program {p.name}, definition {name}: "
                                     f"ill-formed: {err}") from None
            for need in (p.state, p.output):
                if p.expr(need) is None:
                    raise InputError(f"{d.source}: program {p.name} defines no {need!r}")
            # the program check compares O and S with the recurrence's: their shapes are
            # fixed, and a different one would reach the evaluator as a raw array clash
            width = "C" if p.block == "chunk" else "1"
            for need, want in ((p.output, (width, "Dv") if width == "C" else ("Dv", "1")),
                               (p.state, ("Dv", "Dk"))):
                got = p.expr(need).shape()
                if got != want:
                    raise InputError(f"{d.source}: program {p.name}, definition {need}: is "
                                     f"{got[0]}x{got[1]}, but a {p.block} program's {need} is "
                                     f"{want[0]}x{want[1]}")
            _no_cycle(d, p)
            for name, e in p.defs:
                _leaf_shapes(d, p, rec, e, f"program {p.name}, definition {name}")
            # again here: definitions appended after add_program were never compared
            _declarations(d, p, [e for _, e in p.defs],
                          lambda k, p=p: f"program {p.name}, definition {p.defs[k][0]}")
        for c in d.claims:
            where = f"{d.source}: claim {c.id} ({c.citation})"
            if c.program not in d.programs:
                raise InputError(f"{where}: unknown program {c.program!r} "
                                 f"(programs: {', '.join(d.programs) or 'none'})")
            if c.recurrence not in d.recurrences:
                raise InputError(f"{where}: unknown recurrence {c.recurrence!r} "
                                 f"(recurrences: {', '.join(d.recurrences) or 'none'})")
            over = c.over if isinstance(c.over, (list, tuple)) else None
            if over is None or not all(isinstance(q, (list, tuple)) and len(q) == 3
                                       and all(isinstance(x, str) for x in q) for q in over):
                raise InputError(f"{where}: over={c.over!r}: expected ((var, lo, hi), ...), "
                                 f"three strings each, e.g. over=((\"r\", \"1\", \"C\"),)")
            if c.blocks not in _BLOCKS:
                raise InputError(f"{where}: blocks={c.blocks!r} is not one of {', '.join(_BLOCKS)}")
            _declarations(d, d.programs[c.program], (c.lhs, c.rhs), f"claim {c.id} ({c.citation})")
            for e in (c.lhs, c.rhs):
                _leaf_shapes(d, d.programs[c.program], d.recurrences[c.recurrence], e,
                             f"claim {c.id} ({c.citation})")


def _leaf_shapes(d, prog, rec, e, where):
    """A tile named after a leaf of the block (S_prev, dO, an input) is read as that
    leaf, whatever shape it was declared with: a different declared shape would pass
    the shape check and clash when evaluated."""
    chunk = prog.block == "chunk"
    leaves = {"S_prev": {("Dv", "Dk")}, "dO": {("C", "Dv")} if chunk else {("Dv", "1")}}
    for i in (rec.inputs if rec is not None else ()):
        leaves.setdefault(i.seq, set()).update({("C", i.dim), ("L", i.dim)} if chunk else {("L", i.dim)})
        leaves.setdefault(i.step, set()).add((i.dim, "1"))
    defs = set(prog.names())
    for n in ir.walk(e):
        if type(n) is not ir.Var or n.name in defs or n.name not in leaves:
            continue
        if (n.rows, n.cols) not in leaves[n.name]:
            want = " or ".join(f"{r}x{c}" for r, c in sorted(leaves[n.name]))
            raise InputError(f"{d.source}: {where}: tile {n.name!r} is declared {n.rows}x{n.cols}, "
                             f"but {n.name} is {want} in a {prog.block} program")


def _no_cycle(d, prog):
    """Definitions are evaluated on demand by name: one that reads itself, directly
    or through others, would recurse without end."""
    defs = dict(prog.defs)
    reads = {}
    for name, e in prog.defs:
        bound = {n.name for n in ir.walk(e) if isinstance(n, ir.RowRec)}
        reads[name] = {n.name for n in ir.walk(e) if type(n) is ir.Var and n.name in defs} - bound
    state = {}   # name -> 1 on the current path, 2 done

    def visit(name, path):
        state[name] = 1
        for m in sorted(reads[name]):
            if state.get(m) == 1:
                loop = path[path.index(m):] + [m]
                raise InputError(f"{d.source}: program {prog.name}, definition {loop[0]}: reads "
                                 f"itself ({' -> '.join(loop)})")
            if m not in state:
                visit(m, path + [m])
        state[name] = 2

    for name in defs:
        if name not in state:
            visit(name, [name])


def _splits_chunks(c, prog):
    exprs = [c.lhs, c.rhs] + ([e for _, e in prog.defs] if prog is not None else [])
    return any(isinstance(n, ir.SubBlock) for e in exprs for n in ir.walk(e))


def validate_sizes(derivs, sets, pattern=""):
    """Sizes too small for what a claim speaks of make it hold vacuously (a claim
    over sub-chunk pairs bs < bt has no pair in a chunk of one sub-chunk): refused.
    The parser already refuses fewer than two chunks."""
    for d in derivs:
        for c in d.claims:
            if pattern not in c.id or not _splits_chunks(c, d.programs.get(c.program)):
                continue
            for s in sets:
                if s.C // s.T < 2:
                    raise InputError(f"--sizes {s}: one sub-chunk per chunk (C/T = {s.C // s.T}), but "
                                     f"{d.source}: claim {c.id} ({c.citation}) splits chunks into "
                                     f"sub-chunks; use T <= C/2")


def _declarations(d, prog, exprs, where):
    try:
        handle_mismatches(prog, exprs, where)
    except DeclarationError as e:
        raise InputError(f"{d.source}: {e}") from None
