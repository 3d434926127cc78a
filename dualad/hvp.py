"""Hessian-vector products: ``ad.hvp(f, x, v)``, forward over reverse.

The gradient of ``f`` is computed in reverse mode on dual numbers that carry the one
direction ``v``; the tangent of that gradient is ``H @ v``. The Hessian itself is never
formed, so the cost is a small multiple of one gradient, whatever the size of ``x``.

Example:
    >>> import numpy as np
    >>> from dualad.hvp import hvp
    >>> f = lambda x: np.sum(x ** 3)
    >>> hvp(f, np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    array([ 6., 12.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core.array_protocol import shape_of
from .core.errors import ShapeError
from .core.tracing import Traced
from .core.trees import tree_flatten
from .forward.transforms import jvp
from .reverse.transforms import grad

__all__ = ["hvp"]


def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The Hessian of the scalar-valued ``f`` at ``x`` applied to ``v``, shaped like ``x``.

    ``x`` and ``v`` are arrays (or numbers) of one shape, or trees of the same structure.
    """
    name = getattr(f, "__name__", "f")
    x_leaves, x_spec = tree_flatten(x)
    v_leaves, v_spec = tree_flatten(v)
    if repr(x_spec) != repr(v_spec) or len(x_leaves) != len(v_leaves):
        raise ShapeError(
            f"hvp({name}): v must have the structure of x; got {len(v_leaves)} leaves for "
            f"{len(x_leaves)}.")
    for a, b in zip(x_leaves, v_leaves):
        if shape_of(a) != shape_of(b):
            raise ShapeError(
                f"hvp({name}): v has shape {shape_of(b)} where x has shape {shape_of(a)}; "
                f"pass a direction shaped like x.")
    v = v if isinstance(v, Traced) or not isinstance(v, (int, float, np.ndarray, np.generic)) \
        else np.asarray(v, dtype=np.float64)
    _, tangent = jvp(grad(f), (x,), (v,))
    return tangent
