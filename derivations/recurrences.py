"""Ground-truth per-step recurrences, in the notes' V x K form (S is Dv x Dk,
o_t = S_t q_t).  Each is a step program over column-vector inputs."""
from __future__ import annotations

from .dsl import Input, Program, Recurrence, diag, eye, param
from .ir import Exp, Ones, Scale, Var

q = Var("q", "Dk", "1", r"\boldsymbol{q}_t")
k = Var("k", "Dk", "1", r"\boldsymbol{k}_t")
v = Var("v", "Dv", "1", r"\boldsymbol{v}_t")
alpha = Var("alpha", "Dk", "1", r"\boldsymbol{\alpha}_t")
alpha_s = Var("alpha", "1", "1", r"\alpha_t")
beta = Var("beta", "1", "1", r"\beta_t")
a = Var("a", "Dk", "1", r"\boldsymbol{a}_t")
b = Var("b", "Dk", "1", r"\boldsymbol{b}_t")
d = Var("d", "Dk", "1", r"\boldsymbol{d}_t")
S = Var("S", "Dv", "Dk", r"\mathbf{S}_t")
S_PREV = Var("S_prev", "Dv", "Dk", r"\mathbf{S}_{t-1}")

QKV = [Input("Q", "q", "Dk", tex=r"\mathbf{Q}", step_tex=r"\boldsymbol{q}"),
       Input("K", "k", "Dk", tex=r"\mathbf{K}", step_tex=r"\boldsymbol{k}"),
       Input("V", "v", "Dv", tex=r"\mathbf{V}", step_tex=r"\boldsymbol{v}")]
GATE_VEC = Input("Alpha", "alpha", "Dk", "gate", r"\mathbf{A}", r"\boldsymbol{\alpha}")
GATE_SCALAR = Input("Alpha", "alpha", "1", "gate", r"\boldsymbol{\alpha}", r"\alpha")
BETA = Input("Beta", "beta", "1", "beta", r"\boldsymbol{\beta}", r"\beta")


def _rec(name, inputs, S_expr, tex, extra=(), O_expr=None):
    prog = Program(f"{name}_step", "step",
                   list(extra) + [("S", S_expr), ("O", S @ q if O_expr is None else O_expr)],
                   description=f"the {name} recurrence, one step")
    return Recurrence(name, inputs, prog, tex)


# time-invariant parameters: one value for every step
gamma_p = param("gamma", tex=r"\gamma", kind="gate")
scale_p = param("scale", tex=r"\tau", kind="beta")
u_p = param("u", "Dk", "1", r"\boldsymbol{u}")
g = Var("g", "Dk", "1", r"\boldsymbol{g}_t")
LOG_GATE_VEC = Input("G", "g", "Dk", "loggate", r"\mathbf{G}", r"\boldsymbol{g}")
g_s = Var("g", "1", "1", r"g_t")
LOG_GATE_SCALAR = Input("G", "g", "1", "loggate", r"\boldsymbol{g}", r"g")


