"""Binding a numpy call's positional and keyword arguments to parameter names.

Example:
    >>> from dualad.numpy_rules._signatures import bind
    >>> bind(("a", "axis", "keepdims"), (1.0, 0), {"keepdims": True})
    {'a': 1.0, 'axis': 0, 'keepdims': True}
"""

from __future__ import annotations

from typing import Any

__all__ = ["bind"]


def bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Map positional ``args`` onto ``names`` in order and merge ``kwargs``."""
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound
