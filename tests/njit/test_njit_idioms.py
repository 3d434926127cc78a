"""@njit code as it is written: np.array of scalars, tuple unpacking, np.zeros / np.empty /
np.ones / np.full buffers filled with dual numbers, np.sum / np.dot; and the stiff test
set compiled as it is (dualad.njit.idioms)."""

import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.stiff_problems import PROBLEMS  # noqa: E402


@numba.njit
def _helper(a, b):
    out = np.empty(2)              # a helper's buffer, filled with duals
    out[0] = a * b
    out[1] = a - b
    return out


@numba.njit
def idioms(t, y):
    y1, y2, y3 = y                              # tuple unpacking
    pair = _helper(y1, y3)
    counts = np.zeros(3, dtype=np.int64)        # integer buffer: stays integers
    counts[1] = 2
    grid = np.zeros((2, 2))                     # 2-d buffer
    grid[0, 1] = y2 * y2
    grid[1, 0] = 0.5
    ones = np.ones(3)
    ones[2] = y1
    total = 0.0
    for v in y:                                 # iteration
        total += v * v
    listed = np.array([y1 * y2, np.sin(y3), 2.0])          # a tuple, numbers mixed in
    arr = np.asarray([y1, y2, y3 * y1])                    # a list of duals
    weights = np.full(3, 0.5)
    return np.array([pair[0] + pair[1], grid[0, 1] + grid[1, 0] * counts[1],
                     np.sum(ones) + total, listed[0] + listed[1] + listed[2],
                     np.dot(arr, weights) + np.dot(arr, arr) + arr.sum()])


def _plain(t, y):
    y1, y2, y3 = y
    return np.array([y1 * y3 + y1 - y3, y2 * y2 + 1.0,
                     2.0 + y1 + np.sum(y * y), y1 * y2 + np.sin(y3) + 2.0,
                     0.5 * (y1 + y2 + y3 * y1) + y1 ** 2 + y2 ** 2 + (y3 * y1) ** 2
                     + y1 + y2 + y3 * y1])


@pytest.mark.parametrize("y", [np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.4, -0.7])])
def test_idioms_differentiate(y):
    np.testing.assert_allclose(idioms(0.0, y), _plain(0.0, y), rtol=1e-13)
    jac = ad.ode_jacobian(idioms)(0.0, y)
    np.testing.assert_allclose(jac, ad.jacobian(lambda v: _plain(0.0, v), mode="reverse")(y),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jac, numerical_jacobian(lambda v: _plain(0.0, v), (y,), 0),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacobian(idioms, argnums=1)(0.0, y), jac, rtol=1e-13)


def test_scalar_derivative_through_np_array():
    @numba.njit
    def f(x):
        out = np.zeros(2)
        out[0] = x * x
        out[1] = np.sum(np.array([x, 3.0 * x]))
        return out

    np.testing.assert_allclose(ad.derivative(f)(1.5), [3.0, 4.0])


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name.split(" (")[0])
def test_stiff_set_compiles_as_written(problem):
    rng = np.random.default_rng(5)
    y = problem.y0 * (1.0 + 0.05 * rng.random(problem.n)) + 1e-3 * rng.random(problem.n)
    hand = problem.jac(0.0, y)
    hand = hand.toarray() if hasattr(hand, "toarray") else hand
    scale = max(1.0, float(np.max(np.abs(hand))))
    compiled = numba.njit(problem.njit_source)
    np.testing.assert_allclose(compiled(0.0, y), problem.rhs(0.0, y), rtol=1e-12,
                               atol=1e-12 * scale)
    np.testing.assert_allclose(ad.ode_jacobian(compiled)(0.0, y), hand, rtol=1e-12,
                               atol=1e-12 * scale)


def test_whole_array_slices_are_still_a_clear_error():
    @numba.njit
    def sliced(t, y):
        out = np.empty(2)
        out[:] = y[:2] * 2.0
        return out

    with pytest.raises(ad.DualadError, match="slice"):
        ad.ode_jacobian(sliced)(0.0, np.ones(3))
