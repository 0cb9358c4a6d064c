"""Note 000 (DPLR, diagonal plus low rank): forward and backward of the gated
chunkwise form, the reduction to KDA, and the form without the external gate.

    S_t = S_{t-1} Diag(alpha_t) (I - b_t a_t^T) + v_t k_t^T,   o_t = S_t q_t

Every display of the note is transcribed literally (the note's LaTeX is kept
verbatim in ``latex``).  Where a line is wrong, a ``corrected`` claim follows it;
the corrected claims together with the literal ones that hold make a complete,
verified forward and backward (down to the gate, claim dplr.dlogAlpha).

Programs: ``dplr_chunk`` (the backward section's recap, over the gated recurrence),
``dplr_chunk_rows`` (the same plus the note's row recursions for w and c),
``dplr_kda_chunk`` (the recap under a = k, b = beta k, v = beta v', over KDA) and
``dplr_nogate_chunk`` / ``dplr_nogate_chunk_fixed`` (the last section as written,
and with <-B in place of D, over S_t = S_{t-1}(Diag(alpha_t) - d_t a_t^T) + v_t k_t^T).
"""
from chunkproof.derivations.kernel import kernel, log_of
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (S_PREV, DO, Derivation, Notebook, Program, adj, diag, eye, inv,
                             prod, row, scal, shift, summ, tile, tril)
from chunkproof.derivations.ir import (CumProd, DiagV, LastRow, Ones, PlaceLast, RevCumSum, RowRec,
                            Truth)
from chunkproof.derivations.tiles import (Alpha as Al, Alphaseq as AlL, Beta, Gamma, K, Kl, Kr, Kseq as KL, Q,
                               Ql, Qseq as QL, V, Vseq as VL, W, gC)

NOTE = "000_cb349aeede08771a.txt"
D = Derivation("dplr", "Diagonal Plus Low Rank (DPLR): chunkwise forward and backward", NOTE)
D.add_recurrence(R.dplr())
D.add_recurrence(R.dplr_nogate())
D.add_recurrence(R.kda())
D.add_recurrence(R.dplr_fla())

DERIVATION = D

I_K = eye("Dk")
I_C = eye("C")

# ------------------------------------------------------------------ tiles
# chunk inputs X_[t]
A = tile("A", "C", "Dk", r"\mathbf{A}_{[t]}")
B = tile("B", "C", "Dk", r"\mathbf{B}_{[t]}")
Dd = tile("D", "C", "Dk", r"\mathbf{D}_{[t]}")
# whole sequences, read at global steps (the note's x_i with i = tC + ...)
AL = tile("A", "L", "Dk", r"\mathbf{A}")
BL = tile("B", "L", "Dk", r"\mathbf{B}")
# named definitions of the chunk programs
Ar = tile("Ar", "C", "Dk", r"\overrightarrow{\mathbf{A}_{[t]}}", ">", "A")
Bl = tile("Bl", "C", "Dk", r"\overleftarrow{\mathbf{B}_{[t]}}", "<", "B")
F = tile("F", "C", "C", r"\mathbf{F}_{[t]}")
E = tile("E", "C", "C", r"\mathbf{E}_{[t]}")
Cm = tile("C", "C", "Dv", r"\mathbf{C}_{[t]}")
V1 = tile("V1", "C", "Dv", r"\mathbf{V}_{[t],1}")
V2 = tile("V2", "C", "Dv", r"\mathbf{V}_{[t],2}")
S = tile("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^C")
Vb = tile("Vb", "C", "Dv", r"\mathbf{V}_{[t]}")          # KDA section: DPLR's V = Diag(beta) V'


def _state_and_output():
    """S_[t]^C and O_[t] of the recap (note lines 481-509), shared by all programs."""
    return [("V1", V),
            ("V2", Cm - W @ S_PREV.T),
            ("S", S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC)),
            ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2)]


def _gates():
    return [("Gamma", CumProd(Al)), ("gC", LastRow(Gamma)), ("Ql", Q * Gamma), ("Kr", K / Gamma)]


# The backward section's recap (note lines 455-531): F, E, W, C, V_[t],1, V_[t],2, S, O.
# V_[t],1 := V_[t] is its own definition so that delta V_[t],1 (the adjoint of V through
# S and O only) can be named; C reads V itself.
CHUNK = D.add_program(Program("dplr_chunk", "chunk", _gates() + [
    ("Ar", A / Gamma),
    ("Bl", B * Gamma),
    ("F", I_C + tril(Bl @ Ar.T, "M-1")),
    ("E", inv(F)),
    ("W", E @ Bl),
    ("C", -(E @ tril(Bl @ Kr.T, "M-1") @ V)),
] + _state_and_output(), description="note 000, recap of the gated DPLR chunk form"),
    recurrence="dplr")
P = "dplr_chunk"

# ------------------------------------------------------------------ index-level helpers
def g(i):
    """gamma_[t]^i, a column of Gamma_[t]."""
    return row(Gamma, i)


def Dg(i):
    """Diag(gamma_[t]^i)"""
    return diag(g(i))


def Dginv(i):
    """Diag(gamma_[t]^i)^{-1}"""
    return inv(Dg(i))


def glob(x, i):
    """x_i at the global step i (the note's unbracketed subscripts)."""
    return row(x, i, glob=True)


def factor(i):
    """Diag(alpha_i)(I - b_i a_i^T) at global step i."""
    return diag(glob(AlL, i)) @ (I_K - glob(BL, i) @ glob(AL, i).T)


def P_def(r):
    """P_[t]^r = prod_{i=tC+1}^{tC+r} Diag(alpha_i)(I - b_i a_i^T)   (line 27)"""
    return prod("i", "t*C+1", f"t*C+{r}", factor("i"))


def H_def(r):
    """H_[t]^r = sum_{i=tC+1}^{tC+r} (v_i k_i^T) prod_{j=i+1}^{tC+r} Diag(alpha_j)(I - b_j a_j^T)"""
    return summ("i", "t*C+1", f"t*C+{r}",
                (glob(VL, "i") @ glob(KL, "i").T) @ prod("j", "i+1", f"t*C+{r}", factor("j")))


# The ansatz's free parameters after the note's choice (line 95-105): eta = I,
# xi absorbed into w (= I), epsilon^i = Diag(gamma^i)^{-1}, lambda^i = Diag(gamma^i).
def eta(i):
    return I_K


def xi(i):
    return I_K


def eps(i):
    return Dginv(i)


def lam(i):
    return Dg(i)


# w_[t]^r and c_[t]^r as the note defines them (lines 108, 234): row recursions.  They
# live as definitions of a companion program (the recap plus these rows), so each is
# evaluated once per chunk; S and O do not read them.
def wrec(name, grouped):
    """w_[t]^r = (I - sum_{i<r} w^i (Diag(gamma^i)^{-1} a^i)^T) Diag(gamma^r) b^r; ``grouped``
    writes the last factor as (Diag(gamma^r) b^r) as in line 368."""
    w_self = tile(name, "C", "Dk", r"\boldsymbol{w}_{[t]}")
    left = I_K - summ("i", "1", "r-1", row(w_self, "i") @ (Dginv("i") @ row(A, "i")).T)
    body = left @ (Dg("r") @ row(B, "r")) if grouped else left @ Dg("r") @ row(B, "r")
    return RowRec(name, "r", body, rows="C", cols="Dk")


def crec(name, v_i):
    """c_[t]^r = -sum_{i<r} (v_i (Diag(gamma^i)^{-1} k^i)^T + c^i (Diag(gamma^i)^{-1} a^i)^T)
    (Diag(gamma^r) b^r), with v_i given by ``v_i(i)``."""
    c_self = tile(name, "C", "Dv", r"\boldsymbol{c}_{[t]}")
    return RowRec(name, "r", -(summ("i", "1", "r-1",
                                    v_i("i") @ (Dginv("i") @ row(K, "i")).T
                                    + row(c_self, "i") @ (Dginv("i") @ row(A, "i")).T))
                  @ (Dg("r") @ row(B, "r")), rows="C", cols="Dv")


def v_global(i):      # the note's v_i inside chunk sums: global step i (typo for v_[t]^i)
    return glob(VL, i)


