"""`chunkproof bench`: our kernels, FLA's and torch's causal SDPA side by side on a GPU,
each of ours and FLA's through a correctness gate against the fp64 recurrence first.
The machinery is chunkproof.bench (runner, gate, sides, report); this module is the
command line only, and imports nothing heavy until the command runs (the CLI's other
commands start without torch's CUDA, Triton or FLA)."""
import os
import sys

DEFAULT_SHAPES = "4x4096x16x128,2x16384x16x128,8x2048x16x64,1x8192x96x128"
INTERPRET_SHAPES = "1x64x2x16"
INTERPRET_MAX_ELEMENTS = 1 << 18      # B*T*H*D: beyond it the interpreter takes many minutes
DEFAULT_OUT = os.path.join("benchmarks", "results", "latest.json")


def add_parser(sub):
    p = sub.add_parser("bench", help="time our kernels beside FLA's and SDPA's on a GPU, after a correctness gate",
                       description="Our kernels, FLA's and torch's causal SDPA side by side on a GPU, bf16, "
                                   "forward and forward + backward; ours and FLA's each through a correctness "
                                   "gate against the fp64 recurrence before they are timed (docs/bench.md).")
    p.add_argument("--variant", action="append", default=[],
                   help="a generated variant (gla, gated_delta_rule, kda, dplr_delta_rule, ...) or a derivation "
                        "file (its kernels printed first), comma-separated or repeated, or all (the default)")
    p.add_argument("--mode", choices=["fwd", "fwd+bwd", "both"], default="both")
    p.add_argument("--shapes", default=None, metavar="BxTxHxD,...",
                   help=f"default {DEFAULT_SHAPES} ({INTERPRET_SHAPES} with --interpret)")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16",
                   help="q, k, v (and beta, a, b); gates are fp32")
    p.add_argument("--gate-t", type=int, default=256, metavar="STEPS",
                   help="the gate compares on the first STEPS steps (the fp64 oracle is sequential; default 256)")
    p.add_argument("--tol", type=float, default=None,
                   help="the gate's rel RMS tolerance (default the fuzz campaign's: 5e-2 bf16/fp16, 1e-4 fp32)")
    p.add_argument("--no-fla", action="store_true", help="ours (and SDPA) only")
    p.add_argument("--fla-force", action="store_true",
                   help="run FLA's gated backward where FLA 0.6 refuses it on Hopper with Triton < 3.7.1 (its "
                        "#640: its gradients may be wrong; they go through the gate like any others)")
    p.add_argument("--fla-no-dispatch", action="store_true",
                   help="set FLA_DISABLE_BACKEND_DISPATCH=1: FLA's own Triton kernels, no other backend")
    p.add_argument("--no-sdpa", action="store_true")
    p.add_argument("--triton-cache", "--fla-cache", dest="triton_cache", metavar="DIR",
                   help="Triton's compile cache and autotune results in DIR (TRITON_CACHE_DIR, "
                        "TRITON_CACHE_AUTOTUNING=1): FLA's first autotune takes 30-100 s per variant without it")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no side after SECONDS; what is left becomes rows noted 'not run'")
    p.add_argument("--bandwidth", type=float, default=None, metavar="B/s",
                   help="the memory floor's bandwidth (default: measured here by a 1 GiB copy)")
    p.add_argument("--reps", type=int, default=1, help="do_bench calls per time (their median; default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", "-o", default=None,
                   help=f"the JSON (default {DEFAULT_OUT}; with --interpret none unless given)")
    p.add_argument("--interpret", action="store_true",
                   help="no GPU: the whole pipeline under Triton's CPU interpreter at tiny shapes (a test: the "
                        "times are meaningless)")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="measure nothing: combine these runs' JSON (e.g. one per GPU) into -o and print the table")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_bench)
    return p


def _variants(given, files=True):
    """The variants to time: bundled names or functions, ``all``, and derivation files
    (kept as their paths: _registered prints their kernels; ``files`` False refuses
    them: --merge reads rows, it prints nothing)."""
    from chunkproof.derivations.loader import InputError
    from chunkproof.fuzz.cases import API, VARIANTS
    by_func = {f: n for n, f in API.items()}
    names = []
    for item in given or ["all"]:
        for v in filter(None, (s.strip() for s in item.split(","))):
            if v == "all":
                names += VARIANTS
            elif v in VARIANTS or v in by_func:
                names.append(by_func.get(v, v))
            elif v.endswith(".py") or os.path.exists(v):
                if not files:
                    raise InputError(f"--variant {v}: with --merge, name a derivation's kernels by their module "
                                     f"names (the rows' variant column), not by its file")
                if not os.path.isfile(v):
                    raise InputError(f"--variant {v}: no such derivation file")
                names.append(v)
            else:
                raise InputError(f"unknown variant {v!r} (variants: {', '.join(VARIANTS)}, or all)")
    return list(dict.fromkeys(names))


def _registered(names, say):
    """``names`` (as _variants gives them) with each derivation file replaced by its
    kernels' names, printed by `chunkproof gen` and registered as `chunkproof fuzz
    FILE.py` does (chunkproof.fuzz.user)."""
    from chunkproof.fuzz.cases import VARIANTS
    from chunkproof.fuzz.user import register
    bundled = set(VARIANTS)     # _variants let through bundled names and files alone
    out = []
    for v in names:
        out += [v] if v in bundled else register(v, progress=say)
    return list(dict.fromkeys(out))


