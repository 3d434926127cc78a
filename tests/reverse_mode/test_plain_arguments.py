"""grad's path for plain float64 arguments and a recorded scalar output gives what the
general path gives: values, dtypes, shapes, trees, nested transforms."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


@pytest.mark.parametrize("x", [np.array([0.5, -1.0, 2.0]), 1.5, np.float64(0.25),
                               np.array(0.75), np.ones((2, 3))])
def test_plain_arguments_match_differences(x):
    f = lambda y: np.sum(np.sin(y) * y)  # noqa: E731
    g = ad.grad(f)(x)
    assert isinstance(g, np.ndarray) and g.shape == np.shape(x) and g.dtype == np.float64
    num = numerical_jacobian(f, (np.asarray(x, dtype=float),), 0)
    np.testing.assert_allclose(g, np.reshape(num, np.shape(x)), rtol=1e-6, atol=1e-8)


def test_value_is_an_array_as_before():
    value, g = ad.value_and_grad(lambda y: np.sum(y ** 2))(np.array([1.0, 2.0]))
    assert isinstance(value, np.ndarray) and value.shape == () and float(value) == 5.0
    np.testing.assert_array_equal(g, [2.0, 4.0])


def test_float32_and_trees_keep_the_general_path():
    g = ad.grad(lambda y: np.sum(y * y))(np.ones(3, np.float32))
    assert g.dtype == np.float32
    t = ad.grad(lambda d: np.sum(d["a"] * d["b"]))({"a": np.ones(2), "b": np.full(2, 3.0)})
    np.testing.assert_array_equal(t["a"], [3.0, 3.0])
    np.testing.assert_array_equal(t["b"], [1.0, 1.0])


def test_unused_argument_and_several_argnums():
    g = ad.grad(lambda a, b: np.sum(a * 2.0), argnums=(0, 1))(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(g[0], [2.0, 2.0])
    np.testing.assert_array_equal(g[1], np.zeros(3))


def test_nested_grad_through_the_plain_path():
    assert ad.grad(ad.grad(lambda y: y ** 3))(2.0) == pytest.approx(12.0)
    h = ad.hessian(lambda y: np.sum(y ** 3))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, np.diag([6.0, 12.0]))
