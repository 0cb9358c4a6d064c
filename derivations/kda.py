"""Note 001: the backward pass of Kimi Delta Attention (KDA), chunkwise.

Every delta line of the note is a claim, transcribed literally; lines that are
wrong carry a ``corrected`` claim next to them.
"""
from chunkproof.derivations.kernel import kernel, log_of
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, S_PREV, Derivation, Notebook, Program, adj, diag, eye, inv,
                             shift, tile, tril)
from chunkproof.derivations.ir import CumProd, DiagV, LastRow, Ones, PlaceLast, RevCumSum, Truth
from chunkproof.derivations.tiles import Alpha, Beta, Gamma, K, Kl, Kr, Q, Ql, S, U, V, W, gC

NOTE = "001_ba6c617d0f1bc209.txt"
D = Derivation("kda", "Kimi Delta Attention: chunkwise backward pass", NOTE)
D.add_recurrence(R.kda())

# ------------------------------------------------------------------ tiles

DB = tile("DB", "C", "C", r"\text{Diag}(\boldsymbol{\beta}_{[t]})")
Xt = tile("Xt", "C", "C", r"\widetilde{\mathbf{X}}_{[t]}")
At = tile("At", "C", "C", r"\widetilde{\mathbf{A}}_{[t]}")
Vnew = tile("Vnew", "C", "Dv", r"\mathbf{V}_{[t],new}")

# ------------------------------------------------------------------ forward recap (note lines 4-66)
# Diag(beta) is its own definition because the note differentiates delta Diag(beta).
P = Program("kda_chunk", "chunk", [
    ("Gamma", CumProd(Alpha)),
    ("gC", LastRow(Gamma)),
    ("Ql", Q * Gamma),
    ("Kl", K * Gamma),
    ("Kr", K / Gamma),
    ("DB", diag(Beta)),
    ("Xt", eye("C") + DB @ tril(Kl @ Kr.T, "M-1")),
    ("At", inv(Xt)),
    ("W", At @ DB @ Kl),
    ("U", At @ DB @ V),
    ("Vnew", U - W @ S_PREV.T),
    ("S", S_PREV @ diag(gC) + Vnew.T @ Kr @ diag(gC)),
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ Vnew),
], description="the note's forward recap: KDA chunk with the UT transform (W, U) and V_new")
D.add_program(P)
PR = "kda_chunk"

nb = Notebook(D, NOTE)

# ------------------------------------------------------------------
nb.section("回顾前向传播公式")
nb.forward("kda.S", 25, row=4, what="chunk state update",
           latex=(r"\mathbf{S}_{[t]}^{C} &= \mathbf{S}_{[t-1]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + "
                  r"\mathbf{V}_{[t],new}^\top \overrightarrow{\mathbf{K}_{[t]}} "
                  r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C)"),
           lhs=Truth("state", "t*C+C"), rhs=S_PREV @ diag(gC) + Vnew.T @ Kr @ diag(gC), program=PR)
nb.forward("kda.O", 34, row=5, what="chunk outputs",
           latex=(r"\mathbf{O}_{[t]} &= \overleftarrow{\mathbf{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C \top} + \left( "
                  r"\overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right) "
                  r"\mathbf{V}_{[t],new}"),
           lhs=Truth("outs"), rhs=Ql @ S_PREV.T + tril(Ql @ Kr.T) @ Vnew, program=PR)

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{U}_{[t]}\)")
TEX_DU = (r"\delta \mathbf{U}_{[t]} = \delta \mathbf{V}_{[t],new} = \overrightarrow{\mathbf{K}_{[t]}} "
          r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C) \delta \mathbf{S}_{[t]}^{C \top} + \left( "
          r"\overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} "
          r"\right)^\top \delta \mathbf{O}_{[t]}")
DU_RHS = Kr @ diag(gC) @ adj(S).T + tril(Ql @ Kr.T).T @ DO
nb.adjoint("kda.dU", 69, TEX_DU, adj(U), DU_RHS, PR, row=1, what="delta U")
nb.adjoint("kda.dVnew", 69, TEX_DU, adj(Vnew), DU_RHS, PR, row=1, what="delta V_new (same line)")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{W}_{[t]}\)")
nb.adjoint("kda.dW", 87, r"\delta \mathbf{W}_{[t]} = - \delta \mathbf{U}_{[t]} \mathbf{S}_{[t-1]}^{C}",
           adj(W), -adj(U) @ S_PREV, PR, row=1, what="delta W")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{S}_{[t]}^C\)")
