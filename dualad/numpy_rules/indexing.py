"""Rules for indexing: ``x[key]`` with slices, integers, integer arrays and masks.

Repeated indices accumulate, as the chain rule requires. Functions that only move, repeat
or drop entries (tile, repeat, flip, pad, sort, take, ...) share one pair of rules through
an *index map* (:func:`index_map`): the function applied to ``arange(x.size)`` says which
input entry each output entry is (``-1`` for a constant entry, such as padding); the
gradient adds ``grad`` into those entries, the tangent gathers the partials.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(x[np.array([0, 0, 2])]))(np.ones(3))
    array([2., 0., 1.])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_composite,
    declare_index_map,
    note_scatter,
    partials_key,
    primitive,
    shape_of,
    unbroadcast,
)
from ._support import gradient_rule, is_plain_array, tangent_rule

__all__ = ["gather_gradient", "gather_tangent", "index_add", "index_map"]


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


@gradient_rule(operator.getitem)
def _getitem(grad: Any, output: Any, x: Any, key: Any):
    return (index_add(grad, key, shape_of(x)), None)


@gradient_rule(index_add)
def _index_add_gradient(grad: Any, output: Any, values: Any, key: Any,
                        shape: Any):
    g = grad[key]
    vs = shape_of(values)
    if shape_of(g) != vs:
        g = unbroadcast(g, vs) if len(shape_of(g)) != len(vs) or 1 in vs else np.reshape(g, vs)
    return (g, None, None)


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


@tangent_rule(operator.getitem)
def _getitem(x: Any, key: Any) -> Any:
    v, p = x.value, x._p
    if type(v) is np.ndarray and type(p) is np.ndarray:  # the common case, first
        return Dual._make(v[key], p[key if type(key) is slice or type(key) is int
                                    else partials_key(key)], x.tag)
    if is_plain_array(v):
        return Dual._make(v[key], x.partials[partials_key(key)], x.tag)
    return Dual._make(operator.getitem(v, key),
                      operator.getitem(x.partials, partials_key(key)), x.tag)


# -- functions that move, repeat or drop entries -----------------------------------------


def index_map(func: Callable[..., Any], shape: tuple[int, ...], *args: Any,
              **kwargs: Any) -> np.ndarray:
    """``func`` applied to the flat positions of an array of ``shape``.

    Each output entry is the flat index of the input entry it copies.
    """
    size = int(np.prod(shape, dtype=np.int64))
    return np.asarray(func(np.arange(size, dtype=np.intp).reshape(shape), *args, **kwargs))


def gather_gradient(grad: Any, index: np.ndarray, shape: tuple[int, ...],
                    permutation: bool = False) -> Any:
    """The gradient of ``out = x.flat[index]`` (``-1`` entries are constants) w.r.t. ``x``.

    ``permutation``: ``index`` uses every entry exactly once (sort), so the gradient is a
    gather with the inverse permutation instead of a scatter-add.
    """
    size = int(np.prod(shape, dtype=np.int64))
    index = np.asarray(index)
    if index.size == 0 or size == 0:
        return np.zeros(shape)
    if permutation:
        inverse = np.empty(size, dtype=np.intp)
        inverse[index.reshape(-1)] = np.arange(size, dtype=np.intp)
        return np.reshape(np.reshape(grad, (-1,))[inverse], shape)
    valid = index >= 0
    if valid.all():
        flat = index_add(np.reshape(grad, (-1,)), index.reshape(-1), (size,))
    else:
        flat = index_add(grad[valid], index[valid], (size,))
    return np.reshape(flat, shape)


def gather_tangent(p: Any, index: np.ndarray) -> Any:
    """Partials of ``out = x.flat[index]`` from the partials ``p`` of ``x``."""
    index = np.asarray(index)
    k = shape_of(p)[-1]
    size = int(np.prod(shape_of(p)[:-1], dtype=np.int64))
    if index.size == 0 or size == 0:
        return np.zeros(index.shape + (k,))
    flat = np.reshape(p, (size, k))
    valid = index >= 0
    if valid.all():
        return flat[index]
    out = flat[np.where(valid, index, 0)]
    return out * valid[..., None]


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------

declare_index_map(operator.getitem)



def _index_add_positions(values: Any, key: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The flat position in the result of ``_index_add`` of each entry ``values[key]`` adds."""
    size = int(np.prod(shape, dtype=np.int64))
    return np.arange(size).reshape(shape)[key]


def _index_add_flow(values: Any, key: Any, shape: tuple[int, ...]) -> Any:
    """``_index_add`` as numpy calls with flows: a weighted bincount of the positions."""
    size = int(np.prod(shape, dtype=np.int64))
    positions = _index_add_positions(values, key, shape)
    vshape = np.shape(values)
    if vshape != positions.shape and len(vshape) <= positions.ndim:
        values = np.broadcast_to(values, positions.shape)  # one value into several entries
    target = np.broadcast_to(positions, np.shape(values)).reshape(-1)
    return np.bincount(target, weights=np.ravel(values), minlength=size).reshape(shape)


declare_composite(index_add, _index_add_flow)
note_scatter(index_add, _index_add_positions)  # compiled as a scatter-add
