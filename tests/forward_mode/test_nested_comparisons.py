"""Comparisons of dual numbers whose values are graph nodes (forward-over-reverse): they act
on the values and give graph nodes of booleans, so rules that branch with np.where
(power's derivative at 0) record and replay."""

import numpy as np

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


def f(x):
    return np.sum(x ** 2 * np.sin(x)) + np.sum(x ** 3 * np.cos(x))


def test_recorded_hvp_of_power_replays_at_new_points():
    v = np.array([1.0, -0.5, 0.25, 2.0])
    x0 = np.linspace(0.1, 1.0, 4)
    tape = ad.record(lambda x, v: ad.hvp(f, x, v), x0, v)
    for x in (x0, np.array([0.0, 0.5, -1.0, 2.0]), np.array([1.5, -0.3, 0.7, 0.2])):
        expected = ad.hvp(f, x, v)
        np.testing.assert_allclose(tape(x, v), expected, rtol=1e-12, atol=1e-12)
        fd = numerical_jacobian(ad.grad(f), (x,), 0) @ v
        np.testing.assert_allclose(expected, fd, rtol=1e-5, atol=1e-5)


def test_comparison_of_nested_duals_gives_the_values_comparison():
    x = np.array([0.5, 1.0, 2.0])

    def g(x):
        inner = ad.jvp(lambda y: np.less(y * y, 1.5) * y, (x,), (np.ones(3),))[1]
        return np.sum(inner * x)

    # d/dx sum(x * [x^2 < 1.5]) with the mask constant: the mask itself
    np.testing.assert_allclose(ad.grad(g)(x), (x * x < 1.5).astype(float))