def v_local(i):       # v_[t]^i
    return row(V, i)


# the two-term form of H^r (line 231-243, with eta = I, epsilon = gamma^{-1}, gamma^1 = gamma)
def two_term(u_i, c_i, r="r"):
    return (summ("i", "1", r, u_i("i") @ (Dginv("i") @ row(K, "i")).T @ Dg(r))
            + summ("i", "1", r, c_i("i") @ (Dginv("i") @ row(A, "i")).T @ Dg(r)))


ROWS_PROG = D.add_program(Program("dplr_chunk_rows", "chunk", list(CHUNK.defs) + [
    ("w_note", wrec("w_note", grouped=False)),
    ("w_368", wrec("w_368", grouped=True)),
    ("c_note", crec("c_note", v_global)),          # as written: v_i (global step)
    ("c_fixed", crec("c_fixed", v_local)),         # with v_[t]^i
], description="the recap plus the note's row recursions for w and c"), recurrence="dplr")
PR = "dplr_chunk_rows"
w_note = tile("w_note", "C", "Dk", r"\boldsymbol{w}_{[t]}")
w_368 = tile("w_368", "C", "Dk", r"\boldsymbol{w}_{[t]}")
c_note = tile("c_note", "C", "Dv", r"\boldsymbol{c}_{[t]}")
c_fixed = tile("c_fixed", "C", "Dv", r"\boldsymbol{c}_{[t]}")


ROWS = (("r", "1", "C"),)
nb = Notebook(D, NOTE)

# ====================================================================== forward
nb.section("二、带Gate的PRLR前向过程推导")

nb.forward("dplr.recurrence.S", 13, r"\mathbf{S}_t &= \mathbf{S}_{t-1} \text{Diag}(\boldsymbol{\alpha}_t) (\mathbf{I} - \boldsymbol{b}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top \in \mathbb{R}^{d_v \times d_k}",
           Truth("state", "t*C+r"),
           Truth("state", "t*C+r-1") @ diag(glob(AlL, "t*C+r")) @ (I_K - glob(BL, "t*C+r") @ glob(AL, "t*C+r").T)
           + glob(VL, "t*C+r") @ glob(KL, "t*C+r").T,
           P, row=1, over=ROWS, what="the DPLR recurrence (ground truth, sanity)")
nb.forward("dplr.recurrence.o", 22, r"\boldsymbol{o}_t &= \mathbf{S}_{t}\boldsymbol{q}_t",
           Truth("out", "t*C+r"), Truth("state", "t*C+r") @ glob(QL, "t*C+r"),
           P, row=2, over=ROWS, what="outputs o_t = S_t q_t")

nb.forward("dplr.H_def", 32, r"\mathbf{H}_{[t]}^{r} &= \sum_{i=tC + 1}^{tC + r} (\boldsymbol{v}_{i} \boldsymbol{k}_{i}^{\top}) \prod_{j=i + 1}^{t C + r} \text{Diag}(\boldsymbol{\alpha}_j)(\mathbf{I} - \boldsymbol{b}_{j} \boldsymbol{a}_{j}^{\top}) \in \mathbb{R}^{d_v \times d_k}",
           Truth("state", "t*C+r"), H_def("r"),
           P, row=2, over=ROWS, blocks="first", assume=("zero_initial_state",),
           what="H^r is the chunk's state from a zero state (S_[-1]^C = 0)")
nb.forward("dplr.Sr_PH", 40, r"\mathbf{S}_{[t]}^{r} = \mathbf{S}_{[t-1]}^{C} \mathbf{P}_{[t]}^{r} + \mathbf{H}_{[t]}^{r}",
           Truth("state", "t*C+r"), S_PREV @ P_def("r") + H_def("r"),
           P, row=1, over=ROWS, what="S^r = S_[t-1]^C P^r + H^r, P and H by their definitions (lines 27, 32)")

# "when k = 0" (no low-rank part) P^r reduces to its diagonal factors; the second
# equality is checkable on its own.  The product runs over global steps tC+1..tC+r
# while writing alpha_[t]^i: read as the global alpha_i (the chunk tile has rows
# 1..C only, so the chunk-local reading cannot be evaluated for t > 0).
nb.identity("dplr.k0", 52, r"= \prod_{i=t C + 1}^{t C + r} \text{Diag}(\boldsymbol{\alpha}_{[t]}^i) = \text{Diag}(\boldsymbol{\gamma}_{[t]}^r)",
            prod("i", "t*C+1", "t*C+r", diag(glob(AlL, "i"))), Dg("r"),
            P, row=1, over=ROWS, what="the diagonal part of P^r is Diag(gamma^r) (alpha_[t]^i read as alpha_i)")

nb.identity("dplr.P_ansatz", 57, r"\mathbf{P}_{[t]}^{r} = \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) - \sum_{i=1}^{r} \text{Diag}(\boldsymbol{\eta}_{[t]}^r) \text{Diag}(\boldsymbol{\xi}_{[t]}^i) \boldsymbol{w}_{[t]}^{i} \boldsymbol{a}_{[t]}^{i \top} \text{Diag}(\boldsymbol{\epsilon}_{[t]}^i) \text{Diag}(\boldsymbol{\lambda}_{[t]}^r)",
            P_def("r"),
            Dg("r") - summ("i", "1", "r", eta("r") @ xi("i") @ row(w_note, "i") @ row(A, "i").T @ eps("i") @ lam("r")),
            PR, row=1, over=ROWS,
            what="the WY ansatz for P^r with eta = I, xi absorbed, epsilon = gamma^{-1}, lambda = gamma")

nb.identity("dplr.P_step", 66, r"\mathbf{P}_{[t]}^{r} &= \mathbf{P}_{[t]}^{r-1} \text{Diag}(\boldsymbol{\alpha}_{[t]}^r) (\mathbf{I} - \boldsymbol{b}_{[t]}^r \boldsymbol{a}_{[t]}^{r\top})",
            P_def("r"), P_def("r-1") @ diag(row(Al, "r")) @ (I_K - row(B, "r") @ row(A, "r").T),
            P, row=1, over=ROWS, what="P^r = P^{r-1} Diag(alpha^r)(I - b^r a^r^T)")


def _P_step_expanded(fixed):
    tail = diag(row(Al, "r")) if fixed else None
    first = eta("r-1") @ xi("i") @ row(w_note, "i") @ row(A, "i").T @ eps("i") @ lam("r-1")
    if fixed:
        first = first @ tail
    return (Dg("r") - Dg("r") @ row(B, "r") @ row(A, "r").T
            - summ("i", "1", "r-1", first)
            + summ("i", "1", "r-1", eta("r-1") @ xi("i") @ row(w_note, "i") @ row(A, "i").T @ eps("i")
                   @ lam("r-1") @ diag(row(Al, "r")) @ row(B, "r") @ row(A, "r").T))


nb.identity("dplr.P_step_expanded", 71, r"&= \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) - \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{b}_{[t]}^r \boldsymbol{a}_{[t]}^{r\top} \\ \\&- \sum_{i=1}^{r-1} \text{Diag}(\boldsymbol{\eta}_{[t]}^{r-1}) \text{Diag}(\boldsymbol{\xi}_{[t]}^i) \boldsymbol{w}_{[t]}^{i} \boldsymbol{a}_{[t]}^{i \top} \text{Diag}(\boldsymbol{\epsilon}_{[t]}^i) \text{Diag}(\boldsymbol{\lambda}_{[t]}^{r-1}) \\ \\&+ \sum_{i=1}^{r-1} \text{Diag}(\boldsymbol{\eta}_{[t]}^{r-1}) \text{Diag}(\boldsymbol{\xi}_{[t]}^i) \boldsymbol{w}_{[t]}^{i} \boldsymbol{a}_{[t]}^{i \top} \text{Diag}(\boldsymbol{\epsilon}_{[t]}^i) \text{Diag}(\boldsymbol{\lambda}_{[t]}^{r-1}) \text{Diag}(\boldsymbol{\alpha}_{[t]}^r) \boldsymbol{b}_{[t]}^r \boldsymbol{a}_{[t]}^{r\top}",
            P_def("r"), _P_step_expanded(False),
            PR, row=2, over=ROWS, what="P^{r-1} Diag(alpha^r)(I - b a^T) expanded with the ansatz")
