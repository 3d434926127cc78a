"""Registering tangent (forward-mode) rules for whole functions: :func:`tangent_rule`.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.extend import Dual, primitive, tangent_rule
    >>> def twice(x):
    ...     return 2.0 * x
    >>> twice = primitive(twice)
    >>> @tangent_rule(twice)
    ... def _twice(x):
    ...     return Dual(2.0 * x.value, 2.0 * x.partials, x.tag)
    >>> float(ad.derivative(twice)(1.0))
    2.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plum

from ..core.dispatch import forward
from ..core.operators import Broadcasted, Method
from .dual import (
    Dual,
    dual_signatures,
    register_fast_function,
    register_fast_ufunc,
    register_forward,
)

__all__ = ["tangent_rule"]


def _subsets(positions: tuple[int, ...]) -> list[tuple[type, ...]]:
    n = max(positions) + 1
    out: list[tuple[type, ...]] = []
    for bits in range(1, 2 ** len(positions)):
        chosen = {p for i, p in enumerate(positions) if bits >> i & 1}
        out.append(tuple(Dual if i in chosen else object for i in range(n)))
    return out


def tangent_rule(*funcs: Any, duals: tuple[int, ...] | str = (0,), ufunc: bool = False,
                 broadcasted: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(*args, **kwargs)`` as the tangent (forward-mode) rule of ``funcs``.

    ``duals`` lists the positional arguments that may be Duals (every combination is
    registered), or is ``"any"``: then ``impl`` receives every call of the function,
    including calls without Duals (lists of arrays, Duals passed by keyword), and must
    compute the plain result itself when it finds no Dual. ``ufunc``: the functions are
    ufuncs called through ``__array_ufunc__`` (a ``Method`` rule, e.g. a gufunc).
    ``broadcasted``: a refinement of the table rule of the ufuncs, for their elementwise
    calls (``Broadcasted[f]``, every argument may be a Dual): the table's fast paths for
    plain real values still run first, and ``impl`` receives the calls they decline
    (complex values, nested Duals, ...); :func:`table_tangent` is the table's rule, for
    the calls ``impl`` leaves to it.
    A rule a user registers later with ``@ad.forward.dispatch`` for the same function wins.
    """
    family: Any = Broadcasted if broadcasted else Method

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        def method(op: Any, *args: Any, **kwargs: Any):  # no return annotation (plum)
            return impl(*args, **kwargs)

        def fast(args: tuple, kwargs: dict) -> Any:
            return impl(*args, **kwargs)

        method.__name__ = method.__qualname__ = f"forward{impl.__name__}"
        for f in funcs:
            op_type = family[f]
            if broadcasted:  # the table rule's signatures, which these replace
                for types in dual_signatures(f.nin):
                    register_forward(op_type, types, method)
            elif duals == "any":
                forward.register(method, plum.Signature(op_type, varargs=object), builtin=True)
            else:
                for types in _subsets(tuple(duals)):  # type: ignore[arg-type]
                    register_forward(op_type, types, method, varargs=object)
            if ufunc or broadcasted:
                register_fast_ufunc(f, fast)
            else:
                register_fast_function(f, fast, direct=impl)
        return impl

    return decorate
