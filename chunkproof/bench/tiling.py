"""TILING overrides of the generated modules (chunkproof.kernels.<variant>.TILING, a
frozen Tiling: codegen/tiling.py).

`applied` is the one place that changes a module's tiling: every script goes through
it, so that a change in how the modules hold their tiling is made here alone.  Key
names come only from the user (KEY=VALUE)."""
import contextlib
import json


def parse_value(text):
    """A value as the command line gives it: JSON where it parses (8, null, true, "tf32",
    [16, 32]), Python's True / False / None (what the tiling's own errors print), else
    the bare word (tf32)."""
    try:
        return json.loads(text)
    except ValueError:
        return {"True": True, "False": False, "None": None}.get(text, text)


def split_items(text):
    """'a=1,b=[1, 2]' -> ['a=1', 'b=[1, 2]']: commas inside brackets or quotes stay."""
    items, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        cur += ch
    items.append(cur)
    return [s.strip() for s in items if s.strip()]


def parse_overrides(items):
    """['k=v', ...] (or one 'k=v,k2=v2' string) -> {key: value}."""
    if isinstance(items, str):
        items = split_items(items)
    out = {}
    for kv in items:
        key, eq, val = kv.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{kv!r} is not KEY=VALUE")
        out[key.strip()] = parse_value(val.strip())
    return out


def describe(overrides):
    """The overrides as they were given, for labels: 'k=v, k2=v2' ('defaults' for none)."""
    return ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
                     for k, v in overrides.items()) or "defaults"


@contextlib.contextmanager
def applied(module, overrides=None):
    """module's tiling with `overrides` applied, restored on exit; yields the Tiling in
    force (frozen).  A key the module does not have, or a value its schema refuses, is a
    ValueError (nothing changed)."""
    with module.tiling_override(**dict(overrides or {})) as settings:
        yield settings
