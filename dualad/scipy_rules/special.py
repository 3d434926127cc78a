"""``scipy.special`` for traced values: ``logsumexp`` (``axis``, ``b``, ``keepdims``,
``return_sign``), ``softmax``, ``log_softmax``, ``softplus``, ``multigammaln``,
``polygamma``, and every elementwise function of the rules table.

The non-ufunc functions here are primitives of scipy's own functions (plain calls are
scipy's), with rules from numpy compositions (:func:`composite_rules`: the tangent runs the
composition on Duals, the gradient is its pullback), so both modes and higher orders work.
Any other attribute is looked up in ``scipy.special``: ufuncs are differentiable wherever
the table has them (``special.gammaln(x)`` is ``scipy.special.gammaln(x)``), and a function
without a rule raises :class:`~dualad.MissingRuleError` naming ``scipy.special.<name>``.

Conventions: ``logsumexp(..., return_sign=True)`` gives the sign a zero derivative; without
``return_sign`` a negative sum gives nan, as scipy does; entries equal to ``-inf`` get a
zero gradient.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules import special
    >>> ad.grad(lambda a: special.logsumexp(a, b=np.array([1.0, 3.0])))(np.zeros(2))
    array([0.25, 0.75])
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.special as _sp

from ..extend import (
    MissingRuleError,
    define_table_rules,
    get_rule,
    innermost,
    primitive,
    shape_of,
    traced_function,
)
from ..numpy_rules._support import composite_rules, ndim_of, normalize_axes
from ._dropin import constant

__all__ = ["logsumexp", "softmax", "log_softmax", "softplus", "multigammaln", "polygamma"]

define_table_rules(scipy=True)


def _reduced_max(a: Any, axes: tuple[int, ...]) -> Any:
    """A constant shift for a stable exponential sum: the finite maximum over ``axes``."""
    v = np.asarray(np.real(constant(a)))
    if v.size == 0:
        return np.zeros(tuple(1 if i in axes else n for i, n in enumerate(v.shape)))
    m = np.max(v, axis=axes, keepdims=True)
    return np.where(np.isfinite(m), m, 0.0)


def _logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
               return_sign: bool = False) -> Any:
    if b is not None:
        a, b = _broadcast(a, b)
    axes = normalize_axes(axis, ndim_of(a), "scipy.special.logsumexp")
    m = _reduced_max(a, axes)
    e = np.exp(a - m)
    if b is not None:
        e = b * e
    s = np.sum(e, axis=axes, keepdims=True)
    if return_sign:
        sign = np.sign(s)
        out = np.log(np.abs(s)) + m
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.log(s) + m
    if not keepdims:
        out = np.squeeze(out, axis=axes)
        if return_sign:
            sign = np.squeeze(sign, axis=axes)
    elif ndim_of(a) == 0:  # scipy keeps one dimension for a 0-d input
        out = np.reshape(out, (1,))
        if return_sign:
            sign = np.reshape(sign, (1,))
    return (out, sign) if return_sign else out


def _broadcast(a: Any, b: Any) -> tuple[Any, Any]:
    shape = np.broadcast_shapes(shape_of(a), shape_of(b))
    return np.broadcast_to(a, shape), np.broadcast_to(b, shape)


def _softmax(x: Any, axis: Any = None) -> Any:
    axes = normalize_axes(axis, ndim_of(x), "scipy.special.softmax")
    e = np.exp(x - _reduced_max(x, axes))
    return e / np.sum(e, axis=axes, keepdims=True)


def _log_softmax(x: Any, axis: Any = None) -> Any:
    axes = normalize_axes(axis, ndim_of(x), "scipy.special.log_softmax")
    shifted = x - _reduced_max(x, axes)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))


def _softplus(x: Any, **kwargs: Any) -> Any:
    return np.logaddexp(0.0, x)


def _multigammaln(a: Any, d: Any) -> Any:
    d = int(d)
    if np.any(np.asarray(constant(a)) <= 0.5 * (d - 1)):
        raise ValueError(f"scipy.special.multigammaln: condition a > (d-1)/2 = {0.5 * (d - 1)} "
                         f"not met")
    offsets = (1.0 - np.arange(1, d + 1)) / 2.0
    terms = _sp.gammaln(np.expand_dims(a, -1) + offsets)
    return d * (d - 1) / 4.0 * np.log(np.pi) + np.sum(terms, axis=-1)


def _given(*positions: int) -> Any:
    def chosen(args: tuple, kwargs: dict) -> list[int]:
        return [i for i in positions if i < len(args) and args[i] is not None]

    return chosen


_logsumexp_op = primitive(_sp.logsumexp)
_softmax_op = primitive(_sp.softmax)
_log_softmax_op = primitive(_sp.log_softmax)
_multigammaln_op = primitive(_sp.multigammaln)
_softplus_op = primitive(getattr(_sp, "softplus", _softplus))  # scipy >= 1.15 has softplus
composite_rules(_logsumexp_op, _logsumexp, _given(0, 2))
composite_rules(_softmax_op, _softmax, _given(0))
composite_rules(_log_softmax_op, _log_softmax, _given(0))
composite_rules(_multigammaln_op, _multigammaln, _given(0))
composite_rules(_softplus_op, _softplus, _given(0))

# The public functions pass every argument positionally: a rule gives one gradient per
# positional argument, so a traced ``b=`` must not stay a keyword.


@functools.wraps(_sp.logsumexp)
def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    return _logsumexp_op(a, axis, b, keepdims, return_sign)


@functools.wraps(_sp.softmax)
def softmax(x: Any, axis: Any = None) -> Any:
    return _softmax_op(x, axis)


@functools.wraps(_sp.log_softmax)
def log_softmax(x: Any, axis: Any = None) -> Any:
    return _log_softmax_op(x, axis)


@functools.wraps(_sp.multigammaln)
def multigammaln(a: Any, d: Any) -> Any:
    return _multigammaln_op(a, d)


def softplus(x: Any, **kwargs: Any) -> Any:
    """``log(1 + exp(x))``, computed stably (scipy.special.softplus)."""
    return _softplus_op(x, **kwargs)


#: The table's traced wrapper (scipy's polygamma is a Python function, not a ufunc).
polygamma = traced_function(_sp.polygamma)


def __getattr__(name: str) -> Any:
    """Everything else in scipy.special: table functions are differentiable as they are."""
    f = getattr(_sp, name)
    if callable(f) and get_rule(f) is not None:
        return traced_function(f)
    if callable(f) and not isinstance(f, np.ufunc) and not isinstance(f, type):
        return _missing(f, name)
    return f


def _missing(f: Any, name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        if innermost(args, kwargs) is None:
            return f(*args, **kwargs)
        raise MissingRuleError(
            f"dualad has no rule for scipy.special.{name}: it is a Python function, so "
            f"traced values cannot reach scipy's code. Write it with numpy calls and "
            f"differentiable scipy.special ufuncs, or make it a primitive with "
            f"ad.primitive and add its rules (ad.gradient.dispatch / ad.forward.dispatch)."
        )

    refuse.__name__ = name
    refuse.__doc__ = getattr(f, "__doc__", None)
    return refuse


def __dir__() -> list[str]:
    """This module's functions, and the names of scipy.special it forwards (see
    :func:`__getattr__`), nothing else."""
    return sorted(set(__all__) | {n for n in dir(_sp) if not n.startswith("_")})
