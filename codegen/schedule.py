"""Where a scan's chunk step issues its loads.

The printer issues every load of a chunk step at the step's top.  A scan's step has two
phases when it stores a tile it computed (the reverse scan's dU, passed to a later
kernel): the products that tile needs, then the products that read it.  A tile loaded
at the top but first read in the second phase is live, in registers, across the whole
first phase, and the compiler spills to hold it.  ``late_loads`` moves such a load to
just before the statement that first reads it; loads the first phase reads stay at the
top, where their latency overlaps the first products.  Only the order of statements
changes: each load reads the same addresses (none of its operands, nor the memory it
reads, is written between its old place and its new one), so the kernel computes what
it computed before.

This works on the printed body, one statement per line (a statement under ``if KP > j:``
and a continued line belong to the line above them at the loop body's indent)."""
import re
from typing import List, Optional, Set

from .printed_text import NAME, statements

_LOAD = re.compile(r"^(?:if KP > \d+:\s*)?(b_\w+) = tl\.load\((\w+)\b")
_STORE = re.compile(r"^(?:if KP > \d+:\s*)?tl\.store\((\w+)\b")
_ASSIGN = re.compile(r"^(?:if KP > \d+:\s*)?(\w+) (?:=|\+=|-=) ")


class _Group:
    """One statement of the loop body, with the lines under it."""

    def __init__(self, lines: List[str]):
        self.lines = lines
        self.text = " ".join(ln.strip() for ln in lines)
        self.comment = self.text.startswith("#")
        load, store, assign = _LOAD.match(self.text), _STORE.match(self.text), _ASSIGN.match(self.text)
        self.load = load.group(1) if load else None
        self.load_from = load.group(2) if load else None
        self.store_to = store.group(1) if store else None
        self.target = assign.group(1) if assign else None
        # the names it reads: all it names but its target, unless the target is named again
        names = [] if self.comment else NAME.findall(self.text)
        self.reads = set(names) - {self.target} if names.count(self.target) == 1 else set(names)


def _second_phase(groups: List[_Group]) -> Optional[int]:
    """The index of the step's first store of a tile the step computed, or None."""
    assigned: Set[str] = set()
    for i, g in enumerate(groups):
        if g.store_to and {n for n in g.reads if n.startswith("b_")} & assigned:
            return i
        if g.target:
            assigned.add(g.target)
    return None


def _reorder(groups: List[_Group]) -> List[_Group]:
    split = _second_phase(groups)
    if split is None:
        return groups
    moved, out = {}, []
    for i, g in enumerate(groups):
        if not g.load:
            continue
        readers = [j for j in range(i + 1, len(groups)) if g.load in groups[j].reads]
        if not readers or readers[0] <= split:
            continue
        between = groups[i + 1:readers[0]]
        operands = g.reads - {g.load}
        if any(h.target in operands or h.store_to == g.load_from for h in between):
            continue
        at = readers[0]
        while at - 1 > i and groups[at - 1].comment:   # before the reader's comment
            at -= 1
        moved[i] = at
    before = {}
    for i, at in moved.items():
        before.setdefault(at, []).append(groups[i])
    for j, g in enumerate(groups):
        out += before.get(j, [])
        if j not in moved:
            out.append(g)
    return out


def late_loads(text: str) -> str:
    """The Jinja filter ``late_loads``: ``text`` (a scan's printed body) with the loads its
    chunk loop's second phase first reads issued just before their first reader."""
    lines = text.split("\n")
    head = next((i for i, ln in enumerate(lines) if re.match(r"^\s*for \w+ in range\(", ln)), None)
    if head is None:
        return text
    indent = len(lines[head]) - len(lines[head].lstrip()) + 4
    end = head + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= indent):
        end += 1
    while end > head + 1 and not lines[end - 1].strip():   # trailing blank lines stay after the loop
        end -= 1
    body = _reorder([_Group(g) for g in statements(lines[head + 1:end], indent)])
    return "\n".join(lines[:head + 1] + [ln for g in body for ln in g.lines] + lines[end:])
