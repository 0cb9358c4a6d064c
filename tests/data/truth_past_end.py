"""A truth index past the end of the sequence: the claim is ill-formed, and the
other claims of the file are still reported."""
from chunkproof.derivations.examples import mamba2 as base
from chunkproof.derivations.dsl import Notebook
from chunkproof.derivations.ir import Truth

nb = Notebook(base.D, "truth_past_end.py").section("forward")
nb.forward("bad.S_past", 3, r"S_{[t]} = S_{tC+C+L}", Truth("state", "t*C+C+L"), base.S, "mamba2_chunk")
DERIVATION = base.D
