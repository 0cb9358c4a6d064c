"""The README example with one typo: dK multiplies by Diag(gamma) instead of dividing."""
from chunkproof.derivations.examples import mamba2 as base
from chunkproof.derivations.dsl import Notebook, adj, diag

D = base.D
nb = Notebook(D, "wrong_dK.py").section("chunk backward")
nb.adjoint("mamba2.dK.typo", 0, r"\delta K = \text{Diag}(\gamma) \delta \overrightarrow{K}",
           adj(base.K), diag(base.Gamma) @ adj(base.Kr), "mamba2_chunk")
DERIVATION = D
