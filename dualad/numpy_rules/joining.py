"""Rules for joining and splitting: concatenate, stack, hstack, vstack, dstack, split, ...

``concatenate`` and ``stack`` have direct gradients (slices of ``grad``; their tangents
live in :mod:`dualad.numpy_rules.tangents_core`). The other joins (``hstack``, ``vstack``,
``dstack``, ``column_stack``, ``append``) and the splits (``split``, ``array_split``,
``hsplit``, ``vsplit``, ``dsplit``, ``unstack``) use an index map: the function applied
to the flat positions of its inputs says where each output entry comes from. A split
returns a list of arrays; its gradient receives one gradient per piece (zeros for
pieces that were not used). ``np.block`` is traced through as the concatenations it
stands for.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.vstack([x, 2 * x])))(np.ones(2))
    array([3., 3.])
    >>> ad.grad(lambda x: np.sum(np.split(x, 2)[1]))(np.ones(4))
    array([0., 0., 1., 1.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    Traced,
    declare_index_map,
    innermost_tag,
    lift_object_array,
    register_function_hook,
    shape_of,
)
from ._signatures import bind
from ._support import (
    gradient_rule,
    ndim_of,
    normalize_axes_in_order,
    normalize_axis,
    split_duals,
    tangent_rule,
)
from .indexing import gather_gradient, gather_tangent, index_map

__all__ = ["join_rules", "split_rules"]


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


# -- concatenate and stack: gradients by slicing ---------------------------------------------


@gradient_rule(np.concatenate)
def _concatenate(grad: Any, output: Any, arrays: Any, *args: Any, **kwargs: Any) -> tuple:
    axis = bind(("axis",), args, kwargs).get("axis", 0)
    shapes = [shape_of(a) for a in arrays]
    if axis is None:
        flat = np.reshape(grad, (-1,))
        out, start = [], 0
        for s in shapes:
            n = _size(s)
            out.append(np.reshape(flat[start:start + n], s))
            start += n
        return (tuple(out),) + (None,) * len(args)
    ax = normalize_axis(axis, len(shapes[0]), "concatenate")
    out, start = [], 0
    lead = (slice(None),) * ax
    for s in shapes:
        n = s[ax]
        out.append(grad[lead + (slice(start, start + n),)])
        start += n
    return (tuple(out),) + (None,) * len(args)


@gradient_rule(np.stack)
def _stack(grad: Any, output: Any, arrays: Any, *args: Any, **kwargs: Any) -> tuple:
    axis = bind(("axis",), args, kwargs).get("axis", 0)
    ax = normalize_axis(axis, len(shape_of(output)), "stack")
    lead = (slice(None),) * ax
    return (tuple(grad[lead + (i,)] for i in range(len(arrays))),) + (None,) * len(args)


# -- other joins: index maps over all inputs --------------------------------------------------


def _joint_maps(shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """Flat positions of each input within the concatenation of all inputs' entries."""
    maps, start = [], 0
    for s in shapes:
        n = _size(s)
        maps.append(np.arange(start, start + n, dtype=np.intp).reshape(s))
        start += n
    return maps


