"""The constant matrix of a call linear in one argument, read from a few probes.

Lowering writes a call that is linear (or affine) in its one computed argument ``x`` (``n``
entries; result of ``m``) as ``out = A @ x + offset``. ``A`` is read from its structure, not
column by column:

1. its pattern comes from the call's sparsity flow (:mod:`dualad.sparsity.flows`: a
   reduction's groups follow from its axis, a convolution's band from its rule); a call
   without a declared flow has a dense pattern;
2. columns that share no row take one colour, rows that share no column one colour (the
   colour of the ``k``-th nonempty column is ``k mod w`` for the smallest ``w`` tried that
   is valid: a band of width ``w``, one row, disjoint groups colour in a few tries);
3. either the call runs once per colour of columns on the sum of their unit vectors (as
   the tangents of dual numbers, up to ``PROBE_DIRECTIONS`` colours per call; plain calls
   where no rule takes dual numbers), or the call's gradient rule runs once per colour of
   rows on the sum of their unit cotangents, whichever needs fewer calls (a sum over all
   entries, a trace: one gradient call);
4. ``A`` is checked against the call itself at a random point, its negative and another
   random point (where the gradient rule read it and disagrees, the columns are read; where
   those disagree, every entry of a small matrix): a call that is not linear (a maximum,
   ``np.ptp``) gives None.

Example:
    >>> import numpy as np
    >>> from dualad.tape.linear_probes import linear_matrix
    >>> a = linear_matrix(lambda x: np.convolve(x, [1.0, 2.0, 1.0], "same"), (5,), 5)
    >>> np.diff(a.indptr).tolist()  # a band of three diagonals
    [2, 3, 3, 3, 2]
    >>> a.dense()[1].tolist()
    [1.0, 2.0, 1.0, 0.0, 0.0]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import DualadError
from ..forward_mode.dual import Dual, Tag, partials_at
from ..sparsity.detection import trace_call
from ..sparsity.flows import ConservativeFlowWarning, SparsityTracer

__all__ = ["MAX_MATRIX_ENTRIES", "MAX_PROBE_WORK", "PROBE_DIRECTIONS", "LinearMatrix",
           "ProbeRefused", "linear_matrix"]

#: Directions per call when a matrix's columns are read from the tangents of dual numbers.
PROBE_DIRECTIONS = 256
#: Entries of the tangents of one probing call on dual numbers (directions are fewer for
#: large arguments: 16 MB of partials per call at most).
PROBE_MEMORY = 1 << 21
#: The largest matrix written: a call whose pattern holds more entries is refused.
MAX_MATRIX_ENTRIES = 1 << 22
#: The most probing work accepted: calls times the entries each reads and writes.
MAX_PROBE_WORK = 1 << 28
#: A matrix whose probes disagree with the call at the random points is read again with
#: every entry in its pattern (a flow that missed an entry) up to this many entries.
DENSE_RETRY = 1 << 16


class ProbeRefused(DualadError, TypeError):
    """A linear call whose matrix is too large to read or to hold."""


@dataclass
class LinearMatrix:
    """``out = A @ x + offset``, ``A`` in CSR form (``m`` rows, ``n`` columns)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    offset: np.ndarray
    n: int

    def dense(self) -> np.ndarray:
        """``A`` as a dense array (for tests and small examples)."""
        m = self.indptr.size - 1
        out = np.zeros((m, self.n))
        rows = np.repeat(np.arange(m), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out

    def apply(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A @ x + offset, |A| @ |x| + |offset|)``: the second bounds the rounding."""
        m = self.indptr.size - 1
        rows = np.repeat(np.arange(m), np.diff(self.indptr))
        terms = self.data * x[self.indices]
        return (np.bincount(rows, terms, minlength=m) + self.offset,
                np.bincount(rows, np.abs(terms), minlength=m) + np.abs(self.offset))


def _flat(value: Any, m: int) -> np.ndarray:
    out = np.asarray(value)
    if out.dtype.kind not in "biuf" or out.size != m:
        raise ValueError("not a real result of the recorded size")
    return out.astype(np.float64).ravel()


def _pattern(call: Callable[[Any], Any], shape: tuple[int, ...], m: int,
             at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR pattern ``(indptr, indices)`` of the call's matrix, from its sparsity flow;
    dense where it has none (or the flow fails)."""
    n = int(np.prod(shape, dtype=np.int64))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConservativeFlowWarning)
            out, _, _ = trace_call(call, 0, (at,), {}, strict=True)
        if not isinstance(out, SparsityTracer):
            if np.size(out) != m:
                raise ValueError("a result of another size")
            return np.zeros(m + 1, dtype=np.intp), np.zeros(0, dtype=np.intp)
        rows = out.rows
        if rows.m != m or rows.n != n:
            raise ValueError("a pattern of another shape")
        return rows.indptr.astype(np.intp), rows.indices.astype(np.intp)
    except Exception:  # noqa: BLE001 - no flow to read: every entry may matter
        if m * n > MAX_MATRIX_ENTRIES:
            raise ProbeRefused(f"has no declared flow, and a dense {m} x {n} matrix is too "
                               f"large to probe") from None
        return (np.arange(m + 1, dtype=np.intp) * n,
                np.tile(np.arange(n, dtype=np.intp), m))


