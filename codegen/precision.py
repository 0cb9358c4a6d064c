"""The precision planner: which product types a generated kernel multiplies in, chosen
by measurement against a stated accuracy target rather than set by hand (docs/gen.md,
"Precision").

The choice is the four families of products with a computed tile (TILING
forward_dots, reverse_dots, gradv_dots, grad_dots: "input" < "tf32" < "tf32_mixed")
and the gradient lines whose gated products take tf32x3 (Variant.precise_lines).  It
starts from the cheapest choice and promotes one family by one step, or one line, at a
time, always the promotion that lowers the worst ratio most, until every tensor meets
the target or nothing is left to promote; then it takes back, one at a time, each
promotion whose removal keeps the target.

Measured on the CPU: the kernel under Triton's interpreter with the H200's rounding
emulated (chunkproof.fuzz.rounding), bf16 inputs, forward + backward, against autograd
of the fp64 recurrence; each tensor's relative RMS error divided by that of a plain
chunked bf16 implementation of the same chunk program with its gates held wide
(chunkproof.fuzz.chunked).  TARGET: every ratio at or under it, on every shape."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from typing import Callable, List, Optional, Tuple

from .printer import CodegenError
from .tiling import DOTS
from .variants import Variant

TARGET = 0.8
# the gate gradients' second side: each within GATE_SLACK times the same kernel's error at
# its most precise choice.  The chunked baseline is as loose on them as the kernel can be
# (simple GLA's dg at 8.6e-2 met TARGET, with FLA at 2.4e-3 on the H200; docs/measurements.md)
GATE_SLACK = 2.0
SHAPES = ((1, 128, 2, 64, 64), (1, 130, 1, 32, 48))
SEED = 5
FAMILIES = ("forward_dots", "reverse_dots", "gradv_dots", "grad_dots")
RECORD = "{}.precision.json"       # beside the generated module
VERSION = 2


@dataclasses.dataclass(frozen=True)
class Choice:
    dots: Tuple[Tuple[str, str], ...]     # (family, type), FAMILIES' order
    lines: Tuple[str, ...] = ()           # precise lines, sorted

    @classmethod
    def cheapest(cls):
        return cls(tuple((f, DOTS[0]) for f in FAMILIES))

    @classmethod
    def most_precise(cls, lines):
        return cls(tuple((f, DOTS[-1]) for f in FAMILIES), tuple(sorted(lines)))

    def promotions(self, lines):
        """Every choice one step more precise: one family one type up, or one more line."""
        out = []
        for i, (f, t) in enumerate(self.dots):
            if DOTS.index(t) + 1 < len(DOTS):
                d = list(self.dots)
                d[i] = (f, DOTS[DOTS.index(t) + 1])
                out.append((f"{f} -> {d[i][1]}", Choice(tuple(d), self.lines)))
        for n in lines:
            if n not in self.lines:
                out.append((f"line {n} -> tf32x3", Choice(self.dots, tuple(sorted(self.lines + (n,))))))
        return out

    def demotions(self):
        """Every choice one step cheaper: one family one type down, or one line fewer."""
        out = []
        for i, (f, t) in enumerate(self.dots):
            if DOTS.index(t) > 0:
                d = list(self.dots)
                d[i] = (f, DOTS[DOTS.index(t) - 1])
                out.append((f"{f} back to {d[i][1]}", Choice(tuple(d), self.lines)))
        for n in self.lines:
            out.append((f"line {n} back", Choice(self.dots, tuple(x for x in self.lines if x != n))))
        return out

    def cost(self):
        return sum(DOTS.index(t) for _, t in self.dots) + len(self.lines)

    def as_dict(self):
        return dict(dict(self.dots), precise_lines=list(self.lines))

    @classmethod
    def from_dict(cls, d):
        return cls(tuple((f, d[f]) for f in FAMILIES), tuple(sorted(d.get("precise_lines", ()))))


def apply(v: Variant, choice: Choice) -> Variant:
    """``v`` with the choice's product types and precise lines."""
    tiling = dict(v.tiling, **dict(choice.dots), grad_gated="tf32x3")
    return dataclasses.replace(v, tiling=tiling, precise_lines=choice.lines)


def source_hash(src: str, runtime: str) -> str:
    """What the measurement was made on: the module without its TILING literal (the
    choice itself) and the runtime it imports."""
    body = "\n".join(ln for ln in _without_tiling(src))
    return hashlib.sha256((body + "\0" + runtime).encode()).hexdigest()


def _without_tiling(src):
    skip = False
    for ln in src.splitlines():
        if ln.startswith("TILING = Tiling("):
            skip = True
        elif skip and not ln.startswith(" "):
            skip = False
        if not skip:
            yield ln


def read_record(out_dir: str, name: str) -> Optional[dict]:
    path = os.path.join(out_dir, RECORD.format(name))
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
        Choice.from_dict(rec["choice"])
        return rec
    except (ValueError, KeyError, TypeError) as e:
        raise CodegenError(f"{path}: not a precision record chunkproof gen wrote ({e}); delete it and "
                           f"run chunkproof gen to plan again") from None


