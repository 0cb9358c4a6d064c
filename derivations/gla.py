"""Note 003 (Gated Linear Attention, 阅读笔记), encoded claim by claim.

Every display of the note is one physical line of the note file; ``line`` is
that line and ``row`` the row of the aligned display, counting the non-empty
rows between ``\\\\`` separators (``\\\\ \\\\`` is one separator, the note's
blank spacer row is not a row); ``row=0`` marks a display with a single row.
Where one row holds two equations (``..., \\quad ...``) or a chain
``a = b = c``, each equation is its own claim and ``latex`` is the part of
the row it covers.

Ground truth is ``recurrences.gla()`` (S_t = S_{t-1} Diag(alpha_t) + v_t k_t^T,
o_t = S_t q_t); section 3.3 is checked against ``linear_attention()`` and
section 6.1 runs the note's own step form S_t = G_t odot S_{t-1} + v_t k_t^T.

Literal claims that do not hold (each has a ``.corrected`` twin that holds):
  gla.la.O                §3.3  Q_[t] S_[t] is C x Dk times Dv x Dk (ill-formed)
  gla.Kr_matrix           §5.2  ->K = Q (/) Gamma, should be K (/) Gamma
  gla.P_case2             §5.3  P = <-Q ->K^T claimed for t != tau, true only for t > tau
"""
from chunkproof.derivations.kernel import kernel, log_of
from chunkproof.derivations import ir
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, DO_STEP, S_PREV, Derivation, Notebook, Program, adj, diag,
                             prod, row, shift, summ, tile, tril)
from chunkproof.derivations.ir import CumProd, LastRow, Truth, Var
from chunkproof.derivations.tiles import Gamma, K, Kr, Kseq, Q, Ql, S, V, Vseq, gC

NOTE = "003_c008d497ea0f70e6.txt"

D = Derivation("gla", "Gated Linear Attention: chunkwise forward and backward", NOTE)
D.add_recurrence(R.gla(), default=True)
D.add_recurrence(R.linear_attention())

# ------------------------------------------------------------------ tiles
# chunk tiles (C rows = the steps tC+1..tC+C of chunk t)
A = tile("Alpha", "C", "Dk", r"\mathbf{A}_{[t]}")
# whole-sequence tiles, for the note's global-index sums and products
Aseq = tile("Alpha", "L", "Dk", r"\mathbf{A}")
# named definitions of the chunk program
KrS = tile("KrS", "C", "Dk", r"\overrightarrow{\mathbf{K}_{[t]}}", arrow=">", base="K")

# ------------------------------------------------------------------ programs
# The chunk forward of §5.2 / §6.3 (the "回顾前向的重要结论" recap, line 170).
GLA_CHUNK = Program("gla_chunk", "chunk", [
    ("Gamma", CumProd(A)),                                  # Γ_[t], rows γ^1..γ^C
    ("gC", LastRow(Gamma)),                                 # γ_[t]^C
    ("Ql", Q * Gamma),                                      # ←Q = Q ⊙ Γ
    ("Kr", K / Gamma),                                      # →K = K ⊘ Γ
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V),
    ("S", (S_PREV + V.T @ Kr) @ diag(gC)),
], description="GLA chunk forward, note 003 §5.2 (line 94, 98) = §6.3 (line 170)")
D.add_program(GLA_CHUNK, recurrence="gla")

# The same forward with →K written twice, once for its use in O and once for
# its use in S_[t]^C, so that "δK|from S" (line 202, row 4) is the adjoint of K
# through the copy used by S only (the engine's via= names direct consumers).
GLA_CHUNK_KSPLIT = Program("gla_chunk_ksplit", "chunk", [
    ("Gamma", CumProd(A)),
    ("gC", LastRow(Gamma)),
    ("Ql", Q * Gamma),
    ("Kr", K / Gamma),                                      # →K as used by O
    ("KrS", K / Gamma),                                     # →K as used by S_[t]^C
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V),
    ("S", (S_PREV + V.T @ KrS) @ diag(gC)),
], description="gla_chunk with ->K duplicated per consumer (for dK|from S)")
D.add_program(GLA_CHUNK_KSPLIT, recurrence="gla")

# §3.3: plain linear attention, chunked.
LA_CHUNK = Program("la_chunk", "chunk", [
    ("O", Q @ S_PREV.T + tril(Q @ K.T) @ V),
    ("S", S_PREV + V.T @ K),
], description="linear attention chunk forward (corrected §3.3)")
D.add_program(LA_CHUNK, recurrence="linear_attention")

# §6.1: the note's step form with the gate as a Hadamard factor G_t = 1 α_tᵀ.
D.add_program(R.gla_hadamard_step(), recurrence="gla")
# step leaves (column vectors) and step definitions of gla_G_step
q, k, v, alpha = R.q, R.k, R.v, R.alpha
G = Var("G", "Dv", "Dk", r"\mathbf{G}_t")
S_t = Var("S", "Dv", "Dk", r"\mathbf{S}_t")
O_t = Var("O", "Dv", "1", r"\boldsymbol{o}_t")
S_tm1 = R.S_PREV                                            # S_{t-1}, name "S_prev"
ONES_V = ir.Ones("Dv", "1")


# ------------------------------------------------------------------ note's row-level objects
def gamma_def(r):
    """γ_[t]^r = ∏_{i=tC+1}^{tC+r} α_i (line 82 row 1), as diag(∏ Diag(α_i))."""
    return ir.DiagV(prod("i", "t*C+1", f"t*C+{r}", diag(row(Aseq, "i", glob=True))))


