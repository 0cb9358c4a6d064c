"""Note 002 (Gated DeltaNet reading notes, Chinese + LaTeX), encoded as claims.

    chunkproof verify derivations/gated_deltanet.py [--claim claim-id-substring]

Layout, following the note:
  §3.1  Sherman-Morrison; the gradients of ||A||_F^2 and ||x||^2 (optional rows)
  §3.2.1 Longhorn: objective, gradient, the closed-form step, eps_t
  §3.2.2 Mamba2: objective, gradient, the resulting step
  §4.1  the chunkwise forward: P, gamma, H; the u0 / u induction (global, S_0 = 0);
        WY form; S^r and o^r; <- / -> tiles; S^C and O; U, W, T, T~ (and the Gamma form)
  extra (gdn.bwd.*): a chunk backward in the style of note 001 (KDA), scalar gate

Ground truths: R.gated_deltanet() (default), R.mamba2(), and a Longhorn recurrence
defined below as the exact minimiser of the note's Longhorn objective.

The gradient rows of §3.1/§3.2 are checked as adjoint claims.  A step program cannot
have a free matrix leaf, so the "point" S_t at which the gradient is taken is a named
definition ``St`` = V^T Q (the whole sequence: a generic Dv x Dk matrix, independent of
S_{t-1}).  The program's output is O = L * dO / (dO^T dO), so that the checker's loss
<dO, O> of this step is exactly the note's objective L (claim ``*.L`` checks that), and
the state definition S does not read St.  Then the true adjoint dL/dSt (a JVP through
the program, cut at St) is the partial derivative of the objective, and the note's
gradient formula is compared with it.  That "= 0" holds at the solution is checked
separately, with S_t the true state of the recurrence.
"""
from chunkproof.derivations.kernel import kernel, log_of
from chunkproof.derivations import recurrences as R
from chunkproof.derivations.dsl import (DO, DO_STEP, S_PREV, Derivation, Notebook, Program, Recurrence,
                             adj, diag, eye, inv, prod, row, shift, summ, tile, tril)
from chunkproof.derivations.ir import (Const, CumProd, DiagV, HDiv, Inner, LastRow, Ones, PlaceLast,
                            RevCumSum, RowRec, Scale, Stack, Truth, Zeros)

NOTE = "002_6404d08dac0301ed.txt"
D = Derivation("gated_deltanet", "Gated Delta Networks: online-learning view and chunkwise form",
               NOTE)
D.add_recurrence(R.gated_deltanet())      # default ground truth
D.add_recurrence(R.mamba2())              # §3.2.2


def sdiv(x, s):
    """x / s for a 1 x 1 scalar s (the notes' \\frac{x}{s} with a scalar denominator)."""
    return Scale(HDiv(Const(1), s), x)


TWO = Const(2)

# ---------------------------------------------------------------- step-level symbols
q, k, v, beta, alpha = R.q, R.k, R.v, R.beta, R.alpha_s
Sp = R.S_PREV                                       # S_{t-1}
I_k = eye("Dk")
S_t = Truth("state", "t", r"\mathbf{S}_t")          # in a step program t is the 1-based step
GDN_STEP_S = Scale(alpha, Sp) @ (I_k - Scale(beta, k @ k.T)) + Scale(beta, v @ k.T)

# whole-sequence tiles (for generic points and global per-step reads)
Qseq, Kseq, Vseq = tile("Q", "L", "Dk"), tile("K", "L", "Dk"), tile("V", "L", "Dv")
Aseq, Bseq = tile("Alpha", "L", "1"), tile("Beta", "L", "1")


def g(x, idx):
    """x_idx at a global step (column vector)."""
    return row(x, idx, glob=True)


def objective_program(name, point_defs, loss, state):
    """A step program whose output contribution <dO, O> to the checker's loss is ``loss``
    (see the module docstring) and whose state does not depend on the point defs."""
    Lt = tile("Lobj", "1", "1", "L")
    O_ = Scale(Lt, Scale(inv(DO_STEP.T @ DO_STEP), DO_STEP))
    return Program(name, "step", list(point_defs) + [("Lobj", loss), ("S", state), ("O", O_)],
                   description=f"{name}: a step whose loss is the note's objective")


O_step = tile("O", "Dv", "1", r"\boldsymbol{o}_t")
X = tile("St", "Dv", "Dk", r"\mathbf{S}_t")                 # the free point of an objective
GENERIC = Vseq.T @ Qseq                                       # a generic Dv x Dk matrix

# ============================================================== §3.1
nb = Notebook(D, NOTE).section("3.1 数学预备知识")

# Sherman-Morrison with two independent random vectors u := k_t, v := q_t (both Dk x 1).
smu, smv = tile("smu", "Dk", "1", r"\boldsymbol{u}"), tile("smv", "Dk", "1", r"\boldsymbol{v}")
D.add_program(Program("sherman_morrison", "step",
                      [("smu", k), ("smv", q), ("S", GDN_STEP_S), ("O", R.S @ q)],
                      description="two generic vectors u, v for the Sherman-Morrison identity"))
nb.identity("gdn.sherman_morrison", 65,
            r"(I + \boldsymbol{u}\boldsymbol{v}^\top)^{-1} = I - \frac{\boldsymbol{u}\boldsymbol{v}^\top}{1 + \boldsymbol{v}^\top\boldsymbol{u}}",
            inv(I_k + smu @ smv.T), I_k - sdiv(smu @ smv.T, Const(1) + smv.T @ smu),
            "sherman_morrison", row=1, what="Sherman-Morrison formula")

# Optional rows of the second display: d||A||_F^2/dA = 2A and d||x||^2/dx = 2x, as adjoints.
# (Row 3, d<k_t, v_t>/dk_t = v_t, is not encoded: with this project's shapes k_t is Dk and
# v_t is Dv, so <k_t, v_t> is only meaningful for generic equal-length vectors.)
A_ = tile("A", "Dv", "Dk", r"\mathbf{A}")
x_ = tile("x", "Dk", "1", r"\boldsymbol{x}")
D.add_program(objective_program("frob_objective", [("A", GENERIC)], Inner(A_, A_), GDN_STEP_S))
D.add_program(objective_program("sqnorm_objective", [("x", k)], x_.T @ x_, GDN_STEP_S))
nb.adjoint("gdn.grad_frob", 45,
           r"\frac{\partial \|\mathbf{A}\|_F^2}{\partial \mathbf{A}} = 2 \mathbf{A}",
           adj(A_), Scale(TWO, A_), "frob_objective", row=1,
           what="gradient of the squared Frobenius norm")
nb.adjoint("gdn.grad_sqnorm", 52,
           r"\frac{\partial \|\boldsymbol{x}\|^2}{\partial \boldsymbol{x}} = 2 \boldsymbol{x}",
           adj(x_), Scale(TWO, x_), "sqnorm_objective", row=2,
           what="gradient of the squared norm of a vector")

