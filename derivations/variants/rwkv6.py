"""RWKV-6, FLA's ``chunk_rwkv6(r, k, v, w, u)``: a per-channel decay w_t in log space
(w [B, T, H, K], the input G here) and the bonus u (FLA's [H, K]: one Dk x 1 parameter,
shared by every step, with its gradient), in the V x K convention (R.rwkv6(), reused):

    o_t = S_{t-1} q_t + (q_t^T (u ⊙ k_t)) v_t,   S_t = S_{t-1} Diag(exp(w_t)) + v_t k_t^T

FLA's ``scale`` multiplies q (r) and is outside the recurrence.

What was checked in FLA (fla-org/flash-linear-attention, commit bc3b101d): the output
reads the state *before* this step's decay and update, and the decay multiplies the old
state only.  fla/ops/rwkv6/recurrent_naive.py, ``naive_recurrent_rwkv6``: o_i = sum_k
(h + u kv_i) q_i, then h = h * exp(w_i) + kv_i (h is K x V, our S^T); the Triton
recurrence fused_recurrent.py, ``fused_recurrent_rwkv6_fwd_kernel``, is the same (b_o from
b_h before ``b_h = b_h * exp(b_w)[:, None] + b_kv``).  The chunk kernels agree:
fla/ops/rwkv6/chunk.py, ``chunk_rwkv6_fwd_cumsum_kernel`` writes the inclusive (gi, mask
i >= j) and the exclusive (ge, mask i > j) prefix sums of w; queries decay by ge (the
inter-chunk output, ``chunk_gla_fwd_o_gk(g=ge)``, and the intra-chunk scores
exp(ge_i - gi_j)), keys and the state by gi (``chunk_fwd_h(gk=gi)``), and
``chunk_rwkv6_fwd_A_kernel_intra_sub_intra`` keeps i > j and puts q_i^T (u ⊙ k_i) on the
diagonal.  That is the program below.

    chunkproof verify derivations/variants/rwkv6.py

Chunk form (G^c the inclusive prefix sums of the chunk's log decays, G^e = G^c - G the
exclusive ones, g^C the last row of G^c):
    <-Q = Q ⊙ exp(G^e),   ->K = K ⊙ exp(-G^c),   b^u = (Q ⊙ K) u
    A = (<-Q ->K^T ⊙ M_{-1}) + Diag(b^u)                       (FLA's A)
    O_[t] = <-Q S_[t-1]^T + A V,   S_[t] = (S_[t-1] + V^T ->K) Diag(exp g^C)
"""
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, S_PREV, Derivation, Notebook, Program, adj, cumsum, diag,
                                        exp, last_row, ones, revcumsum, row, shift, sum_blocks, tile,
                                        tril)
from chunkproof.derivations.ir import DiagV, PlaceLast, Truth
from chunkproof.derivations.kernel import head_arg, kernel

D = Derivation("rwkv6", "RWKV-6: per-channel log decay and bonus u, chunkwise forward and backward",
               "rwkv6.py")
D.add_recurrence(R.rwkv6())

u = R.u_p                              # declared once, as the recurrence reads it
Q, K = tile("Q", "C", "Dk", r"\mathbf{Q}"), tile("K", "C", "Dk", r"\mathbf{K}")
V = tile("V", "C", "Dv", r"\mathbf{V}")
G = tile("G", "C", "Dk", r"\mathbf{G}")
ONES_C, ONES_V = ones("C", "1"), ones("Dv", "1")

P = Program("rwkv6_chunk", "chunk",
            description="RWKV-6 chunk forward: inclusive and exclusive decays, bonus on the diagonal")
Gc = P.define("Gc", cumsum(G), r"\mathbf{G}^c")
Ge = P.define("Ge", Gc - G, r"\mathbf{G}^e")
gC = P.define("gC", last_row(Gc), r"\boldsymbol{g}^C")
Ql = P.define("Ql", Q * exp(Ge), r"\overleftarrow{\mathbf{Q}}", "<", "Q")
Kr = P.define("Kr", K * exp(-Gc), r"\overrightarrow{\mathbf{K}}", ">", "K")
Bu = P.define("Bu", (Q * K) @ u, r"\boldsymbol{b}^u")
Aqk = P.define("Aqk", tril(Ql @ Kr.T, "M-1") + diag(Bu), r"\mathbf{A}")
O = P.define("O", Ql @ S_PREV.T + Aqk @ V, r"\mathbf{O}")
S = P.define("S", (S_PREV + V.T @ Kr) @ diag(exp(gC)), r"\mathbf{S}_{[t]}")
D.add_program(P)
PR = P.name