def gamma(r):
    """γ_[t]^r read from the program's Γ (tied to gamma_def by gla.gamma_def)."""
    return row(Gamma, r)


def H(r):
    """H_[t]^r = Σ_{i=1}^r (v^i k^{i⊤}) Diag(γ^r / γ^i), line 82 row 2."""
    return summ("i", "1", r, (row(V, "i") @ row(K, "i").T) @ diag(gamma(r) / gamma("i")))


def H_second(r):
    """H's second form, line 86 row 3: Σ_{i=1}^r v^i (k^i / γ^i)ᵀ Diag(γ^r)."""
    return summ("i", "1", r, row(V, "i") @ (row(K, "i") / gamma("i")).T @ diag(gamma(r)))


MASK_C = tril(ir.Ones("C", "C"))                            # M (lower, with diagonal)


def P_def(bt, bs):
    """P_[t][τ] = ←Q_[t] (→K_[τ])ᵀ ⊙ M_[t][τ] for sub-chunks t = bt, τ = bs (0-based)."""
    return ir.SubBlock(Ql, bt) @ ir.SubBlock(Kr, bs).T * ir.SubBlock(MASK_C, bt, bs)


def expm(x):
    return ir.Exp(x)


def logm(x):
    return ir.Log(x)


ROWS = (("r", "1", "C"),)
SUBCHUNKS = "C//T-1"

nb = Notebook(D, NOTE)

# ================================================================== §3.3
nb.section("3.3 分块线性注意力（Linear Attention + Chunkwise）")

nb.forward("gla.la.S", 43, r"\mathbf{S}_{[t]}^{C} &= \mathbf{S}_{[t-1]}^{C} + \sum_{i=tC+1}^{tC+C} \boldsymbol{v}_i \boldsymbol{k}_i^\top \quad \in \mathbb{R}^{d \times d}",
           Truth("state", "t*C+C"),
           S_PREV + summ("i", "t*C+1", "t*C+C", row(Vseq, "i", glob=True) @ row(Kseq, "i", glob=True).T),
           "la_chunk", row=1, what="linear-attention state after chunk t (global-index sum)")

nb.forward("gla.la.O", 43, r"\mathbf{O}_{[t]} &= \mathbf{Q}_{[t]} \mathbf{S}_{[t]} + \left( \mathbf{Q}_{[t]} \mathbf{K}_{[t]}^\top \odot \mathbf{M}\right) \mathbf{V}_{[t]}",
           Truth("outs"), Q @ tile("S", "Dv", "Dk", r"\mathbf{S}_{[t]}") + tril(Q @ K.T) @ V,
           "la_chunk", row=2, what="linear-attention chunk outputs")
nb.corrected("gla.la.O",
             "Q_[t] S_[t] multiplies a C x Dk tile by the Dv x Dk state; the inter-chunk term "
             "reads the state before the chunk, transposed: Q_[t] S_[t-1]^{C T}.",
             Q @ S_PREV.T + tril(Q @ K.T) @ V)

# ================================================================== §5.1
nb.section("5.1 递推模式（Recurrent Mode）")

nb.forward("gla.rec_hadamard", 71, r"\mathbf{S}_t = ( \mathbf{1} \boldsymbol{\alpha}_t^\top) \odot \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           Truth("state", "t"), (ONES_V @ alpha.T) * S_tm1 + v @ k.T,
           "gla_G_step", what="GLA step with the gate as Hadamard factor 1 alpha^T")
nb.forward("gla.rec_diag", 71, r"= \mathbf{S}_{t-1}\text{Diag}(\boldsymbol{\alpha}_t) + \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           Truth("state", "t"), S_tm1 @ diag(alpha) + v @ k.T,
           "gla_G_step", what="GLA step with the gate as Diag(alpha)")

# ================================================================== §5.2
nb.section("5.2 分块递推模式（Chunkwise Recurrent Mode）")

# -- line 82: definitions, each tied to the program's named definitions
nb.identity("gla.gamma_def", 82, r"\boldsymbol{\gamma}_{[t]}^r &= \prod_{i=tC+1}^{tC+r} \boldsymbol{\alpha}_i \in \mathbb{R}^{d \times 1}",
            gamma("r"), gamma_def("r"), "gla_chunk", row=1, over=ROWS,
            what="gamma^r = prod of the chunk's gates up to r (row r of Gamma)")

# H has no program definition; its definition is checked for what it means:
# the chunk-local GLA recurrence started from zero, H^r = H^{r-1} Diag(α^r) + v^r k^{r⊤}
# (H^0 = 0, the empty sum).  Its link to the state is line 86.
nb.identity("gla.H_def", 82, r"\mathbf{H}_{[t]}^{r} &= \sum_{i=1}^{r} (\boldsymbol{v}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i\top}) \text{Diag}(\frac{\boldsymbol{\gamma}_{[t]}^{r}}{\boldsymbol{\gamma}_{[t]}^{i}}) \in \mathbb{R}^{d \times d}",
            H("r"), H("r-1") @ diag(row(A, "r")) + row(V, "r") @ row(K, "r").T,
            "gla_chunk", row=2, over=ROWS,
            what="H^r (definition) obeys the chunk-local recurrence from zero")

