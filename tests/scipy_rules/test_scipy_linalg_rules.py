"""dualad.scipy_rules.linalg in both modes against finite differences, and second order."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand, spd, well_conditioned

import dualad as ad

sl = pytest.importorskip("scipy.linalg")
from dualad.scipy_rules import linalg  # noqa: E402


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "T", "C"])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("bshape", [(3,), (3, 2)])
def test_solve_triangular(lower, trans, unit, bshape):
    a, b = well_conditioned(), rand(*bshape)
    np.testing.assert_allclose(linalg.solve_triangular(a, b, trans, lower, unit),
                               sl.solve_triangular(a, b, trans, lower, unit))
    check(lambda a, b: linalg.solve_triangular(a, b, trans=trans, lower=lower,
                                               unit_diagonal=unit), a, b)


def test_solve_triangular_ignores_the_other_triangle():
    a, b = well_conditioned(), rand(3)
    g = ad.grad(lambda a: np.sum(linalg.solve_triangular(a, b, lower=True)))(a)
    assert np.all(np.triu(g, 1) == 0)
    g = ad.grad(lambda a: np.sum(linalg.solve_triangular(a, b, unit_diagonal=True)))(a)
    assert np.all(np.tril(g) == 0)


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_cho_solve_cholesky(lower):
    a, b, bm = spd(), rand(3), rand(3, 2)
    c, low = linalg.cho_factor(a, lower=lower)
    ref = sl.cho_factor(a, lower=lower)
    np.testing.assert_allclose(c, ref[0])
    assert low == ref[1]
    check(lambda a: linalg.cho_factor(a, lower=lower)[0], a)
    check(lambda a, b: linalg.cho_solve(linalg.cho_factor(a, lower=lower), b), a, b)
    check(lambda a, b: linalg.cho_solve((a, lower), b), np.linalg.cholesky(a).T if not lower
          else np.linalg.cholesky(a), bm)
    check(lambda a: linalg.cholesky(a, lower=lower), a)
    np.testing.assert_allclose(linalg.cholesky(a, lower=lower), sl.cholesky(a, lower=lower))


def test_gaussian_process_log_likelihood():
    """The Gaussian-process negative log likelihood in the kernel's length scale."""
    t = np.linspace(0.0, 1.0, 6)
    y = np.sin(3 * t)

    def nll(theta):
        k = np.exp(-((t[:, None] - t[None, :]) ** 2) / theta[0] ** 2) + theta[1] ** 2 * np.eye(6)
        c, low = linalg.cho_factor(k, lower=True)
        alpha = linalg.cho_solve((c, low), y)
        return 0.5 * y @ alpha + np.sum(np.log(np.diag(c)))

    theta = np.array([0.7, 0.3])
    check(nll, theta)
    assert ad.gradcheck(ad.grad(nll), theta, atol=1e-5, rtol=1e-4)


def test_lu_factor_lu_solve():
    a, b, bm = well_conditioned(), rand(3), rand(3, 2)
    lu, piv = linalg.lu_factor(a)
    ref = sl.lu_factor(a)
    np.testing.assert_allclose(lu, ref[0])
    np.testing.assert_array_equal(piv, ref[1])
    check(lambda a: linalg.lu_factor(a)[0], a)
    for trans in (0, 1):
        np.testing.assert_allclose(linalg.lu_solve((lu, piv), bm, trans=trans),
                                   sl.lu_solve((lu, piv), bm, trans=trans))
        check(lambda a, b, t=trans: linalg.lu_solve(linalg.lu_factor(a), b, trans=t), a, b)
        check(lambda a, b, t=trans: linalg.lu_solve(linalg.lu_factor(a), b, trans=t), a, bm)


def test_lu_factor_with_pivoting():
    a = np.array([[0.1, 2.0, 1.0], [3.0, 0.5, -1.0], [1.0, 1.0, 4.0]])
    assert np.any(sl.lu_factor(a)[1] != np.arange(3))
    check(lambda a: linalg.lu_factor(a)[0], a)
    check(lambda a: linalg.lu_solve(linalg.lu_factor(a), np.ones(3)), a)


