"""`chunkproof fuzz FILE.py`: a user's derivation's kernels, printed by `chunkproof gen`
into a temporary package and registered under the bundled kernels' names
(chunkproof.kernels.<name>, the variant tables), so that every property, the oracle
(the file's own recurrence) and the example database treat them as they treat the
bundled ones.  Nothing is written beside the user's file."""
from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from typing import List


def register(path: str, progress=None) -> List[str]:
    """Print, import and register the kernels ``path`` declares; returns their names.
    Raises InputError (a declaration or lowering problem) or codegen.plan.Refused (a
    claim they are printed from does not hold)."""
    from chunkproof.codegen import gen
    from chunkproof.codegen.printer import CodegenError
    from chunkproof.codegen.variants import BY_NAME
    from chunkproof.derivations.loader import InputError
    from . import cases
    from .precision_measure import Measure
    variants = gen.user_variants(path)
    try:
        # the precision records `chunkproof gen FILE.py` wrote, where fresh; else planned now
        files = gen.render_all(variants, progress=progress, out_dir=gen.default_out(path), measure=Measure)
    except CodegenError as e:
        if type(e).__name__ == "Refused":
            raise
        raise InputError(str(e)) from None
    root = tempfile.mkdtemp(prefix="chunkproof_fuzz_")
    atexit.register(shutil.rmtree, root, True)
    pkg = "chunkproof_user_kernels_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    gen.write(files, os.path.join(root, pkg), prune=False)
    sys.path.insert(0, root)
    try:
        importlib.import_module(pkg)
    finally:
        sys.path.remove(root)
    names = []
    for v in variants:
        sys.modules[f"chunkproof.kernels.{v.name}"] = importlib.import_module(f"{pkg}.{v.name}")
        BY_NAME[v.name] = v
        cases.API[v.name] = v.func
        if v.name not in cases.VARIANTS:
            cases.VARIANTS.append(v.name)
        names.append(v.name)
    return names
