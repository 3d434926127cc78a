"""Rules for reductions: sum, mean, prod, max/min, cumsum, cumprod, var, std, ptp, nan*.

Every reduction over ``axis`` (None, an int or a tuple; ``keepdims``; ``where=`` masks)
has a *weight* ``W`` shaped like its input, ``d out / d x`` along the reduced axes: the
gradient is the output gradient broadcast back times ``W``, the tangent is the reduction
``sum(W * dx)``. Conventions:

* ``max`` / ``min`` (and ``amax``, ``amin``, ``maximum.reduce``, ``nanmax``, ...) split the
  gradient equally between tied maxima, as ``np.maximum`` does between its arguments;
* ``prod`` uses products of all *other* entries (no division), so zeros are fine;
  ``cumprod`` divides only when no entry is zero and otherwise takes an exact O(n^2) path;
* ``std`` at a constant slice has an infinite derivative (as ``sqrt`` at 0).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.max(x))(np.array([1.0, 3.0, 3.0]))
    array([0. , 0.5, 0.5])
    >>> ad.grad(lambda x: np.prod(x))(np.array([0.0, 2.0, 3.0]))
    array([6., 0., 0.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    Traced,
    declare_reduction,
    declare_scan,
    register_function_hook,
    shape_of,
)
from ._signatures import bind
from ._support import (
    dual_or_value,
    gradient_rule,
    is_plain_array,
    ndim_of,
    normalize_axes,
    normalize_axes_in_order,
    tangent_rule,
)

__all__ = ["normalize_axes", "expand_reduced", "exclusive_products"]

_NoValue = getattr(np, "_NoValue", None)
# np.count_nonzero of a whole array without its Python wrapper
_count_nonzero = getattr(np._core.multiarray, "count_nonzero", np.count_nonzero)
# positional parameters: a tape passes a recorded where= mask by position
_REDUCE_NAMES = ("a", "axis", "dtype", "out", "keepdims", "initial", "where")
_EXTREMUM_NAMES = ("a", "axis", "out", "keepdims", "initial", "where")
_UFUNC_REDUCE_NAMES = ("array", "axis", "dtype", "out", "keepdims", "initial", "where")
_VAR_NAMES = ("a", "axis", "dtype", "out", "ddof", "keepdims")


def expand_reduced(grad: Any, shape: tuple[int, ...], axes: tuple[int, ...],
                   keepdims: bool) -> Any:
    """Broadcast the gradient of a reduction over ``axes`` back to the input ``shape``."""
    if type(grad) is np.float64:  # a full reduction's gradient: one fill
        out = np.empty(shape)
        out.fill(grad)
        return out
    kept = _kept(grad, shape, axes, keepdims)
    if type(kept) is np.ndarray:  # plain arrays: a filled copy is cheaper than a view here
        out = np.empty(shape, dtype=kept.dtype)
        out[...] = kept
        return out
    return np.broadcast_to(kept, shape)


def _kept(grad: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    """``grad`` with the reduced axes kept as length-1 axes (broadcastable to ``shape``)."""
    if keepdims:
        return grad
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    if type(grad) is np.ndarray or type(grad) is np.float64:
        return np.asarray(grad).reshape(kept)
    return np.reshape(grad, kept)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _column(w: Any) -> Any:
    """A weight shaped to multiply partials (a trailing axis of length 1)."""
    if isinstance(w, (int, float)) or len(shape_of(w)) == 0:
        return w
    return np.expand_dims(w, -1)


def _params(names: tuple[str, ...], x: Any, args: tuple, kwargs: dict,
            default_axis: Any = None) -> tuple[dict, tuple[int, ...], bool]:
    if args:
        p = dict(zip(names[1:], args))
        if kwargs:
            p.update(kwargs)
    else:  # keywords only: read, never written to
        p = kwargs
    axis = p.get("axis", default_axis)
    ndim = x.ndim if type(x) is np.ndarray else len(shape_of(x))
    if type(axis) is int and -ndim <= axis < ndim:
        axes: tuple[int, ...] = (axis % ndim,)
    else:
        axes = normalize_axes(axis, ndim)
    keepdims = p.get("keepdims", False)  # numpy's positional default is <no value>
    return p, axes, keepdims is not _NoValue and bool(keepdims)


def _where(p: dict) -> Any:
    w = p.get("where", _NoValue)
    return None if w is _NoValue or w is None or w is True else np.asarray(w)


# -- a traced initial= value --------------------------------------------------------------
# ``np.sum(x, initial=i)`` is ``np.sum(x) + i``, ``np.prod(x, initial=i)`` is
# ``np.prod(x) * i``, ``np.max(x, initial=i)`` is ``np.maximum(np.max(x, initial=-inf), i)``:
# with a traced ``i`` the call is rewritten so, and ``i`` gets its derivative.

_INITIAL_NAMES: dict[Any, tuple[str, ...]] = {}
_INITIAL_FORMS: dict[Any, tuple[Any, float]] = {}
for _fs, _combine, _identity in (
    ((np.sum, np.nansum), np.add, 0.0),
    ((np.prod, np.nanprod), np.multiply, 1.0),
    ((np.max, np.amax), np.maximum, -np.inf),
    ((np.min, np.amin), np.minimum, np.inf),
    ((np.nanmax,), np.fmax, -np.inf),
    ((np.nanmin,), np.fmin, np.inf),
):
    for _f in _fs:
        _INITIAL_FORMS[_f] = (_combine, _identity)
        _INITIAL_NAMES[_f] = ("a", "axis", "out", "keepdims", "initial", "where") if \
            _combine in (np.maximum, np.minimum, np.fmax, np.fmin) else \
            ("a", "axis", "dtype", "out", "keepdims", "initial", "where")


def with_traced_initial(func: Any, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)`` rewritten when its ``initial=`` is traced; None otherwise."""
    if not any(isinstance(v, Traced) for v in args[1:]) and \
            not any(isinstance(v, Traced) for v in kwargs.values()):
        return None
    p = bind(_INITIAL_NAMES[func], args, kwargs)
    initial = p.get("initial", _NoValue)
    if not isinstance(initial, Traced):
        return None
    if len(shape_of(initial)) != 0:
        raise ValueError(f"np.{func.__name__}: initial= must be a scalar (numpy's rule), got "
                         f"a traced value of shape {shape_of(initial)}.")
    combine, identity = _INITIAL_FORMS[func]
    p["initial"] = identity
    a = p.pop("a")
    return combine(func(a, **{k: v for k, v in p.items() if v is not _NoValue}), initial)


