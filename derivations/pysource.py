"""Print IR as Python source of the DSL: the expression that, run, builds the same
node (equal by structure, LaTeX labels included).

`chunkproof derive --emit-claims` writes derived claims with it.  Sums, differences,
products, quotients, negation and transposes use the operators (each binary one in
parentheses, so the tree is the printed one); everything else is its constructor,
``ir.Had`` included, since ``*`` chooses between Had and Scale by shape."""
from __future__ import annotations

import keyword
import re
from dataclasses import fields
from typing import Dict, Iterable

from . import ir

_OPS = {ir.Add: "+", ir.Sub: "-", ir.MatMul: "@", ir.HDiv: "/"}


class SourcePrinter:
    """``names``: tile -> the Python name it is bound to (see ``bind``)."""

    def __init__(self, reserved: Iterable[str] = ()):
        self.names: Dict[ir.Var, str] = {}
        self.taken = set(reserved)

    def bind(self, v: ir.Var) -> str:
        """A Python name for the tile, its own name where that is free."""
        hit = self.names.get(v)
        if hit is not None:
            return hit
        base = re.sub(r"\W", "_", v.name) or "tile"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "t_" + base
        name, k = base, 2
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        self.names[v] = name
        return name

    def declarations(self) -> str:
        """One line per bound tile: ``Q = ir.Var(...)``."""
        return "\n".join(f"{n} = {self._ctor(v)}" for v, n in self.names.items())

    def _ctor(self, e) -> str:
        args = []
        for f in fields(e):
            val = getattr(e, f.name)
            args.append(self.expr(val) if isinstance(val, ir.Expr) else repr(val))
        return f"ir.{type(e).__name__}({', '.join(args)})"

    def expr(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Var):
            return self.bind(e)
        op = _OPS.get(type(e))
        if op:
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if type(e) is ir.Neg:
            return f"(-{self.expr(e.a)})"
        if type(e) is ir.Transpose:
            return f"{self.expr(e.a)}.T"
        return self._ctor(e)
