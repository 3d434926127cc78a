"""unbroadcast sums a broadcast gradient back to an argument's shape: every pair of shapes
numpy broadcasts, against the sum written out, for arrays, numbers and traced gradients."""

import itertools

import numpy as np
import pytest

import dualad as ad
from dualad.core.unbroadcast import unbroadcast

SHAPES = [(), (1,), (3,), (1, 3), (2, 1), (2, 3), (1, 1), (4, 2, 3), (4, 1, 3), (1, 2, 1)]


def _reference(grad, shape):
    extra = grad.ndim - len(shape)
    out = grad.sum(axis=tuple(range(extra))) if extra else grad
    for i, n in enumerate(shape):
        if n == 1 and out.shape[i] != 1:
            out = out.sum(axis=i, keepdims=True)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("other", SHAPES)
def test_every_broadcast_pair(shape, other):
    try:
        full = np.broadcast_shapes(shape, other)
    except ValueError:
        return
    grad = np.arange(1.0, 1.0 + np.prod(full, dtype=int)).reshape(full)
    got = unbroadcast(grad, shape)
    assert np.shape(got) == shape
    np.testing.assert_array_equal(got, _reference(grad, shape))
    assert unbroadcast(grad, list(shape)).shape == shape  # a list of sizes too
    for _ in range(2):  # the plan is remembered: the same answer again
        np.testing.assert_array_equal(unbroadcast(grad, shape), got)


def test_same_shape_and_numbers_pass_through():
    g = np.ones((2, 3))
    assert unbroadcast(g, (2, 3)) is g
    x = np.float64(2.5)
    assert unbroadcast(x, ()) is x
    np.testing.assert_array_equal(unbroadcast(x, (2,)), [2.5, 2.5])  # a number broadcast up


def test_traced_gradients_are_summed_by_numpy_functions():
    # a gradient that is itself differentiated (forward over reverse): Duals summed down
    def f(b):
        return ad.grad(lambda b: np.sum(np.sin(np.ones((4, 3)) * b)))(b)

    b0 = np.array([0.3, -0.7, 1.1])
    h = ad.jacobian(f, mode="forward")(b0)
    np.testing.assert_allclose(h, np.diag(-4 * np.sin(b0)), rtol=1e-12)
    for a, b in itertools.product([(2, 1), (1, 3)], repeat=2):
        assert unbroadcast(np.ones(np.broadcast_shapes(a, b)), a).shape == a
