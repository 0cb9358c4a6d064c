"""What a precision record was measured on (codegen/precision.py): a hash of the
generated module without its TILING literal (the choice itself) and of the part of the
shared runtime the module can reach.

The runtime is shared by every module, but a module runs only what it names: its
kernels call some of the runtime's jit functions, its host code some of its helpers,
and those call others.  Hashing only that part lets a runtime edit stale the records of
the modules that run what changed, not all of them (every such edit cost a re-plan of
all eight bundled variants, about 70 min on 2 cores; docs/measurements.md, session 53).
What is reached is decided on the code, conservatively: every name the module's code
uses (its import of the runtime aside), then every name the reached definitions use,
and all of the runtime's statements that are not definitions (imports, constants)."""
from __future__ import annotations

import ast
import hashlib
from typing import Iterable, Set

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _names(nodes: Iterable[ast.AST]) -> Set[str]:
    return {x.id for node in nodes for x in ast.walk(node) if isinstance(x, ast.Name)}


def _without_tiling(src: str) -> str:
    out, skip = [], False
    for ln in src.splitlines():
        if ln.startswith("TILING = Tiling("):
            skip = True
        elif skip and not ln.startswith(" "):
            skip = False
        if not skip:
            out.append(ln)
    return "\n".join(out)


def runtime_reached(src: str, runtime: str) -> str:
    """The runtime's text that the module ``src`` can run: its statements other than
    definitions, then, in the runtime's order, each definition (with its decorators)
    that the module's code or a reached definition names."""
    lines = runtime.splitlines(keepends=True)
    defs, rest = {}, []
    for node in ast.parse(runtime).body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = "".join(lines[start - 1:node.end_lineno])
        if isinstance(node, _DEFS):
            defs[node.name] = (node, text)
        else:
            rest.append((node, text))
    # the module's own import of the runtime names everything it might use: not a use
    mod = [n for n in ast.parse(src).body if not (isinstance(n, ast.ImportFrom) and n.level)]
    todo = [n for n in _names(mod) | _names(n for n, _ in rest) if n in defs]
    seen: Set[str] = set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += [m for m in _names([defs[n][0]]) if m in defs and m not in seen]
    return "".join(t for _, t in rest) + "\0" + "".join(t for n, (_, t) in defs.items() if n in seen)


def source_hash(src: str, runtime: str) -> str:
    """The hash a record is measured on: the module without its TILING literal and the
    runtime it reaches (runtime_reached)."""
    return hashlib.sha256((_without_tiling(src) + "\0" + runtime_reached(src, runtime)).encode()).hexdigest()


def whole_runtime_hash(src: str, runtime: str) -> str:
    """The hash records written before session 53 carry: the module without its TILING
    literal and the whole runtime.  A record whose hash is this one was measured on
    exactly this code, and gen re-keys it (precision.rekeyed) instead of planning again."""
    return hashlib.sha256((_without_tiling(src) + "\0" + runtime).encode()).hexdigest()
