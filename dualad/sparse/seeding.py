"""What the compressed passes share: the pattern as a canonical CSR array, the colouring
with the fewest colours, and the seed matrix (one column per colour and a random check
direction), for the numpy passes (:mod:`~dualad.sparse.compressed`) and the compiled ones of
``numba.njit`` functions (:mod:`~dualad.sparse.njit_compressed`).

Example:
    >>> import numpy as np
    >>> from dualad.sparse.seeding import seed_matrix
    >>> seed_matrix(3, np.array([0, 1, 0]), 2, np.random.default_rng(0))[:, :2]
    array([[1., 0.],
           [0., 1.],
           [1., 0.]])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import ShapeError

__all__ = ["SparsityChangedWarning", "best_colors", "pattern_csr", "seed_matrix"]


class SparsityChangedWarning(UserWarning):
    """The sparsity pattern in use missed nonzeros at a new point; it was detected again."""


def pattern_csr(pattern: Any, shape: tuple[int, int] | None, fname: str) -> Any:
    """A boolean pattern (array or scipy.sparse) as a canonical CSR array of ``shape``."""
    import scipy.sparse as sp

    if sp.issparse(pattern):
        p = sp.csr_array(pattern, dtype=bool, copy=True)
    else:
        arr = np.asarray(pattern)
        if arr.ndim != 2:
            raise ShapeError(
                f"{fname}: sparsity= must be a 2-D boolean array or scipy.sparse matrix, "
                f"got shape {arr.shape}."
            )
        p = sp.csr_array(arr != 0)
    p.eliminate_zeros()
    p.sum_duplicates()
    p.sort_indices()
    if shape is not None and p.shape != shape:
        raise ShapeError(
            f"{fname}: sparsity= has shape {p.shape} but the Jacobian has shape {shape} "
            f"(outputs x inputs); pass a pattern of shape {shape}, e.g. "
            f"ad.jacobian_sparsity(f)(x)."
        )
    return p


def best_colors(color: Callable[..., np.ndarray], pattern: Any) -> np.ndarray:
    """The greedy colouring with the fewest colours over the vertex orders."""
    best = color(pattern, order="largest_first")
    c = color(pattern, order="smallest_last")
    return c if c.size and c.max() < best.max() else best


def seed_matrix(n: int, colors: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``(n, k + 1)``: one column per colour, and a random check direction last."""
    seed = np.zeros((n, k + 1))
    seed[np.arange(n), colors] = 1.0
    seed[:, k] = rng.uniform(0.5, 1.5, n)
    return seed
