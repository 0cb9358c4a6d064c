"""The precision planner: which product types a generated kernel multiplies in, chosen
by measurement against a stated accuracy target rather than set by hand (docs/gen.md,
"Precision").

The choice is the six families of products with a computed tile (TILING
prep_dots, scan_dots, out_dots, reverse_dots, gradv_dots, grad_dots: "input" < "tf32" <
"tf32_mixed"), the gradient lines whose gated products take tf32x3 (Variant.precise_lines),
the products of a tile read from memory by a computed one that take "tf32_mixed" alone
in the reverse scan and gradient kernels (Variant.mixed_lines) and, with a
backward, the type delta S is stored in (TILING dh_store: "input" or "fp32") and the tiles
stored in the inputs' dtype (Variant.narrowed: the C x C boundary tiles, fp32 otherwise,
and the tiles passed between backward kernels).  It starts from the
cheapest choice and promotes one family by one step, or one line, at a time, always the
promotion that lowers the worst ratio most (where none lowers it by PLATEAU, every
family one step and every line at once), until every tensor meets the target or
nothing is left to promote; then it takes back, one at a time, each promotion whose
removal keeps the target.  Last, a family of MIXED_FAMILIES left at "tf32_mixed" is
narrowed: the family back at "tf32" with the fewest mixed products that keep the target
(tf32_mixed stages every operand of the kernel in fp32, which on the H200 halved simple
GLA's gradient V block, and made Gated DeltaNet's reverse scan step 2.6x slower than in
bf16 on the H100: docs/measurements.md).  The stored types are searched at fp32; at the
end each (delta S, the C x C boundary tiles, then each passed tile in launch order) is
narrowed to the inputs' dtype
where the target still holds and no error has grown by more than STORE_SLACK against the
kernel with all of them in fp32: half the bytes at the same accuracy, not a step down to
the bound.

Measured on the CPU: the kernel under Triton's interpreter with the H200's rounding
emulated (chunkproof.fuzz.rounding), bf16 inputs, forward + backward, against autograd
of the fp64 recurrence; each tensor's relative RMS error divided by that of a plain
chunked bf16 implementation of the same chunk program with its gates held wide
(chunkproof.fuzz.chunked).  TARGET: every ratio at or under it, on every shape."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

from .printer import CodegenError
from .source_hash import source_hash, whole_runtime_hash
from .tiling import DOTS, STORES
from .variants import Variant

TARGET = 0.8
# the gate gradients' second side: each within GATE_SLACK times the same kernel's error at
# its most precise choice.  The chunked baseline is as loose on them as the kernel can be
# (simple GLA's dg at 8.6e-2 met TARGET, with FLA at 2.4e-3 on the H200; docs/measurements.md)
GATE_SLACK = 2.0
SHAPES = ((1, 128, 2, 64, 64), (1, 130, 1, 32, 48))
SEED = 5
FAMILIES = ("prep_dots", "scan_dots", "out_dots", "reverse_dots", "gradv_dots", "grad_dots")
# the stored types planned where the kernel has a backward (gen.planned_stores)
STORE_KEYS = ("dh_store",)
# each planned TILING key's types, cheapest first
TYPES = dict({f: DOTS for f in FAMILIES}, dh_store=STORES)
RECORD = "{}.precision.json"       # beside the generated module
VERSION = 11
# the families whose products Variant.mixed_lines names (the reverse scan's and the
# gradient kernels), and how much a gate gradient may lose against its family at
# tf32_mixed when the family is narrowed
MIXED_FAMILIES = ("reverse_dots", "gradv_dots", "grad_dots")
# a promotion that lowers the score by less than this is no step: the climb then takes
# every family one type up and every line at once (Choice.jump) and leaves what it did not
# need to take_back.  Walking a plateau one promotion at a time, cheapest first, took
# Gated DeltaNet through 20 promotions that changed nothing, 654 measurements and 43
# minutes (docs/measurements.md, session 51)
PLATEAU = 0.02
NARROW_SLACK = 1.1
# how much any error may grow when a stored type is narrowed (a setting: delta S in bf16
# cost simple GLA's dg 3% and GLA's dv 7% at the planner's shapes, docs/measurements.md)
STORE_SLACK = 1.05
# and a longer sequence, on the benchmark's inputs, the stored types are also held to
# there: a tile carrying the state's part of a gradient (dq's dO S) weighs more with more
# chunks and wider heads (RWKV-6's dq grew 11% at (1, 256, 2, 128, 128) on the benchmark's
# inputs where the planner's shapes and (1, 512, 1, 64, 64) saw under 5%; docs/measurements.md)
STORE_SHAPES = ((1, 512, 1, 64, 64), (1, 256, 2, 128, 128))
STORE_INPUTS = "bench"
# the third side, where the variant has a reference implementation (FLA's op of the same
# name, run by the measure with the same rounding on the benchmark's inputs at
# STORE_SHAPES, where issue 19 compares the two: REF_INPUTS): every tensor at most
# REF_SLACK times the reference's error, or, where even the kernel's most precise choice
# is over that, within TOP_SLACK of the most precise.  The chunked baseline is looser than
# FLA where FLA computes more precisely (GLA's dg: FLA multiplies the chunk's diagonal
# blocks in fp32; docs/measurements.md, "FLA under the interpreter").  Not 1: at 1 GLA's
# climb takes its state scan, output kernel and reverse scan to tf32_mixed for an o within
# 1% of FLA's (sessions 48 and 57, docs/measurements.md); at 1.1 RWKV-6's o and DPLR's dq
# ship 5-7% over FLA's on the GPU, which the measure reproduces on the same inputs
REF_SLACK = 1.1
TOP_SLACK = 1.1
# the inputs the third side is measured on: the benchmark's, where the comparison with the
# reference is made (on the campaign's draws at SHAPES, held to FLA's errors there, RWKV-6's
# kernel took four tf32x3 lines and fp32 V-side products for errors that, at 125ebda's
# cheaper choice, were within 4% of FLA's on the benchmark's inputs at (2, 16384, 16, 128),
# and ran at 0.60 of FLA's speed: docs/measurements.md, session 49).  Their keys carry
# this prefix beside the campaign's
REF_INPUTS = STORE_INPUTS
REF_KEY = REF_INPUTS + ":"
# the draws (seeds SEED, SEED + 1, ...) the benchmark's inputs are taken REF_DRAWS times
# at, each tensor's ratio the geometric mean over them: at one draw, Gated DeltaNet's dg
# was 0.62-1.69x FLA's over four seeds at (1, 256, 2, 128, 128), each side moving on its
# own, while RWKV-6's tensors held to 0.01 (docs/measurements.md, session 50)
REF_DRAWS = 3


@dataclasses.dataclass(frozen=True)
class Choice:
    dots: Tuple[Tuple[str, str], ...]     # (TILING key, type): FAMILIES', then the planned STORE_KEYS
    lines: Tuple[str, ...] = ()           # precise lines, sorted
    mixed: Tuple[str, ...] = ()           # mixed lines, sorted
    narrow: Tuple[str, ...] = ()          # passed tiles stored in the inputs' dtype, sorted

    @classmethod
    def cheapest(cls, stores=()):
        """The search's start: every family at its cheapest type, the stored types
        ``stores`` at their widest (narrowed last, plan())."""
        return cls(tuple((f, TYPES[f][-1 if f in STORE_KEYS else 0]) for f in FAMILIES + tuple(stores)))

    @classmethod
    def most_precise(cls, lines, stores=()):
        return cls(tuple((f, TYPES[f][-1]) for f in FAMILIES + tuple(stores)), tuple(sorted(lines)))

    def promotions(self, lines):
        """Every choice one step more precise: one family one type up, or one more line."""
        out = []
        for i, (f, t) in enumerate(self.dots):
            if f in FAMILIES and TYPES[f].index(t) + 1 < len(TYPES[f]):
                d = list(self.dots)
                d[i] = (f, TYPES[f][TYPES[f].index(t) + 1])
                out.append((f"{f} -> {d[i][1]}", dataclasses.replace(self, dots=tuple(d))))
        rest = [n for n in lines if n not in self.lines]
        for n in rest:
            out.append((f"line {n} -> tf32x3", dataclasses.replace(self, lines=tuple(sorted(self.lines + (n,))))))
        if len(rest) > 1:
            # every line at once: lines that are two sides of one gated product cancel
            # only when both are precise (GLA's dQ and dK: one alone raises dg 2.3x),
            # which no single promotion shows; take_back drops those not needed
            out.append(("every line -> tf32x3", dataclasses.replace(self, lines=tuple(sorted(self.lines + tuple(rest))))))
        return out

    def jump(self, lines):
        """Every family one type up (those not at their top) and every line precise at
        once: the climb's step off a plateau (plan())."""
        d = tuple((f, TYPES[f][min(TYPES[f].index(t) + 1, len(TYPES[f]) - 1)] if f in FAMILIES else t)
                  for f, t in self.dots)
        return dataclasses.replace(self, dots=d, lines=tuple(sorted(set(self.lines) | set(lines))))

    def demotions(self):
        """Every choice one step cheaper: one family one type down, or one line fewer."""
        out = []
        for i, (f, t) in enumerate(self.dots):
            if f in FAMILIES and TYPES[f].index(t) > 0:
                d = list(self.dots)
                d[i] = (f, TYPES[f][TYPES[f].index(t) - 1])
                out.append((f"{f} back to {d[i][1]}", dataclasses.replace(self, dots=tuple(d))))
        for n in self.lines:
            out.append((f"line {n} back", dataclasses.replace(self, lines=tuple(x for x in self.lines if x != n))))
        for n in self.mixed:
            kept = tuple(x for x in self.mixed if x != n)
            out.append((f"mixed line {n} back", dataclasses.replace(self, mixed=kept)))
        return out

    def with_family(self, family, kind):
        return dataclasses.replace(self, dots=tuple((f, kind if f == family else t) for f, t in self.dots))

    def with_mixed(self, n):
        return dataclasses.replace(self, mixed=tuple(sorted(set(self.mixed) | {n})))

    def with_narrow(self, n):
        return dataclasses.replace(self, narrow=tuple(sorted(set(self.narrow) | {n})))

    def cost(self):
        return sum(TYPES[f].index(t) for f, t in self.dots) + len(self.lines) + len(self.mixed)

    def as_dict(self):
        return dict(dict(self.dots), precise_lines=list(self.lines), mixed_lines=list(self.mixed),
                    narrowed=list(self.narrow))

    @classmethod
    def from_dict(cls, d):
        keys = FAMILIES + tuple(k for k in STORE_KEYS if k in d)
        bad = [f"{f}={d[f]!r}" for f in keys if d[f] not in TYPES[f]]
        if bad:
            raise ValueError(f"unknown type(s) {', '.join(bad)}")
        return cls(tuple((f, d[f]) for f in keys), tuple(sorted(d.get("precise_lines", ()))),
                   tuple(sorted(d.get("mixed_lines", ()))), tuple(sorted(d.get("narrowed", ()))))


