"""ad.jacobian / jvp / derivative / ode_jacobian of @numba.njit functions.

Every result is checked against central differences and, where the function's Python
body also runs on dualad's numpy-mode values, against the numpy-mode transforms.
"""

import math

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

numba = pytest.importorskip("numba")


@numba.njit
def lorenz96(x):
    n = x.shape[0]
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8.0
    return out


def lorenz96_analytic(x):
    n = x.shape[0]
    i = np.arange(n)
    jac = np.zeros((n, n))
    jac[i, (i + 1) % n] = x[i - 1]
    jac[i, (i - 2) % n] = -x[i - 1]
    jac[i, (i - 1) % n] = x[(i + 1) % n] - x[i - 2]
    jac[i, i] = -1.0
    return jac


@numba.njit
def damped(a, b):
    """A helper called with dual numbers."""
    return a * math.exp(-b) + np.tanh(a)


@numba.njit
def plain_scale(n):
    """A helper called with plain numbers only."""
    return 1.0 / n


@numba.njit
def branches_and_helpers(x, c):
    out = np.zeros_like(x)
    total = 0.0
    scale = plain_scale(x.shape[0])
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            out[i] = damped(x[i], x[i - 1]) ** 2 / (1.0 + x[0] * x[0])
        else:
            out[i] = math.sin(x[i]) * c - abs(x[i]) + np.sqrt(x[i] + 2.0)
        total += out[i] * scale
    return out, total


@numba.njit
def scalar_functions(x):
    out = np.ones_like(x)
    for i in range(x.shape[0]):
        a = x[i]
        b = x[(i + 1) % x.shape[0]]
        out[i] = (
            math.cos(a) + np.exp(a / 3.0) - math.log(a + 3.0) + np.log1p(a * a)
            + math.atan2(a, b + 3.0) + np.hypot(a, b) + math.tanh(b) * np.arctan(a)
            + max(a, b) - min(a, 0.5 * b) + np.power(a + 2.0, b) + (a + 2.0) ** 1.5
            + 2.0 ** a + math.floor(4.0) * np.cbrt(a + 3.0) - np.arcsinh(b) + math.erf(a)
        )
        out[i] -= np.sinh(a) / (1.0 + math.cosh(b))
        out[i] *= 1.5
    return out


@numba.njit
def copies(x):
    y = np.copy(x)
    z = x.copy()
    w = np.empty_like(x)
    for i in range(x.shape[0]):
        y[i] = y[i] * z[i]
        w[i] = -y[i] + 2.0
    w[0] = 3.0  # a plain number stored into a dual array: zero derivative
    return w


def _fd(f, *args, argnum=0):
    return numerical_jacobian(f, args, argnum)


