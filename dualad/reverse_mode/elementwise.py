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
from ..derivatives.kinds import MaskedDerivatives, cotangent_term, rule_kinds
from ..derivatives.registry import (
    ElementwiseRule,
    on_rule_registered,
    operator_type,
    undefined_derivative_error,
)
from .backward import _NEEDS as _NEEDS_STATE
from .backward import gradients_needed
from .fast_path import cotangent_side, register_table_gradient

__all__ = ["register_rule_gradient"]


def _make_gradient(rule: ElementwiseRule) -> Callable[..., tuple]:
    """The ``gradient`` method of a rule: ``(op, grad, output, *args) -> tuple``."""
    kinds = rule_kinds(rule)
    terms = tuple(cotangent_term(k) for k in kinds)
    derivatives = rule.derivatives
    masked = MaskedDerivatives(rule)
    need = "expr" in kinds
    quiet = rule.may_warn
    n = len(kinds)

    if n == 1:
        kind = kinds[0]
        term = terms[0]
        if kind == "expr" and quiet:
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                with np.errstate(divide="ignore", invalid="ignore"):
                    return (grad * derivatives(x, output)[0],)
        elif kind == "expr":
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (grad * derivatives(x, output)[0],)
        elif term is not None:
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (term(grad, None),)
        else:  # zero
            def unary(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
                return (np.zeros(shape_of(x)),)
        return unary

    if n == 2 and "none" not in kinds and "refuse" not in kinds:
        return _binary_gradient(rule, kinds, terms, masked, quiet)

    everything = (True,) * n

    def body(grad: Any, output: Any, args: tuple) -> tuple:
        needed = gradients_needed()
        mask = everything if needed is None or len(needed) != n else tuple(needed)
        ds = masked.get(mask)(*args, output) if need else None
        result = []
        for i in range(n):
            if not mask[i]:
                result.append(None)
                continue
            term = terms[i]
            a = args[i]
            if term is None:
                kind = kinds[i]
                if kind == "none" or kind == "refuse":  # "refuse": recording raised already
                    if kind == "none" and needed is not None:
                        raise undefined_derivative_error(rule, i)
                    result.append(None)
                else:  # zero
                    result.append(np.zeros(shape_of(a)))
                continue
            r = term(grad, ds[i] if need else None)
            shape = shape_of(a)
            if shape_of(r) != shape:
                r = unbroadcast(r, shape)
            result.append(r)
        return tuple(result)

    if quiet:
        def nary(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            with np.errstate(divide="ignore", invalid="ignore"):
                return body(grad, output, args)
    else:
        def nary(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            return body(grad, output, args)

    return nary


def _binary_gradient(rule: ElementwiseRule, kinds: tuple, terms: tuple,
                     masked: MaskedDerivatives, quiet: bool) -> Callable[..., tuple]:
    """The gradient method of a two-argument rule with a derivative for both arguments,
    specialised to which arguments the reverse pass needs (a constant's is not computed)."""
    side_a, side_b = cotangent_side(kinds[0]), cotangent_side(kinds[1])
    need_a, need_b = kinds[0] == "expr", kinds[1] == "expr"
    both, first, second = masked.get((True, True)), masked.get((True, False)), \
        masked.get((False, True))

    def body(grad: Any, output: Any, a: Any, b: Any) -> tuple:
        needed = getattr(_NEEDS_STATE, "value", None)
        if needed is None or (needed[0] and needed[1]):
            if need_a or need_b:
                da, db = both(a, b, output)
            else:
                da = db = None
            return (side_a(grad, da, a), side_b(grad, db, b))
        if needed[0]:
            return (side_a(grad, first(a, b, output)[0] if need_a else None, a), None)
        if needed[1]:
            return (None, side_b(grad, second(a, b, output)[1] if need_b else None, b))
        return (None, None)

    if quiet:
        def binary(op: Any, grad: Any, output: Any, a: Any, b: Any, **kwargs: Any):
            with np.errstate(divide="ignore", invalid="ignore"):
                return body(grad, output, a, b)
    else:
        def binary(op: Any, grad: Any, output: Any, a: Any, b: Any, **kwargs: Any):
            return body(grad, output, a, b)

    return binary


_F64 = np.float64


def register_rule_gradient(rule: ElementwiseRule) -> None:
    """Register the ``gradient`` method of one rule (the registry's hook)."""
    n = len(rule.arg_names)
    # Any, as plum reads unannotated parameters: a user's method with the same parameters
    # then replaces this one instead of losing to it.
    signature = plum.Signature(operator_type(rule.function), Any, Any, *([Any] * n))
    method = _make_gradient(rule)
    method.__name__ = method.__qualname__ = f"gradient_{rule.name}"
    method.__doc__ = f"Gradient of {rule.name} from its rule: {rule!r}"
    register_table_gradient(signature.types[0], rule, method)
    gradient.register(method, signature, builtin=True)


on_rule_registered(register_rule_gradient)