def apply(v: Variant, choice: Choice) -> Variant:
    """``v`` with the choice's product types and precise lines."""
    tiling = dict(v.tiling, **dict(choice.dots), grad_gated="tf32x3")
    return dataclasses.replace(v, tiling=tiling, precise_lines=choice.lines, mixed_lines=choice.mixed,
                               narrowed=choice.narrow)


def rekeyed(rec: Optional[dict], src: str, runtime: str) -> Optional[dict]:
    """``rec`` with its hash in today's scope (source_hash) where it carries the
    whole-runtime hash of this very code (written before session 53): the same
    measurement, keyed so that runtime edits it cannot reach leave it fresh."""
    if rec and rec.get("source_sha256") == whole_runtime_hash(src, runtime):
        return dict(rec, source_sha256=source_hash(src, runtime))
    return rec


def read_record(out_dir: str, name: str) -> Optional[dict]:
    path = os.path.join(out_dir, RECORD.format(name))
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
        if rec.get("version") == VERSION:     # another version's record is stale, planned again
            Choice.from_dict(rec["choice"])
        return rec
    except (ValueError, KeyError, TypeError) as e:
        raise CodegenError(f"{path}: not a precision record chunkproof gen wrote ({e}); delete it and "
                           f"run chunkproof gen to plan again") from None


