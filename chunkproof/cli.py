"""The `chunkproof` command line."""
from __future__ import annotations

import argparse
import os
import sys

from chunkproof import __version__, cmd_bench, cmd_derive, cmd_fuzz
from chunkproof.derivations.loader import InputError, from_file, resolve

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


_MARK = {"fails": "FAIL", "ill-formed": "ILL", "error": "ERR"}


class _Progress:
    """What run_checks calls as each claim is decided.  On a terminal: a progress
    line redrawn in place, and each claim that does not hold on a line of its own
    above it, so no failure is ever drawn over.  Elsewhere (a log, a pipe): nothing
    until the one final line."""

    def __init__(self, stream=None):
        self.out = stream or sys.stderr
        self.tty = self.out.isatty()
        self.live = []  # claims already named on a line of their own

    def __call__(self, done, n, r):
        if not self.tty:
            return
        c = r.claim
        line = ""
        if r.verdict != "holds":
            line = f"{_MARK.get(r.verdict, r.verdict):4s} {c.id}  ({c.citation})"
            if r.verdict in ("ill-formed", "error") and r.message:
                line += f": {r.message}"
            line += "\n"
            self.live.append(c.id)
        bar = f"[{done}/{n}] {c.id}: {r.verdict} ({r.seconds:.2f} s)"
        self.out.write("\r\033[K" + line + bar)
        self.out.flush()

    def finish(self, results, secs):
        bad = sum(r.verdict != "holds" for r in results)
        msg = (f"chunkproof: checked {len(results)} claims in {secs:.1f} s: "
               + (f"{bad} {'does' if bad == 1 else 'do'} not hold" if bad else "every claim holds"))
        self.out.write(("\r\033[K" if self.tty else "") + msg + "\n")
        self.out.flush()


def _one_line_problems(results, already=(), sources=None):
    """One line per claim that is ill-formed or cannot be evaluated (stderr), unless
    the progress already gave it one; it names the derivation's file where known."""
    for r in results:
        if r.verdict in ("ill-formed", "error") and r.claim.id not in already:
            c = r.claim
            where = (sources or {}).get(c.derivation) or c.derivation
            sys.stderr.write(f"{where}: {c.id} ({c.citation}): {r.verdict}: {r.message}\n")


def cmd_report(args):
    # verify imports sympy (0.7 s): the commands that check no claim start without it
    from chunkproof.verify import report
    from chunkproof.verify.levels import size_sets
    from chunkproof.verify.programs import prepare
    from chunkproof.verify.run import run_checks
    from chunkproof.verify.validate import validate, validate_sizes
    if args.format == "json" and args.show:
        sys.stderr.write("chunkproof: note: --show does not apply to json, which has every claim\n")
    if args.cmd == "verify":
        derivs = [d for t in args.targets for d in from_file(t, args.debug)]
    else:
        derivs = resolve(args.targets, args.debug)
    validate(derivs)
    derivs = prepare(derivs, args.sizes)   # --sizes, and an entry per program
    validate_sizes(derivs, size_sets(), args.claim)
    progress = None if args.quiet else _Progress()
    results, secs = run_checks(derivs, args.claim, args.jobs, not args.no_float,
                               not args.no_diagnose, args.seed, on_result=progress,
                               suggest=not args.no_suggest)
    if not results:
        if progress is not None and progress.tty:
            sys.stderr.write("\r\033[K")
        raise InputError(f"no claim matches {args.claim!r}")
    if progress is not None:
        progress.finish(results, secs)
    _one_line_problems(results, progress.live if progress is not None else (),
                       {d.name: d.source for d in derivs})
    if args.format == "html":
        from chunkproof.verify.report_html import render_html
        text = render_html(results, secs, show=args.show or report.SHOW_DEFAULT["html"])
    else:
        text = report.render(args.format, results, secs, show=args.show)
    if args.output:
        _write_whole(args.output, text + "\n")
    else:
        sys.stdout.write(text + "\n")
    if any(r.verdict == "error" for r in results):
        return EXIT_INPUT
    return EXIT_OK if all(r.verdict == "holds" for r in results) else EXIT_FAIL


def _write_whole(path, text):
    """Write ``path`` completely or not at all: a temporary file beside it, renamed
    over it, so that a reader never sees half a report."""
    import tempfile
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".chunkproof-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise InputError(f"-o {path}: cannot write there: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        raise InputError(f"-o {path}: cannot write: {e.strerror or e}") from None


