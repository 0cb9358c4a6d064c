"""Bytes each generated kernel must move, and (given a profile) the bandwidth it reached:
where forward + backward time goes, set against the memory floor kernel by kernel.

The kernels are not run: every `_*_kernel` of the module is replaced by a recorder and
the public function runs forward + backward on CPU tensors of the real shape (Triton's
interpreter mode only lets the API accept them; nothing executes).  Each launch records
its grid and the tensors it is passed; a kernel's bytes are the sizes of the distinct
tensors it is passed, each counted once: what it moves if it reads or writes each once
(a V-blocked kernel that re-reads q and k per block, or spills, moves more; one that is
passed a tensor it does not read, less: a row over 100% of the copy bandwidth says so).
With --profile (a profile_kernels.py
--mode fwd+bwd table of the same variant and shape) each row gets the kernel's measured
device time and the bandwidth that floor implies, against the copy bandwidth measured
on the H200 (4.22 TB/s).  --host N times the same stood-in call N times: the host's own
work of a call (this package's and torch's on CPU tensors), no Triton launch in it.

    TRITON_INTERPRET=1 python benchmarks/kernel_bytes.py --variant gla [--shape 4,4096,16,128] \
        [--profile benchmarks/results/2026-12-04/profile_base/fwdbwd.md --config "grad_BV=128"] \
        [--memory] [--host 30] [--narrow hr0,vr1]
"""
import contextlib
import functools
import os
import re
import sys

import torch

from chunkproof.bench import args as A, calls, inputs, printed

PROG = "kernel_bytes.py"
COPY_TBPS = 4.22


