"""A claim whose program was never added."""
from chunkproof.derivations.examples import mamba2 as base
from chunkproof.derivations.dsl import Notebook
from chunkproof.derivations.ir import Truth

nb = Notebook(base.D, "no_program.py").section("forward")
nb.forward("bad.prog", 3, r"O = Q S", Truth("outs"), base.Ql @ base.S_PREV.T, "mamba2_chunkk")
DERIVATION = base.D