nb.corrected("dplr.P_step_expanded",
             why="the third term drops Diag(alpha^r): P^{r-1} Diag(alpha^r) carries "
                 "Diag(lambda^{r-1}) Diag(alpha^r) in the sum, not Diag(lambda^{r-1})",
             rhs=_P_step_expanded(True))

nb.identity("dplr.gamma", 97, r"\text{Diag}(\boldsymbol{\gamma}_{[t]}^i) = \prod_{j=1}^i \text{Diag}(\boldsymbol{\alpha}_{[t]}^j)",
            Dg("i"), prod("j", "1", "i", diag(row(Al, "j"))),
            P, row=1, over=(("i", "1", "C"),), what="Diag(gamma^i) = prod_{j<=i} Diag(alpha^j)")
nb.identity("dplr.w_rec", 108, r"\boldsymbol{w}_{[t]}^{r} &= \left(\mathbf{I} - \sum_{i=1}^{r-1} \boldsymbol{w}_{[t]}^{i} \left( \text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^{i} \right)^\top \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{b}_{[t]}^r",
            W, w_note, PR, row=2,
            what="the w recursion gives the chunk's W = E <-B (rows w^r)")
nb.identity("dplr.P_wy", 122, r"\mathbf{P}_{[t]}^{r} &= \left(\mathbf{I}- \sum_{i=1}^{r} \boldsymbol{w}_{[t]}^{i} \left( \text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^{i} \right)^\top \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^r)",
            P_def("r"),
            (I_K - summ("i", "1", "r", row(w_note, "i") @ (Dginv("i") @ row(A, "i")).T)) @ Dg("r"),
            PR, row=3, over=ROWS, what="P^r = (I - sum_i w^i (Diag(gamma^i)^{-1} a^i)^T) Diag(gamma^r)")

# ---- the two-term ansatz for S_t, from the sequence start (steps 1..t, S_0 = 0).
# Here t is a global step; the claims look at the first chunk, where the note's c_i
# (defined chunkwise by line 234) are the rows of C_[0].
T_STEPS = (("t", "1", "C"),)
FIRST = dict(blocks="first", assume=("zero_initial_state",), over=T_STEPS)
I_V = eye("Dv")                                      # Diag(eta_t) = Diag(eta^1_t) = I (line 227)


def gam_t(n):
    """Diag(gamma_t) = Diag(gamma^1_t) = prod_{i=1}^t Diag(alpha_i) (line 217).  In the
    first chunk this is Diag(gamma_[0]^t), read from Gamma (claim dplr.gamma checks it)."""
    return Dg(n)


def eps_t(n):
    """Diag(epsilon_t) = Diag(epsilon^1_t) = Diag(gamma_t)^{-1} (line 222)"""
    return inv(gam_t(n))


def S_two_term(n):
    return (summ("i", "1", n, I_V @ glob(VL, "i") @ glob(KL, "i").T @ eps_t("i") @ gam_t(n))
            + summ("i", "1", n, I_V @ row(Cm, "i") @ glob(AL, "i").T @ eps_t("i") @ gam_t(n)))


nb.forward("dplr.S_ansatz", 134, r"\mathbf{S}_t = \sum_{i=1}^{t} \text{Diag}(\boldsymbol{\eta}_t) \boldsymbol{u}_i \boldsymbol{k}_i^\top \text{Diag}(\boldsymbol{\epsilon}_i) \text{Diag}(\boldsymbol{\gamma}_t) + \sum_{i=1}^{t} \text{Diag}(\boldsymbol{\eta^1}_t) \boldsymbol{c}_i \boldsymbol{a}_i^\top \text{Diag}(\boldsymbol{\epsilon^1}_i) \text{Diag}(\boldsymbol{\gamma^1}_t)",
           Truth("state", "t"), S_two_term("t"), P, row=1,
           what="two-term ansatz for S_t (u = v, eta = I, epsilon = gamma^{-1})", **FIRST)
nb.forward("dplr.S_induction.1", 152, r"\mathbf{S}_t &= \mathbf{S}_{t-1} \text{Diag}(\boldsymbol{\alpha}_t) - \mathbf{S}_{t-1} \text{Diag}(\boldsymbol{\alpha}_t) \boldsymbol{b}_t \boldsymbol{a}_t^\top + \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           Truth("state", "t"),
           Truth("state", "t-1") @ diag(glob(AlL, "t"))
           - Truth("state", "t-1") @ diag(glob(AlL, "t")) @ glob(BL, "t") @ glob(AL, "t").T
           + glob(VL, "t") @ glob(KL, "t").T,
           P, row=1, what="the recurrence, expanded", **FIRST)
nb.forward("dplr.S_induction.2", 161, r"&= \sum_{i=1}^{t-1} \text{Diag}(\boldsymbol{\eta}_{t-1}) \boldsymbol{u}_i \boldsymbol{k}_i^\top \text{Diag}(\boldsymbol{\epsilon}_i) \text{Diag}(\boldsymbol{\gamma}_{t-1}) \text{Diag}(\boldsymbol{\alpha}_{t}) \\&+ \sum_{i=1}^{t-1} \text{Diag}(\boldsymbol{\eta^1}_{t-1}) \boldsymbol{c}_i \boldsymbol{a}_i^\top \text{Diag}(\boldsymbol{\epsilon^1}_i) \text{Diag}(\boldsymbol{\gamma^1}_{t-1}) \text{Diag}(\boldsymbol{\alpha}_{t}) \\&- \sum_{i=1}^{t-1} \text{Diag}(\boldsymbol{\eta}_{t-1}) \boldsymbol{u}_i \boldsymbol{k}_i^\top \text{Diag}(\boldsymbol{\epsilon}_i) \text{Diag}(\boldsymbol{\gamma}_{t-1}) \text{Diag}(\boldsymbol{\alpha}_{t}) \boldsymbol{b}_t \boldsymbol{a}_t^\top \\&- \sum_{i=1}^{t-1} \text{Diag}(\boldsymbol{\eta^1}_{t-1}) \boldsymbol{c}_i \boldsymbol{a}_i^\top \text{Diag}(\boldsymbol{\epsilon^1}_i) \text{Diag}(\boldsymbol{\gamma^1}_{t-1}) \text{Diag}(\boldsymbol{\alpha}_{t}) \boldsymbol{b}_t \boldsymbol{a}_t^\top \\&+ \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           Truth("state", "t"),
           summ("i", "1", "t-1", I_V @ glob(VL, "i") @ glob(KL, "i").T @ eps_t("i") @ gam_t("t-1") @ diag(glob(AlL, "t")))
           + summ("i", "1", "t-1", I_V @ row(Cm, "i") @ glob(AL, "i").T @ eps_t("i") @ gam_t("t-1") @ diag(glob(AlL, "t")))
           - summ("i", "1", "t-1", I_V @ glob(VL, "i") @ glob(KL, "i").T @ eps_t("i") @ gam_t("t-1")
                  @ diag(glob(AlL, "t")) @ glob(BL, "t") @ glob(AL, "t").T)
           - summ("i", "1", "t-1", I_V @ row(Cm, "i") @ glob(AL, "i").T @ eps_t("i") @ gam_t("t-1")
                  @ diag(glob(AlL, "t")) @ glob(BL, "t") @ glob(AL, "t").T)
           + glob(VL, "t") @ glob(KL, "t").T,
           P, row=2, what="the induction step with the ansatz at t-1", **FIRST)
nb.forward("dplr.S_induction.3", 198, r"&= \sum_{i=1}^{t} \text{Diag}(\boldsymbol{\eta}_{t}) \boldsymbol{u}_i \boldsymbol{k}_i^\top \text{Diag}(\boldsymbol{\epsilon}_i) \text{Diag}(\boldsymbol{\gamma}_{t}) \\&+ \sum_{i=1}^{t} \text{Diag}(\boldsymbol{\eta^1}_{t}) \boldsymbol{c}_i \boldsymbol{a}_i^\top \text{Diag}(\boldsymbol{\epsilon^1}_i) \text{Diag}(\boldsymbol{\gamma^1}_{t})",
           Truth("state", "t"), S_two_term("t"), P, row=7,
           what="the ansatz at t", **FIRST)