nb.adjoint("kda.dSprev.fromVnew", 92,
           (r"\left.\delta \mathbf{S}_{[t-1]}^{C} \right|_{\text{from } \mathbf{V}_{[t],new}} &= -\delta "
            r"\mathbf{U}_{[t]}^\top \mathbf{W}_{[t]}"),
           adj(S_PREV, via=("Vnew",)), -adj(U).T @ W, PR, row=1, what="delta S_[t-1] through V_new")
nb.adjoint("kda.dSprev.fromSO", 98,
           (r"\left.\delta \mathbf{S}_{[t-1]}^{C} \right|_{\text{from } \mathbf{S}_{[t]}^{C} \text{w/} "
            r"\mathbf{O}_{[t]} \text{w/o} \mathbf{V}_{[t],new}} &= \delta \mathbf{S}_{[t]}^{C} "
            r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \delta \mathbf{O}_{[t]}^\top "
            r"\overleftarrow{\mathbf{Q}_{[t]}}"),
           adj(S_PREV, via=("S", "O")), adj(S) @ diag(gC) + DO.T @ Ql, PR, row=2,
           what="delta S_[t-1] through S_[t] and O_[t]")
nb.adjoint("kda.dS", 107,
           (r"\delta \mathbf{S}_{[t]}^{C} &= \delta \mathbf{S}_{[t+1]}^{C} "
            r"\text{Diag}(\boldsymbol{\gamma}_{[t+1]}^C) + \delta \mathbf{O}_{[t+1]}^\top "
            r"\overleftarrow{\mathbf{Q}_{[t+1]}} -\delta \mathbf{U}_{[t+1]}^\top \mathbf{W}_{[t+1]}"),
           adj(S), shift(adj(S)) @ diag(shift(gC)) + shift(DO).T @ shift(Ql) - shift(adj(U)).T @ shift(W),
           PR, row=1, blocks="not_last", what="delta S recursion across chunks")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{Q}_{[t]}\)")
nb.adjoint("kda.dQl", 118,
           (r"\delta \overleftarrow{\mathbf{Q}_{[t]}} &= \delta \mathbf{O}_{[t]} \mathbf{S}_{[t-1]}^C + "
            r"\left(\delta \mathbf{O}_{[t]} \mathbf{V}_{[t],new}^\top \odot \mathbf{M}\right) "
            r"\overrightarrow{\mathbf{K}_{[t]}}"),
           adj(Ql), DO @ S_PREV + tril(DO @ Vnew.T) @ Kr, PR, row=1, what="delta left-decayed Q")
nb.adjoint("kda.dQ", 127,
           r"\delta \mathbf{Q}_{[t]} &= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{\Gamma}_{[t]}",
           adj(Q), adj(Ql) * Gamma, PR, row=2, what="delta Q")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{V}_{[t]}\)")
nb.adjoint("kda.dV", 134,
           (r"\delta \mathbf{V}_{[t]} = \text{Diag}(\boldsymbol{\beta}_{[t]}) "
            r"\widetilde{\mathbf{A}}_{[t]}^\top \delta \mathbf{U}_{[t]}"),
           adj(V), DB @ At.T @ adj(U), PR, row=1, what="delta V")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \widetilde{\mathbf{A}}_{[t]}\) \(\delta \widetilde{\mathbf{X}}_{[t]}\)")
nb.adjoint("kda.dAt", 143,
           (r"\delta \widetilde{\mathbf{A}}_{[t]} &= \delta \mathbf{W}_{[t]} "
            r"\overleftarrow{\mathbf{K}_{[t]}}^\top \text{Diag}(\boldsymbol{\beta}_{[t]}) + \delta "
            r"\mathbf{U}_{[t]} \mathbf{V}_{[t]}^\top \text{Diag}(\boldsymbol{\beta}_{[t]})"),
           adj(At), adj(W) @ Kl.T @ DB + adj(U) @ V.T @ DB, PR, row=1, what="delta A-tilde")
