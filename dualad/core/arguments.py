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
    "as_dtype",
    "check_output",
    "check_real_output",
    "derivative_dtype",
    "is_differentiable_output",
    "normalize_argnums",
    "to_user",
    "value",
]

Argnums = int | Sequence[int]


def as_differentiable(x: Any, what: str = "argument") -> Any:
    """``x`` as a float64 (or complex128) array, ints and bools promoted; traced values pass
    unchanged."""
    if isinstance(x, Traced):
        return x
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind in "fiub":
        return arr.astype(np.float64, copy=False) if kind != "f" or arr.dtype != np.float64 \
            else arr
    if kind == "c":  # reverse mode and jvp (JAX's convention, see numpy_rules.complex_parts)
        return arr.astype(np.complex128, copy=False)
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
    if isinstance(out, (np.floating, np.complexfloating, complex, Traced)):
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
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (complex, np.complexfloating)):
        return np.asarray(x, dtype=np.complex128)
    return np.asarray(x, dtype=np.float64)


def check_output(out: Any, fname: str) -> None:
    """Refuse a function result that cannot be differentiated (``None``, strings)."""
    if out is None or isinstance(out, (str, bytes)):
        raise TypeError(
            f"{fname}: the function returned {type(out).__name__}; it must return a number "
            f"or an array computed from its arguments (did you forget a return statement?)."
        )


def derivative_dtype(x: Any) -> np.dtype | None:
    """The dtype a derivative with respect to ``x`` is handed back in: a float dtype other
    than float64 (``float32``, ``float16``) is kept, as JAX does; ``None`` means float64.

    Example:
        >>> import numpy as np
        >>> derivative_dtype(np.ones(2, np.float32)), derivative_dtype(3)
        (dtype('float32'), None)
    """
    if isinstance(x, Traced):
        return None
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind == "f" and dtype != np.float64:
        return dtype
    return None


def as_dtype(x: Any, dtype: np.dtype | None) -> Any:
    """``x`` cast to ``dtype`` (from :func:`derivative_dtype`); unchanged for ``None``."""
    if dtype is None or isinstance(x, Traced):
        return x
    return np.asarray(x).astype(dtype, copy=False)


def check_real_output(out: Any, fname: str) -> None:
    """Refuse an output ``grad`` cannot differentiate: booleans, integers, complex numbers.

    Their derivative would silently come back as zero (or drop the imaginary part).

    Example:
        >>> import numpy as np
        >>> check_real_output(np.float64(1.0), "grad(f)")
        >>> check_real_output(np.int64(3), "grad(f)")
        Traceback (most recent call last):
        ...
        TypeError: grad(f): the function returned a value of dtype int64 (integer); ...
    """
    dtype = value(out).dtype if isinstance(out, Traced) else getattr(out, "dtype", None)
    if dtype is None:
        dtype = np.asarray(out).dtype
    kind = np.dtype(dtype).kind
    if kind == "f":
        return
    if kind == "c":
        raise TypeError(
            f"{fname}: the function returned a complex value (dtype {dtype}); grad needs a "
            f"real-valued output. Differentiate a real quantity such as np.real(z), "
            f"np.abs(z) ** 2 or z.imag, or pass holomorphic=True for a complex-"
            f"differentiable f (the result is f'(z))."
        )
    what = {"b": "bool", "i": "integer", "u": "integer"}.get(kind, str(dtype))
    raise TypeError(
        f"{fname}: the function returned a value of dtype {dtype} ({what}); its derivative "
        f"is zero or undefined, so grad refuses it instead of returning zeros. Return a "
        f"float computed from the arguments (e.g. np.sum(x ** 2), not np.sum(x > 0) or "
        f"np.allclose(...)); use ad.value / a plain call for the {what} result."
    )