def join_rules(func: Any, items_of: Callable[[tuple, dict], tuple[list[Any], Callable]],
               name: str | None = None) -> None:
    """Rules for a function that joins several arrays.

    ``items_of(args, kwargs)`` returns the list of joined arrays and ``call(items)``,
    which calls ``func`` with other arrays in their place; the gradient is returned in the
    same positions (a tuple for a list argument).
    """

    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        items, call, positions = items_of(args, kwargs)
        shapes = [shape_of(x) for x in items]
        index = np.asarray(call(_joint_maps(shapes)))
        total = sum(_size(s) for s in shapes)
        flat = gather_gradient(grad, index, (total,))
        grads, start = [], 0
        for s in shapes:
            n = _size(s)
            grads.append(np.reshape(flat[start:start + n], s))
            start += n
        return positions(grads)

    def tangent_impl(*args: Any, **kwargs: Any) -> Any:
        items, call, _ = items_of(args, kwargs)
        items = [_lift(x) for x in items]  # a list holding Duals: one Dual, not a constant
        tag = innermost_tag(list(items))
        if tag is None:
            return func(*args, **kwargs)
        values, partials = split_duals(items, tag)
        k = next(shape_of(p)[-1] for p in partials if p is not None)
        flat = np.concatenate([
            np.reshape(p, (-1, k)) if p is not None else np.zeros((_size(shape_of(v)), k))
            for v, p in zip(values, partials)
        ], axis=0)
        index = np.asarray(call(_joint_maps([shape_of(v) for v in values])))
        return Dual._make(call(values), gather_tangent(flat, index), tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{name or func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals="any")(tangent_impl)


def _sequence_items(func: Any) -> Callable[[tuple, dict], tuple]:
    """``items_of`` for ``func(tup, *rest, **kwargs)``, whose first argument is a sequence."""

    def items_of(args: tuple, kwargs: dict) -> tuple:
        items = list(args[0])
        rest = args[1:]

        def call(new_items: list[Any]) -> Any:
            return func(new_items, *rest, **kwargs)

        def positions(grads: list[Any]) -> tuple:
            return (tuple(grads),) + (None,) * len(rest)

        return items, call, positions

    return items_of


def _append_items(args: tuple, kwargs: dict) -> tuple:
    p = bind(("arr", "values", "axis"), args, kwargs)
    axis = p.get("axis")

    def call(new_items: list[Any]) -> Any:
        return np.append(new_items[0], new_items[1], axis=axis)

    def positions(grads: list[Any]) -> tuple:
        return (grads[0], grads[1]) + (None,) * (len(args) - 2)

    return [p["arr"], p["values"]], call, positions


for _f in (np.hstack, np.vstack, np.dstack, np.column_stack):
    join_rules(_f, _sequence_items(_f))
join_rules(np.append, _append_items)


# -- splits ---------------------------------------------------------------------------------------


def split_rules(func: Any) -> None:
    """Rules for a function returning a list of pieces of its first argument."""

    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        maps = func(index_map(lambda a: a, shape_of(x)), *args, **kwargs)
        index = np.concatenate([np.reshape(m, (-1,)) for m in maps]) if len(maps) else \
            np.zeros(0, dtype=np.intp)
        flat = np.concatenate([np.reshape(g, (-1,)) for g in grad]) if len(grad) else \
            np.zeros(0)
        return (gather_gradient(flat, index, shape_of(x)),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        values = func(x.value, *args, **kwargs)
        partials = _split_partials(func, x, args, kwargs)
        if partials is None:  # gathered (copies)
            maps = func(index_map(lambda a: a, shape_of(x.value)), *args, **kwargs)
            partials = [gather_tangent(x.partials, m) for m in maps]
        pieces = [Dual._make(v, p, x.tag) for v, p in zip(values, partials)]
        return type(values)(pieces) if isinstance(values, tuple) else pieces

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func)(tangent_impl)


def _split_partials(func: Any, x: Any, args: tuple, kwargs: dict) -> list | None:
    """The pieces of ``x``'s partials split as its value is, as views of them (numpy's
    split pieces are views: a later in-place write into ``x`` reaches them), or None."""
    partials, ndim = x.partials, np.ndim(x.value)
    if not isinstance(partials, np.ndarray) or ndim == 0:
        return None
    if func in (np.split, np.array_split):
        p = bind(("ary", "indices_or_sections", "axis"), (x, *args), kwargs)
        axis = p.get("axis", 0)
        split, sections = func, p["indices_or_sections"]
    elif func in (np.hsplit, np.vsplit, np.dsplit):
        if len(args) != 1 or kwargs:
            return None
        axis = {np.hsplit: 1 if ndim > 1 else 0, np.vsplit: 0, np.dsplit: 2}[func]
        split, sections = np.split, args[0]
    else:
        return None
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        return None
    return list(split(partials, sections, axis=int(axis) % ndim))


for _f in (np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit):
    split_rules(_f)
if hasattr(np, "unstack"):
    split_rules(np.unstack)


# -- np.block: nested concatenations ----------------------------------------------------------


def _block_depth(arrays: Any) -> int:
    depth, item = 0, arrays
    while type(item) is list:
        depth += 1
        if not item:
            break
        item = item[0]
    return depth


def block(arrays: Any) -> Any:
    """``np.block(arrays)`` written as concatenations (so it differentiates in both modes).

    Example:
        >>> import numpy as np
        >>> block([[np.ones((1, 1)), np.zeros((1, 2))], [np.zeros((1, 1)), np.ones((1, 2))]])
        array([[1., 0., 0.],
               [0., 1., 1.]])
    """
    depth = _block_depth(arrays)
    leaves = []
    stack = [arrays]
    while stack:
        item = stack.pop()
        if type(item) is list:
            stack.extend(item)
        else:
            leaves.append(item)
    ndim = max([depth] + [len(shape_of(x)) for x in leaves])
    # build bottom-up without recursion: (item, depth, parent list, slot)
    root: list[Any] = [None]
    work: list[tuple[Any, int, list[Any], int, bool]] = [(arrays, 0, root, 0, False)]
    while work:
        item, level, parent, slot, done = work.pop()
        if type(item) is list and not done:
            children: list[Any] = [None] * len(item)
            work.append((children, level, parent, slot, True))
            for i, child in enumerate(item):
                work.append((child, level + 1, children, i, False))
        elif done:
            parent[slot] = np.concatenate(item, axis=-(depth - level))
        else:
            shape = shape_of(item)
            parent[slot] = np.reshape(item, (1,) * (ndim - len(shape)) + tuple(shape))
    return root[0]


def _block_hook(func: Any, args: tuple, kwargs: dict) -> Any:
    return block(*args, **kwargs)


register_function_hook(np.block, _block_hook)
tangent_rule(np.block, duals="any")(block)


# -- tangents of concatenate and stack -------------------------------------------------


def _has_traced(x: Any) -> bool:
    """Whether a (nested) list or tuple holds a traced value."""
    stack = [x]
    while stack:
        item = stack.pop()
        if isinstance(item, Traced):
            return True
        if type(item) in (list, tuple):
            stack.extend(item)
    return False


def _lift(item: Any) -> Any:
    """A list holding Duals (``[x[0], 1.0]``) as one array-like Dual."""
    if type(item) in (list, tuple) and _has_traced(item):
        holder = np.empty(len(item), dtype=object)
        for i, sub in enumerate(item):
            holder[i] = _lift(sub)
        return lift_object_array(holder)
    return item


def _joined_parts(arrays: Any) -> tuple[Any, list[Any], list[Any]]:
    items = [_lift(x) for x in arrays]
    tag = innermost_tag(items)
    k = next(x.k for x in items if isinstance(x, Dual) and x.tag is tag)
    values, partials = split_duals(items, tag)
    partials = [np.zeros(shape_of(v) + (k,)) if p is None else p
                for v, p in zip(values, partials)]
    return tag, values, partials


def _has_dual(arrays: Any) -> bool:
    return isinstance(arrays, (list, tuple)) and _has_traced(arrays) and any(
        isinstance(x, Dual) for x in (_lift(a) for a in arrays))


@tangent_rule(np.concatenate, duals="any")
def _concatenate(arrays: Any, axis: Any = 0, out: Any = None, **kwargs: Any) -> Any:
    if isinstance(arrays, Dual):  # an array is the sequence of its rows, as for numpy
        arrays = [arrays[i] for i in range(shape_of(arrays)[0])]
    if not _has_dual(arrays):
        return np.concatenate(arrays, axis=axis, out=out, **kwargs)
    tag, values, partials = _joined_parts(arrays)
    k = shape_of(partials[0])[-1]
    if axis is None:
        values = [np.reshape(v, (-1,)) for v in values]
        partials = [np.reshape(p, (-1, k)) for p in partials]
        ax = 0
    else:
        ax = normalize_axes_in_order(axis, ndim_of(values[0]), "concatenate")[0]
    v = np.concatenate(values, axis=ax, **kwargs)
    return Dual._make(v, np.concatenate(partials, axis=ax), tag)


@tangent_rule(np.stack, duals="any")
def _stack(arrays: Any, axis: int = 0, out: Any = None, **kwargs: Any) -> Any:
    if isinstance(arrays, Dual):  # an array is the sequence of its rows, as for numpy
        arrays = [arrays[i] for i in range(shape_of(arrays)[0])]
    if not _has_dual(arrays):
        return np.stack(arrays, axis=axis, out=out, **kwargs)
    tag, values, partials = _joined_parts(arrays)
    ax = normalize_axes_in_order(axis, ndim_of(values[0]) + 1, "stack")[0]
    v = np.stack(values, axis=ax, **kwargs)
    return Dual._make(v, np.stack(partials, axis=ax), tag)


# -- lists holding traced values among the joined items (np.hstack([x, [y[0], 1.0]])) -------
# Reverse mode records the call with the items as given, so such a list would be a
# constant: lift it into one traced array first (forward mode lifts in its tangent rules).


def _lifting_sequence_hook(func: Any, args: tuple, kwargs: dict) -> Any:
    if args and type(args[0]) in (list, tuple) and any(
            type(item) in (list, tuple) and _has_traced(item) for item in args[0]):
        return func([_lift(item) for item in args[0]], *args[1:], **kwargs)
    return None


def _lifting_append_hook(func: Any, args: tuple, kwargs: dict) -> Any:
    if any(type(a) in (list, tuple) and _has_traced(a) for a in args[:2]):
        return func(*[_lift(a) for a in args[:2]], *args[2:], **kwargs)
    return None


for _f in (np.concatenate, np.stack, np.hstack, np.vstack, np.dstack, np.column_stack):
    register_function_hook(_f, _lifting_sequence_hook)
register_function_hook(np.append, _lifting_append_hook)


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# Joining and splitting only move entries; constants joined in depend on nothing.

declare_index_map(
    np.concatenate, np.stack, np.hstack, np.vstack, np.dstack, np.column_stack, np.block,
    np.split, np.array_split, np.hsplit, np.vsplit,
)
declare_index_map(np.append, data=(0, 1))

declare_index_map(np.unstack, np.dsplit)