def record_text(rec: dict) -> str:
    return json.dumps(rec, indent=1, sort_keys=True) + "\n"


def _settings() -> Dict[str, object]:
    """The planner's settings a record is planned under, as the record holds them."""
    return dict(version=VERSION, target=TARGET, gate_slack=GATE_SLACK, narrow_slack=NARROW_SLACK,
                store_slack=STORE_SLACK, store_shapes=[list(s) for s in STORE_SHAPES], ref_slack=REF_SLACK,
                top_slack=TOP_SLACK, store_inputs=STORE_INPUTS, reference_draws=REF_DRAWS, plateau=PLATEAU,
                shapes=[list(s) for s in SHAPES])


def staleness(rec: Optional[dict], src: str, runtime: str) -> Optional[str]:
    """Why ``rec`` is not the plan of this kernel code under today's settings (None: it is)."""
    if not rec:
        return "none yet"
    changed = [f"{k} {rec.get(k)!r}, now {x!r}" for k, x in _settings().items() if rec.get(k) != x]
    if changed:
        return "planned under other settings: " + "; ".join(changed)
    if rec.get("source_sha256") != source_hash(src, runtime):
        return "measured on other kernel code"
    return None


def fresh(rec: Optional[dict], src: str, runtime: str) -> bool:
    return staleness(rec, src, runtime) is None


