"""FLA's keywords beyond the ones every generated function takes (its tensors, scale,
initial_state, output_final_state), per public function, as FLA 0.6.0 declares them:
its signatures in fla/ops/<op>/chunk.py and the keywords those functions read from
**kwargs.  Each has the value at which it asks for nothing (FLA's default) and what it
asks for.  A generated function accepts such a keyword at that value (FLA's layers pass
``cu_seqlens=None`` explicitly) and refuses any other value by name, and refuses a
keyword FLA does not know either (docs/fla_api.md has the table).  A keyword with
``allowed`` values is supported: those values are passed on to the kernels."""
from typing import Dict, NamedTuple, Tuple


class Keyword(NamedTuple):
    name: str
    default: object        # None, False or an int: printed as a literal into the module
    what: str              # what FLA does with it, for the refusal
    allowed: tuple = ()    # other values chunkproof supports (passed on); () : refused


def _k(name, default, what, allowed=()):
    return Keyword(name, default, what, tuple(allowed))


CU_SEQLENS = _k("cu_seqlens", None, "variable-length batches (packed sequences, B = 1)", ("tensor",))
CU_SEQLENS_CPU = _k("cu_seqlens_cpu", None, "a host copy of cu_seqlens", ("tensor",))
CHUNK_INDICES = _k("chunk_indices", None, "precomputed chunk indices for cu_seqlens", ("tensor",))
STATE_V_FIRST = _k("state_v_first", False, "states laid out [N, H, V, K]", (True,))
TRANSPOSED = _k("transpose_state_layout", False, "the deprecated name of state_v_first", (True,))
HEAD_FIRST = _k("head_first", False, "head-first [B, H, T, ...] inputs, removed from FLA")
CP = _k("cp_context", None, "context parallelism")
L2NORM = _k("use_qk_l2norm_in_kernel", False, "L2-normalising q and k inside the kernel", (True,))
BETA_SIGMOID = _k("use_beta_sigmoid_in_kernel", False, "beta = sigmoid(beta) inside the kernel", (True,))
NEG_EIGVAL = _k("allow_neg_eigval", False, "beta scaled to (0, 2)", (True,))
GATE_IN_KERNEL = _k("use_gate_in_kernel", False, "the gate computed inside the kernel from A_log and dt_bias",
                    (True,))
# allowed "tensor" / "number": any tensor / any real number (checked where it is used)
A_LOG = _k("A_log", None, "the in-kernel gate's A_log", ("tensor",))
DT_BIAS = _k("dt_bias", None, "the in-kernel gate's dt_bias", ("tensor",))
# promises about the inputs for a faster FLA path: chunkproof's kernels need none and
# compute the same function ("promise": accepted, checked as FLA checks it, not passed on)
SAFE_GATE = _k("safe_gate", False, "gates promised in a safe range, about [-5, 0) (a faster path in FLA)",
               (True, "promise"))
LOWER_BOUND = _k("lower_bound", None, "gates promised >= lower_bound (a faster path in FLA)",
                 ("negative", "promise"))
GATE_BOUND = _k("lower_bound", None, "the in-kernel gate's bound: lower_bound * sigmoid(...)", ("number",))
# a promise that the gates are >= lower_bound, for a faster FLA path; chunkproof's kernels
# need none and compute the same function (FLA's check of the bound is kept)
PROMISED = _k("safe_gate", False, "gates promised >= lower_bound (a faster path in FLA)", (True,))
NO_RECOMPUTE = _k("disable_recompute", False, "storing forward intermediates instead of recomputing them", (True,))


def _chunk_size(default, allowed=(16, 32, 64)):
    # the sizes FLA allows that the kernels take (powers of two from 16); the default asks
    # for nothing: TILING's BT (fp32_BT for fp32 inputs)
    return _k("chunk_size", default, "the chunk length", allowed)


