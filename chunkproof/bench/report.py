"""`chunkproof bench`'s outputs: the JSON document (rows, their details, the run's
conditions), written whole or not at all, and the markdown table printed from it."""
import json
import math
import os
import tempfile

SCHEMA = "chunkproof-bench/1"


def document(rows, details, meta, complete):
    """complete: False while the run is still going (a file cut short says so)."""
    return {"schema": SCHEMA, "complete": complete, "meta": meta, "rows": rows, "details": details}


def write_json(path, doc):
    """A temporary file beside `path`, renamed over it: a reader sees the old file or the
    new one, never half of one."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".bench-", suffix=".tmp", dir=folder)
    mask = os.umask(0)
    os.umask(mask)
    try:
        os.fchmod(fd, 0o666 & ~mask)     # mkstemp's 0600 would outlive the rename
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, allow_nan=False, default=_finite)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _finite(x):
    raise TypeError(f"not JSON: {x!r}")


def clean(x):
    """inf / nan (an error that could not be measured) as None: JSON has neither."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def _f(x, digits=3):
    if x is None:
        return "-"
    return f"{x:.2e}" if 0 < abs(x) < 10 ** -digits else f"{x:.{digits}f}"


def _e(x):
    return "-" if x is None else f"{x:.1e}"


def _ratio(a, b, digits=2):
    return _f(a / b, digits) if a and b else "-"


def table(doc):
    """Markdown: a header with the conditions, one line per row, then the notes."""
    meta, rows, details = doc["meta"], doc["rows"], doc["details"]
    gate = meta.get("gate", {})
    head = ["# chunkproof bench", ""]
    if rows:
        r = rows[0]
        how = "" if meta.get("fla_missing") or str(r["fla_version"]).startswith("not ") else \
            f" ({meta.get('fla_dispatch', '?')}{', --fla-force' if meta.get('fla_force') else ''})"
        head.append(f"- {r['gpu']}; torch {r['torch']}, triton {r['triton']}, FLA {r['fla_version']}{how}; {r['date']}")
    if meta.get("fla_missing"):
        head.append(f"- {meta['fla_missing']}")
    if meta.get("interpreter"):
        head.append("- **Triton interpreter on the CPU: every time below is meaningless** (it tests the pipeline)")
    if meta.get("bandwidth_Bps"):
        head.append(f"- memory floor: the fewest bytes the call must move at {meta['bandwidth_Bps'] / 1e12:.2f} TB/s "
                    f"({meta.get('bandwidth_source', '')})")
    if gate:
        head.append(f"- correctness gate: rel RMS against {gate.get('oracle', 'the fp64 recurrence')} on the first "
                    f"{gate.get('prefix_steps')} steps (all batches and heads), tolerance {gate.get('tolerance')} "
                    f"(gate and beta gradients x{gate.get('gate_grad_factor')}); a side over it is not timed")
    if meta.get("timing"):
        head.append(f"- {meta['timing']}")
    if not doc.get("complete", True):
        head.append("- **incomplete**: the run stopped before every row was measured")
    lines = ["| variant | mode | B, T, H, D | ours ms | FLA ms | FLA / ours | SDPA ms | floor ms | floor / ours "
             "| floor / FLA | peak MiB ours / FLA | max rel err ours / FLA | FLA backend |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for r, d in zip(rows, details):
        shape = f"{r['B']}, {r['T']}, {r['H']}, {r['D']}"
        gates = d.get("gate", {})
        err = " / ".join(_e(r[f"max_rel_err_{s}"]) + (" FAIL" if gates.get(s) == "fail" else "")
                         for s in ("ours", "fla"))
        lines.append(f"| {r['variant']} | {r['mode']} | {shape} | {_f(r['ours_ms'])} | {_f(r['fla_ms'])} | "
                     f"{_ratio(r['fla_ms'], r['ours_ms'])} | {_f(r['sdpa_ms'])} | {_f(r['floor_ms'])} | "
                     f"{_ratio(r['floor_ms'], r['ours_ms'])} | {_ratio(r['floor_ms'], r['fla_ms'])} | "
                     f"{_f(r['ours_peak_mib'], 1)} / {_f(r['fla_peak_mib'], 1)} | {err} | {r['fla_backend'] or '-'} |")
        notes += [f"- {r['variant']} {r['mode']} ({shape}): {n}" for n in d.get("notes", [])]
        over = errors_over_fla(d)
        if over:
            notes.append(f"- {r['variant']} {r['mode']} ({shape}): ours over FLA's error on " +
                         ", ".join(f"{n} {ratio:.3f}x" for n, ratio in over))
    return "\n".join(head + [""] + lines + ([""] + notes if notes else [])) + "\n"


def errors_over_fla(detail):
    """[(tensor, ours / FLA's)] of the tensors whose error of ours is over FLA's on the
    same inputs, worst first (the target is at or under FLA's on every tensor)."""
    errs = detail.get("errors", {})
    ours, theirs = errs.get("ours", {}), errs.get("fla", {})
    over = [(n, e / theirs[n]) for n, e in ours.items() if theirs.get(n) and e > theirs[n]]
    return sorted(over, key=lambda x: -x[1])


def merge(docs, variants=()):
    """One document from several runs' (e.g. one per GPU, each with some of the variants,
    or calls that resume one another): rows by shape (as first seen), then variant (in the order of `variants`, else as
    first seen), then mode."""
    # a (variant, mode, shape) measured in several runs (a run that its --budget cut
    # short, then one that measured the rest) keeps the row with the most times, the
    # later run on a tie
    best = {}
    for d in docs:
        for r, det in zip(d["rows"], d["details"]):
            key = (r["variant"], r["mode"], r["B"], r["T"], r["H"], r["D"])
            score = sum(r.get(k) is not None for k in ("ours_ms", "fla_ms", "sdpa_ms"))
            if key not in best or score >= best[key][0]:
                best[key] = (score, r, det)
    rows = [r for _, r, _ in best.values()]
    details = [det for _, _, det in best.values()]
    shape = lambda r: (r["B"], r["T"], r["H"], r["D"])  # noqa: E731
    shapes = list(dict.fromkeys(map(shape, rows)))
    names = list(dict.fromkeys([*variants, *(r["variant"] for r in rows)]))
    modes = ["fwd", "fwd+bwd"]
    order = sorted(range(len(rows)), key=lambda i: (shapes.index(shape(rows[i])), names.index(rows[i]["variant"]),
                                                    modes.index(rows[i]["mode"]) if rows[i]["mode"] in modes else 9))
    meta = dict(docs[0]["meta"]) if docs else {}
    meta["merged_from"] = [d["meta"].get("device") for d in docs]
    meta["bandwidth_Bps_each"] = [d["meta"].get("bandwidth_Bps") for d in docs]
    return document([rows[i] for i in order], [details[i] for i in order], meta,
                    all(d.get("complete") for d in docs))