def plan(v: Variant, render: Callable[[Variant], str], runtime: str, lines: List[str], measure,
         progress=None, gates: Tuple[str, ...] = (), mixable: Optional[Dict[str, List[str]]] = None,
         stores: Tuple[str, ...] = (), passed: List[str] = ()) -> Tuple[dict, str]:
    """(record, source) for ``v``: the cheapest choice meeting TARGET and, for the
    gradients of ``gates`` (the arguments holding a log gate), GATE_SLACK (docstring);
    ``lines``: the gradient lines that may take tf32x3; ``mixable``: per family of
    MIXED_FAMILIES, the products that may take tf32_mixed alone (Variant.mixed_lines;
    both from gen.candidate_lines); ``stores``: the STORE_KEYS planned too
    (gen.planned_stores); ``passed``: the tiles passed between backward kernels, which
    may be narrowed (gen.candidate_lines); ``measure``:
    (v, runtime, shapes, seed) -> an object whose ratios(choice description, source)
    gives '<shape> <tensor>' -> ours / baseline (chunkproof.fuzz.precision_measure)."""
    say = progress or (lambda m: None)
    t0 = time.time()
    m = measure(v, runtime, SHAPES, SEED)
    # the longer shapes on the benchmark's inputs: the reference's side, and the stored
    # types' check (measured once, for both)
    m_long = _Pooled([measure(v, runtime, STORE_SHAPES, SEED + i, inputs=STORE_INPUTS) for i in range(REF_DRAWS)])
    ref, ref_what = m_long.reference() if hasattr(m_long, "reference") else (None, "the measure offers none")
    ref = _keyed(ref) if ref else ref
    say(f"precision of {v.name}: reference errors of {ref_what}" if ref else
        f"precision of {v.name}: no reference implementation to hold the errors to ({ref_what}); "
        f"the chunked baseline's target alone")

    def measured(c):
        """(source, ratios) of the kernel printed with choice ``c``: at SHAPES on the
        campaign's draws and, where there is a reference, at STORE_SHAPES on REF_INPUTS
        (keys REF_KEY + '<shape> <tensor>')."""
        s = render(apply(v, c))
        r = m.ratios(_describe(c), s)
        return s, dict(r, **_keyed(m_long.ratios(_describe(c), s))) if ref else r
    r_top = measured(Choice.most_precise(lines, stores))[1] if gates or ref else {}
    ref = ref or {}
    # each tensor's bound on the reference's side (REF_SLACK, TOP_SLACK)
    ref_bound = {k: max(ref[k] * REF_SLACK, r_top[k] * TOP_SLACK) for k in ref if k in r_top}
    ceiling = [k for k in r_top if not k.startswith(REF_KEY) and k.split(" ", 1)[1] in {f"d{g}" for g in gates}]

    def target(r):
        """The worst ratio to the chunked baseline on the campaign's draws."""
        return max(x for k, x in r.items() if not k.startswith(REF_KEY))

    def score(r):
        """Over 1 while the choice misses a target: the worst of the three sides, each
        over its bound."""
        worst = target(r) / TARGET
        for k in ceiling:
            worst = max(worst, (r[k] / r_top[k] if r_top[k] > 0 else float("inf")) / GATE_SLACK)
        for k, b in ref_bound.items():
            worst = max(worst, r[k] / b if b > 0 else float("inf"))
        return worst

    cur = Choice.cheapest(stores)
    src, r = measured(cur)
    steps = [dict(step="start", worst=target(r), score=score(r))]
    say(f"precision of {v.name}: start {_describe(cur)}, worst ratio {target(r):.2f} (target {TARGET}), "
        f"score {score(r):.2f}")
    while score(r) > 1:
        tried = []
        for what, c in cur.promotions(lines):
            s, rc = measured(c)
            tried.append((score(rc), c.cost(), what, c, s, rc))
        if not tried:
            break
        best = min(tried, key=lambda t: (t[0], t[1]))
        jump = cur.jump(lines) if best[0] > score(r) * (1 - PLATEAU) else None
        if jump is not None and jump != best[3]:
            s, rc = measured(jump)
            best = (score(rc), jump.cost(), "every family one type up and every line -> tf32x3 "
                    f"(no single promotion lowered the score by {PLATEAU:.0%})", jump, s, rc)
            tried.append(best)
        sc, _, what, cur, src, r = best
        steps.append(dict(step=what, worst=target(r), score=sc, candidates=len(tried)))
        say(f"precision of {v.name}: {what} (of {len(tried)}), worst ratio {target(r):.2f}, score {sc:.2f}")
    back_tries = 0

    def take_back(cur, src, r):
        """Each promotion taken back while the target holds (the climb's jumps off a
        plateau promote much that turns out not to matter), first in demotions()' order."""
        nonlocal back_tries
        backed = score(r) <= 1
        while backed:
            backed = False
            for what, c in cur.demotions():
                s, rc = measured(c)
                back_tries += 1
                if score(rc) <= 1:
                    cur, src, r, backed = c, s, rc, True
                    steps.append(dict(step=what, worst=target(r), score=score(r)))
                    say(f"precision of {v.name}: {what}, worst ratio {target(r):.2f}, score {score(r):.2f}")
                    break
        return cur, src, r

    cur, src, r = take_back(cur, src, r)

    def with_long(c, s, rc):
        """``rc`` with the ratios at STORE_SHAPES on REF_INPUTS (REF_KEY keys), measured
        where the climb did not (no reference)."""
        return rc if ref else dict(rc, **_keyed(m_long.ratios(_describe(c), s)))
    mixable = mixable or {}
    for fam in MIXED_FAMILIES:
        if score(r) > 1 or dict(cur.dots)[fam] != "tf32_mixed" or not mixable.get(fam):
            continue
        wide = with_long(cur, src, r)

        def both(c):
            """(source, ratios at the planner's shapes, and at STORE_SHAPES) of choice ``c``."""
            s, rc = measured(c)
            return s, rc, with_long(c, s, rc)

        def kept(rc, rl, wide=wide):
            """Over 1 unless the target holds and no error grows by more than NARROW_SLACK
            against the family at tf32_mixed, at the planner's shapes or at STORE_SHAPES
            on the benchmark's inputs: narrowing is a saving at the same accuracy, not a
            step down to the bound.  The planner's shapes are short: a gate gradient's
            error grows with T (simple GLA's dg narrowed to its line vr2 was 1.9x at T =
            128 and 6x at T = 256), and Gated DeltaNet's reverse scan with one product of its
            parallel part in fp32 operands met the target there with dh0 at 3.5x FLA's
            error on the benchmark's inputs (docs/measurements.md)."""
            worst = score(rc)
            for k, x in rl.items():
                if wide.get(k, 0) > 0:
                    worst = max(worst, x / wide[k] / NARROW_SLACK)
            return worst
        narrowed = _narrowed(cur.with_family(fam, "tf32"), mixable[fam], both, kept)
        if narrowed is not None:
            cur, src, r = narrowed
            mine = [n for n in cur.mixed if n in mixable[fam]]
            steps.append(dict(step=f"{fam} narrowed to tf32 with mixed lines {', '.join(mine) or '(none)'}",
                              worst=target(r), score=score(r)))
            say(f"precision of {v.name}: {steps[-1]['step']}, worst ratio {target(r):.2f}, "
                f"score {score(r):.2f}")
        else:
            steps.append(dict(step=f"{fam} kept tf32_mixed: no fewer than all of its products "
                                   f"({', '.join(mixable[fam])}) hold the target at its accuracy",
                              worst=target(r), score=score(r)))
            say(f"precision of {v.name}: {steps[-1]['step']}")
    # narrowed only from a choice meeting the target (every one taken meets it too)
    trials = [(key, cur.with_family(key, TYPES[key][0]), TYPES[key][0]) for key in stores] + \
        [(n, None, "the inputs' dtype") for n in passed] if score(r) <= 1 else []
    # every error a narrowed store is held to: the kernel's with all of them in fp32, at
    # the planner's shapes and at STORE_SHAPES
    r_all32 = with_long(cur, src, r) if trials else r
    r_chosen = r_all32
    for key, trial, narrow in trials:
        trial = trial or cur.with_narrow(key)
        s, rn = measured(trial)
        both = with_long(trial, s, rn)
        grown = {k: both[k] / r_all32[k] for k in r_all32 if r_all32[k] > 0 and both[k] > r_all32[k] * STORE_SLACK}
        if score(rn) <= 1 and not grown:
            cur, src, r, r_chosen = trial, s, rn, both
            what = f"{key} narrowed to {narrow}"
        else:
            worst_k = max(grown, key=grown.get) if grown else None
            what = f"{key} kept {dict(cur.dots).get(key, 'fp32')}: " + (
                f"{worst_k} {grown[worst_k]:.3f}x in {narrow}" if grown else f"the target fails in {narrow}")
        steps.append(dict(step=what, worst=target(r), score=score(r)))
        say(f"precision of {v.name}: {what}")
    r_long = {k: x for k, x in r_chosen.items() if k.startswith(REF_KEY)}
    worst = target(r)
    # the settings as staleness() reads them back, so the two cannot disagree
    rec = dict(_settings(), kernel=v.func, reference_inputs=REF_INPUTS, reference=ref_what if ref else f"none: {ref_what}",
               reference_ratios={k: round(x, 4) for k, x in sorted(ref.items())},
               reference_bounds={k: round(x, 4) for k, x in sorted(ref_bound.items())},
               seed=SEED, choice=cur.as_dict(), met=score(r) <= 1, worst_ratio=round(worst, 4),
               ratios={k: round(x, 4) for k, x in sorted(r.items()) if not k.startswith(REF_KEY)},
               store_ratios={k[len(REF_KEY):]: round(x, 4) for k, x in sorted(r_long.items())},
               gated_lines=lines,
               mixable_lines=sorted({n for names in mixable.values() for n in names}),
               passed_tiles=list(passed), gates=list(gates),
               ceiling_ratios={k: round(r[k] / r_top[k], 4) for k in sorted(ceiling) if r_top[k] > 0},
               steps=steps, evaluations=m.n + m_long.n, take_back_evaluations=back_tries,
               source_sha256=source_hash(src, runtime),
               seconds=round(time.time() - t0, 1))
    rec.update(_versions())
    return rec, src


