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
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .dispatch import forward
from .operators import Broadcasted, Method, Operator

__all__ = [
    "Traced",
    "new_level",
    "innermost",
    "apply_operator",
    "as_numpy_argument",
    "is_foreign_array",
    "lift_objects",
    "normalize_arguments",
    "primitive",
    "recording_paused",
    "pause_recording",
]

F = TypeVar("F", bound=Callable[..., Any])

_level_counter = itertools.count(1)
_paused: contextvars.ContextVar[bool] = contextvars.ContextVar("dualad_recording_paused",
                                                               default=False)
#: The context variable behind :func:`recording_paused` (``PAUSED.get()``: hot paths).
PAUSED = _paused


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

    if TYPE_CHECKING:  # what every subclass (Dual, graph nodes, index sets) provides
        def _primal(self) -> Any:
            """The value one level down: a plain array, or a traced value of an outer level."""

        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def size(self) -> int: ...

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


# Types that are never foreign arrays (checked first, on the hot path).
_PLAIN_TYPES = frozenset((float, int, bool, complex, str, type(None), slice, type(Ellipsis),
                          np.ndarray, np.float64, np.float32, np.int64, np.bool_, np.dtype,
                          list, tuple, dict))
_FOREIGN: dict[type, bool] = {}


def is_foreign_array(x: Any) -> bool:
    """Whether ``x`` is an array type of another library that wraps numpy data
    (``xarray.DataArray``, ``pandas.Series``, ...): not a numpy array or scalar, not traced,
    but convertible with ``np.asarray``.

    Example:
        >>> import numpy as np
        >>> is_foreign_array(np.ones(2)), is_foreign_array(2.0)
        (False, False)
    """
    t = type(x)
    if t in _PLAIN_TYPES:
        return False
    known = _FOREIGN.get(t)
    if known is None:
        known = not issubclass(t, (np.ndarray, np.generic, Traced)) and any(
            hasattr(t, name) for name in ("__array__", "__array_ufunc__",
                                          "__array_function__", "__array_priority__"))
        _FOREIGN[t] = known
    return known


def _is_object_array(x: Any) -> bool:
    return type(x) is np.ndarray and x.dtype.hasobject


def lift_objects(x: Any) -> Any:
    """An object array holding traced values (``np.array([a, b])``) as one traced array.

    Anything else (object arrays without traced items included) is returned unchanged.
    """
    if not _is_object_array(x):
        return x
    items = [lift_objects(item) for item in x.reshape(-1)]
    if not any(isinstance(item, Traced) for item in items):
        return x
    if x.ndim == 0:
        return items[0]
    return np.reshape(np.stack(items), x.shape + tuple(np.shape(items[0])))


def as_numpy_argument(x: Any) -> Any:
    """An argument as the engine computes with it: foreign arrays unwrapped to numpy
    (their derivative-carrying contents, if any, lifted), object arrays of traced values
    lifted to one traced array; a clear ``TypeError`` for a foreign type numpy cannot
    convert."""
    if _is_object_array(x):
        return lift_objects(x)
    if not is_foreign_array(x):
        return x
    try:
        arr = np.asarray(x)
    except TypeError as error:
        raise TypeError(
            f"dualad: cannot use a {type(x).__module__}.{type(x).__name__} together with "
            f"traced values: numpy cannot convert it ({error}). Convert it first "
            f"(np.asarray(obj), obj.to_numpy(), obj.values) and pass the plain array."
        ) from error
    if arr.dtype.hasobject:
        lifted = lift_objects(arr)
        if lifted is arr:
            raise TypeError(
                f"dualad: cannot use a {type(x).__module__}.{type(x).__name__} together "
                f"with traced values: np.asarray gives an object array (dtype object, shape "
                f"{arr.shape}). Convert it to a numeric numpy array first (e.g. obj.toarray(),"
                f" obj.to_numpy(dtype=float))."
            )
        return lifted
    return arr


def normalize_arguments(args: tuple) -> tuple | None:
    """``args`` with foreign arrays and object arrays of traced values replaced by what
    :func:`as_numpy_argument` makes of them (also one list level deep); ``None`` when
    nothing needs replacing (the common case, checked cheaply)."""
    found = False
    for a in args:
        t = type(a)
        if t is np.ndarray:
            if a.dtype.hasobject:
                found = True
                break
        elif t is list or t is tuple:
            if any(_is_object_array(b) or is_foreign_array(b) for b in a):
                found = True
                break
        elif is_foreign_array(a):
            found = True
            break
    if not found:
        return None
    out = []
    for a in args:
        t = type(a)
        if t is list or t is tuple:
            out.append(t(as_numpy_argument(b) for b in a))
        else:
            out.append(as_numpy_argument(a))
    return tuple(out)


# Argument types that need no normalising and are not traced (the protocol entry's fast scan).
_CONSTANT_TYPES = frozenset((float, int, bool, complex, np.float64, np.complex128,
                             type(None)))


def apply_operator(op: Operator, args: tuple, kwargs: dict) -> Any:
    """Apply ``op`` to ``args``, recording or propagating tangents for the innermost level."""
    if not kwargs:  # the common case in one pass: traced values, arrays and numbers
        top = None
        for a in args:
            t = type(a)
            if t is np.ndarray:
                if a.dtype.hasobject:
                    break
            elif t in _CONSTANT_TYPES:
                continue
            elif isinstance(a, Traced):
                if top is None or a.level > top.level:
                    top = a
            else:  # lists, foreign arrays: the general path below
                break
        else:
            if top is None:
                return forward(op, *args)
            return type(top)._apply(op, args, kwargs, top.level)
    normalized = normalize_arguments(args)
    if normalized is not None:
        args = normalized
    if kwargs:
        values = tuple(kwargs.values())
        normalized = normalize_arguments(values)
        if normalized is not None:
            kwargs = dict(zip(kwargs, normalized))
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
