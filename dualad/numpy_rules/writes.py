"""Writing into arrays in reverse mode: ``y = np.empty_like(x); y[i] = ...``.

Simulation code allocates an array like its input and fills it. On a graph node,
``np.empty_like`` / ``np.zeros_like`` / ``np.ones_like`` / ``np.full_like`` and
``np.copy`` (``x.copy()``) return a :class:`~dualad.reverse_mode.graph.MutableNode`: a graph node that
may be written into. (``empty_like`` gives zeros, so unwritten entries are defined.)

Each write ``y[key] = value`` records a *functional update*: a new node
``assign(old_state, key, value)`` (a copy of the old array with ``value`` written at
``key``), and ``y`` is rebound to that node. The gradient reaches both the old state
(zero at the written entries) and the written value (the entries that survived; with
repeated fancy indices only the last write counts, as in numpy). Calls that used ``y``
before the write recorded the state they saw, so reading and writing may interleave:

    >>> import numpy as np, dualad as ad
    >>> def cumulative(x):
    ...     y = np.empty_like(x)
    ...     y[0] = x[0]
    ...     for i in range(1, len(x)):
    ...         y[i] = y[i - 1] * 0.5 + x[i]
    ...     return np.sum(y)
    >>> ad.grad(cumulative)(np.ones(3))
    array([1.75, 1.5 , 1.  ])

Each write copies the array (O(n) per write), the price of keeping every earlier state
for the reverse pass. A computed value written into (``y[i] = ...``, ``y += v``) becomes
such a node when the write needs it (:mod:`dualad.reverse_mode.aliases`); writing into a
differentiated argument is a TypeError that says to allocate with ``np.empty_like`` /
``np.copy`` first; writing a traced value into a plain ``np.empty(n)`` array is a
TypeError too (it would drop the derivative). Forward mode's Duals write in place (see :mod:`dualad.forward_mode.dual`).
``np.copyto``, ``np.put``, ``np.put_along_axis``, ``np.fill_diagonal``, ``np.putmask``
and ``np.place`` on a writable node are writes as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..extend import (
    AbstractNode,
    CachedNode,
    Dual,
    Method,
    MutableNode,
    TagMismatchError,
    Traced,
    apply_operator,
    declare_allocation,
    declare_index_map,
    declare_write,
    innermost,
    not_writable_message,
    note_index_map,
    partials_key,
    primitive,
    recording_paused,
    register_function_hook,
    register_write_hook,
    shape_of,
    tangent_parts,
    unbroadcast,
    value,
)
from ._signatures import bind
from ._support import gradient_rule, tangent_rule

__all__ = ["assign", "write"]


def _is_basic(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, np.integer))
               for p in parts)


def _assign(array: Any, key: Any, value: Any) -> np.ndarray:
    """A copy of ``array`` with ``value`` written at ``key`` (a float array keeps its
    dtype, as numpy's writes do)."""
    dtype = np.result_type(array, value, np.float64)
    kind = getattr(array, "dtype", dtype).kind
    if kind == "f" and dtype.kind == "f":
        dtype = array.dtype
    out = np.array(array, dtype=dtype, copy=True)
    out[key] = value
    return out


assign = primitive(_assign)
note_index_map(assign, data=(0, 2))  # writes only move entries (for compiled tapes)


def _surviving(shape: tuple[int, ...], key: Any) -> np.ndarray | None:
    """Which target entries of ``out[key] = v`` remain written (later repeats win)."""
    if _is_basic(key):
        return None
    target = np.empty(shape, dtype=np.bool_)[key].shape
    n = int(np.prod(target, dtype=np.int64))
    winner = np.full(shape, -1, dtype=np.intp)
    winner[key] = np.arange(n, dtype=np.intp).reshape(target)
    alive = np.zeros(n, dtype=bool)
    alive[winner[winner >= 0]] = True
    return None if alive.all() else alive.reshape(target)


@gradient_rule(assign)
def _assign_gradient(grad: Any, output: Any, array: Any, key: Any, value: Any) -> tuple:
    g_old = assign(grad, key, 0.0)
    g_value = grad[key]
    alive = _surviving(shape_of(output), key)
    if alive is not None:
        g_value = g_value * alive
    return (g_old, None, unbroadcast(g_value, shape_of(value)))


@tangent_rule(assign, duals=(0, 2))
def _assign_tangent(array: Any, key: Any, value: Any) -> Any:
    tag, ((av, ap), _, (vv, vp)) = tangent_parts((array, key, value))
    out = assign(av, key, vv)
    k = shape_of(ap if ap is not None else vp)[-1]
    if ap is None:
        ap = np.zeros(shape_of(out) + (k,))
    return Dual._make(out, assign(ap, partials_key(key), 0.0 if vp is None else vp), tag)


# -- writes on graph nodes -----------------------------------------------------------------


def write(target: MutableNode, key: Any, value: Any) -> None:
    """``target[key] = value``: record the functional update and rebind ``target`` to it.

    Reverse mode calls it for every write into a writable node (``register_write_hook``).
    """
    new = assign(target._state, key, value)
    if isinstance(new, CachedNode):
        target._rebind(new)
        return
    if isinstance(new, Traced):
        raise TagMismatchError(
            f"dualad: cannot write a {type(value).__name__} of an inner differentiation into "
            f"an array allocated from a graph node of an outer one; allocate the array "
            f"inside the inner function (np.empty_like of one of its arguments)."
        )
    target._rebind(_constant_node(new, target.level))


register_write_hook(write)


def _constant(value: Any) -> Any:
    """A fresh copy of ``value`` (the recorded call of a buffer's initial constant)."""
    return np.copy(value)


_CONSTANT = Method.instance(_constant)


def _constant_node(value: Any, level: int) -> CachedNode:
    return CachedNode.recorded(_CONSTANT, (value,), {}, value, level)


def _writable(node: Any) -> Any:
    """``node`` (a CachedNode) as a writable MutableNode sharing its recorded call."""
    if isinstance(node, CachedNode) and not isinstance(node, MutableNode):
        return MutableNode.from_state(node)
    return node


def _fill_like(fill: Any) -> Any:
    """Handler of ``np.<fill>_like(node, ...)``: a writable node with no dependence."""

    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        proto = args[0] if args else kwargs.get("prototype", kwargs.get("a"))
        if recording_paused() or not isinstance(proto, AbstractNode):
            return None
        rest = args[1:]
        top = innermost(rest, {k: v for k, v in kwargs.items() if k not in ("a", "prototype")})
        if top is not None and top.level >= proto.level:  # full_like with a traced fill
            return _writable(apply_operator(Method.instance(func), args, kwargs))
        value = fill(proto._primal(), *rest, **{k: v for k, v in kwargs.items()
                                                 if k not in ("a", "prototype")})
        if not isinstance(value, (np.ndarray, np.floating, float, Traced)) or \
                getattr(value, "dtype", np.dtype(float)).kind != "f":
            return value
        return MutableNode.from_state(_constant_node(value, proto.level))

    return handler


register_function_hook(np.empty_like, _fill_like(np.zeros_like))
register_function_hook(np.zeros_like, _fill_like(np.zeros_like))
register_function_hook(np.ones_like, _fill_like(np.ones_like))
register_function_hook(np.full_like, _fill_like(np.full_like))


def _copy_handler(func: Any, args: tuple, kwargs: dict) -> Any:
    return _writable(apply_operator(Method.instance(np.copy), args, kwargs))


register_function_hook(np.copy, _copy_handler)


@gradient_rule(np.full_like)
def _full_like(grad: Any, output: Any, a: Any, fill_value: Any, *args: Any,
               **kwargs: Any) -> tuple:
    # the template gives only a shape and dtype: its gradient is zero
    return (np.zeros(shape_of(a)), unbroadcast(grad, shape_of(fill_value))) + \
        (None,) * len(args)


# -- in-place numpy functions on writable nodes ----------------------------------------------


def _target(dst: Any, fname: str) -> MutableNode:
    if isinstance(dst, MutableNode):
        return dst
    if isinstance(dst, AbstractNode):
        raise TypeError(not_writable_message(dst, f"np.{fname}(x, ...)"))
    raise TypeError(_plain_target_message(fname))


def _plain_target_message(fname: str) -> str:
    return (
        f"dualad: np.{fname} would write a traced value into a plain numpy array, which "
        f"drops its derivative; allocate the array with np.empty_like(x) / "
        f"np.zeros_like(x) of a traced x instead."
    )


# Each plan turns an in-place numpy call into (destination, key, value): dst[key] = value.


def _plan_copyto(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    p = bind(("dst", "src", "casting", "where"), args, kwargs)
    dst, where = p["dst"], p.get("where", True)
    if where is True:
        return dst, Ellipsis, p["src"]
    return dst, Ellipsis, np.where(where, p["src"], dst)


def _plan_put(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    p = bind(("a", "ind", "v", "mode"), args, kwargs)
    shape = shape_of(p["a"])
    ind = np.asarray(p["ind"]).reshape(-1)
    mode = p.get("mode", "raise")
    size = int(np.prod(shape, dtype=np.int64))
    if mode == "wrap":
        ind = ind % size
    elif mode == "clip":
        ind = np.clip(ind, 0, size - 1)
    v = p["v"]
    if np.ndim(v) if not isinstance(v, Traced) else len(shape_of(v)):
        v = np.reshape(v, (-1,))
        n = shape_of(v)[0]
        if n != ind.size:
            v = np.take(v, np.arange(ind.size) % n)
    return p["a"], np.unravel_index(ind, shape), v


def _plan_put_along_axis(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    p = bind(("arr", "indices", "values", "axis"), args, kwargs)
    shape = shape_of(p["arr"])
    axis, indices, values = p["axis"], np.asarray(p["indices"]), p["values"]
    if axis is None:
        flat = np.reshape(values, (-1,)) if len(shape_of(values)) else values
        return p["arr"], np.unravel_index(indices.reshape(-1), shape), flat
    ax = axis % len(shape)
    grids = np.ix_(*[np.arange(n) for n in indices.shape])
    key = tuple(indices if i == ax else np.broadcast_to(g, indices.shape)
                for i, g in enumerate(grids))
    return p["arr"], key, values


def _plan_fill_diagonal(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    p = bind(("a", "val", "wrap"), args, kwargs)
    shape = shape_of(p["a"])
    if len(shape) == 2 and p.get("wrap", False) and shape[0] > shape[1]:
        rows = np.arange(shape[0])
        rows = rows[(rows % (shape[1] + 1)) != shape[1]]
        key: Any = (rows, np.arange(rows.size) % shape[1])
        n = rows.size
    else:
        n = min(shape)
        key = (np.arange(n),) * len(shape)
    val = p["val"]
    if len(shape_of(val)):
        flat = np.reshape(val, (-1,))
        val = np.take(flat, np.arange(n) % max(shape_of(flat)[0], 1))
    return p["a"], key, val


def _cycled(values: Any, positions: Any, fname: str, any_written: bool) -> Any:
    """``values.flat[positions % values.size]`` (numpy's repetition of short values)."""
    flat = np.reshape(values, (-1,)) if len(shape_of(values)) else np.reshape(values, (1,))
    n = shape_of(flat)[0]
    if n == 0:
        if any_written and fname == "place":
            raise ValueError("np.place: cannot insert from an empty array (numpy's "
                             "'Cannot insert from an empty array!'); pass at least one value.")
        return None
    return np.take(flat, positions % n)


def _plan_putmask(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    """``np.putmask(a, mask, values)``: ``a.flat[i] = values.flat[i % n]`` where the
    mask holds, as one masked write (the mask stays data: a tape recomputes it)."""
    p = bind(("a", "mask", "values"), args, kwargs)
    a, mask = p["a"], p["mask"]
    shape = shape_of(a)
    size = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(shape_of(mask), dtype=np.int64)) != size:
        raise ValueError(f"np.putmask: the mask has shape {shape_of(mask)} but the array "
                         f"has shape {shape}; they must have the same size.")
    picked = _cycled(p["values"], np.arange(size), "putmask", True)
    if picked is None:
        return a, Ellipsis, a
    return a, Ellipsis, np.where(np.reshape(mask, shape), np.reshape(picked, shape), a)


def _plan_place(args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    """``np.place(arr, mask, vals)``: the k-th True entry of the mask gets
    ``vals.flat[k % n]`` (the positions are computed from the mask as data)."""
    p = bind(("arr", "mask", "vals"), args, kwargs)
    a, mask = p["arr"], p["mask"]
    shape = shape_of(a)
    size = int(np.prod(shape, dtype=np.int64))
    if int(np.prod(shape_of(mask), dtype=np.int64)) != size:
        raise ValueError(f"np.place: the mask has shape {shape_of(mask)} but the array "
                         f"has shape {shape}; they must have the same size.")
    flat_mask = np.reshape(mask, (-1,))
    rank = np.cumsum(flat_mask) - 1  # which value each masked entry takes
    picked = _cycled(p["vals"], np.maximum(rank, 0), "place", bool(np.any(value(flat_mask))))
    if picked is None:
        return a, Ellipsis, a
    return a, Ellipsis, np.where(np.reshape(mask, shape), np.reshape(picked, shape), a)


_PLANS = {np.copyto: _plan_copyto, np.put: _plan_put, np.put_along_axis: _plan_put_along_axis,
          np.fill_diagonal: _plan_fill_diagonal, np.putmask: _plan_putmask,
          np.place: _plan_place}


def _node_in_place(func: Any, args: tuple, kwargs: dict) -> None:
    dst, key, value = _PLANS[func](args, kwargs)
    write(_target(dst, func.__name__), key, value)


def _dual_in_place(func: Any) -> Any:
    def impl(*args: Any, **kwargs: Any) -> None:
        dst, key, value = _PLANS[func](args, kwargs)
        if isinstance(dst, Dual):
            dst[key] = value
            return None
        if isinstance(dst, Traced) or not any(
                isinstance(a, Traced) for a in list(args) + list(kwargs.values())):
            return func(*args, **kwargs)
        raise TypeError(_plain_target_message(func.__name__))

    impl.__name__ = f"_{func.__name__}"
    return impl


for _f in _PLANS:
    register_function_hook(_f, _node_in_place, in_place=True)
    tangent_rule(_f, duals="any")(_dual_in_place(_f))


# -- allocation like an array (forward mode) -------------------------------------------


def _like(fill: Callable[..., Any], name: str) -> Callable[..., Any]:
    def rule(prototype: Any, dtype: Any = None, order: str = "K", subok: bool = True,
             shape: Any = None, **kwargs: Any) -> Any:
        # the result is a constant at every level: build it from the plain primal
        v = fill(value(prototype), dtype=dtype, order=order, shape=shape, **kwargs)
        if dtype is not None and np.dtype(dtype).kind != "f":
            return v
        k = prototype.k
        return Dual._make(v, np.zeros(shape_of(v) + (k,)), prototype.tag)

    rule.__name__ = f"_{name}"
    return rule


tangent_rule(np.empty_like)(_like(np.empty_like, "empty_like"))
tangent_rule(np.zeros_like)(_like(np.zeros_like, "zeros_like"))
tangent_rule(np.ones_like)(_like(np.ones_like, "ones_like"))


@tangent_rule(np.full_like, duals=(0, 1))
def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, **kwargs: Any) -> Any:
    tag, ((av, _), (fv, fp)) = tangent_parts((a, fill_value))
    v = np.full_like(av, fv, dtype=dtype, order=order, shape=shape, **kwargs)
    if dtype is not None and np.dtype(dtype).kind != "f":
        return v
    k = a.k if isinstance(a, Dual) and a.tag is tag else fill_value.k
    p = np.zeros(shape_of(v) + (k,))
    if fp is not None:
        p = p + fp
    return Dual._make(v, p, tag)


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# Buffers to write into: their entries depend on nothing until written (np.full_like: on
# the fill value).

declare_allocation(np.empty_like, np.zeros_like, np.ones_like)
declare_allocation(np.full_like, fill=1)

declare_write(np.copyto, np.fill_diagonal)
declare_write(np.put, np.put_along_axis, np.putmask, np.place, data=(2,))
declare_index_map(assign, data=(0, 2))
