"""Device time: triton.testing.do_bench medians (after its warm-up), first calls,
peak memory, and per-kernel times under torch.profiler.  Without CUDA, `median_ms`
times one call by the wall clock: it only exercises the path (the interpreter)."""
import statistics
import time

import torch


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def on_cuda(tensors):
    return any(t.is_cuda for t in tensors if isinstance(t, torch.Tensor))


def median_ms(fn, cuda, reps=3, warmup_ms=50, rep_ms=300):
    """Median over `reps` do_bench medians of fn() (ms)."""
    if not cuda:
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    import triton.testing
    return statistics.median(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
                             for _ in range(reps))


def first_call_s(fn, cuda):
    """Seconds of one call, synchronised: a first call compiles (and FLA autotunes)."""
    t = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t


def peak_mib(fn):
    """MiB allocated on the GPU by one call of fn beyond what was allocated before."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def _device_us(evt):
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(evt, name):
            return getattr(evt, name)
    return 0.0


def kernel_times(call, iters):
    """{kernel name: (launches per call, us per call)} over `iters` calls after one
    warm-up call, under torch.profiler (CUDA)."""
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        torch.cuda.synchronize()
    rows = {}
    for evt in prof.key_averages():
        us = _device_us(evt)
        if us > 0:
            rows[evt.key] = (evt.count / iters, us / iters)
    return rows


def copy_bandwidth(nbytes=1 << 30):
    """Bytes per second of a device-to-device copy of `nbytes` (read + write counted),
    do_bench's median: the memory floor's bandwidth as measured here, not as specified."""
    ms = _copy_ms(nbytes)
    torch.cuda.empty_cache()     # the two buffers are gone once _copy_ms returns
    return 2 * nbytes / (ms * 1e-3)


def _copy_ms(nbytes):
    import triton.testing
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").fill_(1.0)
    dst = torch.empty_like(src)
    return triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
