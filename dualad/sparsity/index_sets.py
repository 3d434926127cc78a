"""Rows of index sets: a boolean sparse matrix in CSR form, with numpy operations only.

The sparsity tracer keeps, for every entry of an array, the set of input entries it depends
on: row ``i`` of an :class:`IndexSets` of shape ``(size, n)``. Every row holds sorted,
distinct column indices. The operations the tracer needs (gathering rows, unions, joining
rows into groups) are a few vectorised numpy calls each: a union sorts the concatenated
``row << 32 | column`` keys of its parts (sorted runs, merged by a stable sort in linear
time) and drops repeats. (scipy.sparse's additions cost tens of microseconds of Python per
call; this is several times cheaper on a 2048-row Brusselator.)

Example:
    >>> import numpy as np
    >>> from dualad.sparsity.index_sets import IndexSets, union
    >>> x = IndexSets.identity(3)
    >>> union([x.take(np.array([1, 2])), x.take(np.array([0, 1]))], 2, 3).toarray().astype(int)
    array([[1, 1, 0],
           [0, 1, 1]])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["IndexSets", "combine", "union", "vstack"]

_EMPTY = np.zeros(0, dtype=np.int64)


class IndexSets:
    """``m`` index sets over ``range(n)``: ``indices[indptr[i]:indptr[i + 1]]`` is set ``i``."""

    __slots__ = ("indptr", "indices", "n", "single", "_row_ids")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, n: int,
                 single: bool = False) -> None:
        self.indptr = indptr
        self.indices = indices
        self.n = int(n)
        #: every set has exactly one index (``indptr`` is ``arange``): takes are one gather
        self.single = single
        self._row_ids: np.ndarray | None = None

    @classmethod
    def empty(cls, m: int, n: int) -> IndexSets:
        """``m`` empty sets."""
        return cls(np.zeros(m + 1, dtype=np.int64), _EMPTY, n)

    @classmethod
    def identity(cls, n: int) -> IndexSets:
        """Set ``i`` is ``{i}``."""
        return cls(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64), n, True)

    @property
    def m(self) -> int:
        return self.indptr.size - 1

    @property
    def shape(self) -> tuple[int, int]:
        return (self.m, self.n)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def row_ids(self) -> np.ndarray:
        """The row of every stored index (computed once)."""
        ids = self._row_ids
        if ids is None:
            if self.single:
                ids = self.indptr[:-1]
            else:
                ids = np.repeat(np.arange(self.m, dtype=np.int64), np.diff(self.indptr))
            self._row_ids = ids
        return ids

    def take(self, rows: np.ndarray) -> IndexSets:
        """The sets ``rows`` (a 1-D integer array; repeats allowed), in that order; a
        negative row gives an empty set."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        m = self.m
        if rows.size == m and m and rows[0] == 0 and rows[-1] == m - 1 \
                and np.array_equal(rows, np.arange(m)):
            return self
        low = rows.min() if rows.size else 0
        if self.single and low >= 0:
            return IndexSets(np.arange(rows.size + 1, dtype=np.int64), self.indices[rows],
                             self.n, True)
        if low < 0:
            valid = rows >= 0
            safe = np.where(valid, rows, 0)
            starts = self.indptr[safe]
            lengths = np.where(valid, self.indptr[safe + 1] - starts, 0)
        else:
            starts = self.indptr[rows]
            lengths = self.indptr[rows + 1] - starts
        indptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        total = int(indptr[-1])
        if total == 0:
            return IndexSets(indptr, _EMPTY, self.n)
        offsets = np.repeat(starts - indptr[:-1], lengths)
        return IndexSets(indptr, self.indices[offsets + np.arange(total, dtype=np.int64)],
                         self.n)

    def to_scipy(self) -> Any:
        """A boolean ``scipy.sparse.csr_array`` with these rows."""
        import scipy.sparse as sp

        return sp.csr_array((np.ones(self.nnz, dtype=bool), self.indices, self.indptr),
                            shape=self.shape)

    def toarray(self) -> np.ndarray:
        """The dense boolean ``(m, n)`` matrix."""
        out = np.zeros(self.shape, dtype=bool)
        out[self.row_ids(), self.indices] = True
        return out


#: Keys of (row, column) pairs are ``row << _SHIFT | column``: shifts and masks, not the
#: integer divisions of ``row * n + column`` (several times slower on int64 arrays).
_SHIFT = 32
_MASK = (1 << _SHIFT) - 1


def _keys(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    return (rows << _SHIFT) | columns


def _from_keys(keys: np.ndarray, m: int, n: int) -> IndexSets:
    """Sets from sorted distinct keys (see :func:`_keys`)."""
    rows = keys >> _SHIFT
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    sets = IndexSets(indptr, keys & _MASK, n)
    sets._row_ids = rows
    return sets


def _distinct_sorted(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted, without repeats. The keys come as a few sorted runs (one per
    part), which the stable sort (timsort on int64) merges in linear time."""
    keys.sort(kind="stable")
    if keys.size < 2:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def union(parts: Sequence[IndexSets], m: int, n: int) -> IndexSets:
    """Row-wise union of sets with ``m`` rows each."""
    parts = [p for p in parts if p.nnz]
    if not parts:
        return IndexSets.empty(m, n)
    first = parts[0]
    if all(p is first for p in parts[1:]):
        return first
    if m == 1:  # scalars: one small sorted union
        return _single_row(np.unique(np.concatenate([p.indices for p in parts])), n)
    keys = np.concatenate([_keys(p.row_ids(), p.indices) for p in parts])
    return _from_keys(_distinct_sorted(keys), m, n)


def _single_row(indices: np.ndarray, n: int) -> IndexSets:
    return IndexSets(np.array([0, indices.size], dtype=np.int64), indices, n)


def vstack(parts: Sequence[IndexSets], n: int) -> IndexSets:
    """The rows of ``parts``, one after another."""
    indptrs, offset = [np.zeros(1, dtype=np.int64)], 0
    for p in parts:
        indptrs.append(p.indptr[1:] + offset)
        offset += p.nnz
    indices = [p.indices for p in parts if p.nnz]
    return IndexSets(np.concatenate(indptrs),
                     np.concatenate(indices) if indices else _EMPTY, n)


def combine(sets: IndexSets, source: np.ndarray, target: np.ndarray, m: int) -> IndexSets:
    """``m`` sets; set ``t`` is the union of ``sets[s]`` over the pairs ``(s, t)`` of
    ``source`` and ``target`` (a sparse linear map's structure applied to the sets)."""
    n = sets.n
    gathered = sets.take(source)
    if gathered.nnz == 0:
        return IndexSets.empty(m, n)
    rows = np.repeat(np.asarray(target, dtype=np.int64).reshape(-1),
                     np.diff(gathered.indptr))
    return _from_keys(_distinct_sorted(_keys(rows, gathered.indices)), m, n)
