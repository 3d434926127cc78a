"""The NaN-safe tangent product as one operation: what forward mode computes on traced
values.

Forward mode multiplies a tangent by a derivative NaN-safely (:mod:`~dualad.derivatives.kinds`):
an entry of the tangent that is exactly zero gives exactly zero, even where the derivative
is infinite or NaN (``sqrt(x * x)`` at 0). On plain numbers that is a branch in Python. On
traced values (``ad.jvp`` inside ``ad.grad``, or inside a function that ``ad.record`` /
``ad.jit`` records) the branch cannot be taken at trace time, so the product is recorded
as the call :func:`tangent_product`: a graph or a tape computes the same numbers as eager
forward mode, its gradient (and its own tangent, registered in
:mod:`dualad.forward_mode.tangent_product`) is the product's, and compiled programs write
its declared scalar form into their loops.

Example:
    >>> import numpy as np
    >>> tangent_product(np.array([0.0, 2.0]), np.array([np.inf, 3.0]))
    array([0., 6.])
    >>> tangent_product(np.array([[1.0, 0.0]]), np.array([[np.inf]]))
    array([[inf,  0.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.tracing import primitive
from .scalar_forms import declare_scalar_form

__all__ = ["tangent_product", "TANGENT_PRODUCT"]


def _tangent_product(p: Any, d: Any) -> Any:
    """``p * d`` (broadcasting), exactly zero where ``p`` is exactly zero."""
    p, d = np.asarray(p), np.asarray(d)
    out = np.zeros(np.broadcast_shapes(p.shape, d.shape), np.result_type(p, d, np.float64))
    np.multiply(p, d, out=out, where=p != 0)
    return out[()] if out.ndim == 0 else out


_tangent_product.__name__ = "tangent_product"
_tangent_product.__qualname__ = "tangent_product"

#: ``tangent_product(p, d)``: on plain values the product; given traced values (graph
#: nodes, dual numbers) it records itself as one elementwise operation.
tangent_product = primitive(_tangent_product, elementwise=True)

#: Its operator (``Broadcasted[tangent_product]``), which its rules are registered for.
TANGENT_PRODUCT = tangent_product.__dualad_operator__  # type: ignore[attr-defined]

# compiled programs (ad.jit) write it into their scalar loops; its partials are the
# product's (compiled forward mode falls back to the NaN-safe replay where they meet a NaN)
declare_scalar_form(tangent_product, ("p", "d"), "where(p != 0, p * d, 0)", ("d", "p"))
