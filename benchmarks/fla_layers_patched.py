"""FLA's layer classes with chunkproof's ops patched in (issue 19 item 3), on a GPU.

Each layer (flash-linear-attention's fla.layers, random weights, training mode at T > 64
so that it takes its chunk path) runs forward and backward in bf16 on one input with
ours patched into the layer's module (every chunk_<op> of chunkproof.kernels the module
imports; the run counts the calls of ours, and a layer whose forward never called ours
fails), and is held to a reference on the same weights and input: by default the same
layer with FLA's op in bf16 (`--reference fp32`: with FLA's op in fp32, FLA's own bf16
error then reported beside ours; where FLA's op fails, e.g. its refused backwards on
Triton 3.6, our op in fp32, and the row says so).  Compared: rel RMS of the output, of
the input's gradient and of every parameter's gradient.  A layer passes when every one
of ours is within the fuzz campaign's bf16 tolerance (5e-2) or within 1.5x FLA's own
bf16 error on the same tensor.  A first call compiles FLA's ops and ours (minutes per
layer; `--quick-autotune` cuts FLA's autotuning).

    python benchmarks/fla_layers_patched.py [--layers gla,kda] [--shape 2,1024] [--out DIR]
    python benchmarks/fla_layers_patched.py --merge DIR1 DIR2 ... --out DIR   # one table of runs

Needs a CUDA GPU and flash-linear-attention (the layers; fla-core alone has only the
ops).  Writes DIR/fla_layers.json and DIR/fla_layers.md; exit 1 when a layer fails.
"""
import contextlib
import copy
import importlib
import sys
import time
import types
from pathlib import Path

import torch

from chunkproof.bench import args as A
from chunkproof.bench import fla as F
from chunkproof.bench.metrics import rel_rms

PROG = "fla_layers_patched.py"
TOL, RATIO = 5e-2, 1.5
# layer name -> (module under fla.layers, class, constructor keywords: head sizes 64-256)
LAYERS = {
    "gla": ("gla", "GatedLinearAttention", dict(hidden_size=1024, num_heads=4)),
    "gated_deltanet": ("gated_deltanet", "GatedDeltaNet", dict(hidden_size=1024, head_dim=128, num_heads=8,
                                                               expand_v=1)),
    "kda": ("kda", "KimiDeltaAttention", dict(hidden_size=1024, head_dim=128, num_heads=8)),
    "delta_net": ("delta_net", "DeltaNet", dict(hidden_size=1024, num_heads=8)),
    "retention": ("multiscale_retention", "MultiScaleRetention", dict(hidden_size=1024, num_heads=8)),
    "rwkv6": ("rwkv6", "RWKV6Attention", dict(hidden_size=1024, num_heads=8)),
    "simple_gla": ("simple_gla", "SimpleGatedLinearAttention", dict(hidden_size=1024, num_heads=8)),
}


def _first_configs(n):
    """Before FLA is imported: every triton.autotune it declares keeps its first ``n``
    configurations (fewer compiles; the choice changes rounding, not what is computed)."""
    import triton
    full = triton.autotune

    def autotune(configs, *a, **kw):
        return full(list(configs)[:n], *a, **kw)
    triton.autotune = autotune


def _layer_module(name):
    """fla.layers.<name>, imported without fla/layers/__init__.py where that fails (it
    imports every layer, some of which need packages this machine may lack)."""
    try:
        return importlib.import_module(f"fla.layers.{name}")
    except ImportError:
        import fla
        pkg = types.ModuleType("fla.layers")
        pkg.__path__ = [str(Path(fla.__file__).parent / "layers")]
        sys.modules["fla.layers"] = pkg
        return importlib.import_module(f"fla.layers.{name}")


