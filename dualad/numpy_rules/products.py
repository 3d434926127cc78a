"""Gradient rules for products: matmul (every operand rank), dot, trace.

Example:
    >>> import numpy as np, dualad as ad
    >>> a, b = np.ones((2, 3)), np.ones((3, 4))
    >>> ad.grad(lambda a: np.trace(a @ b[:, :2]))(a)
    array([[1., 1., 0.],
           [1., 1., 0.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch import gradient
from ..errors import MissingRuleError
from ..numpy_bridge import shape_of
from ..operators import Method
from ..unbroadcast import unbroadcast
from ._signatures import bind


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def matmul_gradients(grad: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """Gradients of ``a @ b`` for 1-D, 2-D and batched (broadcast) operands."""
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) == 1 and len(sb) == 1:
        return grad * b, grad * a
    if len(sa) == 1:  # (n) @ (..., n, m) -> (..., m)
        ga = np.matmul(b, np.expand_dims(grad, -1))[..., 0]
        gb = np.expand_dims(a, -1) * np.expand_dims(grad, -2)
        return unbroadcast(ga, sa), unbroadcast(gb, sb)
    if len(sb) == 1:  # (..., n, m) @ (m) -> (..., n)
        ga = np.expand_dims(grad, -1) * b
        gb = np.matmul(_mT(a), np.expand_dims(grad, -1))[..., 0]
        return unbroadcast(ga, sa), unbroadcast(gb, sb)
    return unbroadcast(np.matmul(grad, _mT(b)), sa), unbroadcast(np.matmul(_mT(a), grad), sb)


@gradient.dispatch
def _matmul(op: Method[np.matmul], grad: Any, output: Any, a: Any, b: Any,
            **kwargs: Any) -> tuple:
    return matmul_gradients(grad, a, b)


@gradient.dispatch
def _dot(op: Method[np.dot], grad: Any, output: Any, a: Any, b: Any, *args: Any) -> tuple:
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        ga = grad * b
        gb = grad * a
        return (unbroadcast(ga, sa), unbroadcast(gb, sb)) + (None,) * len(args)
    if len(sb) <= 2:
        return matmul_gradients(grad, a, b) + (None,) * len(args)
    raise MissingRuleError(
        f"dualad: the gradient of np.dot for operand shapes {sa} and {sb} (second operand "
        f"with more than 2 dimensions) is not implemented; use np.tensordot or np.matmul, "
        f"or add a rule with @ad.gradient.dispatch for ad.Method[np.dot]."
    )


@gradient.dispatch
def _trace(op: Method[np.trace], grad: Any, output: Any, x: Any, *args: Any,
           **kwargs: Any) -> tuple:
    p = bind(("a", "offset", "axis1", "axis2"), (x,) + args, kwargs)
    shape = shape_of(x)
    ndim = len(shape)
    offset = int(p.get("offset", 0))
    a1, a2 = int(p.get("axis1", 0)) % ndim, int(p.get("axis2", 1)) % ndim
    eye = np.eye(shape[a1], shape[a2], k=offset)
    mask_shape = [1] * ndim
    mask_shape[a1], mask_shape[a2] = shape[a1], shape[a2]
    if a1 > a2:
        eye = eye.T
    mask = eye.reshape(mask_shape)
    kept = tuple(1 if i in (a1, a2) else n for i, n in enumerate(shape))
    return (np.reshape(grad, kept) * mask,) + (None,) * len(args)
