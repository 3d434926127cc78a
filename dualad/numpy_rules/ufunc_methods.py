"""The methods of ufuncs on traced values: ``at``, ``reduce``, ``accumulate``, ``reduceat``,
``outer``, written as compositions of calls that have rules (both modes at once).

``ufunc.at(a, indices, b)`` is an unbuffered in-place update: it becomes writes into
``a`` (repeated indices apply in order, as numpy does), so ``a`` must be writable: a
Dual in forward mode, an array allocated with ``np.zeros_like`` / ``np.empty_like`` /
``np.copy`` of a traced value in reverse mode. Updating a plain numpy array with traced
values is a ``TypeError`` (the derivative would be lost). ``reduce`` / ``accumulate`` keep
their dedicated rules where they have one (``np.add.reduce`` is ``np.sum``); for other
ufuncs, and for ``reduceat`` and ``outer``, the call is rewritten as the same ufunc
applied along the axis (a fold) or to broadcast operands.

Example:
    >>> import numpy as np, dualad as ad
    >>> def deposit(x):
    ...     grid = np.zeros_like(x, shape=(3,))
    ...     np.add.at(grid, np.array([0, 2, 2]), x ** 2)
    ...     return grid
    >>> ad.jacobian(deposit, mode="reverse")(np.array([1.0, 2.0, 3.0]))
    array([[2., 0., 0.],
           [0., 0., 0.],
           [0., 4., 6.]])
    >>> ad.jacobian(lambda x: np.logaddexp.accumulate(x), mode="forward")(np.zeros(2)).round(3)
    array([[1. , 0. ],
           [0.5, 0.5]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    MissingRuleError,
    Traced,
    declare_bincount,
    declare_reduction,
    declare_scan,
    innermost_tag,
    register_ufunc_method,
    shape_of,
    value,
)
from ._support import gradient_rule, split_duals, tangent_rule

__all__ = ["ufunc_at", "ufunc_reduce", "ufunc_accumulate", "ufunc_reduceat", "ufunc_outer"]

_NoValue = getattr(np, "_NoValue", None)


def _name(ufunc: np.ufunc, method: str) -> str:
    return f"np.{ufunc.__name__}.{method}"


def _refuse(ufunc: np.ufunc, method: str, what: str) -> MissingRuleError:
    return MissingRuleError(
        f"dualad: {_name(ufunc, method)}(..., {what}) on traced values is not supported; "
        f"rewrite the call without it."
    )


def _check_dtype(ufunc: np.ufunc, method: str, dtype: Any) -> None:
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise TypeError(
            f"dualad: {_name(ufunc, method)}(..., dtype={np.dtype(dtype)}) of traced values "
            f"would drop the derivative; leave dtype out (or use a float dtype)."
        )


# -- ufunc.at ------------------------------------------------------------------------------


def _occurrence_rounds(flat: np.ndarray) -> list[np.ndarray]:
    """Positions of ``flat`` split into rounds with unique targets: round ``r`` holds the
    ``r``-th occurrence of each target, so applying the rounds in order keeps numpy's
    order of repeated indices."""
    n = flat.size
    order = np.argsort(flat, kind="stable")
    sorted_targets = flat[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = sorted_targets[1:] != sorted_targets[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    occurrence = np.empty(n, dtype=np.intp)
    occurrence[order] = np.arange(n) - group_start
    return [np.flatnonzero(occurrence == r) for r in range(int(occurrence.max()) + 1)] \
        if n else []


def ufunc_at(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> None:
    """``ufunc.at(a, indices[, b])`` with traced values: writes into ``a``."""
    if kwargs:
        raise _refuse(ufunc, "at", ", ".join(f"{k}=" for k in kwargs))
    if len(inputs) not in (2, 3):
        raise TypeError(f"{_name(ufunc, 'at')} takes 2 or 3 arguments, got {len(inputs)}")
    a, indices = inputs[0], inputs[1]
    if isinstance(indices, Traced):
        raise TypeError(
            f"dualad: {_name(ufunc, 'at')}: the indices are traced values; pass integer "
            f"indices (ad.value(i).astype(int) if they are computed)."
        )
    if not isinstance(a, Traced):
        raise TypeError(
            f"dualad: {_name(ufunc, 'at')}(a, indices, b) updates the plain numpy array a "
            f"(shape {np.shape(a)}) in place with traced values, which would drop their "
            f"derivative. Allocate a from a traced value instead: "
            f"a = np.zeros_like(x, shape={np.shape(a)}) (or np.copy(x), np.empty_like(x))."
        )
    if (len(inputs) == 3) != (ufunc.nin == 2):
        raise TypeError(
            f"{_name(ufunc, 'at')}: the ufunc takes {ufunc.nin} input(s); pass "
            f"{'a, indices, b' if ufunc.nin == 2 else 'a, indices'}"
        )
    shape = shape_of(a)
    size = int(np.prod(shape, dtype=np.int64))
    targets = np.arange(size, dtype=np.intp).reshape(shape)[indices]
    flat = np.asarray(targets).reshape(-1)
    b = None
    if len(inputs) == 3:
        b = inputs[2]
        target_shape = np.shape(targets)
        b = np.reshape(np.broadcast_to(b, target_shape) if not isinstance(b, Traced)
                       else b + np.zeros(target_shape), (-1,))
    if ufunc in (np.add, np.subtract) and b is not None and flat.size:
        # a scatter-add: one write, however often an index repeats
        delta = np.reshape(np.bincount(flat, weights=b, minlength=size), shape)
        a[...] = a + delta if ufunc is np.add else a - delta
        return None
    for positions in _occurrence_rounds(flat):
        key = np.unravel_index(flat[positions], shape)
        current = a[key]
        a[key] = ufunc(current) if b is None else ufunc(current, b[positions])
    return None


# -- np.bincount with weights: the scatter-add ------------------------------------------------


@gradient_rule(np.bincount)
def _bincount_gradient(grad: Any, output: Any, x: Any, *rest: Any, **kwargs: Any) -> tuple:
    # one gradient per positional argument: x, then weights and minlength when given
    if not rest:
        return (None,)
    g = grad[np.asarray(x, dtype=np.intp)] if rest[0] is not None else None
    return (None, g) + (None,) * (len(rest) - 1)


@tangent_rule(np.bincount, duals="any")
def _bincount_tangent(x: Any, weights: Any = None, minlength: Any = 0) -> Any:
    if isinstance(x, Traced):
        raise TypeError("dualad: np.bincount of traced values: the counted values must be "
                        "integers (ad.value(x).astype(int) if they are computed).")
    tag = innermost_tag((weights,))
    if tag is None:
        return np.bincount(x, weights, minlength)
    (wv, wp), = split_parts((weights,), tag)
    out = np.bincount(x, wv, minlength)
    if wp is None:
        return out
    partials = np.zeros(out.shape + (shape_of(wp)[-1],))
    np.add.at(partials, np.asarray(x, dtype=np.intp), wp)
    return Dual._make(out, partials, tag)


def split_parts(items: tuple, tag: Any) -> list[tuple[Any, Any]]:
    values, partials = split_duals(items, tag)
    return list(zip(values, partials))


# -- reduce, accumulate, reduceat ------------------------------------------------------------


def _along(x: Any, axis: Any, ufunc: np.ufunc, method: str) -> tuple[Any, tuple[int, ...]]:
    """``x`` with the reduced axes moved to the front and merged into one; the axes."""
    ndim = len(shape_of(x))
    if axis is None:
        axes = tuple(range(ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(sorted(int(a) % ndim for a in axis)) if ndim else ()
    else:
        if ndim == 0:
            raise np.exceptions.AxisError(int(axis), 0)
        axes = (int(axis) % ndim,)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{_name(ufunc, method)}: duplicate value in 'axis'")
    moved = np.moveaxis(x, axes, tuple(range(len(axes)))) if axes else x
    rest = shape_of(moved)[len(axes):]
    return np.reshape(moved, (-1,) + tuple(rest)), axes


def _fold(ufunc: np.ufunc, items: Any, n: int, initial: Any) -> Any:
    acc = initial
    for i in range(n):
        acc = items[i] if acc is _NoValue else ufunc(acc, items[i])
    return acc


def ufunc_reduce(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc.reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial, where)``
    as a fold of ``ufunc`` along the axis."""
    names = ("array", "axis", "dtype", "out", "keepdims", "initial", "where")
    p = dict(zip(names, inputs))
    p.update(kwargs)
    _check_dtype(ufunc, "reduce", p.get("dtype"))
    if p.get("where", True) is not True:
        raise _refuse(ufunc, "reduce", "where=")
    x = p["array"]
    axis = p.get("axis", 0)
    initial = p.get("initial", _NoValue)
    merged, axes = _along(x, axis, ufunc, "reduce")
    n = shape_of(merged)[0]
    if n == 0 and initial is _NoValue:
        return ufunc.reduce(value(x), axis=axis)  # numpy's own error (or identity)
    result = _fold(ufunc, merged, n, initial)
    result = result + np.zeros(shape_of(merged)[1:]) if shape_of(result) != \
        shape_of(merged)[1:] else result
    if p.get("keepdims", False):
        result = np.expand_dims(result, axes)
    return result


