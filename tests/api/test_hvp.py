"""``ad.hvp``: Hessian-vector products, forward over reverse, against the Hessian, finite
differences of the gradient and reverse over forward; numbers, arrays and trees."""

import numpy as np
import pytest

import dualad as ad
from dualad.api import hvp
from dualad.diagnostics.gradcheck import numerical_jacobian


def f(x):
    return np.sum(np.sin(x) * x ** 2) + np.prod(x[:2]) * x[-1]


POINTS = [np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -0.25, 2.0])]


@pytest.mark.parametrize("x", POINTS)
def test_hvp_equals_hessian_times_v(x):
    rng = np.random.default_rng(x.size)
    v = rng.standard_normal(x.shape)
    want = ad.hessian(f)(x) @ v
    np.testing.assert_allclose(hvp(f, x, v), want, rtol=1e-10, atol=1e-12)
    assert ad.hvp is hvp


@pytest.mark.parametrize("x", POINTS)
def test_hvp_against_reverse_over_forward_and_finite_differences(x):
    v = np.linspace(-1.0, 1.0, x.size)
    reverse_over_forward = ad.grad(lambda y: ad.jvp(f, (y,), (v,))[1])(x)
    np.testing.assert_allclose(hvp(f, x, v), reverse_over_forward, rtol=1e-10, atol=1e-12)
    fd = numerical_jacobian(ad.grad(f), (x,), 0) @ v
    np.testing.assert_allclose(hvp(f, x, v), fd, rtol=1e-6, atol=1e-7)


def test_hvp_of_scalar_and_matrix_inputs():
    assert float(hvp(lambda x: x ** 3, 2.0, 1.0)) == pytest.approx(12.0)
    rng = np.random.default_rng(1)
    a, v = rng.standard_normal((2, 3, 3))
    g = lambda m: np.sum(np.tanh(m @ m))  # noqa: E731
    want = (ad.hessian(g)(a).reshape(9, 9) @ v.ravel()).reshape(3, 3)
    np.testing.assert_allclose(hvp(g, a, v), want, rtol=1e-9, atol=1e-12)
    # against finite differences of the gradient
    h = 1e-6
    fd = (ad.grad(g)(a + h * v) - ad.grad(g)(a - h * v)) / (2 * h)
    np.testing.assert_allclose(hvp(g, a, v), fd, rtol=1e-5, atol=1e-6)


def test_hvp_of_a_tree_is_the_same_tree():
    def g(p):
        return np.sum(p["w"] ** 2 * p["b"]) + p["b"] ** 3

    x = {"w": np.array([1.0, -2.0]), "b": 0.5}
    v = {"w": np.array([1.0, 0.0]), "b": 1.0}
    out = hvp(g, x, v)
    assert set(out) == {"w", "b"}
    # H = [[2b I, 2w], [2w^T, 6b]]
    np.testing.assert_allclose(out["w"], 2 * x["b"] * v["w"] + 2 * x["w"] * v["b"])
    np.testing.assert_allclose(out["b"], 2 * x["w"] @ v["w"] + 6 * x["b"] * v["b"])


def test_hvp_shape_mismatch():
    with pytest.raises(ad.ShapeError, match="shape"):
        hvp(f, np.ones(3), np.ones(4))


def test_hvp_tree_structure_mismatch():
    with pytest.raises(ad.ShapeError, match="structure"):
        hvp(lambda p: p[0] * p[1], (1.0, 2.0), (1.0, 2.0, 3.0))
