"""Shared checks for the numpy rule families (tests/test_numpy_*.py).

``check`` compares each mode's Jacobian with central finite differences and the modes
with each other (``ad.gradcheck``); ``check_second_order`` does the same for the gradient
of a random projection of ``f``, i.e. Hessian-vector structure in both modes.
"""

from __future__ import annotations

import numpy as np

import dualad as ad

RNG = np.random.default_rng(20240611)


def rand(*shape: int, low: float | None = None) -> np.ndarray:
    """Standard normal entries (shifted away from zero when ``low`` is given)."""
    x = RNG.standard_normal(shape)
    if low is not None:
        x = np.sign(x) * (np.abs(x) + low)
    return x


def spd(*batch: int, n: int = 3) -> np.ndarray:
    """Well-conditioned symmetric positive definite matrices."""
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def well_conditioned(*batch: int, n: int = 3) -> np.ndarray:
    """Square matrices far from singular."""
    return RNG.standard_normal(batch + (n, n)) + 3.0 * np.eye(n)


def check(f, *args, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Forward == reverse == finite differences for every argument of ``f``."""
    assert ad.gradcheck(f, *args, atol=atol, rtol=rtol)


def check_second_order(f, x: np.ndarray, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """The gradient of ``sum(w * f(x))`` differentiates correctly in both modes."""
    out_shape = np.shape(f(x))
    w = RNG.standard_normal(out_shape)

    def scalar(y):
        return np.sum(w * f(y))

    assert ad.gradcheck(ad.grad(scalar), x, atol=atol, rtol=rtol)
    h = ad.hessian(scalar)(x)
    n = np.size(x)
    hm = np.reshape(h, (n, n))
    np.testing.assert_allclose(hm, hm.T, atol=atol * 10, rtol=rtol * 10)
