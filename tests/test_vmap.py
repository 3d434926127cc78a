"""ad.vmap: JAX's meaning (in_axes, out_axes, trees), over dualad's transforms and plain
functions, the .batch entry of compiled functions, and clear errors."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


def lorenz96(t, y):
    return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + 8.0


def test_vmap_of_jacobian_matches_each_jacobian():
    states = np.random.default_rng(0).standard_normal((7, 10)) + 8.0
    f = lambda y: lorenz96(0.0, y)  # noqa: E731
    jacs = ad.vmap(ad.jacobian(f))(states)
    assert jacs.shape == (7, 10, 10)
    for y, j in zip(states, jacs):
        np.testing.assert_allclose(j, numerical_jacobian(f, (y,), 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(j, ad.jacobian(f, mode="reverse")(y), rtol=1e-12)


def test_vmap_of_ode_jacobian_with_unmapped_time():
    states = np.random.default_rng(1).standard_normal((5, 6)) + 8.0
    jac = ad.ode_jacobian(lorenz96)
    out = ad.vmap(jac, in_axes=(None, 0))(0.0, states)
    np.testing.assert_array_equal(out, np.stack([jac(0.0, y) for y in states]))


def test_in_axes_out_axes_and_trees_as_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))

    def f(xp):
        return lambda u, v: (xp.tanh(u) @ v, xp.sum(u * u))

    for in_axes, out_axes, args in [((0, None), 0, (a, b)), ((1, None), (1, 0), (a.T, b)),
                                    ((None, 1), (0, 0), (a, b)), (0, 0, (a, b.T[:3]))]:
        got = ad.vmap(f(np), in_axes=in_axes, out_axes=out_axes)(*args)
        want = jax.vmap(f(jnp), in_axes=in_axes, out_axes=out_axes)(*args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)
    tree = {"w": a, "s": np.arange(3.0)}
    got = ad.vmap(lambda p: p["w"].sum() * p["s"])(tree)
    want = jax.vmap(lambda p: p["w"].sum() * p["s"])(tree)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12)


def test_vmap_of_grad_and_nested_vmap():
    x = np.random.default_rng(3).standard_normal((4, 3, 2))
    g = ad.vmap(ad.vmap(ad.grad(lambda v: np.sum(np.sin(v) * v))))(x)
    np.testing.assert_allclose(g, np.sin(x) + x * np.cos(x), rtol=1e-12)
    assert ad.vmap(ad.derivative(np.sin))(np.array([0.0, np.pi])).tolist() == [1.0, -1.0]


def test_a_batch_method_is_used():
    calls = []

    class Compiled:
        __name__ = "compiled"

        def __call__(self, x, c):
            return x * c

        def batch(self, xs, c):
            calls.append(xs.shape)
            return xs * c

    out = ad.vmap(Compiled(), in_axes=(0, None), out_axes=1)(np.ones((3, 2)), 2.0)
    assert calls == [(3, 2)] and out.shape == (2, 3) and np.all(out == 2.0)
    # another in_axes cannot use it: the loop runs
    out = ad.vmap(Compiled(), in_axes=(1, None))(np.ones((2, 3)), 2.0)
    assert calls == [(3, 2)] and out.shape == (3, 2)


def test_bad_axes_are_clear_errors():
    f = ad.vmap(lambda a, b: a + b, in_axes=(0, 0))
    with pytest.raises(ValueError, match="disagree on the batch size: 3 and 4"):
        f(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="in_axes has 1 entries but .* 2 positional"):
        ad.vmap(lambda a, b: a, in_axes=(0,))(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="scalar; pass in_axes=None"):
        ad.vmap(lambda a, b: a)(np.ones(2), 1.0)
    with pytest.raises(ValueError, match="no argument is mapped"):
        ad.vmap(lambda a: a, in_axes=None)(np.ones(2))
    with pytest.raises(ValueError, match="out of range"):
        ad.vmap(lambda a: a, in_axes=2)(np.ones((2, 2)))
    with pytest.raises(TypeError, match="in_axes must be"):
        ad.vmap(lambda a: a, in_axes="0")(np.ones(2))
