"""DeltaNet written as a new user would: the recurrence, the chunk program, its two
forward claims and a kernel declaration, and no backward claim at all (chunkproof gen
derives the backward).  Used by tests/test_backward_pick.py and the README's walk-through."""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import S_PREV, Derivation, Notebook, Program, diag, eye, inv, tile, tril
from chunkproof.derivations.ir import Truth
from chunkproof.derivations.kernel import kernel

D = Derivation("my_deltanet", "DeltaNet, forward claims only", "my_deltanet.py")
D.add_recurrence(R.deltanet())
Q, K, V = tile("Q", "C", "Dk"), tile("K", "C", "Dk"), tile("V", "C", "Dv")
Beta = tile("Beta", "C", "1")

P = Program("wy", "chunk", description="the UT transform, V_new, output and state")
At = P.define("At", inv(eye("C") + diag(Beta) @ tril(K @ K.T, "M-1")))
W = P.define("W", At @ diag(Beta) @ K)
U = P.define("U", At @ diag(Beta) @ V)
Vnew = P.define("Vnew", U - W @ S_PREV.T)
O = P.define("O", Q @ S_PREV.T + tril(Q @ K.T) @ Vnew)
S = P.define("S", S_PREV + Vnew.T @ K)
D.add_program(P)

nb = Notebook(D, "my_deltanet.py").section("forward")
nb.forward("my.O", "", Truth("outs"), Q @ S_PREV.T + tril(Q @ K.T) @ Vnew, "wy")
nb.forward("my.S", "", Truth("state", "t*C+C"), S_PREV + Vnew.T @ K, "wy")

kernel(D, "chunk_my_deltanet", P, outputs="my.O", state="my.S", args=dict(q=Q, k=K, v=V, beta=Beta))

DERIVATION = D