def _keyed(ratios: Dict[str, float]) -> Dict[str, float]:
    """Ratios measured on REF_INPUTS at STORE_SHAPES, keyed apart from the campaign's."""
    return {REF_KEY + k: x for k, x in ratios.items()}


class _Pooled:
    """Measures of one kernel at several draws as one: each '<shape> <tensor>' ratio the
    geometric mean of the draws' (inf where any is; 0 where any is 0)."""

    def __init__(self, measures):
        self.measures = measures

    @property
    def n(self):
        return sum(m.n for m in self.measures)

    def ratios(self, desc, src):
        return _geomean([m.ratios(desc, src) for m in self.measures])

    def reference(self):
        """The reference's pooled ratios, or the first draw's (None, why) where it has none."""
        got = [m.reference() if hasattr(m, "reference") else (None, "the measure offers none")
               for m in self.measures]
        for ref, what in got:
            if not ref:
                return ref, what
        return _geomean([ref for ref, _ in got]), got[0][1]


def _geomean(draws: List[Dict[str, float]]) -> Dict[str, float]:
    out = {}
    for k in draws[0]:
        xs = [d[k] for d in draws]
        if any(x == float("inf") or x != x for x in xs):
            out[k] = float("inf")
        elif min(xs) <= 0:
            out[k] = 0.0
        else:
            out[k] = math.exp(sum(math.log(x) for x in xs) / len(xs))
    return out