KEYWORDS: Dict[str, Tuple[Keyword, ...]] = {
    "chunk_gla": (STATE_V_FIRST, CU_SEQLENS, CU_SEQLENS_CPU),
    "chunk_gated_delta_rule": (
        L2NORM, BETA_SIGMOID, NEG_EIGVAL, STATE_V_FIRST, CU_SEQLENS, CU_SEQLENS_CPU, CHUNK_INDICES, CP,
        TRANSPOSED, HEAD_FIRST, _chunk_size(64), GATE_IN_KERNEL, A_LOG, DT_BIAS),
    "chunk_kda": (
        L2NORM, GATE_IN_KERNEL, BETA_SIGMOID, NEG_EIGVAL, PROMISED, GATE_BOUND, NO_RECOMPUTE,
        _k("return_intermediate_states", False, "returning the chunk states as well", (True,)), STATE_V_FIRST,
        CU_SEQLENS, CU_SEQLENS_CPU, CP, _k("use_graph", False, "Ascend graph mode"),
        _k("max_num_seqs", None, "Ascend graph mode's sequence bound"), TRANSPOSED, A_LOG, DT_BIAS,
        _chunk_size(64, (32, 64))),
    "chunk_dplr_delta_rule": (
        CU_SEQLENS, CU_SEQLENS_CPU, SAFE_GATE, _chunk_size(None), NO_RECOMPUTE, CP, LOWER_BOUND, HEAD_FIRST),
    "chunk_delta_rule": (L2NORM, CU_SEQLENS, CU_SEQLENS_CPU, HEAD_FIRST, _chunk_size(64)),
    "chunk_simple_gla": (STATE_V_FIRST, CU_SEQLENS, CU_SEQLENS_CPU, HEAD_FIRST, _chunk_size(None)),
    "chunk_retention": (CU_SEQLENS, HEAD_FIRST, _chunk_size(None)),
    "chunk_rwkv6": (CU_SEQLENS, CU_SEQLENS_CPU),
}


# the arguments grouped value attention shares across value heads (FLA's GVA: HV value
# heads, H = HV / G query/key heads, value head h reading query/key head h // G)
GROUPED = ("q", "k")


def grouped(name: str, kind: str) -> bool:
    """Whether an argument (its name and Arg kind) is read from the query/key heads."""
    return name in GROUPED and kind == "k"


# what every other generated function (a user's derivation, FLA has no namesake) takes:
# variable-length batches are the kernels' own, not FLA's
EVERY = (CU_SEQLENS, CU_SEQLENS_CPU)


# FLA's reverse: the recurrence run from each sequence's last token to its first
REVERSE = _k("reverse", False, "the recurrence run from the last token to the first", (True,))

# FLA's fused_recurrent_<op> keywords (fla/ops/<op>/fused_recurrent.py, FLA 0.6.0): not
# its chunk function's (no chunk size, no host copy of cu_seqlens).  reverse is every
# recurrent form's, FLA's namesake having it or not (FLA's Gated DeltaNet, KDA and
# DeltaNet forms have none: the first two ignore it in **kwargs)
RECURRENT_KEYWORDS: Dict[str, Tuple[Keyword, ...]] = {
    "fused_recurrent_gla": (REVERSE, STATE_V_FIRST, CU_SEQLENS, TRANSPOSED),
    "fused_recurrent_gated_delta_rule": (
        L2NORM, GATE_IN_KERNEL, A_LOG, DT_BIAS, BETA_SIGMOID, NEG_EIGVAL, STATE_V_FIRST, CU_SEQLENS, TRANSPOSED,
        REVERSE),
    "fused_recurrent_kda": (
        A_LOG, DT_BIAS, L2NORM, GATE_IN_KERNEL, BETA_SIGMOID, NEG_EIGVAL, GATE_BOUND, STATE_V_FIRST, CU_SEQLENS,
        TRANSPOSED, REVERSE),
    "fused_recurrent_dplr_delta_rule": (REVERSE, CU_SEQLENS),
    "fused_recurrent_delta_rule": (L2NORM, CU_SEQLENS, REVERSE),
    "fused_recurrent_simple_gla": (REVERSE, STATE_V_FIRST, CU_SEQLENS, TRANSPOSED),
    "fused_recurrent_retention": (REVERSE, STATE_V_FIRST, CU_SEQLENS, TRANSPOSED),
    "fused_recurrent_rwkv6": (REVERSE, CU_SEQLENS),
}


