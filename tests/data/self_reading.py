"""Found by tests/test_derivation_fuzz.py: the handle of V renamed "O", so the
output's definition reads itself (it used to recurse without end)."""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import Derivation, Notebook, Program, S_PREV, tile
from chunkproof.derivations.ir import Truth

D = Derivation("self_reading", "O reads O", "self_reading.py")
D.add_recurrence(R.mamba2())
Q = tile("Q", "C", "Dk")
V = tile("O", "C", "Dv")
D.add_program(Program("p", "chunk", [("O", Q @ S_PREV.T + V), ("S", S_PREV)]))
nb = Notebook(D, "self_reading.py").section("forward")
nb.forward("p.O", 11, r"O = Q S^\top + V", Truth("outs"), Q @ S_PREV.T, "p")
DERIVATION = D