def ufunc_accumulate(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc.accumulate(array, axis=0, dtype=None, out=None)`` as running folds."""
    names = ("array", "axis", "dtype", "out")
    p = dict(zip(names, inputs))
    p.update(kwargs)
    _check_dtype(ufunc, "accumulate", p.get("dtype"))
    x = p["array"]
    axis = p.get("axis", 0)
    if axis is None or isinstance(axis, (tuple, list)):
        raise _refuse(ufunc, "accumulate", f"axis={axis!r}")
    ndim = len(shape_of(x))
    if ndim == 0:
        raise TypeError(f"{_name(ufunc, 'accumulate')}: cannot accumulate on a scalar")
    axis = int(axis) % ndim
    moved = np.moveaxis(x, axis, 0)
    n = shape_of(moved)[0]
    if n == 0:
        return x * 1.0
    acc = moved[0]
    out = [acc]
    for i in range(1, n):
        acc = ufunc(acc, moved[i])
        out.append(acc)
    return np.stack(out, axis=axis)


def ufunc_reduceat(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc.reduceat(array, indices, axis=0, dtype=None, out=None)``: numpy's rule per
    index (``reduce(x[i:j])`` when ``i < j``, else ``x[i]``), stacked along the axis."""
    names = ("array", "indices", "axis", "dtype", "out")
    p = dict(zip(names, inputs))
    p.update(kwargs)
    _check_dtype(ufunc, "reduceat", p.get("dtype"))
    x, indices = p["array"], p["indices"]
    if isinstance(indices, Traced):
        raise TypeError(f"dualad: {_name(ufunc, 'reduceat')}: the indices are traced values; "
                        f"pass integer indices.")
    ndim = len(shape_of(x))
    axis = int(p.get("axis", 0)) % max(ndim, 1)
    indices = np.asarray(indices).reshape(-1)
    moved = np.moveaxis(x, axis, 0)
    n = shape_of(moved)[0]
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        return ufunc.reduceat(value(x), indices, axis=axis)  # numpy's own error
    parts = []
    for j, start in enumerate(indices):
        stop = indices[j + 1] if j + 1 < indices.size else n
        if start < stop:
            parts.append(_fold(ufunc, moved[int(start):int(stop)], int(stop - start), _NoValue))
        else:
            parts.append(moved[int(start)])
    if not parts:
        return ufunc.reduceat(value(x), indices, axis=axis)
    return np.stack(parts, axis=axis)


def ufunc_outer(ufunc: np.ufunc, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc.outer(A, B, **kwargs)``: ``ufunc`` of ``A`` reshaped to
    ``A.shape + (1,) * B.ndim`` and ``B``."""
    if len(inputs) != 2:
        raise TypeError(f"{_name(ufunc, 'outer')} takes 2 arguments, got {len(inputs)}")
    a, b = inputs
    b_ndim = len(shape_of(b))
    a_wide = np.reshape(a, tuple(shape_of(a)) + (1,) * b_ndim)
    return ufunc(a_wide, b, **kwargs)


register_ufunc_method("at", ufunc_at, first=True)
register_ufunc_method("reduce", ufunc_reduce)
register_ufunc_method("accumulate", ufunc_accumulate)
register_ufunc_method("reduceat", ufunc_reduceat)
register_ufunc_method("outer", ufunc_outer)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_reduction(np.add.reduce, np.maximum.reduce, np.minimum.reduce, np.fmax.reduce,
                  np.fmin.reduce, axis_default=0)
declare_reduction(np.multiply.reduce, second_order=True, axis_default=0)
declare_scan(np.add.accumulate, axis_default=0)
declare_scan(np.multiply.accumulate, second_order=True, axis_default=0)
declare_bincount(np.bincount)