def _add_report_args(p):
    p.add_argument("--format", choices=["table", "json", "markdown", "html"], default="table",
                   help="table (default), json (every claim, for programs), markdown, or html "
                        "(one standalone page with rendered math; opens offline)")
    p.add_argument("--show", choices=["failing", "all"], default=None,
                   help="which claims the report details: 'failing' (the default for the table: "
                        "the claims that do not hold are what there is to read) or 'all' (the "
                        "default for markdown and html); the summary always counts every claim, "
                        "and json always has every claim")
    p.add_argument("--output", "-o", help="write the report to this file instead of stdout")
    p.add_argument("--claim", default="", help="only claims whose id contains this text")
    p.add_argument("--jobs", "-j", type=int, default=min(2, os.cpu_count() or 1),
                   help="worker processes (default: up to 2)")
    p.add_argument("--seed", type=int, default=0,
                   help="base seed of the exact points (points use seed+1, seed+2)")
    p.add_argument("--sizes", default="", metavar="SETS",
                   help="exact-level size sets, ';'-separated, e.g. 'C=6,Dk=3,Dv=5,chunks=3,T=2;"
                        "C=5,Dk=4,Dv=2,chunks=3' (the default; chunks defaults to 3, T to 1)")
    p.add_argument("--no-float", action="store_true", help="skip the float64 level")
    p.add_argument("--no-diagnose", action="store_true",
                   help="skip smallest-size search and sympy residuals for failures")
    p.add_argument("--no-suggest", action="store_true",
                   help="skip the repair search (a verified one-edit fix for each claim that "
                        "does not hold)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def cmd_gen(args):
    """Print generated_kernels/ (or a derivation file's kernels) from the verified
    claims; --check compares instead."""
    # codegen (and the verifier under it) loads only for this command
    from chunkproof.codegen import gen
    from chunkproof.codegen.plan import Refused
    from chunkproof.codegen.printer import CodegenError
    from chunkproof.codegen.variants import BY_NAME, VARIANTS
    from chunkproof.fuzz.precision_measure import Measure
    if args.target and args.variant:
        raise InputError("--variant picks among the bundled kernels; a derivation file prints all it declares")
    if args.target:
        variants = gen.user_variants(args.target)
        out_dir = args.out or gen.default_out(args.target)
    else:
        unknown = [n for n in args.variant if n not in BY_NAME]
        if unknown:
            raise InputError(f"unknown variant {unknown[0]!r} (variants: {', '.join(BY_NAME)})")
        if args.variant and not args.check:
            raise InputError("--variant only works with --check: gen writes every file or none")
        variants = [BY_NAME[n] for n in args.variant] or VARIANTS
        out_dir = args.out or gen.OUT_DIR
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"--out {out_dir}: exists and is not a folder")
    say = (lambda m: None) if args.quiet else (lambda m: sys.stderr.write(f"chunkproof gen: {m}\n"))
    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: needs at least 1")
    try:
        if args.jobs > 1 and not args.check and len(variants) > 1:
            gen.plan_in_parallel(variants, out_dir, args.jobs, Measure, quiet=args.quiet)
        files = gen.render_all(variants, progress=say, out_dir=out_dir,
                               measure=None if args.check else Measure, keep_records=not args.check)
    except gen.StalePrecision as e:
        sys.stderr.write(f"chunkproof gen --check: {e}; run `chunkproof gen` and commit the result\n")
        return EXIT_FAIL
    except Refused as e:
        sys.stderr.write(f"chunkproof gen: refused: {e}\n")
        return EXIT_FAIL
    except CodegenError as e:
        raise InputError(str(e)) from None
    if args.check:
        if args.variant:
            files = {n: s for n, s in files.items() if n[:-3] in args.variant}
        if args.variant or args.target:   # other files in the folder are not gen's business
            bad = [n for n in gen.stale(files, out_dir) if "(not generated" not in n]
        else:
            bad = gen.stale(files, out_dir)
        for n in bad:
            sys.stderr.write(f"chunkproof gen --check: {os.path.join(out_dir, n)} differs from what "
                             f"the derivations generate\n")
        if bad:
            sys.stderr.write("chunkproof gen --check: run `chunkproof gen` and commit the result\n")
            return EXIT_FAIL
        say(f"{len(files)} files in {out_dir} match the derivations")
        return EXIT_OK
    changed = gen.write(files, out_dir, prune=not args.target)
    say(f"wrote {', '.join(changed)} in {out_dir}" if changed else f"{out_dir} already up to date")
    if args.target:
        pkg = os.path.basename(os.path.normpath(out_dir))
        funcs = ", ".join(v.func for v in variants)
        say(f"use it: sys.path.insert(0, {os.path.dirname(os.path.abspath(out_dir))!r}); "
            f"from {pkg} import {funcs}; fuzz it: chunkproof fuzz {args.target}")
    return EXIT_OK


def build_parser():
    ap = argparse.ArgumentParser(prog="chunkproof", description=(
        "Check chunkwise linear-attention derivations exactly against their recurrences."))
    ap.add_argument("--version", action="version", version=f"chunkproof {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("report", help="report on the bundled notes or the given targets")
    p.add_argument("targets", nargs="*", help="bundled variant (gla, gated_delta_rule, kda, "
                                              "dplr_delta_rule), a note file name such as 003, or a "
                                              "derivation .py file")
    _add_report_args(p)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("verify", help="report on a derivation written in the Python DSL")
    p.add_argument("targets", nargs="+", metavar="derivation.py")
    _add_report_args(p)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("gen", help="generate the Triton kernels in generated_kernels/ (or a derivation "
                                   "file's) from the verified claims")
    p.add_argument("target", nargs="?", default="", metavar="derivation.py",
                   help="a derivation file that declares kernels (docs/gen.md); default: the bundled ones")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the checked-in files differ from what would be generated")
    p.add_argument("--variant", action="append", default=[],
                   help="with --check: only this bundled variant (its module name, e.g. gla, delta_rule)")
    p.add_argument("--out", help="output folder (default: the generated_kernels package; for a derivation "
                                 "file, <its name>_kernels beside it)")
    p.add_argument("--jobs", "-j", type=int, default=1,
                   help="plan stale precision records in this many processes at once (one kernel each; "
                        "planning takes minutes to an hour per kernel)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_gen)
    cmd_fuzz.add_parser(sub)
    cmd_derive.add_parser(sub)
    cmd_bench.add_parser(sub)
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:
        if getattr(args, "debug", False):
            raise
        sys.stderr.write(f"chunkproof: error: {e}\n")
        return EXIT_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("chunkproof: interrupted\n")
        return 130
