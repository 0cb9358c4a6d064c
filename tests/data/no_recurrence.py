"""A program and a claim, and no recurrence to check them against."""
from chunkproof.derivations.dsl import Derivation, Notebook, Program, S_PREV, tile
from chunkproof.derivations.ir import Truth

D = Derivation("no_recurrence", "no recurrence", "no_recurrence.py")
Q = tile("Q", "C", "Dk")
D.add_program(Program("p", "chunk", [("O", Q @ S_PREV.T), ("S", S_PREV)]))
nb = Notebook(D, "no_recurrence.py").section("forward")
nb.forward("p.O", 8, r"O = Q S^\top", Truth("outs"), Q @ S_PREV.T, "p")
DERIVATION = D
