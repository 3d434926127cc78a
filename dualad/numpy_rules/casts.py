"""Rules for dtype casts: ``np.astype(x, dtype)`` (which ``x.astype(dtype)`` calls on
traced values).

A cast to a float or complex dtype gives numpy's values bit for bit (the value is
``x.astype(dtype)`` itself) and keeps the derivative: the tangent is cast like the value,
the gradient is cast back to the input's dtype (the real part for a real input). A cast
to an integer or boolean dtype is a constant (its derivative is zero almost everywhere).

Example:
    >>> import numpy as np, dualad as ad
    >>> x = np.array([0.1, 0.7])
    >>> y, t = ad.jvp(lambda x: x.astype(np.float32) * 3.0, (x,), (np.ones(2),))
    >>> y.dtype, bool(np.all(y == x.astype(np.float32) * 3.0)), t
    (dtype('float32'), True, array([3., 3.], dtype=float32))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import Dual, declare_elementwise, tangent_parts
from ._support import gradient_rule, tangent_rule

__all__: list[str] = []


def _back(grad: Any, x: Any) -> Any:
    """A gradient in the dtype of ``x`` (real part for a real ``x``)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = np.result_type(x, np.float64)
    if dtype.kind != "c" and np.iscomplexobj(grad):
        grad = np.real(grad)
    if dtype.kind in "fc" and getattr(grad, "dtype", None) != dtype:
        return np.astype(grad, dtype)
    return grad


@gradient_rule(np.astype)
def _astype(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    return (_back(grad, x),) + (None,) * len(args)


@tangent_rule(np.astype)
def _astype_tangent(x: Any, dtype: Any, /, *args: Any, **kwargs: Any) -> Any:
    tag, [(v, p)] = tangent_parts((x,))
    value = np.astype(v, dtype, *args, **kwargs)
    if value.dtype.kind not in "fc":
        return value
    if value.dtype.kind != "c" and np.iscomplexobj(p):
        p = np.real(p)
    return Dual._make(value, np.astype(p, value.dtype), tag)


declare_elementwise(np.astype)
