"""piecewise, interp(period=), vander / polyfit / roots / poly, unique and histogram:
values equal to numpy's, derivatives against central differences in both modes (and to
second order where defined), and JAX where it has the function."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(2030)
XS = np.linspace(-1.0, 2.0, 8)
A0 = RNG.uniform(0.0, 1.0, 10)


def _real_imag(f):
    def g(x):
        y = f(x)
        return np.concatenate([np.ravel(np.real(y)), np.ravel(np.imag(y))])
    return g


def _check(f, x, atol=1e-7):
    np.testing.assert_allclose(ad.jvp(f, (x,), (np.ones_like(x),))[0], f(x))
    g = _real_imag(f)
    expected = numerical_jacobian(g, (x,), 0)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(g, mode=mode)(x), expected, atol=atol,
                                   err_msg=mode)


def _check_second_order(f, x):
    w = RNG.standard_normal(np.shape(_real_imag(f)(x)))
    scalar = lambda y: np.sum(w * _real_imag(f)(y))  # noqa: E731
    np.testing.assert_allclose(ad.hessian(scalar)(x), numerical_jacobian(ad.grad(scalar), (x,), 0),
                               atol=1e-5)


# -- piecewise -------------------------------------------------------------------------------

PIECEWISE = {
    "two": lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: v ** 2, np.sin]),
    "otherwise": lambda x: np.piecewise(x, [x < -0.5, x > 0.5],
                                        [lambda v: v ** 3, np.exp, lambda v: 2 * v]),
    "constant": lambda x: np.piecewise(x, [x < 0], [0.0, lambda v: v * 3]),
    "one-condition": lambda x: np.piecewise(x, x < 0, [lambda v: -v, lambda v: v ** 2]),
    "args": lambda x: np.piecewise(x, [x < 0], [lambda v, a: a * v, lambda v, a: v ** a], 3.0),
    "2-d": lambda x: np.piecewise(x.reshape(2, 3), [x.reshape(2, 3) < 0],
                                  [lambda v: v ** 2, lambda v: v]),
    "0-d": lambda x: np.piecewise(x[0], [x[0] < 0, x[0] >= 0], [np.square, lambda v: v ** 3]),
}


@pytest.mark.parametrize("name", sorted(PIECEWISE))
def test_piecewise(name):
    x = RNG.standard_normal(6)
    _check(PIECEWISE[name], x)
    _check_second_order(PIECEWISE[name], x)


def test_piecewise_differentiates_what_the_pieces_close_over():
    g = lambda x, a: np.sum(np.piecewise(x, [x < 0], [lambda v: a * v, lambda v: a ** 2 * v]))  # noqa
    x = RNG.standard_normal(5)
    np.testing.assert_allclose(ad.grad(g, argnums=(0, 1))(x, 2.0)[1],
                               numerical_jacobian(g, (x, 2.0), 1), rtol=1e-6)
    pattern = ad.jacobian_sparsity(PIECEWISE["two"])(x).toarray()
    np.testing.assert_array_equal(pattern, np.eye(5, dtype=bool))


def test_piecewise_wrong_number_of_functions():
    with pytest.raises(ValueError, match="functions are expected"):
        ad.grad(lambda x: np.sum(np.piecewise(x, [x < 0], [np.sin, np.cos, np.tan])))(np.ones(3))


# -- interp(period=) ---------------------------------------------------------------------------


@pytest.mark.parametrize("period", [360.0, -360.0, 2.5])
def test_periodic_interp(period):
    xp, fp = np.array([190.0, -190.0, 350.0, -350.0]), np.array([5.0, 10.0, 3.0, 4.0])
    _check(lambda x: np.interp(x, xp, fp, period=period), RNG.uniform(-400, 400, 7))
    points = np.array([-180.0, -170.0, -185.0, 185.0, -10.0, -5.0, 0.0, 365.0])
    _check(lambda f: np.interp(points, xp, f, period=period), fp)


# -- polynomials ---------------------------------------------------------------------------------

POLYNOMIALS = {
    "vander": lambda x: np.vander(x[:4]),
    "vander-N-increasing": lambda x: np.vander(x[:4], 3, increasing=True),
    "vander-at-zero": lambda x: np.vander(x[:4] * 0.0 + np.array([0.0, 1.0, 2.0, x[0]])),
    "polyfit-y": lambda x: np.polyfit(XS, x[:8], 2),
    "polyfit-x": lambda x: np.polyfit(x[:8] + XS * 3, np.sin(XS), 3),
    "polyfit-w": lambda x: np.polyfit(XS, np.cos(XS), 2, w=1 + x[:8] ** 2),
    "polyfit-2d-y": lambda x: np.polyfit(XS[:5], x[:10].reshape(5, 2), 1),
    "polyfit-full": lambda x: np.concatenate(
        [np.ravel(r) for r in np.polyfit(XS, x[:8], 2, full=True)[:2]]),
    "roots-real": lambda x: np.sort(np.roots(np.poly(x[:3]))),
    "roots-complex": lambda x: np.roots(x[:4]),
    "roots-zeros": lambda x: np.roots(np.concatenate([[0.0], x[:3], [0.0, 0.0]])),
    "poly-matrix": lambda x: np.poly(x[:9].reshape(3, 3)),
    "poly-complex-zeros": lambda x: np.poly(x[:3] + 1j * x[3:6]),
}


@pytest.mark.parametrize("name", sorted(POLYNOMIALS))
def test_polynomials(name):
    _check(POLYNOMIALS[name], RNG.standard_normal(10), atol=1e-6)


def test_polynomials_second_order():
    _check_second_order(POLYNOMIALS["polyfit-x"], RNG.standard_normal(10))
    _check_second_order(POLYNOMIALS["roots-complex"], RNG.standard_normal(10))


def test_polyfit_cov_is_refused():
    with pytest.raises(ad.MissingRuleError, match="cov=True"):
        ad.jacobian(lambda y: np.polyfit(XS, y, 1, cov=True)[0])(np.ones(8))


# -- unique, histogram ------------------------------------------------------------------------------

BINNING = {
    "unique": lambda x: np.unique(x),
    "unique-duplicates": lambda x: np.unique(np.concatenate([x[:4], x[:3]])),
    "unique-axis": lambda x: np.unique(np.concatenate([x[:6].reshape(2, 3), x[None, :3]]),
                                       axis=0),
    "histogram-weights": lambda x: np.histogram(A0, bins=4, weights=x)[0],
    "histogram-weights-density": lambda x: np.histogram(A0, bins=4, weights=x, density=True)[0],
    "histogram-range": lambda x: np.histogram(A0, bins=3, range=(0.2, 0.8), weights=x)[0],
    "histogram-edges": lambda x: np.histogram(x, bins=4)[1],
    "histogram-density": lambda x: np.histogram(x, bins=4, density=True)[0],
    "histogram-given-edges": lambda x: np.histogram(A0, bins=np.array([0.0, 0.3, 0.5, 1.0]),
                                                    weights=x ** 2)[0],
}


@pytest.mark.parametrize("name", sorted(BINNING))
def test_binning(name):
    _check(BINNING[name], A0 + 0.01 * RNG.standard_normal(10))


def test_unique_returns_constants():
    x = np.array([3.0, 1.0, 3.0, 2.0])
    (values, index, inverse, counts), _ = ad.jvp(
        lambda x: np.unique(x, return_index=True, return_inverse=True, return_counts=True),
        (x,), (np.ones(4),))
    expected = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for ours, theirs in zip((values, index, inverse, counts), expected):
        np.testing.assert_array_equal(ours, theirs)
    # the first occurrence of a repeated value gets the derivative
    np.testing.assert_allclose(ad.jacobian(np.unique)(x), [[0, 1, 0, 0], [0, 0, 0, 1],
                                                           [1, 0, 0, 0]])


def test_histogram_with_string_bins_is_refused():
    with pytest.raises(ad.MissingRuleError, match="bins='auto'"):
        ad.grad(lambda x: np.sum(np.histogram(x, bins="auto")[1]))(A0)


jax = pytest.importorskip("jax", reason="JAX is the oracle")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

ORACLE = {
    "piecewise": lambda m: lambda x: m.sum(m.piecewise(
        x, [x < -0.5, x > 0.5], [lambda v: v ** 3, m.exp, lambda v: 2 * v])),
    "interp-period": lambda m: lambda x: m.sum(m.interp(
        x * 100, m.array([190.0, -190.0, 350.0, -350.0]), m.array([5.0, 10.0, 3.0, 4.0]),
        period=360)),
    "polyfit": lambda m: lambda x: m.sum(m.polyfit(m.linspace(-1.0, 2.0, 10), x, 3) ** 2),
    "roots": lambda m: lambda x: m.sum(m.abs(m.roots(x[:5])) ** 2),
    "histogram": lambda m: lambda x: m.sum(m.histogram(
        m.linspace(0.0, 1.0, 10), bins=3, weights=x ** 2, density=True)[0] ** 2),
    "histogram-edges": lambda m: lambda x: m.sum(m.histogram(x, bins=3)[1] ** 2),
}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_matches_jax(name):
    x = RNG.standard_normal(10)
    ours = ad.grad(ORACLE[name](np))(x)
    theirs = jax.grad(ORACLE[name](jnp))(x)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-7, atol=1e-9)
