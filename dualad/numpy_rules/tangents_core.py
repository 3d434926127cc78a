"""Tangent (forward-mode) rules of the core structured numpy functions.

sum, mean, reshape, ravel, transpose, swapaxes, broadcast_to, ``x[key]``, matmul, dot,
roll, empty_like / zeros_like / ones_like / full_like, concatenate and stack. A Dual's
partials have the value's axes followed by the direction axis ``k``, so a function that
moves or reduces value axes does the same to the same axes of the partials (negative axes
are normalised against the value's ``ndim`` first). Plain arrays take short numpy paths;
values traced by an outer differentiation go through numpy calls only.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Dual(np.arange(3.0), np.eye(3))
    >>> np.roll(x, 1).partials
    array([[0., 0., 1.],
           [1., 0., 0.],
           [0., 1., 0.]])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dual import (
    Dual,
    _partials_key,
    dual_signatures,
    innermost_tag,
    register_fast_function,
    register_forward,
    tangent_parts,
)
from ..errors import MissingRuleError
from ..nodes import value
from ..numpy_bridge import lift_object_array, shape_of
from ..operators import Method
from ..tracing import Traced

__all__ = ["roll_array"]

_NoValue = getattr(np, "_NoValue", None)


def _tangent(func: Any, n_dual: int = 1, sequence: bool = False) -> Callable[[Any], Any]:
    """Register ``fn(*args, **kwargs)`` as the tangent rule of ``func``.

    ``n_dual`` leading positional arguments may be Duals (every combination is
    registered); ``sequence`` means the first argument is a sequence of arrays.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def method(op, *args, **kwargs):  # plum: no annotations here
            return fn(*args, **kwargs)

        def impl(args: tuple, kwargs: dict) -> Any:
            return fn(*args, **kwargs)

        method.__name__ = method.__qualname__ = f"forward_{fn.__name__.lstrip('_')}"
        op_type = Method[func]
        if sequence:
            register_forward(op_type, (object,), method, varargs=object)
        else:
            for types in dual_signatures(n_dual):
                register_forward(op_type, types, method, varargs=object)
        register_fast_function(func, impl)
        return fn

    return decorate


def _ndim(x: Any) -> int:
    return len(shape_of(x))


def _axes(axis: Any, ndim: int, fname: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for a in axis:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    return tuple(out)


def _plain(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _unsupported(fname: str, what: str) -> MissingRuleError:
    return MissingRuleError(
        f"dualad: forward mode of np.{fname} with {what} is not supported; rewrite the call "
        f"without it, or add a rule with @ad.forward.dispatch for ad.Method[np.{fname}]."
    )


# -- reductions ------------------------------------------------------------------------


@_tangent(np.sum)
def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NoValue, where: Any = _NoValue) -> Any:
    kw = {} if initial is _NoValue else {"initial": initial}
    if where is not _NoValue:  # a masked sum is the sum of the masked array
        return np.sum(np.where(where, a, 0.0), axis=axis, dtype=dtype, keepdims=keepdims, **kw)
    v = np.sum(a.value, axis=axis, dtype=dtype, keepdims=keepdims, **kw)
    p = a.partials
    axes = _axes(axis, _ndim(a.value), "sum")
    if _plain(p):
        dp = np.add.reduce(p, axis=axes, keepdims=keepdims)
    else:
        dp = np.sum(p, axis=axes, keepdims=keepdims)
    return Dual._make(v, dp, a.tag)


@_tangent(np.mean)
def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          *, where: Any = _NoValue) -> Any:
    if where is not _NoValue:  # the masked sum over the number of entries kept
        mask = np.broadcast_to(np.asarray(where, dtype=np.float64), shape_of(a.value))
        count = np.sum(mask, axis=axis, keepdims=keepdims)
        return np.sum(np.where(where, a, 0.0), axis=axis, keepdims=keepdims) / count
    v = np.mean(a.value, axis=axis, dtype=dtype, keepdims=keepdims)
    shape = shape_of(a.value)
    axes = _axes(axis, len(shape), "mean")
    count = 1
    for ax in axes:
        count *= shape[ax]
    p = a.partials
    if _plain(p):
        dp = np.add.reduce(p, axis=axes, keepdims=keepdims) / count
    else:
        dp = np.sum(p, axis=axes, keepdims=keepdims) / count
    return Dual._make(v, dp, a.tag)


# -- moving entries ----------------------------------------------------------------------


@_tangent(np.reshape)
def _reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None,
             copy: Any = None) -> Any:
    if shape is None:
        shape = newshape
    if order not in ("C", "F"):
        raise _unsupported("reshape", f"order={order!r}")
    kw = {} if copy is None else {"copy": copy}
    v = np.reshape(a.value, shape, order=order, **kw)
    p = a.partials
    return Dual._make(v, np.reshape(p, shape_of(v) + (shape_of(p)[-1],), order=order, **kw),
                      a.tag)


