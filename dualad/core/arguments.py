"""Arguments in, results out: what the transforms of both modes share.

Differentiated arguments become float arrays (:func:`as_differentiable`); ``argnums`` is
validated once (:func:`normalize_argnums`); results go back to users as plain numpy
(:func:`to_user`); :func:`value` reads the number behind any traced value.

Example:
    >>> import numpy as np
    >>> from dualad.core.arguments import as_differentiable, normalize_argnums
    >>> as_differentiable(3).dtype, normalize_argnums((1, 0), 2, "grad(f)")
    (dtype('float64'), ((1, 0), False))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .tracing import Traced

__all__ = [
    "Argnums",
    "as_differentiable",
    "check_output",
    "is_differentiable_output",
    "normalize_argnums",
    "to_user",
    "value",
]

Argnums = int | Sequence[int]


def as_differentiable(x: Any, what: str = "argument") -> Any:
    """``x`` as a float64 array (ints and bools promoted); traced values pass unchanged."""
    if isinstance(x, Traced):
        return x
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind in "fiub":
        return arr.astype(np.float64, copy=False) if kind != "f" or arr.dtype != np.float64 \
            else arr
    if kind == "c":
        raise TypeError(
            f"dualad: the {what} is complex ({arr.dtype}, shape {arr.shape}); complex "
            f"differentiation is not supported yet. Split it into real and imaginary parts "
            f"(x.real, x.imag) and differentiate with respect to those."
        )
    raise TypeError(
        f"dualad: cannot differentiate with respect to an {what} of dtype {arr.dtype} "
        f"(shape {arr.shape}, type {type(x).__name__}); pass float arrays or numbers."
    )


def is_differentiable_output(out: Any) -> bool:
    """Whether a call's result can carry a derivative (floats, or tuples holding floats)."""
    t = type(out)
    if t is np.float64 or t is float:
        return True
    if t is np.ndarray:
        return out.dtype.kind in "fc"
    if isinstance(out, (np.floating, Traced)):
        return True
    if isinstance(out, np.ndarray):
        return out.dtype.kind in "fc"
    if isinstance(out, (tuple, list)):
        return any(is_differentiable_output(o) for o in out)
    return False


def value(x: Any) -> Any:
    """The numpy value of a node or ``Dual`` (innermost first), or ``x`` itself.

    Example:
        >>> import numpy as np, dualad as ad
        >>> float(ad.value(ad.Variable(2.0) * 3))
        6.0
    """
    while isinstance(x, Traced):
        x = x._primal()
    return x


def normalize_argnums(argnums: Argnums, nargs: int, fname: str) -> tuple[tuple[int, ...], bool]:
    """``(tuple of argument indices, whether a single int was given)``, validated."""
    if type(argnums) is int and 0 <= argnums < nargs:  # the common case, fast
        return (argnums,), True
    single = isinstance(argnums, (int, np.integer))
    items = (argnums,) if single else argnums
    if not isinstance(items, (tuple, list)) or not all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in items):
        raise TypeError(
            f"{fname}: argnums={argnums!r}; give an int or a tuple of ints (argument indices)."
        )
    nums = tuple(int(a) for a in items)
    if not nums:
        raise ValueError(f"{fname}: argnums is empty; give an int or a non-empty tuple of ints.")
    resolved = []
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(
                f"{fname}: argnums={argnums!r} refers to argument {a}, but the function was "
                f"called with {nargs} positional argument(s); pass an index in "
                f"range({nargs})."
            )
        resolved.append(a % nargs)
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"{fname}: argnums={argnums!r} repeats an argument; list each once.")
    return tuple(resolved), single


def to_user(x: Any) -> Any:
    """A result as handed back to users: plain numpy unless it is traced by an outer level."""
    if isinstance(x, Traced):
        return x
    return np.asarray(x, dtype=np.float64) if not isinstance(x, np.ndarray) else x


def check_output(out: Any, fname: str) -> None:
    """Refuse a function result that cannot be differentiated (``None``, strings)."""
    if out is None or isinstance(out, (str, bytes)):
        raise TypeError(
            f"{fname}: the function returned {type(out).__name__}; it must return a number "
            f"or an array computed from its arguments (did you forget a return statement?)."
        )
