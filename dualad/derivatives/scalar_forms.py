"""Scalar forms of elementwise functions that are not ufuncs, for the compiler.

The rules tables give every elementwise ufunc its value and partials as expressions of
the rules language; an elementwise function that is not a ufunc (``np.where``) declares
its own here, next to its rules, so that compiled programs (:mod:`dualad.tape.lowering`)
can write it into a scalar loop body like any table rule. Arguments without a
derivative (a condition) say ``"not differentiable"``.

Example:
    >>> import numpy as np
    >>> from dualad.derivatives.scalar_forms import scalar_form
    >>> form = scalar_form(np.where)   # declared in dualad.numpy_rules.selection
    >>> form.arg_names, form.value.text
    (('c', 'a', 'b'), 'where(c != 0, a, b)')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .language import Derivative, check_arg_names, parse_expression

__all__ = ["ScalarForm", "declare_scalar_form", "scalar_form", "scalar_forms"]


@dataclass(frozen=True)
class ScalarForm:
    """The value and the partials (one per argument) of an elementwise function."""

    arg_names: tuple[str, ...]
    value: Derivative
    derivatives: tuple[Derivative, ...]


_FORMS: dict[Any, ScalarForm] = {}


def declare_scalar_form(func: Any, args: Sequence[str], value: str,
                        derivatives: Sequence[str | None]) -> None:
    """Declare ``func(*args)`` elementwise with this ``value`` and these partials
    (rules-language expressions of ``args``; ``"not differentiable"`` for none)."""
    names = tuple(args)
    entry = getattr(func, "__name__", repr(func))
    check_arg_names(names, entry=entry)
    if len(derivatives) != len(names):
        raise ValueError(f"declare_scalar_form({entry}): {len(names)} arguments but "
                         f"{len(derivatives)} derivatives; give one per argument.")
    _FORMS[func] = ScalarForm(names, parse_expression(value, names, entry=entry),
                              tuple(parse_expression(d, names, entry=entry)
                                    for d in derivatives))


def scalar_form(func: Any) -> ScalarForm | None:
    """The declared scalar form of ``func``, or None."""
    try:
        return _FORMS.get(func)
    except TypeError:  # unhashable
        return None


def scalar_forms() -> list[ScalarForm]:
    """Every declared scalar form, in the order declared."""
    return list(_FORMS.values())
