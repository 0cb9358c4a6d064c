"""What one generated kernel computes, reads and writes: the planner's answer
(codegen/plan.py for the forward, codegen/backward.py for the backward), which
codegen/emit.py prints."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

from chunkproof.derivations import ir
from chunkproof.derivations.dsl import Claim

# how a tile passed between two backward kernels lies in memory (fp32):
VSUM = "vsum"      # one copy per V block (a V reduction's partial sums): the reader adds the NV copies
CHUNK = "chunk"    # one copy per chunk
VCOLS = "vcols"    # a C x Dv tile over the padded V (BVF) columns, of which the first V are written


@dataclass(frozen=True)
class Final:
    """A value the kernel exists to produce, printed from a claim's right-hand side."""
    name: str          # the tile: g_<arg>, dS_prev, or the program's output / state
    expr: ir.Expr
    claim: Claim


@dataclass(frozen=True)
class Passed:
    """A tile one kernel writes to memory and a later kernel reads: a subexpression of
    a checked claim (or a definition), computed once."""
    name: str
    expr: ir.Expr
    layout: str        # VSUM, CHUNK or VCOLS


@dataclass
class KernelPlan:
    plan: object                    # the Plan, extended with the definitions this kernel prints
    computes: List[str]             # definitions printed, in order (program's and adjoints')
    finals: List[Final] = field(default_factory=list)
    reads: List[str] = field(default_factory=list)            # the intra kernel's boundary tiles read
    writes: List[str] = field(default_factory=list)           # boundary tiles written (the intra kernel)
    reads_passed: List[Passed] = field(default_factory=list)  # tiles an earlier backward kernel wrote
    writes_passed: List[Passed] = field(default_factory=list)  # tiles written for a later backward kernel
    cites: Dict[str, str] = field(default_factory=dict)       # definition -> the claim it is printed from

    def defs(self) -> Dict[str, ir.Expr]:
        return dict(self.plan.defs)