def linear_attention():
    return _rec("linear_attention", QKV, S_PREV + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def gla():
    return _rec("gla", QKV + [GATE_VEC], S_PREV @ diag(alpha) + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1}\text{Diag}(\boldsymbol{\alpha}_t) + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def mamba2():
    return _rec("mamba2", QKV + [GATE_SCALAR], Scale(alpha_s, S_PREV) + v @ k.T,
                r"\mathbf{S}_t = \alpha_t \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def deltanet():
    return _rec("deltanet", QKV + [BETA],
                S_PREV @ (eye("Dk") - Scale(beta, k @ k.T)) + Scale(beta, v @ k.T),
                r"\mathbf{S}_t = \mathbf{S}_{t-1}(\mathbf{I} - \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def gated_deltanet():
    return _rec("gated_deltanet", QKV + [GATE_SCALAR, BETA],
                Scale(alpha_s, S_PREV) @ (eye("Dk") - Scale(beta, k @ k.T)) + Scale(beta, v @ k.T),
                r"\mathbf{S}_t = \mathbf{S}_{t-1}\alpha_t (\mathbf{I} - \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def kda():
    return _rec("kda", QKV + [GATE_VEC, BETA],
                S_PREV @ diag(alpha) @ (eye("Dk") - Scale(beta, k @ k.T)) + Scale(beta, v @ k.T),
                r"\mathbf{S}_t = \mathbf{S}_{t-1}\text{Diag}(\boldsymbol{\alpha}_t)(\mathbf{I} - \beta_t \boldsymbol{k}_t \boldsymbol{k}_t^\top) + \beta_t \boldsymbol{v}_t \boldsymbol{k}_t^\top")


AB = [Input("A", "a", "Dk", tex=r"\mathbf{A}", step_tex=r"\boldsymbol{a}"),
      Input("B", "b", "Dk", tex=r"\mathbf{B}", step_tex=r"\boldsymbol{b}")]


def dplr():
    """Note 000's gated form: S_t = S_{t-1} Diag(alpha_t)(I - b_t a_t^T) + v_t k_t^T."""
    return _rec("dplr", QKV + [GATE_VEC] + AB,
                S_PREV @ diag(alpha) @ (eye("Dk") - b @ a.T) + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1}\text{Diag}(\boldsymbol{\alpha}_t)(\mathbf{I} - \boldsymbol{b}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def dplr_nogate():
    """Note 000's last section: S_t = S_{t-1}(Diag(alpha_t) - d_t a_t^T) + v_t k_t^T."""
    return _rec("dplr_nogate", QKV + [GATE_VEC, AB[0], Input("D", "d", "Dk", tex=r"\mathbf{D}",
                                                               step_tex=r"\boldsymbol{d}")],
                S_PREV @ (diag(alpha) - d @ a.T) + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1}(\text{Diag}(\boldsymbol{\alpha}_t) - \boldsymbol{d}_t \boldsymbol{a}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def dplr_fla():
    """FLA's DPLR convention: S_t = S_{t-1}(Diag(alpha_t) + a_t b_t^T) + v_t k_t^T.  It is
    note 000's no-gate form with d_t = -a_t and the note's a_t = b_t."""
    return _rec("dplr_fla", QKV + [GATE_VEC] + AB,
                S_PREV @ (diag(alpha) + a @ b.T) + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1}(\text{Diag}(\boldsymbol{\alpha}_t) + \boldsymbol{a}_t \boldsymbol{b}_t^\top) + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def gla_hadamard_step():
    """Note 003 section 6.1's form S_t = G_t odot S_{t-1} + v_t k_t^T, G_t = 1 alpha_t^T."""
    G = Var("G", "Dv", "Dk", r"\mathbf{G}_t")
    return Program("gla_G_step", "step",
                   [("G", Ones("Dv", "1") @ alpha.T), ("S", G * S_PREV + v @ k.T), ("O", S @ q)],
                   description="GLA with the gate as a Hadamard factor G_t = 1 alpha_t^T")


def retnet():
    """RetNet: a decay gamma and a scale tau shared by all steps (parameters),
    S_t = gamma S_{t-1} + v_t k_t^T, o_t = tau S_t q_t."""
    return _rec("retnet", QKV, gamma_p * S_PREV + v @ k.T,
                r"\mathbf{S}_t = \gamma \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top, "
                r"\boldsymbol{o}_t = \tau \mathbf{S}_t \boldsymbol{q}_t", O_expr=scale_p * (S @ q))


def gla_log():
    """GLA with log-space gates, as kernels take them: g_t = log alpha_t,
    S_t = S_{t-1} Diag(exp(g_t)) + v_t k_t^T."""
    return _rec("gla_log", QKV + [LOG_GATE_VEC], S_PREV @ diag(Exp(g)) + v @ k.T,
                r"\mathbf{S}_t = \mathbf{S}_{t-1}\text{Diag}(\exp \boldsymbol{g}_t) + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def simple_gla():
    """One log-space gate per step, g_t = log alpha_t (Mamba2 / SSD as kernels take it),
    S_t = exp(g_t) S_{t-1} + v_t k_t^T."""
    return _rec("simple_gla", QKV + [LOG_GATE_SCALAR], Scale(Exp(g_s), S_PREV) + v @ k.T,
                r"\mathbf{S}_t = \exp(g_t) \mathbf{S}_{t-1} + \boldsymbol{v}_t \boldsymbol{k}_t^\top")


def rwkv6():
    """RWKV-6 in the V x K form: log-space decays and a bonus u shared by all steps,
    S_t = S_{t-1} Diag(exp(g_t)) + v_t k_t^T, o_t = S_{t-1} q_t + v_t (u . k_t)^T q_t."""
    return _rec("rwkv6", QKV + [LOG_GATE_VEC], S_PREV @ diag(Exp(g)) + v @ k.T,
                r"\boldsymbol{o}_t = \mathbf{S}_{t-1} \boldsymbol{q}_t + \boldsymbol{v}_t (\boldsymbol{u} \odot \boldsymbol{k}_t)^\top \boldsymbol{q}_t",
                O_expr=S_PREV @ q + v @ ((u_p * k).T @ q))
