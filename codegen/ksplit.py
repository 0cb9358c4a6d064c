"""A sequential kernel's state held in K pieces.

A scan keeps its state S (a [BV, BK] tile) in registers across its whole loop; with
BK = 128 the compiler holds the state, the chunk's K-indexed tiles and the products
between them in one piece and spills (docs/measurements.md, "The reverse scan's
products one by one").  Held as KP pieces of KB = BK / KP columns each (at most
PIECES), each K-indexed tile is KP tiles, and the printed kernel says so: every
statement whose value has a K axis is printed once per piece, and every product that
sums over K is the sum of its pieces' products.  Nothing else changes: the pieces are
the same values, cut along K, so the kernel computes what the verified formulas say
(its products' sums are only grouped by piece).

This works on the printed body of a stage, one statement per line, knowing which names
have a K axis (emit.Stage.axes); a statement it cannot cut (a reduction over K other
than a product, a tile with two K axes) is a KSplitError, and the kernel is then
printed whole."""
import re
from typing import Dict, Iterable, List, Set

from .printed_text import ASSIGN, CALL, NAME, closing, uses
from .printer import CodegenError

# pieces printed; the launch runs KP of them (a constexpr; `if KP > j` is resolved when
# the kernel compiles, so the pieces past KP cost nothing)
PIECES = 4
# the skeleton's K-indexed names: the column offsets, and the state's addresses and mask
SKELETON = {"o_k": "o_k{}", "p_s": "p_s{}", "m_s": "m_s{}"}
# functions a piece may go through: elementwise, or a product whose K axis is not summed
_ELEMENTWISE = {"tl.dot", "tl.exp", "tl.log", "tl.trans", "tl.load", "tl.store", "tl.zeros", "tl.where", "tl.minimum",
                "tl.maximum", "to", "tl.arange"}


class KSplitError(CodegenError):
    """A statement of a scan that cannot be cut into K pieces; the message names it."""


def k_names(axes: Dict[str, tuple]) -> Set[str]:
    """The printed names with a K axis (Dk in their symbolic shape), the skeleton's too;
    a name with two is refused where it is read."""
    return {n for n, shp in axes.items() if "Dk" in shp} | set(SKELETON)


def piece_name(name: str, j: int) -> str:
    return SKELETON[name].format(j) if name in SKELETON else f"{name}_k{j}"


def _piece(text: str, names: Set[str], j: int) -> str:
    text = NAME.sub(lambda m: piece_name(m.group(0), j) if m.group(0) in names else m.group(0), text)
    return re.sub(r"\bBK\b", "KB", text)


def _args(inner: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        cur += ch
    return out + [cur.strip()]


class Splitter:
    """Cuts statements of one kernel; ``axes``: emit.Stage.axes of its stage(s)."""

    def __init__(self, axes: Dict[str, tuple], where: str):
        self.names = k_names(axes)
        self.twice = {n for n, shp in axes.items() if list(shp).count("Dk") > 1}
        self.where = where
        self.temps = 0
        self.current = ""

    def body(self, text: str) -> str:
        out = []
        for line in text.split("\n"):
            stmt = line.strip()
            if not stmt or stmt.startswith("#") or not uses(stmt, self.names):
                out.append(line)
                continue
            indent = line[:len(line) - len(line.lstrip())]
            out.extend(indent + s for s in self.statement(stmt))
        return "\n".join(out)

    def _refuse(self, stmt, why):
        raise KSplitError(f"{self.where}: the state cannot be held in K pieces: {why} in `{stmt}`")

    def _check(self, stmt):
        if uses(stmt, self.twice):
            self._refuse(stmt, f"{', '.join(sorted(uses(stmt, self.twice)))} has two K axes")
        for f in CALL.findall(stmt):
            if f not in _ELEMENTWISE:
                self._refuse(stmt, f"{f}() may sum over K")

    def _per_piece(self, stmt) -> List[str]:
        lines = [_piece(stmt, self.names, 0)]
        for j in range(1, PIECES):
            lines += [f"if KP > {j}:", "    " + _piece(stmt, self.names, j)]
        return lines

    def statement(self, stmt: str) -> List[str]:
        """The statement's pieces: once per piece where its value (or what it stores) has
        a K axis; where it has none, each product summing over K as the sum of its
        pieces' products, accumulated in a tile printed before it."""
        self.current = stmt
        self._check(stmt)
        m = ASSIGN.match(stmt)
        if not m or m.group(1) in self.names:
            for a, b in self._dots(stmt):
                if uses(a, self.names) and uses(b, self.names):
                    self._refuse(stmt, "a product sums over K inside a K-indexed value")
            return self._per_piece(stmt)
        target, op, code = m.groups()
        pre, out, i = [], "", 0
        for start, end, (a, b, rest) in self._dot_spans(code):
            out += code[i:start]
            i = end
            if not (uses(a, self.names) and uses(b, self.names)):
                out += code[start:end]
                continue
            acc = f"{target}_ksum{self.temps}"
            self.temps += 1
            tail = "".join(", " + r for r in rest)
            pre.append(f"{acc} = tl.dot({_piece(a, self.names, 0)}, {_piece(b, self.names, 0)}{tail})")
            for j in range(1, PIECES):
                pre += [f"if KP > {j}:",
                        f"    {acc} = tl.dot({_piece(a, self.names, j)}, {_piece(b, self.names, j)}, acc={acc}{tail})"]
            out += acc
        out += code[i:]
        if uses(out, self.names):
            self._refuse(stmt, f"{', '.join(sorted(uses(out, self.names)))} is read outside a product "
                               "that sums over K")
        return pre + [f"{target} {op} {out}"]

    def _dot_spans(self, code: str) -> Iterable[tuple]:
        i = 0
        while True:
            start = code.find("tl.dot(", i)
            if start < 0:
                return
            end = closing(code, start + len("tl.dot("), KSplitError)
            args = _args(code[start + len("tl.dot("):end - 1])
            if "tl.dot(" in code[start + 1:end]:
                self._refuse(self.current, "a product inside a product")
            yield start, end, (args[0], args[1], args[2:])
            i = end

    def _dots(self, stmt):
        return [(a, b) for _, _, (a, b, _) in self._dot_spans(stmt)]


def split_body(text: str, axes: Dict[str, tuple], where: str) -> str:
    """The Jinja filter ``ksplit``: ``text`` (a scan's printed body) with its state in
    pieces, or, where a statement cannot be cut, as it was after a comment saying why."""
    try:
        return Splitter(axes, where).body(text)
    except KSplitError as e:
        indent = text[:len(text) - len(text.lstrip())]
        return f"{indent}# the state is held in one piece: {e}\n{text}"
