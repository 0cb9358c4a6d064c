"""DeltaNet, the delta rule without a gate (FLA's ``chunk_delta_rule(q, k, v, beta)``):

    S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   o_t = S_t q_t

with S_t Dv x Dk (FLA's state h is its transpose, K x V).  FLA applies ``scale`` to q
before the recurrence, so the derivation has none.

    chunkproof verify derivations/variants/delta_rule.py

Chunk form: Gated DeltaNet's KDA layout (derivations/gated_deltanet.py, gdn_chunk_kda)
with every gate 1, which is FLA's WY / UT transform:
    X~ = I + Diag(beta)(K K^T ⊙ M_{-1}),  A~ = X~^{-1}          (FLA: A = solve_tril)
    W = A~ Diag(beta) K,  U = A~ Diag(beta) V                     (FLA: w, u)
    V_new = U - W S_[t-1]^T                                       (FLA: v_new)
    O_[t] = Q S_[t-1]^T + (Q K^T ⊙ M) V_new,   S_[t] = S_[t-1] + V_new^T K
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, S_PREV, Derivation, Notebook, Program, adj, diag, eye, inv,
                                        row, shift, summ, tile, tril)
from chunkproof.derivations.ir import DiagV, Truth
from chunkproof.derivations.kernel import kernel

D = Derivation("delta_rule", "DeltaNet (delta rule): chunkwise WY form, forward and backward",
               "delta_rule.py")
D.add_recurrence(R.deltanet())

Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
Beta = tile("Beta", "C", "1", r"\boldsymbol{\beta}")
I_C = eye("C")

P = Program("delta_rule_chunk", "chunk",
            description="DeltaNet chunk forward: UT transform (W, U), V_new, output and state")
Xt = P.define("Xt", I_C + diag(Beta) @ tril(K @ K.T, "M-1"), r"\widetilde{\mathbf{X}}")
At = P.define("At", inv(Xt), r"\widetilde{\mathbf{A}}")
W = P.define("W", At @ diag(Beta) @ K, r"\mathbf{W}")
U = P.define("U", At @ diag(Beta) @ V, r"\mathbf{U}")
Vnew = P.define("Vnew", U - W @ S_PREV.T, r"\mathbf{V}_{new}")
O = P.define("O", Q @ S_PREV.T + tril(Q @ K.T) @ Vnew, r"\mathbf{O}")
S = P.define("S", S_PREV + Vnew.T @ K, r"\mathbf{S}_{[t]}")
D.add_program(P)
PR = P.name

nb = Notebook(D, "delta_rule.py").section("chunk forward")
nb.forward("delta_rule.O", r"\mathbf{O}_{[t]} = \mathbf{Q} \mathbf{S}_{[t-1]}^\top + (\mathbf{Q} \mathbf{K}^\top \odot \mathbf{M}) \mathbf{V}_{new}",
           Truth("outs"), Q @ S_PREV.T + tril(Q @ K.T) @ Vnew, PR, what="chunk outputs")
nb.forward("delta_rule.S", r"\mathbf{S}_{[t]} = \mathbf{S}_{[t-1]} + \mathbf{V}_{new}^\top \mathbf{K}",
           Truth("state", "t*C+C"), S_PREV + Vnew.T @ K, PR, what="state after the chunk")
# the WY representation: the chunk's product of (I - beta k k^T) is I - W^T K
nb.forward("delta_rule.S_wy", r"\mathbf{S}_{[t]} = \mathbf{S}_{[t-1]} (\mathbf{I} - \mathbf{W}^\top \mathbf{K}) + \mathbf{U}^\top \mathbf{K}",
           Truth("state", "t*C+C"), S_PREV @ (eye("Dk") - W.T @ K) + U.T @ K, PR,
           what="state after the chunk, WY form")
R_ALL = (("r", "1", "C"),)
nb.identity("delta_rule.w_rec", r"\boldsymbol{w}^r = \beta^r \left(\boldsymbol{k}^r - \sum_{i<r} \boldsymbol{w}^i \boldsymbol{k}^{i\top} \boldsymbol{k}^r\right)",
            row(W, "r"), row(Beta, "r") * (row(K, "r") - summ("i", "1", "r-1", row(W, "i") @ row(K, "i").T @ row(K, "r"))),
            PR, over=R_ALL, what="W = A~ Diag(beta) K solves the w recursion")
nb.identity("delta_rule.u_rec", r"\boldsymbol{u}^r = \beta^r \left(\boldsymbol{v}^r - \sum_{i<r} \boldsymbol{u}^i \boldsymbol{k}^{i\top} \boldsymbol{k}^r\right)",
            row(U, "r"), row(Beta, "r") * (row(V, "r") - summ("i", "1", "r-1", row(U, "i") @ row(K, "i").T @ row(K, "r"))),
            PR, over=R_ALL, what="U = A~ Diag(beta) V solves the u recursion")

nb.section("chunk backward")
dS = adj(S)
DVNEW = K @ dS.T + tril(Q @ K.T).T @ DO
nb.adjoint("delta_rule.dVnew", r"\delta \mathbf{V}_{new} = \mathbf{K} \delta \mathbf{S}_{[t]}^\top + (\mathbf{Q} \mathbf{K}^\top \odot \mathbf{M})^\top \delta \mathbf{O}",
           adj(Vnew), DVNEW, PR)
nb.adjoint("delta_rule.dU", r"\delta \mathbf{U} = \delta \mathbf{V}_{new}", adj(U), adj(Vnew), PR)
nb.adjoint("delta_rule.dW", r"\delta \mathbf{W} = -\delta \mathbf{V}_{new} \mathbf{S}_{[t-1]}",
           adj(W), -adj(Vnew) @ S_PREV, PR)
nb.adjoint("delta_rule.dAt", r"\delta \widetilde{\mathbf{A}} = \delta \mathbf{W} \mathbf{K}^\top \text{Diag}(\boldsymbol{\beta}) + \delta \mathbf{U} \mathbf{V}^\top \text{Diag}(\boldsymbol{\beta})",
           adj(At), adj(W) @ K.T @ diag(Beta) + adj(U) @ V.T @ diag(Beta), PR)
nb.adjoint("delta_rule.dXt", r"\delta \widetilde{\mathbf{X}} = -\widetilde{\mathbf{A}}^\top \delta \widetilde{\mathbf{A}} \widetilde{\mathbf{A}}^\top",
           adj(Xt), -(At.T @ adj(At) @ At.T), PR)
# delta S runs backwards over chunks; at the last chunk it is the loss seed dS_T
DS_PREV = dS + DO.T @ Q - adj(Vnew).T @ W
nb.adjoint("delta_rule.dS", r"\delta \mathbf{S}_{[t]} = \delta \mathbf{S}_{[t+1]} + \delta \mathbf{O}_{[t+1]}^\top \mathbf{Q}_{[t+1]} - \delta \mathbf{V}_{new,[t+1]}^\top \mathbf{W}_{[t+1]}",
           dS, shift(dS) + shift(DO).T @ shift(Q) - shift(adj(Vnew)).T @ shift(W), PR,
           blocks="not_last", what="delta S recursion over chunks")
nb.adjoint("delta_rule.dS_prev", r"\delta \mathbf{S}_{[t-1]} = \delta \mathbf{S}_{[t]} + \delta \mathbf{O}^\top \mathbf{Q} - \delta \mathbf{V}_{new}^\top \mathbf{W}",
           adj(S_PREV), DS_PREV, PR, what="delta S_[t-1], every chunk")
nb.adjoint("delta_rule.dh0", r"\delta \mathbf{S}_{[-1]} = \delta \mathbf{S}_{[0]} + \delta \mathbf{O}_{[0]}^\top \mathbf{Q}_{[0]} - \delta \mathbf{V}_{new,[0]}^\top \mathbf{W}_{[0]}",
           adj(S_PREV), DS_PREV, PR, blocks="first", what="the initial state's gradient (FLA's dh0, transposed)")

nb.section("input gradients")
nb.adjoint("delta_rule.dQ", r"\delta \mathbf{Q} = \delta \mathbf{O} \mathbf{S}_{[t-1]} + (\delta \mathbf{O} \mathbf{V}_{new}^\top \odot \mathbf{M}) \mathbf{K}",
           adj(Q), DO @ S_PREV + tril(DO @ Vnew.T) @ K, PR)
nb.adjoint("delta_rule.dV", r"\delta \mathbf{V} = \text{Diag}(\boldsymbol{\beta}) \widetilde{\mathbf{A}}^\top \delta \mathbf{U}",
           adj(V), diag(Beta) @ At.T @ adj(U), PR)
# K enters W, the masked Gram matrix of X~ (on both sides), O's scores and the state
DXB = tril(diag(Beta) @ adj(Xt), "M-1")
nb.adjoint("delta_rule.dK",
           r"\delta \mathbf{K} = \text{Diag}(\boldsymbol{\beta}) \widetilde{\mathbf{A}}^\top \delta \mathbf{W} + (\delta \mathbf{O} \mathbf{V}_{new}^\top \odot \mathbf{M})^\top \mathbf{Q} + \mathbf{V}_{new} \delta \mathbf{S}_{[t]} + (\text{Diag}(\boldsymbol{\beta}) \delta \widetilde{\mathbf{X}} \odot \mathbf{M}_{-1}) \mathbf{K} + (\text{Diag}(\boldsymbol{\beta}) \delta \widetilde{\mathbf{X}} \odot \mathbf{M}_{-1})^\top \mathbf{K}",
           adj(K), diag(Beta) @ At.T @ adj(W) + tril(DO @ Vnew.T).T @ Q + Vnew @ dS + DXB @ K + DXB.T @ K, PR)
nb.adjoint("delta_rule.dbeta",
           r"\delta \boldsymbol{\beta} = \text{diag}\left(\widetilde{\mathbf{A}}^\top \delta \mathbf{W} \mathbf{K}^\top + \widetilde{\mathbf{A}}^\top \delta \mathbf{U} \mathbf{V}^\top + \delta \widetilde{\mathbf{X}} (\mathbf{K} \mathbf{K}^\top \odot \mathbf{M}_{-1})^\top\right)",
           adj(Beta), DiagV(At.T @ adj(W) @ K.T + At.T @ adj(U) @ V.T + adj(Xt) @ tril(K @ K.T, "M-1").T), PR)

# the same, grouped for the kernel: diag(A~^T X Y) as diag(A~^T (X Y)) reads the C x C
# products dW K^T and dU V^T that delta A-tilde forms (each term apart, so that the
# kernel's product is delta A-tilde's) instead of a C x C x Dk product of its own
nb.adjoint("delta_rule.dbeta_grouped",
           r"\delta \boldsymbol{\beta} = \text{diag}\left(\widetilde{\mathbf{A}}^\top (\delta \mathbf{W} \mathbf{K}^\top)\right) + \text{diag}\left(\widetilde{\mathbf{A}}^\top (\delta \mathbf{U} \mathbf{V}^\top)\right) + \text{diag}\left(\delta \widetilde{\mathbf{X}} (\mathbf{K} \mathbf{K}^\top \odot \mathbf{M}_{-1})^\top\right)",
           adj(Beta), DiagV(At.T @ (adj(W) @ K.T)) + DiagV(At.T @ (adj(U) @ V.T))
           + DiagV(adj(Xt) @ tril(K @ K.T, "M-1").T), PR)

DERIVATION = D

# the kernel printed from this derivation; its backward claims are picked from the
# adjoint claims above (derivations/kernel.py), but for delta beta's: of its two, the grouped one
kernel(D, "chunk_delta_rule", P, outputs="delta_rule.O", state="delta_rule.S",
       args=dict(q="Q", k="K", v="V", beta="Beta"),
       backward=dict(grads=dict(beta="delta_rule.dbeta_grouped")),
       doc="S_t = S_{t-1}(I - beta_t k_t k_t^T) + beta_t v_t k_t^T,  o_t = S_t q_t")
