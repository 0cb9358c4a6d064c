"""The measuring loop of `chunkproof bench`: for each shape, each variant, each mode, our
kernels then FLA's (each: first call, gate, time, peak memory), and SDPA once per shape
and mode.  Every failure is a note on its row, never the end of the run.

A row has exactly ROW_KEYS; what else was learnt (first-call seconds, each tensor's
error, the notes) goes into a detail of the same index."""
import datetime
import gc
import os
import platform
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import torch

from chunkproof.bench import fla, gate, inputs, metrics, sides, timing

ROW_KEYS = ("variant", "mode", "B", "T", "H", "D", "dtype", "ours_ms", "fla_ms", "fla_backend", "sdpa_ms",
            "floor_ms", "ours_peak_mib", "fla_peak_mib", "max_rel_err_ours", "max_rel_err_fla", "gpu", "torch",
            "triton", "fla_version", "date")
MODES = ("fwd", "fwd+bwd")
NOMINAL_BANDWIDTH = 4.25e12     # B/s, the H200's copy as measured 2026-11 (used only if not measured)

# a test hook: called as PERTURB(side_name, mode, outs, grads) on what the gate is about to
# read (the prefix call's tensors), to show that a wrong output is refused
PERTURB: Optional[Callable] = None


@dataclass
class Options:
    variants: List[str]
    modes: List[str]
    shapes: List[Tuple[int, int, int, int]]
    dtype: str = "bf16"
    interpret: bool = False
    gate_t: int = 256
    tol: Optional[float] = None
    fla: bool = True
    fla_force: bool = False
    sdpa: bool = True
    budget_s: Optional[float] = None
    bandwidth: Optional[float] = None
    reps: int = 1
    seed: int = 0
    log: Callable = print
    on_row: Callable = lambda rows, details: None
    meta: dict = field(default_factory=dict)


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:240]


def _free(cuda=True):
    gc.collect()
    if cuda and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _context_lost(e):
    """Whether ``e`` is a CUDA error that ends the process's CUDA context (an illegal
    memory access, a device-side assert): every later CUDA call raises it again."""
    return type(e).__name__ == "AcceleratorError" or "CUDA error" in str(e)


