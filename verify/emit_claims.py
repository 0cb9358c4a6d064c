"""Derived backward lines as a derivation file of DSL claims, which `chunkproof verify`
accepts unchanged (and decides again, by the usual route, floats included).

The file does not copy the forward: it loads the derivation the lines were derived
from (a bundled note by name, a user's file by its path relative to the new file) and
reuses its recurrences and the one program, so that the claims stay claims about that
program.  Each claim's formula is printed as DSL source (derivations/pysource.py)
and is equal, node for node, to the one checked before writing."""
from __future__ import annotations

import os
from typing import List

from chunkproof.derivations.loader import BUNDLED
from chunkproof.derivations.pysource import SourcePrinter
from .derived import Checked

_RESERVED = {"ir", "os", "D", "nb", "Derivation", "Notebook", "bundled", "from_file", "DERIVATION",
             "DERIVATIONS", "_SRC", "_HERE", "_rec", "_name"}


def _bundled_module(source: str) -> str:
    """'derivations/gla.py' -> 'gla' for a bundled note, '' for a user's file."""
    base = os.path.splitext(os.path.basename(source or ""))[0]
    return base if source == f"derivations/{base}.py" and base in BUNDLED else ""


def _loader_line(c: Checked, out_path: str) -> str:
    mod = _bundled_module(c.deriv.source)
    if mod:
        src = f"bundled([{mod!r}])"
    else:
        rel = os.path.relpath(os.path.abspath(c.deriv.source), os.path.dirname(os.path.abspath(out_path)))
        src = f"from_file(os.path.join(_HERE, {rel!r}))"
    return f"[_d for _d in {src} if _d.name == {c.deriv.name!r}][0]"


def claims_source(results: List[Checked], out_path: str, command: str) -> str:
    """The file's text: one derivation per checked backward."""
    printer = SourcePrinter(_RESERVED)
    blocks = []
    for k, c in enumerate(results):
        prog = c.program.name
        d = f"D{k}"
        printer.taken.add(d)
        lines = [
            f"_SRC = {_loader_line(c, out_path)}",
            f"{d} = Derivation({c.deriv.name + '_derived'!r}, "
            f"{'derived backward of ' + prog + ' (' + c.deriv.name + ')'!r}, _SRC.note)",
            "for _name, _rec in _SRC.recurrences.items():",
            f"    {d}.add_recurrence(_rec, default=(_name == _SRC.default_recurrence))",
            f"{d}.add_program(_SRC.programs[{prog!r}], recurrence=_SRC.program_recurrence[{prog!r}])",
            f"nb = Notebook({d}, _SRC.note).section({'derived backward of ' + prog!r})",
        ]
        for claim in c.claims:
            kw = [f"what={claim.citation.what!r}"]
            if claim.blocks != "all":
                kw.append(f"blocks={claim.blocks!r}")
            if claim.assume:
                kw.append(f"assume={claim.assume!r}")
            lines.append(f"nb.adjoint({claim.id!r}, {claim.latex!r},\n"
                         f"           {printer.expr(claim.lhs)},\n"
                         f"           {printer.expr(claim.rhs)},\n"
                         f"           {prog!r}, {', '.join(kw)})")
        blocks.append("\n".join(lines))
    names = ", ".join(f"D{k}" for k in range(len(results)))
    head = (f'"""Derived backward, written by `{command}`.\n\n'
            f"Every claim below was checked exactly before it was written; `chunkproof verify\n"
            f'{os.path.basename(out_path)}` decides them again.  Regenerate rather than edit."""\n'
            "import os\n\n"
            "from chunkproof.derivations import ir\n"
            "from chunkproof.derivations.dsl import Derivation, Notebook\n"
            "from chunkproof.derivations.loader import bundled, from_file\n\n"
            "_HERE = os.path.dirname(os.path.abspath(__file__))\n\n")
    tiles = "# tiles the formulas read\n" + printer.declarations() + "\n\n"
    tail = f"\nDERIVATIONS = [{names}]\n"
    return head + tiles + "\n\n".join(blocks) + "\n" + tail
