"""Registering gradient rules for whole functions: :func:`gradient_rule`.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.extend import gradient_rule, primitive
    >>> def twice(x):
    ...     return 2.0 * x
    >>> twice = primitive(twice)
    >>> @gradient_rule(twice)
    ... def _twice(grad, output, x):
    ...     return (2.0 * grad,)
    >>> float(ad.grad(twice)(1.0))
    2.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plum

from ..core.dispatch import gradient
from ..core.operators import Broadcasted, Method

__all__ = ["gradient_rule"]


def gradient_rule(*funcs: Any, broadcasted: bool = False
                  ) -> Callable[[Callable[..., tuple]], Callable[..., tuple]]:
    """Register ``impl(grad, output, *args, **kwargs)`` as the gradient rule of ``funcs``.

    ``impl`` returns one gradient per positional argument (None where not differentiable).
    It becomes the ``gradient`` method for ``Method[f]`` of each ``f`` in ``funcs``
    (``broadcasted=True``: for ``Broadcasted[f]``, the elementwise calls of a ufunc, in
    place of its table's gradient); a rule a user registers later with ``@ad.gradient.dispatch``
    for the same function wins.
    """
    family: Any = Broadcasted if broadcasted else Method

    def decorate(impl: Callable[..., tuple]) -> Callable[..., tuple]:
        def method(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            return impl(grad, output, *args, **kwargs)

        method.__name__ = method.__qualname__ = f"gradient{impl.__name__}"
        method.__dualad_rule__ = impl  # type: ignore[attr-defined] # (pullbacks call it directly)
        for f in funcs:
            # Any, as plum reads unannotated parameters, so a user's rule takes precedence.
            if broadcasted:  # the table rule's signature, which this one replaces
                signature = plum.Signature(family[f], Any, Any, *([Any] * f.nin))
            else:
                signature = plum.Signature(family[f], Any, Any, varargs=Any)
            gradient.register(method, signature, builtin=True)
        return impl

    return decorate