class Bench:
    def __init__(self, opts: Options):
        self.o = opts
        self.cuda = not opts.interpret
        self.device = "cuda" if self.cuda else "cpu"
        self.torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[opts.dtype]
        self.base_tol = opts.tol if opts.tol is not None else gate.base_tolerance(opts.dtype)
        self.t0 = time.time()
        self.rows, self.details = [], []
        self.sdpa_cache = {}
        self.n_rows = len(opts.shapes) * len(opts.variants) * len(opts.modes)
        self.lost = None     # the CUDA error that ended this process's CUDA context, once one did

    # -- what every row shares
    def environment(self):
        import triton
        gpu = torch.cuda.get_device_name() if self.cuda else "cpu (Triton interpreter: timings meaningless)"
        self.common = dict(dtype=self.o.dtype, gpu=gpu, torch=torch.__version__, triton=triton.__version__,
                           fla_version=fla.version() if self.o.fla else "not run (--no-fla)",
                           date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        if self.o.bandwidth:
            self.bandwidth, how = self.o.bandwidth, "given (--bandwidth)"
        elif self.cuda:
            self.log("measuring the copy bandwidth (a 1 GiB device-to-device copy)")
            self.bandwidth, how = timing.copy_bandwidth(), "measured: torch copy of 1 GiB, do_bench median"
        else:
            self.bandwidth, how = NOMINAL_BANDWIDTH, "nominal H200 figure (interpreter: nothing to measure)"
        self.o.meta.update(
            python=platform.python_version(), device=gpu, bandwidth_Bps=self.bandwidth, bandwidth_source=how,
            gate=dict(prefix_steps=self.o.gate_t, tolerance=self.base_tol, gate_grad_factor=gate.GATE_FACTOR,
                      oracle="chunkproof.fuzz.reference (fp64 recurrence; gradients: its autograd)"),
            fla_dispatch="disabled (FLA_DISABLE_BACKEND_DISPATCH=1)"
            if os.environ.get("FLA_DISABLE_BACKEND_DISPATCH") == "1" else "as FLA dispatches",
            fla_force=self.o.fla_force,
            timing=(f"triton.testing.do_bench median (warm-up 50 ms, 300 ms), median of {self.o.reps}; "
                    f"peak memory: torch.cuda.max_memory_allocated over one call" if self.cuda else
                    "one wall-clock call under the interpreter (meaningless); no peak memory")
            + "; the first call is timed apart (compile, FLA's autotune)",
            interpreter=self.o.interpret, seed=self.o.seed)
        if self.o.fla and not fla.importable():
            self.o.fla = False
            self.o.meta["fla_missing"] = "FLA is not installed here: no FLA side (fla_ms null everywhere)"

    def log(self, msg):
        self.o.log(f"chunkproof bench [{time.time() - self.t0:6.1f} s] {msg}")

    def over_budget(self):
        return self.o.budget_s is not None and time.time() - self.t0 > self.o.budget_s

    # -- the loop
    def run(self):
        self.environment()
        for shape in self.o.shapes:
            for variant in self.o.variants:
                self.unit(variant, shape)
                _free(not self.lost)
        return self.rows, self.details

    def lost_note(self, name):
        return (f"{name}: not run: an earlier call ended this process's CUDA context ({self.lost}); "
                f"run the rest in a new process")

    def unit(self, variant, shape):
        B, T, H, D = shape
        scale = D ** -0.5
        recs = [self.new_record(variant, mode, shape) for mode in self.o.modes]
        if self.lost:
            for row, det in recs:
                det["notes"].append(self.lost_note("ours, fla and sdpa"))
                self.emit(row, det)
            return
        try:
            x = inputs.bench_inputs(variant, B, T, H, D, self.torch_dtype, torch.float32, self.device, self.o.seed)
            h0, do, dht = inputs.cotangents(B, T, H, D, D, self.torch_dtype, self.device, seed=self.o.seed + 1)
        except Exception as e:  # noqa: BLE001  (out of memory at a large shape, an unknown variant's ARGS)
            for row, det in recs:
                det["notes"].append(f"inputs: {first_line(e)}")
                self.emit(row, det)
            return
        t = min(self.o.gate_t, T)
        xp, dop = (x, do) if t == T else (inputs.first_steps(x, t), do[:, :t].contiguous())
        ref = gate.Reference(variant, xp, h0, dop, dht, scale)
        makers = [("ours", lambda: sides.ours(variant))]
        if self.o.fla and variant in fla.ENTRY:
            makers.append(("fla", lambda: sides.FLASide(variant, self.o.fla_force)))
        elif self.o.fla:     # a user's derivation, or a variant FLA has no op of
            for _, det in recs:
                det["notes"].append(f"fla: FLA has no op of {variant}")
        for (row, det), mode in zip(recs, self.o.modes):
            row["floor_ms"] = (metrics.forward_bytes(x, h0) if mode == "fwd" else metrics.fwd_bwd_bytes(x, h0)) \
                / self.bandwidth * 1e3
            det["gate_steps"] = t
            for name, make in makers:
                self.side(name, make, mode, row, det, x, xp, h0, do, dop, dht, scale, ref)
            if self.o.sdpa and self.lost:
                det["notes"].append(self.lost_note("sdpa"))
            elif self.o.sdpa:
                row["sdpa_ms"] = self.sdpa(shape, mode, x, do, det)
            self.emit(row, det)

    def new_record(self, variant, mode, shape):
        row = dict.fromkeys(ROW_KEYS)
        row.update(self.common, variant=variant, mode=mode, **dict(zip("BTHD", shape)))
        det = {k: row[k] for k in ("variant", "mode", "B", "T", "H", "D")}
        det.update(first_call_s={}, errors={}, gate={}, notes=[])
        return row, det

    def emit(self, row, det):
        self.rows.append(row)
        self.details.append(det)
        self.o.on_row(self.rows, self.details)

    def label(self, row):
        return (f"[{len(self.rows) + 1}/{self.n_rows}] {row['variant']} {row['mode']} "
                f"({row['B']}, {row['T']}, {row['H']}, {row['D']})")

    def side(self, name, make, mode, row, det, x, xp, h0, do, dop, dht, scale, ref):
        """One side's first call, gate, time and memory; row['<name>_*'] filled in as far as
        it got, the reason it stopped in det['notes']."""
        phase, s = "load", None
        if self.lost:
            det["notes"].append(self.lost_note(name))
            return
        try:
            s = make()
            if self.over_budget():
                det["notes"].append(f"{name}: not run: the --budget of {self.o.budget_s:g} s was spent")
                return
            what = "compile" + (" and autotune; FLA's can take minutes" if name == "fla" else "")
            self.log(f"{self.label(row)} {name}: first call ({what})...")
            phase = "first call"
            with s.context(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step = s.step(mode, x, h0, do, dht, scale)
                t1 = time.time()
                full = step()
                timing.sync()
                det["first_call_s"][name] = round(time.time() - t1, 2)
                phase = "gate"
                outs, grads = s.split(mode, full)
                bad = gate.nonfinite({**outs, **{"d" + n: g for n, g in (grads or {}).items()}})
                o_full = None
                if xp is not x:     # the prefix call the oracle can afford
                    o_full = outs["o"][:, :xp["q"].shape[1]].clone()
                    del full, outs, grads
                    outs, grads = s.split(mode, s.step(mode, xp, h0, dop, dht, scale)())
                if PERTURB is not None:
                    PERTURB(name, mode, outs, grads)
                verdict = gate.judge(ref, outs, grads, self.base_tol, o_full)
            det["errors"][name] = {n: float(f"{e:.3e}") for n, e in verdict.errors.items()}
            row[f"max_rel_err_{name}"] = verdict.max_err
            reasons = ([verdict.why()] if verdict.over else []) + \
                ([f"non-finite values at full length in {', '.join(bad)}"] if bad else [])
            det["gate"][name] = "fail" if reasons else "pass"
            self.log(f"{self.label(row)} {name}: first call {det['first_call_s'][name]} s; gate on {det['gate_steps']} "
                     f"steps: max rel err {verdict.max_err:.2e} ({det['gate'][name]})")
            if reasons:
                det["notes"].append(f"{name}: failed the correctness gate, not timed: " + "; ".join(reasons))
                return
            phase = "timing"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row[f"{name}_ms"] = timing.median_ms(step, self.cuda, self.o.reps)
                if self.cuda:
                    phase = "peak memory"
                    row[f"{name}_peak_mib"] = round(timing.peak_mib(step), 1)
            self.log(f"{self.label(row)} {name}: {row[f'{name}_ms']:.3f} ms")
        except sides.Unavailable as e:
            det["notes"].append(str(e))
        except Exception as e:  # noqa: BLE001  (out of memory, a compile error, FLA refusing)
            det["notes"].append(self.failure_note(name, phase, e))
            self.log(f"{self.label(row)} {name}: {det['notes'][-1]}")
            if _context_lost(e):
                self.lost = first_line(e)
        finally:
            if s is not None and s.log is not None and phase != "load":
                row["fla_backend"] = s.log.path()   # also when FLA refused: what ran until then
            _free(not self.lost)

    def failure_note(self, name, phase, e):
        msg = first_line(e)
        if name == "fla" and "#640" in msg:
            return (f"fla: refused by FLA ({phase}): {msg}" +
                    ("" if self.o.fla_force else " (--fla-force runs it anyway; its gradients are then gated)"))
        if phase == "gate":    # e.g. a variant the fp64 oracle does not know
            return f"{name}: the correctness gate could not run, so nothing is timed: {msg}"
        return f"{name}: {phase} failed: {msg}"

    def sdpa(self, shape, mode, x, do, det):
        key = (shape, mode)
        if key not in self.sdpa_cache:
            ms, note = None, None
            if self.over_budget():
                note = f"sdpa: not run: the --budget of {self.o.budget_s:g} s was spent"
            else:
                try:
                    step = sides.SDPA(x, do).step(mode)
                    step()
                    timing.sync()
                    ms = timing.median_ms(step, self.cuda, self.o.reps)
                except Exception as e:  # noqa: BLE001
                    note = f"sdpa: failed: {first_line(e)}"
                    if _context_lost(e):
                        self.lost = first_line(e)
                finally:
                    _free(not self.lost)
            self.sdpa_cache[key] = (ms, note)
        ms, note = self.sdpa_cache[key]
        if note:
            det["notes"].append(note)
        return ms
