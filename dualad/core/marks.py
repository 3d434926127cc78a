"""Marks on the functions that transforms return, so that ``ad.jit`` knows which transform
of which function it was given (``ad.grad(f)`` is otherwise an opaque closure).

Example:
    >>> import dualad as ad
    >>> from dualad.core.marks import transform_mark
    >>> mark = transform_mark(ad.grad(abs))
    >>> mark.name, mark.f is abs, mark.argnums
    ('grad', True, 0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TransformMark", "mark_transform", "transform_mark"]

_ATTRIBUTE = "__dualad_transform__"


@dataclass(frozen=True)
class TransformMark:
    """Which transform made a function: its ``name``, the function ``f`` it transformed,
    ``argnums``, its other ``options``, and ``rebuild(g, **overrides)``, the same transform
    of ``g`` (with some options overridden)."""

    name: str
    f: Callable[..., Any]
    argnums: Any
    rebuild: Callable[..., Callable[..., Any]]
    options: dict[str, Any] = field(default_factory=dict)


def mark_transform(wrapped: Callable[..., Any], name: str, f: Callable[..., Any],
                   argnums: Any, rebuild: Callable[..., Callable[..., Any]],
                   **options: Any) -> Callable[..., Any]:
    """Set the mark on ``wrapped`` and return it."""
    setattr(wrapped, _ATTRIBUTE, TransformMark(name, f, argnums, rebuild, options))
    return wrapped


def transform_mark(fn: Any) -> TransformMark | None:
    """The mark of ``fn``, or None for a function no transform made."""
    mark = getattr(fn, _ATTRIBUTE, None)
    return mark if isinstance(mark, TransformMark) else None