# ============================================================== §3.2.1 Longhorn
# Ground truth: the exact minimiser of L = ||S - S_{t-1}||_F^2 + beta ||S k - v||^2,
# S_t = (S_{t-1} + beta v k^T)(I + beta k k^T)^{-1} (stationarity is checked below).
LONGHORN = Recurrence(
    "longhorn", R.QKV + [R.BETA],
    Program("longhorn_step", "step",
            [("S", (Sp + Scale(beta, v @ k.T)) @ inv(I_k + Scale(beta, k @ k.T))), ("O", R.S @ q)],
            description="Longhorn: the minimiser of the note's objective, one step"),
    r"\mathbf{S}_t = (\mathbf{S}_{t-1} + \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top)"
    r"(\mathbf{I} + \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top)^{-1}")
D.add_recurrence(LONGHORN)


def longhorn_L(St):
    r = St @ k - v
    return Inner(St - Sp, St - Sp) + Scale(beta, r.T @ r)


def longhorn_grad(St):
    return Scale(TWO, St - Sp) + Scale(TWO, Scale(beta, (St @ k - v) @ k.T))


D.add_program(objective_program("longhorn_objective", [("St", GENERIC)], longhorn_L(X),
                                LONGHORN.program.expr("S")), recurrence="longhorn")

eps = HDiv(beta, Const(1) + Scale(beta, k.T @ k))      # eps_t as defined in row 7
frac_bkk = sdiv(Scale(beta, k @ k.T), Const(1) + Scale(beta, k.T @ k))

nb.section("3.2.1 Longhorn")
nb.identity("gdn.longhorn.L", 71,
            r"L &= \|\mathbf{S}_t - \mathbf{S}_{t-1}\|_F^2 + \beta_t \|\mathbf{S}_t \boldsymbol{k}_t - \boldsymbol{v}_t\|^2",
            Inner(DO_STEP, O_step), longhorn_L(X), "longhorn_objective", row=1,
            what="objective; checks that this step's loss <dO, o> is exactly L (encoding check)")
LH_GRAD_TEX = (r"\Rightarrow \frac{\partial}{\partial \mathbf{S}_t} L &= 2 (\mathbf{S}_t - \mathbf{S}_{t-1}) "
               r"+ 2\beta_t (\mathbf{S}_t \boldsymbol{k}_t - \boldsymbol{v}_t) \boldsymbol{k}_t^\top = 0")
nb.adjoint("gdn.longhorn.grad", 74, LH_GRAD_TEX, adj(X), longhorn_grad(X), "longhorn_objective",
           row=2, what="gradient of the Longhorn objective at a generic S_t")
nb.identity("gdn.longhorn.grad_zero", 74, LH_GRAD_TEX, Zeros("Dv", "Dk"), longhorn_grad(S_t),
            "longhorn_step", row=2, what="the gradient vanishes at the Longhorn state (= 0)")
nb.forward("gdn.longhorn.normal_eq", 82,
           r"\Rightarrow \mathbf{S}_t (\mathbf{I} + \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) &= \mathbf{S}_{t-1} + \beta_t\boldsymbol{v}_t \boldsymbol{k}_t^\top",
           S_t @ (I_k + Scale(beta, k @ k.T)), Sp + Scale(beta, v @ k.T), "longhorn_step", row=3,
           what="normal equation")
nb.forward("gdn.longhorn.sm", 86,
           r"\Rightarrow \mathbf{S}_t &= \mathbf{S}_{t-1} (\mathbf{I} - \frac{ \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top}{1 + \beta_t \boldsymbol{k}_t^\top \boldsymbol{k}_t} ) + \beta_t\boldsymbol{v}_t \boldsymbol{k}_t^\top (\mathbf{I} - \frac{ \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top}{1 + \beta_t \boldsymbol{k}_t^\top \boldsymbol{k}_t} )",
           S_t, Sp @ (I_k - frac_bkk) + Scale(beta, v @ k.T) @ (I_k - frac_bkk), "longhorn_step",
           row=4, what="Sherman-Morrison applied to the normal equation")
# Row 5 subtracts the Dk x Dk matrix k k^T from the scalar k^T k: ill-formed as written.
nb.forward("gdn.longhorn.eps_expand", 89,
           r"&= \mathbf{S}_{t-1} (\mathbf{I} - \epsilon_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \epsilon_t \boldsymbol{v}_t \boldsymbol{k}_t^\top + \epsilon_t \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top (\boldsymbol{k}_t^\top \boldsymbol{k}_t - \boldsymbol{k}_t \boldsymbol{k}_t^\top)",
           S_t, Sp @ (I_k - Scale(eps, k @ k.T)) + Scale(eps, v @ k.T)
           + Scale(eps, Scale(beta, v @ k.T)) @ (k.T @ k - k @ k.T), "longhorn_step", row=5,
           what="expansion with eps_t (literal)")
nb.corrected("gdn.longhorn.eps_expand",
             why="k_t^T k_t - k_t k_t^T subtracts a d x d matrix from a scalar; with "
                 "(k_t^T k_t) I - k_t k_t^T the row holds (and that last term is zero).",
             rhs=Sp @ (I_k - Scale(eps, k @ k.T)) + Scale(eps, v @ k.T)
             + Scale(eps, Scale(beta, v @ k.T)) @ (Scale(k.T @ k, I_k) - k @ k.T))
nb.forward("gdn.longhorn.step", 93,
           r"&= \mathbf{S}_{t-1} (\mathbf{I} - \epsilon_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \epsilon_t \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           S_t, Sp @ (I_k - Scale(eps, k @ k.T)) + Scale(eps, v @ k.T), "longhorn_step", row=6,
           what="the Longhorn update")
# eps_t is a definition; what it must satisfy is (I + beta k k^T)^{-1} = I - eps k k^T.
nb.identity("gdn.longhorn.eps", 97,
            r"\epsilon_t &= \frac{\beta_t}{1 + \beta_t \boldsymbol{k}_t^\top \boldsymbol{k}_t}",
            inv(I_k + Scale(beta, k @ k.T)), I_k - Scale(eps, k @ k.T), "longhorn_step", row=7,
            what="definition of eps_t: the Sherman-Morrison coefficient of (I + beta k k^T)^{-1}")

# ============================================================== §3.2.2 Mamba2
def mamba2_L(St):
    return Inner(St - Scale(alpha, Sp), St - Scale(alpha, Sp)) - Scale(TWO, Inner(St @ k, v))


def mamba2_grad(St):
    return Scale(TWO, St - Scale(alpha, Sp)) - Scale(TWO, v @ k.T)


D.add_program(objective_program("mamba2_objective", [("St", GENERIC)], mamba2_L(X),
                                Scale(alpha, Sp) + v @ k.T), recurrence="mamba2")