nb.identity("gla.Gamma_def", 82, r"\mathbf{\Gamma}_{[t]} &= [ \boldsymbol{\gamma}_{[t]}^{1}, \boldsymbol{\gamma}_{[t]}^{2}, \dots, \boldsymbol{\gamma}_{[t]}^{C} ]^\top \in \mathbb{R}^{C \times d}",
            Gamma, ir.Stack("r", gamma_def("r")), "gla_chunk", row=3,
            what="Gamma stacks gamma^1..gamma^C")

nb.identity("gla.ql_row", 82, r"\overleftarrow{\boldsymbol{q}_{[t]}^{i}} &= \boldsymbol{q}_{[t]}^{i} \odot \boldsymbol{\gamma}_{[t]}^{i}",
            row(Ql, "i"), row(Q, "i") * gamma("i"), "gla_chunk", row=4, over=(("i", "1", "C"),),
            what="left-decayed query row")
nb.identity("gla.kr_row", 82, r"\overrightarrow{\boldsymbol{k}_{[t]}^{i}} = \frac{\boldsymbol{k}_{[t]}^{i}}{\boldsymbol{\gamma}_{[t]}^{i}}",
            row(Kr, "i"), row(K, "i") / gamma("i"), "gla_chunk", row=4, over=(("i", "1", "C"),),
            what="right-decayed key row")

# the matrix forms against the stacked row definitions
nb.identity("gla.Ql_matrix", 82, r"\overleftarrow{\mathbf{Q}_{[t]}} &= \mathbf{Q}_{[t]} \odot \mathbf{\Gamma}_{[t]}",
            ir.Stack("i", row(Q, "i") * gamma("i")), Q * Gamma, "gla_chunk", row=5,
            what="<-Q as a matrix")
nb.identity("gla.Kr_matrix", 82, r"\overrightarrow{\mathbf{K}_{[t]}} = \mathbf{Q}_{[t]} \oslash \mathbf{\Gamma}_{[t]}",
            ir.Stack("i", row(K, "i") / gamma("i")), Q / Gamma, "gla_chunk", row=5,
            what="->K as a matrix")
nb.corrected("gla.Kr_matrix",
             "->K stacks the rows k^i / gamma^i, so it is K_[t] (/) Gamma_[t]; the note writes Q_[t] (/) Gamma_[t].",
             K / Gamma)

# -- line 86
# The note's S_t is 3.2's S_t = Σ_{i=1}^t v_i k_iᵀ (line 29): the sequence starts
# from a zero state, which is what H_[0]^r = S_r needs (H sums only the chunk).
nb.forward("gla.H0", 86, r"\mathbf{H}_{[0]}^{r} &= \mathbf{S}_{r}",
           Truth("state", "r"), H("r"), "gla_chunk", row=1, over=ROWS, blocks="first",
           assume=("zero_initial_state",), what="H in the first chunk is the state")
nb.forward("gla.S_r", 86, r"\mathbf{S}_{[t]}^{r} &= \mathbf{S}_{[t-1]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^{r}) + \mathbf{H}_{[t]}^{r}",
           Truth("state", "t*C+r"), S_PREV @ diag(gamma("r")) + H("r"), "gla_chunk", row=2, over=ROWS,
           what="state at row r of chunk t")
nb.identity("gla.H_forms", 86, r"= \sum_{i=1}^{r} \boldsymbol{v}_{[t]}^{i}\left(\frac{\boldsymbol{k}_{[t]}^{i}}{\boldsymbol{\gamma}_{[t]}^{i}}\right)^{\top} \text{Diag}(\boldsymbol{\gamma}_{[t]}^{r})",
            H("r"), H_second("r"), "gla_chunk", row=3, over=ROWS,
            what="H's two forms")

# -- line 90
nb.forward("gla.o_r", 90, r"\boldsymbol{o}_{[t]}^{r} &= \mathbf{S}_{[t]}^{r} \boldsymbol{q}_{[t]}^{r} = \mathbf{S}_{[t-1]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^{r}) \boldsymbol{q}_{[t]}^{r} + \mathbf{H}_{[t]}^{r} \boldsymbol{q}_{[t]}^{r}",
           Truth("out", "t*C+r"), S_PREV @ diag(gamma("r")) @ row(Q, "r") + H("r") @ row(Q, "r"),
           "gla_chunk", row=1, over=ROWS, what="output row r from S_[t-1] and H^r")
nb.forward("gla.o_r_decayed", 90, r"\Rightarrow \boldsymbol{o}_{[t]}^{r} &= \mathbf{S}_{[t-1]}^{C} \overleftarrow{\boldsymbol{q}_{[t]}^{r}} + \sum_{i=1}^{r} \boldsymbol{v}_{[t]}^{i} \left(\overrightarrow{\boldsymbol{k}_{[t]}^{i}}\right)^{\top} \overleftarrow{\boldsymbol{q}_{[t]}^{r}}",
           Truth("out", "t*C+r"),
           S_PREV @ row(Ql, "r") + summ("i", "1", "r", row(V, "i") @ row(Kr, "i").T @ row(Ql, "r")),
           "gla_chunk", row=2, over=ROWS, what="output row r with decayed q and k")

# -- line 94
nb.forward("gla.O", 94, r"\mathbf{O}_{[t]} &= \overleftarrow{\boldsymbol{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C \top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \left(\overrightarrow{\mathbf{K}_{[t]}} \right)^\top \odot \mathbf{M} \right) \mathbf{V}_{[t]}",
           Truth("outs"), Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, "gla_chunk",
           what="chunk outputs, matrix form")

