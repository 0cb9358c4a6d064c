"""Hypothesis strategies of fuzz examples.

Hypothesis shrinks a failing example's choices towards the shortlex-smallest sequence,
earlier choices first, each integer towards its lower bound and each sampled_from towards
its first element.  So the draws come in the order a small failure should be reported in
-- T, then B, H, K, V, then the regime (h0, output_final_state, gates, beta, the split
position) and last the seed of the tensor values -- and every choice is always drawn, so
that a change of one never reinterprets the next ones.  T is one integer (not chunks
plus a remainder, not a one_of of edge values): both of those stop shrinking at a chunk
boundary instead of at the smallest failing T."""
from __future__ import annotations

from hypothesis import strategies as st

from .cases import BETAS, module
from .example import Example, uses_beta

# the search space per device: the interpreter pays for every element, the GPU for none
SPACES = {
    "cpu": dict(B=2, H=2, K=64, V=64, chunks=2),
    "cuda": dict(B=4, H=4, K=128, V=128, chunks=32),
}
HEAD_DIMS = (16, 32, 64, 128)       # drawn more often than their share: FLA's usual sizes
EXTREME_GATES = ("near0", "strong", "underflow")
SPLIT_PROPS = ("causality", "split_sequence", "packed_sequences")
SEEDS = 2 ** 32 - 1


def chunk_size(variant):
    return getattr(getattr(module(variant), "TILING", None), "BT", 64)


def _weighted_integers(lo, hi, favoured, share):
    """integers(lo, hi) that draws the `favoured` values with probability `share` in
    all.  Only the generation changes: the choice is still one integer, which shrinks as
    integers() does.  Through Hypothesis's IntegersStrategy (not public API; without it,
    plain integers)."""
    favoured = sorted({x for x in favoured if lo <= x <= hi})
    try:
        from hypothesis.strategies._internal.numbers import IntegersStrategy
    except ImportError:
        return st.integers(lo, hi)
    if not favoured:
        return st.integers(lo, hi)

    weights = {x: share / len(favoured) for x in favoured}

    class Favouring(IntegersStrategy):
        def do_draw(self, data):
            try:
                return data.draw_integer(lo, hi, weights=weights)
            except (AttributeError, TypeError):     # a Hypothesis without weighted integers
                return super().do_draw(data)

    return Favouring(lo, hi)


def t_values(variant, device, min_t=1):
    """T from min_t to a few chunks: T = 1, 2 and one below, at and one past every chunk
    boundary drawn a third of the time."""
    c, n = chunk_size(variant), SPACES[device]["chunks"]
    edges = [1, 2] + [m * c + d for m in range(1, n + 1) for d in (-1, 0, 1)]
    return _weighted_integers(min_t, n * c + 2, edges, 1 / 3)


def _betas(prop):
    if prop == "extreme_gates":
        return st.sampled_from(BETAS)
    # beta at 0 or 1 a quarter of the time: random beta is the regime models run in
    return _weighted_integers(0, len(BETAS) - 1, [0], 0.6).map(BETAS.__getitem__)


@st.composite
def examples(draw, variant, prop, device, dtype):
    space = SPACES[device]
    split = prop in SPLIT_PROPS
    T = draw(t_values(variant, device, min_t=2 if split else 1), label="T")
    B = draw(st.integers(1, space["B"]), label="B")
    H = draw(st.integers(1, space["H"]), label="H")
    K = draw(_weighted_integers(1, space["K"], HEAD_DIMS, 1 / 3), label="K")
    V = draw(_weighted_integers(1, space["V"], HEAD_DIMS, 1 / 3), label="V")
    h0 = draw(st.booleans(), label="h0")
    fs = draw(st.booleans(), label="output_final_state")
    gates = draw(st.sampled_from(EXTREME_GATES) if prop == "extreme_gates" else st.just("typical"), label="gates")
    beta = draw(_betas(prop) if uses_beta(variant) else st.just("random"), label="beta")
    p = draw(st.integers(1, T - 1), label="p") if split else 0
    seed = draw(st.integers(0, SEEDS), label="seed")
    return Example(variant, prop, device, dtype, B, T, H, K, V, h0=h0, fs=fs, gates=gates,
                   beta=beta, seed=seed, split=p)