nb.section("3.2.2 Mamba2")
nb.identity("gdn.mamba2.L", 104,
            r"L &= \|\mathbf{S}_t - \alpha_t \mathbf{S}_{t-1}\|_F^2 - 2 \langle \mathbf{S}_t \boldsymbol{k}_t, \boldsymbol{v}_t\rangle",
            Inner(DO_STEP, O_step), mamba2_L(X), "mamba2_objective", row=1,
            what="objective; checks that this step's loss <dO, o> is exactly L (encoding check)")
nb.adjoint("gdn.mamba2.grad", 107,
           r"\Rightarrow \frac{\partial}{\partial \mathbf{S}_t} L &= 2 (\mathbf{S}_t - \alpha_t \mathbf{S}_{t-1}) - 2 \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           adj(X), mamba2_grad(X), "mamba2_objective", row=2,
           what="gradient of the Mamba2 objective at a generic S_t")
nb.identity("gdn.mamba2.grad_zero", 107,
            r"\Rightarrow \frac{\partial}{\partial \mathbf{S}_t} L &= 2 (\mathbf{S}_t - \alpha_t \mathbf{S}_{t-1}) - 2 \boldsymbol{v}_t \boldsymbol{k}_t^\top",
            Zeros("Dv", "Dk"), mamba2_grad(S_t), "mamba2_step", row=2,
            what="the gradient vanishes at the Mamba2 state")
nb.forward("gdn.mamba2.step", 113,
           r"\Rightarrow \mathbf{S}_t = \alpha_t \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           S_t, Scale(alpha, Sp) + v @ k.T, "mamba2_step", row=2,
           what="the resulting Mamba2 step")

# ============================================================== §4.1 chunk program
Q, K, V = tile("Q", "C", "Dk", r"\mathbf{Q}_{[t]}"), tile("K", "C", "Dk", r"\mathbf{K}_{[t]}"), \
    tile("V", "C", "Dv", r"\mathbf{V}_{[t]}")
Al = tile("Alpha", "C", "1", r"\boldsymbol{\alpha}_{[t]}")
Be = tile("Beta", "C", "1", r"\boldsymbol{\beta}_{[t]}")
Gamma = tile("Gamma", "C", "1", r"\boldsymbol{\gamma}_{[t]}")
gC = tile("gC", "1", "1", r"\gamma_{[t]}^{C}")
GammaIJ = tile("GammaIJ", "C", "C", r"\mathbf{\Gamma}_{[t]}")
Ql = tile("Ql", "C", "Dk", r"\overleftarrow{\mathbf{Q}_{[t]}}", "<", "Q")
Kl = tile("Kl", "C", "Dk", r"\overleftarrow{\mathbf{K}_{[t]}}", "<", "K")
Kr = tile("Kr", "C", "Dk", r"\overrightarrow{\mathbf{K}_{[t]}}", ">", "K")
Wl = tile("Wl", "C", "Dk", r"\overleftarrow{\mathbf{W}_{[t]}}", "<", "W")
T_ = tile("T", "C", "C", r"\mathbf{T}_{[t]}")
Tt = tile("Tt", "C", "C", r"\mathbf{\widetilde{T}}_{[t]}")
U = tile("U", "C", "Dv", r"\mathbf{U}_{[t]}")
W = tile("W", "C", "Dk", r"\mathbf{W}_{[t]}")
O = tile("O", "C", "Dv", r"\mathbf{O}_{[t]}")
S = tile("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^{C}")
Urec = tile("Urec", "C", "Dv", r"\mathbf{U}_{[t]}")       # u_[t]^r from the recursion (line 237)
Wrec = tile("Wrec", "C", "Dk", r"\mathbf{W}_{[t]}")       # w_[t]^r from the recursion (line 181)
GammaG = tile("GammaG", "L", "1", r"\boldsymbol{\gamma}")  # global gamma_t = prod_{i<=t} alpha_i
U0 = tile("U0", "L", "Dv", r"\mathbf{U^0}")               # global u0_t (line 169)
Ug = tile("Ug", "L", "Dv", r"\mathbf{U}")                 # global u_t (line 175)
I_C = eye("C")


def gam(i):                 # gamma_[t]^i as a row of the program's Gamma (1 x 1)
    return row(Gamma, i)


def bet(i):
    return row(Be, i)


def M1(X_):                 # X odot M_{-1}
    return tril(X_, "M-1")


# u_[t]^r = beta^r (v^r - sum_{i<r} gamma^r/gamma^i u^i k^iT k^r), per chunk (line 237)
UREC = RowRec("Urec", "r", Scale(bet("r"), row(V, "r") - summ(
    "i", "1", "r-1", Scale(HDiv(gam("r"), gam("i")), row(Urec, "i")) @ row(K, "i").T @ row(K, "r"))),
    rows="C", cols="Dv")
# w_[t]^r = beta^r k^r - beta^r sum_{i<r} w^i k^iT k^r (line 181)
WREC = RowRec("Wrec", "r", Scale(bet("r"), row(K, "r")) - Scale(bet("r"), summ(
    "i", "1", "r-1", row(Wrec, "i") @ row(K, "i").T @ row(K, "r"))), rows="C", cols="Dk")
# global u0_t = beta_t/eta_t v_t - beta_t sum_{i<t} u0_i k_i^T k_t with eta_t = gamma_t (line 169)
U0REC = RowRec("U0", "s", Scale(HDiv(g(Bseq, "s"), row(GammaG, "s")), g(Vseq, "s")) - Scale(
    g(Bseq, "s"), summ("i", "1", "s-1", row(U0, "i") @ g(Kseq, "i").T @ g(Kseq, "s"))),
    rows="L", cols="Dv")
# global u_t = beta_t (v_t - sum_{i<t} gamma_t/gamma_i u_i k_i^T k_t) (line 175)
UGREC = RowRec("Ug", "s", Scale(g(Bseq, "s"), g(Vseq, "s") - summ(
    "i", "1", "s-1", Scale(HDiv(row(GammaG, "s"), row(GammaG, "i")), row(Ug, "i"))
    @ g(Kseq, "i").T @ g(Kseq, "s"))), rows="L", cols="Dv")

T_FORMULA = inv(I_C + diag(Be) @ M1(K @ K.T)) @ diag(Be)             # line 261
TT_FORMULA = inv(I_C + diag(Be) @ M1(Kl @ Kr.T)) @ diag(Be)          # line 267
O_FORMULA = Ql @ S_PREV.T + tril(Ql @ Kr.T) @ (U - Wl @ S_PREV.T)    # line 226
S_FORMULA = Scale(gC, S_PREV) + Scale(gC, (U.T - S_PREV @ Wl.T) @ Kr)  # line 219