# -- line 98
nb.forward("gla.S_C_H", 98, r"\mathbf{S}_{[t]}^{C} = \mathbf{S}_{[t-1]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C}) + \mathbf{H}_{[t]}^{C}",
           Truth("state", "t*C+C"), S_PREV @ diag(gC) + H("C"), "gla_chunk",
           what="state after the chunk via H^C")
nb.forward("gla.S_C", 98, r"= \left(\mathbf{S}_{[t-1]}^{C} + \mathbf{V}_{[t]}^\top \overrightarrow{\boldsymbol{K}_{[t]}} \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C})",
           Truth("state", "t*C+C"), (S_PREV + V.T @ Kr) @ diag(gC), "gla_chunk",
           what="state after the chunk, matrix form")

# ================================================================== §5.3
# Sub-chunks of size T inside chunk t; the note reuses [t][τ] for the sub-chunk
# pair, here bt, bs (0-based).  Γ (and γ) stay relative to the chunk start.
nb.section("5.3 带二级分块的分块递推模式")

# P's definition: the (t, τ) block of the chunk's masked ←Q →Kᵀ used by O (line 94)
nb.identity("gla.P_def", 108, r"\mathbf{P}_{[t][\tau]} = \overleftarrow{\boldsymbol{Q}_{[t]}} \left(\overrightarrow{\boldsymbol{K}_{[\tau]}} \right)^\top \odot \mathbf{M}_{[t][\tau]}",
            ir.SubBlock(tril(Ql @ Kr.T), "bt", "bs"), P_def("bt", "bs"), "gla_chunk",
            over=(("bt", "0", SUBCHUNKS), ("bs", "0", SUBCHUNKS)),
            what="P_[t][tau] is a sub-chunk block of (<-Q ->K^T) odot M")

# case 1: diagonal sub-chunk, only the entries i > j are claimed (compare M_{-1}-masked tiles)
nb.identity("gla.P_case1", 120, r"(\mathbf{P}_{[t][\tau]})_{i, j} = \sum_{d} (\boldsymbol{q}_{[t]}^{i})_{d} ~(\boldsymbol{k}_{[\tau]}^{j})_{d} ~ \exp(\log \boldsymbol{\gamma}_{[t]}^{i} - \log \boldsymbol{\gamma}_{[\tau]}^{j} ) ，\quad t=\tau, i>j",
            tril(P_def("bt", "bt"), "M-1"),
            tril(ir.GatedInner(ir.SubBlock(Q, "bt"), ir.SubBlock(K, "bt"),
                               expm(logm(ir.SubBlock(Gamma, "bt")))), "M-1"),
            "gla_chunk", over=(("bt", "0", SUBCHUNKS),),
            what="diagonal sub-chunk entries i>j in the log domain")

# case 2, row 1: claimed for every t != τ.  τ runs over the other sub-chunks:
# m = 0..C/T-2 and τ = m + (m >= bt), which skips τ = bt.
TAU_NE = "m+(m>=bt)"
nb.identity("gla.P_case2", 124, r"\mathbf{P}_{[t][\tau]} &= \overleftarrow{\boldsymbol{Q}_{[t]}} \left(\overrightarrow{\boldsymbol{K}_{[\tau]}} \right)^\top ,\quad t \ne \tau",
            P_def("bt", TAU_NE),
            ir.SubBlock(Ql, "bt") @ ir.SubBlock(Kr, TAU_NE).T, "gla_chunk", row=1,
            over=(("bt", "0", SUBCHUNKS), ("m", "0", "C//T-2")),
            what="off-diagonal sub-chunk block without mask")
nb.corrected("gla.P_case2",
             "P_[t][tau] includes the mask M_[t][tau], which is zero above the diagonal, so the "
             "unmasked product holds only for t > tau, not for every t != tau.",
             ir.SubBlock(Ql, "bt") @ ir.SubBlock(Kr, "bs").T, lhs=P_def("bt", "bs"),
             over=(("bt", "0", SUBCHUNKS), ("bs", "0", "bt-1")))

nb.identity("gla.P_case2_log", 124, r"\Rightarrow \mathbf{P}_{[t][\tau]} &= \left(\boldsymbol{Q}_{[t]} \odot \exp(\log \boldsymbol{\gamma}_{[t]}^{1:T}) \right) \left(\boldsymbol{K}_{[\tau]} \odot \exp(-\log \boldsymbol{\gamma}_{[\tau]}^{1:T}) \right)^\top ,\quad t > \tau",
            P_def("bt", "bs"),
            (ir.SubBlock(Q, "bt") * expm(logm(ir.SubBlock(Gamma, "bt"))))
            @ (ir.SubBlock(K, "bs") * expm(-logm(ir.SubBlock(Gamma, "bs")))).T,
            "gla_chunk", row=2, over=(("bt", "0", SUBCHUNKS), ("bs", "0", "bt-1")),
            what="below-diagonal sub-chunk block with log-domain decays")

# ================================================================== §6.1
# Step program gla_G_step: t is the 1-based step; G_t = 1 α_tᵀ.
nb.section("6.1 递推模式")

nb.forward("gla.rec.S", 132, r"\mathbf{S}_t = \mathbf{G}_t \odot \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           Truth("state", "t"), G * S_tm1 + v @ k.T, "gla_G_step",
           what="forward step, Hadamard gate")
