"""``_where(c, a, b)``: the one compiled select that generated code calls instead of a
branch (:mod:`dualad.tape.scalar_fold` writes it). Imported only by generated modules, so
``import dualad`` does not import Numba.

Example:
    >>> from dualad.tape.scalar_select import where
    >>> where(True, 1.0, 2.0), where(False, 1.0, 2.0)
    (1.0, 2.0)
"""

from __future__ import annotations

import numba

__all__ = ["where"]


@numba.njit(cache=True, error_model="numpy")
def where(c, a, b):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``a if c else b`` as one call (no branch in the caller's body)."""
    return a if c else b