@contextlib.contextmanager
def patched(module, calls):
    """Every chunk_<op> of chunkproof.kernels that ``module`` imports, replaced by ours
    (counting its calls in ``calls``) inside the block."""
    import chunkproof.kernels as ours
    saved = {}
    for name in dir(module):
        if name.startswith("chunk_") and hasattr(ours, name):
            fn = getattr(ours, name)

            def counted(*a, _fn=fn, _name=name, **kw):
                calls[_name] = calls.get(_name, 0) + 1
                return _fn(*a, **kw)
            saved[name] = getattr(module, name)
            setattr(module, name, counted)
    try:
        yield sorted(saved)
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)


def _run(layer, x, do):
    """(output, the input's gradient, every parameter's gradient by name) for <do, layer(x)>."""
    layer.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_()
    o = layer(x)[0]
    (o.float() * do).sum().backward()
    grads = {n: p.grad.detach().float() for n, p in layer.named_parameters() if p.grad is not None}
    return o.detach().float(), x.grad.detach().float(), grads


def _errors(got, ref):
    o, dx, dp = got
    ro, rdx, rdp = ref
    out = {"o": rel_rms(o, ro.double()), "dx": rel_rms(dx, rdx.double())}
    out.update({f"d.{n}": rel_rms(dp[n], rdp[n].double()) for n in rdp if n in dp})
    return out


def _say(key, t0, what):
    # progress on stderr: a first call compiles (FLA's fp32 and bf16 ops, ours) for
    # minutes, and a run cut short should say how far each layer got
    print(f"[{key}] {time.time() - t0:6.1f} s {what}", file=sys.stderr)


def check_layer(key, B, T, reference="fla-bf16", seed=0):
    t0 = time.time()
    mod_name, cls_name, kw = LAYERS[key]
    module = _layer_module(mod_name)
    torch.manual_seed(seed)
    layer = getattr(module, cls_name)(**kw).cuda().train()
    x = torch.randn(B, T, kw["hidden_size"], device="cuda")
    do = torch.randn(B, T, kw["hidden_size"], device="cuda")
    row = dict(layer=key, cls=f"fla.layers.{mod_name}.{cls_name}", B=B, T=T, **kw)
    calls = {}
    with patched(module, calls) as names:
        pass
    row["patched"] = names
    if not names:
        return dict(row, ok=False, note="the module imports no chunk_<op> that chunkproof has")
    half = copy.deepcopy(layer).to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    ref, fla_err, failed = None, {}, ""
    try:
        if reference == "fp32":
            _say(key, t0, f"{cls_name} built; the reference: FLA's op in fp32...")
            ref, ref_note = _run(copy.deepcopy(layer).float(), x, do), "FLA fp32"
            _say(key, t0, "FLA's op in bf16...")
            fla_err = _errors(_run(half, xb, do), ref)
        else:
            _say(key, t0, f"{cls_name} built; the reference: FLA's op in bf16...")
            ref, ref_note = _run(half, xb, do), "FLA bf16"
    except Exception as e:  # noqa: BLE001  (FLA refuses some backwards on this Triton: #640)
        failed = f"{type(e).__name__}: {str(e)[:160]}"
        row["fla_note"] = failed
    if ref is None:
        ref_note = f"ours fp32 (FLA's failed: {failed[:120]})"
        _say(key, t0, "FLA's op failed; the reference: ours in fp32...")
        with patched(module, calls):
            ref = _run(copy.deepcopy(layer).float(), x, do)
    calls.clear()
    _say(key, t0, "ours in bf16...")
    with patched(module, calls):
        ours_err = _errors(_run(half, xb, do), ref)
    row.update(reference=ref_note, calls=dict(calls), ours=ours_err, fla=fla_err)
    bad = [n for n, e in ours_err.items() if not (e <= TOL or (n in fla_err and e <= RATIO * fla_err[n]))]
    row["worst"] = max(ours_err, key=ours_err.get)
    row["ok"] = bool(calls) and not bad
    row["note"] = "" if calls else "the layer's forward called none of ours"
    if bad:
        row["note"] = "over tolerance: " + ", ".join(f"{n} {ours_err[n]:.2e} (FLA {fla_err.get(n, float('nan')):.2e})"
                                                     for n in bad)
    return row


