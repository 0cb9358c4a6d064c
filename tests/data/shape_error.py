from chunkproof.derivations.examples import mamba2 as base
from chunkproof.derivations.dsl import Notebook, S_PREV
from chunkproof.derivations.ir import Truth

nb = Notebook(base.D, "shape_error.py").section("forward")
nb.forward("bad.QS", 3, r"O = Q S", Truth("outs"), base.Q @ S_PREV, "mamba2_chunk")
DERIVATION = base.D