nb.forward("gla.rec.o", 132, r"\boldsymbol{o}_t = \mathbf{S}_t \boldsymbol{q}_t",
           Truth("out", "t"), S_t @ q, "gla_G_step", what="forward step output")

nb.adjoint("gla.rec.do", 136, r"\delta \boldsymbol{o}_t &= \frac{\partial L}{\partial \boldsymbol{o}_t}",
           adj(O_t), DO_STEP, "gla_G_step", row=1, what="loss seed for o_t")
nb.adjoint("gla.rec.dG", 136, r"\delta \mathbf{G}_t &= \frac{\partial L}{\partial \mathbf{G}_t} = \delta \mathbf{S}_t \odot \mathbf{S}_{t-1}",
           adj(G), adj(S_t) * S_tm1, "gla_G_step", row=2, what="delta G_t")
nb.adjoint("gla.rec.dS", 136, r"\delta \mathbf{S}_t &= \mathbf{G}_{t+1} \odot \delta \mathbf{S}_{t+1} + \delta \boldsymbol{o}_t \boldsymbol{q}_t^\top",
           adj(S_t), shift(G) * shift(adj(S_t)) + DO_STEP @ q.T, "gla_G_step", row=3,
           blocks="not_last", what="delta S_t recursion")
nb.adjoint("gla.rec.dq", 136, r"\delta \boldsymbol{q}_t &= \frac{\partial L}{\partial \boldsymbol{q}_t} = \mathbf{S}_t^\top \delta \boldsymbol{o}_t",
           adj(q), S_t.T @ DO_STEP, "gla_G_step", row=4, what="delta q_t")
nb.adjoint("gla.rec.dv", 136, r"\delta \boldsymbol{v}_t &= \frac{\partial L}{\partial \boldsymbol{v}_t} = \delta \mathbf{S}_t \boldsymbol{k}_t",
           adj(v), adj(S_t) @ k, "gla_G_step", row=5, what="delta v_t")
nb.adjoint("gla.rec.dk", 136, r"\delta \boldsymbol{k}_t &= \frac{\partial L}{\partial \boldsymbol{k}_t} = \delta \mathbf{S}_t^\top \boldsymbol{v}_t",
           adj(k), adj(S_t).T @ v, "gla_G_step", row=6, what="delta k_t")
nb.adjoint("gla.rec.dalpha", 140, r"\delta \boldsymbol{\alpha}_t = \delta \mathbf{G}_t^\top \mathbf{1}",
           adj(alpha), adj(G).T @ ONES_V, "gla_G_step", what="delta alpha_t")

# ================================================================== §6.3
nb.section("6.3 分块递推模式的反向传播")

# -- line 170: the forward recap
nb.forward("gla.bwd.O", 170, r"\mathbf{O}_{[t]} &= \overleftarrow{\boldsymbol{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C \top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \left(\overrightarrow{\mathbf{K}_{[t]}} \right)^\top \odot \mathbf{M} \right) \mathbf{V}_{[t]}",
           Truth("outs"), Ql @ S_PREV.T + tril(Ql @ Kr.T) @ V, "gla_chunk", row=1,
           what="forward recap: chunk outputs")
nb.forward("gla.bwd.S", 170, r"\mathbf{S}_{[t]}^{C} &= \left(\mathbf{S}_{[t-1]}^{C} + \mathbf{V}_{[t]}^\top \overrightarrow{\boldsymbol{K}_{[t]}} \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C})",
           Truth("state", "t*C+C"), (S_PREV + V.T @ Kr) @ diag(gC), "gla_chunk", row=2,
           what="forward recap: state after the chunk")

# -- line 174: δS
nb.adjoint("gla.dSprev_O", 174, r"\left.\delta \mathbf{S}_{[t-1]}^{C}\right|_{\text {from } \mathbf{O}_{[t]}} &= \delta \mathbf{O}_{[t]}^{\top} \overleftarrow{\mathbf{Q}}_{[t]}",
           adj(S_PREV, via=("O",)), DO.T @ Ql, "gla_chunk", row=1,
           what="delta S_[t-1], from O_[t]")
nb.adjoint("gla.dSprev_S", 174, r"\left.\delta \mathbf{S}_{[t-1]}^{C}\right|_{\text {from } \mathbf{S}_{[t]}^C} = \delta \mathbf{S}_{[t]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C})",
           adj(S_PREV, via=("S",)), adj(S) @ diag(gC), "gla_chunk", row=1,
           what="delta S_[t-1], from S_[t]")
nb.adjoint("gla.dS", 174, r"\Rightarrow \delta \mathbf{S}_{[t]}^{C} &= \delta \mathbf{S}_{[t+1]}^C \text{Diag}(\boldsymbol{\gamma}_{[t+1]}^{C}) + \delta \mathbf{O}_{[t+1]}^{\top} \overleftarrow{\mathbf{Q}}_{[t+1]}",
           adj(S), shift(adj(S)) @ diag(shift(gC)) + shift(DO).T @ shift(Ql), "gla_chunk", row=2,
           blocks="not_last", what="delta S recursion over chunks")

