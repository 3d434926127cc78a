"""Gradient methods of elementwise rules, made from the rules tables (reverse mode).

Every :class:`~dualad.derivatives.registry.ElementwiseRule` (the tables under ``rules/``
and ``ad.define_rule``) becomes a ``gradient`` method for ``Broadcasted[f]`` through the
registry's :func:`~dualad.derivatives.registry.on_rule_registered` hook: for
``y = f(x1, ..., xn)`` the gradient of ``xi`` is ``grad * df/dxi``, summed back to the
shape of ``xi``.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.tanh(x)))(np.array([0.0, 1.0])).round(4)
    array([1.  , 0.42])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import plum

from ..core.array_protocol import shape_of
from ..core.dispatch import gradient
from ..core.unbroadcast import unbroadcast
from ..derivatives.registry import (
    ElementwiseRule,
    derivative_kind,
    on_rule_registered,
    operator_type,
    undefined_derivative_error,
)
from .backward import gradients_needed

__all__ = ["register_rule_gradient"]


def _make_gradient(rule: ElementwiseRule) -> Callable[..., tuple]:
    """The ``gradient`` method of a rule: ``(op, grad, output, *args) -> tuple``."""
    kinds = tuple(derivative_kind(d) for d in rule.expressions)
    derivatives = rule.derivatives
    need = "expr" in kinds
    quiet = rule.may_warn

    if len(kinds) == 1:
        kind = kinds[0]
        if kind == "expr" and quiet:
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                with np.errstate(divide="ignore", invalid="ignore"):
                    (d,) = derivatives(x, output)
                    return (grad * d,)
        elif kind == "expr":
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (grad * derivatives(x, output)[0],)
        elif kind == "one":
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (grad,)
        elif kind == "minus_one":
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (np.negative(grad),)
        else:  # zero
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (np.zeros(shape_of(x)),)
        return unary

    def body(grad: Any, output: Any, args: tuple) -> tuple:
        ds = derivatives(*args, output) if need else ()
        result = []
        needed = gradients_needed()
        for i, (kind, a) in enumerate(zip(kinds, args)):
            if kind == "none" or kind == "refuse":  # "refuse": recording raised already
                if kind == "none" and needed is not None and i < len(needed) and needed[i]:
                    raise undefined_derivative_error(rule, i)
                result.append(None)
            elif kind == "zero":
                result.append(np.zeros(shape_of(a)))
            elif kind == "one":
                result.append(unbroadcast(grad, shape_of(a)))
            elif kind == "minus_one":
                result.append(unbroadcast(np.negative(grad), shape_of(a)))
            else:
                result.append(unbroadcast(grad * ds[i], shape_of(a)))
        return tuple(result)

    if quiet:
        def nary(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            with np.errstate(divide="ignore", invalid="ignore"):
                return body(grad, output, args)
    else:
        def nary(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            return body(grad, output, args)

    return nary


def register_rule_gradient(rule: ElementwiseRule) -> None:
    """Register the ``gradient`` method of one rule (the registry's hook)."""
    n = len(rule.arg_names)
    # Any, as plum reads unannotated parameters: a user's method with the same parameters
    # then replaces this one instead of losing to it.
    signature = plum.Signature(operator_type(rule.function), Any, Any, *([Any] * n))
    method = _make_gradient(rule)
    method.__name__ = method.__qualname__ = f"gradient_{rule.name}"
    method.__doc__ = f"Gradient of {rule.name} from its rule: {rule!r}"
    gradient.register(method, signature, builtin=True)


on_rule_registered(register_rule_gradient)