def _distinct(keys: np.ndarray, bound: int) -> bool:
    """Whether the nonnegative ``keys`` (all below ``bound``) are distinct."""
    if bound <= 4 * keys.size + 1024:
        return keys.size == 0 or int(np.bincount(keys, minlength=1).max()) <= 1
    return np.unique(keys).size == keys.size


def _colors(rows: np.ndarray, cols: np.ndarray, m: int, n: int) -> tuple[np.ndarray, int]:
    """A colour per column (``-1``: an empty column) such that no row holds two columns of
    one colour, and the number of colours: the ``k``-th nonempty column takes ``k mod w``,
    for the first ``w`` that is valid among the largest row's length, a few above it, then
    doubling (every column a colour of its own is valid)."""
    used = np.zeros(n, dtype=bool)
    used[cols] = True
    count = int(used.sum())
    rank = np.full(n, -1, dtype=np.int64)
    rank[used] = np.arange(count)
    if count == 0:
        return rank, 0
    lower = int(np.bincount(rows, minlength=m).max())
    tries = list(range(lower, min(lower + 8, count)))
    w = max(2 * lower, lower + 8)
    while w < count:
        tries.append(w)
        w *= 2
    tries.append(count)
    for w in tries:
        if _distinct(rows * w + rank[cols] % w, m * w):
            return np.where(rank >= 0, rank % w, -1), w
    raise AssertionError("unreachable: distinct ranks are a valid colouring")


