"""Operator traits: which function a recorded call applied, and how.

``Method[f]`` is a plain call of ``f``; ``Broadcasted[f]`` is an elementwise, broadcasting
call of ``f`` (a numpy ufunc, or a function registered as elementwise). Each is a *real
subclass* created once per wrapped function, so plum dispatches on it by type and keeps
its cache (the types are faithful).

Example:
    >>> import numpy as np
    >>> from dualad.core.operators import Broadcasted, Method
    >>> Broadcasted[np.sin] is Broadcasted[np.sin]
    True
    >>> Broadcasted[np.sin]().f is np.sin
    True
    >>> Method[np.add.reduce].__name__  # ufunc methods are keyed by (ufunc, method name)
    'Method[add.reduce]'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

__all__ = ["Operator", "Method", "Broadcasted", "function_key", "function_name"]


def function_key(f: Callable[..., Any]) -> Hashable:
    """A stable, hashable key for ``f``: ufunc methods become ``(ufunc, name)``."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc):
        return (owner, f.__name__)
    return f


def function_name(f: Callable[..., Any]) -> str:
    """A readable name for ``f`` (``np.add.reduce`` gives ``'add.reduce'``)."""
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc):
        return f"{owner.__name__}.{f.__name__}"
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


class Operator:
    """Base of operator traits. Subclass it for a custom operator with its own rules.

    A parametrized operator class (``Method[f]``) has a class attribute ``f``; its
    instance is callable and calls ``f``.
    """

    __slots__ = ()
    __faithful__ = True
    _kind_name = "Operator"
    f: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class _ParametricOperator(Operator):
    """An operator family with one subclass (and one instance) per wrapped function."""

    __slots__ = ()
    _subclasses: dict[Hashable, type]
    _instances: dict[Hashable, Operator]
    _lock = threading.Lock()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "f" not in cls.__dict__:
            cls._subclasses = {}
            cls._instances = {}

    def __class_getitem__(cls, f: Callable[..., Any]) -> type:
        key = function_key(f)
        try:
            return cls._subclasses[key]
        except KeyError:
            pass
        with cls._lock:
            if key not in cls._subclasses:
                name = f"{cls.__name__}[{function_name(f)}]"
                sub = type(
                    name, (cls,), {"__slots__": (), "f": staticmethod(f), "__module__": cls.__module__}
                )
                cls._subclasses[key] = sub
            return cls._subclasses[key]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as "the operator of f" (not as its dynamically made class), so an
        # unpickled primitive and its rules meet the same class in another process.
        family = type(self).__mro__[1]
        return (_operator_instance, (family, type(self).f))

    @classmethod
    def instance(cls, f: Callable[..., Any]) -> Operator:
        """The (shared) operator instance wrapping ``f``."""
        key = function_key(f)
        try:
            return cls._instances[key]
        except KeyError:
            op = cls[f]()  # type: ignore[index]  # __class_getitem__, which mypy does not read
            cls._instances[key] = op
            return op


def _operator_instance(family: Any, f: Callable[..., Any]) -> Operator:
    return family.instance(f)


class Method(_ParametricOperator):
    """A plain call of ``f``: ``Method[np.sum]``, ``Method[np.matmul]``, ``Method[my_primitive]``."""

    __slots__ = ()
    _kind_name = "Method"


class Broadcasted(_ParametricOperator):
    """An elementwise, broadcasting call of ``f``: ``Broadcasted[np.sin]``."""

    __slots__ = ()
    _kind_name = "Broadcasted"
