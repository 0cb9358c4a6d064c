"""Our generated kernels' bf16 errors beside a plain PyTorch chunked implementation's,
in bf16 on the same inputs (issue 17: "within 1.2x of a plain PyTorch chunked
implementation in bf16, or better").

- ours: the generated kernel (chunkproof.kernels.<name>) under Triton's interpreter with
  the H200's rounding emulated (chunkproof.fuzz.rounding: fp32 -> bf16 casts round
  to nearest even; "tf32" products round their operands by --tf32), forward + backward by
  torch autograd of L = <dO, O> + <dS_T, S_T>;
- baseline: the SAME derivation's chunk program (the one its kernel(...) declaration
  names), its forms for O_[t] and S_[t] (the declaration's output and state claims, or
  with --form program the program's own O and S definitions) evaluated chunk by chunk on
  torch bfloat16 tensors by the checker's evaluator (chunkproof.verify.evaluate.BlockEval
  over a bf16 torch field): every op's result is bf16 (products and sums of a matmul
  accumulate as torch's bf16 matmul does, then round once); a triangular inverse (the
  delta rule's) is taken in fp32 and cast back to bf16; the state S_[t] is carried across
  chunks in bf16 (the fp32 initial state is cast to bf16 first).  Parameters take the
  kernel declaration's bindings (derivations/kernel.py ParamBinding, as
  chunkproof.fuzz.oracle.bound_params: retention's gamma_h = 1 - 2^(-5-h) and tau = 1;
  RWKV-6's u an [H, K] input); q is multiplied by scale = K^-0.5 in bf16, as the kernels
  multiply it.  Gradients by torch autograd through the bf16 graph (bf16 gradients);
- reference: autograd of the fp64 recurrence (chunkproof.fuzz.reference).

Inputs: chunkproof.fuzz.cases.make_inputs(name, B, T, H, K, V, seed, bf16, h0=True), the
cotangents dO (bf16) and dS_T (fp32) from seed + 1 (chunkproof.bench.inputs.fuzz_case).
Errors: relative RMS against the fp64 reference, ||x - ref|| / ||ref||.

    OMP_NUM_THREADS=1 python benchmarks/bf16_vs_chunked.py
    python benchmarks/bf16_vs_chunked.py --variant rwkv6 --shape 1,128,2,64,64 --out ''

TRITON_INTERPRET=1 is set by the script itself (before triton is imported).
What it found: benchmarks/results/bf16_vs_chunked.md.
"""
import datetime
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from chunkproof.fuzz.chunked import Chunked, case, errors, reference  # noqa: E402

PROG = "bf16_vs_chunked.py"
NEW = ("delta_rule", "simple_gla", "retention", "rwkv6")
SHAPES = ((1, 128, 2, 64, 64), (1, 130, 1, 32, 48))
LIMIT = 1.2
OUT = os.path.join(HERE, "results", "bf16_vs_chunked.md")


# ------------------------------------------------------------------ the baseline
def compare(name, shape, seed, tf32, form):
    """{tensor: rel RMS} of ours, the all-bf16 baseline and the baseline with its log
    gates wide (None where the variant has no log gate: the same as all-bf16), and
    the seconds ours and the baselines took."""
    from chunkproof.bench import calls
    from chunkproof.fuzz.rounding import emulate
    x, h0, do, dht = case(name, shape, seed)
    scale = shape[3] ** -0.5
    want = reference(name, x, h0, do, dht, scale)
    t0 = time.time()
    base = Chunked(name, form)
    eb = errors(*base.fwd_bwd(x, scale, h0, do, dht, torch.bfloat16), want)
    el = None
    if base.has_gates():
        el = errors(*Chunked(name, form, logs="wide").fwd_bwd(x, scale, h0, do, dht, torch.bfloat16), want)
    t_base = time.time() - t0
    _, func = calls.ours(name)
    undo = emulate(tf32)
    try:
        t0 = time.time()
        oo, oht, og = calls.fwd_bwd_state(func, x, h0, do, dht, scale)
        t_ours = time.time() - t0
    finally:
        undo()
    return errors(oo, oht, og, want), eb, el, t_ours, t_base


def _ratio(a, b):
    import math
    if not (math.isfinite(a) and math.isfinite(b)):
        return float("nan")
    return a / b if b > 0 else float("inf")


def _bad(r):
    import math
    return not math.isfinite(r) or r > LIMIT


def table(rows):
    """The markdown table and the cases over the limit against the all-bf16 baseline
    (a non-finite error counts as over)."""
    lines = ["| variant | shape (B,T,H,K,V) | tensor | ours | baseline (all bf16) | ours / baseline | "
             "baseline (gates wide) | ours / it | |",
             "|---|---|---|---|---|---|---|---|---|"]
    over, over_l = [], []
    for name, shape, eo, eb, el in rows:
        for n in eo:
            r = _ratio(eo[n], eb[n])
            rl = _ratio(eo[n], el[n]) if el else r
            flag = []
            if _bad(r):
                over.append((name, shape, n, r))
                flag.append(f"**> {LIMIT}x**" if r == r else "**non-finite**")
            if el and _bad(rl):
                over_l.append((name, shape, n, rl))
                flag.append(f"> {LIMIT}x of the wide-gate baseline" if rl == rl else "")
            lc = f"{el[n]:.3e} | {rl:.2f}" if el else "(no gate) | "
            lines.append(f"| {name} | {','.join(map(str, shape))} | {n} | {eo[n]:.3e} | {eb[n]:.3e} | "
                         f"{r:.2f} | {lc} | {' '.join(f for f in flag if f)} |")
    return "\n".join(lines), over, over_l


