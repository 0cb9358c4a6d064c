from chunkproof.derivations.examples import mamba2 as base
from chunkproof.derivations.dsl import Notebook, tile
from chunkproof.derivations.ir import Truth

nb = Notebook(base.D, "unknown_symbol.py").section("forward")
nb.forward("bad.Z", 4, r"O = Z", Truth("outs"), tile("Zeta", "C", "Dv"), "mamba2_chunk")
DERIVATION = base.D
