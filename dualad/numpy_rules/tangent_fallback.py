"""Forward mode for a function that has only a reverse-mode rule: transpose that rule.

A gradient rule computes ``u -> J^T u`` (one gradient per argument) with numpy calls, so
it is itself differentiable in reverse mode. For a call on Duals with no tangent rule,
the tangent ``J dx`` of each direction is the gradient, with respect to ``u``, of
``sum_i <rule(u)_i, dx_i>`` (reverse over reverse, as autograd differentiates its vjps).
This gives ``ad.hessian`` (forward over reverse), ``ad.jvp`` and forward-mode Jacobians
of user primitives that have a ``gradient`` method only; it costs one reverse pass
through the rule per tangent direction, so a ``forward`` method, where one is written,
is faster and wins.

Limits: real arrays with one output (a call returning a tuple, or complex values, still
raises ``MissingRuleError``), and Duals passed by keyword are not differentiated this way.

Example:
    >>> import numpy as np, dualad as ad
    >>> @ad.primitive
    ... def cube(x):
    ...     return x ** 3
    >>> @ad.gradient.dispatch
    ... def _(op: ad.Method[cube], grad, output, x):
    ...     return (3 * grad * x ** 2,)
    >>> ad.hessian(lambda x: np.sum(cube(x)))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    MissingRuleError,
    gradient,
    innermost_tag,
    register_tangent_fallback,
    shape_of,
    vjp,
)
from ._support import split_duals
from .complex_parts import is_complex

__all__: list[str] = []


def _is_real_array(x: Any) -> bool:
    return (isinstance(x, (np.ndarray, np.generic, float, int, Dual))
            and not is_complex(x))


def tangent_from_gradient(op: Any, args: tuple, kwargs: dict) -> Any:
    """The Dual result of ``op(*args, **kwargs)`` from ``op``'s gradient rule, or
    ``NotImplemented`` when this does not apply."""
    if any(isinstance(v, Dual) for v in kwargs.values()):
        return NotImplemented
    tag = innermost_tag(args)
    if tag is None:
        return NotImplemented
    values, partials = split_duals(args, tag)
    chosen = [i for i, p in enumerate(partials) if p is not None]
    if not chosen or any(is_complex(values[i]) or is_complex(partials[i]) for i in chosen):
        return NotImplemented
    output = op(*values, **kwargs)
    if not _is_real_array(output):
        return NotImplemented
    k = shape_of(partials[chosen[0]])[-1]
    cotangent = np.zeros(shape_of(output))
    columns = []
    for j in range(k):
        def pairing(u: Any, j: int = j) -> Any:
            grads = gradient(op, u, output, *values, **kwargs)
            total: Any = 0.0
            for i in chosen:
                g = grads[i] if i < len(grads) else None
                if g is not None:
                    total = total + np.sum(g * partials[i][..., j])
            return total

        try:
            _, pullback = vjp(pairing, cotangent)
            columns.append(pullback(np.float64(1.0))[0])
        except MissingRuleError:
            return NotImplemented
    return Dual._make(output, np.stack(columns, axis=-1), tag)


register_tangent_fallback(tangent_from_gradient)
