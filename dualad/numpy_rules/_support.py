"""Helpers shared by the rule families: axes, partials, and rules made of compositions.

A structured numpy function gets two rules: a ``gradient`` method (reverse mode) and a
``forward`` method for Dual arguments (forward mode), both registered through
:mod:`dualad.extend` (``gradient_rule``, ``tangent_rule``), re-exported here for the
family files. :func:`composite_rules` gives both rules to a function written with numpy
calls that have rules of their own.

Example:
    >>> from dualad.numpy_rules._support import normalize_axes
    >>> normalize_axes(-1, 3), normalize_axes(None, 2)
    ((2,), (0, 1))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    MissingRuleError,
    Traced,
    declare_composite,
    gradient_rule,
    innermost_tag,
    shape_of,
    tangent_rule,
    vjp,
)

__all__ = [
    "gradient_rule",
    "tangent_rule",
    "composite_rules",
    "normalize_axes_in_order",
    "is_plain_array",
    "unsupported_tangent",
    "normalize_axis",
    "normalize_axes",
    "ndim_of",
    "kfirst",
    "klast",
    "split_duals",
    "dual_or_value",
    "is_plain",
]

_NoValue = getattr(np, "_NoValue", None)


# -- axes ------------------------------------------------------------------------------


def ndim_of(x: Any) -> int:
    """The number of dimensions of an array, scalar or traced value."""
    return len(shape_of(x))


def normalize_axis(axis: Any, ndim: int, fname: str = "function") -> int:
    """One axis as a non-negative int; a clear error when out of range."""
    a = int(axis)
    if not -ndim <= a < max(ndim, 1):
        raise np.exceptions.AxisError(
            f"{fname}: axis {axis} is out of bounds for an array of dimension {ndim}"
        )
    return a % ndim if ndim else 0


def normalize_axes(axis: Any, ndim: int, fname: str = "function") -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(normalize_axis(a, ndim, fname) for a in axis))


def normalize_axes_in_order(axis: Any, ndim: int, fname: str) -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as non-negative axes, in the order given."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for a in axis:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    return tuple(out)


def is_plain_array(x: Any) -> bool:
    """Whether ``x`` is a plain numpy array (not a number, not traced)."""
    return isinstance(x, np.ndarray)


def unsupported_tangent(fname: str, what: str) -> MissingRuleError:
    """The error for a call form whose forward-mode rule is not written."""
    return MissingRuleError(
        f"dualad: forward mode of np.{fname} with {what} is not supported; rewrite the call "
        f"without it, or add a rule with @ad.forward.dispatch for ad.Method[np.{fname}]."
    )


# -- partials --------------------------------------------------------------------------


def is_plain(x: Any) -> bool:
    """Whether ``x`` is a plain (untraced) numpy array or number."""
    return not isinstance(x, Traced)


def kfirst(p: Any) -> Any:
    """Partials with the direction axis moved to the front: ``(k,) + S``."""
    return np.moveaxis(p, -1, 0)


def klast(p: Any) -> Any:
    """The inverse of :func:`kfirst`: ``(k,) + S`` back to ``S + (k,)``."""
    return np.moveaxis(p, 0, -1)


def split_duals(items: Iterable[Any], tag: Any) -> tuple[list[Any], list[Any]]:
    """Values and partials (``None`` for constants) of ``items`` at ``tag``."""
    values, partials = [], []
    for x in items:
        if isinstance(x, Dual) and x.tag is tag:
            values.append(x.value)
            partials.append(x.partials)
        else:
            values.append(x)
            partials.append(None)
    return values, partials


def dual_or_value(value: Any, partials: Any, tag: Any) -> Any:
    """``Dual(value, partials, tag)``, or ``value`` itself when there is no tag or partials."""
    if tag is None or partials is None:
        return value
    return Dual._make(value, partials, tag)


def add_terms(acc: Any, term: Any) -> Any:
    """``acc + term`` where either may be ``None`` (no contribution)."""
    if term is None:
        return acc
    if acc is None:
        return term
    return acc + term


# -- functions written as compositions of numpy calls -------------------------------------


def composite_rules(func: Any, impl: Callable[..., Any],
                    positions: Callable[[tuple, dict], list[int]],
                    direct_gradient: Callable[..., tuple | None] | None = None) -> None:
    """Rules for ``func`` from ``impl``: the same function written with numpy calls that
    have rules of their own.

    The tangent is ``impl`` applied to the Duals; the gradient is the pullback of ``impl``
    (a reverse pass of its own inside the rule, so higher derivatives work). ``positions
    (args, kwargs)`` lists the positional arguments that are differentiable.
    ``direct_gradient(grad, args, kwargs, chosen)``, when given, may return the gradient
    tuple without that reverse pass (e.g. for plain arrays), or None to take it.
    """
    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        chosen = [i for i in positions(args, kwargs) if i < len(args)]
        if direct_gradient is not None:
            direct = direct_gradient(grad, args, kwargs, chosen)
            if direct is not None:
                return direct

        def partial(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(chosen, xs):
                full[i] = x
            return impl(*full, **kwargs)

        _, pullback = vjp(partial, *[args[i] for i in chosen])
        grads = pullback(grad)
        result: list[Any] = [None] * len(args)
        for i, g in zip(chosen, grads):
            result[i] = g
        return tuple(result)

    def tangent_impl(*args: Any, **kwargs: Any) -> Any:
        if innermost_tag(list(args) + list(kwargs.values())) is None:
            return func(*args, **kwargs)
        return impl(*args, **kwargs)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals="any")(tangent_impl)
    declare_composite(func, impl)  # sparsity detection traces through impl too
