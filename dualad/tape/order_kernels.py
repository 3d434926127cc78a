"""Numba functions of order statistics (:class:`~dualad.tape.lowering.Order`), compiled once
(and cached on disk) and called by the generated code of every program that sorts: a
program's own code only calls them (measured: writing the sorts into each program's code
added about 0.6 s to its compile time).

A group's entries are sorted stably (ties keep their order, as eager mode's sort) with NaN
last: runs of ``INSERTION_SORT`` entries by insertion, then merged pairwise. Each output entry
adds up its ranks' entries with their weights (a weight 0 is padding, skipped); a group
holding a NaN gives NaN without derivative where ``poisons``.

Example:
    >>> import numpy as np
    >>> x = np.array([3.0, 1.0, 2.0, 0.5])
    >>> ranked, nan = np.empty(4, dtype=np.intp), np.empty(2)
    >>> order_sort(x, np.array([0, 1, 2, 3]), 2, 2, True, ranked, nan)
    >>> ranked
    array([1, 0, 3, 2])
    >>> out = np.empty(2)
    >>> order_values(x, ranked, nan, np.array([0, 1]), np.array([1, 0]), np.ones(2), 2, 1, out)
    >>> out
    array([3. , 0.5])
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["INSERTION_SORT", "order_adjoints", "order_sort", "order_tangents", "order_values"]

#: Runs of this many entries are sorted by insertion (a group of at most this many: only
#: that), then merged.
INSERTION_SORT = 16

_JIT = numba.njit(cache=True, nogil=True, error_model="numpy")


@_JIT
def _before(a: float, b: float) -> bool:
    """``a`` sorts strictly before ``b`` (NaN last)."""
    return a < b or (b != b and a == a)


@_JIT
def order_sort(x, members, n_groups, size, poisons, ranked, nan):  # pragma: no cover - Numba
    """``ranked[g * size:(g + 1) * size]``: the positions in ``x`` of group ``g``'s members
    (``members``, the same layout) sorted by value; ``nan[g]``: 1.0 where ``poisons`` and
    the group holds a NaN, else 0.0. The values are sorted with their positions, side by
    side (no indirect reads while comparing)."""
    vals, idx = np.empty(size), np.empty(size, dtype=np.intp)
    spare_vals, spare_idx = np.empty(size), np.empty(size, dtype=np.intp)
    for g in range(n_groups):
        h = g * size
        for j in range(size):
            idx[j] = members[h + j]
            vals[j] = x[idx[j]]
        # runs of INSERTION_SORT entries sorted by insertion, then merged pairwise
        for start in range(0, size, INSERTION_SORT):
            stop = min(start + INSERTION_SORT, size)
            for j in range(start + 1, stop):
                v, e = vals[j], idx[j]
                k = j
                while k > start and _before(v, vals[k - 1]):
                    vals[k], idx[k] = vals[k - 1], idx[k - 1]
                    k -= 1
                vals[k], idx[k] = v, e
        width = INSERTION_SORT
        while width < size:
            lo = 0
            while lo < size:
                mid = min(lo + width, size)
                hi = min(lo + 2 * width, size)
                i, j = lo, mid
                for t in range(lo, hi):
                    if j >= hi or (i < mid and not _before(vals[j], vals[i])):  # ties: left
                        spare_vals[t], spare_idx[t] = vals[i], idx[i]
                        i += 1
                    else:
                        spare_vals[t], spare_idx[t] = vals[j], idx[j]
                        j += 1
                lo = hi
            vals, spare_vals = spare_vals, vals
            idx, spare_idx = spare_idx, idx
            width *= 2
        for j in range(size):
            ranked[h + j] = idx[j]
        last = vals[size - 1]
        nan[g] = 1.0 if poisons and last != last else 0.0


@_JIT
def order_values(x, ranked, nan, group_of, ranks, weights, size, terms,
                 out):  # pragma: no cover - Numba
    """``out[i]``: the weighted ranks of output ``i`` (``ranks`` and ``weights``: ``terms``
    per output)."""
    for i in range(group_of.shape[0]):
        g = group_of[i]
        if nan[g] != 0.0:
            out[i] = np.nan
            continue
        acc = 0.0
        for t in range(terms):
            c = weights[i * terms + t]
            if c != 0.0:
                acc += c * x[ranked[g * size + ranks[i * terms + t]]]
        out[i] = acc


@_JIT
def order_tangents(source, ranked, nan, group_of, ranks, weights, size, terms,
                   out):  # pragma: no cover - Numba
    """``out[i, :]``: the weighted tangent rows (``source``) of output ``i``'s ranks."""
    K = out.shape[1]
    for i in range(group_of.shape[0]):
        for k in range(K):
            out[i, k] = 0.0
        g = group_of[i]
        if nan[g] != 0.0:
            continue
        for t in range(terms):
            c = weights[i * terms + t]
            if c != 0.0:
                e = ranked[g * size + ranks[i * terms + t]]
                for k in range(K):
                    out[i, k] += c * source[e, k]


@_JIT
def order_adjoints(adjoint, ranked, nan, group_of, ranks, weights, size, terms,
                   source):  # pragma: no cover - Numba
    """``source``'s adjoint plus each output's (``adjoint``) sent to its ranks' entries."""
    for i in range(group_of.shape[0]):
        g = group_of[i]
        if nan[g] != 0.0:
            continue
        a = adjoint[i]
        for t in range(terms):
            c = weights[i * terms + t]
            if c != 0.0:
                source[ranked[g * size + ranks[i * terms + t]]] += c * a
