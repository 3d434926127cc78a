"""np.convolve, np.correlate and sliding_window_view: values equal to numpy's, derivatives
against central differences (both modes, real and complex, second order) and JAX."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(2029)
LENGTHS = [(5, 3), (3, 5), (4, 4), (1, 3), (6, 1), (4, 6), (2, 5)]


def _real_imag(f):
    def g(x):
        y = f(x)
        return np.concatenate([np.ravel(np.real(y)), np.ravel(np.imag(y))])
    return g


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n, m", LENGTHS, ids=str)
@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
def test_convolution(func, n, m, mode, complex_):
    def f(x):
        a = x[:n] + 1j * x[n:2 * n] if complex_ else x[:n]
        v = x[2 * n:2 * n + m] + 1j * x[2 * n + m:] if complex_ else x[2 * n:2 * n + m]
        return func(a, v, mode)

    x = RNG.standard_normal(2 * n + 2 * m)
    out, _ = ad.jvp(f, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(out, f(x))
    g = _real_imag(f)
    expected = numerical_jacobian(g, (x,), 0)
    for how in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(g, mode=how)(x), expected, atol=1e-8)


def test_constant_operands_lists_and_scalars():
    f = lambda v: np.convolve([1.0, 2.0, 3.0], v)  # noqa: E731
    np.testing.assert_allclose(ad.jacobian(f)(np.ones(2)),
                               [[1, 0], [2, 1], [3, 2], [0, 3]])
    np.testing.assert_allclose(ad.grad(lambda a: np.sum(np.convolve(a, 2.0)))(1.5), 2.0)


def test_second_order():
    f = lambda x: np.sum(np.convolve(x[:5], x[5:], "same") ** 2)  # noqa: E731
    x = RNG.standard_normal(8)
    np.testing.assert_allclose(ad.hessian(f)(x), numerical_jacobian(ad.grad(f), (x,), 0),
                               atol=1e-6)


def test_sparsity_is_banded():
    pattern = ad.jacobian_sparsity(lambda x: np.convolve(x, [1.0, 2.0, 3.0], "same"))(np.ones(6))
    expected = np.abs(np.subtract.outer(np.arange(6), np.arange(6))) <= 1
    np.testing.assert_array_equal(pattern.toarray(), expected)


def test_bad_input_is_numpy_error():
    with pytest.raises(ValueError, match="mode"):
        ad.grad(lambda x: np.sum(np.convolve(x, x, "middle")))(np.ones(3))
    with pytest.raises(ValueError, match="empty"):
        ad.grad(lambda x: np.sum(np.convolve(x, np.ones(0))))(np.ones(3))


WINDOWS = [((6,), 3, None), ((4, 5), (2, 3), None), ((4, 5), 2, 1), ((3, 4, 5), (2, 2), (0, 2))]


@pytest.mark.parametrize("shape, window, axis", WINDOWS, ids=str)
def test_sliding_window_view(shape, window, axis):
    x = RNG.standard_normal(shape)
    f = lambda x: sliding_window_view(x, window, axis)  # noqa: E731
    expected = numerical_jacobian(f, (x,), 0)
    for how in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(f, mode=how)(x), expected, atol=1e-9)
    w = RNG.standard_normal(f(x).shape)
    scalar = lambda x: np.sum(w * f(x) ** 3)  # noqa: E731
    np.testing.assert_allclose(ad.hessian(scalar)(x), numerical_jacobian(ad.grad(scalar), (x,), 0),
                               atol=1e-6)
    pattern = ad.jacobian_sparsity(lambda x: np.ravel(f(x)))(x).toarray()
    assert np.all(pattern.sum(axis=1) == 1)  # each entry copies one input entry


jax = pytest.importorskip("jax", reason="JAX is the oracle")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_matches_jax(name, mode):
    a = RNG.standard_normal(7) + 1j * RNG.standard_normal(7)
    v = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)

    def make(m):
        return lambda a, v: m.sum(m.abs(getattr(m, name)(a, v, mode)) ** 2)

    ours = ad.grad(make(np), argnums=(0, 1))(a, v)
    theirs = jax.grad(make(jnp), argnums=(0, 1))(a, v)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, np.asarray(t), rtol=1e-9, atol=1e-12)
