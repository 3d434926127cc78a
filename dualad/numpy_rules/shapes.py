"""Gradient rules for functions that move or repeat entries: reshape, transpose, broadcast.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.reshape(x, (3, 2)) ** 2))(np.ones(6))
    array([2., 2., 2., 2., 2., 2.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch import gradient
from ..numpy_bridge import shape_of
from ..operators import Method
from ..unbroadcast import unbroadcast
from ._signatures import bind


@gradient.dispatch
def _reshape(op: Method[np.reshape], grad: Any, output: Any, x: Any, *args: Any,
             **kwargs: Any):
    order = bind(("a", "shape", "order"), (x,) + args, kwargs).get("order") or "C"
    return (_unflatten(grad, x, order),) + (None,) * len(args)


@gradient.dispatch
def _ravel(op: Method[np.ravel], grad: Any, output: Any, x: Any, *args: Any,
           **kwargs: Any):
    order = bind(("a", "order"), (x,) + args, kwargs).get("order") or "C"
    return (_unflatten(grad, x, order),) + (None,) * len(args)


def _unflatten(grad: Any, x: Any, order: str) -> Any:
    """``grad`` of a reshape of ``x`` read in ``order``, back in ``x``'s shape."""
    if order not in ("C", "F"):
        base = x
        while not isinstance(base, np.ndarray) and hasattr(base, "_primal"):
            base = base._primal()
        base = np.asarray(base)
        if order == "A":  # Fortran order for Fortran-contiguous x, else C order
            order = "F" if base.flags.f_contiguous and not base.flags.c_contiguous else "C"
    if order in ("C", "F"):
        return np.reshape(grad, shape_of(x), order=order)
    # ravel(order="K") reads x in its memory layout: find where each read entry came from.
    where = np.empty_like(base, dtype=np.intp)
    where[...] = np.arange(where.size).reshape(where.shape)
    source = np.ravel(where, order=order)
    return np.reshape(np.reshape(grad, (-1,))[np.argsort(source)], shape_of(x))


@gradient.dispatch
def _transpose(op: Method[np.transpose], grad: Any, output: Any, x: Any, *args: Any,
               **kwargs: Any):
    axes = bind(("a", "axes"), (x,) + args, kwargs).get("axes")
    if axes is None:
        return (np.transpose(grad),) + (None,) * len(args)
    ndim = len(shape_of(x))
    inverse = np.argsort([a % ndim for a in axes])
    return (np.transpose(grad, tuple(int(i) for i in inverse)),) + (None,) * len(args)


@gradient.dispatch
def _swapaxes(op: Method[np.swapaxes], grad: Any, output: Any, x: Any, axis1: Any,
              axis2: Any):
    return (np.swapaxes(grad, axis1, axis2), None, None)


@gradient.dispatch
def _broadcast_to(op: Method[np.broadcast_to], grad: Any, output: Any, x: Any, *args: Any,
                  **kwargs: Any):
    return (unbroadcast(grad, shape_of(x)),) + (None,) * len(args)
