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

from typing import Any

import numpy as np

from .array_protocol import shape_of

__all__ = ["unbroadcast"]


def unbroadcast(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``grad`` over the axes that broadcasting added or stretched, to get ``shape``.

    Leading axes are summed away; axes of size 1 in ``shape`` are summed with keepdims.
    """
    gshape = grad.shape if type(grad) is np.ndarray else shape_of(grad)
    if type(shape) is not tuple:
        shape = tuple(shape)
    if gshape == shape:
        return grad
    plan = _PLANS.get((gshape, shape))
    if plan is None:
        plan = _plan(gshape, shape)
    if plan is _BROADCAST:
        return np.broadcast_to(grad, shape)
    lead, kept = plan
    if type(grad) is np.ndarray:  # numpy's add.reduce, as ndarray.sum runs it
        if lead:
            grad = _add_reduce(grad, lead)
        if kept:
            grad = _add_reduce(grad, kept, None, None, True)
        return grad
    if lead:
        grad = np.sum(grad, axis=lead)
    if kept:
        grad = np.sum(grad, axis=kept, keepdims=True)
    return grad


_add_reduce: Any = np.add.reduce
_BROADCAST = object()
# (gradient shape, shape) -> (leading axes summed away, axes summed with keepdims)
_PLANS: dict[tuple, Any] = {}


def _plan(gshape: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    extra = len(gshape) - len(shape)
    if extra < 0:
        plan: Any = _BROADCAST
    else:
        plan = (tuple(range(extra)),
                tuple(i for i, n in enumerate(shape) if n == 1 and gshape[extra + i] != 1))
    if len(_PLANS) < 4096:
        _PLANS[(gshape, shape)] = plan
    return plan
