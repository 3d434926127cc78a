"""Routing a call to the innermost differentiation that its arguments belong to.

Every traced object (a graph node of reverse mode, a ``Dual`` of forward mode) carries a
``level``: a number drawn when its differentiation began, so a differentiation started
inside another has the higher level. A call is handled by the innermost (highest-level)
traced argument; objects of outer levels are constants to it, which keeps nested
differentiations apart (no perturbation confusion).

Example:
    >>> from dualad.core.tracing import new_level
    >>> new_level() < new_level()
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .dispatch import forward
from .operators import Broadcasted, Method, Operator

__all__ = [
    "Traced",
    "new_level",
    "innermost",
    "apply_operator",
    "primitive",
    "recording_paused",
    "pause_recording",
]

F = TypeVar("F", bound=Callable[..., Any])

_level_counter = itertools.count(1)
_paused: contextvars.ContextVar[bool] = contextvars.ContextVar("dualad_recording_paused",
                                                               default=False)


def new_level() -> int:
    """A fresh level, higher than every level handed out before (thread-safe)."""
    return next(_level_counter)


def recording_paused() -> bool:
    """Whether recording is paused in the current context."""
    return _paused.get()


@contextlib.contextmanager
def pause_recording() -> Iterator[None]:
    """Within this block, calls on graph nodes compute values but record nothing.

    Example:
        >>> import numpy as np, dualad as ad
        >>> x = ad.Variable(np.ones(2))
        >>> with ad.pause_recording():
        ...     y = np.sin(x)
        >>> isinstance(y, np.ndarray)
        True
    """
    token = _paused.set(True)
    try:
        yield
    finally:
        _paused.reset(token)


class Traced:
    """Base of objects that differentiations pass through user code.

    Subclasses implement ``_apply(op, args, kwargs)``, called with the innermost traced
    object's class when it is the innermost among a call's arguments.
    """

    __slots__ = ()
    level: int

    @classmethod
    def _apply(cls, op: Operator, args: tuple, kwargs: dict, level: int) -> Any:
        raise NotImplementedError


def _scan(obj: Any, best: Traced | None) -> Traced | None:
    if isinstance(obj, Traced):
        if best is None or obj.level > best.level:
            return obj
        return best
    if type(obj) in (list, tuple):
        for item in obj:
            if isinstance(item, Traced) and (best is None or item.level > best.level):
                best = item
    return best


def innermost(args: tuple, kwargs: dict | None = None) -> Traced | None:
    """The traced object of highest level among ``args`` (and one level of lists inside)."""
    best = None
    for a in args:
        best = _scan(a, best)
    if kwargs:
        for a in kwargs.values():
            best = _scan(a, best)
    return best


def apply_operator(op: Operator, args: tuple, kwargs: dict) -> Any:
    """Apply ``op`` to ``args``, recording or propagating tangents for the innermost level."""
    top = None
    for a in args:
        if isinstance(a, Traced):
            if top is None or a.level > top.level:
                top = a
        elif type(a) in (list, tuple):
            top = _scan(a, top)
    if kwargs:
        for a in kwargs.values():
            top = _scan(a, top)
    if top is None:
        return forward(op, *args, **kwargs)
    return type(top)._apply(op, args, kwargs, top.level)


def primitive(f: F, *, elementwise: bool = False) -> F:
    """Make ``f`` record itself as one operation when it receives traced values.

    Its derivative then comes from rules for ``ad.Method[f]`` (or ``ad.Broadcasted[f]``
    with ``elementwise=True``), instead of from tracing through its body.

    Example:
        >>> import numpy as np, dualad as ad
        >>> def softplus(x):
        ...     return np.log1p(np.exp(x))
        >>> softplus = ad.primitive(softplus)
        >>> @ad.gradient.dispatch
        ... def gradient(op: ad.Method[softplus], grad, output, x):
        ...     return (grad / (1.0 + np.exp(-x)),)
        >>> round(float(ad.grad(softplus)(0.0)), 3)
        0.5
    """
    kind = Broadcasted if elementwise else Method

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if innermost(args, kwargs) is None:
            return f(*args, **kwargs)
        return apply_operator(op, args, kwargs)

    op = kind.instance(wrapper)
    wrapper.__dualad_operator__ = op  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
