"""Rules for order statistics: median, percentile, quantile and their nan- versions.

Each is written with calls that have rules of their own (a gather of the sorted entries
with ``np.take_along_axis`` and a linear interpolation), which gives both modes and every
order (:func:`~dualad.numpy_rules._support.composite_rules`).

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

from ..extend import MissingRuleError, declare_reduction, shape_of, value
from ._support import composite_rules, normalize_axes

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


def _order_statistic(a: Any, q: Any, axis: Any, method: str, keepdims: bool,
                     skip_nan: bool) -> Any:
    """The ``q``-quantiles of ``a`` over ``axis`` (shape ``q.shape + kept axes``)."""
    v = np.asarray(value(a))
    shape = shape_of(a)
    nd = len(shape)
    axes = normalize_axes(axis, nd, "quantile")
    kept = [i for i in range(nd) if i not in axes]
    batch = tuple(shape[i] for i in kept)
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    flat = np.reshape(np.moveaxis(a, axes, range(len(kept), nd)), batch + (n,))
    vflat = np.reshape(np.moveaxis(v, axes, range(len(kept), nd)), batch + (n,))
    nan = np.isnan(vflat)
    order = np.argsort(vflat, axis=-1, kind="stable")  # NaNs last
    count = np.sum(~nan, axis=-1) if skip_nan else np.full(batch, n)
    q_value = np.asarray(value(q), dtype=np.float64)
    q_shape = q_value.shape
    pos = q_value.reshape(q_shape + (1,) * len(batch)) * np.maximum(count - 1, 0)
    top = np.maximum(count - 1, 0)
    lo = np.clip(np.floor(pos), 0, top).astype(np.int64)
    hi = np.minimum(lo + 1, top)
    frac: Any = None
    if method == "linear":
        q_b = np.reshape(q, q_shape + (1,) * len(batch))
        frac = q_b * np.maximum(count - 1, 0) - lo  # differentiable in q
    elif method == "higher":
        lo = np.clip(np.ceil(pos), 0, top).astype(np.int64)
    elif method == "nearest":
        lo = np.clip(np.around(pos), 0, top).astype(np.int64)
    elif method == "midpoint":
        frac = np.where(np.floor(pos) == pos, 0.0, 0.5)

    def gather(idx: np.ndarray) -> Any:
        # idx: q_shape + batch -> entries of the sorted slices, shape q_shape + batch
        nq = int(np.prod(q_shape, dtype=np.int64))
        idx = np.moveaxis(np.reshape(idx, (nq,) + batch), 0, -1)
        rows = np.take_along_axis(order, idx, axis=-1)
        picked = np.take_along_axis(flat, rows, axis=-1)
        return np.reshape(np.moveaxis(picked, -1, 0), q_shape + batch)

    result = gather(lo)
    if frac is not None:
        result = result + (gather(hi) - result) * frac
    empty = np.broadcast_to(count == 0 if skip_nan else np.any(nan, axis=-1), batch)
    if np.any(empty):
        result = np.where(np.broadcast_to(empty, q_shape + batch), np.nan, result)
    if keepdims:
        result = np.reshape(result, q_shape + tuple(1 if i in axes else shape[i]
                                                    for i in range(nd)))
    return result


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

composite_rules(np.quantile, _quantile_like("quantile", 1.0, False), _data_and_q)
composite_rules(np.percentile, _quantile_like("percentile", 100.0, False), _data_and_q)
composite_rules(np.nanquantile, _quantile_like("nanquantile", 1.0, True), _data_and_q)
composite_rules(np.nanpercentile, _quantile_like("nanpercentile", 100.0, True), _data_and_q)
composite_rules(np.median, _median_like("median", False), _data)
composite_rules(np.nanmedian, _median_like("nanmedian", True), _data)