# One row, two equalities: X^{-T} delta(X^{-1}) X^{-T}, then -A^T delta A A^T.
nb.adjoint("kda.dXt", 155,
           (r"\delta \widetilde{\mathbf{X}}_{[t]} &= - \widetilde{\mathbf{X}}_{[t]}^{-\top} \delta "
            r"(\widetilde{\mathbf{X}}_{[t]}^{-1}) \widetilde{\mathbf{X}}_{[t]}^{-\top}"),
           adj(Xt), -inv(Xt).T @ adj(At) @ inv(Xt).T, PR, row=1, what="delta X-tilde, inverse rule")
nb.adjoint("kda.dXt.viaA", 155,
           (r"\delta \widetilde{\mathbf{X}}_{[t]} &= - \widetilde{\mathbf{X}}_{[t]}^{-\top} \delta "
            r"(\widetilde{\mathbf{X}}_{[t]}^{-1}) \widetilde{\mathbf{X}}_{[t]}^{-\top} = - "
            r"\widetilde{\mathbf{A}}_{[t]}^\top \delta \widetilde{\mathbf{A}}_{[t]} "
            r"\widetilde{\mathbf{A}}_{[t]}^\top"),
           adj(Xt), -At.T @ adj(At) @ At.T, PR, row=1, what="delta X-tilde in terms of A-tilde")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{K}_{[t]}\)")
# "from Ã": A-tilde reaches the left/right K only through X-tilde.
nb.adjoint("kda.dKl.fromW", 169,
           (r"\left.\delta \overleftarrow{\mathbf{K}_{[t]}}\right|_{\text{from } \mathbf{W}_{[t]} \text{w/o} "
            r"\widetilde{\mathbf{A}}_{[t]} } &= \text{Diag}(\boldsymbol{\beta}_{[t]}) "
            r"\widetilde{\mathbf{A}}_{[t]}^\top \delta \mathbf{W}_{[t]}"),
           adj(Kl, via=("W",)), DB @ At.T @ adj(W), PR, row=1, what="delta left K through W")
nb.adjoint("kda.dKl.fromAt", 176,
           (r"\left.\delta \overleftarrow{\mathbf{K}_{[t]}}\right|_{\text{from } \widetilde{\mathbf{A}}_{[t]} "
            r"} &= \left( \text{Diag}(\boldsymbol{\beta}_{[t]}) \delta \widetilde{\mathbf{X}}_{[t]} \odot "
            r"\mathbf{M}_{-1} \right) \overrightarrow{\mathbf{K}_{[t]}}"),
           adj(Kl, via=("Xt",)), tril(DB @ adj(Xt), "M-1") @ Kr, PR, row=2,
           what="delta left K through A-tilde")
nb.adjoint("kda.dKl", 187,
           (r"\delta \overleftarrow{\mathbf{K}_{[t]}} &= \text{Diag}(\boldsymbol{\beta}_{[t]}) "
            r"\widetilde{\mathbf{A}}_{[t]}^\top \delta \mathbf{W}_{[t]} + \left( "
            r"\text{Diag}(\boldsymbol{\beta}_{[t]}) \delta \widetilde{\mathbf{X}}_{[t]} \odot \mathbf{M}_{-1} "
            r"\right) \overrightarrow{\mathbf{K}_{[t]}}"),
           adj(Kl), DB @ At.T @ adj(W) + tril(DB @ adj(Xt), "M-1") @ Kr, PR, row=1,
           what="delta left K, combined")

nb.adjoint("kda.dKr.fromS", 202,
           (r"\left.\delta \overrightarrow{\mathbf{K}_{[t]}}\right|_{\text{from } \mathbf{S}_{[t]}^C "
            r"\text{w/o} \widetilde{\mathbf{A}}_{[t]} } &= \mathbf{V}_{[t],new} \delta \mathbf{S}_{[t]}^C "
            r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C)"),
           adj(Kr, via=("S",)), Vnew @ adj(S) @ diag(gC), PR, row=1, what="delta right K through S")
nb.adjoint("kda.dKr.fromO", 209,
           (r"\left.\delta \overrightarrow{\mathbf{K}_{[t]}}\right|_{\text{from } \mathbf{O}_{[t]}^C "
            r"\text{w/o} \widetilde{\mathbf{A}}_{[t]} } &= \left( \delta \mathbf{O}_{[t]} "
            r"\mathbf{V}_{[t],new}^\top \odot \mathbf{M} \right)^\top \overleftarrow{\mathbf{Q}_{[t]}}"),
           adj(Kr, via=("O",)), tril(DO @ Vnew.T).T @ Ql, PR, row=2, what="delta right K through O")
