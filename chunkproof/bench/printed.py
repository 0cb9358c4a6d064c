"""A bundled variant printed with more of its passed tiles in the inputs' dtype than its
precision record narrows, to time and measure what narrowing them would give on the GPU
(benchmarks/profile_kernels.py --narrow).  The generator prints it from the same claims
into a temporary package beside a copy of the runtime; generated_kernels/ is not touched."""
import atexit
import os
import shutil
import tempfile

from chunkproof.codegen import gen, precision
from chunkproof.codegen.plan import load_variant
from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz.precision_measure import import_printed

_ROOT = []


def _package_root():
    if not _ROOT:
        _ROOT.append(tempfile.mkdtemp(prefix="chunkproof_printed_"))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    return _ROOT[0]


def passed_tiles(variant):
    """The tiles the precision planner may store in the inputs' dtype (launch order)."""
    v = BY_NAME[variant]
    return gen.candidate_lines(v, load_variant(v, check=False))[2]


def check_tiles(variant, tiles):
    """A ValueError naming each of ``tiles`` that is no passed tile of ``variant``, and
    the ones there are."""
    known = passed_tiles(variant)
    bad = [t for t in tiles if t not in known]
    if bad:
        raise ValueError(f"{variant} has no passed tile {', '.join(bad)} (its passed tiles: {', '.join(known)})")


def narrowed(variant, tiles):
    """(module, its public function): ``variant`` printed with its recorded choice and
    ``tiles`` (passed tile names) narrowed besides (check_tiles first)."""
    v = BY_NAME[variant]
    check_tiles(variant, tiles)
    rec = precision.read_record(gen.OUT_DIR, variant)
    if rec is None:
        raise ValueError(f"no precision record of {variant} (run chunkproof gen)")
    choice = precision.Choice.from_dict(rec["choice"])
    for t in tiles:
        choice = choice.with_narrow(t)
    src = gen.render_variant(precision.apply(v, choice))
    with open(os.path.join(gen.OUT_DIR, "_runtime.py"), encoding="utf-8") as f:
        runtime = f.read()
    pkg = f"printed_{variant}_{'_'.join(sorted(tiles)) or 'recorded'}"
    mod = import_printed(_package_root(), pkg, runtime, variant, src)
    return mod, getattr(mod, v.func)
