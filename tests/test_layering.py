"""The package's imports run in pipeline order and never in a loop.

    derivations  <-  verify  <-  codegen  <-  kernels  <-  fuzz, bench  <-  cli

Every import statement of every module is read (function-level ones too), so a
lazy import that runs back up fails here as a module-level one would."""
import ast
import os

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = [["chunkproof.derivations"], ["chunkproof.verify"], ["chunkproof.codegen"],
          ["chunkproof.kernels"], ["chunkproof.fuzz", "chunkproof.bench"],
          ["chunkproof.cli", "chunkproof.__main__", "chunkproof.cmd_bench", "chunkproof.cmd_derive",
           "chunkproof.cmd_fuzz"]]


def _package_dirs():
    """import name -> folder, from pyproject.toml (the mapping CI installs)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        st = tomllib.load(f)["tool"]["setuptools"]
    dirs = st.get("package-dir", {})

    def folder(pkg):
        if pkg in dirs:
            return dirs[pkg]
        parent, _, leaf = pkg.rpartition(".")
        return os.path.join(folder(parent), leaf) if parent else pkg

    return {pkg: folder(pkg) for pkg in st["packages"]}


def modules():
    """{module name: file path} of every installed module."""
    mods = {}
    for pkg, d in _package_dirs().items():
        for fn in os.listdir(os.path.join(ROOT, d)):
            if fn.endswith(".py"):
                name = pkg if fn == "__init__.py" else f"{pkg}.{fn[:-3]}"
                mods[name] = os.path.join(ROOT, d, fn)
    return mods


def _imports(name, path, known):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_pkg = path.endswith("__init__.py")
    base = name if is_pkg else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                up = base.split(".")
                up = up[:len(up) - (node.level - 1)]
                mod = ".".join(up + ([mod] if mod else []))
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph():
    mods = modules()
    return {n: _imports(n, p, mods) for n, p in mods.items()}


def layer(mod):
    for i, names in enumerate(LAYERS):
        if any(mod == n or mod.startswith(n + ".") for n in names):
            return i
    return -1   # the top package's own __init__ (the version): below everything


def test_every_module_has_a_layer():
    stray = [m for m in modules() if layer(m) < 0 and m != "chunkproof"]
    assert not stray, f"modules outside the pipeline's layers: {stray}"


def test_the_top_package_imports_nothing_of_its_own():
    assert not graph()["chunkproof"]


def test_no_import_runs_back_up():
    back = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
            for a, deps in graph().items() for b in deps if layer(b) > layer(a)]
    assert not back, "imports against the pipeline order:\n" + "\n".join(back)


def test_no_import_loop():
    g = graph()
    state, loops = {}, []

    def visit(n, path):
        state[n] = "open"
        for m in sorted(g.get(n, ())):
            if state.get(m) == "open":
                loops.append(" -> ".join(path[path.index(m):] + [m]))
            elif m not in state:
                visit(m, path + [m])
        state[n] = "done"

    for n in sorted(g):
        if n not in state:
            visit(n, [n])
    assert not loops, "import loops:\n" + "\n".join(loops)


@pytest.mark.parametrize("bad", ["chunkproof.codegen.gen"])
def test_the_check_can_fail(bad, monkeypatch):
    """A derivations module importing codegen would be reported."""
    g = graph()
    g["chunkproof.derivations.ir"] = g["chunkproof.derivations.ir"] | {bad}
    monkeypatch.setattr(__import__(__name__), "graph", lambda: g)
    with pytest.raises(AssertionError, match="against the pipeline order"):
        test_no_import_runs_back_up()
