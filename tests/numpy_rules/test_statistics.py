"""Order statistics (median, percentile, quantile and the nan- versions): values equal to
numpy's, derivatives against central differences in both modes and to second order, and
the conventions at ties and even counts against JAX."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(2028)

SHAPES = [((7,), None), ((4, 5), 0), ((4, 5), 1), ((3, 4, 5), (0, 2)), ((4, 5), None),
          ((), None)]
CALLS = {
    "quantile": lambda x, **kw: np.quantile(x, 0.3, **kw),
    "quantile-list": lambda x, **kw: np.quantile(x, [0.1, 0.5, 1.0], **kw),
    "percentile": lambda x, **kw: np.percentile(x, 30, **kw),
    "percentile-array": lambda x, **kw: np.percentile(x, np.array([[10.0], [75.0]]), **kw),
    "median": np.median,
    "nanquantile": lambda x, **kw: np.nanquantile(x, [0.2, 0.7], **kw),
    "nanpercentile": lambda x, **kw: np.nanpercentile(x, 40, **kw),
    "nanmedian": np.nanmedian,
}


def _check(f, x):
    expected_value = f(x)
    out, _ = ad.jvp(f, (x,), (np.ones_like(x),))
    assert np.shape(out) == np.shape(expected_value)
    np.testing.assert_allclose(out, expected_value)
    expected = numerical_jacobian(f, (x,), 0)
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(f, mode=mode)(x)
        finite = ~np.isnan(expected)
        np.testing.assert_allclose(jac[finite], expected[finite], atol=1e-7, err_msg=mode)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_order_statistics(name, shape, axis, keepdims):
    x = RNG.standard_normal(shape)
    if name.startswith("nan") and x.size > 3:
        x.ravel()[[1, 3]] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _check(lambda x: CALLS[name](x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, [0.25, 0.75], 1.0])
def test_quantile_methods(method, q):
    _check(lambda x: np.quantile(x, q, axis=1, method=method), RNG.standard_normal((3, 6)))


def test_all_nan_slices_and_nan_in_plain_versions():
    x = np.array([[np.nan, np.nan, np.nan], [1.0, np.nan, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = ad.jacobian(lambda x: np.nanmedian(x, axis=1))(x)
        np.testing.assert_allclose(g[1], [[0, 0, 0], [0.5, 0, 0.5]])
        assert np.isnan(ad.jvp(np.median, (x[1],), (np.ones(3),))[0])


def test_derivative_in_q():
    x = RNG.standard_normal(9)
    for q in (0.3, np.array([0.1, 0.6])):
        f = lambda q: np.quantile(x, q)  # noqa: E731
        np.testing.assert_allclose(ad.jacobian(f)(q), numerical_jacobian(f, (q,), 0),
                                   atol=1e-7)
        f = lambda q: np.percentile(x, q)  # noqa: E731
        np.testing.assert_allclose(ad.jacobian(f, mode="forward")(100 * q),
                                   numerical_jacobian(f, (100 * q,), 0), atol=1e-7)


def test_second_order():
    x = RNG.standard_normal((4, 5))
    f = lambda x: np.sum(np.median(x, axis=0) ** 2) + np.sum(np.quantile(x, 0.3, axis=1) ** 3)  # noqa
    np.testing.assert_allclose(ad.hessian(f)(x), numerical_jacobian(ad.grad(f), (x,), 0),
                               atol=1e-6)


def test_float32_stays_float32():
    assert ad.grad(np.median)(np.arange(5, dtype=np.float32)).dtype == np.float32


def test_unsupported_calls_say_so():
    with pytest.raises(ad.MissingRuleError, match="method='weibull'"):
        ad.grad(lambda x: np.quantile(x, 0.5, method="weibull"))(np.ones(3))
    with pytest.raises(ad.MissingRuleError, match="weights="):
        ad.grad(lambda x: np.quantile(x, 0.5, method="inverted_cdf",
                                      weights=np.ones(3)))(np.ones(3))


def test_median_sparsity_is_the_whole_slice():
    pattern = ad.jacobian_sparsity(lambda x: np.median(x.reshape(3, 4), axis=1))(np.arange(12.0))
    np.testing.assert_array_equal(pattern.toarray(), np.kron(np.eye(3), np.ones((1, 4))))


jax = pytest.importorskip("jax", reason="JAX is the oracle for the conventions")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

POINTS = [np.array([2.0, 1.0, 2.0]), np.array([2.0, 2.0, 2.0, 1.0]),
          np.array([3.0, 1.0, 4.0, 2.0]), np.ones(5), RNG.standard_normal(8)]


@pytest.mark.parametrize("x", POINTS, ids=range(len(POINTS)))
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_ties_and_even_counts_match_jax(x, method):
    np.testing.assert_allclose(ad.grad(np.median)(x), np.asarray(jax.grad(jnp.median)(x)))
    ours = ad.grad(lambda x: np.quantile(x, 0.3, method=method))(x)
    theirs = jax.grad(lambda x: jnp.quantile(x, 0.3, method=method))(x)
    np.testing.assert_allclose(ours, np.asarray(theirs))
    ours = ad.grad(lambda x: np.nanpercentile(x, 65.0))(x)
    theirs = jax.grad(lambda x: jnp.nanpercentile(x, 65.0))(x)
    np.testing.assert_allclose(ours, np.asarray(theirs))
