"""RetNet (retention), FLA's ``chunk_retention(q, k, v, scale)``: a decay gamma per head,
the same at every step, and the output scale tau, both parameters of the recurrence
(R.retnet(), reused):

    S_t = gamma S_{t-1} + v_t k_t^T,   o_t = tau S_t q_t

with S_t Dv x Dk (FLA's h is K x V, its transpose).  FLA computes gamma_h = 1 - 2^(-5-h)
in the kernel (log-space, g_gamma = log gamma_h) and takes tau as ``scale``; here both stay
parameters, each with its gradient, summed over every step (FLA's op needs neither).

    chunkproof verify derivations/variants/retention.py

Chunk form: Simple GLA's with every gate gamma (gamma^r = gamma^r, r = 1..C, a prefix
product of the chunk's column of gammas, as Mamba2's Gamma = cumprod(alpha)):
    <-Q = Diag(gamma^r) Q,   ->K = Diag(gamma^r)^{-1} K
    O_[t] = tau (<-Q S_[t-1]^T + (<-Q ->K^T ⊙ M) V),   S_[t] = gamma^C (S_[t-1] + V^T ->K)
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, S_PREV, Derivation, Notebook, Program, adj, cumprod, diag,
                                        inv, last_row, ones, revcumsum, shift, sum_blocks, tile, tril)
from chunkproof.derivations.ir import Inner, PlaceLast, Truth
from chunkproof.derivations.kernel import const, kernel, per_head_log

D = Derivation("retention", "RetNet (retention): chunkwise forward and backward, decay and scale as parameters",
               "retention.py")
D.add_recurrence(R.retnet())

gamma, tau = R.gamma_p, R.scale_p      # declared once, as the recurrence reads them
Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
ONES_C, ONES_K = ones("C", "1"), ones("Dk", "1")

P = Program("retention_chunk", "chunk",
            description="RetNet chunk forward: the decay's powers, decayed Q and K, scaled outputs")
# the chunk's gate column: gamma at every step, so that the decays are Mamba2's cumprod
Gate = P.define("Gate", ONES_C @ gamma, r"\gamma \mathbf{1}")
Gamma = P.define("Gamma", cumprod(Gate), r"\boldsymbol{\gamma}")
gC = P.define("gC", last_row(Gamma), r"\gamma^C")
Ql = P.define("Ql", diag(Gamma) @ Q, r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = P.define("Kr", inv(diag(Gamma)) @ K, r"\overrightarrow{\mathbf{K}}", ">", "K")
Ou = P.define("Ou", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, r"\mathbf{O}^u")
O = P.define("O", tau * Ou, r"\mathbf{O}")
S = P.define("S", gC * (S_PREV + V.T @ Kr), r"\mathbf{S}_{[t]}")
D.add_program(P)
PR = P.name

nb = Notebook(D, "retention.py").section("chunk forward")
nb.forward("retention.O", r"\mathbf{O}_{[t]} = \tau (\overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + (\overleftarrow{\mathbf{Q}} \overrightarrow{\mathbf{K}}^\top \odot \mathbf{M}) \mathbf{V})",
           Truth("outs"), tau * (Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V), PR, what="chunk outputs")
nb.forward("retention.S", r"\mathbf{S}_{[t]} = \gamma^C (\mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}})",
           Truth("state", "t*C+C"), gC * (S_PREV + V.T @ Kr), PR, what="state after the chunk")
# the stable forms: only the powers gamma^(i-j), i >= j, and gamma^(C-r) are formed
DECAY = Gamma @ (ONES_C / Gamma).T
nb.forward("retention.O_stable", r"\mathbf{O}_{[t]} = \tau (\overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + (\mathbf{Q} \mathbf{K}^\top \odot \mathbf{\Gamma} \odot \mathbf{M}) \mathbf{V}), \quad \mathbf{\Gamma}_{ij} = \gamma^{i-j}",
           Truth("outs"), tau * (Ql @ S_PREV.T + tril((Q @ K.T) * DECAY) @ V), PR,
           what="chunk outputs with the decay ratios gamma^(i-j) in the scores")
nb.forward("retention.S_stable", r"\mathbf{S}_{[t]} = \gamma^C \mathbf{S}_{[t-1]} + \mathbf{V}^\top \text{Diag}(\gamma^C / \boldsymbol{\gamma}) \mathbf{K}",
           Truth("state", "t*C+C"), gC * S_PREV + V.T @ diag(gC * ONES_C / Gamma) @ K, PR,
           what="state after the chunk with keys decayed to the chunk's end")

nb.section("chunk backward")
dS = adj(S)
nb.adjoint("retention.dS", r"\delta \mathbf{S}_{[t]} = \gamma^C \delta \mathbf{S}_{[t+1]} + \tau \delta \mathbf{O}_{[t+1]}^\top \overleftarrow{\mathbf{Q}}_{[t+1]}",
           dS, shift(gC * dS) + tau * (shift(DO).T @ shift(Ql)), PR,
           blocks="not_last", what="delta S recursion over chunks")
DS_PREV = gC * dS + tau * (DO.T @ Ql)
nb.adjoint("retention.dS_prev", r"\delta \mathbf{S}_{[t-1]} = \gamma^C \delta \mathbf{S}_{[t]} + \tau \delta \mathbf{O}^\top \overleftarrow{\mathbf{Q}}",
           adj(S_PREV), DS_PREV, PR, what="delta S_[t-1], every chunk")
nb.adjoint("retention.dh0", r"\delta \mathbf{S}_{[-1]} = \gamma^C \delta \mathbf{S}_{[0]} + \tau \delta \mathbf{O}_{[0]}^\top \overleftarrow{\mathbf{Q}}_{[0]}",
           adj(S_PREV), DS_PREV, PR, blocks="first", what="the initial state's gradient (FLA's dh0, transposed)")
nb.adjoint("retention.dOu", r"\delta \mathbf{O}^u = \tau \delta \mathbf{O}", adj(Ou), tau * DO, PR)
nb.adjoint("retention.dQl", r"\delta \overleftarrow{\mathbf{Q}} = \tau (\delta \mathbf{O} \mathbf{S}_{[t-1]} + (\delta \mathbf{O} \mathbf{V}^\top \odot \mathbf{M}) \overrightarrow{\mathbf{K}})",
           adj(Ql), tau * (DO @ S_PREV + tril(DO @ V.T) @ Kr), PR)
nb.adjoint("retention.dKr", r"\delta \overrightarrow{\mathbf{K}} = \gamma^C \mathbf{V} \delta \mathbf{S}_{[t]} + \tau (\delta \mathbf{O} \mathbf{V}^\top \odot \mathbf{M})^\top \overleftarrow{\mathbf{Q}}",
           adj(Kr), gC * (V @ dS) + tau * (tril(DO @ V.T).T @ Ql), PR)
nb.adjoint("retention.dgC", r"\delta \gamma^C = \langle \mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}}, \delta \mathbf{S}_{[t]} \rangle",
           adj(gC), Inner(S_PREV + V.T @ Kr, dS), PR)
# in log terms: gamma^r dgamma^r = q~.dq~ - k~.dk~ per row, and gamma^C dgamma^C on the last
LOG_DGAMMA = (Ql * adj(Ql) - Kr * adj(Kr)) @ ONES_K + PlaceLast(gC * adj(gC))
nb.adjoint("retention.dGamma", r"\delta \boldsymbol{\gamma} = \left((\overleftarrow{\mathbf{Q}} \odot \delta \overleftarrow{\mathbf{Q}} - \overrightarrow{\mathbf{K}} \odot \delta \overrightarrow{\mathbf{K}}) \mathbf{1} + [0, \ldots, 0, \gamma^C \delta \gamma^C]^\top\right) \oslash \boldsymbol{\gamma}",
           adj(Gamma), LOG_DGAMMA / Gamma, PR)
nb.adjoint("retention.dGate", r"\delta (\gamma \mathbf{1}) = \text{suffix\_sum}(\boldsymbol{\gamma} \odot \delta \boldsymbol{\gamma}) / \gamma",
           adj(Gate), revcumsum(Gamma * adj(Gamma)) / Gate, PR, what="each step's gate, as Mamba2's delta alpha")

nb.section("input gradients")
nb.adjoint("retention.dQ", r"\delta \mathbf{Q} = \text{Diag}(\boldsymbol{\gamma}) \delta \overleftarrow{\mathbf{Q}}",
           adj(Q), diag(Gamma) @ adj(Ql), PR)
nb.adjoint("retention.dK", r"\delta \mathbf{K} = \text{Diag}(\boldsymbol{\gamma})^{-1} \delta \overrightarrow{\mathbf{K}}",
           adj(K), inv(diag(Gamma)) @ adj(Kr), PR)
nb.adjoint("retention.dV", r"\delta \mathbf{V} = \gamma^C \overrightarrow{\mathbf{K}} \delta \mathbf{S}_{[t]}^\top + \tau (\overrightarrow{\mathbf{K}} \overleftarrow{\mathbf{Q}}^\top \odot \mathbf{M}^\top) \delta \mathbf{O}",
           adj(V), gC * (Kr @ dS.T) + tau * (tril(Kr @ Ql.T, "MT") @ DO), PR)

nb.section("parameter gradients")
nb.adjoint("retention.dscale", r"\delta \tau = \sum_t \langle \delta \mathbf{O}_{[t]}, \mathbf{O}^u_{[t]} \rangle",
           adj(tau), sum_blocks(Inner(DO, Ou)), PR, blocks="first")
nb.adjoint("retention.dscale_chunk", r"\delta \tau_{[t]} = \langle \delta \mathbf{O}_{[t]}, \mathbf{O}^u_{[t]} \rangle",
           adj(tau, via=("O",)), Inner(DO, Ou), PR, what="chunk t's part of delta tau")
nb.adjoint("retention.dgamma_chunk", r"\delta \gamma_{[t]} = \mathbf{1}^\top \delta (\gamma \mathbf{1})",
           adj(gamma, via=("Gate",)), ONES_C.T @ adj(Gate), PR, what="chunk t's part of delta gamma")
nb.adjoint("retention.dgamma", r"\delta \gamma = \sum_t \mathbf{1}^\top \delta (\gamma \mathbf{1})_{[t]}",
           adj(gamma), sum_blocks(ONES_C.T @ adj(Gate)), PR, blocks="first")
# FLA's grouping, in the gate's own terms (q.dq - k.dk, and <S, dS> at each chunk's end)
nb.adjoint("retention.dgamma_qk", r"\gamma \delta \gamma = \sum_t \mathbf{1}^\top \text{suffix\_sum}\left((\mathbf{Q} \odot \delta \mathbf{Q} - \mathbf{K} \odot \delta \mathbf{K}) \mathbf{1} + [0, \ldots, 0, \langle \mathbf{S}_{[t]}, \delta \mathbf{S}_{[t]} \rangle]^\top\right)",
           adj(gamma), sum_blocks(ONES_C.T @ revcumsum((Q * adj(Q) - K * adj(K)) @ ONES_K
                                                      + PlaceLast(Inner(S, dS)))) / gamma, PR,
           blocks="first", what="delta gamma from the true dQ, dK, dS")

DERIVATION = D

# the kernel printed from this derivation (FLA's chunk_retention): gamma_h = 1 - 2^(-5-h),
# as FLA computes it, a per-head scalar gate known by its log; FLA's scale multiplies q
# (the outputs are linear in q), so tau is 1 here; neither takes a gradient
kernel(D, "chunk_retention", P, outputs="retention.O", state="retention.S",
       args=dict(q="Q", k="K", v="V"),
       params=dict(gamma=per_head_log("torch.log1p(-torch.exp2(-5.0 - h))"), scale=const(1.0)),
       doc="S_t = gamma_h S_{t-1} + v_t k_t^T,  o_t = S_t q_t  (gamma_h = 1 - 2^(-5-h), per head)")
