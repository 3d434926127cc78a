"""Tangent rules of elementwise functions, made from the rules tables.

Every :class:`~dualad.derivatives.registry.ElementwiseRule` (the tables under ``rules/`` and
``ad.define_rule``) becomes ``forward`` methods for Dual arguments, through the
registry's :func:`~dualad.derivatives.registry.on_rule_registered` hook. For
``y = f(x1, ..., xn)`` the output partials are ``sum_i df/dxi * xi.partials``, with the
derivatives from the rule's compiled expressions. Large plain float64 operands use the
rule's fused Numba kernel (see :mod:`dualad.forward_mode.kernels`); everything else (small arrays,
one direction, nested Duals whose values are traced) uses numpy calls only, so higher
derivatives work.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Dual(np.array([0.0, 1.0]), np.ones((2, 1)))
    >>> np.tanh(x).partials.ravel().round(4)
    array([1.  , 0.42])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.array_protocol import shape_of
from ..core.errors import MissingRuleError
from ..core.operators import Broadcasted
from ..derivatives.kinds import (
    CONSTANT_KINDS,
    FRESH_KINDS,
    rule_kinds,
    tangent_term,
)
from ..derivatives.registry import (
    get_rule,
    not_differentiable_message,
    on_rule_registered,
    operator_type,
    undefined_derivative_error,
)
from . import kernels as dual_kernels
from .dual import (
    Dual,
    dual_signatures,
    innermost_tag,
    partials_at,
    register_fast_ufunc,
    register_forward,
    register_lean_ufunc,
    register_scalar_ufunc,
    tangent_parts,
    value_at,
)
from .lean import lean_binary, lean_unary
from .rows import row_binary, row_unary

__all__ = ["elementwise_tangent", "table_tangent", "register_rule_forward", "define_value_rule"]


def _fresh(p: Any) -> Any:
    """A copy of partials passed through unchanged (results never alias their inputs)."""
    if type(p) is np.ndarray:
        return p.copy()
    return p * 1.0


def elementwise_tangent(rule: Any) -> Callable[[tuple, dict], Any]:
    """``impl(args, kwargs)``: the Dual result of ``rule.function(*args, **kwargs)``."""
    f = rule.function
    derivatives = rule.derivatives
    kinds = rule_kinds(rule)
    terms = tuple(tangent_term(k) for k in kinds)
    refused = tuple(k == "refuse" for k in kinds)
    need = "expr" in kinds
    quiet = rule.may_warn
    name = rule.name
    kernels = dual_kernels.register(rule)

    # the lean path of a unary rule with a derivative (the other kinds refuse or raise)
    lean = lean_unary(rule, kernels) if len(kinds) == 1 and kinds[0] in CONSTANT_KINDS \
        and kinds[0] != "none" or kinds == ("expr",) else None

    def partials_of(parts: list, values: list, y: Any) -> Any:
        ds: Any = derivatives(*values, y) if need else None
        acc: Any = None
        fresh = False
        k = 0
        for i, (_v, p) in enumerate(parts):
            if p is None:
                continue
            k = shape_of(p)[-1]
            term = terms[i]
            if term is None:
                if refused[i]:
                    raise MissingRuleError(not_differentiable_message(rule, i))
                continue
            d = ds[i] if need else None
            if d is None and kinds[i] == "expr":
                continue
            t = term(p, d)
            if acc is None:
                acc = t
                fresh = kinds[i] in FRESH_KINDS
            else:
                acc = acc + t
                fresh = True
        target = shape_of(y) + (k,)
        if acc is None:
            return np.zeros(target)
        if shape_of(acc) != target:
            if type(acc) is np.ndarray:
                return np.broadcast_to(acc, target).copy()
            return acc + np.zeros(target)
        return acc if fresh else _fresh(acc)

    def impl(args: tuple, kwargs: dict) -> Any:
        if lean is not None and not kwargs and type(args[0]) is Dual:
            out = lean(args[0])  # one Dual with plain value and partials: the common case
            if out is not None:
                return out
        tag, parts = tangent_parts(args)
        if tag is None:
            return f(*args, **kwargs)
        if kwargs:
            if kwargs.get("where", True) is not True:
                raise MissingRuleError(
                    f"dualad: forward mode of {name}(..., where=...) is not supported; "
                    f"compute both branches and select with np.where(cond, a, b)."
                )
        else:
            out = kernels.try_fused(parts, tag)
            if out is not None:
                return out
        values = [v for v, _ in parts]
        if quiet:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = f(*values, **kwargs)
                return Dual._make(y, partials_of(parts, values, y), tag)
        y = f(*values, **kwargs)
        return Dual._make(y, partials_of(parts, values, y), tag)

    impl.__name__ = f"tangent_{name}"
    impl.__doc__ = f"Tangent rule of {name}, from {rule!r}."
    return impl


def table_tangent(f: Any) -> Callable[..., Any]:
    """``tangent(*args, **kwargs)``: the tangent rule that ``f``'s table entry gives, for a
    rule that handles some calls itself and leaves the others to the table's
    (``tangent_rule(f, broadcasted=True)``).

    Example:
        >>> import numpy as np
        >>> from dualad.extend import Dual
        >>> table_tangent(np.sin)(Dual(0.0, np.ones(1))).partials
        array([1.])
    """
    rule = get_rule(f)
    if rule is None:
        raise ValueError(
            f"table_tangent: {getattr(f, '__name__', f)!r} has no entry in the rules tables; "
            f"define one with define_rule(f, args=..., derivatives=...) first."
        )
    impl = elementwise_tangent(rule)

    def tangent(*args: Any, **kwargs: Any) -> Any:
        return impl(args, kwargs)

    tangent.__name__ = impl.__name__
    tangent.__doc__ = impl.__doc__
    return tangent


def _scalar_derivatives(rule: Any) -> Callable[..., tuple]:
    derivatives = rule.derivatives
    kinds = rule_kinds(rule)
    if all(k in CONSTANT_KINDS for k in kinds):  # no expression to evaluate (add, ...)
        constants = tuple(CONSTANT_KINDS[k] for k in kinds)

        def constant(*args: Any) -> tuple:
            return constants

        return constant
    if not rule.may_warn:
        return derivatives
    calm = rule.quiet_when  # arguments on which nothing can warn: no np.errstate

    def quiet(*args: Any) -> tuple:
        if calm is not None and calm(*args[:-1]):  # (args: the arguments, then the value)
            return derivatives(*args)
        with np.errstate(divide="ignore", invalid="ignore"):
            return derivatives(*args)

    return quiet


def _scalar_value(rule: Any) -> Callable[..., Any] | None:
    """The scalar path's evaluation of ``rule``'s function: its Python operator (``+``,
    ``-``, ``*``), or where the table's ``quiet_when`` holds its quiet one (``/``) and the
    ufunc elsewhere, else None (the ufunc)."""
    exact, calm, f = rule.quiet_value, rule.quiet_when, rule.function
    if exact is None or calm is None:
        return rule.scalar_value

    def value(a: Any, b: Any) -> Any:
        return exact(a, b) if calm(a, b) else f(a, b)

    return value


def register_rule_forward(rule: Any) -> None:
    """Register the tangent rule of one ``ElementwiseRule`` (the generator's hook)."""
    impl = elementwise_tangent(rule)
    kinds = rule_kinds(rule)
    undefined = [i for i, kind in enumerate(kinds) if kind == "none"]
    if undefined:
        impl = _refusing_undefined(rule, impl, undefined)

    def method(op, *args, **kwargs):  # plum: no annotations here
        return impl(args, kwargs)

    method.__name__ = method.__qualname__ = f"forward_{rule.name}"
    method.__doc__ = impl.__doc__
    op_type = operator_type(rule.function)
    for types in dual_signatures(len(rule.arg_names)):
        register_forward(op_type, types, method)
    if isinstance(rule.function, np.ufunc):
        register_fast_ufunc(rule.function, impl)
        if not undefined and "refuse" not in kinds:
            nin = len(rule.arg_names)
            row: Callable[..., Any] | None = None
            if rule.function.nin == nin == 1:
                row = row_unary(rule)
            elif rule.function.nin == nin == 2:
                row = row_binary(rule)
            register_scalar_ufunc(rule.function, _scalar_derivatives(rule),
                                  value=_scalar_value(rule), row=row)
            if nin in (1, 2) and rule.function.nin == nin:
                rk = dual_kernels.kernels_for(rule.function)
                register_lean_ufunc(rule.function,
                                    (lean_unary if nin == 1 else lean_binary)(rule, rk))



def _refusing_undefined(rule: Any, impl: Callable[[tuple, dict], Any],
                        undefined: list[int]) -> Callable[[tuple, dict], Any]:
    """``impl`` that raises when an argument whose derivative is ``None`` carries a tangent
    (differentiating with respect to it would otherwise give a silent zero)."""

    def checked(args: tuple, kwargs: dict) -> Any:
        tag = innermost_tag(args)
        for i in undefined:
            if i < len(args) and tag is not None and partials_at(args[i], tag) is not None:
                raise undefined_derivative_error(rule, i)
        return impl(args, kwargs)

    checked.__name__ = impl.__name__
    checked.__doc__ = impl.__doc__
    return checked


def define_value_rule(ufunc: Any) -> None:
    """Forward mode of a ufunc whose result has no derivative (a comparison, a predicate):
    it acts on the values of the innermost Duals."""

    def impl(args: tuple, kwargs: dict) -> Any:
        tag = innermost_tag(args)
        return ufunc(*[value_at(a, tag) for a in args], **kwargs)

    def method(op, *args, **kwargs):  # plum: no annotations here
        return impl(args, kwargs)

    impl.__name__ = f"values_of_{ufunc.__name__}"
    method.__name__ = method.__qualname__ = f"forward_{ufunc.__name__}"
    op_type: Any = Broadcasted[ufunc]  # type: ignore[misc]  # __class_getitem__
    for types in dual_signatures(ufunc.nin):
        register_forward(op_type, types, method)
    register_fast_ufunc(ufunc, impl)


on_rule_registered(register_rule_forward)