nb.adjoint("kda.dKr.fromAt", 219,
           (r"\left.\delta \overrightarrow{\mathbf{K}_{[t]}}\right|_{\text{from } \widetilde{\mathbf{A}}_{[t]} "
            r"} &= \left( \text{Diag}(\boldsymbol{\beta}_{[t]}) \delta \widetilde{\mathbf{X}}_{[t]} \odot "
            r"\mathbf{M}_{-1} \right)^\top \overleftarrow{\mathbf{K}_{[t]}}"),
           adj(Kr, via=("Xt",)), tril(DB @ adj(Xt), "M-1").T @ Kl, PR, row=3,
           what="delta right K through A-tilde")
nb.adjoint("kda.dKr", 230,
           (r"\delta \overrightarrow{\mathbf{K}_{[t]}} &= \mathbf{V}_{[t],new} \delta \mathbf{S}_{[t]}^C "
            r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \left( \text{Diag}(\boldsymbol{\beta}_{[t]}) \delta "
            r"\widetilde{\mathbf{X}}_{[t]} \odot \mathbf{M}_{-1} \right)^\top \overleftarrow{\mathbf{K}_{[t]}}"),
           adj(Kr), Vnew @ adj(S) @ diag(gC) + tril(DB @ adj(Xt), "M-1").T @ Kl, PR, row=1,
           what="delta right K, combined")
nb.corrected("kda.dKr", why="the combined line drops the 'from O' term (delta O V_new^T odot M)^T "
                            "left-Q that the note derived two displays earlier",
             rhs=Vnew @ adj(S) @ diag(gC) + tril(DO @ Vnew.T).T @ Ql + tril(DB @ adj(Xt), "M-1").T @ Kl)

nb.adjoint("kda.dK", 245,
           (r"\delta \mathbf{K}_{[t]} &= \delta \overleftarrow{\mathbf{K}_{[t]}} \odot \mathbf{\Gamma}_{[t]} + "
            r"\delta \overrightarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]}"),
           adj(K), adj(Kl) * Gamma + adj(Kr) / Gamma, PR, row=1, what="delta K from the two decayed K")
# Rows 2-4 are one expression (continued by "\\&+").
nb.adjoint("kda.dK.expanded", 252,
           (r"&= \text{Diag}(\boldsymbol{\beta}_{[t]}) \widetilde{\mathbf{A}}_{[t]}^\top \delta "
            r"\mathbf{W}_{[t]} \odot \mathbf{\Gamma}_{[t]} + \mathbf{V}_{[t],new} \delta \mathbf{S}_{[t]}^C "
            r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^C) \oslash \mathbf{\Gamma}_{[t]} \\&+ \left( \delta "
            r"\mathbf{O}_{[t]} \mathbf{V}_{[t],new}^\top \odot \mathbf{M} \right)^\top "
            r"\overleftarrow{\mathbf{Q}_{[t]}} \oslash \mathbf{\Gamma}_{[t]} \\&+ \left( "
            r"\text{Diag}(\boldsymbol{\beta}_{[t]}) \delta \widetilde{\mathbf{X}}_{[t]} \odot \mathbf{M}_{-1} "
            r"\right) \overrightarrow{\mathbf{K}_{[t]}} \odot \mathbf{\Gamma}_{[t]} + \left( "
            r"\text{Diag}(\boldsymbol{\beta}_{[t]}) \delta \widetilde{\mathbf{X}}_{[t]} \odot \mathbf{M}_{-1} "
            r"\right)^\top \overleftarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]}"),
           adj(K),
           DB @ At.T @ adj(W) * Gamma + Vnew @ adj(S) @ diag(gC) / Gamma
           + tril(DO @ Vnew.T).T @ Ql / Gamma
           + tril(DB @ adj(Xt), "M-1") @ Kr * Gamma + tril(DB @ adj(Xt), "M-1").T @ Kl / Gamma,
           PR, row=2, what="delta K, expanded")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \boldsymbol{\beta}_{[t]}\)")