@_tangent(np.ravel)
def _ravel(a: Any, order: str = "C") -> Any:
    if order not in ("C", "F"):
        raise _unsupported("ravel", f"order={order!r}")
    v = np.ravel(a.value, order=order)
    p = a.partials
    return Dual._make(v, np.reshape(p, shape_of(v) + (shape_of(p)[-1],), order=order), a.tag)


@_tangent(np.transpose)
def _transpose(a: Any, axes: Any = None) -> Any:
    nd = _ndim(a.value)
    perm = tuple(reversed(range(nd))) if axes is None else _axes(axes, nd, "transpose")
    v = np.transpose(a.value, perm)
    return Dual._make(v, np.transpose(a.partials, perm + (nd,)), a.tag)


@_tangent(np.swapaxes)
def _swapaxes(a: Any, axis1: Any, axis2: Any) -> Any:
    nd = _ndim(a.value)
    a1, a2 = _axes((axis1, axis2), nd, "swapaxes")
    return Dual._make(np.swapaxes(a.value, a1, a2), np.swapaxes(a.partials, a1, a2), a.tag)


@_tangent(np.broadcast_to)
def _broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    p = array.partials
    return Dual._make(np.broadcast_to(array.value, shape),
                      np.broadcast_to(p, shape + (shape_of(p)[-1],)), array.tag)


@_tangent(operator.getitem)
def _getitem(x: Any, key: Any) -> Any:
    v = x.value
    if _plain(v):
        return Dual._make(v[key], x.partials[_partials_key(key)], x.tag)
    return Dual._make(operator.getitem(v, key),
                      operator.getitem(x.partials, _partials_key(key)), x.tag)


_ROLL_INDEX: dict[tuple[int, int], np.ndarray] = {}


def _roll_index(n: int, shift: int) -> np.ndarray:
    key = (n, shift)
    idx = _ROLL_INDEX.get(key)
    if idx is None:
        idx = (np.arange(n) - shift) % n
        if len(_ROLL_INDEX) < 256:
            _ROLL_INDEX[key] = idx
    return idx


def roll_array(a: np.ndarray, shift: int, axis: int) -> np.ndarray:
    """``np.roll(a, shift, axis)`` for one int shift and one non-negative axis, faster."""
    n = a.shape[axis]
    if n == 0:
        return a.copy()
    s = int(shift) % n
    if a.size <= 4096:  # gathering beats two slice copies on small arrays
        return a.take(_roll_index(n, s), axis=axis)
    out = np.empty_like(a)
    lead = (slice(None),) * axis
    out[lead + (slice(s, None),)] = a[lead + (slice(None, n - s),)]
    out[lead + (slice(None, s),)] = a[lead + (slice(n - s, None),)]
    return out


def _roll_fast(args: tuple, kwargs: dict) -> Any:
    """``np.roll(x, shift)`` of a 1-D Dual with plain small arrays: the common case, inline."""
    if len(args) == 2 and not kwargs:
        a, shift = args
        if type(a) is Dual and type(shift) is int:
            v, p = a.value, a._p
            if type(v) is np.ndarray and type(p) is np.ndarray and v.ndim == 1 \
                    and 0 < p.size <= 4096:
                idx = _roll_index(v.shape[0], shift % v.shape[0])
                return Dual._make(v.take(idx), p.take(idx, axis=0), a.tag)
    return _roll(*args, **kwargs)


@_tangent(np.roll)
def _roll(a: Any, shift: Any, axis: Any = None) -> Any:
    v, p = a.value, a.partials
    plain = type(v) is np.ndarray and type(p) is np.ndarray
    if plain and isinstance(shift, (int, np.integer)):
        if axis is None and v.ndim == 1:
            n = v.shape[0]
            if n and v.size * p.shape[-1] <= 4096:
                idx = _roll_index(n, int(shift) % n)
                return Dual._make(v.take(idx), p.take(idx, axis=0), a.tag)
            return Dual._make(roll_array(v, shift, 0), roll_array(p, shift, 0), a.tag)
        if isinstance(axis, (int, np.integer)):
            ax = _axes(axis, v.ndim, "roll")[0]
            return Dual._make(roll_array(v, shift, ax), roll_array(p, shift, ax), a.tag)
    shape = shape_of(v)
    k = shape_of(p)[-1]
    if axis is None:
        rv = np.roll(np.reshape(v, (-1,)), shift)
        rp = np.roll(np.reshape(p, (-1, k)), shift, axis=0)
        return Dual._make(np.reshape(rv, shape), np.reshape(rp, shape + (k,)), a.tag)
    axes = _axes(axis, len(shape), "roll")
    if isinstance(axis, (int, np.integer)):
        axes = axes[0]
    return Dual._make(np.roll(v, shift, axes), np.roll(p, shift, axes), a.tag)


# -- products ------------------------------------------------------------------------------


