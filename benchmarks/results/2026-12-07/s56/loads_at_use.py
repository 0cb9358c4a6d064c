"""An experiment, not codegen: print a generated module with each kernel's top-level
`b_X = tl.load(...)` moved to just before the first top-level statement that reads b_X
(the printed kernels load every tile at the top, so every tile is live from the start:
registers, spills, and shared memory for the products' operands).  Same arithmetic, same
order of every product: only where the loads sit.

    python loads_at_use.py IN.py OUT.py
"""
import ast
import sys


def _reads(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_load(stmt):
    """The target name of ``b_X = tl.load(...)[.to(...)][...]``, else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    calls = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)]
    loads = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "load"]
    name = stmt.targets[0].id
    return name if loads and name.startswith("b_") else None


def _binds(stmt):
    """Every name ``stmt`` stores to, at any depth (a loop's target, an if's branches)."""
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _base(ptr):
    """The buffer a pointer expression addresses: the leftmost name of its sum
    (``h + p_hs`` -> h), else None."""
    while isinstance(ptr, ast.BinOp) and isinstance(ptr.op, ast.Add):
        ptr = ptr.left
    return ptr.id if isinstance(ptr, ast.Name) else None


def _memory(stmt, calls):
    """The buffers ``stmt`` reaches through tl.<call> for each name in ``calls`` (a
    prefix ending in '_' matches tl.atomic_*)."""
    return {_base(c.args[0]) for c in ast.walk(stmt)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.args and
            any(c.func.attr == n or (n.endswith("_") and c.func.attr.startswith(n)) for n in calls)} - {None}


def move_loads(src):
    tree = ast.parse(src)
    lines = src.split("\n")
    edits = []      # (function first line, last line, new body lines)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not any("jit" in ast.unparse(d) for d in fn.decorator_list):
            continue
        body = fn.body
        # each statement's lines: from the end of the previous one (its comments go with it)
        spans = []
        start = body[0].lineno - 1
        for st in body:
            spans.append((start, st.end_lineno))
            start = st.end_lineno
        chunks = [lines[a:b] for a, b in spans]
        order = list(range(len(body)))
        for i, st in enumerate(body):
            name = _is_load(st)
            if name is None:
                continue
            deps = _reads(st.value)
            pos = order.index(i)
            later = order[pos + 1:]
            first = next((j for j in later if name in _reads(body[j])), None)
            if first is None:
                continue
            # never past a statement that (re)binds what the load reads, or that writes
            # the buffer it reads (two arguments aliasing one buffer are not seen: the
            # host passes them)
            between = later[:later.index(first)]
            read = _memory(st, ("load",))
            if any(_binds(body[j]) & deps or _memory(body[j], ("store", "atomic_")) & read for j in between):
                continue
            order.remove(i)
            order.insert(order.index(first), i)
        new = [l for j in order for l in chunks[j]]
        edits.append((spans[0][0], spans[-1][1], new))
    for a, b, new in sorted(edits, reverse=True):
        lines[a:b] = new
    return "\n".join(lines)


if __name__ == "__main__":
    src = open(sys.argv[1], encoding="utf-8").read()
    out = move_loads(src)
    compile(out, sys.argv[2], "exec")
    open(sys.argv[2], "w", encoding="utf-8").write(out)