nb.adjoint("kda.dDiagBeta", 289,
           (r"\delta \text{Diag}(\boldsymbol{\beta}_{[t]}) &= \widetilde{\mathbf{A}}_{[t]}^\top \delta "
            r"\mathbf{W}_{[t]} \overleftarrow{\mathbf{K}_{[t]}}^\top + \widetilde{\mathbf{A}}_{[t]}^\top "
            r"\delta \mathbf{U}_{[t]} \mathbf{V}_{[t]}^\top + \delta \widetilde{\mathbf{X}}_{[t]} \left( "
            r"\overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} "
            r"\right)^\top"),
           adj(DB), At.T @ adj(W) @ Kl.T + At.T @ adj(U) @ V.T + adj(Xt) @ tril(Kl @ Kr.T, "M-1").T,
           PR, row=1, what="delta Diag(beta), full C x C matrix")
# The same, grouped so that the kernel forms fewer C x Dk products: diag(A~^T X Y) as
# diag(A~^T (X Y)) reads the C x C products dW <-K^T and dU V^T that delta A-tilde forms
# (each term apart, so that the kernel's product is the same as delta A-tilde's).
nb.adjoint("kda.dDiagBeta.grouped", 289, "",
           adj(DB), At.T @ (adj(W) @ Kl.T) + At.T @ (adj(U) @ V.T) + adj(Xt) @ tril(Kl @ Kr.T, "M-1").T,
           PR, what="derived: delta Diag(beta) with the products of delta A-tilde read, not formed again")
nb.adjoint("kda.dDiagBeta.viaA", 301,
           (r"&= \widetilde{\mathbf{A}}_{[t]}^\top \delta \widetilde{\mathbf{A}}_{[t]} "
            r"\text{Diag}(\boldsymbol{\beta}_{[t]})^{-1} + \delta \widetilde{\mathbf{X}}_{[t]} \left( "
            r"\overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} "
            r"\right)^\top"),
           adj(DB), At.T @ adj(At) @ inv(DB) + adj(Xt) @ tril(Kl @ Kr.T, "M-1").T,
           PR, row=2, what="delta Diag(beta) in terms of delta A-tilde")
nb.adjoint("kda.dBeta", 310,
           r"\delta \boldsymbol{\beta}_{[t]} &= \text{diag}(\delta \text{Diag}(\boldsymbol{\beta}_{[t]}))",
           adj(Beta), DiagV(adj(DB)), PR, row=3, what="delta beta as the diagonal")
nb.adjoint("kda.dBeta.expanded", 313,
           (r"&= \text{diag}\left( \widetilde{\mathbf{A}}_{[t]}^\top \delta \widetilde{\mathbf{A}}_{[t]} "
            r"\right) \odot \boldsymbol{\beta}_{[t]}^{-1} + \text{diag}\left( \left( \delta "
            r"\widetilde{\mathbf{X}}_{[t]} \odot \mathbf{M}_{-1} \right) \left( "
            r"\overrightarrow{\mathbf{K}_{[t]}} \overleftarrow{\mathbf{K}_{[t]}}^\top \right) \right)"),
           adj(Beta),
           DiagV(At.T @ adj(At)) * (Ones("C", "1") / Beta) + DiagV(tril(adj(Xt), "M-1") @ (Kr @ Kl.T)),
           PR, row=4, what="delta beta, expanded")

# ------------------------------------------------------------------
nb.section(r"对于 \(\delta \mathbf{\Gamma}_{[t]}\)")
nb.adjoint("kda.dgC", 333,
           (r"\delta \boldsymbol{\gamma}_{[t]}^C &= \text{diag}\left( \left( \mathbf{S}_{[t-1]}^C + "
            r"\mathbf{V}_{[t],new}^\top \overrightarrow{\mathbf{K}_{[t]}} \right)^\top \delta "
            r"\mathbf{S}_{[t]}^C \right)"),
           adj(gC), DiagV((S_PREV + Vnew.T @ Kr).T @ adj(S)), PR, row=1, what="delta gamma^C")
