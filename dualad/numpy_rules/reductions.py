"""Gradient rules for reductions: sum, mean (and ``np.add.reduce``).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.mean(x, axis=0).sum())(np.ones((2, 3)))
    array([[0.5, 0.5, 0.5],
           [0.5, 0.5, 0.5]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch import gradient
from ..numpy_bridge import shape_of
from ..operators import Method
from ._signatures import bind

__all__ = ["normalize_axes", "expand_reduced"]

_REDUCE_NAMES = ("a", "axis", "dtype", "out", "keepdims")


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, int or tuple, negatives allowed) as a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(int(a) % max(ndim, 1) for a in axis))


def expand_reduced(grad: Any, shape: tuple[int, ...], axes: tuple[int, ...],
                   keepdims: bool) -> Any:
    """Broadcast the gradient of a reduction over ``axes`` back to the input ``shape``."""
    if not keepdims:
        kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
        grad = np.reshape(grad, kept)
    return np.broadcast_to(grad, shape)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


@gradient.dispatch
def _sum(op: Method[np.sum], grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any):
    p = bind(_REDUCE_NAMES, (x,) + args, kwargs)
    shape = shape_of(x)
    axes = normalize_axes(p.get("axis"), len(shape))
    return (expand_reduced(grad, shape, axes, bool(p.get("keepdims", False))),) \
        + (None,) * len(args)


@gradient.dispatch
def _add_reduce(op: Method[np.add.reduce], grad: Any, output: Any, x: Any, *args: Any,
                **kwargs: Any):
    p = bind(_REDUCE_NAMES, (x,) + args, kwargs)
    shape = shape_of(x)
    axes = normalize_axes(p.get("axis", 0), len(shape))
    return (expand_reduced(grad, shape, axes, bool(p.get("keepdims", False))),) \
        + (None,) * len(args)


@gradient.dispatch
def _mean(op: Method[np.mean], grad: Any, output: Any, x: Any, *args: Any,
          **kwargs: Any):
    p = bind(_REDUCE_NAMES, (x,) + args, kwargs)
    shape = shape_of(x)
    axes = normalize_axes(p.get("axis"), len(shape))
    g = expand_reduced(grad, shape, axes, bool(p.get("keepdims", False)))
    return (g / _count(shape, axes),) + (None,) * len(args)
