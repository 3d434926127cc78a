"""Rules for order statistics: median, percentile, quantile and their nan- versions.

Each is written with calls that have rules of their own (a gather of the sorted entries
with ``np.take_along_axis`` and a linear interpolation), which gives both modes and every
order; the gradient of a call on plain arrays scatters the cotangent directly.

Conventions (as JAX, whose quantiles are the same sort-and-interpolate):

* The derivative flows to the entries the interpolation reads: ``median`` of an even
  count gives 1/2 to each of the two middle entries; ``method="linear"`` at
  ``q * (n - 1) = i + t`` gives ``1 - t`` and ``t`` to the sorted entries ``i`` and
  ``i + 1``; ``"lower"`` / ``"higher"`` / ``"nearest"`` give 1 to the entry they pick and
  ``"midpoint"`` 1/2 to each neighbour.
* Ties: equal entries are ordered by position (a stable sort), so the derivative goes to
  the first of the tied entries that the rank selects, as JAX's.
* ``q`` is differentiable too for ``method="linear"``: ``d quantile / d q`` is the slope
  ``(n - 1) (sorted[i + 1] - sorted[i])``.
* ``nanmedian`` / ``nanpercentile`` / ``nanquantile`` skip NaNs (they get derivative 0); a
  slice with a NaN gives NaN in the plain versions, as numpy.
* Not supported (a clear error): ``out=``, ``weights=``, and the other ``method`` values.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(np.median)(np.array([3.0, 1.0, 4.0, 2.0]))
    array([0.5, 0. , 0. , 0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    MissingRuleError,
    Traced,
    declare_composite,
    declare_reduction,
    innermost_tag,
    note_order_statistic,
    value,
    vjp,
)
from ._signatures import bind
from ._support import gradient_rule, normalize_axes, tangent_rule

__all__: list[str] = []

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _check_call(fname: str, out: Any, method: str, weights: Any) -> None:
    if out is not None:
        raise MissingRuleError(f"dualad: np.{fname}(..., out=) is not differentiable; use "
                               f"the returned value.")
    if weights is not None:
        raise MissingRuleError(f"dualad: np.{fname}(..., weights=) is not differentiable "
                               f"yet; repeat the entries or write the weighted quantile "
                               f"with np.sort and np.cumsum.")
    if method not in _METHODS:
        raise MissingRuleError(f"dualad: np.{fname}(..., method={method!r}) is not "
                               f"differentiable; use one of {', '.join(_METHODS)}.")


def _plan(v: np.ndarray, q_value: np.ndarray, axis: Any, method: str,
          skip_nan: bool) -> dict[str, Any]:
    """Which sorted entries each quantile reads, and with which weights (plain arrays)."""
    shape = v.shape
    nd = len(shape)
    axes = normalize_axes(axis, nd, "quantile")
    kept = [i for i in range(nd) if i not in axes]
    batch = tuple(shape[i] for i in kept)
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    vflat = np.reshape(np.moveaxis(v, axes, range(len(kept), nd)), batch + (n,))
    nan = np.isnan(vflat)
    order = np.argsort(vflat, axis=-1, kind="stable")  # NaNs last
    count = np.sum(~nan, axis=-1) if skip_nan else np.full(batch, n)
    q_shape = q_value.shape
    top = np.maximum(count - 1, 0)
    pos = q_value.reshape(q_shape + (1,) * len(batch)) * top
    lo = np.clip(np.floor(pos), 0, top).astype(np.int64)
    frac: Any = None
    if method == "linear":
        frac = pos - lo
    elif method == "higher":
        lo = np.clip(np.ceil(pos), 0, top).astype(np.int64)
    elif method == "nearest":
        lo = np.clip(np.around(pos), 0, top).astype(np.int64)
    elif method == "midpoint":
        frac = np.where(np.floor(pos) == pos, 0.0, 0.5)
    empty = np.broadcast_to(count == 0 if skip_nan else np.any(nan, axis=-1), batch)
    return {"shape": shape, "axes": axes, "kept": kept, "batch": batch, "n": n,
            "vflat": vflat, "order": order, "top": top, "q_shape": q_shape, "lo": lo,
            "hi": np.minimum(lo + 1, top), "frac": frac, "empty": empty}


def _gather_rows(plan: dict[str, Any], idx: np.ndarray) -> np.ndarray:
    """Positions (in the sorted order) read by ``idx`` (q_shape + batch), as the last axis
    of a ``batch + (nq,)`` array."""
    nq = int(np.prod(plan["q_shape"], dtype=np.int64))
    idx = np.moveaxis(np.reshape(idx, (nq,) + plan["batch"]), 0, -1)
    return np.take_along_axis(plan["order"], idx, axis=-1)


def _order_statistic(a: Any, q: Any, axis: Any, method: str, keepdims: bool,
                     skip_nan: bool) -> Any:
    """The ``q``-quantiles of ``a`` over ``axis`` (shape ``q.shape + kept axes``)."""
    plan = _plan(np.asarray(value(a)), np.asarray(value(q), dtype=np.float64), axis, method,
                 skip_nan)
    shape, axes, kept, batch = plan["shape"], plan["axes"], plan["kept"], plan["batch"]
    q_shape, nd = plan["q_shape"], len(plan["shape"])
    flat = np.reshape(np.moveaxis(a, axes, range(len(kept), nd)), batch + (plan["n"],))

    def gather(idx: np.ndarray) -> Any:
        picked = np.take_along_axis(flat, _gather_rows(plan, idx), axis=-1)
        return np.reshape(np.moveaxis(picked, -1, 0), q_shape + batch)

    frac = plan["frac"]
    if method == "linear" and not isinstance(q, np.ndarray | float | int):
        q_b = np.reshape(q, q_shape + (1,) * len(batch))
        frac = q_b * plan["top"] - plan["lo"]  # differentiable in q
    result = gather(plan["lo"])
    if frac is not None:
        result = result + (gather(plan["hi"]) - result) * frac
    empty = plan["empty"]
    if np.any(empty):
        result = np.where(np.broadcast_to(empty, q_shape + batch), np.nan, result)
    if keepdims:
        result = np.reshape(result, q_shape + tuple(1 if i in axes else shape[i]
                                                    for i in range(nd)))
    return result


def _order_statistic_gradient(v: np.ndarray, q_value: np.ndarray, axis: Any, method: str,
                              skip_nan: bool, grad: np.ndarray) -> tuple[Any, Any]:
    """``(d/da, d/dq)`` of ``sum(grad * quantile)`` on plain arrays: the cotangent scattered
    to the entries read, without a reverse pass through the composite."""
    plan = _plan(v, q_value, axis, method, skip_nan)
    shape, axes, kept, batch, n = (plan[k] for k in ("shape", "axes", "kept", "batch", "n"))
    q_shape = plan["q_shape"]
    g = np.reshape(np.asarray(grad), q_shape + batch)
    g = np.where(np.broadcast_to(plan["empty"], g.shape), 0.0, g)
    nq = int(np.prod(q_shape, dtype=np.int64))
    size = int(np.prod(batch, dtype=np.int64))
    base = np.arange(size).reshape(batch + (1,)) * n
    g_last = np.moveaxis(np.reshape(g, (nq,) + batch), 0, -1)  # batch + (nq,)
    frac = plan["frac"]
    out = np.zeros(size * n, dtype=np.result_type(g, np.float64))

    def scatter(idx: np.ndarray, weight: Any) -> np.ndarray:
        rows = _gather_rows(plan, idx)
        w = 1.0 if weight is None else np.moveaxis(
            np.reshape(np.broadcast_to(weight, q_shape + batch), (nq,) + batch), 0, -1)
        where, amount = (base + rows).ravel(), (g_last * w).ravel()
        if np.iscomplexobj(amount):
            np.add.at(out, where, amount)
        else:
            out[:] += np.bincount(where, weights=amount, minlength=out.size)
        return rows

    rows_lo = scatter(plan["lo"], None if frac is None else 1.0 - frac)
    gq = np.zeros(q_shape)
    if frac is not None:
        rows_hi = scatter(plan["hi"], frac)
        if method == "linear":
            vf = plan["vflat"]
            slope = (np.take_along_axis(vf, rows_hi, -1) - np.take_along_axis(vf, rows_lo, -1)) \
                * np.reshape(plan["top"], batch + (1,))
            gq = np.reshape(np.sum(np.reshape(g_last * slope, (size, nq)), axis=0), q_shape)
    moved = np.reshape(out, batch + tuple(shape[i] for i in axes))
    ga = np.moveaxis(moved, range(len(kept), len(shape)), axes)
    return ga.astype(np.result_type(v, np.float32)) if v.dtype.kind == "f" else ga, gq


def _quantile_like(fname: str, scale: float, skip_nan: bool) -> Any:
    def impl(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: Any = None) -> Any:
        method = interpolation if interpolation is not None else method
        _check_call(fname, out, method, weights)
        if isinstance(q, (list, tuple)):
            q = np.asarray(q, dtype=np.float64)
        return _order_statistic(a, q / scale if scale != 1 else q, axis, method, keepdims,
                                skip_nan)
    return impl


def _median_like(fname: str, skip_nan: bool) -> Any:
    def impl(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             keepdims: bool = False) -> Any:
        _check_call(fname, out, "linear", None)
        return _order_statistic(a, 0.5, axis, "linear", keepdims, skip_nan)
    return impl


def _data_and_q(args: tuple, kwargs: dict) -> list[int]:
    """``a``, and ``q`` unless it is a list (a list of numbers is a constant)."""
    return [0] if len(args) < 2 or isinstance(args[1], (list, tuple)) else [0, 1]


def _data(args: tuple, kwargs: dict) -> list[int]:
    return [0]


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# A median reads one or two entries of each slice, which ones depending on the values: the
# flow is the whole slice, sound at every point. The quantiles' flows are traced through
# the composites below (the entries read at the point of detection; later calls check
# the pattern with a random direction and detect again when it misses entries).

declare_reduction(np.median, np.nanmedian)  # before the composites: the first declaration wins

def _statistic_rules(func: Any, impl: Any, positions: Any, scale: float | None,
                     skip_nan: bool) -> None:
    """The composite rules of ``impl``, with the gradient of a call on plain arrays by
    scattering the cotangent (no reverse pass through ``impl``; measured in
    ``benchmarks/coverage.py``). ``scale`` is None for the medians (no ``q``)."""
    composite_gradient = _composite_gradient(impl, positions)

    def tangent_impl(*args: Any, **kwargs: Any) -> Any:
        if innermost_tag(list(args) + list(kwargs.values())) is None:
            return func(*args, **kwargs)
        return impl(*args, **kwargs)

    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        names = ("a", "axis", "out", "overwrite_input", "keepdims") if scale is None else \
            ("a", "q", "axis", "out", "overwrite_input", "method", "keepdims")
        p = bind(names, args, kwargs)
        a, q = p.get("a"), (0.5 if scale is None else p.get("q"))
        method = p.get("interpolation") or p.get("method", "linear")
        plain = isinstance(a, np.ndarray) and isinstance(grad, np.ndarray | np.generic) and \
            not isinstance(q, Traced) and p.get("out") is None and p.get("weights") is None \
            and method in _METHODS
        if not plain:
            return composite_gradient(grad, output, *args, **kwargs)
        q_value = np.asarray(q, dtype=np.float64) / (1.0 if scale is None else scale)
        ga, gq = _order_statistic_gradient(a, q_value, p.get("axis"), method, skip_nan,
                                           np.asarray(grad))
        chosen = positions(args, kwargs)
        result: list[Any] = [None] * len(args)
        result[0] = ga
        if 1 in chosen and scale is not None:
            result[1] = np.reshape(gq / scale, np.shape(q))
        return tuple(result)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals="any")(tangent_impl)
    declare_composite(func, impl)  # sparsity detection traces through impl


def _composite_gradient(impl: Any, positions: Any) -> Any:
    def gradient_of(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        chosen = [i for i in positions(args, kwargs) if i < len(args)]

        def partial(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(chosen, xs):
                full[i] = x
            return impl(*full, **kwargs)

        grads = vjp(partial, *[args[i] for i in chosen])[1](grad)
        result: list[Any] = [None] * len(args)
        for i, g in zip(chosen, grads):
            result[i] = g
        return tuple(result)
    return gradient_of


_statistic_rules(np.quantile, _quantile_like("quantile", 1.0, False), _data_and_q, 1.0, False)
_statistic_rules(np.percentile, _quantile_like("percentile", 100.0, False), _data_and_q, 100.0,
                 False)
_statistic_rules(np.nanquantile, _quantile_like("nanquantile", 1.0, True), _data_and_q, 1.0,
                 True)
_statistic_rules(np.nanpercentile, _quantile_like("nanpercentile", 100.0, True), _data_and_q,
                 100.0, True)
_statistic_rules(np.median, _median_like("median", False), _data, None, False)
_statistic_rules(np.nanmedian, _median_like("nanmedian", True), _data, None, True)

# for compilers (ad.jit): an output entry reads fixed ranks of its slice with fixed weights;
# the nan- versions do not (the ranks depend on how many entries are NaN)
note_order_statistic(np.median)
note_order_statistic(np.quantile, np.percentile, axis_at=2)