def table(rows):
    lines = ["| layer | ours called | reference | worst tensor | ours | FLA | tensors | ok | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        w = r.get("worst")
        ours = f"{r['ours'][w]:.2e}" if w else "-"
        fla = f"{r['fla'][w]:.2e}" if w and w in r.get("fla", {}) else r.get("fla_note", "-")
        lines.append(f"| {r['layer']} | {r.get('calls', {})} | {r.get('reference', '-')} | {w or '-'} | {ours} | "
                     f"{fla} | {len(r.get('ours', {}))} | {'yes' if r['ok'] else 'NO'} | {r.get('note', '')} |")
    return "\n".join(lines)


def merge(folders, out):
    """The rows of the runs in ``folders`` (each an earlier --out) as one table; a folder
    without a result (a run cut short before its first layer ended) is a row saying so."""
    import json
    rows, meta = [], None
    for d in folders:
        path = Path(d) / "fla_layers.json"
        if not path.is_file():
            rows.append(dict(layer=Path(d).name, ok=False, note="no result (the run was stopped before the "
                                                                 "layer ended)"))
            continue
        try:
            got = json.loads(path.read_text())
            rows += got["rows"]
        except (ValueError, KeyError) as e:
            return A.fail(PROG, ValueError(f"{path}: not a fla_layers.json ({e})"))
        meta = meta or got.get("meta")
    A.write_rows(out, "fla_layers", meta or {}, rows, table(rows))
    print(table(rows))
    return 0 if rows and all(r["ok"] for r in rows) else 1


def main(argv=None):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--layers", default=",".join(LAYERS))
    p.add_argument("--shape", default="2,1024", help="B,T (T > 64: the layers' chunk path)")
    p.add_argument("--out", default=None)
    p.add_argument("--reference", choices=["fla-bf16", "fp32"], default="fla-bf16",
                   help="what ours is held to: FLA's op in bf16 on the same layer (one compile of FLA's) or "
                        "FLA's op in fp32 (FLA's bf16 error is then reported beside ours)")
    p.add_argument("--quick-autotune", action="store_true",
                   help="FLA's autotuners keep their first two configurations (its values are checked here, not "
                        "its speed; its full autotune compiles for minutes per op)")
    p.add_argument("--merge", nargs="+", metavar="DIR",
                   help="write one table (to --out, and print it) of the rows of earlier runs' --out folders "
                        "(gpu_final.sh runs each layer in its own process, so that one slow layer does not "
                        "take the others' time)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.merge:
        return merge(a.merge, a.out)
    try:
        layers = [n.strip() for n in a.layers.split(",") if n.strip()]
        unknown = [n for n in layers if n not in LAYERS]
        if unknown or not layers:
            raise ValueError(f"unknown layer(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(LAYERS)}")
        B, T = A.shape(a.shape, "B,T")
        if T <= 64:
            raise ValueError(f"T = {T}: FLA's layers take their recurrent path at T <= 64; give T > 64")
        if not torch.cuda.is_available():
            raise ValueError("needs a CUDA GPU (FLA's layers and ops run there only)")
        if a.quick_autotune:
            _first_configs(2)
        importlib.import_module("fla")
    except (ValueError, ImportError) as e:
        return A.fail(PROG, e)
    rows = []
    for key in layers:
        try:
            rows.append(check_layer(key, B, T, a.reference))
        except Exception as e:  # noqa: BLE001  (one layer's failure is its row, not the end of the run)
            rows.append(dict(layer=key, ok=False, note=f"{type(e).__name__}: {str(e)[:200]}"))
        print(f"[{key}] {'ok' if rows[-1]['ok'] else 'FAILED'} {rows[-1].get('note', '')}", file=sys.stderr)
        A.write_rows(a.out, "fla_layers", A.run_meta("cuda", fla=F.version()),
                     rows, table(rows))
    print(table(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
