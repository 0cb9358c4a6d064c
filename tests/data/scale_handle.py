"""A handle declared 1x1 whose definition, appended after add_program, is Dk x 1,
read by a Scale: it used to reach the evaluator and crash there."""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import Derivation, Notebook, Program, S_PREV, tile
from chunkproof.derivations.ir import Scale, Truth

D = Derivation("scale_handle", "a 1x1 handle whose definition is Dk x 1", "scale_handle.py")
D.add_recurrence(R.mamba2())
Q, K = tile("Q", "C", "Dk"), tile("K", "C", "Dk")
Alpha = tile("Alpha", "C", "1")
P = Program("p", "chunk")
D.add_program(P)
P.define("gC", K.T @ Alpha)
gC = tile("gC", "1", "1")
P.define("O", Q @ S_PREV.T)
P.define("S", Scale(gC, S_PREV))
nb = Notebook(D, "scale_handle.py").section("forward")
nb.forward("p.O", 9, r"O = Q S^\top", Truth("outs"), Q @ S_PREV.T, "p")
DERIVATION = D