nb.adjoint("kda.dgC.viaS", 333,
           (r"\delta \boldsymbol{\gamma}_{[t]}^C &= \text{diag}\left( \left( \mathbf{S}_{[t-1]}^C + "
            r"\mathbf{V}_{[t],new}^\top \overrightarrow{\mathbf{K}_{[t]}} \right)^\top \delta "
            r"\mathbf{S}_{[t]}^C \right) = \left(\boldsymbol{\gamma}_{[t]}^{C}\right)^{-1} \odot "
            r"\text{diag}\left( \mathbf{S}_{[t]}^{C\top} \delta \mathbf{S}_{[t]}^C \right)"),
           adj(gC), (Ones("Dk", "1") / gC) * DiagV(S.T @ adj(S)), PR, row=1,
           what="delta gamma^C in terms of S_[t]")

G_WO = adj(Gamma, excl=("gC",))   # "w/o extra gamma^C": every use of Gamma except LastRow
nb.adjoint("kda.dGamma.wo_gC", 353,
           (r"\left.\delta \mathbf{\Gamma}_{[t]}\right|_{\text{w/o extra} \boldsymbol{\gamma}_{[t]}^C} &= "
            r"\delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{Q}_{[t]} + \delta "
            r"\overleftarrow{\mathbf{K}_{[t]}} \odot \mathbf{K}_{[t]} - \left( \delta "
            r"\overrightarrow{\mathbf{K}_{[t]}} \odot \mathbf{K}_{[t]} \right) \oslash \left( "
            r"\mathbf{\Gamma}_{[t]} \odot \mathbf{\Gamma}_{[t]} \right)"),
           G_WO, adj(Ql) * Q + adj(Kl) * K - (adj(Kr) * K) / (Gamma * Gamma), PR, row=1,
           what="delta Gamma without the gamma^C path")
nb.adjoint("kda.dGamma.wo_gC.b", 370,
           (r"&= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{\Gamma}_{[t]} \odot \mathbf{Q}_{[t]} "
            r"\oslash \mathbf{\Gamma}_{[t]} + \left( \delta \overleftarrow{\mathbf{K}_{[t]}} \odot "
            r"\mathbf{\Gamma}_{[t]} \odot \mathbf{K}_{[t]} - \delta \overrightarrow{\mathbf{K}_{[t]}} \oslash "
            r"\mathbf{\Gamma}_{[t]} \odot \mathbf{K}_{[t]} \right) \oslash \mathbf{\Gamma}_{[t]}"),
           G_WO, adj(Ql) * Gamma * Q / Gamma + (adj(Kl) * Gamma * K - adj(Kr) / Gamma * K) / Gamma,
           PR, row=2, what="delta Gamma without gamma^C, regrouped")
nb.adjoint("kda.dGamma.wo_gC.c", 387,
           (r"&= \left( \delta \mathbf{Q}_{[t]} \odot \mathbf{Q}_{[t]} + \left( \delta "
            r"\overleftarrow{\mathbf{K}_{[t]}} \odot \mathbf{\Gamma}_{[t]} \right) \odot \mathbf{K}_{[t]} - "
            r"\left( \delta \overrightarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]} \right) \odot "
            r"\mathbf{K}_{[t]} \right) \oslash \mathbf{\Gamma}_{[t]}"),
           G_WO, (adj(Q) * Q + (adj(Kl) * Gamma) * K - (adj(Kr) / Gamma) * K) / Gamma,
           PR, row=3, what="delta Gamma without gamma^C, via delta Q")

# delta log X is the adjoint w.r.t. log X, i.e. delta X odot X: identity claims on true adjoints.
nb.identity("kda.dlogGamma", 409,
            r"\delta \log \mathbf{\Gamma}_{[t]} &= \delta \mathbf{\Gamma}_{[t]} \odot \mathbf{\Gamma}_{[t]}",
            adj(Gamma) * Gamma, adj(Gamma) * Gamma, PR, row=1, what="delta log Gamma, definition")
# The note's bracket follows its own Gamma = [gamma^1, ..., gamma^C]^T convention (a list of
# column vectors), so [0,0,...,v] without ^T is Dk x C: transcribed as such.
TEX_DLOGG = (r"&= \delta \mathbf{Q}_{[t]} \odot \mathbf{Q}_{[t]} + \left( \left( \delta "
             r"\overleftarrow{\mathbf{K}_{[t]}} \odot \mathbf{\Gamma}_{[t]} \right) \odot \mathbf{K}_{[t]} - "
             r"\left( \delta \overrightarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]} \right) \odot "
             r"\mathbf{K}_{[t]} \right) \\&+ [0,0,...,\text{diag}\left( \mathbf{S}_{[t]}^{C\top} \delta "
             r"\mathbf{S}_{[t]}^C \right)]")
