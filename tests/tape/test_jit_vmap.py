"""ad.vmap of an ad.jit function: one compiled loop over the rows of the mapped argument,
wherever it is (a solver's jac(t, y) over states: in_axes=(None, 0)); results equal to a
loop of the compiled calls, for several in_axes and out_axes forms."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad


def lorenz96(t, y):
    return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + 8.0 + 0.0 * t


def scaled(y, s, c):
    return np.sin(y) * s + c * y[0]


@pytest.fixture(scope="module")
def states():
    return np.random.default_rng(3).standard_normal((7, 10)) + 8.0


def test_ode_jacobian_over_states(states):
    jac = ad.jit(ad.ode_jacobian(lorenz96), fallback="error")
    want = np.stack([jac(0.0, y) for y in states])
    np.testing.assert_array_equal(ad.vmap(jac, in_axes=(None, 0))(0.0, states), want)
    np.testing.assert_array_equal(ad.vmap(jac, in_axes=[None, 0])(0.0, states), want)
    np.testing.assert_array_equal(ad.vmap(jac, in_axes=(None, 1))(0.0, states.T), want)
    moved = ad.vmap(jac, in_axes=(None, 0), out_axes=2)(0.0, states)
    np.testing.assert_array_equal(moved, np.moveaxis(want, 0, 2))
    eager = np.stack([ad.ode_jacobian(lorenz96)(0.0, y) for y in states])
    np.testing.assert_allclose(want, eager, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_any_one_mapped_argument(states, position):
    jac = ad.jit(ad.jacobian(scaled), fallback="error")
    args = [states[0], np.linspace(0.5, 1.5, 10), 0.7]
    rows = states if position == 0 else (np.stack([states[1, :], states[2, :]]) if
                                         position == 1 else np.array([0.1, -0.2, 0.3]))
    axes = tuple(0 if i == position else None for i in range(3))
    want = np.stack([jac(*(args[:position] + [r] + args[position + 1:])) for r in rows])
    got = ad.vmap(jac, in_axes=axes)(*(args[:position] + [rows] + args[position + 1:]))
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


def test_several_mapped_arguments_loop(states):
    grad = ad.jit(ad.grad(lambda y, s: np.sum(np.sin(y) * s)), fallback="error")
    s = states[::-1] * 0.1
    want = np.stack([grad(y, w) for y, w in zip(states, s)])
    np.testing.assert_allclose(ad.vmap(grad)(states, s), want, rtol=1e-15)


def test_batch_at_a_position_with_a_guard():
    """Rows on both sides of a recorded branch: the other rows take the general path."""
    def f(t, y):
        return y * 2.0 if y[0] > 0 else y * 3.0 + t

    jac = ad.jit(ad.ode_jacobian(f), fallback="warn")
    ys = np.array([[1.0, 2.0], [-1.0, 2.0], [3.0, 1.0]])
    want = np.stack([ad.ode_jacobian(f)(0.5, y) for y in ys])
    got = ad.vmap(jac, in_axes=(None, 0))(0.5, ys)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ad.vmap(jac, in_axes=(None, 0))(0.5, ys[::-1]), want[::-1])


def test_large_dense_jacobian_zeroed_by_the_caller(monkeypatch):
    """A dense Jacobian from compressed seeds of at least MIN_CALLER_ZEROS bytes takes
    its zeroed buffer from numpy (made small here to run the path on small problems)."""
    import sys
    from pathlib import Path

    import dualad.tape.numba_backend as backend

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.brusselator2d import make_rhs

    monkeypatch.setattr(backend, "MIN_CALLER_ZEROS", 0)
    f = make_rhs(4)
    y = np.random.default_rng(5).random(32)
    jac = ad.jit(ad.jacobian(f), fallback="error")
    got = jac(y)
    assert jac._fast_entry.kernel.__name__ == "zeroed_first"
    np.testing.assert_allclose(got, ad.jacobian(f)(y), rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(jac(y + 0.5), ad.jacobian(f)(y + 0.5), rtol=1e-13, atol=1e-12)
    assert got is not jac(y)  # a new array each call
    np.testing.assert_allclose(jac.batch(np.stack([y, y + 0.5])),
                               np.stack([got, ad.jacobian(f)(y + 0.5)]), rtol=1e-13,
                               atol=1e-12)
