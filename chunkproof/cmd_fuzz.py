"""`chunkproof fuzz`: the command line of the Hypothesis campaign in chunkproof.fuzz
(docs/fuzz.md).  Nothing heavy is imported until the command runs: the CLI's other
commands start without torch, Triton or Hypothesis."""
import os
import sys

from chunkproof.fuzz import DEFAULT_DB, DEFAULT_SAVE

PROPERTY_NAMES = ("matches_fp64", "extreme_gates", "causality", "split_sequence", "poisoned_outputs",
                  "grouped_heads", "l2norm_in_kernel", "packed_sequences", "recurrent_form")
EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_parser(sub):
    p = sub.add_parser("fuzz", help="property-based campaign (Hypothesis) of the generated kernels against the fp64 "
                                    "recurrence",
                       description="Hypothesis draws examples (shape, regime, the seed of the values) for each "
                                   "property and variant, shrinks a failure to the smallest example that still fails, "
                                   "saves it in the example database and in a readable pin, both replayed by the "
                                   "tests (docs/fuzz.md).")
    p.add_argument("targets", nargs="*", metavar="VARIANT",
                   help="bundled variants to fuzz (like --variant), or derivation files: their kernels are "
                        "printed by chunkproof gen and fuzzed against their own recurrence")
    p.add_argument("--variant", action="append", default=[],
                   help="a bundled variant (its module name: gla, delta_rule, rwkv6, ...) or all "
                        "(default all; repeatable)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cpu: Triton's interpreter at small shapes; cuda: compiled kernels at real shapes")
    p.add_argument("--examples", type=int, default=10,
                   help="Hypothesis's max_examples per (property, variant) (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seeds Hypothesis's search: the same seed, the same campaign")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--property", action="append", default=[],
                   help=f"only this property (repeatable): {', '.join(PROPERTY_NAMES)}")
    p.add_argument("--db", default=DEFAULT_DB, metavar="DIR",
                   help=f"Hypothesis's example database, replayed first and where failures are saved "
                        f"(default {DEFAULT_DB}, which the tests replay)")
    p.add_argument("--no-db", action="store_true",
                   help="no example database: nothing replayed first, failures pinned in --save's file only")
    p.add_argument("--save", default=DEFAULT_SAVE, metavar="FILE",
                   help=f"shrunk failures are merged into this JSON file (default {DEFAULT_SAVE}, which the "
                        f"tests replay)")
    p.add_argument("--no-save", action="store_true",
                   help="save no failure (the database is still replayed, read-only)")
    p.add_argument("--replay", metavar="EXAMPLE",
                   help="run this one example, as a failure prints it ('B=1 T=50 H=1 K=1 V=1 h0=False ... "
                        "seed=0'), with one --variant and one --property")
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_fuzz)
    return p


def _variants(args, known):
    """The variants to fuzz: bundled names, ``all``, and derivation files (their kernels
    are printed and registered first: chunkproof.fuzz.user)."""
    from chunkproof.derivations.loader import InputError
    files = [t for t in args.targets if t.endswith(".py") or os.sep in t or os.path.exists(t)]
    names = []
    for t in files:
        from chunkproof.fuzz.user import register
        say = None if args.quiet else (lambda m: sys.stderr.write(f"chunkproof fuzz: {m}\n"))
        names += register(t, progress=say)
    given = [t for t in args.targets if t not in files] + args.variant
    for v in given or ([] if files else ["all"]):
        names += known if v == "all" else [v]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown variant {unknown[0]!r} (variants: {', '.join(known)}, or all)")
    return list(dict.fromkeys(names))


