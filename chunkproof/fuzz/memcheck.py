"""Bounds checks for kernels run under Triton's interpreter: every load and store that a
mask lets through must fall inside the storage of one of the launch's tensor arguments.
The interpreter itself reads and writes raw host addresses unchecked, so an access past a
buffer returns whatever lies there (or writes over it) and a float comparison can still
pass; on a GPU the same access is an illegal memory access or silent corruption."""
import contextlib

import numpy as np


class OutOfBounds(RuntimeError):
    """A masked-in address outside every tensor argument of the launch."""


@contextlib.contextmanager
def bounds_checked():
    """Within the block, every interpreted launch checks its loads and stores; one outside
    raises OutOfBounds naming the kernel, the access, how many addresses and the argument
    nearest the first of them.  Requires TRITON_INTERPRET=1."""
    from triton.runtime import interpreter as interp
    grid, builder = interp.GridExecutor, interp.InterpreterBuilder
    saved = grid._init_args_hst, builder.create_masked_load, builder.create_masked_store
    launch = {"kernel": None, "ranges": []}

    def init_args(self, args_dev, kwargs):
        args, kw = saved[0](self, args_dev, kwargs)
        ranges = []
        for name, t in list(zip(self.arg_names, args)) + list(kw.items()):
            if hasattr(t, "untyped_storage"):
                s = t.untyped_storage()
                ranges.append((s.data_ptr(), s.data_ptr() + s.nbytes(), name))
        launch.update(kernel=self.fn.__name__, ranges=ranges)
        return args, kw

    def check(ptrs, mask, access):
        addr = ptrs.data.astype(np.uint64)
        addr = addr[np.broadcast_to(mask.data, addr.shape).astype(bool)]
        if addr.size == 0:
            return
        size = np.dtype(interp._get_np_dtype(ptrs.get_element_ty())).itemsize
        inside = np.zeros(addr.shape, bool)
        for lo, hi, _ in launch["ranges"]:
            inside |= (addr >= lo) & (addr + size <= hi)
        if inside.all():
            return
        first = int(addr[~inside][0])
        lo, hi, name = min(launch["ranges"], key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
        raise OutOfBounds(f"{launch['kernel']}: {access} of {int((~inside).sum())} address(es) outside every "
                          f"tensor argument; the first is {first - lo:+d} bytes from the start of {name!r} "
                          f"({hi - lo} bytes)")

    # the cache and volatility arguments after these differ between Triton releases (3.8:
    # cache_modifier, eviction_policy; 3.9: cache_policy): passed on as they come
    def load(self, ptrs, mask, other, *rest):
        check(ptrs, mask, "load")
        return saved[1](self, ptrs, mask, other, *rest)

    def store(self, ptrs, value, mask, *rest):
        check(ptrs, mask, "store")
        return saved[2](self, ptrs, value, mask, *rest)

    grid._init_args_hst, builder.create_masked_load, builder.create_masked_store = init_args, load, store
    try:
        yield
    finally:
        grid._init_args_hst, builder.create_masked_load, builder.create_masked_store = saved
