"""Selection and indexing in both modes against finite differences, and their conventions."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

X = rand(3, 4)

CASES = {
    "where": lambda x: np.where(x > 0, x, 2 * x),
    "where scalar branch": lambda x: np.where(x > 0, x[0], 0.5),
    "where broadcast": lambda x: np.where(x[:, :1] > 0, np.sin(x), x[0]),
    "select": lambda x: np.select([x > 0.5, x < -0.5], [x, x ** 2], 3 * x),
    "select default const": lambda x: np.select([x > 0], [x]),
    "clip": lambda x: np.clip(x, -0.5, 0.5),
    "clip one side": lambda x: np.clip(x, None, 0.2),
    "clip keywords": lambda x: np.clip(x, min=-0.1),
    "clip method": lambda x: x.clip(-0.3, 0.3),
    "clip traced bounds": lambda x: np.clip(x[0], x[1], x[2] + 1.0),
    "take": lambda x: np.take(x, [0, 2, 2], axis=1),
    "take flat": lambda x: np.take(x, [[0, 5], [5, 7]]),
    "take clip": lambda x: np.take(x, [0, 9], axis=1, mode="clip"),
    "take_along_axis": lambda x: np.take_along_axis(x, np.array([[0, 3], [1, 1], [2, 0]]), 1),
    "sort": lambda x: np.sort(x, axis=1),
    "sort axis0": lambda x: np.sort(x, axis=0),
    "sort flat": lambda x: np.sort(x, axis=None),
    "partition": lambda x: np.partition(x, 1, axis=1),
    "compress": lambda x: np.compress([True, False, True], x, axis=0),
    "extract": lambda x: np.extract(x > 0, x),
    "nan_to_num": lambda x: np.nan_to_num(x),
    "real": np.real,
    "int index": lambda x: x[1],
    "slices": lambda x: x[::-1, 1:3],
    "int arrays repeated": lambda x: x[[0, 0, 2], [1, 1, 3]],
    "int array rows": lambda x: x[np.array([2, 0, 2])],
    "mask": lambda x: x[x > 0],
    "row mask": lambda x: x[np.array([True, False, True])],
    "ellipsis newaxis": lambda x: x[..., None, 1],
    "newaxis": lambda x: x[None, :, np.newaxis, 0],
    "mixed": lambda x: x[1:, [0, 2, 0]],
    "separated advanced": lambda x: x[[0, 1], 1:3][:, [1, 0]],
    "iteration": lambda x: np.stack([row * i for i, row in enumerate(x)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_selection(name):
    check(CASES[name], X)


def test_selection_zero_d_and_length_one():
    check(lambda x: np.where(x > 0, x, -x), rand())
    check(lambda x: np.clip(x, -0.1, 0.1) + np.sort(x), rand(1))
    check(lambda x: x[0] * x[...], rand(1))


def test_repeated_indices_accumulate():
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda x: np.sum(x[np.array([0, 0, 2])]), mode=mode)(np.ones(3))
        np.testing.assert_allclose(jac, [2.0, 0.0, 1.0])
        jac = ad.jacobian(lambda x: np.sum(np.take(x, [1, 1, 1])), mode=mode)(np.ones(3))
        np.testing.assert_allclose(jac, [0.0, 3.0, 0.0])


def test_sort_gradient_follows_the_permutation():
    x = np.array([3.0, 1.0, 2.0])
    w = np.array([0.0, 1.0, 2.0])
    for mode in ("forward", "reverse"):
        g = ad.jacobian(lambda x: np.sum(np.sort(x) * w), mode=mode)(x)
        np.testing.assert_allclose(g, [2.0, 0.0, 1.0])


def test_clip_splits_the_gradient_at_the_bounds():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda x: np.clip(x, 0.0, 1.0), mode=mode)(x)
        np.testing.assert_allclose(np.diag(jac), [0.0, 0.5, 1.0, 0.5, 0.0])


def test_where_needs_no_gradient_for_the_condition():
    c = rand(3, 4) > 0
    check(lambda x, y: np.where(c, x, y), rand(3, 4), rand(4))


def test_second_order_selection():
    check_second_order(lambda x: np.where(x > 0, x ** 3, np.sin(x)), rand(4))
    check_second_order(lambda x: np.sort(x) ** 2 * np.arange(4.0), rand(4))
    check_second_order(lambda x: x[[0, 0, 1]] * x[np.array([True, False, True, True])],
                       rand(4))
