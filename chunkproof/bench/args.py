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


def dtype(name):
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return DTYPES[name]