def _narrowed(trial: Choice, mixable, measured, score):
    """(choice, source, ratios) of ``trial`` (a family just taken from tf32_mixed to tf32)
    with mixed products added one at a time, always the one that lowers the score most,
    until the target holds; None when it takes every product (the family's tf32_mixed
    again, under another name) or every product is added and it still does not.
    ``measured(choice)``: (source, ratios, ratios at STORE_SHAPES); ``score(ratios,
    ratios at STORE_SHAPES)``."""
    src, r, rl = measured(trial)
    while score(r, rl) > 1:
        tried = []
        for n in mixable:
            if n not in trial.mixed:
                c = trial.with_mixed(n)
                s, rc, rcl = measured(c)
                tried.append((score(rc, rcl), n, c, s, rc, rcl))
        if not tried:
            return None
        _, _, trial, src, r, rl = min(tried, key=lambda t: (t[0], t[1]))
    if set(mixable) <= set(trial.mixed):
        return None
    return trial, src, r


def _describe(c: Choice):
    return ", ".join(f"{f}={t}" for f, t in c.dots) + (f", precise lines {', '.join(c.lines)}" if c.lines else "") \
        + (f", mixed lines {', '.join(c.mixed)}" if c.mixed else "") \
        + (f", narrowed {', '.join(c.narrow)}" if c.narrow else "")


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