GDN_CHUNK = Program("gdn_chunk", "chunk", [
    ("Gamma", CumProd(Al)),
    ("gC", LastRow(Gamma)),
    ("GammaIJ", Gamma @ HDiv(Ones("C", "1"), Gamma).T),
    ("Ql", diag(Gamma) @ Q),
    ("Kl", diag(Gamma) @ K),
    ("Kr", inv(diag(Gamma)) @ K),
    ("T", T_FORMULA),
    ("Tt", TT_FORMULA),
    ("U", Tt @ V),
    ("W", T_ @ K),
    ("Wl", diag(Gamma) @ W),
    ("O", O_FORMULA),
    ("S", S_FORMULA),
    # recursions of the note, for identities only (not on the path to O and S)
    ("Urec", UREC),
    ("Wrec", WREC),
    ("GammaG", CumProd(Aseq)),
    ("U0", U0REC),
    ("Ug", UGREC),
], description="note 002 §4.1: the chunkwise Gated DeltaNet forward, as the note writes it")
D.add_program(GDN_CHUNK)


# -- the note's own definitions of P, gamma, H (line 127-138), global step indices
def P_def(r):
    return prod("i", "t*C+1", f"t*C+{r}", I_k - Scale(g(Bseq, "i"), g(Kseq, "i") @ g(Kseq, "i").T))


def gamma_def(r):
    """gamma_[t]^r = prod_{i=tC+1}^{tC+r} alpha_i, for any index expression r."""
    return prod("gj", "t*C+1", f"t*C+({r})", g(Aseq, "gj"))


def H_def(r, gamma_r, gamma_i):
    """H_[t]^r of line 133 with the given gamma_[t]^r and reading of gamma_[t]^i (i global)."""
    return summ("i", "t*C+1", f"t*C+{r}",
                Scale(g(Bseq, "i"), g(Vseq, "i") @ g(Kseq, "i").T)
                @ Scale(HDiv(gamma_r, gamma_i), prod(
                    "j", "i+1", f"t*C+{r}", I_k - Scale(g(Bseq, "j"), g(Kseq, "j") @ g(Kseq, "j").T))))


# as written: gamma_[t]^i with i = tC+1..tC+r, by the definition of line 130
H_LITERAL = H_def("r", gamma_def("r"), gamma_def("i"))
# gamma_[t]^{i-tC}, the chunk-local index (rows of Gamma, = gamma_def by gdn.gamma_def)
H_FIXED = H_def("r", gam("r"), gam("i-t*C"))
R_ALL = (("r", "1", "C"),)
s_ = "t*C+r"                                     # the global step of row r of chunk t

nb.section("4.1 前向传播")
nb.forward("gdn.recurrence", 121,
           r"\mathbf{S}_t = \mathbf{S}_{t-1}\alpha_t (\mathbf{I} - \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top",
           S_t, Scale(alpha, Sp) @ (I_k - Scale(beta, k @ k.T)) + Scale(beta, v @ k.T),
           "gated_deltanet_step", row=1, what="the Gated DeltaNet update")
nb.identity("gdn.P_def", 127,
            r"\mathbf{P}_{[t]}^{r} &= \prod_{i=t C + 1}^{t C + r}(\mathbf{I} - \beta_{i} \boldsymbol{k}_{i} \boldsymbol{k}_{i}^{\top})",
            P_def("r"), prod("i", "1", "r", I_k - Scale(bet("i"), row(K, "i") @ row(K, "i").T)),
            "gdn_chunk", row=1, over=R_ALL,
            what="definition of P^r: global steps tC+1..tC+r are rows 1..r of the chunk")
nb.identity("gdn.gamma_def", 130,
            r"\gamma_{[t]}^{r} = \prod_{i=t C + 1}^{t C + r} \alpha_i",
            gamma_def("r"), gam("r"), "gdn_chunk", row=1, over=R_ALL,
            what="definition of gamma^r: row r of Gamma = cumprod(alpha) within the chunk")
# H as written reads gamma_[t]^i with i a global step (tC+1..tC+r).  By the note's own
# definition that is prod_{j=tC+1}^{tC+i} alpha_j, which reaches past the sequence end for
# late chunks; the literal claim is therefore checked on the chunks where it is defined
# (blocks="not_last": chunks 0 and 1 of 3; it already fails on chunk 1).
nb.forward("gdn.H_def", 133,
           r"\mathbf{H}_{[t]}^{r} &= \sum_{i=tC + 1}^{tC + r} \beta_{i} (\boldsymbol{v}_{i} \boldsymbol{k}_{i}^{\top}) \frac{\gamma_{[t]}^{r}}{\gamma_{[t]}^{i}} \left( \prod_{j=i + 1}^{t C + r}(\mathbf{I} - \beta_{j} \boldsymbol{k}_{j} \boldsymbol{k}_{j}^{\top}) \right)",
           Truth("state", s_) - Scale(gamma_def("r"), S_PREV) @ P_def("r"), H_LITERAL, "gdn_chunk",
           row=2, over=R_ALL, blocks="not_last",
           what="definition of H^r: the part of S^r not carried from S_[t-1]^C")
nb.corrected("gdn.H_def", blocks="all",
             why="the sum index i is a global step but gamma_[t]^i is indexed within the chunk; "
                 "the factor must be gamma_[t]^r / gamma_[t]^{i-tC}.",
             rhs=H_FIXED)
# judged on its own: H^r here is the intended H (gdn.H_def.corrected); the note's S_[-1]=0
# is not needed, the row is checked with a nonzero initial state.
nb.forward("gdn.S_r", 142,
           r"\mathbf{S}_{[t]}^{r} = \mathbf{S}_{[t-1]}^{C} \gamma_{[t]}^{r} \mathbf{P}_{[t]}^{r} + \mathbf{H}_{[t]}^{r} , \quad \text{where } \mathbf{S}_{[-1]}^{C} = \mathbf{0}",
           Truth("state", s_), Scale(gam("r"), S_PREV) @ P_def("r") + H_FIXED, "gdn_chunk",
           row=1, over=R_ALL, what="state inside the chunk from P, gamma, H")

# -- the induction over global steps, S_0 = 0 (the note's S_[-1]^C = 0).  The note's t is a
# global step here: these claims are checked in one block (blocks="first") for every step
# s = 1..L of the sequence, so that the global recursions (L rows) are evaluated once.
ZERO = ("zero_initial_state",)
S_ALL = (("s", "1", "L"),)
GLOBAL = dict(over=S_ALL, blocks="first")


def eta(idx):               # eta_t = gamma_t, global
    return row(GammaG, idx)


def eta_prev(idx):          # eta_{t-1} = prod_{j=1}^{t-1} alpha_j (eta_0 = 1)
    return prod("j", "1", f"{idx}-1", g(Aseq, "j"))


def u0k_sum(hi):
    return summ("i", "1", hi, row(U0, "i") @ g(Kseq, "i").T)


