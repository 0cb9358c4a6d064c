"""RetNet: a decay gamma and a scale tau that are the same at every step (parameters),
S_t = gamma S_{t-1} + v_t k_t^T,  o_t = tau S_t q_t.

    chunkproof verify derivations/examples/retnet.py

Chunk form (gamma^r, r = 1..C, a C x 1 column; the handles come from their definitions):
    <-Q = Diag(gamma^r) Q,   ->K = Diag(gamma^r)^{-1} K
    O_[t]  = tau (<-Q S_[t-1]^T + (<-Q ->K^T ⊙ M) V)
    S_[t]  = gamma^C (S_[t-1] + V^T ->K)
The parameters' gradients are sums over chunks: delta tau = sum_t <dO_[t], O_[t] / tau>,
gamma delta gamma = sum_t sum_r r-weighted parts (the suffix sum below).
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, Derivation, Notebook, Program, S_PREV, adj, diag, inv,
                                        last_row, ones, param, prod, revcumsum, shift, stack,
                                        sum_blocks, tile, tril)
from chunkproof.derivations.ir import Inner, PlaceLast, Truth

D = Derivation("retnet_example", "RetNet: parameter decay and scale", "retnet.py")
D.add_recurrence(R.retnet())

gamma = param("gamma", tex=r"\gamma", kind="gate")   # the recurrence's own parameters
tau = param("scale", tex=r"\tau", kind="beta")
Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")

P = Program("retnet_chunk", "chunk")
Gamma = P.define("Gamma", stack("r", prod("i", "1", "r", gamma)), r"\boldsymbol{\gamma}")
gC = P.define("gC", last_row(Gamma), r"\gamma^C")
Ql = P.define("Ql", diag(Gamma) @ Q, r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = P.define("Kr", inv(diag(Gamma)) @ K, r"\overrightarrow{\mathbf{K}}", ">", "K")
Ou = P.define("Ou", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, r"\mathbf{O}^u")
O = P.define("O", tau * Ou, r"\mathbf{O}")
S = P.define("S", gC * (S_PREV + V.T @ Kr), r"\mathbf{S}_{[t]}^C")
D.add_program(P)

nb = Notebook(D, "retnet.py").section("chunk forward")
nb.forward("retnet.O", r"O_{[t]} = \tau (\overleftarrow{Q} S_{[t-1]}^\top + (\overleftarrow{Q}\overrightarrow{K}^\top \odot M) V)",
           Truth("outs"), tau * (Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V), "retnet_chunk")
nb.forward("retnet.S", r"S_{[t]} = \gamma^C (S_{[t-1]} + V^\top \overrightarrow{K})",
           Truth("state", "t*C+C"), gC * (S_PREV + V.T @ Kr), "retnet_chunk")

nb.section("chunk backward")
nb.adjoint("retnet.dS", r"\delta S_{[t]} = \gamma^C \delta S_{[t+1]} + \tau \delta O_{[t+1]}^\top \overleftarrow{Q}_{[t+1]}",
           adj(S), shift(gC * adj(S)) + tau * (shift(DO).T @ shift(Ql)), "retnet_chunk",
           blocks="not_last")
nb.adjoint("retnet.dV", r"\delta V = \gamma^C \overrightarrow{K} \delta S^\top + \tau (\overrightarrow{K}\overleftarrow{Q}^\top \odot M^\top) \delta O",
           adj(V), gC * (Kr @ adj(S).T) + tau * (tril(Kr @ Ql.T, "MT") @ DO), "retnet_chunk")
nb.adjoint("retnet.dK", r"\delta K = \text{Diag}(\gamma)^{-1} \delta \overrightarrow{K}",
           adj(K), inv(diag(Gamma)) @ adj(Kr), "retnet_chunk")
nb.adjoint("retnet.dQ", r"\delta Q = \tau \text{Diag}(\gamma) (\delta O S_{[t-1]} + (\delta O V^\top \odot M) \overrightarrow{K})",
           adj(Q), tau * (diag(Gamma) @ (DO @ S_PREV + tril(DO @ V.T) @ Kr)), "retnet_chunk")

nb.section("parameter gradients")
# the scale: o = tau o^u at every step, so delta tau sums <dO, O^u> over the chunks
nb.adjoint("retnet.dtau", r"\delta \tau = \sum_t \langle \delta O_{[t]}, O^u_{[t]} \rangle",
           adj(tau), sum_blocks(Inner(DO, Ou)), "retnet_chunk", blocks="first")
# the decay: each step's gate is gamma, so gamma delta gamma sums Mamba2's alpha_r delta alpha_r
# (suffix sums of q.dq - k.dk, plus <S, dS> on the last row) over rows and chunks
GATE_PARTS = revcumsum((Q * adj(Q) - K * adj(K)) @ ones("Dk", "1") + PlaceLast(Inner(S, adj(S))))
nb.adjoint("retnet.dgamma", r"\gamma \delta \gamma = \sum_t \mathbf{1}^\top \text{suffix\_sum}(\ldots)",
           adj(gamma), sum_blocks(ones("1", "C") @ GATE_PARTS) / gamma, "retnet_chunk", blocks="first")
# chunk t's own part of it: through the definition of gamma^r in that chunk
nb.adjoint("retnet.dgamma_chunk", r"\gamma \delta \gamma_{[t]} = \mathbf{1}^\top \text{suffix\_sum}(\ldots)",
           adj(gamma, via=("Gamma",)), (ones("1", "C") @ GATE_PARTS) / gamma, "retnet_chunk")

DERIVATION = D
