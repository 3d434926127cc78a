"""Rules for sorting entries into groups: ``np.unique`` and ``np.histogram``.

* ``unique(ar, return_index, return_inverse, return_counts, axis)``: the unique values are
  a gather of ``ar`` (each value read at its first occurrence, as numpy's
  ``return_index``), so their derivative flows to that entry, as JAX's sort-based
  ``unique`` does; the indices, the inverse and the counts are integer constants.
* ``histogram(a, bins, range, density, weights)``: the counts are sums of ``weights`` per
  bin (linear in ``weights``; the counts of an unweighted histogram are constants); the
  bin edges ``linspace(min(a), max(a), bins + 1)`` are differentiable in ``a`` (when
  ``range`` is not given) and ``density=True`` divides by the bin widths and the total,
  as JAX. Which bin an entry falls in is piecewise constant (derivative 0). Bins given as
  a string (``"auto"``, ...) are not supported for a traced ``a``: pass a number of bins
  or the edges.

Example:
    >>> import numpy as np, dualad as ad
    >>> a = np.array([0.1, 0.4, 0.45, 0.9])
    >>> ad.jacobian(lambda w: np.histogram(a, bins=2, range=(0, 1), weights=w)[0])(np.ones(4))
    array([[1., 1., 1., 0.],
           [0., 0., 0., 1.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import MissingRuleError, Traced, shape_of, value
from ._support import composite_rules

__all__: list[str] = []


def _unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
            **kwargs: Any) -> Any:
    plain = np.asarray(value(ar))
    found = np.unique(plain, return_index=True, return_inverse=return_inverse,
                      return_counts=return_counts, axis=axis, equal_nan=equal_nan, **kwargs)
    first = found[1]
    values = np.reshape(ar, (-1,))[first] if axis is None else np.take(ar, first, axis=axis)
    extras = []
    if return_index:
        extras.append(first)
    if return_inverse:
        extras.append(found[2])
    if return_counts:
        extras.append(found[-1])
    return (values, *extras) if extras else values


def _bin_edges(a: Any, bins: Any, range_: Any) -> tuple[Any, int]:
    """The bin edges (differentiable in ``a`` when derived from its range) and their count."""
    if isinstance(bins, str):
        if isinstance(a, Traced):
            raise MissingRuleError(
                f"dualad: np.histogram(a, bins={bins!r}) of a traced a is not supported "
                f"(the number of bins would depend on the data); pass bins as a number "
                f"or as the edges, e.g. np.histogram_bin_edges(ad.value(a), {bins!r}).")
        edges = np.histogram_bin_edges(np.asarray(value(a)), bins, range_)
        return edges, len(edges) - 1
    if np.ndim(value(bins)) == 1:
        return bins, shape_of(bins)[0] - 1
    n = int(bins)
    if n < 1:
        raise ValueError("np.histogram: `bins` must be positive, when an integer")
    plain = np.asarray(value(a))
    if range_ is not None:
        first, last = float(range_[0]), float(range_[1])
        if first > last:
            raise ValueError("np.histogram: max must be larger than min in range parameter.")
    elif plain.size == 0:
        first, last = 0.0, 1.0
    else:
        first, last = np.min(a), np.max(a)
    if value(first) == value(last):
        first, last = first - 0.5, last + 0.5
    return np.linspace(first, last, n + 1), n


def _histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,
               weights: Any = None) -> Any:
    edges, n = _bin_edges(a, bins, range)
    plain_edges = np.asarray(value(edges), dtype=np.float64)
    plain = np.ravel(np.asarray(value(a)))
    index = np.searchsorted(plain_edges, plain, side="right") - 1
    index[plain == plain_edges[-1]] = n - 1  # the last bin is closed
    keep = (plain >= plain_edges[0]) & (plain <= plain_edges[-1])
    if weights is None:
        counts: Any = np.bincount(index[keep], minlength=n)[:n]
    else:
        w = np.reshape(weights, (-1,))
        if shape_of(w)[0] != plain.shape[0]:
            raise ValueError("np.histogram: weights should have the same shape as a.")
        counts = np.zeros_like(w, shape=(n,))
        np.add.at(counts, index[keep], w[keep])
    if density:
        counts = counts / np.diff(edges) / np.sum(counts)
    return counts, edges


def _unique_positions(args: tuple, kwargs: dict) -> list[int]:
    return [0]


def _histogram_positions(args: tuple, kwargs: dict) -> list[int]:
    """``a``, edges given as an array, and ``weights``."""
    chosen = [0]
    if len(args) > 1 and isinstance(args[1], (np.ndarray, Traced)) and np.ndim(args[1]) == 1:
        chosen.append(1)
    if len(args) > 4 and args[4] is not None and not isinstance(args[4], (list, tuple)):
        chosen.append(4)
    return chosen


composite_rules(np.unique, _unique, _unique_positions)
composite_rules(np.histogram, _histogram, _histogram_positions)
