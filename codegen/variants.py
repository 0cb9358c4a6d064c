"""The generated variants: which verified claims each kernel is printed from, how the
FLA-style arguments bind to the derivation's tiles, and the tiling (data, not code)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Arg:
    """One tensor argument of the public function.  ``tile`` is the derivation's
    input tile it binds to; ``kind``: 'k' ([B,T,H,K]), 'v' ([B,T,H,V]), 'gate_k' (log
    gate [B,T,H,K]), 'gate_h' (log gate [B,T,H]), 'head' ([B,T,H])."""
    name: str
    tile: str
    kind: str


@dataclass(frozen=True)
class Variant:
    name: str                      # module name under generated_kernels/
    func: str                      # public function, FLA's name
    derivation: str                # bundled derivation module (derivations/<name>.py)
    program: str                   # the chunk program the kernel is printed from
    out_claim: str                 # forward claim giving O_[t]   (must hold)
    state_claim: str               # forward claim giving S_[t]^C (must hold)
    args: Tuple[Arg, ...]
    recurrence_doc: str            # the recurrence in FLA's terms, for docstrings
    tiling: Dict[str, object] = field(default_factory=dict)   # codegen/tiling.py's keys, all of them
    # the backward's claims (issue 4; checked by codegen.plan.backward_claims): 'dS' the
    # recursion of delta S_[t]^C over chunks, 'dS_prev' delta S_[t-1]^C in full (the
    # initial state's gradient at the first chunk), 'grads' one claim per argument (gates:
    # delta log alpha), 'inner' the adjoints of the program's definitions they read
    backward: Dict[str, object] = field(default_factory=dict)
    # the gradient lines (definitions or finals g_<arg>) whose gated intra-chunk products
    # take TILING grad_gated; the others' take the kernel's PREC2.  Chosen by the precision
    # planner (codegen/precision.py); None: every line (the planner's survey of them)
    precise_lines: Optional[Tuple[str, ...]] = ()
    # the lines of the gradient and reverse scan kernels whose products of a tile read
    # from memory by a computed one take the computed tiles' type (DT2/CT2/PREC2: fp32
    # operands in tf32 where the kernel's family is "tf32") instead of DT3: "tf32_mixed"
    # for those products only.  "n" names every such product of line n, "n#2" its second
    # where it has several (emit.settle_products).  Chosen by the precision planner
    mixed_lines: Tuple[str, ...] = ()
    # the tiles passed between backward kernels (V reductions, C x C tiles, the reverse
    # scan's C x Dv tiles) stored in the inputs' dtype instead of fp32, a V reduction only
    # where one V block covers V (no sum over blocks).  Chosen by the precision planner
    narrowed: Tuple[str, ...] = ()
    # the split V kernel also writes each row sum over Dk of a V reduction times a tile
    # free of any, (X ⊙ Y) 1, as a C x 1 V reduction (backward.split_gradients), so that
    # a kernel that reads X only for that sum reads a column instead; on for every
    # variant (off only to compare, tests/test_codegen.py)
    vred_rowsums: bool = True
    # each K-side gradient kernel forms the tile-sized V reductions it reads whose Dv-wide
    # operands are all in memory (delta O S_[t-1], delta U S_[t-1], ...) itself, in a loop
    # over V blocks, instead of reading the V kernel's fp32 buffers of them (emit._looped,
    # backward.loopable): the states stay alive longer, those buffers go (peak memory);
    # on for every variant (off only to compare, tests/test_codegen.py)
    loop_reductions: bool = True

    @property
    def derivation_doc(self) -> str:
        """Where the derivation is, as the generated files' headers say it."""
        if self.derivation.endswith(".py"):
            return self.derivation
        return f"chunkproof.derivations/{self.derivation.replace('.', '/')}.py"

    def tile_of(self) -> Dict[str, Arg]:
        return {a.tile: a for a in self.args}


# Tiling keys: codegen/tiling.py (one line each), the same for every kernel; the product
# types (the *_dots keys) are the precision planner's (codegen/precision.py, recorded in
# generated_kernels/<name>.precision.json); why each size is what it is:
# docs/measurements.md (H200, (4, 4096, 16, 128) bf16, side by side with FLA).
DEFAULT = dict(
    BT=64, BV=64,
    scan_BV=64,                # autotune tries 32 too (on Hopper: HOPPER_MIN_SCAN_BLOCK)
    scan_BK=64,                # the scans' state in pieces of 64 (two at K = 128)
    prep_warps=4, prep_stages=1, out_warps=4, out_stages=2,   # parallel kernels faster at 4 warps
    prep_BK=64,                # the intra kernel's loop over K, where it can loop (GLA 7.20 -> 6.64 ms)
    # 3 stages: forward + backward on the H100 at (2, 16384, 16, 128) 4-11% faster for the
    # delta rules and RetNet, 1% for KDA and RWKV-6, within 1% either way for DPLR, GLA and
    # simple GLA; every error the same (docs/measurements.md, session 55); on a GPU
    # autotune tries 2 as well (Launch.configs), per kernel and shape
    scan_warps=8, scan_stages=3,
    # grad_BV: one V block of 128 where it fits (GLA 3.49 -> 2.86 ms, KDA 5.52 -> 5.05, DPLR
    # 9.78 -> 8.07 fwd+bwd); where it does not (RWKV-6 bf16) the first backward halves it
    grad_BV=128, grad_warps=8, grad_stages=1,  # 4 warps were slower
    autotune=True,
    keep_forward=True,         # saves the intra kernel and the state scan in the backward
    # fp32 products stage twice the bytes: the scans fit 227 KB of shared memory so; the
    # delta rules' fp32 gradient kernels need 278 KB at chunks of 64, 156 KB at 32
    fp32_BT=32, fp32_BV=32, fp32_wide_BV=16, fp32_stages=1,
    prep_dots="tf32", scan_dots="tf32", out_dots="tf32", reverse_dots="tf32", gradv_dots="tf32", grad_dots="tf32",
    grad_gated="tf32x3", dh_store="fp32",
)


def from_kernel(k, source: str = "") -> Variant:
    """The codegen record of a derivation's kernel declaration (derivations/kernel.py).
    ``source``: the derivation file, for a user's derivation (bundled: its module)."""
    return Variant(k.module, k.func, source or k.derivation, k.program, k.outputs, k.state,
                   tuple(Arg(a.name, a.tile, a.kind) for a in k.args), k.doc, dict(DEFAULT),
                   dict(k.backward) if k.backward else {})


def _bundled() -> List[Variant]:
    from chunkproof.derivations.loader import KERNEL_MODULES, bundled
    return [from_kernel(k, m) for m in KERNEL_MODULES for d in bundled([m]) for k in d.kernels]


VARIANTS: List[Variant] = _bundled()
BY_NAME = {v.name: v for v in VARIANTS}
