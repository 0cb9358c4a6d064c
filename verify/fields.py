"""Fields the IR is evaluated over.

* :class:`ModP`   exact arithmetic in GF(p), p = 2^31 - 1, on numpy int64 arrays
                  (Schwartz-Zippel: a false identity survives one random point
                  with probability <= degree / p; we use two points).
* :class:`Dual`   dual numbers over another field: forward-mode derivatives, used
                  for exact adjoint checks (a JVP in a random direction).
* :class:`Float`  float64 numpy arrays, for the float level's error at realistic
                  sizes (its adjoint truths come from our reverse mode; the test
                  suite checks those against torch autograd, so that the checker
                  itself starts without importing torch).
* :class:`Sym`    sympy matrices of symbols, for readable residuals at tiny sizes.

Each field offers the same small set of primitives; everything else in the
evaluator is written on top of them.
"""
from __future__ import annotations

import numpy as np


class ZeroDivision(ArithmeticError):
    """A denominator vanished at the sampled point; the checker resamples."""


class ModP:
    name = "GF(p)"
    exact = True
    p = (1 << 31) - 1

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    # construction
    def const(self, a):
        return np.asarray(a, dtype=np.int64) % self.p

    def eye(self, n):
        return np.eye(n, dtype=np.int64)

    def zeros(self, r, c):
        return np.zeros((r, c), dtype=np.int64)

    def ones(self, r, c):
        return np.ones((r, c), dtype=np.int64)

    def rand(self, r, c, nonzero=False):
        lo = 1 if nonzero else 0
        return self.rng.integers(lo, self.p, size=(r, c), dtype=np.int64)

    # arithmetic
    def add(self, a, b):
        return (a + b) % self.p

    def sub(self, a, b):
        return (a - b) % self.p

    def neg(self, a):
        return (-a) % self.p

    def had(self, a, b):
        return (a * b) % self.p  # operands < 2^31, product < 2^62

    def matmul(self, a, b):
        # split b into 16-bit limbs so that int64 sums cannot overflow
        lo = b & 0xFFFF
        hi = b >> 16
        r_lo = np.matmul(a, lo) % self.p
        r_hi = np.matmul(a, hi) % self.p
        return (r_hi * 65536 + r_lo) % self.p

    def _pow(self, a, e):
        result = np.ones_like(a)
        base = a.copy()
        while e:
            if e & 1:
                result = (result * base) % self.p
            base = (base * base) % self.p
            e >>= 1
        return result

    def recip(self, a):
        if np.any(a % self.p == 0):
            raise ZeroDivision("division by zero in GF(p)")
        return self._pow(a % self.p, self.p - 2)

    def T(self, a):
        return np.swapaxes(a, -1, -2)

    def inv(self, a):
        n = a.shape[0]
        m = np.concatenate([a % self.p, np.eye(n, dtype=np.int64)], axis=1)
        for col in range(n):
            piv = next((r for r in range(col, n) if m[r, col] != 0), None)
            if piv is None:
                raise ZeroDivision("singular matrix in GF(p)")
            if piv != col:
                m[[col, piv]] = m[[piv, col]]
            inv_p = pow(int(m[col, col]), self.p - 2, self.p)
            m[col] = (m[col] * inv_p) % self.p
            f = m[:, col].copy()
            f[col] = 0
            m = (m - (f[:, None] * m[col][None, :]) % self.p) % self.p
        return m[:, n:]

    def exp(self, a):
        raise TypeError("exp has no meaning in GF(p); rewrite exp(log x) to products first")

    log = exp

    # structure
    def rows(self, a, i0, i1):
        return a[..., i0:i1, :]

    def cols(self, a, j0, j1):
        return a[..., :, j0:j1]

    def vstack(self, xs):
        return np.concatenate(xs, axis=-2)

    def hstack(self, xs):
        return np.concatenate(xs, axis=-1)

    def shape(self, a):
        return tuple(a.shape[-2:])

    def equal(self, a, b):
        return np.array_equal(a % self.p, b % self.p)

    def differ(self, a, b):
        return np.argwhere((a - b) % self.p != 0)

    def to_float(self, a):
        # centred representatives, for display only
        a = a % self.p
        return np.where(a > self.p // 2, a - self.p, a).astype(float)


class Dual:
    """Pairs (value, tangent) over a base field."""
    exact = True

    def __init__(self, base):
        self.b = base
        self.name = f"dual({base.name})"

    def lift(self, v, d=None):
        return (v, self.b.zeros(*self.b.shape(v)) if d is None else d)

    def const(self, a):
        return self.lift(self.b.const(a))

    def eye(self, n):
        return self.lift(self.b.eye(n))

    def zeros(self, r, c):
        return self.lift(self.b.zeros(r, c))

    def ones(self, r, c):
        return self.lift(self.b.ones(r, c))

    def add(self, x, y):
        return (self.b.add(x[0], y[0]), self.b.add(x[1], y[1]))

    def sub(self, x, y):
        return (self.b.sub(x[0], y[0]), self.b.sub(x[1], y[1]))

    def neg(self, x):
        return (self.b.neg(x[0]), self.b.neg(x[1]))

    def had(self, x, y):
        b = self.b
        return (b.had(x[0], y[0]), b.add(b.had(x[1], y[0]), b.had(x[0], y[1])))

    def matmul(self, x, y):
        b = self.b
        return (b.matmul(x[0], y[0]), b.add(b.matmul(x[1], y[0]), b.matmul(x[0], y[1])))

    def recip(self, x):
        b = self.b
        r = b.recip(x[0])
        return (r, b.neg(b.had(x[1], b.had(r, r))))

    def inv(self, x):
        b = self.b
        y = b.inv(x[0])
        return (y, b.neg(b.matmul(b.matmul(y, x[1]), y)))

    def exp(self, x):
        e = self.b.exp(x[0])
        return (e, self.b.had(x[1], e))

    def log(self, x):
        return (self.b.log(x[0]), self.b.had(x[1], self.b.recip(x[0])))

    def T(self, x):
        return (self.b.T(x[0]), self.b.T(x[1]))

    def rows(self, x, i0, i1):
        return (self.b.rows(x[0], i0, i1), self.b.rows(x[1], i0, i1))

    def cols(self, x, j0, j1):
        return (self.b.cols(x[0], j0, j1), self.b.cols(x[1], j0, j1))

    def vstack(self, xs):
        return (self.b.vstack([x[0] for x in xs]), self.b.vstack([x[1] for x in xs]))

    def hstack(self, xs):
        return (self.b.hstack([x[0] for x in xs]), self.b.hstack([x[1] for x in xs]))

    def shape(self, x):
        return self.b.shape(x[0])


class Float:
    name = "float64"
    exact = False

    def __init__(self, gen=None):
        self.gen = gen

    def const(self, a):
        return np.array(a, dtype=np.float64)

    def eye(self, n):
        return np.eye(n, dtype=np.float64)

    def zeros(self, r, c):
        return np.zeros((r, c), dtype=np.float64)

    def ones(self, r, c):
        return np.ones((r, c), dtype=np.float64)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def neg(self, a):
        return -a

    def had(self, a, b):
        return a * b

    def matmul(self, a, b):
        return a @ b

    def recip(self, a):
        return 1.0 / a

    def inv(self, a):
        return np.linalg.inv(a)

    def exp(self, a):
        return np.exp(a)

    def log(self, a):
        return np.log(a)

    def T(self, a):
        return np.swapaxes(a, -1, -2)

    def rows(self, a, i0, i1):
        return a[..., i0:i1, :]

    def cols(self, a, j0, j1):
        return a[..., :, j0:j1]

    def vstack(self, xs):
        return np.concatenate(xs, axis=-2)

    def hstack(self, xs):
        return np.concatenate(xs, axis=-1)

    def shape(self, a):
        return tuple(a.shape[-2:])


class Sym:
    name = "sympy"
    exact = True

    def __init__(self):
        # sympy costs 0.7 s to import: only a residual pays for it
        import sympy
        self.sp = sympy

    def const(self, a):
        return self.sp.Matrix(np.asarray(a).tolist())

    def eye(self, n):
        return self.sp.eye(n)

    def zeros(self, r, c):
        return self.sp.zeros(r, c)

    def ones(self, r, c):
        return self.sp.ones(r, c)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def neg(self, a):
        return -a

    def had(self, a, b):
        return a.multiply_elementwise(b)

    def matmul(self, a, b):
        return a * b

    def recip(self, a):
        return a.applyfunc(lambda x: 1 / x)

    def inv(self, a):
        return a.inv(method="LU")

    def exp(self, a):
        return a.applyfunc(self.sp.exp)

    def log(self, a):
        return a.applyfunc(self.sp.log)

    def T(self, a):
        return a.T

    def rows(self, a, i0, i1):
        return a[i0:i1, :]

    def cols(self, a, j0, j1):
        return a[:, j0:j1]

    def vstack(self, xs):
        return self.sp.Matrix.vstack(*xs)

    def hstack(self, xs):
        return self.sp.Matrix.hstack(*xs)

    def shape(self, a):
        return a.shape