def _left_term(ap: Any, bv: Any, na: int, nb: int) -> Any:
    """Partials of ``da @ b`` (``ap`` is ``shape(a) + (k,)``)."""
    if nb == 1:  # (..., m, k) -> (..., k, m) @ (m,) -> (..., k)
        return np.matmul(np.swapaxes(ap, -1, -2), bv)
    if na == 1:  # (m, k) -> (k, m) @ (..., m, p) -> (..., k, p) -> (..., p, k)
        return np.swapaxes(np.matmul(np.swapaxes(ap, -1, -2), bv), -1, -2)
    if nb == 2 and _plain(ap) and _plain(bv):  # (..., n, m, k) . (m, p) -> (..., n, k, p)
        return np.swapaxes(np.tensordot(ap, bv, axes=([na - 1], [0])), -1, -2)
    b = bv if nb == 2 else np.reshape(bv, shape_of(bv)[:-2] + (1,) + shape_of(bv)[-2:])
    return np.swapaxes(np.matmul(np.swapaxes(ap, -1, -2), b), -1, -2)


def _right_term(av: Any, bp: Any, nb: int, out_shape: tuple[int, ...]) -> Any:
    """Partials of ``a @ db`` (``bp`` is ``shape(b) + (k,)``)."""
    if nb == 1:  # a @ (m, k)
        return np.matmul(av, bp)
    bs = shape_of(bp)
    k = bs[-1]
    flat = np.reshape(bp, bs[:-2] + (bs[-2] * k,))
    return np.reshape(np.matmul(av, flat), out_shape + (k,))


def _product_tangent(a: Any, b: Any, fname: str) -> Any:
    tag, ((av, ap), (bv, bp)) = tangent_parts((a, b))
    y = np.matmul(av, bv)
    na, nb = _ndim(av), _ndim(bv)
    if na == 0 or nb == 0:
        raise ValueError(f"{fname}: operands must not be 0-d (shapes {shape_of(av)}, "
                         f"{shape_of(bv)}); use * for scalars.")
    acc = None
    if ap is not None:
        acc = _left_term(ap, bv, na, nb)
    if bp is not None:
        term = _right_term(av, bp, nb, shape_of(y))
        acc = term if acc is None else acc + term
    return Dual._make(y, acc, tag)


@_tangent(np.matmul, n_dual=2)
def _matmul(a: Any, b: Any, **kwargs: Any) -> Any:
    if kwargs:
        raise _unsupported("matmul", f"keyword arguments {sorted(kwargs)}")
    return _product_tangent(a, b, "matmul")


@_tangent(np.dot, n_dual=2)
def _dot(a: Any, b: Any, out: Any = None) -> Any:
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    if nb <= 2:
        return _product_tangent(a, b, "dot")
    # N-D by M-D: a sum over the last axis of a and the second-to-last of b
    tag, ((av, ap), (bv, bp)) = tangent_parts((a, b))
    y = np.dot(av, bv)
    acc = None
    if ap is not None:
        acc = np.moveaxis(np.tensordot(ap, bv, axes=([na - 1], [nb - 2])), na - 1, -1)
    if bp is not None:
        term = np.tensordot(av, bp, axes=([na - 1], [nb - 2]))
        acc = term if acc is None else acc + term
    return Dual._make(y, acc, tag)


# -- allocation like an array ----------------------------------------------------------------


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


_tangent(np.empty_like)(_like(np.empty_like, "empty_like"))
_tangent(np.zeros_like)(_like(np.zeros_like, "zeros_like"))
_tangent(np.ones_like)(_like(np.ones_like, "ones_like"))


@_tangent(np.full_like, n_dual=2)
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


# -- joining -------------------------------------------------------------------------------------


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
    values, partials = [], []
    for x in items:
        if isinstance(x, Dual) and x.tag is tag:
            values.append(x.value)
            partials.append(x.partials)
        else:
            values.append(x)
            partials.append(np.zeros(shape_of(x) + (k,)))
    return tag, values, partials


def _has_dual(arrays: Any) -> bool:
    return isinstance(arrays, (list, tuple)) and _has_traced(arrays) and any(
        isinstance(x, Dual) for x in (_lift(a) for a in arrays))


@_tangent(np.concatenate, sequence=True)
def _concatenate(arrays: Any, axis: Any = 0, out: Any = None, **kwargs: Any) -> Any:
    if not _has_dual(arrays):
        return np.concatenate(arrays, axis=axis, out=out, **kwargs)
    tag, values, partials = _joined_parts(arrays)
    k = shape_of(partials[0])[-1]
    if axis is None:
        values = [np.reshape(v, (-1,)) for v in values]
        partials = [np.reshape(p, (-1, k)) for p in partials]
        ax = 0
    else:
        ax = _axes(axis, _ndim(values[0]), "concatenate")[0]
    v = np.concatenate(values, axis=ax, **kwargs)
    return Dual._make(v, np.concatenate(partials, axis=ax), tag)


@_tangent(np.stack, sequence=True)
def _stack(arrays: Any, axis: int = 0, out: Any = None, **kwargs: Any) -> Any:
    if not _has_dual(arrays):
        return np.stack(arrays, axis=axis, out=out, **kwargs)
    tag, values, partials = _joined_parts(arrays)
    ax = _axes(axis, _ndim(values[0]) + 1, "stack")[0]
    v = np.stack(values, axis=ax, **kwargs)
    return Dual._make(v, np.stack(partials, axis=ax), tag)


register_fast_function(np.roll, _roll_fast)
