"""Our generated kernels' bf16 errors beside a plain PyTorch chunked implementation's,
in bf16 on the same inputs (issue 17: "within 1.2x of a plain PyTorch chunked
implementation in bf16, or better").

- ours: the generated kernel (chunkproof.kernels.<name>) under Triton's interpreter with
  the H200's rounding emulated (benchmarks/interp_rounding.py: fp32 -> bf16 casts round
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

PROG = "bf16_vs_chunked.py"
NEW = ("delta_rule", "simple_gla", "retention", "rwkv6")
SHAPES = ((1, 128, 2, 64, 64), (1, 130, 1, 32, 48))
LIMIT = 1.2
OUT = os.path.join(HERE, "results", "bf16_vs_chunked.md")


# ------------------------------------------------------------------ the baseline
def _field(dtype):
    from chunkproof.verify.fields import Float

    class TorchField(Float):
        """The checker's float field on torch tensors of one dtype: every op's result
        in ``dtype``; the inverse in fp32 (cast back) when ``dtype`` is narrower."""
        exact = False

        def __init__(self):
            super().__init__()
            self.name = f"torch {dtype}"
            self.dtype = dtype

        def const(self, a):
            return torch.as_tensor(a).to(dtype)

        def eye(self, n):
            return torch.eye(n, dtype=dtype)

        def zeros(self, r, c):
            return torch.zeros(r, c, dtype=dtype)

        def ones(self, r, c):
            return torch.ones(r, c, dtype=dtype)

        def inv(self, a):
            if dtype in (torch.float32, torch.float64):
                return torch.linalg.inv(a)
            return torch.linalg.inv(a.float()).to(dtype)

        def matmul(self, a, b):
            if a.dtype != b.dtype:     # a log-space fp32 tile (--logs fp32) meets a mask
                a, b = a.float(), b.float()
            return a @ b

        def exp(self, a):
            return torch.exp(a)

        def log(self, a):
            return torch.log(a)

        def T(self, a):
            return a.transpose(-1, -2)

        def vstack(self, xs):
            return torch.cat(xs, dim=-2)

        def hstack(self, xs):
            return torch.cat(xs, dim=-1)

    return TorchField()


def _evaluator(dtype, logs_fp32):
    """BlockEval; with ``logs_fp32`` every log-space node (a log gate, its prefix sums and
    their differences: the checker's own typing, evaluate._LOG_TYPED) is kept in fp32 and
    every other node's value is rounded to ``dtype``, as an implementation that holds its
    gates in fp32 (FLA's convention) would."""
    from chunkproof.verify import evaluate as E
    if not logs_fp32:
        return E.BlockEval

    class MixedEval(E.BlockEval):
        def visit(self, e, env):
            val = super().visit(e, env)
            if torch.is_tensor(val) and val.dtype != dtype and not E._LOG_TYPED.visit(e, self):
                val = val.to(dtype)
            return val
    return MixedEval


class Chunked:
    """A plain chunked implementation of variant ``name`` built from its kernel's chunk
    program (nothing here knows a variant by name)."""

    def __init__(self, name, form="kernel", C=None, logs="bf16"):
        from chunkproof.codegen.plan import _claim, derivation_of
        from chunkproof.codegen.variants import BY_NAME
        self.v = v = BY_NAME[name]
        self.deriv = d = derivation_of(v)
        self.prog = d.programs[v.program]
        self.rec_name = d.program_recurrence[v.program]
        self.rec = d.recurrences[self.rec_name]
        if form == "kernel":       # the claims the kernel is printed from
            self.o_expr = _claim(d, v.out_claim).rhs
            self.s_expr = _claim(d, v.state_claim).rhs
        elif form == "program":    # the program's own definitions
            defs = dict(self.prog.defs)
            self.o_expr, self.s_expr = defs[self.prog.output], defs[self.prog.state]
        else:
            raise ValueError(f"unknown form {form!r}; choose from kernel, program")
        self.form = form
        if logs not in ("bf16", "fp32"):
            raise ValueError(f"unknown log-gate precision {logs!r}; choose from bf16, fp32")
        self.logs = logs
        if C is None:
            from chunkproof.fuzz.cases import module
            C = int(module(name).TILING.BT) if hasattr(module(name), "TILING") else 64
        self.C = C
        self.bindings = [p for k in d.kernels if k.module == v.name for p in k.params]
        self.decl = d.parameters()
        self.by_tile = {i.seq: i for i in self.rec.inputs}

    def arg_names(self):
        return [a.name for a in self.v.args] + [p.name for p in self.bindings if p.kind == "head_arg"]

    def _params(self, H, h, dtype, inputs):
        """name -> value (rows x cols of the declaration) for head h."""
        out = {}
        for p in self.bindings:
            decl = self.decl[p.name]
            if p.kind == "head_log":
                hh = torch.arange(H, dtype=torch.float64)
                val = torch.exp(eval(p.code, {"torch": torch, "h": hh}))[h]   # noqa: S307 (the declaration's code)
                val = val.reshape(1, 1).to(dtype)
            elif p.kind == "const":
                val = torch.tensor([[p.value]], dtype=dtype)
            else:     # head_arg: an [H, d] input
                val = inputs[p.name][h].reshape(-1, 1)
            if decl.rows == "1" and decl.cols == "1":
                val = val.reshape(1, 1)
            out[p.name] = val
        return out

    def __call__(self, inputs, scale, h0, dtype):
        """o [B, T, H, V] and the final state [B, H, K, V] in ``dtype``, differentiable in
        ``inputs`` (the API's names) and ``h0``.  Inputs are cast to ``dtype`` first."""
        from chunkproof.verify.evaluate import BlockEval, Point, Sizes
        f = _field(dtype)
        mixed = self.logs == "fp32" and dtype != torch.float64
        Eval = _evaluator(dtype, mixed)
        x = {n: t.to(dtype) for n, t in inputs.items()}
        q0 = self.v.args[0].name
        B, T, H, K = x[q0].shape
        tiles = {}
        for a in self.v.args:
            logs = mixed and self.by_tile[a.tile].kind == "loggate" and not a.kind.startswith("gate")
            t = inputs[a.name].float() if logs else x[a.name]   # a log gate kept in fp32 (--logs fp32)
            t = t if t.dim() == 4 else t[..., None]           # [B, T, H, d]
            if a.name == q0:
                t = t * scale          # as the kernels do: q times scale (here in dtype)
            if a.kind.startswith("gate"):                        # a log_of() argument
                t = torch.exp(t)
            tiles[a.tile] = t
        Vd = next(tiles[i.seq].shape[-1] for i in self.rec.inputs if i.dim == "Dv")
        S0 = h0.to(dtype) if h0 is not None else torch.zeros(B, H, K, Vd, dtype=dtype)
        o = [[None] * H for _ in range(B)]
        hts = [[None] * H for _ in range(B)]
        for b in range(B):
            for h in range(H):
                params = self._params(H, h, dtype, x)
                S = S0[b, h].transpose(0, 1)                   # V x K, the program's state
                outs = []
                for lo in range(0, T, self.C):
                    hi = min(T, lo + self.C)
                    seq = {n: t[b, lo:hi, h] for n, t in tiles.items()}
                    pt = Point(self.deriv, self.rec_name, f, Sizes(C=hi - lo, Dk=K, Dv=Vd, N=1),
                               seq, None, None, None, params)
                    ev = Eval(pt, self.prog, 0, f, S_prev=S)
                    outs.append(ev.ev(self.o_expr, {}))
                    S = ev.ev(self.s_expr, {})
                o[b][h] = torch.cat(outs, dim=0)               # T x V
                hts[b][h] = S.transpose(0, 1)                  # K x V
        o = torch.stack([torch.stack(r, dim=1) for r in o], dim=0)       # [B, T, H, V]
        ht = torch.stack([torch.stack(r, dim=0) for r in hts], dim=0)    # [B, H, K, V]
        return o, ht

    def fwd_bwd(self, inputs, scale, h0, do, dht, dtype):
        """(o, final state, {name: gradient}) of L = <dO, O> + <dS_T, S_T>, by autograd."""
        leaves = {n: t.detach().requires_grad_() for n, t in inputs.items()}
        h0l = h0.detach().requires_grad_()
        with torch.enable_grad():
            o, ht = self(leaves, scale, h0l, dtype)
            loss = (o.double() * do.double()).sum() + (ht.double() * dht.double()).sum()
            grads = torch.autograd.grad(loss, list(leaves.values()) + [h0l])
        return o.detach(), ht.detach(), dict(zip(list(leaves) + ["initial_state"], grads))


# ------------------------------------------------------------------ the comparison
def reference(name, x, h0, do, dht, scale):
    from chunkproof.fuzz.reference import recurrence, reference_grads
    from chunkproof.bench.metrics import reference_names
    ref = reference_names(x)
    o, ht = recurrence(name, scale=scale, initial_state=h0, **ref)
    g = reference_grads(name, ref, do, dht, scale=scale, initial_state=h0)
    return o, ht, {("gk" if n == "g" and "gk" in x else n): t for n, t in g.items()}


def case(name, shape, seed):
    from chunkproof.bench.inputs import fuzz_case
    B, T, H, K, V = shape
    return fuzz_case(name, B, T, H, K, V, seed)


def errors(o, ht, grads, want):
    from chunkproof.fuzz.reference import rel_rms
    wo, wht, wg = want
    out = {"o": rel_rms(o, wo), "ht": rel_rms(ht, wht)}
    for n, g in grads.items():
        out["d" + ("h0" if n == "initial_state" else n)] = rel_rms(g, wg[n])
    return out


def compare(name, shape, seed, tf32, form):
    """{tensor: rel RMS} of ours, the all-bf16 baseline and the baseline with its log
    gates in fp32 (None where the variant has no log gate: the same as all-bf16), and
    the seconds ours and the baselines took."""
    from chunkproof.bench import calls
    from interp_rounding import emulate
    x, h0, do, dht = case(name, shape, seed)
    scale = shape[3] ** -0.5
    want = reference(name, x, h0, do, dht, scale)
    t0 = time.time()
    base = Chunked(name, form)
    eb = errors(*base.fwd_bwd(x, scale, h0, do, dht, torch.bfloat16), want)
    el = None
    if any(i.kind == "loggate" for i in base.rec.inputs):
        el = errors(*Chunked(name, form, logs="fp32").fwd_bwd(x, scale, h0, do, dht, torch.bfloat16), want)
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
             "baseline (log gates fp32) | ours / it | |",
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
                flag.append(f"> {LIMIT}x of the fp32-gate baseline" if rl == rl else "")
            lc = f"{el[n]:.3e} | {rl:.2f}" if el else "(no log gate) | "
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
    verdict += (". Against the baseline with fp32 log gates: " +
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
            f"- rounding: the H200's emulated (benchmarks/interp_rounding.py): fp32 -> bf16 casts to "
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
            "- baseline (log gates fp32): the same, but every log-space node (a log-gate input, its prefix "
            "sums and differences: the checker's own log typing) held in fp32, as FLA holds gates; every other "
            "node rounded to bf16 (only for variants with a log-gate input)",
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