nb.identity("dplr.u", 231, r"\boldsymbol{u}_{[t]}^r &= \boldsymbol{v}_{[t]}^r",
            H_def("r"), two_term(v_local, lambda i: row(Cm, i)),
            P, row=1, over=ROWS, what="u = v: H^r in the two-term form, with the chunk's C")
nb.identity("dplr.c_rec", 234, r"\boldsymbol{c}_{[t]}^r &= - \sum_{i=1}^{r-1} \left( \boldsymbol{v}_i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{k}_{[t]}^i\right)^\top + \boldsymbol{c}_{[t]}^i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^i\right)^\top \right) \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{b}_{[t]}^r\right)",
            Cm, c_note, PR, row=2, what="the c recursion gives the chunk's C (rows c^r)")
nb.corrected("dplr.c_rec", why="v_i inside the chunk sum is the global step i; it must be the "
             "chunk's v_[t]^i (the two agree only in the first chunk)",
             rhs=c_fixed)


def _Sr1(v_i):
    return (S_PREV @ (I_K - summ("i", "1", "r", row(W, "i") @ (Dginv("i") @ row(A, "i")).T)) @ Dg("r")
            + summ("i", "1", "r", v_i("i") @ (Dginv("i") @ row(K, "i")).T @ Dg("r"))
            + summ("i", "1", "r", row(Cm, "i") @ (Dginv("i") @ row(A, "i")).T @ Dg("r")))


def _Sr2(v_i):
    return (S_PREV @ Dg("r")
            + summ("i", "1", "r", v_i("i") @ (Dginv("i") @ row(K, "i")).T @ Dg("r"))
            + summ("i", "1", "r", (row(Cm, "i") - S_PREV @ row(W, "i")) @ (Dginv("i") @ row(A, "i")).T @ Dg("r")))


def _or(v_i):
    return (S_PREV @ Dg("r") @ row(Q, "r")
            + summ("i", "1", "r", v_i("i") @ (Dginv("i") @ row(K, "i")).T @ Dg("r") @ row(Q, "r"))
            + summ("i", "1", "r", (row(Cm, "i") - S_PREV @ row(W, "i")) @ (Dginv("i") @ row(A, "i")).T
                   @ Dg("r") @ row(Q, "r")))


V_GLOBAL_WHY = ("v_i is the global step i, but the sum runs over the chunk's rows i = 1..r; "
                "it must be v_[t]^i")
nb.forward("dplr.Sr.1", 246, r"\mathbf{S}_{[t]}^r &= \mathbf{S}_{[t-1]}^C \left(\mathbf{I}- \sum_{i=1}^{r} \boldsymbol{w}_{[t]}^{i} \left( \text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^{i} \right)^\top \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \\&+ \sum_{i=1}^{r} \boldsymbol{v}_i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{k}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) + \sum_{i=1}^{r} \boldsymbol{c}_i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r)", Truth("state", "t*C+r"), _Sr1(v_global),
           P, row=1, over=ROWS, what="S^r with P^r in WY form (c_i read as c_[t]^i)")
nb.corrected("dplr.Sr.1", why=V_GLOBAL_WHY, rhs=_Sr1(v_local))
nb.forward("dplr.Sr.2", 267, r"&= \mathbf{S}_{[t-1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) + \sum_{i=1}^{r} \boldsymbol{v}_i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{k}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \\&+ \sum_{i=1}^{r} \left( \boldsymbol{c}_i - \mathbf{S}_{[t-1]}^C \boldsymbol{w}_{[t]}^{i} \right) \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r)", Truth("state", "t*C+r"), _Sr2(v_global),
           P, row=3, over=ROWS, what="S^r regrouped with c_i - S w^i")
nb.corrected("dplr.Sr.2", why=V_GLOBAL_WHY, rhs=_Sr2(v_local))
nb.forward("dplr.or", 285, r"\boldsymbol{o}_{[t]}^r &= \mathbf{S}_{[t-1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{q}_{[t]}^r + \sum_{i=1}^{r} \boldsymbol{v}_i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{k}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{q}_{[t]}^r \\&+ \sum_{i=1}^{r} \left( \boldsymbol{c}_{[t]}^i - \mathbf{S}_{[t-1]}^C \boldsymbol{w}_{[t]}^{i} \right) \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^i\right)^\top \text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{q}_{[t]}^r", Truth("out", "t*C+r"), _or(v_global),
           P, row=5, over=ROWS, what="o^r")
nb.corrected("dplr.or", why=V_GLOBAL_WHY, rhs=_or(v_local))

nb.forward("dplr.S", 331, r"\mathbf{S}_{[t]}^C &= \mathbf{S}_{[t-1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \mathbf{V}_{[t]}^\top \overrightarrow{\mathbf{K}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \left( \mathbf{C}_{[t]} - \mathbf{W}_{[t]} \mathbf{S}_{[t-1]}^{C\top} \right)^\top \overrightarrow{\mathbf{A}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C)", Truth("state", "t*C+C"),
           S_PREV @ diag(gC) + V.T @ Kr @ diag(gC) + (Cm - W @ S_PREV.T).T @ Ar @ diag(gC),
           P, row=1, what="S_[t]^C in matrix form")
nb.forward("dplr.O", 347, r"\mathbf{O}_{[t]} &= \overleftarrow{\mathbf{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C\top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right) \mathbf{V}_{[t]} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M} \right) \left( \mathbf{C}_{[t]} - \mathbf{W}_{[t]} \mathbf{S}_{[t-1]}^{C\top} \right)", Truth("outs"),
           Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V + tril(Ql @ Ar.T) @ (Cm - W @ S_PREV.T),
           P, row=2, what="O_[t] in matrix form")

nb.identity("dplr.w_rec.2", 368, r"\boldsymbol{w}_{[t]}^r &= \left( \mathbf{I} - \sum_{i=1}^{r-1} \boldsymbol{w}_{[t]}^i \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^i)^{-1} \boldsymbol{a}_{[t]}^i\right)^\top \right) \left(\text{Diag}(\boldsymbol{\gamma}_{[t]}^r) \boldsymbol{b}_{[t]}^r\right)", W, w_368, PR, row=1,
            what="the w recursion (rows of W)")
nb.identity("dplr.W_tri", 380, r"\mathbf{W}_{[t]} &= \overleftarrow{\mathbf{B}_{[t]}} - \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{W}_{[t]}", W, Bl - tril(Bl @ Ar.T, "M-1") @ W, P, row=2,
            what="W = <-B - (<-B ->A^T . M_{-1}) W")
nb.identity("dplr.W_inv", 393, r"\mathbf{W}_{[t]} &= \left( \mathbf{I} + \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \overleftarrow{\mathbf{B}_{[t]}}", W, inv(I_C + tril(Bl @ Ar.T, "M-1")) @ Bl, P, row=3,
            what="W = (I + <-B ->A^T . M_{-1})^{-1} <-B")
nb.identity("dplr.C_tri", 408, r"\mathbf{C}_{[t]} &= - \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{V}_{[t]} - \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{C}_{[t]}", Cm,
            -(tril(Bl @ Kr.T, "M-1") @ V) - tril(Bl @ Ar.T, "M-1") @ Cm, P, row=1,
            what="C = -(<-B ->K^T . M_{-1}) V - (<-B ->A^T . M_{-1}) C")
nb.identity("dplr.C_inv", 427, r"\mathbf{C}_{[t]} &= - \left( \mathbf{I} + \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{V}_{[t]}", Cm,
            -(inv(I_C + tril(Bl @ Ar.T, "M-1")) @ tril(Bl @ Kr.T, "M-1") @ V), P, row=2,
            what="C = -(I + ...)^{-1}(<-B ->K^T . M_{-1}) V")
nb.identity("dplr.E_def", 448, r"\mathbf{E}_{[t]} = \left(\mathbf{I} + \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1}", E, inv(I_C + tril(Bl @ Ar.T, "M-1")), P, row=1,
            what="E = (I + <-B ->A^T . M_{-1})^{-1}")