sg = "s"                    # the note's t: a global step
a_s, eta_p = g(Aseq, sg), eta_prev(sg)    # shared nodes: evaluated once per step
U0_MIDDLE = Scale(a_s, Scale(eta_p, u0k_sum("s-1"))) + Scale(g(Bseq, sg), (
    g(Vseq, sg) - Scale(a_s, Scale(eta_p, summ(
        "i", "1", "s-1", row(U0, "i") @ g(Kseq, "i").T @ g(Kseq, sg)))))) @ g(Kseq, sg).T
U0_END = Scale(eta(sg), u0k_sum(sg))

nb.forward("gdn.u0.ansatz", 153,
           r"\mathbf{S}_t = \eta_t \sum_{i=1}^{t} \boldsymbol{u^0}_i \boldsymbol{k}_i^\top",
           Truth("state", sg), U0_END, "gdn_chunk", row=1, assume=ZERO, **GLOBAL,
           what="S_t = eta_t sum u0_i k_i^T, eta_t = gamma_t, u0 by the recursion of line 169")
nb.forward("gdn.u0.step", 157,
           r"\mathbf{S}_t &= \alpha_t \mathbf{S}_{t-1} + \beta_t (\boldsymbol{v}_t - \alpha_t \mathbf{S}_{t-1} \boldsymbol{k}_t )\boldsymbol{k}_t^\top",
           S_t, Scale(alpha, Sp) + Scale(beta, v - Scale(alpha, Sp) @ k) @ k.T,
           "gated_deltanet_step", row=1, what="the update rewritten as a correction of alpha S")
U0_IND_TEX = (r"&= \alpha_t \eta_{t-1} \sum_{i=1}^{t-1} \boldsymbol{u^0}_i \boldsymbol{k}_i^\top + \beta_t "
              r"\left( \boldsymbol{v}_t - \alpha_t \eta_{t-1} \sum_{i=1}^{t-1} \boldsymbol{u^0}_i "
              r"\boldsymbol{k}_i^\top \boldsymbol{k}_t \right) \boldsymbol{k}_t^\top = \eta_t "
              r"\sum_{i=1}^{t} \boldsymbol{u^0}_i \boldsymbol{k}_i^\top")
nb.forward("gdn.u0.induction", 158, U0_IND_TEX, Truth("state", sg), U0_MIDDLE, "gdn_chunk",
           row=2, assume=ZERO, **GLOBAL,
           what="induction step: the hypothesis substituted into the update")
nb.identity("gdn.u0.induction_closes", 158, U0_IND_TEX, U0_MIDDLE, U0_END, "gdn_chunk", row=2,
            **GLOBAL, what="induction step: the substituted update is eta_t sum_{i<=t} u0_i k_i^T")
nb.identity("gdn.u0.eta", 167, r"\eta_t = \alpha_t \eta_{t-1} = \gamma_t",
            Scale(g(Aseq, sg), eta_prev(sg)), eta(sg), "gdn_chunk", row=1, **GLOBAL,
            what="eta_t = alpha_t eta_{t-1} (eta_0 = 1) is the global gamma_t")
nb.forward("gdn.u_form", 173,
           r"\mathbf{S}_t = \sum_{i=1}^{t} \frac{\gamma_t}{\gamma_i} \boldsymbol{u}_i \boldsymbol{k}_i^\top",
           Truth("state", sg), summ("i", "1", sg, Scale(HDiv(eta(sg), eta("i")), row(Ug, "i"))
                                   @ g(Kseq, "i").T),
           "gdn_chunk", row=1, assume=ZERO, **GLOBAL,
           what="S_t = sum gamma_t/gamma_i u_i k_i^T, u by the recursion of line 175")

# -- WY representation
nb.identity("gdn.WY_P", 179,
            r"\mathbf{P}_{[t]}^{r} = \mathbf{I} - \sum_{i=1}^{r} \boldsymbol{w}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i \top}",
            P_def("r"), I_k - summ("i", "1", "r", row(Wrec, "i") @ row(K, "i").T), "gdn_chunk",
            row=1, over=R_ALL, what="WY form of P^r, w by the recursion of line 181")
nb.identity("gdn.w_rec", 181,
            r"\boldsymbol{w}_{[t]}^{r} = \beta_{[t]}^{r} \boldsymbol{k}_{[t]}^{r} - \beta_{[t]}^{r} \sum_{i=1}^{r-1} \boldsymbol{w}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i \top} \boldsymbol{k}_{[t]}^{r}",
            row(W, "r"), Scale(bet("r"), row(K, "r")) - Scale(bet("r"), summ(
                "i", "1", "r-1", row(W, "i") @ row(K, "i").T @ row(K, "r"))),
            "gdn_chunk", row=1, over=R_ALL,
            what="the algorithm's W = T K satisfies the w recursion")


# -- S^r and o^r from u, w (the recursions of lines 237 and 181)
def u_(i):
    return row(Urec, i)


def w_(i):
    return row(Wrec, i)


def corr(i):                # u^i - S_[t-1]^C gamma^i w^i
    return u_(i) - S_PREV @ Scale(gam(i), w_(i))


nb.forward("gdn.S_r_wy", 185,
           r"\mathbf{S}_{[t]}^{r} &= \mathbf{S}_{[t-1]}^{C} \gamma_{[t]}^{r} \left(\mathbf{I} - \sum_{i=1}^{r} \boldsymbol{w}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i \top}\right) + \sum_{i=1}^{r} \frac{\gamma_{[t]}^{r}}{\gamma_{[t]}^{i}} \boldsymbol{u}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i\top}",
           Truth("state", s_),
           Scale(gam("r"), S_PREV) @ (I_k - summ("i", "1", "r", w_("i") @ row(K, "i").T))
           + summ("i", "1", "r", Scale(HDiv(gam("r"), gam("i")), u_("i")) @ row(K, "i").T),
           "gdn_chunk", row=1, over=R_ALL, what="S^r with the WY form and the u vectors")
nb.forward("gdn.S_r_grouped", 190,
           r"&= \gamma_{[t]}^{r} \mathbf{S}_{[t-1]}^{C} + \gamma_{[t]}^{r} \sum_{i=1}^{r} \left(\boldsymbol{u}_{[t]}^{i} - \mathbf{S}_{[t-1]}^{C} \gamma_{[t]}^{i} \boldsymbol{w}_{[t]}^{i} \right)\frac{\boldsymbol{k}_{[t]}^{i\top}}{\gamma_{[t]}^{i}}",
           Truth("state", s_),
           Scale(gam("r"), S_PREV) + Scale(gam("r"), summ(
               "i", "1", "r", corr("i") @ sdiv(row(K, "i").T, gam("i")))),
           "gdn_chunk", row=2, over=R_ALL, what="S^r regrouped")