class Recorder:
    """Stands in for one Triton kernel: records each launch's grid and tensor arguments."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            meta = {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}
            g = grid(meta) if callable(grid) else grid
            tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
            if self.log is not None:     # None: record nothing (keeping the tensors would keep them alive)
                self.log.append((self.name, tuple(g), tensors, meta.get("BLOCKED")))
        return launch


@contextlib.contextmanager
def stood_in(mod, log):
    """Every `_*_kernel` of ``mod`` replaced by a Recorder (``log``: None records nothing)
    inside the block, and put back after it."""
    saved = {n: getattr(mod, n) for n in dir(mod) if re.fullmatch(r"_\w+_kernel", n)}
    try:
        for n in saved:
            setattr(mod, n, Recorder(n, log))
        yield
    finally:
        for n, k in saved.items():
            setattr(mod, n, k)


def _case(variant, shape, seed):
    B, T, H, D = shape
    x = inputs.bench_inputs(variant, B, T, H, D, torch.bfloat16, torch.float32, "cpu", seed=seed)
    h0, do, dht = inputs.cotangents(B, T, H, D, D, torch.bfloat16, "cpu")
    return x, h0, do, dht, D ** -0.5


@functools.lru_cache(maxsize=None)
def _module(variant, narrow=()):
    """(module, its public function): the generated one, or with ``narrow`` (passed tile
    names) that variant printed with those tiles in the inputs' dtype besides its record's."""
    return printed.narrowed(variant, narrow) if narrow else calls.ours(variant)


def launches(variant, shape, seed=0, narrow=()):
    """[(kernel, grid, tensors, BLOCKED)] of one forward + backward at ``shape``."""
    mod, fn = _module(variant, narrow)
    log = []
    with stood_in(mod, log):
        calls.fwd_bwd(fn, *_case(variant, shape, seed))
    return log


def host_ms(variant, shape, calls_n, seed=0, narrow=()):
    """(median ms of one forward + backward with every kernel stood in, launches per call):
    the host's own work of a call (ours and torch's on CPU tensors), no kernel run."""
    import statistics
    import time
    mod, fn = _module(variant, narrow)
    case = _case(variant, shape, seed)
    log = []
    with stood_in(mod, log):
        calls.fwd_bwd(fn, *case)
        n = len(log)
    times = []
    with stood_in(mod, None):
        for _ in range(calls_n):
            t = time.perf_counter()
            calls.fwd_bwd(fn, *case)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), n


class _Allocations:
    """The generated module's torch, counting the bytes alive of what it allocates
    (torch.empty, zeros, empty_like, zeros_like; freed when the last reference goes, as
    the CUDA caching allocator counts them) and their peak, with what was alive then."""

    def __init__(self, real):
        self.real, self.live, self.peak, self.at_peak = real, {}, 0, []
        self.alive_at = {}     # an allocation's name -> the names alive just before it (its last)
        self.sizes = {}        # an allocation's name -> its bytes (its last)

    def __getattr__(self, name):
        fn = getattr(self.real, name)
        if name not in ("empty", "zeros", "empty_like", "zeros_like"):
            return fn

        def alloc(*a, **kw):
            import inspect
            import weakref
            t = fn(*a, **kw)
            caller = inspect.stack()[1]
            what = (caller.code_context or ["?"])[0].strip().split("=")[0].strip() or caller.function
            key = id(t)
            self.alive_at[what] = {w for w, _ in self.live.values()}
            self.sizes[what] = t.nbytes
            self.live[key] = (what, t.nbytes)
            weakref.finalize(t, self.live.pop, key, None)
            total = sum(b for _, b in self.live.values())
            if total > self.peak:
                self.peak, self.at_peak = total, sorted(self.live.values(), key=lambda x: -x[1])
            return t
        return alloc


def peak_memory(variant, shape, seed=0, forward_only=False, narrow=()):
    """(bytes of the inputs, cotangents and initial state; the peak of what the module
    allocates on top during one forward + backward (``forward_only``: the forward alone,
    as the bench's forward rows call it: no initial state, no autograd); what was alive
    at that peak), the kernels stood in for (nothing runs).  The bench's torch.cuda.max_memory_allocated of
    the same calls on the H200, taken from after the inputs, matched the peak to 1 MiB
    (docs/measurements.md); what torch allocates outside the module is not counted."""
    mod, fn = _module(variant, narrow)
    x, h0, do, dht, scale = _case(variant, shape, seed)
    base = sum(t.nbytes for t in list(x.values()) + [h0, do, dht])
    track = _Allocations(mod.torch)
    with stood_in(mod, None):
        mod.torch = track
        try:
            if forward_only:
                calls.forward(fn, x, None, scale)
            else:
                calls.fwd_bwd(fn, x, h0, do, dht, scale)
        finally:
            mod.torch = track.real
    peak_memory.last = track
    return base, track.peak, track.at_peak


def bytes_per_kernel(log):
    """{kernel: (launches, bytes)}: per launch, the distinct tensors' sizes (a second
    pass of a guarded kernel, which recomputes only flagged chunks, adds none)."""
    out = {}
    for name, _, tensors, blocked in log:
        n, b = out.get(name, (0, 0))
        if not blocked:
            seen = {}
            for t in tensors:
                seen[(t.data_ptr(), t.nbytes)] = t.nbytes
            b += sum(seen.values())
        out[name] = (n + 1, b)
    return out


def profile_times(path, variant, config):
    """{kernel: us per call} of the section `### ours [config]` under `## variant` of a
    profile_kernels.py table."""
    want = f"### ours [{config or 'defaults'}]"
    rows, here, inside = {}, False, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                here, inside = line[3:].strip() == variant, False
            elif line.startswith("### "):
                inside = here and line.startswith(want)
            elif inside and line.startswith("| `"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                rows[cells[0].strip("`")] = float(cells[2])
    if not rows:
        raise ValueError(f"{path}: no section {want!r} under '## {variant}'")
    return rows


def table(per, times=None):
    lines = ["| kernel | launches | MB passed | us | GB/s | of copy bandwidth |", "|---|---|---|---|---|---|"]
    total_b = total_us = 0.0
    for name, (n, b) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        us = (times or {}).get(name)
        total_b += b
        if us:
            total_us += us
            bw = b / (us * 1e-6) / 1e9
            lines.append(f"| `{name}` | {n} | {b / 1e6:.0f} | {us:.0f} | {bw:.0f} | {bw / (COPY_TBPS * 1e3):.0%} |")
        else:
            lines.append(f"| `{name}` | {n} | {b / 1e6:.0f} | - | - | - |")
    if total_us:
        bw = total_b / (total_us * 1e-6) / 1e9
        lines.append(f"| all | | {total_b / 1e6:.0f} | {total_us:.0f} | {bw:.0f} | {bw / (COPY_TBPS * 1e3):.0%} |")
    return "\n".join(lines)


def main(argv=None):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--shape", default="4,4096,16,128", help="B,T,H,D")
    p.add_argument("--profile", default=None, help="a profile_kernels.py --mode fwd+bwd table")
    p.add_argument("--config", default="", help="its section: the TILING overrides it was run with ('' defaults)")
    p.add_argument("--memory", action="store_true", help="also the peak of what the module allocates, and what "
                                                          "is alive then")
    p.add_argument("--host", type=int, default=0, metavar="N",
                   help="also the median host time of N calls with the kernels stood in")
    p.add_argument("--narrow", default="", help="','-separated passed tiles printed in the inputs' dtype besides "
                                                "the record's (chunkproof.bench.printed)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        variant = A.variant(a.variant)
        shape = A.shape(a.shape)
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("run with TRITON_INTERPRET=1 (the API then takes CPU tensors; no kernel runs)")
        times = profile_times(a.profile, variant, a.config) if a.profile else None
        if a.host < 0:
            raise ValueError(f"--host must be 0 or more, not {a.host}")
        narrow = tuple(t.strip() for t in a.narrow.split(",") if t.strip())
        if narrow:
            printed.check_tiles(variant, narrow)
    except (ValueError, OSError) as e:
        return A.fail(PROG, e)
    from chunkproof.bench import tiling
    mod = _module(variant, narrow)[0]
    with tiling.applied(mod, tiling.parse_overrides(a.config)):
        per = bytes_per_kernel(launches(variant, shape, narrow=narrow))
    print(f"{variant} forward + backward at (B, T, H, D) = {shape}, bf16"
          + (f"; narrowed besides the record's: {', '.join(narrow)}" if narrow else "")
          + (f"; times: {a.profile} [{a.config or 'defaults'}]" if a.profile else ""))
    print(table(per, times))
    if a.host:
        with tiling.applied(mod, tiling.parse_overrides(a.config)):
            ms, n = host_ms(variant, shape, a.host, narrow=narrow)
        print(f"\nhost time of one forward + backward, the kernels stood in (CPU tensors; median of {a.host}): "
              f"{ms:.3f} ms for {n} launches")
    if a.memory:
        with tiling.applied(mod, tiling.parse_overrides(a.config)):
            base, peak, alive = peak_memory(variant, shape, narrow=narrow)
            _, fwd_peak, fwd_alive = peak_memory(variant, shape, forward_only=True, narrow=narrow)
        print(f"\ninputs, cotangents, initial state: {base / 2**20:.0f} MiB; allocated by the module at its peak: "
              f"{peak / 2**20:.0f} MiB; together {(base + peak) / 2**20:.0f} MiB.  Alive at the peak:")
        print(", ".join(f"{w} {b / 2**20:.0f}" for w, b in alive if b >= 2**20))
        print(f"\nthe forward alone (no initial state, no autograd): {fwd_peak / 2**20:.0f} MiB at its peak.  Alive then:")
        print(", ".join(f"{w} {b / 2**20:.0f}" for w, b in fwd_alive if b >= 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