def _environment(args):
    import warnings
    from chunkproof.derivations.loader import InputError
    from importlib.util import find_spec
    if find_spec("hypothesis") is None:   # a test extra, not a dependency: say so, not a traceback
        raise InputError("chunkproof fuzz needs Hypothesis: pip install hypothesis")
    import torch
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise InputError("--device cuda: no CUDA device here (use --device cpu for Triton's interpreter)")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise InputError("--device cuda with TRITON_INTERPRET=1: unset it to run compiled kernels")
    else:
        # before triton is first imported: the kernels run under its interpreter
        os.environ["TRITON_INTERPRET"] = "1"
        # the interpreter evaluates every line of a kernel, including dense tiles the
        # compiled kernel never forms (their stable forms are used instead), and numpy
        # warns when those overflow; the properties judge the outputs, not the warnings
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")


def _database(args):
    if args.no_db:
        return None
    from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase
    db = DirectoryBasedExampleDatabase(args.db)
    return ReadOnlyDatabase(db) if args.no_save else db


def _replay(args, names, props):
    from chunkproof.derivations.loader import InputError
    from chunkproof.fuzz.campaign import Cell, check, table
    from chunkproof.fuzz.example import parse
    if len(names) != 1 or len(props) != 1:
        raise InputError("--replay runs one example: give one --variant and one --property")
    try:
        ex = parse(args.replay, names[0], props[0], args.device, args.dtype)
    except ValueError as e:
        raise InputError(f"--replay: {e}") from None
    ok, err, tol, rec = check(ex)
    cell = Cell(examples=1, failures=int(not ok), worst=err, tol=tol)
    text = table({(ex.prop, ex.variant): cell}, args.device, args.dtype, 1, args.seed,
                 title=f"fuzz replay: device {args.device}, {args.dtype}, one example")
    text += f"\n{ex.describe()}: {'passes' if ok else 'FAILS'}: {rec['detail']}\n"
    sys.stdout.write(text)
    return EXIT_OK if ok else EXIT_FAIL


def cmd_fuzz(args):
    from chunkproof.codegen.plan import Refused
    from chunkproof.derivations.loader import InputError
    from chunkproof.fuzz.cases import VARIANTS
    if args.examples < 1:
        raise InputError(f"--examples must be at least 1, got {args.examples}")
    props = list(dict.fromkeys(args.property)) or list(PROPERTY_NAMES)
    bad = [p for p in props if p not in PROPERTY_NAMES]
    if bad:
        raise InputError(f"unknown property {bad[0]!r} (properties: {', '.join(PROPERTY_NAMES)})")
    _environment(args)   # before a derivation file's kernels import triton
    try:
        names = _variants(args, VARIANTS)
    except Refused as e:
        sys.stderr.write(f"chunkproof fuzz: refused: {e}\n")
        return EXIT_FAIL
    from chunkproof.fuzz.properties import applies
    if not any(applies(p, v) for v in names for p in props):
        raise InputError(f"{', '.join(props)} {'applies' if len(props) == 1 else 'apply'} to none of "
                         f"{', '.join(names)} (l2norm_in_kernel: the functions with use_qk_l2norm_in_kernel)")
    if args.replay:
        return _replay(args, names, props)
    from chunkproof.fuzz.campaign import Interrupted, run_campaign, save_failures, table
    interrupted = False
    try:
        cells = run_campaign(names, props, args.device, args.dtype, args.examples, args.seed,
                             database=_database(args), quiet=args.quiet)
    except Interrupted as e:   # report and save what ran: a long campaign is not lost to Ctrl-C
        cells, interrupted = e.cells, True
    text = table(cells, args.device, args.dtype, args.examples, args.seed, None if args.no_db else args.db)
    if interrupted:
        text += "\n(interrupted: the table holds the examples that ran)\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    nfail = sum(c.failures for c in cells.values())
    if nfail and not args.no_save:
        n = save_failures(args.save, cells)
        where = "" if args.no_db else f" and in the example database {args.db}"
        what = (f"{n} new shrunk failure{'s' if n != 1 else ''} pinned" if n
                else "the shrunk failures were already pinned")
        sys.stderr.write(f"chunkproof fuzz: {what} in {args.save}{where} (tests/test_fuzz.py replays both)\n")
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAIL if nfail else EXIT_OK
