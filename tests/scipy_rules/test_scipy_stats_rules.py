"""dualad.scipy_rules.stats: values equal scipy's; derivatives in x, loc, scale and shape
parameters against finite differences in both modes; clear errors where no closed form."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

st = pytest.importorskip("scipy.stats")
from dualad.scipy_rules import stats  # noqa: E402

X = np.array([-1.3, -0.2, 0.4, 2.1])
POSITIVE = np.array([0.3, 0.9, 1.6, 3.2])
UNIT = np.array([0.1, 0.35, 0.6, 0.9])

# (name, shape parameters, points, loc, scale)
CONTINUOUS = [
    ("norm", (), X, 0.3, 1.7),
    ("t", (3.5,), X, 0.3, 1.7),
    ("gamma", (2.5,), POSITIVE, -0.2, 1.4),
    ("chi2", (3.0,), POSITIVE, -0.2, 1.4),
    ("beta", (2.0, 3.0), UNIT, -0.05, 1.2),
    ("expon", (), POSITIVE, -0.2, 1.4),
    ("laplace", (), X, 0.3, 1.7),
    ("logistic", (), X, 0.3, 1.7),
    ("cauchy", (), X, 0.3, 1.7),
]
METHODS = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


@pytest.mark.parametrize("name,shapes,x,loc,scale", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
@pytest.mark.parametrize("method", METHODS)
def test_continuous_in_x_loc_scale(name, shapes, x, loc, scale, method):
    f = getattr(getattr(stats, name), method)
    ref = getattr(getattr(st, name), method)(x, *shapes, loc, scale)
    traced_value, _ = ad.jvp(lambda x: f(x, *shapes, loc, scale), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(traced_value, ref, rtol=1e-10, atol=1e-12)
    check(lambda x, loc, scale: f(x, *shapes, loc, scale), x, loc, scale)
    check(lambda loc: f(x, *shapes, loc=loc, scale=scale), loc)


@pytest.mark.parametrize("name,shapes,x,loc,scale", [c for c in CONTINUOUS if c[1]],
                         ids=[c[0] for c in CONTINUOUS if c[1]])
def test_densities_in_shape_parameters(name, shapes, x, loc, scale):
    dist = getattr(stats, name)
    for method in ("logpdf", "pdf"):
        f = getattr(dist, method)
        check(lambda *p, f=f: f(x, *p, loc, scale), *map(np.float64, shapes))


@pytest.mark.parametrize("call", [
    lambda a: stats.gamma.cdf(1.0, a), lambda a: stats.gamma.sf(1.0, a),
    lambda d: stats.t.cdf(0.5, d), lambda d: stats.chi2.cdf(1.0, d),
    lambda a: stats.beta.cdf(0.3, a, 2.0), lambda b: stats.beta.logsf(0.3, 2.0, b),
], ids=["gamma.cdf", "gamma.sf", "t.cdf", "chi2.cdf", "beta.cdf", "beta.logsf"])
def test_cdf_in_a_shape_parameter_without_closed_form_is_a_clear_error(call):
    for mode in ("forward", "reverse"):
        with pytest.raises(ad.MissingRuleError, match="no closed-form derivative"):
            ad.jacobian(call, mode=mode)(2.5)


def test_outside_the_support_is_minus_inf_with_zero_gradient():
    x = np.array([-1.0, 0.5])
    np.testing.assert_array_equal(stats.gamma.logpdf(x, 2.0), st.gamma.logpdf(x, 2.0))
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda x: stats.gamma.logpdf(x, 2.0), mode=mode)(x)
        assert jac[0, 0] == 0 and np.isfinite(jac).all()


def test_norm_ppf_and_frozen_distributions():
    q = np.array([0.1, 0.5, 0.8])
    np.testing.assert_allclose(stats.norm.ppf(q, 1.0, 2.0), st.norm.ppf(q, 1.0, 2.0))
    check(lambda q, loc, scale: stats.norm.ppf(q, loc, scale), q, 1.0, 2.0)
    check(lambda loc, scale: stats.norm(loc, scale).logpdf(X), 0.3, 1.2)
    check(lambda df: stats.t(df, scale=2.0).logpdf(X), 4.0)
    assert stats.norm(0.5, 2.0).logpdf(1.0) == st.norm(0.5, 2.0).logpdf(1.0)


@pytest.mark.parametrize("method", ["logpmf", "pmf", "cdf", "sf"])
def test_poisson_in_mu(method):
    k = np.array([0.0, 1.0, 2.0, 5.0, 2.5, -1.0])
    f = getattr(stats.poisson, method)
    value, _ = ad.jvp(lambda mu: f(k, mu), (2.3,), (1.0,))
    np.testing.assert_allclose(value, getattr(st.poisson, method)(k, 2.3))
    check(lambda mu: f(k[:4], mu), 2.3)
    check(lambda mu: f(k[:4], mu), np.array([0.5, 1.0, 2.0, 4.0]))


@pytest.mark.parametrize("xshape", [(2,), (5, 2), (2, 3, 2)])
def test_multivariate_normal_in_x_mean_cov(xshape):
    x, mean = rand(*xshape), np.array([0.1, -0.2])
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    value, _ = ad.jvp(lambda m: stats.multivariate_normal.logpdf(x, m, cov), (mean,), (mean,))
    np.testing.assert_allclose(value, st.multivariate_normal.logpdf(x, mean, cov))
    check(lambda x, m, c: stats.multivariate_normal.logpdf(x, m, c), x, mean, cov)
    check(lambda x, m, c: stats.multivariate_normal.pdf(x, m, c), x, mean, cov)


def test_multivariate_normal_diagonal_and_scalar_covariances():
    x, mean = rand(4, 3), np.zeros(3)
    for cov in (np.array([1.0, 2.0, 0.5]), 1.7):
        np.testing.assert_allclose(
            ad.jvp(lambda m, c=cov: stats.multivariate_normal.logpdf(x, m, c), (mean,), (mean,))[0],
            st.multivariate_normal.logpdf(x, mean, cov))
        check(lambda c: stats.multivariate_normal.logpdf(x, mean, c), np.asarray(cov))


def test_multivariate_normal_reads_the_lower_triangle_of_cov():
    x, mean = rand(3, 2), np.zeros(2)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    g = ad.grad(lambda c: np.sum(stats.multivariate_normal.logpdf(x, mean, c)))(cov)
    assert g[0, 1] == 0
    sym = lambda c: (c + c.T) / 2  # noqa: E731
    g = ad.grad(lambda c: np.sum(stats.multivariate_normal.logpdf(x, mean, sym(c))))(cov)
    np.testing.assert_allclose(g, g.T)


@pytest.mark.parametrize("xshape", [(3,), (3, 4)])
def test_dirichlet_in_x_and_alpha(xshape):
    x = np.abs(rand(*xshape)) + 0.2
    x = x / np.sum(x, axis=0)
    alpha = np.array([1.5, 2.0, 3.0])
    value, _ = ad.jvp(lambda a: stats.dirichlet.logpdf(x, a), (alpha,), (alpha,))
    np.testing.assert_allclose(value, st.dirichlet.logpdf(x, alpha))
    # x moves on the simplex (scipy checks it, and finite differences call scipy)
    check(lambda y, a: stats.dirichlet.logpdf(y / np.sum(y, axis=0), a), x, alpha)
    check(lambda a: stats.dirichlet.pdf(x, a), alpha)


@pytest.mark.parametrize("func", [
    lambda p: stats.norm.logpdf(X, p[0], p[1]),
    lambda p: stats.t.logpdf(X, p[2], p[0], p[1]),
    lambda p: stats.gamma.logpdf(POSITIVE, p[2], 0.0, p[1]),
    lambda p: stats.beta.logpdf(UNIT, p[1], p[2]),
    lambda p: stats.poisson.logpmf(np.arange(4.0), p[1]),
    lambda p: stats.norm.logcdf(X * p[1], p[0]),
    lambda p: stats.multivariate_normal.logpdf(X[:2], p[:2], np.diag(p[1:]) + 1.0),
    lambda p: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), p),
], ids=["norm", "t", "gamma", "beta", "poisson", "norm.logcdf", "mvn", "dirichlet"])
def test_second_order(func):
    check_second_order(func, np.array([0.4, 1.3, 2.6]))


def test_plain_calls_are_scipy():
    assert stats.norm.logpdf(0.3) == st.norm.logpdf(0.3)
    np.testing.assert_array_equal(stats.gamma.cdf(POSITIVE, 2.0), st.gamma.cdf(POSITIVE, 2.0))
