"""Banded constant matrices as stencils: a few full diagonals, each a constant vector.

A :class:`~dualad.tape.lowering.Linear` whose entries fill a few diagonals (a convolution
with a constant kernel, a finite difference) is written as one loop per diagonal over the
rows where it lies inside the matrix, a loop Numba vectorises, where the CSR form reads an
index per entry. Only full diagonals qualify: a zero coefficient would multiply an entry the
matrix never reads (an infinite entry would give NaN).

Example:
    >>> import numpy as np
    >>> a = np.diag([1.0, 2.0, 3.0, 4.0]) + np.diag([5.0, 6.0, 7.0], 1)
    >>> ptr = np.array([0, 2, 4, 6, 7]); ind = np.array([0, 1, 1, 2, 2, 3, 3])
    >>> s = stencil(ptr, ind, a[a != 0], 4, min_rows=1)
    >>> s.offsets, s.lo, s.hi
    ((0, 1), (0, 0), (4, 3))
    >>> s.coefficients.reshape(2, 4)[1].tolist()  # A[i, i + 1] for rows 0 .. 2
    [5.0, 6.0, 7.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_STENCIL_DIAGONALS", "MIN_STENCIL_ROWS", "Stencil", "stencil", "transposed"]

#: A matrix with nonzeros on more diagonals than this keeps its CSR form.
MAX_STENCIL_DIAGONALS = 16
#: Smaller matrices keep their CSR form (their loops are short either way).
MIN_STENCIL_ROWS = 64


@dataclass
class Stencil:
    """``A[i, i + offsets[k]] = coefficients[k * m + i]`` for ``lo[k] <= i < hi[k]`` (the
    rows where diagonal ``k`` lies inside the matrix, every one an entry); no other
    entries."""

    offsets: tuple[int, ...]
    coefficients: np.ndarray  # (len(offsets) * m,) row-major by diagonal
    lo: tuple[int, ...]
    hi: tuple[int, ...]


def stencil(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n: int,
            min_rows: int = MIN_STENCIL_ROWS) -> Stencil | None:
    """The stencil of the ``m x n`` CSR matrix (no explicit zeros) when it has ``min_rows``
    rows or more and its entries fill at most ``MAX_STENCIL_DIAGONALS`` diagonals
    entirely; else None."""
    m = indptr.size - 1
    if m < max(min_rows, 1) or n < 1 or indices.size == 0:
        return None
    rows = np.repeat(np.arange(m), np.diff(indptr))
    diagonal = indices.astype(np.int64) - rows
    offsets = np.unique(diagonal)
    if offsets.size > MAX_STENCIL_DIAGONALS:
        return None
    lo = np.maximum(0, -offsets)
    hi = np.minimum(m, n - offsets)
    if int(np.sum(hi - lo)) != indices.size or np.any(data == 0.0):
        return None  # a diagonal with a gap (or an explicit zero): CSR
    coefficients = np.zeros((offsets.size, m))
    coefficients[np.searchsorted(offsets, diagonal), rows] = data
    return Stencil(tuple(int(d) for d in offsets), coefficients.ravel(),
                   tuple(int(v) for v in lo), tuple(int(v) for v in hi))


def transposed(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR form ``(indptr, indices, data)`` of the transpose of an ``m x n`` CSR matrix."""
    m = indptr.size - 1
    rows = np.repeat(np.arange(m, dtype=np.intp), np.diff(indptr))
    order = np.lexsort((rows, indices))
    counts = np.bincount(indices, minlength=n)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
    return ptr, rows[order], data[order]
