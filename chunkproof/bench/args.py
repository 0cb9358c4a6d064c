"""Command-line values the benchmark scripts share; a bad one is a ValueError whose
message is the one line the scripts print (exit code 2)."""
import argparse
import sys

import torch

from chunkproof.fuzz.cases import VARIANTS

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit code 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def fail(prog, err):
    """The scripts' answer to bad input: one line, exit code 2."""
    print(f"{prog}: error: {err}", file=sys.stderr)
    return 2


def variant(name):
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    return name


def variants(text):
    """'gla,kda' or 'all' -> a list of variant names."""
    if text.strip() == "all":
        return list(VARIANTS)
    out = [variant(v.strip()) for v in text.split(",") if v.strip()]
    if not out:
        raise ValueError("no variant given")
    return out


def shape(text, names="B,T,H,D"):
    """'4,4096,16,128' -> (4, 4096, 16, 128), its length and order given by names."""
    want = names.split(",")
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        dims = ()
    if len(dims) != len(want) or any(d < 1 for d in dims):
        raise ValueError(f"shape {text!r} is not {names} (positive integers, comma-separated)")
    return dims


def shapes(text):
    """'4x4096x16x128,8x2048x16x64' -> [(4, 4096, 16, 128), (8, 2048, 16, 64)], each
    B x T x H x D; repeats dropped, order kept."""
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            dims = tuple(int(x) for x in item.lower().split("x"))
        except ValueError:
            dims = ()
        if len(dims) != 4 or any(d < 1 for d in dims):
            raise ValueError(f"shape {item!r} is not BxTxHxD (four positive integers joined by x, "
                             f"shapes separated by commas, e.g. 4x4096x16x128,8x2048x16x64)")
        out.append(dims)
    return list(dict.fromkeys(out))


def dtype(name):
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return DTYPES[name]


def device(name):
    """'cuda' or 'cpu' for a GPU benchmark script: cpu sets TRITON_INTERPRET=1 (Triton's
    interpreter: the path is exercised, times mean nothing), which must come before
    triton is imported."""
    import os
    if name == "cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("triton was imported without TRITON_INTERPRET=1; --device cpu needs it first")
        os.environ["TRITON_INTERPRET"] = "1"
    elif not torch.cuda.is_available():
        raise ValueError("no CUDA device here; --device cpu runs the interpreter")
    return name


def run_meta(device_name, **more):
    """What every result file records: the device, torch, Triton, the date."""
    import datetime
    return dict(device=torch.cuda.get_device_name() if device_name == "cuda" else
                "cpu (interpreter: times mean nothing)", torch=torch.__version__,
                triton=__import__("triton").__version__, **more, date=datetime.date.today().isoformat())


def write_rows(folder, stem, meta, rows, table):
    """folder/stem.json (meta and rows) and folder/stem.md (meta and the table), written
    whole each time: a run cut short keeps what it measured.  No folder: nothing."""
    import json
    import os
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{stem}.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    with open(os.path.join(folder, f"{stem}.md"), "w") as f:
        f.write(f"{meta}\n\n{table}\n")