def record_text(rec: dict) -> str:
    return json.dumps(rec, indent=1, sort_keys=True) + "\n"


def fresh(rec: Optional[dict], src: str, runtime: str) -> bool:
    return bool(rec) and rec.get("version") == VERSION and rec.get("target") == TARGET and \
        rec.get("gate_slack") == GATE_SLACK and \
        rec.get("shapes") == [list(s) for s in SHAPES] and rec.get("source_sha256") == source_hash(src, runtime)


def plan(v: Variant, render: Callable[[Variant], str], runtime: str, lines: List[str], measure,
         progress=None, gates: Tuple[str, ...] = ()) -> Tuple[dict, str]:
    """(record, source) for ``v``: the cheapest choice meeting TARGET and, for the
    gradients of ``gates`` (the arguments holding a log gate), GATE_SLACK (docstring);
    ``lines``: the gradient lines that may take tf32x3 (gen.gated_lines); ``measure``:
    (v, runtime, shapes, seed) -> an object whose ratios(choice description, source)
    gives '<shape> <tensor>' -> ours / baseline (chunkproof.fuzz.precision_measure)."""
    say = progress or (lambda m: None)
    t0 = time.time()
    m = measure(v, runtime, SHAPES, SEED)

    def measured(c):
        """(source, ratios) of the kernel printed with choice ``c``."""
        s = render(apply(v, c))
        return s, m.ratios(_describe(c), s)
    r_top = measured(Choice.most_precise(lines))[1] if gates else {}
    ceiling = [k for k in r_top if k.split(" ", 1)[1] in {f"d{g}" for g in gates}]

    def score(r):
        """Over 1 while the choice misses a target: the worst of the two sides, each
        over its bound."""
        worst = max(r.values()) / TARGET
        for k in ceiling:
            worst = max(worst, (r[k] / r_top[k] if r_top[k] > 0 else float("inf")) / GATE_SLACK)
        return worst

    cur = Choice.cheapest()
    src, r = measured(cur)
    steps = [dict(step="start", worst=max(r.values()), score=score(r))]
    say(f"precision of {v.name}: start {_describe(cur)}, worst ratio {max(r.values()):.2f} (target {TARGET}), "
        f"score {score(r):.2f}")
    while score(r) > 1:
        tried = []
        for what, c in cur.promotions(lines):
            s, rc = measured(c)
            tried.append((score(rc), c.cost(), what, c, s, rc))
        if not tried:
            break
        sc, _, what, cur, src, r = min(tried, key=lambda t: (t[0], t[1]))
        steps.append(dict(step=what, worst=max(r.values()), score=sc, candidates=len(tried)))
        say(f"precision of {v.name}: {what} (of {len(tried)}), worst ratio {max(r.values()):.2f}, score {sc:.2f}")
    # the climb crosses plateaus (ties go to the first of equal promotions) with
    # promotions that turn out not to matter: each is taken back while the target holds
    backed, back_tries = score(r) <= 1, 0
    while backed:
        backed = False
        for what, c in cur.demotions():
            s, rc = measured(c)
            back_tries += 1
            if score(rc) <= 1:
                cur, src, r, backed = c, s, rc, True
                steps.append(dict(step=what, worst=max(r.values()), score=score(r)))
                say(f"precision of {v.name}: {what}, worst ratio {max(r.values()):.2f}, score {score(r):.2f}")
                break
    worst = max(r.values())
    rec = dict(version=VERSION, kernel=v.func, target=TARGET, gate_slack=GATE_SLACK, shapes=[list(s) for s in SHAPES],
               seed=SEED, choice=cur.as_dict(), met=score(r) <= 1, worst_ratio=round(worst, 4),
               ratios={k: round(x, 4) for k, x in sorted(r.items())}, gated_lines=lines, gates=list(gates),
               ceiling_ratios={k: round(r[k] / r_top[k], 4) for k in sorted(ceiling) if r_top[k] > 0},
               steps=steps, evaluations=m.n, take_back_evaluations=back_tries,
               source_sha256=source_hash(src, runtime),
               seconds=round(time.time() - t0, 1))
    rec.update(_versions())
    return rec, src


def _describe(c: Choice):
    return ", ".join(f"{f}={t}" for f, t in c.dots) + (f", precise lines {', '.join(c.lines)}" if c.lines else "")


def _versions():
    import torch
    import triton
    return dict(torch=torch.__version__, triton=triton.__version__)


def require_interpreter():
    """The planner runs kernels on the CPU: TRITON_INTERPRET=1 before Triton is imported."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise CodegenError("planning product precision runs the kernels under Triton's interpreter, but "
                           "Triton was imported without TRITON_INTERPRET=1 in this process; run chunkproof "
                           "gen in a fresh process")
    os.environ["TRITON_INTERPRET"] = "1"
