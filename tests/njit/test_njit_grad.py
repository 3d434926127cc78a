"""ad.grad / ad.value_and_grad of an @njit scalar function: compiled forward mode."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

numba = pytest.importorskip("numba")


@numba.njit
def rosenbrock(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


@numba.njit
def weighted(x, a):
    return a * np.sin(x[0]) * x[1] + np.exp(a)


@numba.njit
def doubled(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = 2.0 * x[i]
    return out


def test_grad_matches_numpy_mode_and_differences():
    x = np.linspace(-1.0, 1.5, 7)
    g = ad.grad(rosenbrock)(x)
    np.testing.assert_allclose(g, ad.grad(rosenbrock.py_func)(x), rtol=1e-12)
    np.testing.assert_allclose(g, numerical_jacobian(rosenbrock, (x,), 0), rtol=1e-6)
    value, g2 = ad.value_and_grad(rosenbrock)(x)
    assert value == rosenbrock(x)
    np.testing.assert_array_equal(g, g2)


def test_grad_argnums_and_scalars():
    x, a = np.array([0.3, 2.0]), 1.5
    gx, ga = ad.grad(weighted, argnums=(0, 1))(x, a)
    np.testing.assert_allclose(gx, [a * np.cos(0.3) * 2.0, a * np.sin(0.3)])
    np.testing.assert_allclose(ga, np.sin(0.3) * 2.0 + np.exp(a))
    assert np.shape(ad.grad(weighted, argnums=1)(x, a)) == ()


def test_grad_of_array_output_says_what_to_use():
    with pytest.raises(ValueError, match="ad.jacobian"):
        ad.grad(doubled)(np.ones(3))