# ====================================================================== backward
nb.section("回顾前向传播公式")
nb.forward("dplr.recap.S", 481, r"\mathbf{S}_{[t]}^C &= \mathbf{S}_{[t-1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \mathbf{V}_{[t],1}^\top \overrightarrow{\mathbf{K}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \mathbf{V}_{[t],2}^\top \overrightarrow{\mathbf{A}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C)", Truth("state", "t*C+C"),
           S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC),
           P, row=4, what="recap: S_[t]^C with V_[t],1 and V_[t],2")
nb.forward("dplr.recap.O", 495, r"\mathbf{O}_{[t]} &= \overleftarrow{\mathbf{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C\top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right) \mathbf{V}_{[t],1} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M} \right) \mathbf{V}_{[t],2}", Truth("outs"),
           Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2,
           P, row=5, what="recap: O_[t] with V_[t],1 and V_[t],2")

nb.section(r"对于 \(\delta \mathbf{C}_{[t]}\), \(\delta \mathbf{V}_{[t],1}\), \(\delta \mathbf{W}_{[t]}\)")
nb.adjoint("dplr.dC", 535, r"\delta \mathbf{C}_{[t]} &= \delta \mathbf{V}_{[t],2}", adj(Cm), adj(V2), P, row=1, what="delta C = delta V_[t],2")
nb.adjoint("dplr.dV2", 536, r"&= \delta \mathbf{V}_{[t],2} = \overrightarrow{\mathbf{A}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) \delta \mathbf{S}_{[t]}^{C \top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M} \right)^\top \delta \mathbf{O}_{[t]}", adj(V2),
           Ar @ diag(gC) @ adj(S).T + tril(Ql @ Ar.T).T @ DO, P, row=1, what="delta V_[t],2")
nb.adjoint("dplr.dV1", 550, r"\delta \mathbf{V}_{[t],1} & = \overrightarrow{\mathbf{K}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) \delta \mathbf{S}_{[t]}^{C \top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right)^\top \delta \mathbf{O}_{[t]}", adj(V1),
           Kr @ diag(gC) @ adj(S).T + tril(Ql @ Kr.T).T @ DO, P, row=2, what="delta V_[t],1")
nb.adjoint("dplr.dW", 564, r"\delta \mathbf{W}_{[t]} &= - \delta \mathbf{C}_{[t]} \mathbf{S}_{[t]}^{C}", adj(W), -(adj(Cm) @ S), P, row=3, what="delta W")
nb.corrected("dplr.dW", why="V_[t],2 = C - W S_[t-1]^{C T}, so delta W = -delta C S_[t-1]^C "
             "(the state before the chunk), not S_[t]^C",
             rhs=-(adj(Cm) @ S_PREV))

nb.section(r"对于 \(\delta \mathbf{E}_{[t]}\), \(\delta \mathbf{F}_{[t]}\)")
nb.adjoint("dplr.dE", 570, r"\delta \mathbf{E}_{[t]} &= - \delta \mathbf{C}_{[t]} \mathbf{V}_{[t]}^\top \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right)^\top + \delta \mathbf{W}_{[t]} \overleftarrow{\mathbf{B}_{[t]}}^\top", adj(E),
           -(adj(Cm) @ V.T @ tril(Bl @ Kr.T, "M-1").T) + adj(W) @ Bl.T, P, row=1, what="delta E")
nb.adjoint("dplr.dF", 583, r"\delta \mathbf{F}_{[t]} &= - \mathbf{E}_{[t]}^\top \delta \mathbf{E}_{[t]} \mathbf{E}_{[t]}^\top", adj(F), -(E.T @ adj(E) @ E.T), P, row=2, what="delta F")

nb.section(r"对于 \(\delta \mathbf{S}_{[t]}^C\)")
nb.adjoint("dplr.dS_prev", 589, r"\delta \mathbf{S}_{[t-1]}^{C} &= -\delta \mathbf{C}_{[t]}^\top \mathbf{W}_{[t]} + \delta \mathbf{S}_{[t]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \delta \mathbf{O}_{[t]}^\top \overleftarrow{\mathbf{Q}_{[t]}}", adj(S_PREV),
           -(adj(Cm).T @ W) + adj(S) @ diag(gC) + DO.T @ Ql, P, row=1, what="delta S_[t-1]^C")
nb.adjoint("dplr.dS", 601, r"\delta \mathbf{S}_{[t]}^{C} &= \delta \mathbf{S}_{[t+1]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t+1]}^C) + \delta \mathbf{O}_{[t+1]}^\top \overleftarrow{\mathbf{Q}_{[t+1]}} -\delta \mathbf{C}_{[t+1]}^\top \mathbf{W}_{[t+1]}", adj(S),
           shift(adj(S)) @ diag(shift(gC)) + shift(DO).T @ shift(Ql) - shift(adj(Cm)).T @ shift(W),
           P, row=2, blocks="not_last", what="delta S_[t]^C, backward recursion")

nb.section(r"对于 \(\delta \mathbf{Q}_{[t]}\)")
nb.adjoint("dplr.dQl", 612, r"\delta \overleftarrow{\mathbf{Q}_{[t]}} &= \delta \mathbf{O}_{[t]} \mathbf{S}_{[t-1]}^C + \left(\delta \mathbf{O}_{[t]} \mathbf{V}_{[t],1}^\top \odot \mathbf{M}\right) \overrightarrow{\mathbf{K}_{[t]}} + \left(\delta \mathbf{O}_{[t]} \mathbf{V}_{[t],2}^\top \odot \mathbf{M}\right) \overrightarrow{\mathbf{A}_{[t]}}", adj(Ql),
           DO @ S_PREV + tril(DO @ V1.T) @ Kr + tril(DO @ V2.T) @ Ar, P, row=1, what="delta <-Q")
nb.adjoint("dplr.dQ", 624, r"\delta \mathbf{Q}_{[t]} &= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{\Gamma}_{[t]}", adj(Q), adj(Ql) * Gamma, P, row=2, what="delta Q")

nb.section(r"对于 \(\delta \mathbf{B}_{[t]}\)")
nb.adjoint("dplr.dBl", 631, r"\delta \overleftarrow{\mathbf{B}_{[t]}} &= \mathbf{E}_{[t]}^\top \delta \mathbf{W}_{[t]} - \left( \mathbf{E}_{[t]}^\top \delta \mathbf{C}_{[t]} \mathbf{V}_{[t]}^\top \odot \mathbf{M}_{-1} \right) \overrightarrow{\mathbf{K}_{[t]}} + \left( \delta \mathbf{F}_{[t]} \odot \mathbf{M}_{-1} \right) \overrightarrow{\mathbf{A}_{[t]}}", adj(Bl),
           E.T @ adj(W) - tril(E.T @ adj(Cm) @ V.T, "M-1") @ Kr + tril(adj(F), "M-1") @ Ar,
           P, row=1, what="delta <-B")
nb.adjoint("dplr.dB", 651, r"\delta \mathbf{B}_{[t]} &= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{\Gamma}_{[t]}", adj(B), adj(Ql) * Gamma, P, row=2, what="delta B")
nb.corrected("dplr.dB", why="delta B is delta <-B (not delta <-Q) times Gamma",
             rhs=adj(Bl) * Gamma)

nb.section(r"对于 \(\delta \mathbf{K}_{[t]}\)")
nb.adjoint("dplr.dKr", 658, r"\delta \overrightarrow{\mathbf{K}_{[t]}} &= \left(\delta \mathbf{O}_{[t]} \mathbf{V}_{[t],1}^\top \odot \mathbf{M}\right)^\top \overleftarrow{\mathbf{Q}_{[t]}} - \left( \mathbf{E}_{[t]}^\top \delta \mathbf{C}_{[t]} \mathbf{V}_{[t]}^\top \odot \mathbf{M}_{-1} \right)^\top \overleftarrow{\mathbf{B}_{[t]}}", adj(Kr),
           tril(DO @ V1.T).T @ Ql - tril(E.T @ adj(Cm) @ V.T, "M-1").T @ Bl, P, row=1, what="delta ->K")