# -- line 178: δV
dV_O = tril(Kr @ Ql.T, "MT") @ DO
dV_S = Kr @ diag(gC) @ adj(S).T
nb.adjoint("gla.dV_O", 178, r"\left.\delta \mathbf{V}_{[t]}\right|_{\text {from } \mathbf{O}_{[t]}} &= \left(\left(\overrightarrow{\mathbf{K}_{[t]}} \right) \overleftarrow{\mathbf{Q}_{[t]}}^\top \odot \mathbf{M}^\top \right) \delta \mathbf{O}_{[t]}",
           adj(V, via=("O",)), dV_O, "gla_chunk", row=1, what="delta V, from O")
nb.adjoint("gla.dV_S", 178, r"\left.\delta \mathbf{V}_{[t]}\right|_{\text {from } \mathbf{S}_{[t]}^C} &= \left(\overrightarrow{\mathbf{K}_{[t]}} \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C}) \delta \mathbf{S}_{[t]}^{C \top}",
           adj(V, via=("S",)), dV_S, "gla_chunk", row=2, what="delta V, from S")
nb.adjoint("gla.dV", 178, r"\Rightarrow \delta \mathbf{V}_{[t]} &= \left(\overrightarrow{\mathbf{K}_{[t]}} \right) \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C}) \delta \mathbf{S}_{[t]}^{C \top} + \left(\left(\overrightarrow{\mathbf{K}_{[t]}} \right) \overleftarrow{\mathbf{Q}_{[t]}}^\top \odot \mathbf{M}^\top \right) \delta \mathbf{O}_{[t]}",
           adj(V), dV_S + dV_O, "gla_chunk", row=3, what="delta V, combined")

# -- line 182: δ→K
dKr_O = tril(V @ DO.T, "MT") @ Ql
dKr_S = V @ adj(S) @ diag(gC)
nb.adjoint("gla.dKr_O", 182, r"\left.\delta \overrightarrow{\mathbf{K}_{[t]}}\right|_{\text {from } \mathbf{O}_{[t]}} &= \left( \mathbf{V}_{[t]} \left(\delta \mathbf{O}_{[t]} \right)^\top \odot \mathbf{M}^\top \right) \overleftarrow{\mathbf{Q}_{[t]}}",
           adj(Kr, via=("O",)), dKr_O, "gla_chunk", row=1, what="delta ->K, from O")
nb.adjoint("gla.dKr_S", 182, r"\left.\delta\overrightarrow{\mathbf{K}_{[t]}}\right|_{\text {from } \mathbf{S}_{[t]}^C} &= \mathbf{V}_{[t]} \delta \mathbf{S}_{[t]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C})",
           adj(Kr, via=("S",)), dKr_S, "gla_chunk", row=2, what="delta ->K, from S")
nb.adjoint("gla.dKr", 182, r"\Rightarrow \delta\overrightarrow{\mathbf{K}_{[t]}} &= \mathbf{V}_{[t]} \delta \mathbf{S}_{[t]}^C \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C}) + \left( \mathbf{V}_{[t]} \left(\delta \mathbf{O}_{[t]} \right)^\top \odot \mathbf{M}^\top \right) \overleftarrow{\mathbf{Q}_{[t]}}",
           adj(Kr), dKr_S + dKr_O, "gla_chunk", row=3, what="delta ->K, combined")

# -- line 186: δ←Q (←Q is used by O only)
nb.identity("gla.dQl_onlyO", 186, r"\delta \overleftarrow{\mathbf{Q}_{[t]}} = \left.\delta \overleftarrow{\mathbf{Q}_{[t]}}\right|_{\text {from } \mathbf{O}_{[t]}}",
            adj(Ql), adj(Ql, via=("O",)), "gla_chunk", what="<-Q feeds O only")
nb.adjoint("gla.dQl", 186, r"= \delta \mathbf{O}_{[t]} \mathbf{S}_{[t-1]}^C + \left( \delta\mathbf{O}_{[t]}\mathbf{V}_{[t]}^\top \odot \mathbf{M} \right) \overrightarrow{\mathbf{K}_{[t]}}",
           adj(Ql), DO @ S_PREV + tril(DO @ V.T) @ Kr, "gla_chunk", what="delta <-Q")

# -- line 190, 194: δK, δQ
nb.adjoint("gla.dK", 190, r"\delta \mathbf{K}_{[t]} = \delta \overrightarrow{\mathbf{K}_{[t]}} \oslash \mathbf{\Gamma}_{[t]}",
           adj(K), adj(Kr) / Gamma, "gla_chunk", what="delta K")
nb.adjoint("gla.dQ", 194, r"\delta \mathbf{Q}_{[t]} = \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{\Gamma}_{[t]}",
           adj(Q), adj(Ql) * Gamma, "gla_chunk", what="delta Q")

# -- line 198: δΓ ("from S" = through γ^C = LastRow(Γ), the gate factor of S)
dGamma_S = adj(Gamma, via=("gC",))
nb.adjoint("gla.dGamma_S", 198, r"\left.\delta \mathbf{\Gamma}_{[t]}\right|_{\text {from } \mathbf{S}_{[t]}^C} &= \left[0,0,..., \text{diag}\left(\left(\mathbf{S}_{[t-1]}^{C \top} + \overrightarrow{\boldsymbol{K}_{[t]}}^\top \mathbf{V}_{[t]} \right) \delta \mathbf{S}_{[t]}^{C}\right) \right]^\top",
           dGamma_S, ir.PlaceLast(ir.DiagV((S_PREV.T + Kr.T @ V) @ adj(S))), "gla_chunk", row=1,
           what="delta Gamma, from S (last row only)")