class Param(NamedTuple):
    """One of FLA's tensor parameters, in FLA's order, where it differs from the
    derivation's arguments: ``arg`` the argument it binds (None: FLA's alone, accepted
    at None and refused otherwise); ``none`` what None stands for ("": required,
    "zeros", "ones"; "keyword": an FLA keyword FLA's signature places among the tensors);
    ``per_head``: a [HV] value for every token (FLA's g_gamma)."""
    name: str
    arg: object = None
    none: str = ""
    what: str = ""
    per_head: bool = False


def _p(name, arg=None, none="", what="", per_head=False):
    return Param(name, name if arg is True else arg, none, what, per_head)


_QKV = (_p("q", True), _p("k", True), _p("v", True))
_NO_DECAY = _p("g", True, "zeros")
_GAMMA = _p("g_gamma", "g", "zeros", "a fixed log decay per head instead of g", per_head=True)
# FLA's signatures whose tensor parameters are not the derivation's arguments by name and
# order; every other function takes its derivation's arguments, all required
PARAMS: Dict[str, Tuple[Param, ...]] = {
    "chunk_rwkv6": (_p("r", "q"),) + _QKV[1:] + (_p("w", True), _p("u", True)),
    "fused_recurrent_rwkv6": (_p("r", "q"),) + _QKV[1:] + (_p("w", True), _p("u", True)),
    "chunk_simple_gla": _QKV + (_NO_DECAY, _GAMMA),
    "fused_recurrent_simple_gla": _QKV + (_NO_DECAY, _GAMMA),
    "fused_recurrent_gla": _QKV + (_p("gk", "g", "zeros"), _p("gv", what="a log decay of the value dimension")),
    "fused_recurrent_gated_delta_rule": _QKV + (
        _NO_DECAY, _p("gk", what="a log decay per key channel (KDA's gate)"),
        _p("gv", what="a log decay of the value dimension"), _p("beta", True, "ones")),
    "fused_recurrent_kda": _QKV + (_p("g", True), _p("beta", True), _p("A_log", none="keyword"),
                                   _p("dt_bias", none="keyword")),
    "fused_recurrent_delta_rule": _QKV + (_p("beta", True, "ones"),),
}


def params(func: str, args) -> Tuple[Param, ...]:
    """``func``'s tensor parameters: FLA's (PARAMS), or the derivation's ``args`` (names)."""
    return PARAMS.get(func) or tuple(_p(a, True) for a in args)


def params_literal(func: str, args) -> str:
    return repr(tuple(tuple(p) for p in params(func, args)))


def signature(func: str, args) -> str:
    """The tensor parameters as the generated function's def line prints them."""
    return ", ".join(p.name if p.none == "" and p.arg is not None else f"{p.name}=None"
                     for p in params(func, args))


def recurrent_name(func: str) -> str:
    """The recurrent form's name: FLA's fused_recurrent_<op> for chunk_<op>."""
    return "fused_recurrent_" + (func[len("chunk_"):] if func.startswith("chunk_") else func)


def keywords(func: str) -> Tuple[Keyword, ...]:
    """FLA's keywords of ``func`` (a chunk function, or its recurrent form); for a
    function FLA does not have, EVERY (and reverse for a recurrent form)."""
    if func.startswith("fused_recurrent_"):
        return RECURRENT_KEYWORDS.get(func, EVERY + (REVERSE,))
    return KEYWORDS.get(func, EVERY)


def literal(func: str) -> str:
    """The table as the generated module holds it: ((name, default, what), ...)."""
    return repr(tuple(tuple(k) for k in keywords(func)))
