"""dualad's derivatives passed straight to scipy.integrate and scipy.optimize."""

import numpy as np
import pytest

import dualad as ad

scipy_integrate = pytest.importorskip("scipy.integrate")
scipy_optimize = pytest.importorskip("scipy.optimize")


def robertson(t, y, k1, k2, k3):
    return np.array([
        -k1 * y[0] + k3 * y[1] * y[2],
        k1 * y[0] - k2 * y[1] ** 2 - k3 * y[1] * y[2],
        k2 * y[1] ** 2,
    ])


def robertson_jac(t, y, k1, k2, k3):
    return np.array([
        [-k1, k3 * y[2], k3 * y[1]],
        [k1, -2 * k2 * y[1] - k3 * y[2], -k3 * y[1]],
        [0.0, 2 * k2 * y[1], 0.0],
    ])


K = (0.04, 3e7, 1e4)


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_ode_jacobian_matches_analytic(mode):
    jac = ad.ode_jacobian(robertson, mode=mode)
    for y in ([1.0, 0.0, 0.0], [0.7, 1e-5, 0.3], [0.2, 3e-5, 0.8]):
        np.testing.assert_allclose(jac(0.5, np.array(y), *K), robertson_jac(0.5, y, *K),
                                   rtol=1e-12, atol=1e-12)


def test_solve_ivp_bdf_with_dualad_jacobian_matches_analytic_solution():
    kwargs = dict(method="BDF", args=K, rtol=1e-8, atol=1e-10)
    ours = scipy_integrate.solve_ivp(robertson, (0.0, 100.0), [1.0, 0.0, 0.0],
                                     jac=ad.ode_jacobian(robertson), **kwargs)
    exact = scipy_integrate.solve_ivp(robertson, (0.0, 100.0), [1.0, 0.0, 0.0],
                                      jac=robertson_jac, **kwargs)
    assert ours.success and exact.success
    np.testing.assert_allclose(ours.y[:, -1], exact.y[:, -1], rtol=1e-6, atol=1e-12)
    assert ours.njev > 0


def rosen(x, scale):
    return scale * np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("method", ["trust-exact", "trust-ncg", "Newton-CG"])
def test_minimize_with_grad_and_hessian(method):
    x0 = np.array([-1.2, 1.0, 0.8])
    res = scipy_optimize.minimize(rosen, x0, args=(2.0,), method=method, tol=1e-10,
                                  jac=ad.grad(rosen), hess=ad.hessian(rosen))
    assert res.success, res.message
    np.testing.assert_allclose(res.x, np.ones(3), atol=1e-5)


def test_grad_and_hessian_agree_with_scipy_reference():
    x = np.array([0.3, -0.7, 1.1, 0.4])
    np.testing.assert_allclose(ad.grad(rosen)(x, 1.0), scipy_optimize.rosen_der(x), rtol=1e-12)
    np.testing.assert_allclose(ad.hessian(rosen)(x, 1.0), scipy_optimize.rosen_hess(x),
                               rtol=1e-12, atol=1e-12)


def test_root_with_jacobian():
    def fun(x, a):
        return np.array([x[0] + a * (x[0] - x[1]) ** 3 - 1.0,
                         a * (x[1] - x[0]) ** 3 + x[1]])

    res = scipy_optimize.root(fun, [0.0, 0.0], args=(0.5,), jac=ad.jacobian(fun))
    assert res.success
    np.testing.assert_allclose(fun(res.x, 0.5), 0.0, atol=1e-10)
