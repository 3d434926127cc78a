"""Joining and splitting in both modes against finite differences."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad
from dualad.core.trees import tree_flatten

C = rand(2, 3)

CASES = {
    "concatenate": (((2, 3), (1, 3)), lambda a, b: np.concatenate([a, b])),
    "concatenate axis": (((2, 3), (2, 1)), lambda a, b: np.concatenate((a, b, a), 1)),
    "concatenate none": (((2, 3), (2,)), lambda a, b: np.concatenate([a, b], axis=None)),
    "concatenate constant": (((2, 3), (2, 3)), lambda a, b: np.concatenate([C, a * b])),
    "stack": (((2, 3), (2, 3)), lambda a, b: np.stack([a, b])),
    "stack axis": (((2,), (2,)), lambda a, b: np.stack((a, b, a), axis=-1)),
    "stack 0d": (((), ()), lambda a, b: np.stack([a, b])),
    "hstack": (((2,), (3,)), lambda a, b: np.hstack([a, b])),
    "hstack 2d": (((2, 3), (2, 1)), lambda a, b: np.hstack([a, b])),
    "vstack": (((3,), (3,)), lambda a, b: np.vstack([a, b])),
    "vstack 2d": (((2, 3), (1, 3)), lambda a, b: np.vstack([a, C, b])),
    "dstack": (((2, 3), (2, 3)), lambda a, b: np.dstack([a, b])),
    "column_stack": (((3,), (3, 2)), lambda a, b: np.column_stack([a, b])),
    "append": (((2, 3), (1, 3)), lambda a, b: np.append(a, b, axis=0)),
    "append flat": (((2,), ()), lambda a, b: np.append(a, b)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_joins(name):
    shapes, f = CASES[name]
    check(f, *[rand(*s) for s in shapes])


SPLITS = {
    "split": ((4, 3), lambda x: np.split(x, 2)),
    "split indices": ((5,), lambda x: np.split(x, [1, 3])),
    "split axis": ((2, 4), lambda x: np.split(x, [3], axis=1)),
    "array_split": ((5, 2), lambda x: np.array_split(x, 3)),
    "hsplit": ((2, 4), lambda x: np.hsplit(x, 2)),
    "hsplit 1d": ((4,), lambda x: np.hsplit(x, 2)),
    "vsplit": ((4, 2), lambda x: np.vsplit(x, [1])),
    "dsplit": ((1, 2, 4), lambda x: np.dsplit(x, 2)),
    "unstack": ((3, 2), lambda x: np.unstack(x, axis=1)),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_splits_every_piece(name):
    shape, f = SPLITS[name]
    x = rand(*shape)
    n = len(f(x))
    for i in range(n):
        check(lambda x, i=i: f(x)[i], x)
    # pieces combined: the gradient reaches every piece (unused ones contribute zeros)
    check(lambda x: f(x)[0] * 2.0 if n == 1 else np.sum(f(x)[0]) + np.sum(f(x)[-1] ** 2), x)


def test_block_nested_lists():
    check(lambda a, b: np.block([[a, 2 * a], [b, a]]), rand(2, 2), rand(2, 2))
    check(lambda a: np.block([a, a[::-1]]), rand(3))
    check(lambda a: np.block([[a[0]], [np.ones(2)]]), rand(2, 2))
    check(lambda a: np.block([[[a]]]), rand(2))
    out, tangent = ad.jvp(lambda a: np.block([[a, a]]), (a := rand(2, 2),), (np.ones((2, 2)),))
    np.testing.assert_array_equal(out, np.block([[a, a]]))
    np.testing.assert_array_equal(tangent, np.ones((2, 4)))


def test_tuple_and_list_arguments():
    def f(pair, lst):
        a, b = pair
        return np.concatenate([a * lst[0], np.stack(lst)[1]])

    args = ((rand(2), rand(2)), [rand(2), rand(2)])
    grads = ad.grad(lambda p, q: np.sum(f(p, q) ** 2), argnums=(0, 1))(*args)
    assert isinstance(grads[0], tuple) and isinstance(grads[1], list)
    flat, _ = tree_flatten(args)

    def g(*leaves):
        return np.sum(f((leaves[0], leaves[1]), [leaves[2], leaves[3]]) ** 2)

    check(g, *flat)


def test_second_order_joins():
    check_second_order(lambda x: np.concatenate([x, x ** 2]) * np.hstack([x[::-1], x]), rand(3))
    check_second_order(lambda x: np.split(x * x, 2)[1], rand(4))
