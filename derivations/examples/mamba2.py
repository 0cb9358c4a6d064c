"""A new variant end to end: Mamba2-style scalar-gate linear attention,
S_t = alpha_t S_{t-1} + v_t k_t^T, o_t = S_t q_t.

    chunkproof verify derivations/examples/mamba2.py

Chunk form (gamma^r = prod_{i<=r} alpha_i inside the chunk, a C x 1 column):
    <-Q = Diag(gamma) Q,   ->K = Diag(gamma)^{-1} K
    O_[t]  = <-Q S_[t-1]^T + (<-Q ->K^T ⊙ M) V
    S_[t]  = gamma^C (S_[t-1] + V^T ->K)
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, Derivation, Notebook, Program, S_PREV, adj, diag, inv,
                             shift, tile, tril)
from chunkproof.derivations.ir import CumProd, Inner, LastRow, Ones, PlaceLast, RevCumSum, Scale, Truth

D = Derivation("mamba2_example", "Mamba2-style scalar gate (README walk-through)", "mamba2.py")
D.add_recurrence(R.mamba2())

Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
Alpha = tile("Alpha", "C", "1", r"\boldsymbol{\alpha}")
Gamma = tile("Gamma", "C", "1", r"\boldsymbol{\gamma}")
gC = tile("gC", "1", "1", r"\gamma^C")
Ql = tile("Ql", "C", "Dk", r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = tile("Kr", "C", "Dk", r"\overrightarrow{\mathbf{K}}", ">", "K")
S = tile("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^C")

D.add_program(Program("mamba2_chunk", "chunk", [
    ("Gamma", CumProd(Alpha)),
    ("gC", LastRow(Gamma)),
    ("Ql", diag(Gamma) @ Q),
    ("Kr", inv(diag(Gamma)) @ K),
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V),
    ("S", Scale(gC, S_PREV + V.T @ Kr)),
]))

nb = Notebook(D, "mamba2.py").section("chunk forward")
nb.forward("mamba2.O", 10, r"O_{[t]} = \overleftarrow{Q} S_{[t-1]}^\top + (\overleftarrow{Q}\overrightarrow{K}^\top \odot M) V",
           Truth("outs"), Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, "mamba2_chunk")
nb.forward("mamba2.S", 11, r"S_{[t]} = \gamma^C (S_{[t-1]} + V^\top \overrightarrow{K})",
           Truth("state", "t*C+C"), Scale(gC, S_PREV + V.T @ Kr), "mamba2_chunk")

nb.section("chunk backward")
nb.adjoint("mamba2.dS", 0, r"\delta S_{[t]} = \gamma^C_{[t+1]} \delta S_{[t+1]} + \delta O_{[t+1]}^\top \overleftarrow{Q}_{[t+1]}",
           adj(S), Scale(shift(gC), shift(adj(S))) + shift(DO).T @ shift(Ql), "mamba2_chunk",
           blocks="not_last")
nb.adjoint("mamba2.dV", 0, r"\delta V = \gamma^C \overrightarrow{K} \delta S^\top + (\overrightarrow{K}\overleftarrow{Q}^\top \odot M^\top) \delta O",
           adj(V), Scale(gC, Kr @ adj(S).T) + tril(Kr @ Ql.T, "MT") @ DO, "mamba2_chunk")
nb.adjoint("mamba2.dKr", 0, r"\delta \overrightarrow{K} = \gamma^C V \delta S + (V \delta O^\top \odot M^\top) \overleftarrow{Q}",
           adj(Kr), Scale(gC, V @ adj(S)) + tril(V @ DO.T, "MT") @ Ql, "mamba2_chunk")
nb.adjoint("mamba2.dQl", 0, r"\delta \overleftarrow{Q} = \delta O S_{[t-1]} + (\delta O V^\top \odot M) \overrightarrow{K}",
           adj(Ql), DO @ S_PREV + tril(DO @ V.T) @ Kr, "mamba2_chunk")
nb.adjoint("mamba2.dK", 0, r"\delta K = \text{Diag}(\gamma)^{-1} \delta \overrightarrow{K}",
           adj(K), inv(diag(Gamma)) @ adj(Kr), "mamba2_chunk")
nb.adjoint("mamba2.dQ", 0, r"\delta Q = \text{Diag}(\gamma) \delta \overleftarrow{Q}",
           adj(Q), diag(Gamma) @ adj(Ql), "mamba2_chunk")
# the gate: delta log gamma_j collects q_j.dq_j - k_j.dk_j, plus <S, dS> on the last row
nb.adjoint("mamba2.dalpha", 0,
            r"\alpha_r \delta \alpha_r = \sum_{j \ge r} \left( \boldsymbol{q}_j^\top \delta \boldsymbol{q}_j - \boldsymbol{k}_j^\top \delta \boldsymbol{k}_j \right) + \langle S_{[t]}, \delta S_{[t]} \rangle",
            adj(Alpha),
            RevCumSum((Q * adj(Q) - K * adj(K)) @ Ones("Dk", "1") + PlaceLast(Inner(S, adj(S)))) / Alpha,
            "mamba2_chunk")

DERIVATION = D
