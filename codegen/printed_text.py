"""Printed kernel code read as text, one statement per line: the names a statement
uses, an assignment's parts, where a call's parentheses close, which lines make one
statement.  The passes that rewrite
a stage's printed body (ksplit.py, kloop.py) and the schedule read it this way."""
import re
from typing import List, Set, Type

from .printer import CodegenError

NAME = re.compile(r"\b[A-Za-z_]\w*\b")
CALL = re.compile(r"((?:tl\.)?\w+)\(")
# target, operator, right-hand side
ASSIGN = re.compile(r"^(\w+) (=|\+=|-=) (.*)$")


def uses(text: str, names: Set[str]) -> Set[str]:
    """The names of ``names`` that ``text`` reads or writes."""
    return set(NAME.findall(text)) & names


def closing(text: str, start: int, error: Type[CodegenError] = CodegenError) -> int:
    """The index just past the parenthesis that closes the one opened before ``start``;
    ``error`` (the caller's own kind) where it is never closed."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise error(f"unbalanced parentheses in `{text}`")


def statements(lines: List[str], indent: int = 0) -> List[List[str]]:
    """``lines`` grouped by statement: a line at ``indent`` starts one, a line indented
    deeper (a continuation, a body under ``if``) or blank belongs to the one above."""
    out: List[List[str]] = []
    for ln in lines:
        if out and (len(ln) - len(ln.lstrip()) > indent or not ln.strip()):
            out[-1].append(ln)
        else:
            out.append([ln])
    return out
