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
from ..dual import Dual
from ..numpy_bridge import shape_of
from ..operators import Method
from ..tracing import primitive
from ..unbroadcast import unbroadcast
from ._support import tangent_rule

__all__ = ["index_add", "partials_key"]


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
    vs = shape_of(values)
    if shape_of(g) != vs:
        g = unbroadcast(g, vs) if len(shape_of(g)) != len(vs) or 1 in vs else np.reshape(g, vs)
    return (g, None, None)


def partials_key(key: Any) -> Any:
    """``key`` for partials (the trailing direction axis stays whole)."""
    if type(key) is tuple and any(p is Ellipsis for p in key):
        return key + (slice(None),)
    if key is Ellipsis:
        return (Ellipsis, slice(None))
    return key


@tangent_rule(index_add)
def _index_add_tangent(values: Any, key: Any, shape: Any) -> Any:
    p = values.partials
    k = shape_of(p)[-1]
    out = index_add(values.value, key, shape)
    vshape = shape_of(values.value)
    target = shape_of(np.empty(shape, dtype=np.bool_)[key])
    if vshape != target:  # values broadcast into the target: broadcast the partials too
        p = np.broadcast_to(p, target + (k,))
    return Dual._make(out, index_add(p, partials_key(key), tuple(shape) + (k,)), values.tag)


# -- sparsity detection: how entries flow (see dualad.sparse.flows) ------------------------
from ..sparse.flows import declare_index_map  # noqa: E402

declare_index_map(operator.getitem)