@pytest.mark.parametrize("n", [4, 8, 21])
def test_lorenz96_jacobian_matches_analytic_fd_and_numpy_mode(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    jac = ad.jacobian(lorenz96)(x)
    assert isinstance(jac, np.ndarray) and jac.shape == (n, n)
    np.testing.assert_allclose(jac, lorenz96_analytic(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(jac, _fd(lorenz96.py_func, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jac, ad.jacobian(lorenz96.py_func, mode="reverse")(x),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 3])
def test_explicit_chunk_gives_the_same_jacobian(chunk):
    x = np.linspace(-1.0, 2.0, 7)
    np.testing.assert_allclose(ad.jacobian(lorenz96, chunk=chunk)(x), lorenz96_analytic(x),
                               rtol=0, atol=1e-12)


def test_branches_helpers_and_tuple_output():
    rng = np.random.default_rng(1)
    for x in (rng.normal(size=5), np.array([0.3, -0.2, 1.1, -1.5, 0.7, 0.2, -0.1])):
        jac_out, jac_total = ad.jacobian(branches_and_helpers)(x, 3.0)
        fd_out = _fd(lambda v: branches_and_helpers.py_func(v, 3.0)[0], x)
        fd_total = _fd(lambda v: branches_and_helpers.py_func(v, 3.0)[1], x)
        np.testing.assert_allclose(jac_out, fd_out, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(jac_total, fd_total, rtol=1e-6, atol=1e-7)
        assert jac_out.shape == (x.size, x.size) and jac_total.shape == (x.size,)


def test_jacobian_with_respect_to_a_scalar_argument_and_argnums_tuple():
    x = np.array([0.4, -0.8, 1.3, 0.2, -0.5])
    d_c = ad.jacobian(branches_and_helpers, argnums=1)(x, 3.0)
    np.testing.assert_allclose(d_c[0], _fd(lambda c: branches_and_helpers.py_func(x, c)[0],
                                           3.0), rtol=1e-6, atol=1e-7)
    both = ad.jacobian(branches_and_helpers, argnums=(0, 1))(x, 3.0)
    np.testing.assert_allclose(both[0][0], ad.jacobian(branches_and_helpers)(x, 3.0)[0])
    np.testing.assert_allclose(both[1][1], d_c[1])


def test_math_and_numpy_scalar_functions_against_fd_and_numpy_mode():
    x = np.array([0.3, -0.4, 0.9, 0.1, -0.7])
    jac = ad.jacobian(scalar_functions)(x)
    np.testing.assert_allclose(jac, _fd(scalar_functions.py_func, x), rtol=1e-6, atol=1e-6)


def test_copies_and_plain_stores():
    x = np.array([0.5, -1.5, 2.0, 0.25])
    jac = ad.jacobian(copies)(x)
    expected = np.diag(-2.0 * x)
    expected[0, 0] = 0.0
    np.testing.assert_allclose(jac, expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(jac, ad.jacobian(copies.py_func, mode="reverse")(x))


@numba.njit
def scalar_fn(t, k):
    return math.sin(k * t) * t ** 3 + np.exp(-t)


def test_derivative_of_a_scalar_function():
    for t in (0.3, -1.2, 2.0):
        d = ad.derivative(scalar_fn)(t, 2.0)
        expected = 2.0 * math.cos(2.0 * t) * t**3 + 3 * t**2 * math.sin(2.0 * t) - math.exp(-t)
        assert abs(float(d) - expected) < 1e-12
        assert np.shape(d) == ()
    np.testing.assert_allclose(ad.derivative(scalar_fn)(0.7, 2.0),
                               _fd(scalar_fn.py_func, 0.7, 2.0), rtol=1e-8)


def test_scalar_and_zero_d_inputs():
    jac = ad.jacobian(scalar_fn)(0.5, 2.0)
    assert np.shape(jac) == ()
    np.testing.assert_allclose(jac, ad.derivative(scalar_fn)(0.5, 2.0), rtol=1e-15)
    jac0 = ad.jacobian(scalar_fn)(np.array(0.5), 2.0)
    np.testing.assert_allclose(jac0, jac, rtol=1e-15)


def test_jvp_matches_jacobian_times_tangent():
    rng = np.random.default_rng(3)
    x, v = rng.normal(size=9), rng.normal(size=9)
    out, tangent = ad.jvp(lorenz96, (x,), (v,))
    np.testing.assert_allclose(out, lorenz96.py_func(x), rtol=0, atol=1e-14)
    np.testing.assert_allclose(tangent, lorenz96_analytic(x) @ v, rtol=1e-13, atol=1e-13)
    out2, tan2 = ad.jvp(lorenz96.py_func, (x,), (v,))
    np.testing.assert_allclose(tangent, tan2, rtol=1e-13, atol=1e-13)


def test_jvp_with_two_primals_and_a_tuple_output():
    x = np.array([0.2, -0.5, 0.8, 1.1, -0.3])
    (out, total), (t_out, t_total) = ad.jvp(branches_and_helpers, (x, 3.0),
                                            (np.ones(5), 0.5))
    expected_out = ad.jacobian(branches_and_helpers, argnums=(0, 1))(x, 3.0)
    np.testing.assert_allclose(t_out, expected_out[0][0] @ np.ones(5) + 0.5 * expected_out[1][0],
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(t_total, expected_out[0][1].sum() + 0.5 * expected_out[1][1],
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out, branches_and_helpers.py_func(x, 3.0)[0])
    np.testing.assert_allclose(total, branches_and_helpers.py_func(x, 3.0)[1])


@numba.njit
def robertson(t, y, k1):
    dy = np.empty_like(y)
    dy[0] = -k1 * y[0] + 1e4 * y[1] * y[2]
    dy[1] = k1 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2
    dy[2] = 3e7 * y[1] ** 2
    return dy


def test_ode_jacobian_of_an_njit_rhs_in_solve_ivp():
    from scipy.integrate import solve_ivp

    jac = ad.ode_jacobian(robertson)
    y = np.array([0.9, 1e-5, 0.1])
    np.testing.assert_allclose(jac(0.0, y, 0.04), _fd(lambda v: robertson.py_func(0.0, v, 0.04),
                                                      y), rtol=1e-6, atol=1e-6)
    sol = solve_ivp(robertson, (0.0, 10.0), [1.0, 0.0, 0.0], method="BDF", args=(0.04,),
                    jac=jac, rtol=1e-6, atol=1e-9)
    ref = solve_ivp(robertson.py_func, (0.0, 10.0), [1.0, 0.0, 0.0], method="BDF",
                    args=(0.04,), rtol=1e-6, atol=1e-9)
    assert sol.success and ref.success
    np.testing.assert_allclose(sol.y[:, -1], ref.y[:, -1], rtol=1e-3, atol=1e-8)


def test_multidimensional_input_and_output_shapes():
    @numba.njit
    def grid(u):
        out = np.empty_like(u)
        for i in range(u.shape[0]):
            for j in range(u.shape[1]):
                out[i, j] = u[i, j] * u[i - 1, j] + math.sin(u[i, (j + 1) % u.shape[1]])
        return out

    u = np.arange(6.0).reshape(2, 3) / 7.0
    jac = ad.jacobian(grid)(u)
    assert jac.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(jac, _fd(grid.py_func, u), rtol=1e-6, atol=1e-8)
