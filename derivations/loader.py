"""Load derivations: the bundled notes, or a user's derivation file."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from typing import List

from chunkproof.derivations.dsl import Derivation

BUNDLED = ["gla", "gated_deltanet", "kda", "dplr"]   # module names under derivations/
# the bundled derivations that declare kernels (derivations/kernel.py), in gen's order
KERNEL_MODULES = BUNDLED + ["variants.delta_rule", "variants.simple_gla", "variants.retention", "variants.rwkv6"]
NOTE_OF = {"gla": "003_c008d497ea0f70e6.txt", "gated_deltanet": "002_6404d08dac0301ed.txt",
           "kda": "001_ba6c617d0f1bc209.txt", "dplr": "000_cb349aeede08771a.txt"}
# Every command names a variant as FLA does (gen and fuzz already did); the derivation
# modules keep their file names, so the names map here and nowhere else.
MODULE_OF = {"gla": "gla", "gated_delta_rule": "gated_deltanet", "kda": "kda",
             "dplr_delta_rule": "dplr"}
VARIANT_OF = {m: v for v, m in MODULE_OF.items()}
DEPRECATED = {"gated_deltanet": "gated_delta_rule", "dplr": "dplr_delta_rule"}


def variant_name(derivation: str) -> str:
    """FLA's name for a bundled derivation; a user's derivation keeps its own."""
    return VARIANT_OF.get(derivation, derivation)


class InputError(Exception):
    """Bad input: a missing file, an import failure, a derivation that cannot be
    evaluated.  The CLI prints it as one line and exits with code 2."""


def _collect(mod, origin) -> List[Derivation]:
    ds = getattr(mod, "DERIVATIONS", None)
    if ds is None:
        d = getattr(mod, "DERIVATION", None)
        ds = [d] if d is not None else []
    ds = list(ds) if isinstance(ds, (list, tuple)) else [ds]
    if not ds or not all(isinstance(d, Derivation) for d in ds):
        raise InputError(f"{origin}: defines no DERIVATION (a chunkproof Derivation) or DERIVATIONS list")
    for d in ds:
        d.source = origin
    return ds


def bundled(names=None) -> List[Derivation]:
    out = []
    for n in names or BUNDLED:
        n = MODULE_OF.get(n, n)
        try:
            mod = importlib.import_module(f"chunkproof.derivations.{n}")
        except Exception as e:  # noqa: BLE001 - a broken install must still say what broke
            raise InputError(f"derivations/{n.replace('.', '/')}.py: failed to import: "
                             f"{type(e).__name__}: {e}") from None
        out.extend(_collect(mod, f"derivations/{n.replace('.', '/')}.py"))
    return out


def from_file(path: str, debug=False) -> List[Derivation]:
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if not path.endswith(".py"):
        raise InputError(f"{path}: a derivation is a Python file (.py)")
    name = "chunkproof_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - any failure of user code is an input error
        if debug:
            traceback.print_exc()
        tb = traceback.extract_tb(e.__traceback__)
        absp = os.path.abspath(path)
        where = next((f"{path}:{fr.lineno}" for fr in reversed(tb)
                      if os.path.abspath(fr.filename) == absp), path)
        raise InputError(f"{where}: the derivation failed to import: {type(e).__name__}: {e}") from None
    return _collect(mod, path)


def _warn_stderr(msg):
    sys.stderr.write(f"chunkproof: note: {msg}\n")


def resolve(targets: List[str], debug=False, warn=_warn_stderr) -> List[Derivation]:
    """The derivations a command line names: bundled variants by FLA's name (gla,
    gated_delta_rule, kda, dplr_delta_rule; the old gated_deltanet and dplr still
    work, with a note through ``warn``) or note file name (003, 003_....txt), or
    derivation files; all bundled if none."""
    if not targets:
        return bundled()
    out = []
    for t in targets:
        if t.endswith(".py") or os.path.sep in t:
            out.extend(from_file(t, debug))
            continue
        key = t[:-4] if t.endswith(".txt") else t
        if key in DEPRECATED:
            warn(f"{key!r} is a deprecated name; use {DEPRECATED[key]!r} (FLA's name, as gen and fuzz take)")
            key = DEPRECATED[key]
        match = [MODULE_OF[key]] if key in MODULE_OF else []
        if not match:
            match = [n for n, note in NOTE_OF.items() if note.startswith(key)]
        if not match:
            raise InputError(f"{t}: not a derivation file and not a bundled note "
                             f"(bundled: {', '.join(MODULE_OF)}, or a note file name such as 003)")
        out.extend(bundled(match))
    return out
