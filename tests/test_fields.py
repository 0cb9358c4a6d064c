"""The exact field and dual numbers against plain Python integers."""
import numpy as np
from hypothesis import given, settings, strategies as st

from chunkproof.verify.fields import Dual, ModP, ZeroDivision

P = ModP.p


def _rand(rng, r, c):
    return rng.integers(0, P, size=(r, c), dtype=np.int64)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 9), st.integers(1, 9), st.integers(1, 9))
def test_matmul_matches_python_integers(seed, n, m, k):
    rng = np.random.default_rng(seed)
    f = ModP(rng)
    a, b = _rand(rng, n, m), _rand(rng, m, k)
    want = [[sum(int(a[i, l]) * int(b[l, j]) for l in range(m)) % P for j in range(k)] for i in range(n)]
    assert f.matmul(a, b).tolist() == want


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 8))
def test_inverse_and_reciprocal(seed, n):
    rng = np.random.default_rng(seed)
    f = ModP(rng)
    a = _rand(rng, n, n)
    try:
        ai = f.inv(a)
    except ZeroDivision:
        return  # singular draw: the checker resamples such points
    assert np.array_equal(f.matmul(a, ai), np.eye(n, dtype=np.int64))
    x = f.rand(n, n, nonzero=True)
    assert np.all(f.had(x, f.recip(x)) == 1)


def test_zero_denominator_is_reported():
    f = ModP(np.random.default_rng(0))
    try:
        f.recip(np.zeros((1, 1), dtype=np.int64))
    except ZeroDivision:
        return
    raise AssertionError("division by zero went unnoticed")


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 6))
def test_dual_inverse_satisfies_product_rule(seed, n):
    """d(X X^-1) = 0: the tangent of the inverse must cancel X's tangent."""
    rng = np.random.default_rng(seed)
    f = ModP(rng)
    d = Dual(f)
    x = (_rand(rng, n, n), _rand(rng, n, n))
    try:
        y = d.inv(x)
    except ZeroDivision:
        return
    prod = d.matmul(x, y)
    assert np.array_equal(prod[0], np.eye(n, dtype=np.int64))
    assert not prod[1].any()
