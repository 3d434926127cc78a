"""``_zero_matrix(rows, cols)``: the matrix of zeros that generated code allocates (the
tangent rows it accumulates into, a dense Jacobian written at fixed entries). One compiled
function cached on disk: a 2-D ``np.zeros`` in each generated module compiles Numba's
implementation once per process (about 0.15 s measured, Numba 0.68). Imported only by
generated modules, so ``import dualad`` does not import Numba.

Example:
    >>> from dualad.tape.zero_matrix import zero_matrix
    >>> zero_matrix(2, 3).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["zero_matrix"]


@numba.njit(cache=True, error_model="numpy")
def zero_matrix(rows, cols):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """A ``rows`` by ``cols`` float64 matrix of zeros."""
    out = np.empty((rows, cols))
    for i in range(rows):
        for k in range(cols):
            out[i, k] = 0.0
    return out
