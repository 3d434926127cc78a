"""Bicolouring: some nonzeros from a forward pass, the others from reverse passes.

A matrix with a few dense rows and columns (a bordered or arrowhead system: a PDE with a
global constraint or an integral term) needs as many column colours as it has columns, and
as many row colours as rows: one dense row joins every column, one dense column every row.
Splitting the nonzeros between the two modes removes both: the dense rows are read from
reverse passes (one pullback per row colour), everything else from one forward pass.

The split here partitions the nonzeros by *row* (the rows ``R`` go to reverse) or by
*column* (the columns ``C`` go to forward). With the row split, forward seeds colour the
columns so that no two columns sharing a row outside ``R`` share a colour, and reverse
seeds colour the rows of ``R`` so that no two sharing a column share one (rows outside
``R`` are not seeded); every nonzero is then read directly from one product. The column
split is the same on the transpose. The heaviest rows (or columns) are tried as ``R`` (or
``C``) in growing numbers, and the split with the lowest cost is kept. This is a simpler
scheme than the star bicolouring of Coleman and Verma (which may share rows and columns
between the modes), and is exact for bordered patterns: an arrowhead needs 3 colours.

Example:
    >>> import numpy as np
    >>> arrow = np.eye(20, dtype=bool); arrow[0] = True; arrow[:, 0] = True
    >>> split = color_bidirectional(arrow)
    >>> split.forward_colors[:4].tolist(), split.reverse_colors[:4].tolist()
    ([0, 1, 1, 1], [0, -1, -1, -1])
    >>> split.total, len(set(color_columns(arrow).tolist()))
    (3, 20)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .coloring import _csr_parts, color_columns, color_rows
from .seeding import best_colors

__all__ = ["REVERSE_COST", "Bicoloring", "color_bidirectional", "is_bicoloring"]

#: The cost of one pullback (a recorded reverse pass) in forward directions, as in
#: ``sparse_jacobian(mode="auto")``.
REVERSE_COST = 8

_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class Bicoloring:
    """Colours of a forward/reverse split of a pattern's nonzeros.

    ``forward_colors[j]``: the colour of column ``j`` in the forward seeds (``-1``: not
    seeded); ``reverse_colors[i]``: that of row ``i`` in the reverse seeds (``-1``: not
    seeded); ``forward_entry[p]``: whether nonzero ``p`` (in CSR order) is read from the
    forward pass.
    """

    forward_colors: np.ndarray
    reverse_colors: np.ndarray
    forward_entry: np.ndarray

    @property
    def forward_count(self) -> int:
        return int(self.forward_colors.max(initial=-1)) + 1

    @property
    def reverse_count(self) -> int:
        return int(self.reverse_colors.max(initial=-1)) + 1

    @property
    def total(self) -> int:
        """Colours in all: forward directions plus pullbacks."""
        return self.forward_count + self.reverse_count

    @property
    def cost(self) -> int:
        return self.forward_count + REVERSE_COST * self.reverse_count


def _sub_pattern(m: int, n: int, indptr: np.ndarray, indices: np.ndarray,
                 keep: np.ndarray) -> Any:
    import scipy.sparse as sp

    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    return sp.csr_array((np.ones(int(keep.sum()), dtype=bool), (rows[keep], indices[keep])),
                        shape=(m, n))


def _split(m: int, n: int, indptr: np.ndarray, indices: np.ndarray,
           forward_entry: np.ndarray) -> Bicoloring:
    fwd = _sub_pattern(m, n, indptr, indices, forward_entry)
    rev = _sub_pattern(m, n, indptr, indices, ~forward_entry)
    fc = best_colors(color_columns, fwd) if n else np.zeros(0, np.int64)
    rc = best_colors(color_rows, rev) if m else np.zeros(0, np.int64)
    fc = np.where(np.bincount(fwd.indices, minlength=n) > 0, fc, -1)
    rc = np.where(np.diff(rev.indptr) > 0, rc, -1)
    return Bicoloring(fc.astype(np.int64), rc.astype(np.int64), forward_entry)


def color_bidirectional(pattern: Any) -> Bicoloring:
    """The cheapest forward/reverse split of ``pattern``'s nonzeros found (see the module).

    Cost: forward colours plus :data:`REVERSE_COST` per reverse colour; all-forward (a
    plain column colouring) is among the candidates.
    """
    m, n, indptr, indices = _csr_parts(pattern)
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))

    def bound(forward_entry: np.ndarray) -> int:
        """A lower bound of a split's cost, without colouring: the nonzeros of one row
        need distinct forward colours, those of one column distinct reverse colours.
        (It also skips splits whose colouring graph is dense: a dense row read forward
        joins every pair of columns.)"""
        f_rows = rows[forward_entry]
        r_cols = indices[~forward_entry]
        kf = int(np.bincount(f_rows).max()) if f_rows.size else 0
        kr = int(np.bincount(r_cols).max()) if r_cols.size else 0
        return kf + REVERSE_COST * kr

    row_order = np.argsort(-np.diff(indptr), kind="stable")
    col_order = np.argsort(-np.bincount(indices, minlength=n), kind="stable")
    candidates = [np.ones(indices.size, dtype=bool)]  # all forward: a column colouring
    # the heaviest rows to reverse, or the heaviest columns to forward (the rest to
    # reverse), in growing numbers
    for by_rows in (True, False):
        size, order = (m, row_order) if by_rows else (n, col_order)
        for count in _COUNTS:
            if count >= size:
                break
            chosen = np.zeros(size, dtype=bool)
            chosen[order[:count]] = True
            candidates.append(~chosen[rows] if by_rows else chosen[indices])
    # the most promising first; a candidate is coloured only if its bound can beat the best
    bounds = [bound(c) for c in candidates]
    best = None
    for k in np.argsort(bounds, kind="stable"):
        if best is not None and bounds[k] >= best.cost:
            break
        candidate = _split(m, n, indptr, indices, candidates[k])
        if best is None or candidate.cost < best.cost:
            best = candidate
    assert best is not None  # the all-forward candidate is always split
    return best


def is_bicoloring(pattern: Any, split: Bicoloring) -> bool:
    """Whether every nonzero can be read directly from its pass under ``split``.

    Example:
        >>> import numpy as np
        >>> arrow = np.eye(4, dtype=bool); arrow[0] = True; arrow[:, 0] = True
        >>> is_bicoloring(arrow, color_bidirectional(arrow))
        True
    """
    m, n, indptr, indices = _csr_parts(pattern)
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    fe = split.forward_entry
    fc, rc = split.forward_colors, split.reverse_colors
    # forward: in each row read by forward, one seeded column per colour
    read_rows = np.zeros(m, dtype=bool)
    read_rows[rows[fe]] = True
    if (fc[indices[fe]] < 0).any() or (rc[rows[~fe]] < 0).any():
        return False
    seeded = (fc[indices] >= 0) & read_rows[rows]
    kf = split.forward_count + 1
    keys = rows[seeded] * kf + fc[indices[seeded]]
    clash_f = np.bincount(keys, minlength=m * kf) > 1
    if clash_f[rows[fe] * kf + fc[indices[fe]]].any():
        return False
    kr = split.reverse_count + 1
    seeded_r = rc[rows] >= 0
    keys_r = indices[seeded_r] * kr + rc[rows[seeded_r]]
    clash_r = np.bincount(keys_r, minlength=n * kr) > 1
    return not clash_r[indices[~fe] * kr + rc[rows[~fe]]].any()
