"""Graph colourings that compress sparse Jacobians and Hessians.

A *column colouring* of an ``m x n`` sparsity pattern gives every column a colour so that
two columns sharing a row never share a colour (a distance-2 colouring of the bipartite
graph, i.e. a colouring of the column-intersection graph). The columns of one colour are
then structurally orthogonal: one forward pass seeded with the sum of their unit vectors
gives all their nonzeros, so ``k`` colours give the whole Jacobian in ``k`` directions.

A *star colouring* of a symmetric ``n x n`` pattern (a proper colouring in which every path
on four vertices uses at least three colours) lets every nonzero of a symmetric matrix be
read directly from ``k`` products ``H @ seed`` (Coleman and Moré's direct recovery):
``H[i, j]`` is the entry of row ``i`` in the product of ``j``'s colour when ``j`` is the
only column of that colour in row ``i``, else the entry of row ``j`` for ``i``'s colour.

Greedy colourings (Gebremedhin, Manne and Pothen, "What color is your Jacobian?", SIAM
Review 2005) in three vertex orders: ``"natural"``, ``"largest_first"`` and
``"smallest_last"``. The loops are compiled with Numba (cached on disk) when it is
available, and run as plain Python otherwise.

Example:
    >>> import numpy as np
    >>> from dualad.sparse.coloring import color_columns
    >>> tridiagonal = np.eye(6) + np.eye(6, k=1) + np.eye(6, k=-1)
    >>> color_columns(tridiagonal, order="natural")
    array([0, 1, 2, 0, 1, 2])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "ORDERS",
    "color_columns",
    "color_rows",
    "color_symmetric",
    "column_intersection_graph",
    "is_column_coloring",
    "is_star_coloring",
    "star_recovery",
]

#: The vertex orders a greedy colouring can take.
ORDERS = ("natural", "largest_first", "smallest_last")


# -- the compiled kernels (plain Python functions, compiled on first use) -----------------

def _intersection_graph(n, rows_ptr, rows_idx, cols_ptr, cols_idx):  # pragma: no cover
    """Adjacency (CSR) of the column-intersection graph: columns sharing a row."""
    mark = np.full(n, -1, dtype=np.int64)
    degree = np.zeros(n, dtype=np.int64)
    for j in range(n):
        mark[j] = j
        for a in range(cols_ptr[j], cols_ptr[j + 1]):
            i = cols_idx[a]
            for b in range(rows_ptr[i], rows_ptr[i + 1]):
                jj = rows_idx[b]
                if mark[jj] != j:
                    mark[jj] = j
                    degree[j] += 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):
        ptr[j + 1] = ptr[j] + degree[j]
    adj = np.empty(ptr[n], dtype=np.int64)
    mark[:] = -1
    for j in range(n):
        mark[j] = j
        pos = ptr[j]
        for a in range(cols_ptr[j], cols_ptr[j + 1]):
            i = cols_idx[a]
            for b in range(rows_ptr[i], rows_ptr[i + 1]):
                jj = rows_idx[b]
                if mark[jj] != j:
                    mark[jj] = j
                    adj[pos] = jj
                    pos += 1
    return ptr, adj


def _smallest_last_order(n, ptr, adj):  # pragma: no cover
    """Matula-Beck smallest-last order with bucket lists (O(V + E))."""
    degree = np.empty(n, dtype=np.int64)
    maxdeg = 0
    for v in range(n):
        degree[v] = ptr[v + 1] - ptr[v]
        if degree[v] > maxdeg:
            maxdeg = degree[v]
    head = np.full(maxdeg + 1, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    for v in range(n - 1, -1, -1):
        d = degree[v]
        nxt[v] = head[d]
        if head[d] >= 0:
            prv[head[d]] = v
        head[d] = v
    removed = np.zeros(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    low = 0
    for pos in range(n - 1, -1, -1):
        while head[low] < 0:
            low += 1
        v = head[low]
        # unlink v
        head[low] = nxt[v]
        if nxt[v] >= 0:
            prv[nxt[v]] = -1
        removed[v] = True
        order[pos] = v
        for a in range(ptr[v], ptr[v + 1]):
            w = adj[a]
            if removed[w]:
                continue
            d = degree[w]
            # move w from bucket d to bucket d - 1
            if prv[w] >= 0:
                nxt[prv[w]] = nxt[w]
            else:
                head[d] = nxt[w]
            if nxt[w] >= 0:
                prv[nxt[w]] = prv[w]
            d -= 1
            degree[w] = d
            prv[w] = -1
            nxt[w] = head[d]
            if head[d] >= 0:
                prv[head[d]] = w
            head[d] = w
            if d < low:
                low = d
    return order


def _greedy(n, ptr, adj, order):  # pragma: no cover
    """Greedy distance-1 colouring of a graph in the given vertex order."""
    color = np.full(n, -1, dtype=np.int64)
    forbidden = np.full(n + 1, -1, dtype=np.int64)
    for v in order:
        for a in range(ptr[v], ptr[v + 1]):
            c = color[adj[a]]
            if c >= 0:
                forbidden[c] = v
        c = 0
        while forbidden[c] == v:
            c += 1
        color[v] = c
    return color


def _star(n, ptr, adj, order):  # pragma: no cover
    """Greedy star colouring (Gebremedhin, Manne and Pothen, Algorithm 4.1)."""
    color = np.full(n, -1, dtype=np.int64)
    forbidden = np.full(n + 1, -1, dtype=np.int64)
    for v in order:
        for a in range(ptr[v], ptr[v + 1]):
            w = adj[a]
            cw = color[w]
            if cw >= 0:
                forbidden[cw] = v
            for b in range(ptr[w], ptr[w + 1]):
                x = adj[b]
                if x == v:
                    continue
                cx = color[x]
                if cx < 0:
                    continue
                if cw < 0:
                    forbidden[cx] = v
                else:
                    for c in range(ptr[x], ptr[x + 1]):
                        y = adj[c]
                        if y != w and color[y] == cw:
                            forbidden[cx] = v
                            break
        c = 0
        while forbidden[c] == v:
            c += 1
        color[v] = c
    return color


_COMPILED: dict[str, Any] = {}
_KERNELS = {
    "graph": _intersection_graph,
    "smallest_last": _smallest_last_order,
    "greedy": _greedy,
    "star": _star,
}


#: Patterns with at most this many nonzeros are coloured by the Python kernels unless the
#: Numba ones are loaded already: measured, Python colours 1000 nonzeros in about 5 ms,
#: while compiling the Numba kernels the first time takes about 0.8 s.
SMALL_PATTERN = 1000


def _kernel(name: str, nnz: int) -> Any:
    """The Numba-compiled kernel ``name`` (cached on disk), or the Python one for a small
    pattern (``nnz`` nonzeros) while the compiled one is not loaded, or without Numba."""
    fn = _COMPILED.get(name)
    if fn is None and nnz <= SMALL_PATTERN:
        return _KERNELS[name]
    if fn is None:
        try:
            import numba
        except ImportError:  # pragma: no cover - numba is a dependency, but stay usable
            fn = _KERNELS[name]
        else:
            fn = numba.njit(cache=True, nogil=True)(_KERNELS[name])
        _COMPILED[name] = fn
    return fn


# -- patterns ---------------------------------------------------------------------------

def _csr_parts(pattern: Any) -> tuple[int, int, np.ndarray, np.ndarray]:
    """``(m, n, indptr, indices)`` of a boolean pattern (dense array or scipy.sparse)."""
    if hasattr(pattern, "tocsr") and hasattr(pattern, "nnz"):
        csr = pattern.tocsr(copy=True)  # canonicalised below: never the caller's arrays
        csr.eliminate_zeros()
        csr.sum_duplicates()
        m, n = csr.shape
        return m, n, csr.indptr.astype(np.int64), csr.indices.astype(np.int64)
    arr = np.asarray(pattern)
    if arr.ndim != 2:
        raise ValueError(
            f"color_columns: the pattern must be a 2-D array or scipy.sparse matrix, got "
            f"shape {arr.shape}; pass ad.jacobian_sparsity(f)(x)."
        )
    mask = arr != 0
    m, n = mask.shape
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(mask.sum(axis=1), out=indptr[1:])
    indices = np.nonzero(mask)[1].astype(np.int64)
    return m, n, indptr, indices


def _transpose(m: int, n: int, indptr: np.ndarray, indices: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """CSC arrays (column pointers, row indices) of a CSR pattern."""
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=ptr[1:])
    return ptr, rows[order]


def column_intersection_graph(pattern: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, adj)``: the CSR adjacency of the graph joining columns that share a row.

    Example:
        >>> import numpy as np
        >>> ptr, adj = column_intersection_graph(np.array([[1, 1, 0], [0, 0, 1]]))
        >>> ptr.tolist(), adj.tolist()
        ([0, 1, 2, 2], [1, 0])
    """
    m, n, indptr, indices = _csr_parts(pattern)
    cptr, cidx = _transpose(m, n, indptr, indices)
    return _kernel("graph", indices.size)(n, indptr, indices, cptr, cidx)