nb = Notebook(D, "rwkv6.py").section("chunk forward")
# the recurrence as FLA computes it, row by row: the state before step r is read
R_ALL = (("r", "1", "C"),)
nb.forward("rwkv6.o_r", r"\boldsymbol{o}^r = \mathbf{S}_{r-1} \boldsymbol{q}^r + (\boldsymbol{q}^{r\top} (\boldsymbol{u} \odot \boldsymbol{k}^r)) \boldsymbol{v}^r",
           Truth("out", "t*C+r"), Truth("state", "t*C+r-1") @ row(Q, "r")
           + row(V, "r") @ (row(Q, "r").T @ (u * row(K, "r"))), PR, over=R_ALL,
           what="output row r reads the state before step r, plus the bonus")
nb.forward("rwkv6.O", r"\mathbf{O}_{[t]} = \overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + \left((\overleftarrow{\mathbf{Q}} \overrightarrow{\mathbf{K}}^\top \odot \mathbf{M}_{-1}) + \text{Diag}((\mathbf{Q} \odot \mathbf{K}) \boldsymbol{u})\right) \mathbf{V}",
           Truth("outs"), Ql @ S_PREV.T + (tril(Ql @ Kr.T, "M-1") + diag((Q * K) @ u)) @ V, PR,
           what="chunk outputs")
nb.forward("rwkv6.S", r"\mathbf{S}_{[t]} = (\mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}}) \text{Diag}(\exp \boldsymbol{g}^C)",
           Truth("state", "t*C+C"), (S_PREV + V.T @ Kr) @ diag(exp(gC)), PR, what="state after the chunk")
nb.forward("rwkv6.O_A", r"\mathbf{O}_{[t]} = \overleftarrow{\mathbf{Q}} \mathbf{S}_{[t-1]}^\top + \mathbf{A} \mathbf{V}",
           Truth("outs"), Ql @ S_PREV.T + Aqk @ V, PR, what="chunk outputs through FLA's A (the kernel's form)")
# the stable forms: FLA's scores exp(G^e_i - G^c_j) (i > j: a sum of decays, <= 0) and keys
# decayed to the chunk's end
nb.identity("rwkv6.decay", r"(\overleftarrow{\mathbf{Q}} \overrightarrow{\mathbf{K}}^\top)_{ij} = \sum_d q_{id} k_{jd} \exp(G^e_{id} - G^c_{jd})",
            row(Ql, "i").T @ row(Kr, "j"), (row(Q, "i") * exp(row(Ge, "i") - row(Gc, "j"))).T @ row(K, "j"),
            PR, over=(("i", "1", "C"), ("j", "1", "C")), what="the scores with decay ratios")
nb.forward("rwkv6.S_stable", r"\mathbf{S}_{[t]} = \mathbf{S}_{[t-1]} \text{Diag}(\exp \boldsymbol{g}^C) + \mathbf{V}^\top (\mathbf{K} \odot \exp(\mathbf{1} \boldsymbol{g}^{C\top} - \mathbf{G}^c))",
           Truth("state", "t*C+C"), S_PREV @ diag(exp(gC)) + V.T @ (K * exp(ONES_C @ gC.T - Gc)), PR,
           what="state after the chunk with keys decayed to the chunk's end")

nb.section("chunk backward")
dS = adj(S)
nb.adjoint("rwkv6.dS", r"\delta \mathbf{S}_{[t]} = \delta \mathbf{S}_{[t+1]} \text{Diag}(\exp \boldsymbol{g}^C_{[t+1]}) + \delta \mathbf{O}_{[t+1]}^\top \overleftarrow{\mathbf{Q}}_{[t+1]}",
           dS, shift(dS) @ diag(exp(shift(gC))) + shift(DO).T @ shift(Ql), PR,
           blocks="not_last", what="delta S recursion over chunks")