nb.corrected("dplr.dKr", why="->K also enters S_[t]^C through V_[t],1^T ->K Diag(gamma^C); the term "
             "V_[t],1 delta S_[t]^C Diag(gamma^C) is missing",
             rhs=tril(DO @ V1.T).T @ Ql - tril(E.T @ adj(Cm) @ V.T, "M-1").T @ Bl + V1 @ adj(S) @ diag(gC))
nb.adjoint("dplr.dK", 673, r"\delta \mathbf{K}_{[t]} &= \delta \overrightarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]}", adj(K), adj(Kr) / Gamma, P, row=2, what="delta K")

nb.section(r"对于 \(\delta \mathbf{A}_{[t]}\)")
nb.adjoint("dplr.dAr", 680, r"\delta \overrightarrow{\mathbf{A}_{[t]}} &= \left(\delta \mathbf{O}_{[t]} \mathbf{V}_{[t],2}^\top \odot \mathbf{M}\right)^\top \overleftarrow{\mathbf{Q}_{[t]}} + \left( \delta \mathbf{F}_{[t]} \odot \mathbf{M}_{-1} \right)^\top \overleftarrow{\mathbf{B}_{[t]}}", adj(Ar),
           tril(DO @ V2.T).T @ Ql + tril(adj(F), "M-1").T @ Bl, P, row=1, what="delta ->A")
nb.corrected("dplr.dAr", why="->A also enters S_[t]^C through V_[t],2^T ->A Diag(gamma^C); the term "
             "V_[t],2 delta S_[t]^C Diag(gamma^C) is missing",
             rhs=tril(DO @ V2.T).T @ Ql + tril(adj(F), "M-1").T @ Bl + V2 @ adj(S) @ diag(gC))
nb.adjoint("dplr.dA", 693, r"\delta \mathbf{A}_{[t]} &= \delta \overrightarrow{\mathbf{A}_{[t]}} \oslash \mathbf{\Gamma}_{[t]}", adj(A), adj(Ar) / Gamma, P, row=2, what="delta A")

nb.section(r"对于 \(\delta \mathbf{V}_{[t]}\)")
nb.adjoint("dplr.dV", 700, r"\delta \mathbf{V}_{[t]} = \delta \mathbf{V}_{[t],1} - \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right)^\top \mathbf{E}_{[t]} ^\top \delta \mathbf{C}_{[t]}", adj(V),
           adj(V1) - tril(Bl @ Kr.T, "M-1").T @ E.T @ adj(Cm), P, row=1, what="delta V")

nb.section(r"对于 \(\delta \mathbf{\Gamma}_{[t]}\)")
nb.adjoint("dplr.dgC", 715, r"\delta \boldsymbol{\gamma}_{[t]}^C &= \text{diag}\left( \left( \mathbf{S}_{[t-1]}^C + \mathbf{V}_{[t],1}^\top \overrightarrow{\mathbf{K}_{[t]}} + \mathbf{V}_{[t],2}^\top \overrightarrow{\mathbf{A}_{[t]}} \right)^\top \delta \mathbf{S}_{[t]}^C \right)", adj(gC),
           DiagV((S_PREV + V1.T @ Kr + V2.T @ Ar).T @ adj(S)), P, row=1, what="delta gamma^C")
nb.adjoint("dplr.dgC.2", 729, r"= \left(\boldsymbol{\gamma}_{[t]}^{C}\right)^{-1} \odot \text{diag}\left( \mathbf{S}_{[t]}^{C\top} \delta \mathbf{S}_{[t]}^C \right)", adj(gC),
           (Ones("Dk", "1") / gC) * DiagV(S.T @ adj(S)), P, row=1,
           what="delta gamma^C via S_[t]^C ((gamma^C)^{-1} read elementwise)")
DGAMMA_WO = (adj(Ql) * Q + adj(Bl) * B - adj(Kr) * K / Gamma / Gamma - adj(Ar) * A / Gamma / Gamma)
nb.adjoint("dplr.dGamma", 738, r"\left.\delta \mathbf{\Gamma}_{[t]}\right|_{\text{w/o extra} \boldsymbol{\gamma}_{[t]}^C} &= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{Q}_{[t]} + \delta \overleftarrow{\mathbf{B}_{[t]}} \odot \mathbf{B}_{[t]} \\&- \delta \overrightarrow{\mathbf{K}_{[t]}} \odot \mathbf{K}_{[t]} \oslash \mathbf{\Gamma}_{[t]} \oslash \mathbf{\Gamma}_{[t]} - \delta \overrightarrow{\mathbf{A}_{[t]}} \odot \mathbf{A}_{[t]} \oslash \mathbf{\Gamma}_{[t]} \oslash \mathbf{\Gamma}_{[t]}", adj(Gamma, excl=("gC",)), DGAMMA_WO,
           P, row=1, what="delta Gamma without the extra gamma^C path")
DLOG_BODY = adj(Q) * Q + adj(B) * B - adj(K) * K - adj(A) * A
nb.identity("dplr.dlogGamma", 750, r"\delta \log \mathbf{\Gamma}_{[t]} &= \delta \mathbf{\Gamma}_{[t]} \odot \mathbf{\Gamma}_{[t]} \\&= \delta \mathbf{Q}_{[t]} \odot \mathbf{Q}_{[t]} + \delta \mathbf{B}_{[t]} \odot \mathbf{B}_{[t]} - \delta \mathbf{K}_{[t]} \odot \mathbf{K}_{[t]} - \delta \mathbf{A}_{[t]} \odot \mathbf{A}_{[t]} \\&+ [0,0,...,\text{diag}\left( \mathbf{S}_{[t]}^{C\top} \delta \mathbf{S}_{[t]}^C \right)]", adj(Gamma) * Gamma,
            DLOG_BODY + PlaceLast(DiagV(S.T @ adj(S))).T,
            P, row=1, what="delta log Gamma (the note's [0,...,diag(.)] has no transpose)")
nb.corrected("dplr.dlogGamma", why="[0,0,...,diag(S^T dS)] is a row of Dk-vectors (Dk x C); like "
             "Gamma = [gamma^1,...,gamma^C]^T it needs a transpose to be added to C x Dk tiles",
             rhs=DLOG_BODY + PlaceLast(DiagV(S.T @ adj(S))))
nb.identity("dplr.dlogAlpha", 0, "", adj(Al) * Al,
            RevCumSum(DLOG_BODY + PlaceLast(DiagV(S.T @ adj(S)))), nb.d.claims[-1].program,
            what="derived (not in the note): delta log alpha is the suffix sum of delta log Gamma "
                 "over the chunk (Gamma = cumprod(alpha))")

# ====================================================================== KDA
nb.section("与KDA的关系")
# DPLR over the KDA recurrence with a = k, b = beta k, v = beta v' (V is KDA's v').
KDA = D.add_program(Program("dplr_kda_chunk", "chunk", _gates() + [
    ("Kl", K * Gamma),
    ("A", K),
    ("B", diag(Beta) @ K),
    ("Vb", diag(Beta) @ V),
    ("Ar", tile("A", "C", "Dk") / Gamma),
    ("Bl", tile("B", "C", "Dk") * Gamma),
    ("F", I_C + tril(Bl @ Ar.T, "M-1")),
    ("E", inv(F)),
    ("W", E @ Bl),
    ("C", -(E @ tril(Bl @ Kr.T, "M-1") @ Vb)),
    ("V1", Vb),
    ("V2", Cm - W @ S_PREV.T),
    ("S", S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC)),
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2),
], description="note 000, the DPLR chunk form under a = k, b = beta k, v = beta v' (KDA)"),
    recurrence="kda")
PK = "dplr_kda_chunk"
bK = lambda i: scal(row(Beta, i), row(K, i))      # noqa: E731   b_t = beta_t k_t
nb.forward("dplr.kda.recurrence", 780, r"\mathbf{S}_t &= \mathbf{S}_{t-1} \text{Diag}(\boldsymbol{\alpha}_t) (\mathbf{I} - \boldsymbol{b}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top", Truth("state", "t*C+r"),
           Truth("state", "t*C+r-1") @ diag(row(Al, "r")) @ (I_K - bK("r") @ row(K, "r").T)
           + scal(row(Beta, "r"), row(V, "r")) @ row(K, "r").T,
           PK, row=2, over=ROWS, what="KDA is DPLR with a = k, b = beta k, v = beta v' (line 773)")