DLOGG_QK = adj(Q) * Q + ((adj(Kl) * Gamma) * K - (adj(Kr) / Gamma) * K)
DGC_S = DiagV(S.T @ adj(S))          # diag(S^T delta S) = gamma^C odot delta gamma^C
nb.identity("kda.dlogGamma.expanded", 414, TEX_DLOGG, adj(Gamma) * Gamma,
            DLOGG_QK + PlaceLast(DGC_S).T, PR, row=2, what="delta log Gamma, expanded (rows 2-3)")
DLOGG = DLOGG_QK + PlaceLast(DGC_S)
nb.corrected("kda.dlogGamma.expanded", rhs=DLOGG,
             why="the bracket [0,0,...,diag(S^T delta S)] lacks the transpose ^T (compare Gamma = "
                 "[gamma^1,...,gamma^C]^T), so it is Dk x C and cannot be added to the C x Dk terms")
# Not in the note: the gate input's gradient.  log Gamma = cumsum(log alpha), so
# delta log alpha is the suffix sum over the chunk's rows of delta log Gamma.
nb.identity("kda.dlogAlpha", 0, "", adj(Alpha) * Alpha, RevCumSum(DLOGG), PR,
            what="derived (not in the note): delta log alpha = suffix sum of delta log Gamma")

# The same gradient grouped for rounding (what the kernel prints), as gla.bwd.dlogalpha_grouped:
# with S = S_[t-1] Diag(gamma^C) + Vnew^T ->K Diag(gamma^C), diag(S^T dS) = gamma^C .
# diag(S_[t-1]^T dS) + 1^T E, E = (Vnew dS) . (->K Diag(gamma^C)), the part of -(d->K / Gamma) . K
# that comes through S.  The last row then adds back the very E the rows subtract; printed from
# S it adds a differently rounded one (measured: the bf16 gate gradient's error 4.0e-3 -> see
# benchmarks/results/cpu_grad_accuracy.md).
E_STATE = (Vnew @ adj(S)) * (Kr @ diag(gC))
nb.identity("kda.dlogAlpha_grouped", 0, "", adj(Alpha) * Alpha,
            RevCumSum(DLOGG_QK + PlaceLast(DiagV(S_PREV.T @ adj(S)) * gC + E_STATE.T @ Ones("C", "1"))), PR,
            what="derived: delta log alpha = suffix sums of (dQ.Q + (d<-K.Gamma).K - (d->K/Gamma).K + "
                 "[0, ..., gamma^C diag(S_[t-1]^T dS) + 1^T E]), E = (Vnew dS) . (->K Diag(gamma^C))")

# Not in the note: delta S_[t-1] in full (the two partials of lines 92 and 98), the form
# a backward kernel's reverse scan prints.
nb.adjoint("kda.bwd.dS_prev", 0, "", adj(S_PREV), adj(S) @ diag(gC) + DO.T @ Ql - adj(U).T @ W, PR,
           what="derived: delta S_[t-1]^C = delta S_[t]^C Diag(gamma^C) + delta O^T <-Q - delta U^T W")


# the kernel printed from this derivation (chunkproof gen; derivations/kernel.py)
kernel(D, "chunk_kda", P, outputs="kda.O", state="kda.S",
       args=dict(q="Q", k="K", v="V", g=log_of("Alpha"), beta="Beta"),
       backward=dict(dS="kda.dS", dS_prev="kda.bwd.dS_prev",
                     grads=dict(q="kda.dQ", k="kda.dK", v="kda.dV", g="kda.dlogAlpha_grouped", beta="kda.dBeta"),
                     inner=["kda.dU", "kda.dVnew", "kda.dW", "kda.dQl", "kda.dAt", "kda.dXt", "kda.dKl",
                            "kda.dKr.corrected", "kda.dDiagBeta.grouped"]),
       doc="S_t = S_{t-1} Diag(exp g_t)(I - beta_t k_t k_t^T) + beta_t v_t k_t^T,  o_t = S_t q_t")

DERIVATION = D
