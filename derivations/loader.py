"""Load derivations: the bundled notes, or a user's derivation file."""
from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from typing import List

from chunkproof.derivations.dsl import Derivation

BUNDLED = ["gla", "gated_deltanet", "kda", "dplr"]
NOTE_OF = {"gla": "003_c008d497ea0f70e6.txt", "gated_deltanet": "002_6404d08dac0301ed.txt",
           "kda": "001_ba6c617d0f1bc209.txt", "dplr": "000_cb349aeede08771a.txt"}


class InputError(Exception):
    """Bad input: a missing file, an import failure, a derivation that cannot be
    evaluated.  The CLI prints it as one line and exits with code 2."""


def _collect(mod, origin) -> List[Derivation]:
    ds = getattr(mod, "DERIVATIONS", None)
    if ds is None:
        d = getattr(mod, "DERIVATION", None)
        ds = [d] if d is not None else []
    ds = list(ds)
    if not ds or not all(isinstance(d, Derivation) for d in ds):
        raise InputError(f"{origin}: defines no DERIVATION (a chunkproof Derivation) or DERIVATIONS list")
    for d in ds:
        d.source = origin
    return ds


def bundled(names=None) -> List[Derivation]:
    out = []
    for n in names or BUNDLED:
        try:
            mod = importlib.import_module(f"chunkproof.derivations.{n}")
        except Exception as e:  # noqa: BLE001 - a broken install must still say what broke
            raise InputError(f"derivations/{n}.py: failed to import: {type(e).__name__}: {e}") from None
        out.extend(_collect(mod, f"derivations/{n}.py"))
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


def resolve(targets: List[str], debug=False) -> List[Derivation]:
    """The derivations a command line names: bundled notes by name (gla, ...) or
    note file name (003, 003_....txt), or derivation files; all bundled if none."""
    if not targets:
        return bundled()
    out = []
    for t in targets:
        if t.endswith(".py") or os.path.sep in t:
            out.extend(from_file(t, debug))
            continue
        key = t[:-4] if t.endswith(".txt") else t
        match = [n for n in BUNDLED if n == key]
        if not match:
            match = [n for n, note in NOTE_OF.items() if note.startswith(key)]
        if not match:
            raise InputError(f"{t}: not a derivation file and not a bundled note "
                             f"(bundled: {', '.join(BUNDLED)}, or a note file name such as 003)")
        out.extend(bundled(match))
    return out