nb.adjoint("gla.dGamma", 198, r"\delta \mathbf{\Gamma}_{[t]} &= \delta \overleftarrow{\mathbf{Q}_{[t]}} \odot \mathbf{Q}_{[t]} - \delta \overrightarrow{\mathbf{K}_{[t]}} \odot \mathbf{K}_{[t]} \oslash (\mathbf{\Gamma}_{[t]} \odot \mathbf{\Gamma}_{[t]}) + \left.\delta \mathbf{\Gamma}_{[t]}\right|_{\text {from } \mathbf{S}_{[t]}^C}",
           adj(Gamma), adj(Ql) * Q - adj(Kr) * K / (Gamma * Gamma) + dGamma_S, "gla_chunk", row=2,
           what="delta Gamma, combined")

# -- line 202: the "equivalent" forms (identities between true adjoints)
nb.identity("gla.dGamma_times_Gamma", 202, r"\delta \mathbf{\Gamma}_{[t]} \odot \mathbf{\Gamma}_{[t]} &= \delta \mathbf{Q}_{[t]} \odot \mathbf{Q}_{[t]} - \delta \mathbf{K}_{[t]} \odot \mathbf{K}_{[t]} + \left.\delta \mathbf{\Gamma}_{[t]}\right|_{\text {from } \mathbf{S}_{[t]}^C} \odot \mathbf{\Gamma}_{[t]}",
            adj(Gamma) * Gamma, adj(Q) * Q - adj(K) * K + dGamma_S * Gamma, "gla_chunk", row=1,
            what="delta Gamma odot Gamma via delta Q, delta K")
dgC_S_gC = LastRow(dGamma_S) * gC                           # δΓ^C|from S ⊙ γ^C
dS_prev_term = ir.DiagV(S_PREV.T @ adj(S)) * gC
nb.identity("gla.dgC_S_a", 202, r"\left.\delta \mathbf{\Gamma}_{[t]}^C\right|_{\text {from } \mathbf{S}_{[t]}^C} \odot \mathbf{\gamma}_{[t]}^C &= \text{diag}\left(\mathbf{S}_{[t-1]}^{C \top} \delta \mathbf{S}_{[t]}^{C}\right) \odot \mathbf{\gamma}_{[t]}^C +\text{diag}\left(\overrightarrow{\boldsymbol{K}_{[t]}}^\top \mathbf{V}_{[t]} \delta \mathbf{S}_{[t]}^{C} \text{Diag}(\boldsymbol{\gamma}_{[t]}^{C}) \right)",
            dgC_S_gC, dS_prev_term + ir.DiagV(Kr.T @ V @ adj(S) @ diag(gC)), "gla_chunk", row=2,
            what="last row of delta Gamma from S, times gamma^C")
nb.identity("gla.dgC_S_b", 202, r"&= \text{diag}\left(\mathbf{S}_{[t-1]}^{C \top} \delta \mathbf{S}_{[t]}^{C}\right) \odot \mathbf{\gamma}_{[t]}^C +\text{diag}\left(\overrightarrow{\boldsymbol{K}_{[t]}}^\top \left.\delta\overrightarrow{\mathbf{K}_{[t]}}\right|_{\text {from } \mathbf{S}_{[t]}^C}\right)",
            dgC_S_gC, dS_prev_term + ir.DiagV(Kr.T @ adj(Kr, via=("S",))), "gla_chunk", row=3,
            what="... via delta ->K from S")
# δK|from S: K's adjoint through the copy of →K that S uses (program gla_chunk_ksplit)
nb.identity("gla.dgC_S_c", 202, r"&= \text{diag}\left(\mathbf{S}_{[t-1]}^{C \top} \delta \mathbf{S}_{[t]}^{C}\right) \odot \mathbf{\gamma}_{[t]}^C +\text{diag}\left(\boldsymbol{K}_{[t]}^\top \left.\delta \mathbf{K}_{[t]}\right|_{\text {from } \mathbf{S}_{[t]}^C}\right)",
            dgC_S_gC, dS_prev_term + ir.DiagV(K.T @ adj(K, via=("KrS",))), "gla_chunk_ksplit", row=4,
            what="... via delta K from S")

# -- line 206: δα
# δα_r, α_r are the chunk's r-th rows δα_[t]^r, α_[t]^r (row 3 stacks δα_[t]^1..C; j ≥ r
# runs over the chunk's rows), while the product keeps the note's global indices.
nb.identity("gla.Gamma_prod", 206, r"\mathbf{\Gamma}_{[t]} &= [ \prod_{i=tC+1}^{tC+1} \boldsymbol{\alpha}_i, \prod_{i=tC+1}^{tC+2} \boldsymbol{\alpha}_i,...\prod_{i=tC+1}^{tC+C} \boldsymbol{\alpha}_i]^\top \in \mathbb{R}^{C \times d}",
            Gamma, ir.Stack("j", gamma_def("j")), "gla_chunk", row=1,
            what="Gamma as stacked gate products")
nb.identity("gla.dalpha_r_prod", 206, r"\delta \boldsymbol{\alpha}_r &= \sum_{j \ge r} \delta \mathbf{\Gamma}_{j,:} \odot (\prod_{i=tC+1}^{tC+j} \boldsymbol{\alpha}_i \oslash \boldsymbol{\alpha}_r)",
            row(adj(A), "r"),
            summ("j", "r", "C", row(adj(Gamma), "j") * (gamma_def("j") / row(A, "r"))),
            "gla_chunk", row=2, over=ROWS, what="delta alpha_r through the products")
