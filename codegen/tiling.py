"""The tiling schema of a generated module: block and launch sizes and the product
type of each kernel family, one frozen record per variant (values: codegen/variants.py).

The generated modules import it (chunkproof.kernels._runtime), so the kernels validate
their run-time overrides with the same rules as the generator."""
import dataclasses
from dataclasses import dataclass, field, fields

# product types of the products that involve a computed tile, for bf16 inputs: "input"
# (rounded to bf16), "tf32" (two computed tiles in tf32, a computed tile times an input
# tile in bf16), "tf32_mixed" (both kinds in tf32).  fp32 inputs always multiply in fp32
# ("ieee"), fp16 inputs in tf32.
DOTS = ("input", "tf32", "tf32_mixed")
# the gradient kernels' gated intra-chunk products of fp32 operands (bf16 inputs)
GATED = ("tf32", "tf32x3")
# the type the reverse scan stores delta S (dh) in for 16-bit inputs: "input" (the inputs'
# dtype), "fp32" (fp32 unless every reader rounds it to the inputs' dtype before using it)
STORES = ("input", "fp32")
WARPS = (1, 2, 4, 8, 16)


def _key(doc, allowed):
    return field(metadata={"doc": doc, "allowed": allowed})


def _block(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 16 and x & (x - 1) == 0


def _positive(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


_RULES = {
    "block": (_block, "a power of two >= 16"),
    "block_or_none": (lambda x: x is None or _block(x), "None or a power of two >= 16"),
    "positive": (_positive, "an int >= 1"),
    "bool": (lambda x: isinstance(x, bool), "True or False"),
}


def _allows(allowed, value):
    if isinstance(allowed, tuple):
        return any(value == a and type(value) is type(a) for a in allowed)
    return _RULES[allowed][0](value)


def _describe(allowed):
    if isinstance(allowed, tuple):
        return "one of " + ", ".join(map(repr, allowed))
    return _RULES[allowed][1]


# the chunk and V blocks for K or V over 256 (Tiling.for_inputs)
HUGE = 32


@dataclass(frozen=True)
class Tiling:
    """Every key is stated for every variant; nothing falls back to another key."""
    BT: int = _key("chunk size: tokens per chunk (bf16 and fp16 inputs)", "block")
    BV: int = _key("V block of the output kernel and the reverse scan's parallel part", "block")
    scan_BV: int = _key("V block of the sequential kernels (state scan, reverse scan); on a GPU autotune also "
                        "tries half of it, per number of sequences x heads", "block")
    scan_BK: int = _key("K piece of the sequential kernels' state: it is held as BK / scan_BK tiles of this many "
                        "columns, at most 4 (codegen/ksplit.py)", "block")
    prep_warps: int = _key("warps of the intra kernels", WARPS)
    prep_stages: int = _key("pipelining stages of the intra kernels", "positive")
    prep_BK: int | None = _key("K block of the intra kernel's loop over K (codegen/kloop.py: the per-K work a "
                               "block at a time, each product over K summed by block), where the kernel can "
                               "loop (gen names the ones that cannot); None: every K column at once",
                               "block_or_none")
    scan_warps: int = _key("warps of the sequential kernels (state scan, reverse scan)", WARPS)
    scan_stages: int = _key("pipelining stages of the sequential kernels", "positive")
    out_warps: int = _key("warps of the output kernel and of the reverse scan's parallel part", WARPS)
    out_stages: int = _key("pipelining stages of the output kernel and the reverse scan's parallel part",
                           "positive")
    grad_BV: int = _key("V block of the gradient kernels (at most V); where their launch needs more shared "
                        "memory than the GPU has, the backward halves it until it fits, once per inputs' "
                        "dtype and head sizes", "block")
    grad_BK: int | None = _key("K block of the gradient kernel blocked over K (the KB kernel, or the one K "
                               "kernel where nothing in it sums over K); None where there is none",
                               "block_or_none")
    grad_warps: int = _key("warps of the gradient kernels", WARPS)
    grad_stages: int = _key("pipelining stages of the gradient kernels", "positive")
    prep_dots: str = _key("products with a computed tile in the intra kernels", DOTS)
    scan_dots: str = _key("products with a computed tile in the state scan", DOTS)
    out_dots: str = _key("products with a computed tile in the output kernel", DOTS)
    reverse_dots: str = _key("products with a computed tile in the reverse scan (and its parallel part)", DOTS)
    gradv_dots: str = _key("products with a computed tile in the gradient V kernel", DOTS)
    grad_dots: str = _key("products with a computed tile in the gradient K, C and KB kernels", DOTS)
    grad_gated: str = _key("the gradient kernels' gated products of fp32 operands (Variant.precise_lines)", GATED)
    dh_store: str = _key("the type delta S (dh) is stored in between the reverse scan and the gradient V kernel "
                         "for 16-bit inputs: 'input' (their dtype) or 'fp32' (fp32 unless every reader rounds it "
                         "to their dtype first); fp32 inputs store fp32", STORES)
    autotune: bool = _key("on a GPU, triton.autotune picks each kernel's warps (and a V-tiled kernel's BV) "
                          "among these values and their neighbours; the interpreter runs these values", "bool")
    keep_forward: bool = _key("autograd keeps the forward's intra tiles and chunk states for the backward", "bool")
    fp32_BT: int = _key("chunk size for fp32 inputs", "block")
    fp32_BV: int = _key("V block (BV, and scan_BV at most) for fp32 inputs", "block")
    fp32_wide_BV: int = _key("V block (BV, and scan_BV at most) for fp32 inputs with K or V over 128",
                               "block")
    fp32_stages: int = _key("scan_stages and out_stages for fp32 inputs", "positive")

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not _allows(f.metadata["allowed"], value):
                raise ValueError(f"TILING {f.name} must be {_describe(f.metadata['allowed'])}, got {value!r} "
                                 f"({f.metadata['doc']})")

    @classmethod
    def keys(cls):
        return [f.name for f in fields(cls)]

    @classmethod
    def doc(cls, key):
        return {f.name: f.metadata["doc"] for f in fields(cls)}[key]

    @classmethod
    def of(cls, **values):
        """A Tiling from keyword values; a missing or unknown key is a ValueError naming it."""
        unknown = sorted(set(values) - set(cls.keys()))
        missing = [k for k in cls.keys() if k not in values]
        if unknown or missing:
            what = "; ".join(part for part in (
                f"unknown TILING key(s) {', '.join(map(repr, unknown))}" if unknown else "",
                f"missing TILING key(s) {', '.join(map(repr, missing))}" if missing else "") if part)
            raise ValueError(f"{what} (the keys: {', '.join(cls.keys())})")
        return cls(**values)

    def replace(self, **changes):
        """This tiling with ``changes``; an unknown key or a bad value is a ValueError."""
        unknown = sorted(set(changes) - set(self.keys()))
        if unknown:
            raise ValueError(f"unknown TILING key(s) {', '.join(map(repr, unknown))} "
                             f"(the keys: {', '.join(self.keys())})")
        return dataclasses.replace(self, **changes)

    def for_inputs(self, fp32, wide, huge=False):
        """The tiling the kernels run with: fp32 inputs (``wide``: K or V over 128) take
        the fp32 chunk size, V block and stages, as their products stage twice the bytes;
        K or V over 256 (``huge``) halves the chunk and the V blocks down to HUGE, as a
        whole K row is one block (benchmarks/compile_check.py at K = V = 512: 206-344 KB
        of shared memory per program at 64, 100-135 KB at 32, the H200 has 227 KB)."""
        t = self
        if fp32:
            bv = t.fp32_wide_BV if wide else t.fp32_BV
            t = dataclasses.replace(t, BT=t.fp32_BT, BV=bv, scan_BV=min(t.scan_BV, bv),
                                    scan_stages=t.fp32_stages, out_stages=t.fp32_stages)
        if huge:
            cap = HUGE // 2 if fp32 else HUGE
            t = dataclasses.replace(t, BT=min(t.BT, cap), BV=min(t.BV, cap),
                                    scan_BV=min(t.scan_BV, cap), grad_BV=min(t.grad_BV, cap))
        return t
