"""Summing a broadcast gradient back down to an argument's shape.

Example:
    >>> import numpy as np
    >>> from dualad.core.unbroadcast import unbroadcast
    >>> unbroadcast(np.ones((2, 3)), (1, 3))
    array([[2., 2., 2.]])
    >>> unbroadcast(np.ones((2, 3)), ())
    np.float64(6.0)
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .array_protocol import shape_of

__all__ = ["unbroadcast"]


def unbroadcast(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` over the axes that broadcasting added or stretched, to get ``shape``.

    Leading axes are summed away; axes of size 1 in ``shape`` are summed with keepdims.
    """
    gshape = shape_of(grad)
    if gshape == tuple(shape):
        return grad
    extra = len(gshape) - len(shape)
    if extra < 0:
        return np.broadcast_to(grad, shape)
    # ndarray.sum is np.sum without its Python-level wrapper (the same reduction)
    total = grad.sum if type(grad) is np.ndarray else functools.partial(np.sum, grad)
    if extra:
        grad = total(axis=tuple(range(extra)))
        total = grad.sum if type(grad) is np.ndarray else functools.partial(np.sum, grad)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and gshape[extra + i] != 1)
    if axes:
        grad = total(axis=axes, keepdims=True)
    return grad
