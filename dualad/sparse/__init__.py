"""Sparse Jacobians and Hessians: sparsity detection, colouring, compressed passes.

``jacobian_sparsity(f)(x)`` traces ``f`` with index sets (see :mod:`dualad.sparsity`),
``color_columns`` / ``color_symmetric`` colour the pattern (:mod:`dualad.sparse.coloring`),
and ``sparse_jacobian`` / ``sparse_hessian`` evaluate ``f`` once with one direction per
colour and decompress into ``scipy.sparse.csr_array`` (:mod:`dualad.sparse.compressed`).
``color_bidirectional`` splits the nonzeros between a forward pass and pullbacks
(:mod:`dualad.sparse.bicoloring`, ``mode="bidirectional"``); an ``@njit`` function gets
compiled compressed passes (:mod:`dualad.sparse.njit_compressed`).
Importing this package imports neither scipy nor Numba; they load on first use.
"""

from __future__ import annotations

from ..sparsity.detection import hessian_sparsity, jacobian_sparsity
from .bicoloring import color_bidirectional
from .coloring import color_columns, color_rows, color_symmetric
from .compressed import sparse_hessian, sparse_jacobian

__all__ = [
    "color_bidirectional",
    "color_columns",
    "color_rows",
    "color_symmetric",
    "hessian_sparsity",
    "jacobian_sparsity",
    "sparse_hessian",
    "sparse_jacobian",
]


def __dir__() -> list[str]:
    """This module's face: its transforms and colourings."""
    return sorted(__all__)