def _by_colour(colours: np.ndarray, k: int) -> list[np.ndarray]:
    """The positions of each colour ``0 .. k - 1`` (negative colours left out)."""
    order = np.argsort(colours, kind="stable")
    bounds = np.searchsorted(colours[order], np.arange(k + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(k)]


def _columns(call: Callable[[Any], Any], shape: tuple[int, ...], m: int,
             offset: np.ndarray, rows: np.ndarray, cols: np.ndarray, colour: np.ndarray,
             k: int, dual: bool = True) -> np.ndarray | None:
    """The matrix entries at ``(rows, cols)``, from calls on the summed unit vectors of each
    colour of columns: as the tangents of dual numbers (``dual``; None where a call on dual
    numbers fails), else one plain call per colour."""
    n = colour.size
    data = np.zeros(rows.size)
    of_entry = colour[cols]
    entries = _by_colour(of_entry, k)
    columns = _by_colour(colour, k)
    if dual:
        return _dual_columns(call, shape, m, rows, columns, entries, data, k)
    basis = np.zeros(n)
    for c in range(k):
        basis[columns[c]] = 1.0
        got = _flat(call(basis.reshape(shape)), m) - offset
        basis[columns[c]] = 0.0
        at = entries[c]
        data[at] = got[rows[at]]
    return data


def _dual_columns(call: Callable[[Any], Any], shape: tuple[int, ...], m: int,
                  rows: np.ndarray, columns: list[np.ndarray], entries: list[np.ndarray],
                  data: np.ndarray, k: int) -> np.ndarray | None:
    """:func:`_columns` read from the tangents of dual numbers, ``per_call`` colours a call."""
    n = int(np.prod(shape, dtype=np.int64))
    per_call = max(1, min(PROBE_DIRECTIONS, PROBE_MEMORY // max(n, 1), k))
    try:
        for start in range(0, k, per_call):
            stop = min(start + per_call, k)
            seeds = np.zeros((n, stop - start))
            for c in range(start, stop):
                seeds[columns[c], c - start] = 1.0
            tag = Tag()
            out = call(Dual(np.zeros(shape), seeds.reshape(shape + (stop - start,)), tag))
            partials = partials_at(out, tag)
            if partials is None:
                continue  # no tangent reached the result: these entries are zero
            partials = np.asarray(partials)
            if partials.dtype.kind not in "biuf" or partials.size != m * (stop - start):
                raise ValueError("tangents of another shape")
            partials = partials.reshape(m, stop - start)
            for c in range(start, stop):
                at = entries[c]
                data[at] = partials[rows[at], c - start]
        return data
    except Exception:  # noqa: BLE001 - no rule on dual numbers: plain calls, one per colour
        return None


def _rows(transpose: Callable[[np.ndarray], Any], m: int, n: int, rows: np.ndarray,
          cols: np.ndarray, colour: np.ndarray, k: int) -> np.ndarray | None:
    """The matrix entries at ``(rows, cols)``, from the gradient rule run on the summed unit
    cotangents of each colour of rows; None where the rule fails."""
    data = np.zeros(rows.size)
    entries = _by_colour(colour[rows], k)
    picked = _by_colour(colour, k)
    seed = np.zeros(m)
    try:
        for c in range(k):
            seed[picked[c]] = 1.0
            got = _flat(transpose(seed), n)
            seed[picked[c]] = 0.0
            at = entries[c]
            data[at] = got[cols[at]]
    except Exception:  # noqa: BLE001 - a rule that cannot run here: probed by columns
        return None
    return data


def linear_matrix(call: Callable[[Any], Any], shape: tuple[int, ...], m: int,
                  transpose: Callable[[np.ndarray], Any] | None = None,
                  seed: int = 0) -> LinearMatrix | None:
    """The matrix of ``call`` (a function of one array of ``shape``, with a result of ``m``
    entries) if it is linear (or affine), read from its pattern as the module says;
    None where the call is not linear at random points. ``transpose(cotangent)``, when
    given, is the call's gradient rule: the cotangent (``m`` entries) times ``A``.
    :class:`ProbeRefused` where the matrix is too large to read or to hold.
    """
    n = int(np.prod(shape, dtype=np.int64))
    offset = _flat(call(np.zeros(shape)), m)
    rng = np.random.default_rng(seed)
    r = rng.standard_normal(n)
    # a random point, its negative (a piecewise linear call, |a - b| or a maximum, agrees
    # with one of its pieces at a point but not at both), another random point
    points = [r, -r, rng.standard_normal(n)]
    values: list[np.ndarray] = []

    def holds(matrix: LinearMatrix) -> bool:
        for i, x in enumerate(points):
            if i == len(values):
                values.append(_flat(call(x.reshape(shape)), m))
            expected, scale = matrix.apply(x)
            if not np.all(np.abs(values[i] - expected) <= 1e-10 * scale + 1e-12):
                return False
        return True

    indptr, indices = _pattern(call, shape, m, points[0].reshape(shape))
    if indices.size > MAX_MATRIX_ENTRIES:
        raise ProbeRefused(f"on {n} entries is a {m} x {n} matrix of {indices.size} entries, "
                           f"too many to hold")
    rows = np.repeat(np.arange(m, dtype=np.intp), np.diff(indptr))
    col_colour, kc = _colors(rows, indices, m, n)
    row_colour, kr = _colors(indices, rows, n, m) if transpose is not None else (None, kc + 1)
    if min(kc, kr) * (n + m) > MAX_PROBE_WORK:
        raise ProbeRefused(f"on {n} entries needs {min(kc, kr)} probes of {n + m} entries "
                           f"each: too many to read its matrix")
    try:
        if transpose is not None and kr < kc:
            data = _rows(transpose, m, n, rows, indices, row_colour, kr)
            matrix = None if data is None else _assemble(rows, indices, data, offset, n)
            if matrix is not None and holds(matrix):
                return matrix
        if kc * (n + m) > MAX_PROBE_WORK:  # the rule disagrees with the values
            return None
        for dual in (True, False):  # tangents of dual numbers, else plain calls
            data = _columns(call, shape, m, offset, rows, indices, col_colour, kc, dual)
            matrix = None if data is None else _assemble(rows, indices, data, offset, n)
            if matrix is not None and holds(matrix):
                return matrix
        if indices.size < m * n and m * n <= DENSE_RETRY:  # a pattern too small? every entry
            rows = np.repeat(np.arange(m, dtype=np.intp), n)
            indices = np.tile(np.arange(n, dtype=np.intp), m)
            data = _columns(call, shape, m, offset, rows, indices,
                            np.arange(n, dtype=np.int64), n, dual=False)
            matrix = _assemble(rows, indices, data, offset, n)
            if holds(matrix):
                return matrix
    except ValueError:  # a result of another size or type at some point
        return None
    return None


def _assemble(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, offset: np.ndarray,
              n: int) -> LinearMatrix:
    """The CSR matrix of the nonzero ``data`` at ``(rows, cols)`` (rows in order)."""
    keep = data != 0.0
    counts = np.bincount(rows[keep], minlength=offset.size)
    return LinearMatrix(np.concatenate([[0], np.cumsum(counts)]).astype(np.intp),
                        cols[keep].astype(np.intp), data[keep], offset, n)