nb.forward("gdn.o_r", 196,
           r"\boldsymbol{o}_{[t]}^{r} &= \mathbf{S}_{[t]}^{r} \boldsymbol{q}_{[t]}^{r} = \mathbf{S}_{[t-1]}^{C} \boldsymbol{q}_{[t]}^{r} \gamma_{[t]}^{r} + \sum_{i=1}^{r} \left(\boldsymbol{u}_{[t]}^{i} - \mathbf{S}_{[t-1]}^{C} \gamma_{[t]}^{i} \boldsymbol{w}_{[t]}^{i} \right)\frac{\boldsymbol{k}_{[t]}^{i\top}}{\gamma_{[t]}^{i}} \boldsymbol{q}_{[t]}^{r} \gamma_{[t]}^{r}",
           Truth("out", s_),
           Scale(gam("r"), S_PREV @ row(Q, "r")) + summ("i", "1", "r", Scale(
               gam("r"), corr("i") @ sdiv(row(K, "i").T, gam("i")) @ row(Q, "r"))),
           "gdn_chunk", row=3, over=R_ALL, what="output o^r")

# -- the <- / -> tiles (program defs Diag(gamma) X and Diag(gamma)^{-1} X) row by row
LARROW_TEX = r"\overleftarrow{\square_{[t]}} &= \text{Diag}(\boldsymbol{\gamma}_{[t]}) \square_{[t]}"
RARROW_TEX = (r"\overrightarrow{\square_{[t]}} = \text{Diag}(\boldsymbol{\gamma}_{[t]})^{-1} \square_{[t]} "
              r"\quad\text{for}\quad \square \in \{ \mathbf{Q}, \mathbf{K}, \mathbf{W}\}")
for name, Xl, Xb in (("Ql", Ql, Q), ("Kl", Kl, K), ("Wl", Wl, W)):
    nb.identity(f"gdn.arrow.{name}", 206, LARROW_TEX, Xl,
                Stack("i", Scale(gam("i"), row(Xb, "i"))), "gdn_chunk", row=1,
                what=f"<-{Xb.name}: row i is gamma^i {Xb.name.lower()}^i")
nb.identity("gdn.arrow.Kr", 211, RARROW_TEX, Kr, Stack("i", sdiv(row(K, "i"), gam("i"))),
            "gdn_chunk", row=1, what="->K: row i is k^i / gamma^i")

# -- matrix forms
nb.forward("gdn.S_matrix", 219,
           r"\mathbf{S}_{[t]}^{C} &= \gamma_{[t]}^{C} \mathbf{S}_{[t-1]}^{C} + \gamma_{[t]}^{C} \left(\mathbf{U}_{[t]}^\top - \mathbf{S}_{[t-1]}^{C} \overleftarrow{\mathbf{W}_{[t]}}^\top \right)\overrightarrow{\mathbf{K}_{[t]}}",
           Truth("state", "t*C+C"), S_FORMULA, "gdn_chunk", row=1,
           what="chunk-end state, matrix form")
nb.forward("gdn.O_matrix", 226,
           r"\mathbf{O}_{[t]} &= \overleftarrow{\mathbf{Q}_{[t]}} \mathbf{S}_{[t-1]}^{C \top} + \left( \overleftarrow{\mathbf{Q}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M} \right) \left(\mathbf{U}_{[t]} - \overleftarrow{\mathbf{W}_{[t]}} \mathbf{S}_{[t-1]}^{C \top} \right)",
           Truth("outs"), O_FORMULA, "gdn_chunk", row=2, what="chunk outputs, matrix form")

# -- U, W, T, T~
nb.identity("gdn.u_rec", 237,
            r"\boldsymbol{u}_{[t]}^{r} &= \beta_{[t]}^{r} \left( \boldsymbol{v}_{[t]}^{r} - \sum_{i=1}^{r-1} \frac{\gamma_{[t]}^{r}}{\gamma_{[t]}^{i}} \boldsymbol{u}_{[t]}^{i} \boldsymbol{k}_{[t]}^{i \top} \boldsymbol{k}_{[t]}^{r} \right)",
            row(U, "r"), Scale(bet("r"), row(V, "r") - summ(
                "i", "1", "r-1", Scale(HDiv(gam("r"), gam("i")), row(U, "i")) @ row(K, "i").T
                @ row(K, "r"))),
            "gdn_chunk", row=1, over=R_ALL,
            what="the algorithm's U = T~ V satisfies the chunk u recursion")
nb.identity("gdn.U_implicit", 240,
            r"\Rightarrow \mathbf{U}_{[t]} &= \text{Diag}(\boldsymbol{\beta}_{[t]}) \mathbf{V}_{[t]} - \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \mathbf{U}_{[t]}",
            U, diag(Be) @ V - diag(Be) @ M1(Kl @ Kr.T) @ U, "gdn_chunk", row=2,
            what="the u recursion in matrix form")
nb.identity("gdn.U_inverse", 248,
            r"\Rightarrow \mathbf{U}_{[t]} &= \left(\mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \text{Diag}(\boldsymbol{\beta}_{[t]}) \mathbf{V}_{[t]}",
            Urec, inv(I_C + diag(Be) @ M1(Kl @ Kr.T)) @ diag(Be) @ V, "gdn_chunk", row=3,
            what="U solved: the recursion's U equals the inverse form")
nb.identity("gdn.W_inverse", 255,
            r"\mathbf{W}_{[t]} = \left(\mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \mathbf{K}_{[t]} \mathbf{K}_{[t]}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \text{Diag}(\boldsymbol{\beta}_{[t]}) \mathbf{K}_{[t]}",
            Wrec, inv(I_C + diag(Be) @ M1(K @ K.T)) @ diag(Be) @ K, "gdn_chunk", row=1,
            what="W solved: the recursion's W equals the inverse form")
nb.identity("gdn.T_def", 261,
            r"\mathbf{T}_{[t]} = \left(\mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \mathbf{K}_{[t]} \mathbf{K}_{[t]}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \text{Diag}(\boldsymbol{\beta}_{[t]})",
            Wrec, T_FORMULA @ K, "gdn_chunk", row=1,
            what="definition of T, checked through its use W = T K")
nb.identity("gdn.Tt_def", 267,
            r"\mathbf{\widetilde{T}}_{[t]} = \left(\mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \overleftarrow{\mathbf{K}_{[t]}} \overrightarrow{\mathbf{K}_{[t]}}^\top \odot \mathbf{M}_{-1} \right) \right)^{-1} \text{Diag}(\boldsymbol{\beta}_{[t]})",
            Urec, TT_FORMULA @ V, "gdn_chunk", row=1,
            what="definition of T~, checked through its use U = T~ V")
