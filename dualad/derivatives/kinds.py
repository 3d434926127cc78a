"""The derivative-kind switch, written once: how a rule's derivative acts on a (co)tangent.

A rule's derivative in one argument is one of the kinds of
:func:`~dualad.derivatives.registry.derivative_kind`: ``zero``, ``one``, ``minus_one``,
``expr`` (an expression to evaluate), or ``none`` / ``refuse`` (no derivative). Every mode
specialises a rule to these kinds once, at registration, and calls the functions made here
on its hot paths: :func:`tangent_term` (forward mode: partials, with the direction axis
last) and :func:`cotangent_term` (reverse mode and tapes: a gradient of the output's shape).

Forward mode is NaN-safe, as ForwardDiff.jl's NaN-safe mode: a tangent entry that is exactly
zero contributes exactly zero, even where the derivative is infinite or NaN
(:func:`scale_tangent`). So the derivative of ``sum(sqrt(x))`` at ``x = [0, 1, 4]`` is
``[inf, 0.5, 0.25]`` in both modes: the direction of ``x[1]`` does not pick up
``0 * inf`` from ``x[0]``. On traced values (forward mode inside ``ad.grad`` or inside a
recording) the product is the recorded call
:func:`~dualad.derivatives.tangent_product.tangent_product`, NaN-safe in the same way.

Example:
    >>> import numpy as np
    >>> term = tangent_term("expr")
    >>> term(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([np.inf, 2.0]))
    array([[inf,  0.],
           [ 0.,  2.]])
    >>> cotangent_term("minus_one")(np.array([1.0, 2.0]), None)
    array([-1., -2.])
    >>> tangent_term("zero") is None
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .language import compile_derivatives
from .registry import derivative_kind
from .tangent_product import tangent_product

__all__ = [
    "CONSTANT_KINDS",
    "FRESH_KINDS",
    "rule_kinds",
    "tangent_term",
    "fresh_tangent_term",
    "cotangent_term",
    "scale_tangent",
    "scale_scalar_tangent",
    "row_tangent_term",
    "column",
    "MaskedDerivatives",
]

#: Kinds whose derivative is a constant, with its value (``none``: no derivative).
CONSTANT_KINDS = {"one": 1.0, "minus_one": -1.0, "zero": 0.0, "none": None}

#: Kinds whose term is a new array (``one`` hands back its input, which callers copy when
#: it would become a result on its own: results never alias their operands).
FRESH_KINDS = frozenset(("expr", "minus_one"))

_ND = np.ndarray
_F64 = np.float64
_isfinite = math.isfinite
_ZERO = np.float64(0.0)


def rule_kinds(rule: Any) -> tuple[str, ...]:
    """The kind of each of ``rule``'s derivatives, in argument order.

    Example:
        >>> from dualad.derivatives.registry import get_rule
        >>> rule_kinds(get_rule(np.subtract)), rule_kinds(get_rule(np.sin))
        (('one', 'minus_one'), ('expr',))
    """
    return tuple(derivative_kind(d) for d in rule.expressions)


def column(d: Any) -> Any:
    """A derivative shaped to multiply partials (``S + (1,)``); scalars unchanged."""
    t = type(d)
    if t is _ND:
        return d if d.ndim == 0 else d[..., None]
    if t is float or t is int or t is _F64:
        return d
    shape = np.shape(d)
    return d if not shape else np.reshape(d, shape + (1,))


def _all_finite(d: np.ndarray) -> bool:
    """Whether every entry of a float or complex array is finite, by one dot product (a third
    of ``np.isfinite(d).all()``'s cost on small arrays). Entries beyond 1e154 overflow it:
    the answer is then False (callers take the exact, slower path) and numpy may warn of
    the overflow."""
    if d.dtype.kind == "f":
        return _isfinite(d.dot(d) if d.ndim == 1 else np.vdot(d, d))
    return _isfinite(abs(np.vdot(d, d)))


def scale_tangent(p: Any, d: Any) -> Any:
    """``p * d`` over the trailing direction axis of the partials ``p``, NaN-safe: an entry
    of ``p`` that is exactly zero gives exactly zero, even where ``d`` is ``inf`` or NaN.

    Example:
        >>> scale_tangent(np.array([[0.0, 1.0]]), np.array([np.inf]))
        array([[ 0., inf]])
    """
    td = type(d)
    if td is _F64 or td is float or td is int:
        if _isfinite(d):
            return p * d
        dc = d
    elif td is _ND:
        if d.ndim == 0:
            dc = d
            finite = d.dtype.kind not in "fc" or _isfinite(abs(d[()]))
        else:
            dc = d[..., None]
            finite = d.dtype.kind not in "fc" or _all_finite(d)
        if finite:
            return p * dc
    elif td is complex or td is np.complex128:
        if _isfinite(abs(d)):
            return p * d
        dc = d
    else:  # traced derivatives (nested differentiation): one recorded operation
        return tangent_product(p, column(d))
    if type(p) is not _ND:  # traced partials times an infinite or NaN derivative
        return tangent_product(p, dc)
    out = np.zeros(np.broadcast_shapes(p.shape, np.shape(dc)), np.result_type(p, dc))
    np.multiply(p, dc, out=out, where=p != 0)
    return out


def scale_scalar_tangent(d: Any, t: Any) -> Any:
    """``d * t`` for a scalar derivative ``d`` and a scalar tangent ``t``, NaN-safe: a plain
    zero tangent gives zero; ``d`` None (no derivative) gives zero.

    Example:
        >>> scale_scalar_tangent(np.float64(np.inf), 0.0), scale_scalar_tangent(2.0, 3.0)
        (np.float64(0.0), 6.0)
    """
    if d is None:
        return _ZERO
    tt = type(t)
    if tt is _F64 or tt is float:
        return _ZERO if t == 0.0 else d * t
    return tangent_product(t, d)  # a traced tangent: the product recorded NaN-safe


def _negate(x: Any, d: Any) -> Any:
    return -x


def _identity(x: Any, d: Any) -> Any:
    return x


def _times(x: Any, d: Any) -> Any:
    return x * d


def tangent_term(kind: str) -> Callable[[Any, Any], Any] | None:
    """``term(partials, d)``: what one argument's partials add to the result's, for a
    derivative of ``kind`` (``d`` is its value, read only for ``expr``); ``None`` for kinds
    that add nothing (``zero``, ``none``, ``refuse``: callers refuse the last two)."""
    if kind == "expr":
        return scale_tangent
    if kind == "one":
        return _identity
    if kind == "minus_one":
        return _negate
    return None


def _copy(p: Any, d: Any) -> Any:
    return p.copy() if type(p) is _ND else p * 1.0


def _row_scale(row: list, d: Any) -> list:
    """``row * d`` for the partials of a 0-d Dual held as a list of floats, NaN-safe."""
    if _isfinite(d):
        d = float(d)
        return [x * d for x in row]
    return [x * d if x else 0.0 for x in row]


def _row_negate(row: list, d: Any) -> list:
    return [-x for x in row]


def _row_identity(row: list, d: Any) -> list:
    return row


def row_tangent_term(kind: str) -> Callable[[list, Any], list] | None:
    """As :func:`tangent_term`, for the partials of a 0-d Dual held as a list of Python
    floats (a *row*; rows are never written to, so ``one`` hands its input back).

    Example:
        >>> row_tangent_term("expr")([0.0, 2.0], np.inf), row_tangent_term("minus_one")([1.0], None)
        ([0.0, inf], [-1.0])
    """
    if kind == "expr":
        return _row_scale
    if kind == "one":
        return _row_identity
    if kind == "minus_one":
        return _row_negate
    return None


def _zeros_like_partials(p: Any, d: Any) -> Any:
    return np.zeros(np.shape(p))


def fresh_tangent_term(kind: str) -> Callable[[Any, Any], Any]:
    """As :func:`tangent_term`, for a term that becomes a result on its own: always a new
    array (``one`` copies; kinds without a derivative give zeros shaped like the partials).

    Example:
        >>> p = np.ones((2, 1))
        >>> fresh_tangent_term("one")(p, None) is p, fresh_tangent_term("zero")(p, None).shape
        (False, (2, 1))
    """
    if kind == "one":
        return _copy
    term = tangent_term(kind)
    return _zeros_like_partials if term is None else term


def cotangent_term(kind: str) -> Callable[[Any, Any], Any] | None:
    """``term(grad, d)``: one argument's gradient (before unbroadcasting) for a derivative of
    ``kind``; ``None`` for kinds with no gradient (``zero``: callers give zeros)."""
    if kind == "expr":
        return _times
    if kind == "one":
        return _identity
    if kind == "minus_one":
        return _negate
    return None


def tangent_terms(kinds: Sequence[str]) -> tuple[Callable[[Any, Any], Any] | None, ...]:
    """:func:`tangent_term` of each kind."""
    return tuple(tangent_term(k) for k in kinds)


class MaskedDerivatives:
    """``derivatives(*args, y)`` of a rule compiled per set of arguments that need one
    (``mask``): a derivative nobody needs (a constant's) is not computed; built on first use.

    Example:
        >>> from dualad.derivatives.registry import get_rule
        >>> masked = MaskedDerivatives(get_rule(np.multiply))
        >>> masked.get((True, False))(2.0, 3.0, 6.0)
        (np.float64(3.0), None)
    """

    __slots__ = ("rule", "_by_mask")

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self._by_mask: dict[tuple[bool, ...], Callable[..., tuple]] = {}

    def get(self, mask: tuple[bool, ...]) -> Callable[..., tuple]:
        fn = self._by_mask.get(mask)
        if fn is None:
            rule = self.rule
            if all(mask):
                fn = rule.derivatives
            else:
                exprs = [e if m else None for e, m in zip(rule.expressions, mask)]
                fn = compile_derivatives(rule.arg_names, exprs, name=rule.name,
                                         table=rule.source)
            self._by_mask[mask] = fn
        return fn
