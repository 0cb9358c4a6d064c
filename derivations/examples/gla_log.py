"""GLA with log-space gates, written as kernels write it: the input is g_t = log alpha_t
(a C x Dk tile G per chunk), S_t = S_{t-1} Diag(exp(g_t)) + v_t k_t^T.

    chunkproof verify derivations/examples/gla_log.py

Chunk form, all decays as exp of prefix sums of g (exact checks hold g as the gate
exp(g) itself, so exp(g_i - g_j) is a quotient of gate products):
    G^c = cumsum(G),  g^C = last row of G^c
    <-Q = Q ⊙ exp(G^c),  ->K = K ⊙ exp(-G^c),  K^d = K ⊙ exp(1 (g^C)^T - G^c)
    O_[t] = <-Q S_[t-1]^T + (<-Q ->K^T ⊙ M) V,   S_[t] = S_[t-1] Diag(exp(g^C)) + V^T K^d
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, Derivation, Notebook, Program, S_PREV, adj, cumsum, diag,
                                        exp, last_row, ones, revcumsum, row, tile, tril)
from chunkproof.derivations.ir import DiagV, PlaceLast, Truth

D = Derivation("gla_log_example", "GLA with log-space gates", "gla_log.py")
D.add_recurrence(R.gla_log())

Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
G = tile("G", "C", "Dk", r"\mathbf{G}")

P = Program("gla_log_chunk", "chunk")
Gc = P.define("Gc", cumsum(G), r"\mathbf{G}^c")
gC = P.define("gC", last_row(Gc), r"\boldsymbol{g}^C")
Ql = P.define("Ql", Q * exp(Gc), r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = P.define("Kr", K * exp(-Gc), r"\overrightarrow{\mathbf{K}}", ">", "K")
Kd = P.define("Kd", K * exp(ones("C", "1") @ gC.T - Gc), r"\mathbf{K}^d")
O = P.define("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, r"\mathbf{O}")
S = P.define("S", S_PREV @ diag(exp(gC)) + V.T @ Kd, r"\mathbf{S}_{[t]}^C")
D.add_program(P)

nb = Notebook(D, "gla_log.py").section("chunk forward")
nb.forward("gla_log.O", r"O_{[t]} = \overleftarrow{Q} S_{[t-1]}^\top + (\overleftarrow{Q}\overrightarrow{K}^\top \odot M) V",
           Truth("outs"), Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, "gla_log_chunk")
nb.forward("gla_log.S", r"S_{[t]} = S_{[t-1]} \text{Diag}(\exp g^C) + V^\top K^d",
           Truth("state", "t*C+C"), S_PREV @ diag(exp(gC)) + V.T @ Kd, "gla_log_chunk")
# the decay between rows i and j of the chunk, exp(G^c_i - G^c_j), as attention scores read it
nb.identity("gla_log.decay", r"(\overleftarrow{Q}\overrightarrow{K}^\top)_{ij} = \sum_d q_{id} k_{jd} \exp(G^c_{id} - G^c_{jd})",
            row(Ql, "i").T @ row(Kr, "j"), (row(Q, "i") * exp(row(Gc, "i") - row(Gc, "j"))).T @ row(K, "j"),
            "gla_log_chunk", over=(("i", "1", "C"), ("j", "1", "C")))

nb.section("chunk backward")
# gradients in log space: delta g is a suffix sum of delta G^c (G^c = cumsum G)
nb.adjoint("gla_log.dgC", r"\delta g^C = (K^d \odot \delta K^d)^\top \mathbf{1} + \exp(g^C) \odot \text{diag}(S_{[t-1]}^\top \delta S_{[t]})",
           adj(gC), (Kd * adj(Kd)).T @ ones("C", "1") + exp(gC) * DiagV(S_PREV.T @ adj(S)), "gla_log_chunk")
nb.adjoint("gla_log.dGc", r"\delta G^c = \overleftarrow{Q} \odot \delta \overleftarrow{Q} - \overrightarrow{K} \odot \delta \overrightarrow{K} - K^d \odot \delta K^d + [0, \ldots, \delta g^C]^\top",
           adj(Gc), Ql * adj(Ql) - Kr * adj(Kr) - Kd * adj(Kd) + PlaceLast(adj(gC)), "gla_log_chunk")
nb.adjoint("gla_log.dG", r"\delta G = \text{suffix\_sum}(\delta G^c)", adj(G), revcumsum(adj(Gc)), "gla_log_chunk")

DERIVATION = D