def parse(argv):
    from chunkproof.bench import args as A
    from interp_rounding import MODES
    ap = A.Parser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", default=None,
                    help=f"a generated variant (repeatable, or comma-separated); default: {', '.join(NEW)}")
    ap.add_argument("--shape", action="append", default=None, metavar="B,T,H,K,V",
                    help="repeatable; default: " + " and ".join(",".join(map(str, s)) for s in SHAPES))
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--tf32", choices=MODES, default="trunc",
                    help="how the interpreter rounds tf32 products (default trunc, as cpu_grad_accuracy.py)")
    ap.add_argument("--form", choices=("kernel", "program"), default="kernel",
                    help="the baseline's O and S: the kernel declaration's claims (default) or the "
                         "program's own definitions")
    ap.add_argument("--out", default=OUT, help="markdown file to write ('' for none)")
    a = ap.parse_args(argv)
    names = [s.strip() for t in (a.variant or [",".join(NEW)]) for s in t.split(",") if s.strip()]
    if not names:
        raise ValueError("no variant given")
    a.variants = [A.variant(n) for n in names]
    a.shapes = [A.shape(s, "B,T,H,K,V") for s in a.shape] if a.shape else list(SHAPES)
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        print(f"{PROG}: error: triton was imported without TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    os.environ["TRITON_INTERPRET"] = "1"     # before triton is imported: the CPU's interpreter
    from chunkproof.bench import args as A
    try:
        a = parse(argv)
    except ValueError as e:
        return A.fail(PROG, e)
    import triton
    start = time.time()
    rows = []
    for name in a.variants:
        for shape in a.shapes:
            eo, eb, el, t_o, t_b = compare(name, shape, a.seed, a.tf32, a.form)
            rows.append((name, shape, eo, eb, el))
            rs = [_ratio(eo[n], eb[n]) for n in eo]
            worst = "nan (non-finite)" if any(r != r for r in rs) else f"{max(rs):.2f}"
            print(f"{name} {','.join(map(str, shape))}: ours {t_o:.1f} s, baselines {t_b:.1f} s, "
                  f"worst ratio to the all-bf16 baseline {worst}", flush=True)
    total = time.time() - start
    text, over, over_l = table(rows)

    def said(cases):
        return "; ".join(f"{n} {','.join(map(str, s))} {t} ({'non-finite' if r != r else f'{r:.2f}x'})"
                         for n, s, t, r in cases)
    verdict = ("every tensor of ours is within %.1fx of the all-bf16 baseline, or better" % LIMIT if not over
               else "ours is NOT within %.1fx of the all-bf16 baseline (or not finite) on: " % LIMIT + said(over))
    verdict += (". Against the baseline with wide gates: " +
                ("within %.1fx everywhere" % LIMIT if not over_l else "over %.1fx or not finite on: " % LIMIT
                 + said(over_l)))
    print(text)
    print()
    print(verdict)
    if a.out:
        cmd = "OMP_NUM_THREADS=1 python benchmarks/bf16_vs_chunked.py " + " ".join(argv)
        head = [
            "# bf16 errors: our generated kernels vs a plain PyTorch chunked implementation",
            "",
            f"Written by `benchmarks/bf16_vs_chunked.py` on {datetime.date.today().isoformat()} "
            f"(issue 17's target: within {LIMIT}x of a plain PyTorch chunked bf16 implementation, or better).",
            "",
            f"- command: `{cmd.strip()}`",
            f"- torch {torch.__version__}, triton {triton.__version__}, CPU "
            f"(Triton's interpreter, TRITON_INTERPRET=1, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})",
            f"- rounding: the H200's emulated (chunkproof.fuzz.rounding): fp32 -> bf16 casts to "
            f"nearest even, tf32 products' operands `{a.tf32}`",
            f"- variants: {', '.join(a.variants)}; shapes (B,T,H,K,V): "
            + ", ".join("(" + ",".join(map(str, s)) + ")" for s in a.shapes) + f"; seed {a.seed}",
            "- inputs: chunkproof.fuzz.cases.make_inputs(..., bf16, h0=True) (fp32 h0), cotangents dO (bf16) "
            "and dS_T (fp32) from seed + 1 (chunkproof.bench.inputs.fuzz_case); q scaled by K^-0.5",
            "- ours: the generated kernel, forward + backward by autograd of <dO, O> + <dS_T, S_T>",
            f"- baseline: the kernel's own chunk program ({'the declaration' + chr(39) + 's output and state claims' if a.form == 'kernel' else 'its O and S definitions'}), "
            "evaluated chunk by chunk (C = the kernel's BT) with torch bf16 tensors by "
            "chunkproof.verify.evaluate.BlockEval over a bf16 field: every op's result bf16, the delta "
            "rule's triangular inverse in fp32 cast back to bf16, the state carried in bf16 (h0 cast to bf16); "
            "parameters as the kernel declaration binds them; gradients by torch autograd (bf16)",
            "- baseline (gates wide): the same, but every log-space node (a log-gate input, its prefix "
            "sums and differences: the checker's own log typing) and every node computed from gates alone "
            "(gate arguments, fixed per-head decays, their products and ratios) held in fp64 (FLA holds "
            "gates in fp32; the program's product-space gate ratios leave fp32's range: "
            "chunkproof.fuzz.chunked), every other node rounded to bf16 (only for variants with a gate)",
            "- errors: relative RMS against autograd of the fp64 recurrence; ratio = ours / baseline",
            f"- time: {total:.0f} s in all",
            "",
            text,
            "",
            f"**Verdict:** {verdict}.",
            "",
        ]
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as fh:
            fh.write("\n".join(head))
        print(f"wrote {a.out}")
    print(f"took {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
