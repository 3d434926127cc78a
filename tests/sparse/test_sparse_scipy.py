"""scipy with sparse dualad Jacobians: solve_ivp (BDF, Radau), least_squares, trust-constr."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares, minimize
from sparse_problems import brusselator1d, brusselator2d, rosenbrock, rosenbrock_residuals

import dualad as ad
from dualad.sparse import sparse_hessian, sparse_jacobian


def ode(n):
    f = brusselator1d(n)
    x = np.arange(1, n + 1) / (n + 1)
    y0 = np.concatenate([1 + np.sin(2 * np.pi * x), 3.0 * np.ones(n)])
    return (lambda t, y: f(y)), y0


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_solve_ivp_with_sparse_jacobian(method):
    rhs, y0 = ode(20)
    jac = ad.ode_jacobian(rhs, sparse=True)
    j0 = jac(0.0, y0)
    assert sp.issparse(j0) and j0.shape == (40, 40)
    np.testing.assert_allclose(j0.toarray(), ad.ode_jacobian(rhs)(0.0, y0), rtol=1e-13)
    pattern = ad.ode_jacobian(rhs).sparsity(0.0, y0)
    assert pattern.dtype == bool and pattern.nnz == j0.nnz
    opts = dict(method=method, rtol=1e-7, atol=1e-9)
    ours = solve_ivp(rhs, (0.0, 2.0), y0, jac=jac, **opts)
    ref = solve_ivp(rhs, (0.0, 2.0), y0, jac_sparsity=pattern, **opts)
    assert ours.success and ref.success
    np.testing.assert_allclose(ours.y[:, -1], ref.y[:, -1], rtol=1e-4)
    assert ours.njev >= 1


def test_ode_jacobian_passes_args_and_brusselator2d():
    f = brusselator2d(4)

    def rhs(t, y, scale):
        return scale * f(y)

    y0 = np.random.default_rng(0).uniform(0.5, 1.5, 32)
    jac = ad.ode_jacobian(rhs, sparse=True)
    np.testing.assert_allclose(jac(0.0, y0, 2.0).toarray(),
                               ad.ode_jacobian(rhs)(0.0, y0, 2.0), rtol=1e-13)
    sol = solve_ivp(rhs, (0.0, 0.01), y0, method="BDF", jac=jac, args=(2.0,))
    assert sol.success


def test_least_squares_with_sparse_jacobian():
    x0 = np.full(30, -0.5)
    jac = sparse_jacobian(rosenbrock_residuals)
    res = least_squares(rosenbrock_residuals, x0, jac=jac, method="trf", xtol=1e-12,
                        ftol=1e-12, gtol=1e-12)
    assert res.success
    np.testing.assert_allclose(res.x, np.ones(30), atol=1e-6)
    assert sp.issparse(res.jac)


def test_trust_constr_with_sparse_hessian():
    x0 = np.full(20, 0.5)
    res = minimize(rosenbrock, x0, method="trust-constr", jac=ad.grad(rosenbrock),
                   hess=sparse_hessian(rosenbrock), options={"gtol": 1e-10, "xtol": 1e-12})
    np.testing.assert_allclose(res.x, np.ones(20), atol=1e-5)
