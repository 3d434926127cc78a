"""Functions that move, add, drop or repeat entries, in both modes against finite differences."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

CASES = {
    "reshape": ((2, 3), lambda x: np.reshape(x, (3, 2))),
    "reshape -1": ((2, 3), lambda x: x.reshape(-1, 2)),
    "reshape F": ((2, 3), lambda x: np.reshape(x, (3, 2), order="F")),
    "ravel": ((2, 3), np.ravel),
    "flatten": ((2, 3), lambda x: x.flatten()),
    "transpose": ((2, 3, 2), np.transpose),
    "transpose axes": ((2, 3, 2), lambda x: np.transpose(x, (1, 2, 0))),
    "T": ((2, 3), lambda x: x.T),
    "swapaxes": ((2, 3, 2), lambda x: np.swapaxes(x, 0, -1)),
    "moveaxis": ((2, 3, 2), lambda x: np.moveaxis(x, 0, -1)),
    "moveaxis lists": ((2, 3, 2), lambda x: np.moveaxis(x, [0, 1], [-1, 0])),
    "matrix_transpose": ((2, 3, 2), np.matrix_transpose),
    "expand_dims": ((2, 3), lambda x: np.expand_dims(x, (0, -1))),
    "squeeze": ((2, 1, 3, 1), np.squeeze),
    "squeeze axis": ((2, 1, 3, 1), lambda x: np.squeeze(x, axis=1)),
    "squeeze method": ((1, 3), lambda x: x.squeeze()),
    "broadcast_to": ((3, 1), lambda x: np.broadcast_to(x, (2, 3, 4))),
    "atleast_1d 0d": ((), np.atleast_1d),
    "atleast_2d 1d": ((3,), np.atleast_2d),
    "atleast_3d 1d": ((3,), np.atleast_3d),
    "atleast_3d 2d": ((2, 3), np.atleast_3d),
    "atleast_2d many": ((3,), lambda x: np.atleast_2d(x, 2 * x)[1]),
    "flip": ((2, 3), np.flip),
    "flip axes": ((2, 3, 2), lambda x: np.flip(x, (0, 2))),
    "fliplr": ((2, 3), np.fliplr),
    "flipud": ((2, 3), np.flipud),
    "rot90": ((2, 3), np.rot90),
    "rot90 k axes": ((2, 3, 2), lambda x: np.rot90(x, 3, axes=(2, 0))),
    "roll": ((2, 3), lambda x: np.roll(x, 2, axis=1)),
    "roll flat": ((2, 3), lambda x: np.roll(x, -4)),
    "roll multi": ((2, 3), lambda x: np.roll(x, (1, 2), axis=(0, 1))),
    "tile": ((2,), lambda x: np.tile(x, 3)),
    "tile nd": ((2, 3), lambda x: np.tile(x, (2, 1, 2))),
    "repeat": ((2, 3), lambda x: np.repeat(x, 2, axis=1)),
    "repeat counts": ((3, 2), lambda x: np.repeat(x, [2, 0, 1], axis=0)),
    "repeat flat": ((2, 2), lambda x: np.repeat(x, 3)),
    "pad constant": ((2, 3), lambda x: np.pad(x, ((1, 0), (2, 1)))),
    "pad value": ((3,), lambda x: np.pad(x, 2, constant_values=5.0)),
    "pad reflect": ((2, 3), lambda x: np.pad(x, 1, mode="reflect")),
    "pad edge": ((2, 3), lambda x: np.pad(x, (0, 2), mode="edge")),
    "pad wrap": ((4,), lambda x: np.pad(x, 3, mode="wrap")),
    "pad symmetric": ((3,), lambda x: np.pad(x, 2, mode="symmetric")),
    "diag of matrix": ((3, 4), lambda x: np.diag(x, 1)),
    "diag of vector": ((3,), lambda x: np.diag(x, -1)),
    "diagflat": ((2, 2), np.diagflat),
    "diagonal": ((3, 3), np.diagonal),
    "diagonal axes": ((2, 3, 4), lambda x: np.diagonal(x, 1, -1, 1)),
    "linalg diagonal": ((2, 3, 3), np.linalg.diagonal),
    "tril": ((3, 3), np.tril),
    "tril k": ((2, 3, 4), lambda x: np.tril(x, 1)),
    "triu": ((3, 4), lambda x: np.triu(x, -1)),
    "triu of vector": ((3,), np.triu),
    "copy": ((2, 3), np.copy),
    "copy method": ((2, 3), lambda x: x.copy()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_functions(name):
    shape, f = CASES[name]
    check(f, rand(*shape))


def test_repeated_entries_accumulate():
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda x: np.sum(np.tile(x, 3)), mode=mode)(np.ones(2))
        np.testing.assert_allclose(jac, [3.0, 3.0])
        jac = ad.jacobian(lambda x: np.sum(np.pad(x, 2, mode="edge")), mode=mode)(np.ones(3))
        np.testing.assert_allclose(jac, [3.0, 1.0, 3.0])


def test_second_order_shapes():
    check_second_order(lambda x: np.tile(x, 2) * np.roll(np.repeat(x, 2), 1), rand(3))
    check_second_order(lambda x: np.tril(x) @ np.pad(x, 1)[1:-1, 1:-1], rand(2, 2))


def test_pad_modes_that_do_not_copy_entries_say_so():
    with pytest.raises(NotImplementedError, match="mode"):
        ad.grad(lambda x: np.sum(np.pad(x, 1, mode="mean")))(rand(3))