KK = tril(Kl @ Kr.T, "M-1")
nb.identity("dplr.kda.E", 789, r"\mathbf{E}_{[t]} &= \left(\mathbf{I} + \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} = \left( \mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1}", inv(I_C + tril(Bl @ Ar.T, "M-1")),
            inv(I_C + diag(Beta) @ KK), PK, row=1, what="E in KDA terms")
nb.identity("dplr.kda.C", 799, r"\mathbf{C}_{[t]} &= - \mathbf{E}_{[t]} \left( \overleftarrow{\mathbf{B}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{V}_{[t]} = - \mathbf{E}_{[t]} \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{V}_{[t]}", -(E @ tril(Bl @ Kr.T, "M-1") @ Vb),
            -(E @ diag(Beta) @ KK @ Vb), PK, row=2, what="C in KDA terms")
nb.identity("dplr.kda.U", 820, r"\mathbf{U}_{[t]} &:= \mathbf{V}_{[t]} + \mathbf{C}_{[t]} = \left( \mathbf{I} - \mathbf{E}_{[t]} \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right) \mathbf{V}_{[t]}", Vb + Cm, (I_C - E @ diag(Beta) @ KK) @ Vb,
            PK, row=3, what="U := V + C")
nb.identity("dplr.kda.U.2", 835, r"&= \mathbf{E}_{[t]} \left( \mathbf{E}_{[t]}^{-1} - \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right) \mathbf{V}_{[t]}", Vb + Cm, E @ (inv(E) - diag(Beta) @ KK) @ Vb,
            PK, row=4, what="U = E(E^{-1} - Diag(beta)(...))V")
nb.identity("dplr.kda.U.3", 849, r"= \mathbf{E}_{[t]} \mathbf{V}_{[t]}", Vb + Cm, E @ Vb, PK, row=4, what="U = E V")
nb.identity("dplr.kda.Vnew", 853, r"\mathbf{V}_{[t],new} &:= \mathbf{V}_{[t],1} + \mathbf{V}_{[t],2} = \mathbf{V}_{[t]} + \mathbf{C}_{[t]} - \mathbf{W}_{[t]} \mathbf{S}_{[t-1]}^{C \top}", V1 + V2, Vb + Cm - W @ S_PREV.T,
            PK, row=5, what="V_new := V_1 + V_2 = V + C - W S^T")
nb.identity("dplr.kda.Vnew.2", 856, r"= \mathbf{U}_{[t]} - \mathbf{W}_{[t]} \mathbf{S}_{[t-1]}^{C \top}", V1 + V2, (Vb + Cm) - W @ S_PREV.T,
            PK, row=5, what="V_new = U - W S^T")

# ====================================================================== no external gate
nb.section("不包含外挂Gate的DPLR")
DN = lambda i: row(Dd, i)                            # noqa: E731


def _nogate_program(name, low):
    """The recap of lines 877-952; ``low`` is the left factor of the strictly lower
    products in F and C (the note writes D_[t])."""
    return D.add_program(Program(name, "chunk", _gates() + [
        ("Ar", A / Gamma),
        ("B", Dd / Al),                                   # b_t = Diag(alpha_t)^{-1} d_t (line 861)
        ("Bl", B * Gamma),
        ("F", I_C + tril(low @ Ar.T, "M-1")),
        ("E", inv(F)),
        ("W", E @ Bl),
        ("C", -(E @ tril(low @ Kr.T, "M-1") @ V)),
    ] + _state_and_output(), description=f"note 000, DPLR without the external gate ({name})"),
        recurrence="dplr_nogate")


_nogate_program("dplr_nogate_chunk", Dd)           # as written: D_[t]
_nogate_program("dplr_nogate_chunk_fixed", Bl)     # with <-B_[t]
PN, PNF = "dplr_nogate_chunk", "dplr_nogate_chunk_fixed"

nb.forward("dplr.nogate.recurrence", 864, r"\mathbf{S}_t &= \mathbf{S}_{t-1} \text{Diag}(\boldsymbol{\alpha}_t) (\mathbf{I} - \boldsymbol{b}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top", Truth("state", "t*C+r"),
           Truth("state", "t*C+r-1") @ diag(row(Al, "r")) @ (I_K - inv(diag(row(Al, "r"))) @ DN("r") @ row(A, "r").T)
           + row(V, "r") @ row(K, "r").T,
           PNF, row=2, over=ROWS, what="with b_t = Diag(alpha_t)^{-1} d_t (line 861)")
nb.forward("dplr.nogate.recurrence.2", 870, r"= \mathbf{S}_{t-1} (\text{Diag}(\boldsymbol{\alpha}_t) - \boldsymbol{d}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top", Truth("state", "t*C+r"),
           Truth("state", "t*C+r-1") @ (diag(row(Al, "r")) - DN("r") @ row(A, "r").T)
           + row(V, "r") @ row(K, "r").T,
           PNF, row=2, over=ROWS, what="the gate absorbed: S(Diag(alpha) - d a^T) + v k^T")

NOGATE_WHY = ("with b_t = Diag(alpha_t)^{-1} d_t the strictly lower products need <-B_[t] = B_[t] . Gamma_[t] "
              "(row r is gamma^{r-1} . d^r), not D_[t]")
nb.identity("dplr.nogate.F", 877, r"\mathbf{F}_{[t]} &= \mathbf{I} + \left(\mathbf{D}_{[t]} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M}_{-1} \right)", F, I_C + tril(Dd @ Ar.T, "M-1"), PNF, row=1,
            what="F (lhs: the F that makes the chunk form exact)")
nb.corrected("dplr.nogate.F", why=NOGATE_WHY, rhs=I_C + tril(Bl @ Ar.T, "M-1"))
nb.identity("dplr.nogate.W", 884, r"\mathbf{W}_{[t]} &= \mathbf{E}_{[t]} \overleftarrow{\mathbf{B}_{[t]}}", W, E @ Bl, PNF, row=2, what="W = E <-B")
nb.identity("dplr.nogate.C", 886, r"\mathbf{C}_{[t]} = - \mathbf{E}_{[t]} \left( \mathbf{D}_{[t]} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{V}_{[t]}", Cm, -(E @ tril(Dd @ Kr.T, "M-1") @ V), PNF, row=2,
            what="C (lhs: the C that makes the chunk form exact)")
nb.corrected("dplr.nogate.C", why=NOGATE_WHY, rhs=-(E @ tril(Bl @ Kr.T, "M-1") @ V))
nb.forward("dplr.nogate.S", 902, r"\mathbf{S}_{[t]}^C &= \mathbf{S}_{[t-1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \mathbf{V}_{[t],1}^\top \overrightarrow{\mathbf{K}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C) + \mathbf{V}_{[t],2}^\top \overrightarrow{\mathbf{A}_{[t]}} \text{Diag}(\boldsymbol{\gamma}_{[t]}^C)", Truth("state", "t*C+C"),
           S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC),
           PN, row=4, what="S_[t]^C with the recap's F and C (D_[t])")
nb.corrected("dplr.nogate.S", why=NOGATE_WHY + " in F and C", program=PNF,
             rhs=S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC))
nb.forward("dplr.nogate.O", 916, r"\mathbf{O}_{[t]} &= \overleftarrow{\mathbf{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C\top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right) \mathbf{V}_{[t],1} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{A}_{[t]}}^\top \odot \mathbf{M} \right) \mathbf{V}_{[t],2}", Truth("outs"),
           Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2,
           PN, row=5, what="O_[t] with the recap's F and C (D_[t])")
nb.corrected("dplr.nogate.O", why=NOGATE_WHY + " in F and C", program=PNF,
             rhs=Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2)

