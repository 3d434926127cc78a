"""Gradient rules for indexing: ``x[key]`` with slices, integers, integer arrays and masks.

Repeated indices accumulate, as the chain rule requires.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(x[np.array([0, 0, 2])]))(np.ones(3))
    array([2., 0., 1.])
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..dispatch import gradient
from ..numpy_bridge import shape_of
from ..operators import Method
from ..tracing import primitive

__all__ = ["index_add"]


def _is_basic(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))
               for p in parts)


def _index_add(values: Any, key: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Zeros of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
    out = np.zeros(shape, dtype=np.result_type(values, np.float64))
    if _is_basic(key):
        out[key] = values
    else:
        np.add.at(out, key, values)
    return out


index_add = primitive(_index_add)


@gradient.dispatch
def _getitem(op: Method[operator.getitem], grad: Any, output: Any, x: Any, key: Any):
    return (index_add(grad, key, shape_of(x)), None)


@gradient.dispatch
def _index_add_gradient(op: Method[index_add], grad: Any, output: Any, values: Any, key: Any,
                        shape: Any):
    g = grad[key]
    return (np.reshape(g, shape_of(values)) if shape_of(g) != shape_of(values) else g,
            None, None)
