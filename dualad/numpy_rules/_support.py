"""Helpers shared by the rule families: registration, axes, partials and gathers.

A structured numpy function gets two rules: a ``gradient`` method (reverse mode) and a
``forward`` method for Dual arguments (forward mode). :func:`gradient_rule` and
:func:`tangent_rule` register one implementation for several numpy functions at once
(``np.max`` and ``np.amax``, ``np.cross`` and ``np.linalg.cross``, ...).

Functions that only move, repeat or drop entries (tile, repeat, flip, pad, sort, take, ...)
share one pair of rules through an *index map*: the function applied to
``arange(x.size).reshape(x.shape)`` says which input entry each output entry is (``-1``
for an entry that is a constant, such as padding). Its gradient adds ``grad`` into those
entries (repeats accumulate); its tangent gathers the partials.

Example:
    >>> import numpy as np
    >>> from dualad.numpy_rules._support import index_map
    >>> index_map(np.tile, (2,), 2)
    array([0, 1, 0, 1])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import plum

from ..dispatch import gradient
from ..dual import (
    Dual,
    register_fast_function,
    register_fast_ufunc,
    register_forward,
)
from ..numpy_bridge import shape_of
from ..operators import Method
from ..sparse.flows import declare_composite
from ..tracing import Traced

__all__ = [
    "gradient_rule",
    "tangent_rule",
    "normalize_axis",
    "normalize_axes",
    "ndim_of",
    "kfirst",
    "klast",
    "split_duals",
    "dual_or_value",
    "index_map",
    "gather_gradient",
    "gather_tangent",
    "is_plain",
]

_NoValue = getattr(np, "_NoValue", None)


def gradient_rule(*funcs: Any) -> Callable[[Callable[..., tuple]], Callable[..., tuple]]:
    """Register ``impl(grad, output, *args, **kwargs)`` as the gradient rule of ``funcs``.

    ``impl`` returns one gradient per positional argument (None where not differentiable).
    """

    def decorate(impl: Callable[..., tuple]) -> Callable[..., tuple]:
        def method(op: Any, grad: Any, output: Any, *args: Any, **kwargs: Any):
            return impl(grad, output, *args, **kwargs)

        method.__name__ = method.__qualname__ = f"gradient{impl.__name__}"
        for f in funcs:
            # Any, as plum reads unannotated parameters, so a user's rule takes precedence.
            gradient.register(method, plum.Signature(Method[f], Any, Any, varargs=Any))
        return impl

    return decorate


def _subsets(positions: tuple[int, ...]) -> list[tuple[type, ...]]:
    n = max(positions) + 1
    out = []
    for bits in range(1, 2 ** len(positions)):
        chosen = {p for i, p in enumerate(positions) if bits >> i & 1}
        out.append(tuple(Dual if i in chosen else object for i in range(n)))
    return out


def tangent_rule(*funcs: Any, duals: tuple[int, ...] | str = (0,),
                 ufunc: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(*args, **kwargs)`` as the tangent (forward-mode) rule of ``funcs``.

    ``duals`` lists the positional arguments that may be Duals (every combination is
    registered), or is ``"any"``: then ``impl`` receives every call of the function,
    including calls without Duals (lists of arrays, Duals passed by keyword), and must
    compute the plain result itself when it finds no Dual.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        def method(op: Any, *args: Any, **kwargs: Any):  # no return annotation (plum)
            return impl(*args, **kwargs)

        def fast(args: tuple, kwargs: dict) -> Any:
            return impl(*args, **kwargs)

        method.__name__ = method.__qualname__ = f"forward{impl.__name__}"
        for f in funcs:
            op_type = Method[f]
            if duals == "any":
                forward_signature = plum.Signature(op_type, varargs=object)
                from ..dispatch import forward

                forward.register(method, forward_signature)
            else:
                for types in _subsets(tuple(duals)):  # type: ignore[arg-type]
                    register_forward(op_type, types, method, varargs=object)
            if ufunc:
                register_fast_ufunc(f, fast)
            else:
                register_fast_function(f, fast)
        return impl

    return decorate


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


# -- functions that move, repeat or drop entries -----------------------------------------


def index_map(func: Callable[..., Any], shape: tuple[int, ...], *args: Any,
              **kwargs: Any) -> np.ndarray:
    """``func`` applied to the flat positions of an array of ``shape``.

    Each output entry is the flat index of the input entry it copies.
    """
    size = int(np.prod(shape, dtype=np.int64))
    return np.asarray(func(np.arange(size, dtype=np.intp).reshape(shape), *args, **kwargs))


def gather_gradient(grad: Any, index: np.ndarray, shape: tuple[int, ...],
                    permutation: bool = False) -> Any:
    """The gradient of ``out = x.flat[index]`` (``-1`` entries are constants) w.r.t. ``x``.

    ``permutation``: ``index`` uses every entry exactly once (sort), so the gradient is a
    gather with the inverse permutation instead of a scatter-add.
    """
    from .indexing import index_add

    size = int(np.prod(shape, dtype=np.int64))
    index = np.asarray(index)
    if index.size == 0 or size == 0:
        return np.zeros(shape)
    if permutation:
        inverse = np.empty(size, dtype=np.intp)
        inverse[index.reshape(-1)] = np.arange(size, dtype=np.intp)
        return np.reshape(np.reshape(grad, (-1,))[inverse], shape)
    valid = index >= 0
    if valid.all():
        flat = index_add(np.reshape(grad, (-1,)), index.reshape(-1), (size,))
    else:
        flat = index_add(grad[valid], index[valid], (size,))
    return np.reshape(flat, shape)


def gather_tangent(p: Any, index: np.ndarray) -> Any:
    """Partials of ``out = x.flat[index]`` from the partials ``p`` of ``x``."""
    index = np.asarray(index)
    k = shape_of(p)[-1]
    size = int(np.prod(shape_of(p)[:-1], dtype=np.int64))
    if index.size == 0 or size == 0:
        return np.zeros(index.shape + (k,))
    flat = np.reshape(p, (size, k))
    valid = index >= 0
    if valid.all():
        return flat[index]
    out = flat[np.where(valid, index, 0)]
    return out * valid[..., None]


# -- functions written as compositions of numpy calls -------------------------------------


def composite_rules(func: Any, impl: Callable[..., Any],
                    positions: Callable[[tuple, dict], list[int]]) -> None:
    """Rules for ``func`` from ``impl``: the same function written with numpy calls that
    have rules of their own.

    The tangent is ``impl`` applied to the Duals; the gradient is the pullback of ``impl``
    (a reverse pass of its own inside the rule, so higher derivatives work). ``positions
    (args, kwargs)`` lists the positional arguments that are differentiable.
    """
    from ..forward_transforms import jvp as _jvp  # noqa: F401  (forward mode is loaded)
    from ..transforms import vjp

    declare_composite(func, impl)  # sparsity detection traces through impl too

    def grad_impl(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
        chosen = [i for i in positions(args, kwargs) if i < len(args)]

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
        from ..dual import innermost_tag

        if innermost_tag(list(args) + list(kwargs.values())) is None:
            return func(*args, **kwargs)
        return impl(*args, **kwargs)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals="any")(tangent_impl)