def _environment(args):
    """Set what Triton and FLA read when first imported; refuse a combination that can
    no longer take effect."""
    from chunkproof.derivations.loader import InputError
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if args.interpret and not interp:
        if "triton" in sys.modules:
            raise InputError("--interpret: Triton was imported before TRITON_INTERPRET=1 could be set")
        os.environ["TRITON_INTERPRET"] = "1"
    elif not args.interpret and interp:
        raise InputError("TRITON_INTERPRET=1 is set: unset it to time compiled kernels, or pass --interpret")
    if args.triton_cache:
        os.makedirs(args.triton_cache, exist_ok=True)
        os.environ["TRITON_CACHE_DIR"] = os.path.abspath(args.triton_cache)
        os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
    if args.fla_no_dispatch:
        from chunkproof.bench.fla import DISPATCH_MODULES
        if any(m in sys.modules for m in DISPATCH_MODULES) and \
                os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") != "1":
            raise InputError("--fla-no-dispatch: FLA was imported before FLA_DISABLE_BACKEND_DISPATCH=1 could be set")
        os.environ["FLA_DISABLE_BACKEND_DISPATCH"] = "1"


def _merge(args):
    import json
    from chunkproof.bench import report
    from chunkproof.derivations.loader import InputError
    order = _variants(args.variant, files=False)
    docs = []
    for path in args.merge:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise InputError(f"--merge {path}: {e}") from None
        if doc.get("schema") != report.SCHEMA:
            raise InputError(f"--merge {path}: not a `chunkproof bench` JSON ({report.SCHEMA})")
        docs.append(doc)
    doc = report.merge(docs, order)
    if args.output or not any(d["meta"].get("interpreter") for d in docs):
        report.write_json(args.output or DEFAULT_OUT, doc)
    sys.stdout.write(report.table(doc))
    return 0 if all(r["ours_ms"] is not None for r in doc["rows"]) else 1


def cmd_bench(args):
    from chunkproof.bench import args as A
    from chunkproof.derivations.loader import InputError
    if args.merge:
        return _merge(args)
    variants = _variants(args.variant)
    try:
        shapes = A.shapes(args.shapes or (INTERPRET_SHAPES if args.interpret else DEFAULT_SHAPES))
    except ValueError as e:
        raise InputError(f"--shapes: {e}") from None
    if args.interpret:
        big = [s for s in shapes if s[0] * s[1] * s[2] * s[3] > INTERPRET_MAX_ELEMENTS]
        if big:
            raise InputError(f"--interpret: shape {'x'.join(map(str, big[0]))} is too large for Triton's interpreter "
                             f"(B*T*H*D at most {INTERPRET_MAX_ELEMENTS}; e.g. --shapes {INTERPRET_SHAPES})")
    for name, value in (("--gate-t", args.gate_t), ("--reps", args.reps)):
        if value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    if args.budget is not None and args.budget < 0 or args.bandwidth is not None and args.bandwidth <= 0:
        raise InputError("--budget must be >= 0 and --bandwidth > 0")
    _environment(args)     # before a derivation file's kernels import triton
    import torch
    if not args.interpret and not torch.cuda.is_available():
        raise InputError("no CUDA GPU here: `chunkproof bench` times compiled kernels on a GPU "
                         "(--interpret runs the pipeline under Triton's CPU interpreter at tiny shapes, as a test)")
    from chunkproof.codegen.plan import Refused
    try:
        variants = _registered(variants, None if args.quiet else (lambda m: print(f"chunkproof bench: {m}",
                                                                                  file=sys.stderr, flush=True)))
    except Refused as e:
        sys.stderr.write(f"chunkproof bench: refused: {e}\n")
        return 1
    return _run(args, variants, shapes)


def _run(args, variants, shapes):
    import warnings
    from chunkproof.bench import report, runner
    modes = list(runner.MODES) if args.mode == "both" else [args.mode]
    out = args.output or (None if args.interpret else DEFAULT_OUT)
    meta = {"command": "chunkproof " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["bench"] else "chunkproof bench"}
    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.interpret:
        # the interpreter evaluates tiles the compiled kernels never form, and numpy warns
        # when they overflow; the gate judges the outputs
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
        say("chunkproof bench: --interpret: Triton's CPU interpreter; the times are meaningless")
    if out is None:
        say("chunkproof bench: no JSON written (--interpret without -o keeps benchmarks/results/ for GPU runs)")

    def save(rows, details, complete=False):
        if out:
            report.write_json(out, report.clean(report.document(rows, details, meta, complete)))

    opts = runner.Options(variants=variants, modes=modes, shapes=shapes, dtype=args.dtype, interpret=args.interpret,
                          gate_t=args.gate_t, tol=args.tol, fla=not args.no_fla, fla_force=args.fla_force,
                          sdpa=not args.no_sdpa, budget_s=args.budget, bandwidth=args.bandwidth, reps=args.reps,
                          seed=args.seed, log=say, on_row=save, meta=meta)
    rows, details = runner.Bench(opts).run()
    save(rows, details, complete=True)
    sys.stdout.write(report.table(report.clean(report.document(rows, details, meta, True))))
    if out:
        say(f"chunkproof bench: wrote {out}")
    untimed = sum(r["ours_ms"] is None for r in rows)
    if untimed:
        say(f"chunkproof bench: {untimed} of {len(rows)} rows have no time of ours (their notes say why)")
    return 1 if untimed else 0