DS_PREV = dS @ diag(exp(gC)) + DO.T @ Ql
nb.adjoint("rwkv6.dS_prev", r"\delta \mathbf{S}_{[t-1]} = \delta \mathbf{S}_{[t]} \text{Diag}(\exp \boldsymbol{g}^C) + \delta \mathbf{O}^\top \overleftarrow{\mathbf{Q}}",
           adj(S_PREV), DS_PREV, PR, what="delta S_[t-1], every chunk")
nb.adjoint("rwkv6.dh0", r"\delta \mathbf{S}_{[-1]} = \delta \mathbf{S}_{[0]} \text{Diag}(\exp \boldsymbol{g}^C_{[0]}) + \delta \mathbf{O}_{[0]}^\top \overleftarrow{\mathbf{Q}}_{[0]}",
           adj(S_PREV), DS_PREV, PR, blocks="first", what="the initial state's gradient (FLA's dh0, transposed)")
nb.adjoint("rwkv6.dA", r"\delta \mathbf{A} = \delta \mathbf{O} \mathbf{V}^\top", adj(Aqk), DO @ V.T, PR)
nb.adjoint("rwkv6.dBu", r"\delta \boldsymbol{b}^u = \text{diag}(\delta \mathbf{A}) = (\delta \mathbf{O} \odot \mathbf{V}) \mathbf{1}",
           adj(Bu), (DO * V) @ ONES_V, PR)
nb.adjoint("rwkv6.dQl", r"\delta \overleftarrow{\mathbf{Q}} = \delta \mathbf{O} \mathbf{S}_{[t-1]} + (\delta \mathbf{A} \odot \mathbf{M}_{-1}) \overrightarrow{\mathbf{K}}",
           adj(Ql), DO @ S_PREV + tril(adj(Aqk), "M-1") @ Kr, PR)
nb.adjoint("rwkv6.dKr", r"\delta \overrightarrow{\mathbf{K}} = \mathbf{V} \delta \mathbf{S}_{[t]} \text{Diag}(\exp \boldsymbol{g}^C) + (\delta \mathbf{A} \odot \mathbf{M}_{-1})^\top \overleftarrow{\mathbf{Q}}",
           adj(Kr), V @ dS @ diag(exp(gC)) + tril(adj(Aqk), "M-1").T @ Ql, PR)
nb.adjoint("rwkv6.dgC", r"\delta \boldsymbol{g}^C = \exp(\boldsymbol{g}^C) \odot \text{diag}\left((\mathbf{S}_{[t-1]} + \mathbf{V}^\top \overrightarrow{\mathbf{K}})^\top \delta \mathbf{S}_{[t]}\right)",
           adj(gC), exp(gC) * DiagV((S_PREV + V.T @ Kr).T @ dS), PR)
nb.adjoint("rwkv6.dGe", r"\delta \mathbf{G}^e = \overleftarrow{\mathbf{Q}} \odot \delta \overleftarrow{\mathbf{Q}}",
           adj(Ge), Ql * adj(Ql), PR)
nb.adjoint("rwkv6.dGc", r"\delta \mathbf{G}^c = \delta \mathbf{G}^e - \overrightarrow{\mathbf{K}} \odot \delta \overrightarrow{\mathbf{K}} + [0, \ldots, 0, \delta \boldsymbol{g}^C]^\top",
           adj(Gc), adj(Ge) - Kr * adj(Kr) + PlaceLast(adj(gC)), PR)

nb.section("input gradients")
nb.adjoint("rwkv6.dQ", r"\delta \mathbf{Q} = \delta \overleftarrow{\mathbf{Q}} \odot \exp(\mathbf{G}^e) + \text{Diag}(\delta \boldsymbol{b}^u) \mathbf{K} \text{Diag}(\boldsymbol{u})",
           adj(Q), adj(Ql) * exp(Ge) + diag(adj(Bu)) @ K @ diag(u), PR)
nb.adjoint("rwkv6.dK", r"\delta \mathbf{K} = \delta \overrightarrow{\mathbf{K}} \odot \exp(-\mathbf{G}^c) + \text{Diag}(\delta \boldsymbol{b}^u) \mathbf{Q} \text{Diag}(\boldsymbol{u})",
           adj(K), adj(Kr) * exp(-Gc) + diag(adj(Bu)) @ Q @ diag(u), PR)
nb.adjoint("rwkv6.dV", r"\delta \mathbf{V} = \overrightarrow{\mathbf{K}} \text{Diag}(\exp \boldsymbol{g}^C) \delta \mathbf{S}_{[t]}^\top + \mathbf{A}^\top \delta \mathbf{O}",
           adj(V), Kr @ diag(exp(gC)) @ dS.T + Aqk.T @ DO, PR)
