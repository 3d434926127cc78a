"""Sparse Jacobians and Hessians: sparsity detection, colouring, compressed passes.

``jacobian_sparsity(f)(x)`` traces ``f`` with index sets (see :mod:`dualad.sparse.flows`),
``color_columns`` / ``color_symmetric`` colour the pattern (:mod:`dualad.sparse.coloring`),
and ``sparse_jacobian`` / ``sparse_hessian`` evaluate ``f`` once with one direction per
colour and decompress into ``scipy.sparse.csr_array`` (:mod:`dualad.sparse.compressed`).
Importing this package imports neither scipy nor Numba; they load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# The numpy family files import dualad.sparse.flows while dualad itself is still loading,
# so this package loads its other modules on first use.
_HOME = {
    "color_columns": "coloring",
    "color_rows": "coloring",
    "color_symmetric": "coloring",
    "hessian_sparsity": "detection",
    "jacobian_sparsity": "detection",
    "sparse_hessian": "compressed",
    "sparse_jacobian": "compressed",
}

__all__ = [
    "color_columns",
    "color_rows",
    "color_symmetric",
    "hessian_sparsity",
    "jacobian_sparsity",
    "sparse_hessian",
    "sparse_jacobian",
]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
