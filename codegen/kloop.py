"""An intra kernel's K columns in a loop over K blocks (TILING prep_BK).

The intra kernel of a per-channel-gated variant holds every K column of the chunk at
once (C x K tiles of Q, K, the gate, its prefix sums), and spills at K = 128 (GLA: 2.3 KB
per thread offline; docs/measurements.md, session 53).  Everything it prints is per K
column except the products that sum over K (GLA's scores ch0), and a product over K is
the sum of its K blocks' products.  So the kernel can run the per-K statements one K
block at a time and accumulate each product over K: the same values, only each sum
grouped by block (its rebalancing reference and its range flag are per column too).

This works on the printed body of the stage, one statement per line (continuations
indented), knowing which names have a K axis (emit.Stage.axes), as codegen/ksplit.py
does for the scans' pieces.  A body it cannot loop (a per-K value formed from a sum
over K, as the delta rules' W from their inverse; a sum over K other than one whole
product) is a KLoopError naming the statement."""
import re
from typing import Dict, List, Tuple

from .ksplit import k_names
from .printed_text import ASSIGN, closing, statements, uses
from .printer import CodegenError

# the sums over K a statement may accumulate: a plain product, the runtime's gated scores
# (_masked_gated_dot: a sum over the columns of its first operand), or a reduction whose
# K-indexed operand leaves a value without a K axis (RWKV-6's bonus row sum)
SUMS = ("tl.dot(", "_masked_gated_dot(", "tl.sum(")
# an accumulator's zeros, per symbolic dimension
_DIMS = {"C": "BT", "Dv": "BV", "1": "1"}


class KLoopError(CodegenError):
    """A statement of an intra kernel that a loop over K blocks cannot hold."""


def _statements(text: str) -> List[Tuple[List[str], List[str]]]:
    """(comment lines, code lines) per statement (printed_text.statements at column 0,
    blank lines dropped); comments belong to the statement after them."""
    out, comments = [], []
    for group in statements([ln for ln in text.split("\n") if ln.strip()]):
        if group[0].startswith("#"):
            comments += group
        else:
            out.append((comments, group))
            comments = []
    if comments:
        raise KLoopError(f"a comment with no statement after it: {comments[-1]}")
    return out


def _one_sum(rhs: str) -> bool:
    """Whether ``rhs`` is one sum over K (SUMS) and nothing else."""
    for f in SUMS:
        if rhs.startswith(f):
            return closing(rhs, len(f), KLoopError) == len(rhs)
    return False


def _short(stmt: str) -> str:
    """A statement as an error names it: its start (the printed lines run to 120 bytes)."""
    return stmt if len(stmt) <= 72 else stmt[:72] + " ..."


def _renamed(line: str) -> str:
    return re.sub(r"\bBK\b", "KL", re.sub(r"\bo_k\b", "o_kl", line))


def loop_body(text: str, axes: Dict[str, tuple], where: str) -> str:
    """The Jinja filter ``kloop``: ``text`` (an intra kernel's printed loads and math)
    with its per-K statements in a loop over K blocks of KL columns and each product
    over K accumulated; the statements without a K axis before or after the loop."""
    names = k_names(axes)
    sums, before, inside, after = {}, [], [], []
    late = set()     # the sums over K and what is formed from them: after the loop
    for comments, code in _statements(text):
        joined = " ".join(ln.strip() for ln in code)
        m = ASSIGN.match(joined)
        if not uses(joined, names) and not (m and m.group(1) in names):
            # no K axis: before the loop (it reads nothing the loop forms), or after it
            if uses(joined, late):
                after.append(comments + code)
                late |= {m.group(1)} if m else set()
            else:
                before.append(comments + code)
            continue
        if uses(joined, late):
            raise KLoopError(f"{where}: `{_short(joined)}` reads K-indexed tiles and a sum over K "
                             f"({', '.join(sorted(uses(joined, late)))}): a loop over K blocks cannot hold it")
        if m and m.group(1) not in names and m.group(1) not in axes:
            # a printed name with no shape of its own (a gate factor's log, b_<x>_f) formed
            # from K-indexed values: K-indexed too
            names.add(m.group(1))
        elif m and m.group(1) not in names:
            target, op, rhs = m.groups()
            if op != "=" or not _one_sum(rhs):
                raise KLoopError(f"{where}: `{_short(joined)}` sums over K other than as one whole product or sum")
            shape = axes.get(target)
            if not shape or any(d not in _DIMS for d in shape):
                raise KLoopError(f"{where}: the sum {target} has no known shape without K ({shape})")
            sums[target] = f"{target} = tl.zeros([{', '.join(_DIMS[d] for d in shape)}], dtype=tl.float32)"
            late.add(target)
            code = [code[0].replace(f"{target} = ", f"{target} += ", 1)] + code[1:]
        inside.append(comments + code)
    if not sums:
        raise KLoopError(f"{where}: nothing sums over K: blocking the kernel over K needs no loop")
    lines = [ln for st in before for ln in st]
    lines += ["# the K columns KL at a time (TILING prep_BK): each product over K summed block by block"]
    lines += list(sums.values())
    lines += ["for i_kl in range(0, tl.cdiv(K, KL)):", "    o_kl = i_kl * KL + tl.arange(0, KL)"]
    lines += ["    " + _renamed(ln) for st in inside for ln in st]
    lines += [ln for st in after for ln in st]
    return "\n".join(lines)
