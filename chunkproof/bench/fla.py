"""flash-linear-attention (FLA), the baseline: imported only when asked for.

FLA 0.5+ routes some entry points (gated_delta_rule, kda, ...) through its dispatch
module (fla.ops.backends in 0.5, fla.backends in 0.6): the first registered backend that
is installed, enabled and accepts the call runs it, else FLA's own Triton kernels.
FLA_DISABLE_BACKEND_DISPATCH=1 (read when that module is imported) bypasses that;
`backend` says which one a call would take."""
import importlib
import importlib.metadata
import importlib.util
import os

ENTRY = {
    "gla": ("fla.ops.gla", "chunk_gla"),
    "gated_delta_rule": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
    "kda": ("fla.ops.kda", "chunk_kda"),
    "dplr_delta_rule": ("fla.ops.generalized_delta_rule", "chunk_dplr_delta_rule"),
    "delta_rule": ("fla.ops.delta_rule", "chunk_delta_rule"),
    "simple_gla": ("fla.ops.simple_gla", "chunk_simple_gla"),
    "retention": ("fla.ops.retention", "chunk_retention"),
    "rwkv6": ("fla.ops.rwkv6", "chunk_rwkv6"),
}
# our inputs arrive L2-normalised already (chunkproof.bench.inputs)
DEFAULT_KWARGS = {"gated_delta_rule": {"use_qk_l2norm_in_kernel": False}}


# where FLA keeps its dispatch (BackendRegistry, and the logger named after the module)
DISPATCH_MODULES = ("fla.backends", "fla.ops.backends")


def dispatch_module():
    """The name of the installed FLA's dispatch module, or None (FLA < 0.5)."""
    for name in DISPATCH_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ImportError:     # a parent package missing
            pass
    return None


def importable():
    return importlib.util.find_spec("fla") is not None


def version():
    """FLA's version from its installed metadata (no import), or why there is none."""
    if not importable():
        return "not installed"
    for dist in ("fla-core", "flash-linear-attention"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return "unknown version"


def load(variant, force=False, **kwargs):
    """FLA's entry point for `variant` as fn(*inputs, **call_kwargs), with
    DEFAULT_KWARGS and `kwargs` added to every call.  force: run the gated backward that
    FLA 0.6.0 refuses on Hopper with Triton 3.4 to 3.7.0 (its issue #640: wrong results),
    to time it; its gradients are measured like any others and may be wrong."""
    mod_name, fn_name = ENTRY[variant]
    if force:
        co = importlib.import_module("fla.ops.common.chunk_o")
        if hasattr(co, "TRITON_ABOVE_3_7_1"):
            co.TRITON_ABOVE_3_7_1 = True
    fn = getattr(importlib.import_module(mod_name), fn_name)
    extra = {**DEFAULT_KWARGS.get(variant, {}), **kwargs}
    return lambda *a, **kw: fn(*a, **kw, **extra)


def backend(variant, args=(), kwargs=None):
    """The backend FLA's dispatch picks for fn(*args, **kwargs): 'triton' (FLA's own
    kernels), another backend's name, or why it cannot tell."""
    if os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") == "1":
        return "triton (FLA_DISABLE_BACKEND_DISPATCH=1)"
    name = dispatch_module()
    try:
        reg = importlib.import_module(name).BackendRegistry if name else None
    except (ImportError, AttributeError):
        reg = None
    if reg is None:
        return f"triton (no BackendRegistry in {' or '.join(DISPATCH_MODULES)}: FLA < 0.5)"
    try:     # a private API of FLA that differs between versions: read defensively
        if hasattr(reg, "ensure_initialized"):
            reg.ensure_initialized(variant)
        registries = getattr(reg, "_registries", None)
        if registries is None:
            return "not determined (FLA's dispatch registry not recognised)"
        registry = registries.get(variant)
        if registry is None:
            return "triton (no other backend registered)"
        fn_name = ENTRY[variant][1]
        kwargs = {**DEFAULT_KWARGS.get(variant, {}), **(kwargs or {})}
        ordered = (registry._get_sorted_backends() if hasattr(registry, "_get_sorted_backends")
                   else list(getattr(registry, "_backends", {}).values()))
        for be in ordered:
            if not (be.is_available() and be.is_enabled()) or getattr(be, fn_name, None) is None:
                continue
            ok, _ = be.verify(fn_name, *args, **kwargs)
            if ok:
                return be.backend_type
        return "triton (no registered backend usable or accepting the call)"
    except Exception as e:  # noqa: BLE001
        return f"not determined ({type(e).__name__}: {e})"[:120]


class DispatchLog:
    """Which backends FLA's dispatch ran inside the block, read from what FLA logs (0.5+:
    "[FLA Backend] op.fn -> backend", at INFO on its dispatch module's logger, once per
    process and key: the keys are forgotten on entry so that every block reports its
    own).  `path()` after the block: 'triton' when no other backend ran."""

    PREFIX = "[FLA Backend] "

    def __init__(self):
        self.ran, self.rejected = [], []

    def emit(self, record):     # a logging.Handler's method, called by the logger
        msg = record.getMessage()
        if not msg.startswith(self.PREFIX):
            return
        where, _, rest = msg[len(self.PREFIX):].partition(" -> ")
        backend, _, reason = rest.partition(" rejected: ")
        (self.rejected if reason else self.ran).append(f"{backend.strip()} ({where.strip()})")

    def __enter__(self):
        import logging
        self._forget()
        self._handler = logging.Handler(logging.INFO)
        self._handler.emit = self.emit
        self._logger = logging.getLogger(dispatch_module() or DISPATCH_MODULES[0])
        self._level = self._logger.level
        self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self._handler)
        self._logger.setLevel(self._level)
        return False

    @staticmethod
    def _forget():
        name = dispatch_module()
        if name is None:      # FLA < 0.5: nothing dispatches, nothing to forget
            return
        try:    # private to FLA: a version without these simply logs less
            mod = importlib.import_module(name)
        except ImportError:
            return
        tables = [getattr(mod, name, {}) for name in ("_operation_registries", "_function_registries")]
        tables.append(getattr(getattr(mod, "BackendRegistry", None), "_registries", {}))    # FLA 0.5
        for table in tables:
            for reg in list(table.values()) if isinstance(table, dict) else ():
                if isinstance(getattr(reg, "_logged", None), set):
                    reg._logged.clear()

    def path(self):
        if os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") == "1":
            return "triton (FLA_DISABLE_BACKEND_DISPATCH=1)"
        if dispatch_module() is None:
            return "triton (FLA < 0.5: no dispatch)"
        ran = ", ".join(dict.fromkeys(self.ran))
        out = ran or "triton"
        if self.rejected:
            out += "; declined: " + ", ".join(dict.fromkeys(self.rejected))
        return out[:200]