def _order(name: str, n: int, ptr: np.ndarray, adj: np.ndarray, fname: str) -> np.ndarray:
    if name == "natural":
        return np.arange(n, dtype=np.int64)
    if name == "largest_first":
        return np.argsort(-np.diff(ptr), kind="stable").astype(np.int64)
    if name == "smallest_last":
        return _kernel("smallest_last", adj.size)(n, ptr, adj)
    raise ValueError(f"{fname}: unknown order {name!r}; choose one of {', '.join(ORDERS)}.")


def color_columns(pattern: Any, order: str = "largest_first") -> np.ndarray:
    """The colour of each column: a distance-2 (column-intersection) colouring.

    Columns that share a row of ``pattern`` (an ``m x n`` boolean array or scipy.sparse
    matrix) get different colours; colours are ``0, 1, ..., k - 1``. ``order`` is the
    greedy vertex order: ``"largest_first"`` (by degree in the column-intersection graph),
    ``"smallest_last"`` or ``"natural"``.

    Example:
        >>> import numpy as np
        >>> arrow = np.eye(4); arrow[0] = 1
        >>> color_columns(arrow).tolist()
        [0, 1, 2, 3]
    """
    m, n, indptr, indices = _csr_parts(pattern)
    cptr, cidx = _transpose(m, n, indptr, indices)
    ptr, adj = _kernel("graph", indices.size)(n, indptr, indices, cptr, cidx)
    return _kernel("greedy", indices.size)(n, ptr, adj,
                                           _order(order, n, ptr, adj, "color_columns"))


