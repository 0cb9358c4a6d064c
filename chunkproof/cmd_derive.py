"""`chunkproof derive TARGET`: the backward of a chunk program, derived by symbolic
reverse mode, every line checked exactly before it is printed.

The output is a list of named equations in an order that can be computed chunk by
chunk: δS_[t]^C from chunk t+1 (the reverse recurrence over chunks; the last chunk's
is the loss seed), then each definition's adjoint from the last definition to the
first, the inputs', δS_[t-1]^C (what chunk t-1 receives) and the initial state's
gradient, then the parameters'.  Imports stay cheap: the verifier loads when the
command runs."""
from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
FORMATS = ("table", "json", "markdown", "latex")
_NOTE = {"not_last": "t < N-1; δS_[N-1] = δS_T, the loss seed", "first": "t = 0"}
_NOTE_TEX = {"not_last": r"t < N-1;\ \delta \mathbf{S}_{[N-1]} = \delta \mathbf{S}_T \text{ (the loss seed)}",
             "first": "t = 0", "once": r"\text{once, for the whole sequence}"}
_INITIAL_TEX = r"\delta \mathbf{S}_{[-1]}"


def add_parser(sub):
    p = sub.add_parser("derive", help="derive a chunk program's backward (every adjoint), checked exactly")
    p.add_argument("target", help="bundled variant (gla, gated_delta_rule, kda, dplr_delta_rule) or a "
                                  "derivation .py file")
    p.add_argument("--program", default="", help="the chunk program to differentiate (default: the one "
                                                 "the variant's kernel is printed from, or a file's first)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--emit-claims", metavar="FILE.py", default="",
                   help="also write the lines as DSL claims that `chunkproof verify FILE.py` accepts")
    p.add_argument("--output", "-o", help="write the equations to this file instead of stdout")
    p.add_argument("--sizes", default="", metavar="SETS",
                   help="exact size sets of the check, as for report (default: the report's two)")
    p.add_argument("--seed", type=int, default=0, help="seed of the exact points")
    p.add_argument("--full-check", action="store_true",
                   help="also decide every line on its own as the report does (fresh points per "
                        "line, the float64 level); slower")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_derive)
    return p


def default_program(deriv) -> str:
    """The program a bundled variant's kernel is printed from, else the first chunk
    program that is not a recurrence's own."""
    from chunkproof.codegen.variants import VARIANTS
    for v in VARIANTS:
        if deriv.source == f"derivations/{v.derivation.replace('.', '/')}.py" \
                and any(k.module == v.name for k in deriv.kernels):
            return v.program
    steps = {r.program.name for r in deriv.recurrences.values()}
    for p in deriv.programs.values():
        if p.block == "chunk" and p.name not in steps:
            return p.name
    return ""


def _chosen(derivs, program):
    from chunkproof.derivations.loader import InputError
    if program:
        hits = [(d, program) for d in derivs if program in d.programs]
        if not hits:
            have = [p.name for d in derivs for p in d.programs.values() if p.block == "chunk"]
            raise InputError(f"--program {program}: no such program (chunk programs: "
                             f"{', '.join(have) or 'none'})")
        return hits
    out = [(d, default_program(d)) for d in derivs]
    for d, p in out:
        if not p:
            raise InputError(f"{d.source}: derivation {d.name} has no chunk program to derive")
    return out


def cmd_derive(args):
    from chunkproof.derivations.loader import InputError, resolve
    from chunkproof.verify.derived import DerivedAdjointError, derive_checked
    from chunkproof.verify.levels import parse_sizes
    from chunkproof.verify.validate import validate
    outs = [p for p in (args.output, args.emit_claims) if p]
    if args.emit_claims and not args.emit_claims.endswith(".py"):
        raise InputError(f"--emit-claims {args.emit_claims}: a derivation file ends in .py")
    for p in outs:
        _writable(p)
    sets = None
    if args.sizes:
        try:
            sets = parse_sizes(args.sizes)
        except ValueError as e:
            raise InputError(f"--sizes: {e}") from None
    derivs = resolve([args.target], args.debug)
    validate(derivs)
    if args.emit_claims:
        for d in derivs:
            if os.path.abspath(d.source) == os.path.abspath(args.emit_claims):
                raise InputError(f"--emit-claims {args.emit_claims}: that is the derivation itself")
    try:
        results = [derive_checked(d, p, sets, (args.seed,), args.full_check)
                   for d, p in _chosen(derivs, args.program)]
    except DerivedAdjointError as e:
        sys.stderr.write(f"chunkproof derive: internal error, nothing written: {e}\n")
        return EXIT_FAIL
    text = render(args.format, results)
    files = {}
    if args.emit_claims:
        from chunkproof.verify.emit_claims import claims_source
        files[args.emit_claims] = claims_source(results, args.emit_claims, _command(args))
    if args.output:
        files[args.output] = text + "\n"
    _write_all(files)
    if not args.output:
        sys.stdout.write(text + "\n")
    return EXIT_OK