# "Diag(beta)(K K^T odot Gamma) odot M_{-1}": read as (Diag(beta)(...)) odot M_{-1}; the other
# reading Diag(beta)((...) odot M_{-1}) is the same matrix (Diag scales rows).
nb.identity("gdn.Tt_Gamma", 273,
            r"\mathbf{\widetilde{T}}_{[t]} = \left(\mathbf{I} + \text{Diag}(\boldsymbol{\beta}_{[t]}) \left( \mathbf{K}_{[t]} \mathbf{K}_{[t]}^\top \odot \mathbf{\Gamma}_{[t]} \right) \odot \mathbf{M}_{-1} \right)^{-1} \text{Diag}(\boldsymbol{\beta}_{[t]}) ,\quad (\mathbf{\Gamma}_{[t]})_{ij} = \frac{\gamma_i}{\gamma_j}",
            Tt, inv(I_C + M1(diag(Be) @ (K @ K.T * GammaIJ))) @ diag(Be), "gdn_chunk", row=1,
            what="T~ with (Gamma)_ij = gamma_i / gamma_j, the paper's form")

# ============================================================== extra: chunk backward
# Not in the note.  The forward rewritten as in note 001 (KDA), with a scalar gate:
#   X~ = I + Diag(beta)(<-K ->K^T odot M_{-1}),  A~ = X~^{-1},
#   <-W = A~ Diag(beta) <-K  (= Diag(gamma) T K, the note's <-W; see gdn.bwd.link_W),
#   U = A~ Diag(beta) V,  V_new = U - <-W S^T,
#   O = <-Q S^T + (<-Q ->K^T odot M) V_new,  S^C = gamma^C (S + V_new^T ->K).
# L = <dO, O> + <dS_T, S_T>; adj(...) on the right-hand sides are the true adjoints.
BWD = "4.1 前向传播"
BWD_LINE = 118
Xt = tile("Xt", "C", "C", r"\widetilde{\mathbf{X}}_{[t]}")
At = tile("At", "C", "C", r"\widetilde{\mathbf{A}}_{[t]}")
Vnew = tile("Vnew", "C", "Dv", r"\mathbf{V}_{[t],new}")
GDN_KDA = Program("gdn_chunk_kda", "chunk", [
    ("Gamma", CumProd(Al)),
    ("gC", LastRow(Gamma)),
    ("Ql", diag(Gamma) @ Q),
    ("Kl", diag(Gamma) @ K),
    ("Kr", inv(diag(Gamma)) @ K),
    ("Xt", I_C + diag(Be) @ M1(Kl @ Kr.T)),
    ("At", inv(Xt)),
    ("Wl", At @ diag(Be) @ Kl),
    ("U", At @ diag(Be) @ V),
    ("Vnew", U - Wl @ S_PREV.T),
    ("O", Ql @ S_PREV.T + tril(Ql @ Kr.T) @ Vnew),
    ("S", Scale(gC, S_PREV + Vnew.T @ Kr)),
], description="Gated DeltaNet chunk forward in the KDA (note 001) layout, for the backward")
D.add_program(GDN_KDA)

dS, dO_ = adj(S), DO
DVNEW = Scale(gC, Kr @ dS.T) + tril(Ql @ Kr.T).T @ dO_
DLOGGAMMA = ((adj(Q) * Q + (diag(Gamma) @ adj(Kl)) * K - (inv(diag(Gamma)) @ adj(Kr)) * K)
             @ Ones("Dk", "1") + PlaceLast(Inner(S, dS)))

nb.section(BWD)


def bwd(kind, id, lhs, rhs, what, program="gdn_chunk_kda", **kw):
    getattr(nb, kind)("gdn.bwd." + id, BWD_LINE, "", lhs, rhs, program,
                      what="derived: " + what, **kw)


bwd("identity", "link_W", Wl, Tt @ Kl,
    "the KDA-layout W = T~ <-K equals the note's <-W = Diag(gamma) T K", program="gdn_chunk")
bwd("forward", "fwd_O", Truth("outs"), O, "the KDA-layout program's outputs are the recurrence's")
bwd("forward", "fwd_S", Truth("state", "t*C+C"), S, "the KDA-layout program's state is the recurrence's")
bwd("adjoint", "dVnew", adj(Vnew), DVNEW, "dV_new = gamma^C ->K dS^T + (<-Q ->K^T odot M)^T dO")
bwd("adjoint", "dU", adj(U), DVNEW, "dU = dV_new")
bwd("adjoint", "dW", adj(Wl), -adj(Vnew) @ S_PREV, "d<-W = -dV_new S_[t-1]^C")
bwd("adjoint", "dS_prev", adj(S_PREV), Scale(gC, dS) + dO_.T @ Ql - adj(U).T @ Wl,
    "dS_[t-1]^C = gamma^C dS_[t]^C + dO^T <-Q - dU^T <-W")
bwd("adjoint", "dS_rec", dS,
    Scale(shift(gC), shift(dS)) + shift(dO_).T @ shift(Ql) - shift(adj(U)).T @ shift(Wl),
    "dS recursion: dS_[t] = gamma_[t+1]^C dS_[t+1] + dO_[t+1]^T <-Q_[t+1] - dU_[t+1]^T <-W_[t+1]",
    blocks="not_last")
bwd("adjoint", "dQl", adj(Ql), dO_ @ S_PREV + tril(dO_ @ Vnew.T) @ Kr,
    "d<-Q = dO S + (dO V_new^T odot M) ->K")
bwd("adjoint", "dQ", adj(Q), diag(Gamma) @ adj(Ql), "dQ = Diag(gamma) d<-Q")
bwd("adjoint", "dV", adj(V), diag(Be) @ At.T @ adj(U), "dV = Diag(beta) A~^T dU")
bwd("adjoint", "dA", adj(At), adj(Wl) @ Kl.T @ diag(Be) + adj(U) @ V.T @ diag(Be),
    "dA~ = d<-W <-K^T Diag(beta) + dU V^T Diag(beta)")
bwd("adjoint", "dX", adj(Xt), -(At.T @ adj(At) @ At.T), "dX~ = -A~^T dA~ A~^T")
bwd("adjoint", "dKl", adj(Kl), diag(Be) @ At.T @ adj(Wl) + M1(diag(Be) @ adj(Xt)) @ Kr,
    "d<-K = Diag(beta) A~^T d<-W + (Diag(beta) dX~ odot M_{-1}) ->K")
bwd("adjoint", "dKr", adj(Kr),
    Scale(gC, Vnew @ dS) + tril(dO_ @ Vnew.T).T @ Ql + M1(diag(Be) @ adj(Xt)).T @ Kl,
    "d->K = gamma^C V_new dS + (dO V_new^T odot M)^T <-Q + (Diag(beta) dX~ odot M_{-1})^T <-K")
bwd("adjoint", "dK", adj(K), diag(Gamma) @ adj(Kl) + inv(diag(Gamma)) @ adj(Kr),
    "dK = Diag(gamma) d<-K + Diag(gamma)^{-1} d->K")
