"""Shared helpers of the scipy drop-ins: traced-or-plain dispatch and constant values.

Example:
    >>> import numpy as np
    >>> from dualad.scipy_rules._dropin import any_traced
    >>> any_traced((np.ones(2), 3.0), {})
    False
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..extend import Traced, value

__all__ = ["any_traced", "dropin", "constant"]

F = TypeVar("F", bound=Callable[..., Any])


def _holds_traced(x: Any) -> bool:
    if isinstance(x, Traced):
        return True
    if type(x) in (list, tuple):
        return any(_holds_traced(item) for item in x)
    if isinstance(x, np.ndarray) and x.dtype == object:
        return any(isinstance(item, Traced) for item in x.reshape(-1))
    return False


def any_traced(args: tuple, kwargs: dict) -> bool:
    """Whether any argument (or an item of a list / tuple argument) is a traced value."""
    return any(_holds_traced(a) for a in args) or any(_holds_traced(v) for v in kwargs.values())


def dropin(original: Callable[..., Any]) -> Callable[[F], F]:
    """Decorate a traced implementation: plain calls go to ``original`` (scipy itself)."""

    def decorate(traced: F) -> F:
        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if any_traced(args, kwargs):
                return traced(*args, **kwargs)
            return original(*args, **kwargs)

        call.__doc__ = (traced.__doc__ or "") + f"\n\nDrop-in for ``{_qualified(original)}``."
        return call  # type: ignore[return-value]

    return decorate


def _qualified(f: Callable[..., Any]) -> str:
    module = getattr(f, "__module__", "") or ""
    public = ".".join(p for p in module.split(".") if not p.startswith("_"))
    return f"{public}.{getattr(f, '__name__', f)}"


def constant(x: Any) -> Any:
    """The plain numpy value of ``x`` at every level: a constant to differentiation."""
    return value(x)
