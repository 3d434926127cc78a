"""Sparse results with a fixed pattern, built without scipy's per-call format checks.

Every sparse Jacobian of one plan has the same ``indices`` and ``indptr``: only ``data``
changes. ``scipy.sparse.csr_array((data, indices, indptr), shape=...)`` checks the whole
format on each call (tens of microseconds, more than a small compressed pass). A
:class:`CsrTemplate` builds one checked matrix for the pattern and makes each result as a
shallow copy of it with new ``data`` (well under a microsecond). Results share the
pattern's index arrays, as scipy's constructor with ``copy=False`` would.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> t = CsrTemplate(sp.csr_array(np.eye(2, dtype=bool)))
    >>> t.with_data(np.array([2.0, 3.0])).toarray()
    array([[2., 0.],
           [0., 3.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CsrTemplate"]

_EXPECTED = {"_shape", "indptr", "indices", "data"}


class CsrTemplate:
    """Matrices with the pattern ``pattern`` (a canonical boolean ``csr_array``)."""

    __slots__ = ("matrix", "fast")

    def __init__(self, pattern: Any) -> None:
        import scipy.sparse as sp

        self.matrix = sp.csr_array(
            (np.zeros(pattern.nnz), pattern.indices, pattern.indptr), shape=pattern.shape)
        state = getattr(self.matrix, "__dict__", {})
        # the shallow copy is used only where this scipy keeps the matrix in these fields
        self.fast = _EXPECTED <= set(state) and \
            self.matrix.has_canonical_format
        self.matrix.has_canonical_format = self.matrix.has_canonical_format  # cached flag

    def with_data(self, data: np.ndarray) -> Any:
        """A ``csr_array`` with this pattern and ``data`` (not copied)."""
        template = self.matrix
        if not self.fast or data.shape != template.data.shape:
            import scipy.sparse as sp

            return sp.csr_array((data, template.indices, template.indptr),
                                shape=template.shape)
        result = object.__new__(type(template))
        result.__dict__.update(template.__dict__)
        result.data = data
        return result