def color_rows(pattern: Any, order: str = "largest_first") -> np.ndarray:
    """The colour of each row (rows sharing a column differ): for reverse-mode compression."""
    m, n, indptr, indices = _csr_parts(pattern)
    cptr, cidx = _transpose(m, n, indptr, indices)
    # the rows of the pattern are the columns of its transpose
    ptr, adj = _kernel("graph", indices.size)(m, cptr, cidx, indptr, indices)
    return _kernel("greedy", indices.size)(m, ptr, adj,
                                           _order(order, m, ptr, adj, "color_rows"))


def color_symmetric(pattern: Any, order: str = "largest_first") -> np.ndarray:
    """A star colouring of a symmetric ``n x n`` pattern (for Hessians).

    Its colours let every nonzero of a symmetric matrix with this pattern be recovered
    from one product ``H @ seed`` per colour (see :func:`star_recovery`).

    Example:
        >>> import numpy as np
        >>> arrow = np.eye(5); arrow[0] = 1; arrow[:, 0] = 1
        >>> len(set(color_symmetric(arrow).tolist()))   # distance-2 would need 5
        2
    """
    m, n, indptr, indices = _csr_parts(pattern)
    if m != n:
        raise ValueError(
            f"color_symmetric: a Hessian pattern is square, got shape ({m}, {n})."
        )
    # the adjacency: off-diagonal entries of pattern + pattern.T
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    r = np.concatenate([rows, indices])
    c = np.concatenate([indices, rows])
    keep = r != c
    key = np.unique(r[keep] * n + c[keep])
    r, c = key // n, key % n
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=ptr[1:])
    adj = c.astype(np.int64)
    return _kernel("star", indices.size)(n, ptr, adj,
                                         _order(order, n, ptr, adj, "color_symmetric"))


# -- checks and recovery ----------------------------------------------------------------

def is_column_coloring(pattern: Any, colors: Any) -> bool:
    """Whether no row of ``pattern`` has two nonzero columns of the same colour.

    Example:
        >>> import numpy as np
        >>> is_column_coloring(np.array([[1, 1]]), [0, 0]), is_column_coloring(np.eye(2), [0, 0])
        (False, True)
    """
    m, n, indptr, indices = _csr_parts(pattern)
    colors = np.asarray(colors, dtype=np.int64)
    if colors.shape != (n,) or (n and colors.min() < 0):
        return False
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    k = int(colors.max()) + 1 if n else 1
    keys = rows * k + colors[indices]
    return np.unique(keys).size == keys.size


def star_recovery(pattern: Any, colors: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                       np.ndarray, np.ndarray]:
    """Where to read each nonzero of a symmetric matrix from its compressed products.

    For the symmetric pattern (``pattern | pattern.T``, diagonal included) returns
    ``(indptr, indices, read_row, read_color, ok)``: nonzero ``(i, j)`` is
    ``B[read_row, read_color]`` of ``B = H @ seed``; ``ok`` is False where the colouring
    allows no direct recovery.
    """
    m, n, indptr, indices = _csr_parts(pattern)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    r = np.concatenate([rows, indices, np.arange(n)])
    c = np.concatenate([indices, rows, np.arange(n)])
    key = np.unique(r * n + c)
    r, c = key // n, key % n
    colors = np.asarray(colors, dtype=np.int64)
    k = int(colors.max()) + 1 if n else 1
    counts = np.bincount(r * k + colors[c], minlength=n * k)
    # (i, j) and (j, i) read the same product entry, so the result is exactly symmetric
    lo, hi = np.minimum(r, c), np.maximum(r, c)
    own = counts[lo * k + colors[hi]] == 1   # hi alone in row lo among its colour
    other = counts[hi * k + colors[lo]] == 1  # lo alone in row hi among its colour
    read_row = np.where(own, lo, hi)
    read_color = np.where(own, colors[hi], colors[lo])
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=ptr[1:])
    return ptr, c, read_row, read_color, own | other


def is_star_coloring(pattern: Any, colors: Any) -> bool:
    """Whether ``colors`` allow direct recovery of every nonzero of the symmetric pattern.

    Example:
        >>> import numpy as np
        >>> path = np.eye(4) + np.eye(4, k=1) + np.eye(4, k=-1)
        >>> is_star_coloring(path, [0, 1, 0, 1]), is_star_coloring(path, [0, 1, 2, 0])
        (False, True)
    """
    m, n, _, _ = _csr_parts(pattern)
    colors = np.asarray(colors, dtype=np.int64)
    if m != n or colors.shape != (n,) or (n and colors.min() < 0):
        return False
    return bool(star_recovery(pattern, colors)[4].all())
