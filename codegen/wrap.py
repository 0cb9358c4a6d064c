"""Fold the generated source's long lines: a code line breaks inside its brackets
(after a comma, or before a binary operator, at the shallowest nesting that has a
break), a comment line breaks between words.  Only whitespace inside brackets changes,
so the folded code is the same Python."""
from __future__ import annotations

from typing import List, Tuple

_OPS = (" + ", " - ", " * ", " & ", " | ")
CONTINUATION = 8          # continuation lines' extra indentation (not the block's 4)


def _cuts(s: str, depth=0) -> List[Tuple[int, int]]:
    """(position, bracket depth) of every place ``s`` may break, outside strings;
    ``depth``: the brackets open where ``s`` starts (a call continued from above)."""
    out, quote = [], None
    for i, ch in enumerate(s):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth > 0:
            if s.startswith(", ", i):
                out.append((i + 2, depth))
            elif s.startswith(_OPS, i):
                out.append((i + 1, depth))
    return out


def _ranges(s, lo, hi, cuts, first, rest):
    """[(start, end)] of s[lo:hi] in lines of at most ``first`` (the first) and ``rest``
    characters where the breaks allow."""
    if size(s[lo:hi].strip()) <= first:
        return [(lo, hi)]
    inside = [(p, d) for p, d in cuts if lo < p < hi]
    if not inside:
        return [(lo, hi)]
    depth = min(d for _, d in inside)
    bounds = [p for p, d in inside if d == depth] + [hi]
    packed, start, end = [], lo, None
    for b in bounds:
        limit = first if not packed else rest
        if end is None or size(s[start:b].strip()) <= limit:
            end = b
        else:
            packed.append((start, end))
            start, end = end, b
    packed.append((start, end))
    out: List[Tuple[int, int]] = []
    for a, b in packed:
        limit = first if not out else rest
        out.extend(_ranges(s, a, b, cuts, limit, rest) if size(s[a:b].strip()) > limit else [(a, b)])
    return out


def _depth_after(line: str, depth: int) -> int:
    quote = None
    for ch in line:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def wrap_code(line: str, width: int, depth=0) -> List[str]:
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    ranges = _ranges(body, 0, len(body), _cuts(body, depth), width - len(indent),
                     width - len(indent) - CONTINUATION)
    pad = indent + " " * CONTINUATION
    return [(indent if i == 0 else pad) + body[a:b].strip() for i, (a, b) in enumerate(ranges)]


def size(line: str) -> int:
    """A line's length in UTF-8 bytes (what byte-counting tools see; notes cite CJK headings)."""
    return len(line.encode("utf-8"))


def _words(text: str, first: str, rest: str, width: int) -> List[str]:
    out, cur = [], first
    for w in text.split():
        if cur.strip() and size(cur + " " + w) > width:
            out.append(cur)
            cur = rest + w
        else:
            cur = cur + (" " if cur.strip() and not cur.endswith(" ") else "") + w
    return out + [cur]


def wrap_comment(line: str, width: int) -> List[str]:
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    return _words(body[1:], indent + "# ", indent + "#   ", width)


def wrap_prose(line: str, width: int) -> List[str]:
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    return _words(body, indent, indent, width)


def wrap_source(src: str, width: int) -> str:
    out, in_doc, depth = [], False, 0
    for line in src.split("\n"):
        quotes = line.count('"""') % 2 == 1
        if in_doc:
            out.extend(wrap_prose(line, width) if size(line) > width else [line])
        elif size(line) <= width:
            out.append(line)
        elif line.lstrip().startswith("#"):
            out.extend(wrap_comment(line, width))
        else:
            out.extend(wrap_code(line, width, depth))
        if quotes:
            in_doc = not in_doc
        elif not in_doc and not line.lstrip().startswith("#"):
            depth = _depth_after(line, depth)
    return "\n".join(out)
