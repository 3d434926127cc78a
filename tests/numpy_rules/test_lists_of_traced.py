"""Python lists holding traced values, passed to numpy functions.

Joins (append, concatenate, stack, hstack, vstack, dstack, column_stack) lift such a list
into one traced array in both modes. np.mean / std / var / average of a list reduced to
one number stay an error: numpy coerces the list to an object array (which works), but
then casts the scalar result with ``result.dtype.type(...)``, i.e. ``np.float64(traced)``,
which can only drop the derivative; with ``axis=`` the result stays an array and works.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

X = np.array([1.0, 2.0, 4.0, 3.0])

JOINS = {
    "append-array-list": lambda x: np.append(x, [x[1]]),
    "append-list-array": lambda x: np.append([x[1]], x),
    "append-lists": lambda x: np.append([x[0], 2.0], [[x[1]], [x[2]]]),
    "hstack": lambda x: np.hstack([x, [x[1], 1.0]]),
    "vstack": lambda x: np.vstack([x[:2], [x[1], x[3]]]),
    "column_stack": lambda x: np.column_stack([x[:2], [x[1], x[3]]]),
    "concatenate": lambda x: np.concatenate([x, [x[1], 1.0]]),
    "concatenate-nested": lambda x: np.concatenate([x[:2].reshape(1, 2), [[x[1], x[0]]]]),
    "stack": lambda x: np.stack([x[:2], [x[1], 1.0]]),
    "dstack": lambda x: np.dstack([x[:2], [x[1], 1.0]]),
    "mean-axis": lambda x: np.mean([x[:2], [x[3], x[0]]], axis=0),
    "std-axis": lambda x: np.std([x[:2], x[2:]], axis=0),
    "average-axis": lambda x: np.average([x[:2], x[2:]], axis=0, weights=[1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(JOINS))
def test_lists_holding_traced_values(name):
    f = JOINS[name]
    expected = numerical_jacobian(f, (X,), 0)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(f, mode=mode)(X), expected, atol=1e-9,
                                   err_msg=mode)


def test_recorded_tapes_and_sparsity_see_the_list():
    f = lambda x: np.sum(np.hstack([x, [x[1], 1.0]]) ** 2)  # noqa: E731
    np.testing.assert_allclose(ad.record(f, X).grad(X), ad.grad(f)(X))
    pattern = ad.jacobian_sparsity(JOINS["hstack"])(X).toarray()
    assert pattern[4, 1] and pattern[4].sum() == 1 and not pattern[5].any()


@pytest.mark.parametrize("reduce", [np.mean, np.std, np.var, np.average, np.median])
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_scalar_reductions_of_lists_say_to_stack(reduce, mode):
    with pytest.raises(ad.ConversionError, match=r"np.stack"):
        ad.jacobian(lambda x: reduce([x[0], x[1], x[2]]), mode=mode)(X)
    f = lambda x: reduce(np.stack([x[0], x[1], x[2]]))  # noqa: E731  (the fix it suggests)
    np.testing.assert_allclose(ad.jacobian(f, mode=mode)(X), numerical_jacobian(f, (X,), 0),
                               atol=1e-8)