def _initial_hook(func: Any, args: tuple, kwargs: dict) -> Any:
    return with_traced_initial(func, args, kwargs)


for _f in _INITIAL_FORMS:
    register_function_hook(_f, _initial_hook, traced_options_only=True)


def _reduction_rules(funcs: tuple, names: tuple[str, ...], default_axis: Any,
                     weights: Callable[..., Any], tangent: bool = True) -> None:
    """Register gradient (and tangent) rules from ``weights(x, out, axes, keepdims, p)``."""

    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        p, axes, keepdims = _params(names, x, args, kwargs, default_axis)
        w = weights(x, output, axes, keepdims, p)
        shape = shape_of(x)
        if type(w) is float:  # a constant weight: broadcast once
            g = expand_reduced(grad, shape, axes, keepdims)
            return (g if w == 1.0 else g * w,) + (None,) * len(args)
        g = _kept(grad, shape, axes, keepdims) * w
        if shape_of(g) != shape:
            g = np.broadcast_to(g, shape)
        return (g,) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        if funcs[0] in _INITIAL_FORMS:
            rewritten = with_traced_initial(funcs[0], (x,) + args, kwargs)
            if rewritten is not None:
                return rewritten
        p, axes, keepdims = _params(names, x, args, kwargs, default_axis)
        value = funcs[0](x.value, *args, **kwargs)
        w = weights(x.value, value, axes, keepdims, p)
        dp = np.sum(x.partials * _column(w), axis=axes, keepdims=keepdims)
        return dual_or_value(value, dp, x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{getattr(funcs[0], '__name__', 'reduce')}"
    gradient_rule(*funcs)(grad_impl)
    if tangent:
        tangent_rule(*funcs)(tangent_impl)


# -- sums and means ---------------------------------------------------------------------


def _sum_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    w = _where(p)
    return 1.0 if w is None else np.broadcast_to(w, shape_of(x)).astype(np.float64)


def _mean_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    w = _where(p)
    shape = shape_of(x)
    if w is None:
        return 1.0 / max(_count(shape, axes), 1)
    mask = np.broadcast_to(w, shape).astype(np.float64)
    return mask / np.maximum(np.sum(mask, axis=axes, keepdims=True), 1.0)


def _nan_sum_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    return (~np.isnan(x)).astype(np.float64) * _sum_weights(x, out, axes, keepdims, p)


def _nan_mean_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    mask = (~np.isnan(x)).astype(np.float64) * _sum_weights(x, out, axes, keepdims, p)
    return mask / np.maximum(np.sum(mask, axis=axes, keepdims=True), 1.0)


_reduction_rules((np.sum,), _REDUCE_NAMES, None, _sum_weights, tangent=False)
_reduction_rules((np.mean,), _REDUCE_NAMES, None, _mean_weights, tangent=False)
_reduction_rules((np.add.reduce,), _UFUNC_REDUCE_NAMES, 0, _sum_weights)
_reduction_rules((np.nansum,), _REDUCE_NAMES, None, _nan_sum_weights)
_reduction_rules((np.nanmean,), _REDUCE_NAMES, None, _nan_mean_weights)


# -- max and min: ties split equally -------------------------------------------------------


def _extremum_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    shape = shape_of(x)
    hit = x == _kept(out, shape, axes, keepdims)
    w = _where(p)
    if w is not None:
        hit = hit & np.broadcast_to(w, shape)
    if w is None and type(hit) is np.ndarray and p.get("initial", _NoValue) is _NoValue \
            and _count_nonzero(hit) == (out.size if type(out) is np.ndarray else np.size(out)) \
            and not np.isnan(out).any():  # every slice hit (not NaN, no initial=): no ties
        return hit  # one maximum per slice (no ties): the mask itself
    return hit / np.maximum(np.add.reduce(hit, axis=axes, keepdims=True), 1.0)


for _fs, _names, _axis in (
    ((np.max, np.amax), _EXTREMUM_NAMES, None),
    ((np.min, np.amin), _EXTREMUM_NAMES, None),
    ((np.nanmax,), _EXTREMUM_NAMES, None),
    ((np.nanmin,), _EXTREMUM_NAMES, None),
    ((np.maximum.reduce,), _UFUNC_REDUCE_NAMES, 0),
    ((np.minimum.reduce,), _UFUNC_REDUCE_NAMES, 0),
    ((np.fmax.reduce,), _UFUNC_REDUCE_NAMES, 0),
    ((np.fmin.reduce,), _UFUNC_REDUCE_NAMES, 0),
):
    _reduction_rules(_fs, _names, _axis, _extremum_weights)


def _ptp_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    shape = shape_of(x)
    ax = axes if axes else None
    hi = np.max(x, axis=ax, keepdims=True)
    lo = np.min(x, axis=ax, keepdims=True)
    top = np.asarray(_extremum_weights(x, hi, axes, True, {}), dtype=np.float64)
    bottom = np.asarray(_extremum_weights(x, lo, axes, True, {}), dtype=np.float64)
    return np.broadcast_to(top - bottom, shape)


_reduction_rules((np.ptp,), ("a", "axis", "out", "keepdims"), None, _ptp_weights)


# -- products --------------------------------------------------------------------------------


def _to_last(x: Any, axes: tuple[int, ...]) -> tuple[Any, Callable[[Any], Any]]:
    """``x`` with ``axes`` moved to the end and merged into one; and the inverse map."""
    shape = tuple(shape_of(x))
    nd = len(shape)
    rest = tuple(a for a in range(nd) if a not in axes)
    perm = rest + tuple(axes)
    moved = np.transpose(x, perm)
    merged_shape = tuple(shape[a] for a in rest) + (_count(shape, axes),)
    moved_shape = tuple(shape[a] for a in perm)
    inverse = tuple(int(i) for i in np.argsort(perm))

    def back(y: Any) -> Any:
        return np.transpose(np.reshape(y, moved_shape), inverse)

    return np.reshape(moved, merged_shape), back


def _exclusive_last(v: Any) -> Any:
    """Products of all other entries along the last axis (no division)."""
    n = shape_of(v)[-1]
    if n == 0:
        return v
    ones = np.ones(shape_of(v)[:-1] + (1,))
    left = np.concatenate([ones, np.cumprod(v[..., :-1], axis=-1)], axis=-1)
    flipped = np.flip(v, -1)
    right = np.flip(np.concatenate([ones, np.cumprod(flipped[..., :-1], axis=-1)], axis=-1), -1)
    return left * right


def exclusive_products(x: Any, axes: tuple[int, ...]) -> Any:
    """For each entry, the product of the other entries of its slice along ``axes``."""
    if not axes:
        return np.ones(shape_of(x))
    flat, back = _to_last(x, axes)
    return back(_exclusive_last(flat))


def _prod_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    w = _where(p)
    initial = p.get("initial", _NoValue)
    scaled = not (initial is _NoValue or initial is None)  # the result is initial * prod(x)
    if w is not None:
        x = np.where(np.broadcast_to(w, shape_of(x)), x, 1.0)
        weights = exclusive_products(x, axes) * np.broadcast_to(w, shape_of(x))
        return weights * initial if scaled else weights
    if scaled:
        return exclusive_products(x, axes) * initial
    return exclusive_products(x, axes)


_reduction_rules((np.prod,), _REDUCE_NAMES, None, _prod_weights)
_reduction_rules((np.multiply.reduce,), _UFUNC_REDUCE_NAMES, 0, _prod_weights)
_reduction_rules((np.nanprod,), _REDUCE_NAMES, None,
                 lambda x, out, axes, keepdims, p: exclusive_products(
                     np.where(np.isnan(x), 1.0, x), axes) * (~np.isnan(x))
                 * (1.0 if p.get("initial", _NoValue) in (_NoValue, None) else p["initial"]))


# -- variance and standard deviation ------------------------------------------------------------


def _ddof(p: dict) -> float:
    correction = p.get("correction", _NoValue)
    if correction is not _NoValue and correction is not None:
        return float(correction)
    return float(p.get("ddof", 0) or 0)


def _var_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    if _where(p) is not None or p.get("mean", _NoValue) is not _NoValue:
        raise NotImplementedError("dualad: np.var/np.std with where= or mean= are not "
                                  "differentiable yet; compute them with np.mean and np.sum.")
    shape = shape_of(x)
    ax = axes if axes else None
    centered = x - np.mean(x, axis=ax, keepdims=True)
    return centered * (2.0 / (_count(shape, axes) - _ddof(p)))


def _std_weights(x: Any, out: Any, axes: tuple, keepdims: bool, p: dict) -> Any:
    return _var_weights(x, out, axes, keepdims, p) / (
        2.0 * expand_reduced(out, shape_of(x), axes, keepdims))


_reduction_rules((np.var,), _VAR_NAMES, None, _var_weights)
_reduction_rules((np.std,), _VAR_NAMES, None, _std_weights)


# -- cumulative sums and products -------------------------------------------------------------


def _cum_params(x: Any, args: tuple, kwargs: dict, names: tuple[str, ...],
                default_axis: Any) -> tuple[Any, int | None, bool]:
    p = bind(names, (x,) + args, kwargs)
    axis = p.get("axis", default_axis)
    nd = len(shape_of(x))
    if axis is None:
        return p, None, bool(p.get("include_initial", False))
    return p, normalize_axes(axis, nd)[0], bool(p.get("include_initial", False))


def _reverse_cumsum(g: Any, axis: int) -> Any:
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


def _drop_initial(g: Any, axis: int, initial: bool) -> Any:
    if not initial:
        return g
    index = [slice(None)] * len(shape_of(g))
    index[axis] = slice(1, None)
    return g[tuple(index)]


def _add_initial(p: Any, axis: int, initial: bool, fill: float = 0.0) -> Any:
    if not initial:
        return p
    shape = list(shape_of(p))
    shape[axis] = 1
    return np.concatenate([np.full(shape, fill), p], axis=axis)


_CUMSUM_NAMES = ("a", "axis", "dtype", "out")
_CUMULATIVE_NAMES = ("x", "axis", "dtype", "out", "include_initial")
_ACCUMULATE_NAMES = ("array", "axis", "dtype", "out")


def _cumsum_rules(funcs: tuple, names: tuple[str, ...], default_axis: Any) -> None:
    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        _, axis, initial = _cum_params(x, args, kwargs, names, default_axis)
        shape = shape_of(x)
        if axis is None:
            g = _drop_initial(grad, 0, initial)
            return (np.reshape(_reverse_cumsum(g, 0), shape),) + (None,) * len(args)
        g = _drop_initial(grad, axis, initial)
        return (_reverse_cumsum(g, axis),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        _, axis, initial = _cum_params(x, args, kwargs, names, default_axis)
        value = funcs[0](x.value, *args, **kwargs)
        p = x.partials
        if axis is None:
            p, axis = np.reshape(p, (-1, shape_of(p)[-1])), 0
        return dual_or_value(value, _add_initial(np.cumsum(p, axis=axis), axis, initial), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{getattr(funcs[0], '__name__', 'cum')}"
    gradient_rule(*funcs)(grad_impl)
    tangent_rule(*funcs)(tangent_impl)


_cumsum_rules((np.cumsum,), _CUMSUM_NAMES, None)
_cumsum_rules((np.add.accumulate,), _ACCUMULATE_NAMES, 0)
if hasattr(np, "cumulative_sum"):
    _cumsum_rules((np.cumulative_sum,), _CUMULATIVE_NAMES, None)


def _has_zero(x: Any) -> bool:
    return bool(np.any(x == 0))


def _cumprod_matrix(v: Any) -> Any:
    """``M[..., i, j] = d y_j / d x_i`` of ``y = cumprod(v, -1)`` (exact with zeros)."""
    n = shape_of(v)[-1]
    strict = np.triu(np.ones((n, n), dtype=bool), 1)  # l > i
    a = np.where(strict, np.expand_dims(v, -2), 1.0)
    t = np.cumprod(a, axis=-1)  # t[i, j] = prod_{i < l <= j} v_l
    ones = np.ones(shape_of(v)[:-1] + (1,))
    left = np.concatenate([ones, np.cumprod(v[..., :-1], axis=-1)], axis=-1)
    upper = np.triu(np.ones((n, n)))  # j >= i
    return np.expand_dims(left, -1) * t * upper


def _cumprod_rules(funcs: tuple, names: tuple[str, ...], default_axis: Any) -> None:
    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        _, axis, initial = _cum_params(x, args, kwargs, names, default_axis)
        shape = shape_of(x)
        if axis is None:
            v = np.reshape(x, (-1,))
            g = _drop_initial(grad, 0, initial)
            y = _drop_initial(output, 0, initial)
            ax = 0
        else:
            v, g, ax = x, _drop_initial(grad, axis, initial), axis
            y = _drop_initial(output, axis, initial)
        if not _has_zero(v):
            gx = _reverse_cumsum(g * y, ax) / v
        else:
            vl, gl = np.moveaxis(v, ax, -1), np.moveaxis(g, ax, -1)
            m = _cumprod_matrix(vl)
            gx = np.moveaxis(np.sum(m * np.expand_dims(gl, -2), axis=-1), -1, ax)
        return (np.reshape(gx, shape),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        _, axis, initial = _cum_params(x, args, kwargs, names, default_axis)
        value = funcs[0](x.value, *args, **kwargs)
        v, p = x.value, x.partials
        if axis is None:
            v, p, axis = np.reshape(v, (-1,)), np.reshape(p, (-1, shape_of(p)[-1])), 0
        y = np.cumprod(v, axis=axis)
        if not _has_zero(v):
            dp = _column(y) * np.cumsum(p / _column(v), axis=axis)
        else:
            m = _cumprod_matrix(np.moveaxis(v, axis, -1))  # (..., i, j)
            pl = np.moveaxis(p, axis, -2)  # (..., i, k)
            dp = np.moveaxis(np.matmul(np.swapaxes(m, -1, -2), pl), -2, axis)
        return dual_or_value(value, _add_initial(dp, axis, initial), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{getattr(funcs[0], '__name__', 'cum')}"
    gradient_rule(*funcs)(grad_impl)
    tangent_rule(*funcs)(tangent_impl)


_cumprod_rules((np.cumprod,), _CUMSUM_NAMES, None)
_cumprod_rules((np.multiply.accumulate,), _ACCUMULATE_NAMES, 0)
if hasattr(np, "cumulative_prod"):
    _cumprod_rules((np.cumulative_prod,), _CUMULATIVE_NAMES, None)


# -- tangents of sum and mean (the other reductions share _reduction_rules) -------------


@tangent_rule(np.sum)
def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NoValue, where: Any = _NoValue) -> Any:
    if keepdims is _NoValue:  # passed by position by a tape's replay
        keepdims = False
    v = a.value
    p = a._p
    if (type(v) is np.ndarray and type(p) is np.ndarray and dtype is None and out is None
            and initial is _NoValue and where is _NoValue
            and (axis is None or type(axis) is int) and v.dtype.kind == "f"):
        # the common case: one plain float array, no options (np.sum's own wrapper skipped)
        nd = v.ndim
        if axis is None:
            axes: Any = 0 if nd == 1 else tuple(range(nd))
        elif -nd <= axis < nd:
            axes = axis % nd
        else:
            axes = normalize_axes_in_order(axis, nd, "sum")
        return Dual._make(np.add.reduce(v, axis=axis, keepdims=keepdims),
                          np.add.reduce(p, axis=axes, keepdims=keepdims), a.tag)
    if isinstance(initial, Traced):
        return with_traced_initial(np.sum, (a, axis, dtype, out, keepdims, initial, where), {})
    kw = {} if initial is _NoValue else {"initial": initial}
    if where is not _NoValue:  # a masked sum is the sum of the masked array
        return np.sum(np.where(where, a, 0.0), axis=axis, dtype=dtype, keepdims=keepdims, **kw)
    v = np.sum(a.value, axis=axis, dtype=dtype, keepdims=keepdims, **kw)
    p = a.partials
    axes = normalize_axes_in_order(axis, ndim_of(a.value), "sum")
    if is_plain_array(p):
        dp = np.add.reduce(p, axis=axes, keepdims=keepdims)
    else:
        dp = np.sum(p, axis=axes, keepdims=keepdims)
    return Dual._make(v, dp, a.tag)


@tangent_rule(np.mean)
def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          *, where: Any = _NoValue) -> Any:
    if keepdims is _NoValue:
        keepdims = False
    if where is not _NoValue:  # the masked sum over the number of entries kept
        mask = np.broadcast_to(np.asarray(where, dtype=np.float64), shape_of(a.value))
        count = np.sum(mask, axis=axis, keepdims=keepdims)
        return np.sum(np.where(where, a, 0.0), axis=axis, keepdims=keepdims) / count
    v = np.mean(a.value, axis=axis, dtype=dtype, keepdims=keepdims)
    shape = shape_of(a.value)
    axes = normalize_axes_in_order(axis, len(shape), "mean")
    count = 1
    for ax in axes:
        count *= shape[ax]
    p = a.partials
    if is_plain_array(p):
        dp = np.add.reduce(p, axis=axes, keepdims=keepdims) / count
    else:
        dp = np.sum(p, axis=axes, keepdims=keepdims) / count
    return Dual._make(v, dp, a.tag)


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# Each output entry depends on its group of reduced entries; in prod, var and std the
# entries of a group also meet nonlinearly (Hessian patterns).

declare_reduction(np.sum, np.mean, np.nansum, np.nanmean, np.max, np.min, np.amax, np.amin,
                  np.nanmax, np.nanmin)
declare_reduction(np.prod, np.nanprod, np.var, np.std, np.nanvar, np.nanstd, second_order=True)
# Scans: entry i along the axis depends on entries 0..i.

declare_scan(np.cumsum, np.nancumsum)
declare_scan(np.cumprod, np.nancumprod, second_order=True)

declare_reduction(np.ptp)
declare_scan(np.cumulative_sum)
declare_scan(np.cumulative_prod, second_order=True)