nb.adjoint("rwkv6.dw", r"\delta \mathbf{G} = \text{suffix\_sum}(\delta \mathbf{G}^c) - \delta \mathbf{G}^e",
           adj(G), revcumsum(adj(Gc)) - adj(Ge), PR, what="delta w, FLA's dw")
# the same in the true dQ, dK, dS: q.dq - k.dk suffix-summed, less row r's own query term
# (step r's decay acts from step r+1 on), the bonus parts cancelling
nb.adjoint("rwkv6.dw_qk", r"\delta \mathbf{G} = \text{suffix\_sum}\left(\mathbf{Q} \odot \delta \mathbf{Q} - \mathbf{K} \odot \delta \mathbf{K} + [0, \ldots, 0, \text{diag}(\mathbf{S}_{[t]}^\top \delta \mathbf{S}_{[t]})]^\top\right) - \overleftarrow{\mathbf{Q}} \odot \delta \overleftarrow{\mathbf{Q}}",
           adj(G), revcumsum(Q * adj(Q) - K * adj(K) + PlaceLast(DiagV(S.T @ dS))) - Ql * adj(Ql), PR,
           what="delta w from the true dQ, dK, dS")
# the same with S_[t] expanded into S_[t-1] and the chunk's keys: the gradient kernels
# then need no end state (a V x K product per chunk) beside the V dS they form for dK
nb.adjoint("rwkv6.dw_qk_prev", r"\delta \mathbf{G} = \text{suffix\_sum}\left(\mathbf{Q} \odot \delta \mathbf{Q} - \mathbf{K} \odot \delta \mathbf{K} + [0, \ldots, 0, \exp(\boldsymbol{g}^C) \odot \text{diag}(\mathbf{S}_{[t-1]}^\top \delta \mathbf{S}_{[t]}) + \text{diag}((\mathbf{K} \odot \exp(\mathbf{1} \boldsymbol{g}^{C\top} - \mathbf{G}^c))^\top \mathbf{V} \delta \mathbf{S}_{[t]})]^\top\right) - \overleftarrow{\mathbf{Q}} \odot \delta \overleftarrow{\mathbf{Q}}",
           adj(G), revcumsum(Q * adj(Q) - K * adj(K)
                             + PlaceLast(exp(gC) * DiagV(S_PREV.T @ dS)
                                         + DiagV((K * exp(ONES_C @ gC.T - Gc)).T @ (V @ dS))))
           - Ql * adj(Ql), PR, what="delta w from the true dQ, dK, the state before the chunk and dS")

nb.section("parameter gradients")
nb.adjoint("rwkv6.du_chunk", r"\delta \boldsymbol{u}_{[t]} = (\mathbf{Q} \odot \mathbf{K})^\top \delta \boldsymbol{b}^u",
           adj(u, via=("Bu",)), (Q * K).T @ adj(Bu), PR, what="chunk t's part of delta u")
nb.adjoint("rwkv6.du", r"\delta \boldsymbol{u} = \sum_t (\mathbf{Q}_{[t]} \odot \mathbf{K}_{[t]})^\top ((\delta \mathbf{O}_{[t]} \odot \mathbf{V}_{[t]}) \mathbf{1})",
           adj(u), sum_blocks((Q * K).T @ ((DO * V) @ ONES_V)), PR, blocks="first")

DERIVATION = D

# the kernel printed from this derivation (FLA's chunk_rwkv6(r, k, v, w, u): r is q here,
# the first argument, which FLA's scale multiplies); u, [H, K], is an argument with its
# gradient, printed per chunk from rwkv6.du_chunk and summed over chunks and batch
kernel(D, "chunk_rwkv6", P, outputs="rwkv6.O_A", state="rwkv6.S_stable",
       args=dict(q="Q", k="K", v="V", w="G"), params=dict(u=head_arg(grad="rwkv6.du_chunk")),
       backward=dict(grads=dict(w="rwkv6.dw_qk_prev")),
       doc="o_t = S_{t-1} q_t + (q_t^T (u . k_t)) v_t,  S_t = S_{t-1} Diag(exp(w_t)) + v_t k_t^T  (w log decay)")