bwd("adjoint", "dbeta", adj(Be),
    DiagV(At.T @ adj(Wl) @ Kl.T + At.T @ adj(U) @ V.T + adj(Xt) @ M1(Kl @ Kr.T).T),
    "dbeta = diag(A~^T d<-W <-K^T + A~^T dU V^T + dX~ (<-K ->K^T odot M_{-1})^T)")
bwd("adjoint", "dbeta_short", adj(Be),
    DiagV(At.T @ adj(At)) / Be + DiagV(M1(adj(Xt)) @ (Kr @ Kl.T)),
    "dbeta = diag(A~^T dA~) / beta + diag((dX~ odot M_{-1}) ->K <-K^T)")
bwd("adjoint", "dgC", adj(gC), Inner(S_PREV + Vnew.T @ Kr, dS),
    "dgamma^C = <S_[t-1]^C + V_new^T ->K, dS_[t]^C>")
bwd("identity", "dlogGamma", adj(Gamma) * Gamma, DLOGGAMMA,
    "dlog gamma = rowsum(dQ odot Q + (Diag(gamma) d<-K) odot K - (Diag(gamma)^{-1} d->K) odot K)"
    " + [0, ..., <S_[t]^C, dS_[t]^C>]^T")
bwd("identity", "dlogalpha", adj(Al) * Al, RevCumSum(DLOGGAMMA),
    "dlog alpha = suffix sums of dlog gamma within the chunk")
bwd("adjoint", "dalpha", adj(Al), RevCumSum(DLOGGAMMA) / Al,
    "dalpha = suffix sums of dlog gamma, divided by alpha (checked against the recurrence)")

# The same gradient, grouped for rounding (what the kernel prints).  Expanding
# rowsum(dQ . Q), rowsum(d<-K . <-K) and rowsum(d->K . ->K) pairs the intra-chunk terms:
# each (i, j) entry of P = (dO V_new^T . M) . (<-Q ->K^T) + (Diag(beta) dX~ . M_{-1}) . (<-K ->K^T)
# adds to row i and subtracts from row j, so in the suffix sums every pair with both ends
# past a row cancels exactly, also in floating point (the dlogGamma form computes the two
# ends through differently rounded products: bf16 gate gradients 9x FLA's error on the
# H200).  The state term E = gamma^C rowsum(V_new dS . ->K) is subtracted per row and its
# sum added to the last row (<S, dS> = gamma^C <S_[t-1], dS> + 1^T E), as FLA groups it.
ONES_C = Ones("C", "1")
PAIRS = tril(dO_ @ Vnew.T) * tril(Ql @ Kr.T) + M1(diag(Be) @ adj(Xt)) * M1(Kl @ Kr.T)
E_STATE = (Vnew @ dS * Scale(gC, Kr)) @ Ones("Dk", "1")     # gamma^C on ->K: exp(g^C - g_i) <= 1


def paired(rows):
    """dlog gamma from its per-row terms ``rows`` (the state and W parts), with the
    intra-chunk pairs and the state term grouped as above."""
    return (rows - E_STATE + PAIRS @ ONES_C - PAIRS.T @ ONES_C
            + PlaceLast(Scale(gC, Inner(S_PREV, dS)) + ONES_C.T @ E_STATE))


DLOGGAMMA_PAIRS = paired(((dO_ @ S_PREV) * Ql + (diag(Be) @ At.T @ adj(Wl)) * Kl) @ Ones("Dk", "1"))
bwd("identity", "dlogGamma_pairs", adj(Gamma) * Gamma, DLOGGAMMA_PAIRS,
    "dlog gamma = rowsum(dO S . <-Q + Diag(beta) A~^T d<-W . <-K) - E + P 1 - P^T 1"
    " + [0, ..., gamma^C <S_[t-1], dS> + 1^T E]^T,  P the intra-chunk pairs, E the state term")
bwd("identity", "dlogalpha_pairs", adj(Al) * Al, RevCumSum(DLOGGAMMA_PAIRS),
    "dlog alpha = suffix sums of the paired dlog gamma within the chunk")

# dbeta and the gate gradient once more, grouped so that the kernel forms fewer C x Dk
# products: diag(A~^T X Y) taken as diag(A~^T (X Y)) reads the C x C product X Y, and
# d<-W <-K^T is already formed for dA~ (and dU V^T with it; each term apart, so that the
# kernel's product is the same as dA~'s and formed once), so no C x C x Dk product is
# left in dbeta, and rowsum(Diag(beta) A~^T d<-W . <-K) becomes beta . diag(A~^T (d<-W <-K^T)).
DWK = adj(Wl) @ Kl.T
bwd("adjoint", "dbeta_grouped", adj(Be),
    DiagV(At.T @ DWK) + DiagV(At.T @ (adj(U) @ V.T)) + DiagV(adj(Xt) @ M1(Kl @ Kr.T).T),
    "dbeta = diag(A~^T (d<-W <-K^T)) + diag(A~^T (dU V^T)) + diag(dX~ (<-K ->K^T odot M_{-1})^T)")
DLOGGAMMA_GROUPED = paired(((dO_ @ S_PREV) * Ql) @ Ones("Dk", "1") + diag(Be) @ DiagV(At.T @ DWK))
bwd("identity", "dlogGamma_grouped", adj(Gamma) * Gamma, DLOGGAMMA_GROUPED,
    "dlog gamma = rowsum(dO S . <-Q) + beta . diag(A~^T (d<-W <-K^T)) - E + P 1 - P^T 1"
    " + [0, ..., gamma^C <S_[t-1], dS> + 1^T E]^T")
bwd("identity", "dlogalpha_grouped", adj(Al) * Al, RevCumSum(DLOGGAMMA_GROUPED),
    "dlog alpha = suffix sums of the grouped dlog gamma within the chunk")


# the kernel printed from this derivation (chunkproof gen; derivations/kernel.py)
kernel(D, "chunk_gated_delta_rule", GDN_KDA, outputs="gdn.bwd.fwd_O", state="gdn.bwd.fwd_S",
       args=dict(q="Q", k="K", v="V", g=log_of("Alpha"), beta="Beta"),
       backward=dict(dS="gdn.bwd.dS_rec", dS_prev="gdn.bwd.dS_prev",
                     grads=dict(q="gdn.bwd.dQ", k="gdn.bwd.dK", v="gdn.bwd.dV", g="gdn.bwd.dlogalpha_grouped",
                                beta="gdn.bwd.dbeta_grouped"),
                     inner=["gdn.bwd." + n for n in ("dVnew", "dU", "dW", "dQl", "dA", "dX", "dKl", "dKr")]),
       doc="S_t = S_{t-1} exp(g_t)(I - beta_t k_t k_t^T) + beta_t v_t k_t^T,  o_t = S_t q_t")

DERIVATION = D
