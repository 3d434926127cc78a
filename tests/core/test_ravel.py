"""ad.ravel_pytree: the flat vector and unravel as jax.flatten_util.ravel_pytree."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
import scipy.optimize

import dualad as ad


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float


class Pair(NamedTuple):
    first: np.ndarray
    second: np.ndarray


TREES = [
    {"w": np.arange(6.0).reshape(2, 3), "b": 0.5},
    Params(np.ones((2, 2)), 3.0),
    [Pair(np.zeros(2), np.ones((1, 3))), (np.float32(2.0), np.array(7))],
    (),
    np.array(4.0),
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_round_trip(tree):
    flat, unravel = ad.ravel_pytree(tree)
    assert flat.ndim == 1 and np.issubdtype(flat.dtype, np.inexact)
    leaves, _ = _flatten(tree)
    rebuilt = unravel(flat)
    rebuilt_leaves, _ = _flatten(rebuilt)
    assert type(rebuilt) is type(tree)
    for a, b in zip(leaves, rebuilt_leaves):
        np.testing.assert_array_equal(np.asarray(a), b)
        assert np.asarray(a).dtype == np.asarray(b).dtype
        assert np.shape(a) == np.shape(b)


def _flatten(tree):
    from dualad.extend import tree_flatten
    return tree_flatten(tree)


def test_unravel_checks_the_size():
    _, unravel = ad.ravel_pytree({"a": np.ones(3)})
    with pytest.raises(ValueError, match="size 3"):
        unravel(np.ones(4))


def test_gradient_through_unravel_and_scipy_minimize():
    x = np.random.default_rng(0).standard_normal((8, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.3

    def loss(p):
        return np.mean((x @ p.w + p.b - y) ** 2)

    flat0, unravel = ad.ravel_pytree(Params(np.zeros(3), 0.0))
    flat_loss = lambda v: loss(unravel(v))  # noqa: E731
    g = ad.grad(flat_loss)(flat0)
    expected = ad.grad(loss)(Params(np.zeros(3), 0.0))
    np.testing.assert_allclose(g, np.concatenate([expected.w, [expected.b]]))
    res = scipy.optimize.minimize(flat_loss, flat0, jac=ad.grad(flat_loss), method="BFGS")
    fitted = unravel(res.x)
    np.testing.assert_allclose(fitted.w, [1.0, -2.0, 0.5], atol=1e-5)
    np.testing.assert_allclose(fitted.b, 0.3, atol=1e-5)
    hess = ad.hessian(flat_loss)(flat0)
    assert hess.shape == (4, 4)


jax = pytest.importorskip("jax", reason="JAX is the reference")
flatten_util = pytest.importorskip("jax.flatten_util")
jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("tree", [
    {"b": np.float64(0.5), "w": np.arange(6.0).reshape(2, 3)},  # JAX sorts dict keys
    [np.ones(2, np.float32), np.arange(3, dtype=np.float32)],
    [np.ones(2, np.float32), np.arange(3.0)],
    (np.ones(2, np.int64), np.arange(3.0)),
    {"r": np.ones(2), "z": np.array([1 + 2j])},
])
def test_matches_jax(tree):
    ours, _ = ad.ravel_pytree(tree)
    theirs, _ = flatten_util.ravel_pytree(tree)
    assert ours.dtype == np.asarray(theirs).dtype
    np.testing.assert_array_equal(ours, np.asarray(theirs))