def _command(args):
    parts = ["chunkproof derive", args.target]
    if args.program:
        parts += ["--program", args.program]
    return " ".join(parts + ["--emit-claims", os.path.basename(args.emit_claims)])


# ------------------------------------------------------------------ whole files only
def _writable(path):
    from chunkproof.derivations.loader import InputError
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{path}: no folder {folder}")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a folder")


def _write_all(files):
    """Every file whole or none: all are written beside their targets first, then
    renamed over them (as the report's -o does; the CLI module cannot be imported
    from here, since it imports this one)."""
    import tempfile
    from chunkproof.derivations.loader import InputError
    done = []
    try:
        for path, text in files.items():
            fd, tmp = tempfile.mkstemp(prefix=".chunkproof-", suffix=".tmp",
                                       dir=os.path.dirname(os.path.abspath(path)))
            done.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
    except OSError as e:
        for tmp, _ in done:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise InputError(f"cannot write: {e.strerror or e}") from None
    for tmp, path in done:
        os.replace(tmp, path)


# ------------------------------------------------------------------ formats
def _rows(c):
    """(equation, claim, lhs text, lhs LaTeX, rhs text, rhs LaTeX, note, its LaTeX) per line."""
    from chunkproof.derivations.latex import to_latex
    from chunkproof.derivations.plaintext import to_text
    state = c.program.state
    for eq, claim in zip(c.backward.equations, c.claims):
        lt, ll = to_text(eq.lhs, state), to_latex(eq.lhs)
        if eq.role == "initial":
            lt, ll = "δS_[-1]", _INITIAL_TEX
        key = "once" if eq.role == "parameter_total" else eq.blocks
        note = "once, for the whole sequence" if key == "once" else _NOTE.get(key, "")
        yield eq, claim, lt, ll, to_text(eq.rhs, state), to_latex(eq.rhs), note, _NOTE_TEX.get(key, "")


def _head(c):
    from chunkproof.derivations.loader import variant_name
    rec = c.deriv.program_recurrence.get(c.program.name, c.deriv.default_recurrence)
    return (f"{variant_name(c.deriv.name)} ({c.deriv.source}): program {c.program.name} over "
            f"recurrence {rec}, {len(c.claims)} lines")


def _check_line(c):
    return f"checked: {c.evidence}, {c.seconds:.1f} s"


def render(fmt, results) -> str:
    return {"table": _table, "json": _json, "markdown": _markdown, "latex": _latex}[fmt](results)


def _table(results):
    out = []
    for c in results:
        out += [_head(c), _check_line(c), ""]
        for k, (eq, _, lt, _, rt, _, note, _) in enumerate(_rows(c), 1):
            out.append(f"{k:3d}  {lt} = {rt}" + (f"    [{note}]" if note else ""))
        out.append("")
    return "\n".join(out).rstrip()


def _json(results):
    from chunkproof.derivations.loader import variant_name
    from chunkproof.derivations.reverse import ROLES
    recs = []
    for c in results:
        eqs = [OrderedDict(id=eq.id, claim_id=claim.id, adjoint_of=eq.name, role=eq.role,
                           role_means=ROLES[eq.role], blocks=eq.blocks, kind=claim.kind,
                           text=f"{lt} = {rt}", latex=f"{ll} = {rl}", note=note or None,
                           what=eq.what or None, verified=True)
                for eq, claim, lt, ll, rt, rl, note, _ in _rows(c)]
        recs.append(OrderedDict(derivation=c.deriv.name, variant=variant_name(c.deriv.name),
                                source=c.deriv.source, program=c.program.name,
                                recurrence=c.deriv.program_recurrence.get(c.program.name),
                                evidence=c.evidence, points=c.points, sizes=c.sizes,
                                seconds=round(c.seconds, 3), equations=eqs))
    return json.dumps(OrderedDict(backwards=recs), ensure_ascii=False, indent=2)


def _markdown(results):
    out = []
    for c in results:
        out += [f"## {_head(c)}", "", _check_line(c), "", "| # | adjoint | formula | chunks |",
                "|---|---|---|---|"]
        for k, (eq, _, _, ll, _, rl, note, _) in enumerate(_rows(c), 1):
            out.append(f"| {k} | ${ll}$ | ${rl}$ | {note or 'every chunk'} |")
        out.append("")
    return "\n".join(out).rstrip()


def _latex(results):
    out = []
    for c in results:
        out += [f"% {_head(c)}", f"% {_check_line(c)}", r"\begin{align*}"]
        rows = list(_rows(c))
        for k, (eq, _, _, ll, _, rl, _, note) in enumerate(rows):
            tag = f" && {note}" if note else ""
            end = r" \\" if k < len(rows) - 1 else ""
            out.append(f"{ll} &= {rl}{tag}{end}")
        out += [r"\end{align*}", ""]
    return "\n".join(out).rstrip()
