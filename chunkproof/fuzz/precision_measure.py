"""Measuring a kernel for the precision planner (chunkproof.codegen.precision): each
candidate printed, imported and run under Triton's interpreter with the H200's
rounding emulated, bf16, forward + backward; each tensor's error against the fp64
recurrence divided by the plain chunked baseline's (chunkproof.fuzz.chunked).  Here,
in the fuzz layer, because it runs kernels; gen receives it from its callers."""
import atexit
import contextlib
import dataclasses
import importlib
import os
import shutil
import sys
import tempfile
from typing import Dict

from chunkproof.codegen.printer import CodegenError
from chunkproof.codegen.variants import Variant


class Measure:
    """Errors of one variant's candidates, each printed, imported and run under the
    interpreter; the baseline's and the reference's computed once per shape."""

    def __init__(self, v: Variant, runtime: str, shapes, seed, inputs="fuzz"):
        # inputs: "fuzz" (the campaign's draws) or "bench" (the benchmark's: unit keys,
        # log-sigmoid gates), chunked.case
        self.v, self.runtime, self.shapes, self.seed, self.inputs = v, runtime, tuple(shapes), seed, inputs
        self.root = tempfile.mkdtemp(prefix="chunkproof_precision_")
        atexit.register(shutil.rmtree, self.root, True)
        self.n = 0
        self.cases = {}

    def _module(self, src):
        self.n += 1
        # the root's own name in it: another Measure's module of the same number is a
        # different kernel (sys.modules would hand that one back)
        pkg = f"{os.path.basename(self.root)}_{self.v.name}_{self.n}"
        return import_printed(self.root, pkg, self.runtime, self.v.name, src)

    def _case(self, shape):
        from chunkproof.fuzz.chunked import Chunked, case, errors, reference
        import torch
        if shape not in self.cases:
            x, h0, do, dht = case(self.v.name, shape, self.seed, self.inputs)
            scale = shape[3] ** -0.5
            want = reference(self.v.name, x, h0, do, dht, scale)
            base = Chunked(self.v.name, logs="wide")
            eb = errors(*base.fwd_bwd(x, scale, h0, do, dht, torch.bfloat16), want)
            self.cases[shape] = (x, h0, do, dht, scale, want, eb)
        return self.cases[shape]

    def ratios(self, choice: str, src: str) -> Dict[str, float]:
        """'<shape> <tensor>' -> ours / baseline (inf where ours is not finite)."""
        mod = self._module(src)
        try:
            with _as_kernel(self.v, mod):
                return self._ratios(getattr(mod, self.v.func))
        except Exception as e:    # a printing bug: name it, the variant and the choice
            raise CodegenError(f"planning the precision of {self.v.name}: its kernel, printed with "
                               f"{choice}, failed under the interpreter: {type(e).__name__}: "
                               f"{e}") from e

    def reference(self):
        """('<shape> <tensor>' -> the reference implementation's error / the baseline's,
        what it is) for the variant's reference, FLA's op of the same name run under the
        interpreter with the same rounding (chunkproof.bench.fla_interp); (None, why not)
        where there is none: no FLA op of this name, FLA not installed, or its op failing
        here (the planner then holds the chunked baseline's target alone, and says so)."""
        from chunkproof.bench import fla
        if self.v.name not in fla.ENTRY:
            return None, f"FLA has no op named {self.v.name}"
        if not fla.importable():
            return None, "FLA is not installed (pip install fla-core)"
        from chunkproof.bench.fla_interp import patched
        try:
            with patched():
                fn = fla.load(self.v.name, True)
                out = self._ratios(fn)
        except Exception as e:  # noqa: BLE001  (FLA refusing these shapes, or its kernels failing here)
            return None, f"FLA's {self.v.name} failed under the interpreter: {type(e).__name__}: {str(e)[:200]}"
        return out, f"FLA {fla.version()}"

    def _ratios(self, fn):
        from chunkproof.bench.calls import fwd_bwd_state
        from chunkproof.fuzz.chunked import errors
        from chunkproof.fuzz.rounding import emulate
        out = {}
        for shape in self.shapes:
            x, h0, do, dht, scale, want, eb = self._case(shape)
            undo = emulate("trunc")
            try:
                with _no_overflow_checks():
                    eo = errors(*fwd_bwd_state(fn, x, h0, do, dht, scale), want)
            finally:
                undo()
            for t, e in eo.items():
                key = f"{','.join(map(str, shape))} {t}"
                out[key] = e / eb[t] if e == e and eb[t] > 0 else float("inf")
        return out


@contextlib.contextmanager
def _no_overflow_checks():
    """The interpreter without its int32 overflow checks on index arithmetic (a quarter of
    a Gated DeltaNet measure's time; docs/measurements.md, session 56): the planner
    measures rounding at small shapes, where no index comes near 2^31, and compiled
    kernels run without the checks unless built with debug.  The tests keep them.  A
    Triton without the option is left as it is (the measure is then slower, not other)."""
    from triton.runtime import interpreter as interp
    builder = getattr(interp, "interpreter_builder", None)
    opts = getattr(builder, "options", None)
    if not getattr(opts, "sanitize_overflow", False):
        yield
        return
    builder.options = dataclasses.replace(opts, sanitize_overflow=False)
    try:
        yield
    finally:
        builder.options = opts


def import_printed(root, pkg, runtime, name, src):
    """Module ``name`` of source ``src``, imported from package ``pkg`` (made under
    ``root`` beside a runtime of source ``runtime``, where it is not there yet): a printed
    kernel module outside generated_kernels/."""
    d = os.path.join(root, pkg)
    if not os.path.isdir(d):
        os.makedirs(d)
        for fname, text in (("__init__.py", ""), ("_runtime.py", runtime), (f"{name}.py", src)):
            with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
                f.write(text)
    sys.path.insert(0, root)
    try:
        return importlib.import_module(f"{pkg}.{name}")
    finally:
        sys.path.remove(root)


@contextlib.contextmanager
def _as_kernel(v: Variant, mod):
    """``mod`` stands for chunkproof.kernels.<name> (and ``v`` in the variant tables) for
    the inputs, the oracle and the baseline, which look kernels up by name; restored after."""
    from chunkproof.fuzz import cases
    from chunkproof.codegen.variants import BY_NAME
    key = f"chunkproof.kernels.{v.name}"
    saved = sys.modules.get(key), BY_NAME.get(v.name), cases.API.get(v.name)
    listed = v.name in cases.VARIANTS
    sys.modules[key], BY_NAME[v.name], cases.API[v.name] = mod, v, v.func
    if not listed:
        cases.VARIANTS.append(v.name)
    try:
        yield
    finally:
        for table, k, old in ((sys.modules, key, saved[0]), (BY_NAME, v.name, saved[1]),
                              (cases.API, v.name, saved[2])):
            if old is None:
                table.pop(k, None)
            else:
                table[k] = old
        if not listed:
            cases.VARIANTS.remove(v.name)