nb.identity("gla.dalpha_r", 206, r"= \left(\sum_{j \ge r} \delta \mathbf{\Gamma}_{j,:} \odot \mathbf{\Gamma}_{j,:} \right) \oslash \boldsymbol{\alpha}_r",
            row(adj(A), "r"),
            summ("j", "r", "C", row(adj(Gamma), "j") * row(Gamma, "j")) / row(A, "r"),
            "gla_chunk", row=2, over=ROWS, what="delta alpha_r through Gamma")
nb.adjoint("gla.dA", 206, r"\delta \mathbf{A}_{[t]} &= [\delta \boldsymbol{\alpha}_{[t]}^1, \delta \boldsymbol{\alpha}_{[t]}^2,...\delta \boldsymbol{\alpha}_{[t]}^C]^\top = \text{suffix\_sum}_{row}(\delta \mathbf{\Gamma} \odot \mathbf{\Gamma}) \oslash \mathbf{A}_{[t]}",
           adj(A), ir.RevCumSum(adj(Gamma) * Gamma) / A, "gla_chunk", row=3,
           what="delta A = suffix sum of delta Gamma odot Gamma, over A")

# -- line 210: the log domain
# exp of both sides (the exact field has no log; exp(Σ log α_i) = ∏ exp(log α_i)):
nb.identity("gla.logGamma", 210, r"\log \mathbf{\Gamma}_{[t]} &= [ \sum_{i=tC+1}^{tC+1} \log \boldsymbol{\alpha}_i, \sum_{i=tC+1}^{tC+2} \log \boldsymbol{\alpha}_i,...\sum_{i=tC+1}^{tC+C} \log \boldsymbol{\alpha}_i]^\top \in \mathbb{R}^{C \times d}",
            expm(logm(row(Gamma, "j"))),
            ir.DiagV(prod("i", "t*C+1", "t*C+j", diag(expm(logm(row(Aseq, "i", glob=True)))))),
            "gla_chunk", row=1, over=(("j", "1", "C"),),
            what="log Gamma as prefix sums of log alpha (checked under exp)")
# δ log x = δx ⊙ x
nb.identity("gla.dlogalpha", 210, r"\Rightarrow \delta \log \boldsymbol{\alpha}_r &= \sum_{j \ge r} \delta \log \mathbf{\Gamma}_{j,:}",
            row(adj(A) * A, "r"), summ("j", "r", "C", row(adj(Gamma) * Gamma, "j")),
            "gla_chunk", row=2, over=ROWS, what="delta log alpha_r = suffix sum of delta log Gamma")

# -- derived (not in the note): the whole-chunk forms a backward kernel prints
# δS_[t-1] in full (the note gives its two partials, lines 174), and δ log α of the whole
# chunk from δQ, δK and δS (lines 202 and 210 combined).  "gla.bwd.*".
nb.adjoint("gla.bwd.dS_prev", 0, "", adj(S_PREV), DO.T @ Ql + adj(S) @ diag(gC), "gla_chunk",
           what="derived: delta S_[t-1]^C = delta O^T <-Q + delta S_[t]^C Diag(gamma^C) (both partials)")
nb.identity("gla.bwd.dlogalpha", 0, "", adj(A) * A,
            ir.RevCumSum(adj(Q) * Q - adj(K) * K + ir.PlaceLast(ir.DiagV(S.T @ adj(S)))), "gla_chunk",
            what="derived: delta log alpha = suffix sums of (dQ.Q - dK.K + [0, ..., diag(S^T dS)]), "
                 "S = S_[t]^C")
# The same gradient grouped for rounding (what the kernel prints): diag(S^T dS) =
# gamma^C . diag(S_[t-1]^T dS) + 1^T E with E = (V dS) . (->K Diag(gamma^C)), the state part
# of dK . K, so the last row adds back exactly the E that the rows subtract (FLA groups it so).
E_STATE = (V @ adj(S)) * (Kr @ diag(gC))
nb.identity("gla.bwd.dlogalpha_grouped", 0, "", adj(A) * A,
            ir.RevCumSum(adj(Q) * Q - adj(K) * K + ir.PlaceLast(
                ir.DiagV(S_PREV.T @ adj(S)) * gC + E_STATE.T @ ir.Ones("C", "1"))), "gla_chunk",
            what="derived: delta log alpha = suffix sums of (dQ.Q - dK.K + [0, ..., gamma^C diag(S_[t-1]^T dS)"
                 " + 1^T E]), E = (V dS) . (->K Diag(gamma^C))")


# the kernel printed from this derivation (chunkproof gen; derivations/kernel.py)
kernel(D, "chunk_gla", GLA_CHUNK, outputs="gla.O", state="gla.S_C",
       args=dict(q="Q", k="K", v="V", g=log_of("Alpha")),
       backward=dict(dS="gla.dS", dS_prev="gla.bwd.dS_prev",
                     grads=dict(q="gla.dQ", k="gla.dK", v="gla.dV", g="gla.bwd.dlogalpha_grouped"),
                     inner=["gla.dQl", "gla.dKr"]),
       doc="S_t = S_{t-1} Diag(exp g_t) + v_t k_t^T,  o_t = S_t q_t")

DERIVATION = D