def test_lu_factor_refuses_rectangular_matrices():
    with pytest.raises(ValueError, match="square"):
        ad.jacobian(lambda a: linalg.lu_factor(a)[0])(rand(3, 2))


@pytest.mark.parametrize("scale", [0.1, 1.0, 3.0])
def test_expm(scale):
    a = scale * rand(3, 3)
    np.testing.assert_allclose(linalg.expm(a), sl.expm(a))
    check(linalg.expm, a, rtol=1e-5, atol=1e-6 * max(1.0, np.max(np.abs(sl.expm(a)))))


def test_expm_of_a_linear_ode_solution():
    """y(t) = expm(t A) y0: gradient of a loss in A and t."""
    y0 = np.array([1.0, 0.0])

    def loss(a, t):
        return np.sum(linalg.expm(t * a) @ y0 ** 2 + linalg.expm(t * a) @ y0)

    check(loss, np.array([[-0.5, 1.0], [-1.0, -0.2]]), 1.3)


@pytest.mark.parametrize("name", ["logm", "sqrtm"])
def test_logm_sqrtm(name):
    a = spd() / 5 + np.eye(3)
    a = a + 0.1 * rand(3, 3)  # not symmetric
    f = getattr(linalg, name)
    np.testing.assert_allclose(f(a), np.real(getattr(sl, name)(a)), atol=1e-10)
    check(f, a)


def test_sqrtm_of_a_matrix_with_negative_eigenvalues_is_refused():
    with pytest.raises(ValueError, match="complex"):
        ad.jacobian(linalg.sqrtm)(np.diag([1.0, -2.0]))


def test_solve_sylvester():
    a, b, q = well_conditioned(), spd(n=2), rand(3, 2)
    np.testing.assert_allclose(linalg.solve_sylvester(a, b, q), sl.solve_sylvester(a, b, q))
    check(linalg.solve_sylvester, a, b, q)


@pytest.mark.parametrize("assume_a", [None, "gen", "pos", "sym"])
def test_solve_inv_det(assume_a):
    a = spd() if assume_a in ("pos", "sym") else well_conditioned()
    b = rand(3)
    np.testing.assert_allclose(linalg.solve(a, b, assume_a=assume_a), sl.solve(a, b))
    check(lambda a, b: linalg.solve(a, b, assume_a=assume_a), a, b)
    check(lambda a, b: linalg.solve(a, b, transposed=True), a, b)
    check(linalg.inv, a)
    check(linalg.det, a)


@pytest.mark.parametrize("func,make", [
    (lambda a: linalg.solve_triangular(a, np.arange(1.0, 4.0), lower=True), well_conditioned),
    (lambda a: linalg.cho_solve(linalg.cho_factor(a), np.arange(1.0, 4.0)), spd),
    (lambda a: linalg.lu_solve(linalg.lu_factor(a), np.arange(1.0, 4.0)), well_conditioned),
    (lambda a: linalg.expm(0.3 * a), lambda: rand(3, 3)),
    (lambda a: linalg.logm(a), lambda: spd() / 5 + np.eye(3)),
    (lambda a: linalg.sqrtm(a), lambda: spd() / 5 + np.eye(3)),
    (lambda a: linalg.solve_sylvester(a, a.T, np.eye(3)), lambda: well_conditioned()),
], ids=["solve_triangular", "cho_solve", "lu_solve", "expm", "logm", "sqrtm", "sylvester"])
def test_second_order(func, make):
    check_second_order(func, make())


def test_plain_arrays_call_scipy_unchanged():
    a = spd()
    assert type(linalg.expm(a)) is np.ndarray
    np.testing.assert_array_equal(linalg.cho_factor(a)[0], sl.cho_factor(a)[0])
