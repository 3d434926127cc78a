"""Sparse Jacobians of @numba.njit functions as they are: detection through their Python
source, compiled compressed passes, against dense Jacobians."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualad as ad
from dualad.sparse.compressed import SparsityChangedWarning


@numba.njit
def lorenz96(x):
    n = x.shape[0]
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8.0
    return out


@numba.njit
def _lap(y, off, i, j, n):
    return (y[off + ((i + 1) % n) * n + j] + y[off + ((i - 1) % n) * n + j]
            + y[off + i * n + (j + 1) % n] + y[off + i * n + (j - 1) % n]
            - 4.0 * y[off + i * n + j])


@numba.njit
def brusselator2d(y, n):
    out = np.empty_like(y)
    m = n * n
    for i in range(n):
        for j in range(n):
            u = y[i * n + j]
            v = y[m + i * n + j]
            uuv = u * u * v
            out[i * n + j] = 1.0 + uuv - 4.4 * u + 10.0 * m * _lap(y, 0, i, j, n)
            out[m + i * n + j] = 3.4 * u - uuv + 10.0 * m * _lap(y, m, i, j, n)
    return out


@numba.njit
def stencil(x, offsets, weights):
    """out[i] = sum over k of weights[k] * sin(x[(i + offsets[k]) % n]) * x[i]."""
    n = x.shape[0]
    out = np.zeros_like(x)
    for i in range(n):
        acc = 0.0
        for k in range(offsets.shape[0]):
            acc += weights[k] * math.sin(x[(i + offsets[k]) % n]) * x[i]
        out[i] = acc
    return out


@numba.njit
def branchy(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if x[0] > 0.0:
            out[i] = x[i] * x[i]
        else:
            out[i] = x[i] * x[(i + 1) % x.shape[0]]
    return out


@pytest.mark.parametrize("n", [5, 40])
def test_lorenz96(n):
    x = np.random.default_rng(n).normal(size=n) + 8.0
    jac = ad.sparse_jacobian(lorenz96)
    for _ in range(2):  # the second call reuses pattern, colouring and driver
        J = jac(x)
        assert J.nnz == 4 * n
        np.testing.assert_allclose(J.toarray(), ad.jacobian(lorenz96)(x), rtol=1e-12)
    np.testing.assert_array_equal(ad.jacobian_sparsity(lorenz96)(x).toarray(),
                                  J.toarray() != 0)


def test_brusselator2d_with_helper_and_extra_argument():
    n = 6
    y = np.random.default_rng(1).uniform(0.5, 1.5, 2 * n * n)
    J = ad.sparse_jacobian(brusselator2d)(y, n)
    assert J.shape == (2 * n * n, 2 * n * n) and J.nnz == 2 * n * n * 6
    dense = ad.jacobian(brusselator2d)(y, n)
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-12, atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(offsets=st.lists(st.integers(-4, 4), min_size=1, max_size=4),
       n=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_random_stencils_against_dense(offsets, n, seed):
    rng = np.random.default_rng(seed)
    off = np.array(offsets, dtype=np.int64)
    w = rng.uniform(0.5, 1.5, off.size)
    x = rng.uniform(0.5, 1.5, n)
    J = ad.sparse_jacobian(stencil)(x, off, w)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(stencil)(x, off, w), rtol=1e-12,
                               atol=1e-14)


def test_ode_jacobian_sparse_and_pattern():
    from scipy.integrate import solve_ivp

    @numba.njit
    def rhs(t, y):
        out = np.empty_like(y)
        n = y.shape[0]
        for i in range(n):
            out[i] = -y[i] ** 3 + 0.5 * (y[i - 1] - y[i]) + math.cos(t)
        return out

    y0 = np.linspace(0.5, 1.5, 20)
    jac = ad.ode_jacobian(rhs, sparse=True)
    J = jac(0.3, y0)
    np.testing.assert_allclose(J.toarray(), ad.ode_jacobian(rhs)(0.3, y0), rtol=1e-12)
    pattern = ad.ode_jacobian(rhs).sparsity(0.0, y0)
    assert pattern.nnz == 40
    sol = solve_ivp(rhs, (0, 1), y0, method="BDF", jac=jac)
    ref = solve_ivp(rhs, (0, 1), y0, method="BDF", jac_sparsity=pattern)
    np.testing.assert_allclose(sol.y[:, -1], ref.y[:, -1], rtol=1e-4)


def test_branch_on_a_value_is_redetected_with_a_warning():
    jac = ad.sparse_jacobian(branchy)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(jac(x).toarray(), np.diag(2 * x))
    x2 = -x
    with pytest.warns(SparsityChangedWarning):
        J = jac(x2)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(branchy)(x2), rtol=1e-12)


def test_modes_and_errors():
    x = np.ones(4) + 8.0
    with pytest.raises(ValueError, match="mode='reverse' is not available for @njit"):
        ad.sparse_jacobian(lorenz96, mode="reverse")
    with pytest.raises(ad.ShapeError, match="sparsity= has shape"):
        ad.sparse_jacobian(lorenz96, sparsity=np.eye(3))(x)
    J = ad.sparse_jacobian(lorenz96, sparsity=np.ones((4, 4)))(x)  # a given superset
    np.testing.assert_allclose(J.toarray(), ad.jacobian(lorenz96)(x), rtol=1e-12)


def test_helpers_in_closures_and_math_functions_imported_by_name():
    from math import exp

    @numba.njit
    def decay(v):
        return exp(-v) * v

    @numba.njit
    def model(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = decay(x[i]) + x[0]
        return out

    x = np.array([0.5, 1.0, 2.0])
    pattern = ad.jacobian_sparsity(model)(x).toarray()
    np.testing.assert_array_equal(pattern, [[1, 0, 0], [1, 1, 0], [1, 0, 1]])
    np.testing.assert_allclose(ad.sparse_jacobian(model)(x).toarray(), ad.jacobian(model)(x),
                               rtol=1e-12)


def test_detection_through_plain_buffers_and_list_arrays():
    @numba.njit
    def model(x):
        n = x.shape[0]
        out = np.zeros(n)
        for i in range(1, n):
            out[i] = x[i] * x[i - 1]
        return out

    x = np.arange(1.0, 5.0)
    pattern = ad.jacobian_sparsity(model)(x).toarray()
    expected = np.zeros((4, 4), dtype=bool)
    for i in range(1, 4):
        expected[i, i] = expected[i, i - 1] = True
    np.testing.assert_array_equal(pattern, expected)
    assert model(x).tolist() == [0.0, 2.0, 6.0, 12.0]  # the compiled function is untouched


def test_sparse_hessian_of_an_njit_function_runs_its_python_source():
    @numba.njit
    def chain(x):
        s = 0.0
        for i in range(x.shape[0] - 1):
            s += x[i] * x[i + 1] ** 2
        return s

    x = np.array([1.0, 2.0, 3.0, 4.0])
    H = ad.sparse_hessian(chain)(x)
    np.testing.assert_allclose(H.toarray(), ad.hessian(chain.py_func)(x), rtol=1e-12)
    assert H.nnz == 10
