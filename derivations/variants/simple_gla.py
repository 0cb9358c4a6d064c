"""Simple GLA: one scalar gate per head and step, in log space, the Mamba2 / SSD form as
FLA's ``chunk_simple_gla(q, k, v, g)`` takes it (g [B, T, H], g_t = log alpha_t):

    S_t = exp(g_t) S_{t-1} + v_t k_t^T,   o_t = S_t q_t

with S_t Dv x Dk (FLA's h is K x V, its transpose); FLA's ``scale`` multiplies q, outside
the recurrence.

    chunkproof verify derivations/variants/simple_gla.py

Chunk form, every decay an exp of the chunk's prefix sums g^c of g (C x 1):
    <-Q = Diag(exp g^c) Q,   ->K = Diag(exp(-g^c)) K,   g^C = the last row of g^c
    O_[t] = <-Q S_[t-1]^T + (<-Q ->K^T ⊙ M) V
    S_[t] = exp(g^C) (S_[t-1] + V^T ->K)
the layout of Gated DeltaNet's program without the delta rule.  The forms a kernel
prints without overflow (FLA's: decay ratios exp(g_i - g_j) in the scores, keys decayed
to the chunk's end in the state) are identities below.
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, S_PREV, Derivation, Notebook, Program, adj, cumsum, diag,
                                        exp, last_row, ones, revcumsum, shift, tile, tril)
from chunkproof.derivations.ir import Inner, PlaceLast, Truth
from chunkproof.derivations.kernel import kernel

D = Derivation("simple_gla", "Simple GLA (scalar log-space gate): chunkwise forward and backward",
               "simple_gla.py")
D.add_recurrence(R.simple_gla())

Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
G = tile("G", "C", "1", r"\boldsymbol{g}")
ONES_C, ONES_K = ones("C", "1"), ones("Dk", "1")

P = Program("simple_gla_chunk", "chunk",
            description="Simple GLA chunk forward: log-space prefix sums, decayed Q and K")
Gc = P.define("Gc", cumsum(G), r"\boldsymbol{g}^c")
gC = P.define("gC", last_row(Gc), r"g^C")
Ql = P.define("Ql", diag(exp(Gc)) @ Q, r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = P.define("Kr", diag(exp(-Gc)) @ K, r"\overrightarrow{\mathbf{K}}", ">", "K")
O = P.define("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, r"\mathbf{O}")
S = P.define("S", exp(gC) * (S_PREV + V.T @ Kr), r"\mathbf{S}_{[t]}")
D.add_program(P)
PR = P.name

nb = Notebook(D, "simple_gla.py").section("chunk forward")
nb.forward("simple_gla.O", r"\mathbf{O}_{[t]} = \overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + (\overleftarrow{\mathbf{Q}} \overrightarrow{\mathbf{K}}^\top \odot \mathbf{M}) \mathbf{V}",
           Truth("outs"), Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, PR, what="chunk outputs")
nb.forward("simple_gla.S", r"\mathbf{S}_{[t]} = \exp(g^C) (\mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}})",
           Truth("state", "t*C+C"), exp(gC) * (S_PREV + V.T @ Kr), PR, what="state after the chunk")
# the stable forms: no exp of a positive sum is formed
DECAY = exp(Gc @ ones("1", "C") - ONES_C @ Gc.T)
nb.forward("simple_gla.O_stable", r"\mathbf{O}_{[t]} = \overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + (\mathbf{Q} \mathbf{K}^\top \odot \exp(\boldsymbol{g}^c \mathbf{1}^\top - \mathbf{1} \boldsymbol{g}^{c\top}) \odot \mathbf{M}) \mathbf{V}",
           Truth("outs"), Ql @ S_PREV.T + tril((Q @ K.T) * DECAY) @ V, PR,
           what="chunk outputs with the decay ratios exp(g_i - g_j), i >= j, in the scores")
nb.forward("simple_gla.S_stable", r"\mathbf{S}_{[t]} = \exp(g^C) \mathbf{S}_{[t-1]} + \mathbf{V}^\top \text{Diag}(\exp(\mathbf{1} g^C - \boldsymbol{g}^c)) \mathbf{K}",
           Truth("state", "t*C+C"), exp(gC) * S_PREV + V.T @ diag(exp(ONES_C @ gC - Gc)) @ K, PR,
           what="state after the chunk with keys decayed to the chunk's end")

nb.section("chunk backward")
dS = adj(S)
nb.adjoint("simple_gla.dS", r"\delta \mathbf{S}_{[t]} = \exp(g^C_{[t+1]}) \delta \mathbf{S}_{[t+1]} + \delta \mathbf{O}_{[t+1]}^\top \overleftarrow{\mathbf{Q}}_{[t+1]}",
           dS, exp(shift(gC)) * shift(dS) + shift(DO).T @ shift(Ql), PR,
           blocks="not_last", what="delta S recursion over chunks")
DS_PREV = exp(gC) * dS + DO.T @ Ql
nb.adjoint("simple_gla.dS_prev", r"\delta \mathbf{S}_{[t-1]} = \exp(g^C) \delta \mathbf{S}_{[t]} + \delta \mathbf{O}^\top \overleftarrow{\mathbf{Q}}",
           adj(S_PREV), DS_PREV, PR, what="delta S_[t-1], every chunk")
nb.adjoint("simple_gla.dh0", r"\delta \mathbf{S}_{[-1]} = \exp(g^C_{[0]}) \delta \mathbf{S}_{[0]} + \delta \mathbf{O}_{[0]}^\top \overleftarrow{\mathbf{Q}}_{[0]}",
           adj(S_PREV), DS_PREV, PR, blocks="first", what="the initial state's gradient (FLA's dh0, transposed)")
nb.adjoint("simple_gla.dQl", r"\delta \overleftarrow{\mathbf{Q}} = \delta \mathbf{O} \mathbf{S}_{[t-1]} + (\delta \mathbf{O} \mathbf{V}^\top \odot \mathbf{M}) \overrightarrow{\mathbf{K}}",
           adj(Ql), DO @ S_PREV + tril(DO @ V.T) @ Kr, PR)
nb.adjoint("simple_gla.dKr", r"\delta \overrightarrow{\mathbf{K}} = \exp(g^C) \mathbf{V} \delta \mathbf{S}_{[t]} + (\delta \mathbf{O} \mathbf{V}^\top \odot \mathbf{M})^\top \overleftarrow{\mathbf{Q}}",
           adj(Kr), exp(gC) * (V @ dS) + tril(DO @ V.T).T @ Ql, PR)
nb.adjoint("simple_gla.dgC", r"\delta g^C = \exp(g^C) \langle \mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}}, \delta \mathbf{S}_{[t]} \rangle",
           adj(gC), exp(gC) * Inner(S_PREV + V.T @ Kr, dS), PR)
nb.adjoint("simple_gla.dGc", r"\delta \boldsymbol{g}^c = (\overleftarrow{\mathbf{Q}} \odot \delta \overleftarrow{\mathbf{Q}} - \overrightarrow{\mathbf{K}} \odot \delta \overrightarrow{\mathbf{K}}) \mathbf{1} + [0, \ldots, 0, \delta g^C]^\top",
           adj(Gc), (Ql * adj(Ql) - Kr * adj(Kr)) @ ONES_K + PlaceLast(adj(gC)), PR)

nb.section("input gradients")
nb.adjoint("simple_gla.dQ", r"\delta \mathbf{Q} = \text{Diag}(\exp \boldsymbol{g}^c) \delta \overleftarrow{\mathbf{Q}}",
           adj(Q), diag(exp(Gc)) @ adj(Ql), PR)
nb.adjoint("simple_gla.dK", r"\delta \mathbf{K} = \text{Diag}(\exp(-\boldsymbol{g}^c)) \delta \overrightarrow{\mathbf{K}}",
           adj(K), diag(exp(-Gc)) @ adj(Kr), PR)
nb.adjoint("simple_gla.dV", r"\delta \mathbf{V} = \exp(g^C) \overrightarrow{\mathbf{K}} \delta \mathbf{S}_{[t]}^\top + (\overrightarrow{\mathbf{K}} \overleftarrow{\mathbf{Q}}^\top \odot \mathbf{M}^\top) \delta \mathbf{O}",
           adj(V), exp(gC) * (Kr @ dS.T) + tril(Kr @ Ql.T, "MT") @ DO, PR)
nb.adjoint("simple_gla.dg", r"\delta \boldsymbol{g} = \text{suffix\_sum}(\delta \boldsymbol{g}^c)",
           adj(G), revcumsum(adj(Gc)), PR)
# what FLA's kernel computes: in the gate's own terms, q.dq - k.dk per row (the decays of
# <-Q and ->K cancel in each product) and <S_[t], dS_[t]> on the last row, suffix-summed
nb.adjoint("simple_gla.dg_qk", r"\delta \boldsymbol{g} = \text{suffix\_sum}\left((\mathbf{Q} \odot \delta \mathbf{Q} - \mathbf{K} \odot \delta \mathbf{K}) \mathbf{1} + [0, \ldots, 0, \langle \mathbf{S}_{[t]}, \delta \mathbf{S}_{[t]} \rangle]^\top\right)",
           adj(G), revcumsum((Q * adj(Q) - K * adj(K)) @ ONES_K + PlaceLast(Inner(S, dS))), PR,
           what="delta g from the true dQ, dK, dS (FLA's grouping)")
# the same with S_[t] expanded into S_[t-1] and the keys decayed to the chunk's end: the
# gradient kernels then form no end state (a V x K product per chunk) beside the V dS
# they form for dK
nb.adjoint("simple_gla.dg_qk_prev", r"\delta \boldsymbol{g} = \text{suffix\_sum}\left((\mathbf{Q} \odot \delta \mathbf{Q} - \mathbf{K} \odot \delta \mathbf{K}) \mathbf{1} + [0, \ldots, 0, \exp(g^C) \langle \mathbf{S}_{[t-1]}, \delta \mathbf{S}_{[t]} \rangle + \langle \text{Diag}(\exp(\mathbf{1} g^C - \boldsymbol{g}^c)) \mathbf{K}, \mathbf{V} \delta \mathbf{S}_{[t]} \rangle]^\top\right)",
           adj(G), revcumsum((Q * adj(Q) - K * adj(K)) @ ONES_K
                             + PlaceLast(exp(gC) * Inner(S_PREV, dS)
                                         + Inner(diag(exp(ONES_C @ gC - Gc)) @ K, V @ dS))), PR,
           what="delta g from the true dQ, dK, the state before the chunk and dS")

# the intra-chunk part of (Q . dQ - K . dK) 1 in the scores' own terms: with
# A = (Q K^T . D) . M the decayed scores and dA = (dO V^T) . M their gradient, q_i.dq_i
# holds sum_j dA_ij A_ij and k_j.dk_j sum_i dA_ij A_ij, so the two differ by A's row sums
# less its column sums; formed so, no large term cancels another (the form above needs
# dQ and dK to fp32 accuracy for that difference)
SCORES = tril((Q @ K.T) * DECAY) * (DO @ V.T)
KEND = diag(exp(ONES_C @ gC - Gc)) @ K
nb.adjoint("simple_gla.dg_scores", r"\delta \boldsymbol{g} = \text{suffix\_sum}\left((\overleftarrow{\mathbf{Q}} \odot \delta \mathbf{O} \mathbf{S}_{[t-1]}) \mathbf{1} - (\text{Diag}(\exp(\mathbf{1} g^C - \boldsymbol{g}^c)) \mathbf{K} \odot \mathbf{V} \delta \mathbf{S}_{[t]}) \mathbf{1} + (\mathbf{A} \odot \delta \mathbf{A}) \mathbf{1} - (\mathbf{A} \odot \delta \mathbf{A})^\top \mathbf{1} + [0, \ldots, 0, \exp(g^C) \langle \mathbf{S}_{[t-1]}, \delta \mathbf{S}_{[t]} \rangle + \langle \text{Diag}(\exp(\mathbf{1} g^C - \boldsymbol{g}^c)) \mathbf{K}, \mathbf{V} \delta \mathbf{S}_{[t]} \rangle]^\top\right), \ \mathbf{A} = (\mathbf{Q} \mathbf{K}^\top \odot \exp(\boldsymbol{g}^c \mathbf{1}^\top - \mathbf{1} \boldsymbol{g}^{c\top})) \odot \mathbf{M}, \ \delta \mathbf{A} = \delta \mathbf{O} \mathbf{V}^\top",
           adj(G), revcumsum((Ql * (DO @ S_PREV)) @ ONES_K - (KEND * (V @ dS)) @ ONES_K
                             + SCORES @ ONES_C - SCORES.T @ ONES_C
                             + PlaceLast(exp(gC) * Inner(S_PREV, dS) + Inner(KEND, V @ dS))), PR,
           what="delta g from the decayed scores and their gradient (intra-chunk), the state before the chunk and dS")

DERIVATION = D

# the kernel printed from this derivation; its backward claims are picked from the
# adjoint claims above (derivations/kernel.py), but for g's: simple_gla.dg reads
# ->K . delta ->K, whose first factor overflows where a chunk's decay underflows fp32, and
# dg_scores leaves no cancellation to the rounding of dQ and dK
kernel(D, "chunk_simple_gla", P, outputs="simple_gla.O", state="simple_gla.S",
       args=dict(q="Q", k="K", v="V", g="G"), backward=dict(grads=dict(g="simple_gla.dg_scores")),
       doc="S_t = exp(g_t) S_{t-1} + v_t k_t^T,  o_t = S_t q_t  (g [B, T, H], log-space)")