# ====================================================================== FLA's convention
# FLA writes DPLR as S_t = S_{t-1}(Diag(alpha_t) + a_t b_t^T) + v_t k_t^T.  That is the
# no-gate section's S_{t-1}(Diag(alpha_t) - d_t a_t^T) with d_t = -a_t and the note's
# a_t = b_t, so ->A_[t] = B_[t] / Gamma_[t] and <-B_[t] = -A_[t] . Gamma_[t] / alpha_[t]
# (row r: -gamma^{r-1} . a^r).  The generated DPLR kernel is printed from this program.
PF = "dplr_fla_chunk"
D.add_program(Program(PF, "chunk", _gates() + [
    ("Ar", B / Gamma),
    ("Bl", -(A * (Gamma / Al))),
    ("F", I_C + tril(Bl @ Ar.T, "M-1")),
    ("E", inv(F)),
    ("W", E @ Bl),
    ("C", -(E @ tril(Bl @ Kr.T, "M-1") @ V)),
] + _state_and_output(), description="the corrected no-gate form in FLA's (a, b) parametrisation"),
    recurrence="dplr_fla")
FLA_WHAT = "derived: FLA's S(Diag(alpha) + a b^T) + v k^T is the no-gate form with d = -a, a_note = b"
nb.forward("dplr.fla.S", 902, "", Truth("state", "t*C+C"),
           S_PREV @ diag(gC) + V1.T @ Kr @ diag(gC) + V2.T @ Ar @ diag(gC), PF, row=4, what=FLA_WHAT)
nb.forward("dplr.fla.O", 916, "", Truth("outs"),
           Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V1 + tril(Ql @ Ar.T) @ V2, PF, row=5, what=FLA_WHAT)

# The backward of FLA's convention (derived, not in the note): the shared chunk structure
# (V1, V2, C, W, E, F, S, O) has the note's adjoints with its corrections applied; only
# the inputs differ.  FLA's b enters as ->A = B / Gamma, FLA's a as <-B = -(A . Gamma / alpha),
# whose Gamma / alpha (= gamma^{r-1}) does not depend on alpha_r: so delta log alpha is the
# suffix sum of delta log Gamma minus delta <-B . <-B (= delta A . A).
FLA_BWD = "derived (FLA's convention): "


def fla_adj(id, lhs, rhs, what, kind="adjoint", **kw):
    getattr(nb, kind)("dplr.fla." + id, 0, "", lhs, rhs, PF, what=FLA_BWD + what, **kw)


fla_adj("dV2", adj(V2), Ar @ diag(gC) @ adj(S).T + tril(Ql @ Ar.T).T @ DO, "delta V_[t],2, as dplr.dV2")
fla_adj("dC", adj(Cm), adj(V2), "delta C = delta V_[t],2, as dplr.dC")
fla_adj("dV1", adj(V1), Kr @ diag(gC) @ adj(S).T + tril(Ql @ Kr.T).T @ DO, "delta V_[t],1, as dplr.dV1")
fla_adj("dW", adj(W), -(adj(Cm) @ S_PREV), "delta W, as dplr.dW corrected")
fla_adj("dE", adj(E), -(adj(Cm) @ V.T @ tril(Bl @ Kr.T, "M-1").T) + adj(W) @ Bl.T, "delta E, as dplr.dE")
fla_adj("dF", adj(F), -(E.T @ adj(E) @ E.T), "delta F, as dplr.dF")
fla_adj("dS_prev", adj(S_PREV), -(adj(Cm).T @ W) + adj(S) @ diag(gC) + DO.T @ Ql,
        "delta S_[t-1]^C, as dplr.dS_prev")
fla_adj("dS", adj(S), shift(adj(S)) @ diag(shift(gC)) + shift(DO).T @ shift(Ql) - shift(adj(Cm)).T @ shift(W),
        "delta S_[t]^C, backward recursion, as dplr.dS", blocks="not_last")
fla_adj("dQl", adj(Ql), DO @ S_PREV + tril(DO @ V1.T) @ Kr + tril(DO @ V2.T) @ Ar, "delta <-Q, as dplr.dQl")
fla_adj("dQ", adj(Q), adj(Ql) * Gamma, "delta Q = delta <-Q . Gamma")
fla_adj("dBl", adj(Bl), E.T @ adj(W) - tril(E.T @ adj(Cm) @ V.T, "M-1") @ Kr + tril(adj(F), "M-1") @ Ar,
        "delta <-B, as dplr.dBl")
fla_adj("dKr", adj(Kr), tril(DO @ V1.T).T @ Ql - tril(E.T @ adj(Cm) @ V.T, "M-1").T @ Bl + V1 @ adj(S) @ diag(gC),
        "delta ->K, as dplr.dKr corrected")
fla_adj("dK", adj(K), adj(Kr) / Gamma, "delta K = delta ->K (/) Gamma")
fla_adj("dAr", adj(Ar), tril(DO @ V2.T).T @ Ql + tril(adj(F), "M-1").T @ Bl + V2 @ adj(S) @ diag(gC),
        "delta ->A, as dplr.dAr corrected")
fla_adj("db", adj(B), adj(Ar) / Gamma, "delta b = delta ->A (/) Gamma (FLA's b is the note's a)")
fla_adj("da", adj(A), -(adj(Bl) * (Gamma / Al)), "delta a = -delta <-B . Gamma / alpha")
fla_adj("dV", adj(V), adj(V1) - tril(Bl @ Kr.T, "M-1").T @ E.T @ adj(Cm), "delta V, as dplr.dV")
FLA_DLOG_GAMMA = adj(Q) * Q - adj(K) * K - adj(B) * B + adj(A) * A + PlaceLast(DiagV(S.T @ adj(S)))
fla_adj("dlogGamma", adj(Gamma) * Gamma, FLA_DLOG_GAMMA,
        "delta log Gamma = dQ.Q - dK.K - db.b + da.a + [0, ..., diag(S^T dS)]", kind="identity")
# printed form: da.a enters delta log Gamma and leaves again at its own row; summing it
# apart, (suffix sum of da.a) - da.a, is exact at a chunk's last row instead of
# cancelling against the other terms (the CPU property caught 1.04e-3 at T = 1)
fla_adj("dlogalpha", adj(Al) * Al,
        RevCumSum(FLA_DLOG_GAMMA - adj(A) * A) + (RevCumSum(adj(A) * A) - adj(A) * A),
        "delta log alpha (the kernels' gate gradient) = suffix sums of delta log Gamma - da.a, "
        "with da.a summed apart", kind="identity")
# grouped for rounding as well: diag(S^T dS) = gamma^C . diag(S_[t-1]^T dS) + 1^T (E1 + E2),
# E1 = (V1 dS) . (->K Diag(gamma^C)) and E2 = (V2 dS) . (->A Diag(gamma^C)) the state parts of
# dK . K and db . b, so the last row adds back exactly what the rows subtract
E_STATE = (V1 @ adj(S)) * (Kr @ diag(gC)) + (V2 @ adj(S)) * (Ar @ diag(gC))
FLA_DLOG_GAMMA_G = (adj(Q) * Q - adj(K) * K - adj(B) * B + adj(A) * A
                    + PlaceLast(DiagV(S_PREV.T @ adj(S)) * gC + E_STATE.T @ Ones("C", "1")))
fla_adj("dlogalpha.grouped", adj(Al) * Al,
        RevCumSum(FLA_DLOG_GAMMA_G - adj(A) * A) + (RevCumSum(adj(A) * A) - adj(A) * A),
        "delta log alpha, the state term of diag(S^T dS) grouped with the rows' state parts", kind="identity")

# the kernel printed from this derivation (chunkproof gen; derivations/kernel.py)
kernel(D, "chunk_dplr_delta_rule", PF, outputs="dplr.fla.O", state="dplr.fla.S",
       args=dict(q="Q", k="K", v="V", a="A", b="B", gk=log_of("Alpha")),
       backward=dict(dS="dplr.fla.dS", dS_prev="dplr.fla.dS_prev",
                     grads=dict(q="dplr.fla.dQ", k="dplr.fla.dK", v="dplr.fla.dV", a="dplr.fla.da",
                                b="dplr.fla.db", gk="dplr.fla.dlogalpha.grouped"),
                     inner=["dplr.fla." + n for n in ("dV2", "dC", "dV1", "dW", "dE", "dF", "dQl", "dBl",
                                                      "dKr", "dAr")]),
       doc="S_t = S_{t-1} (Diag(exp gk_t) + a_t b_t^T) + v_t k_t^T,  o_t = S_t q_t")
