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

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .allocations import promoting
from .array_protocol import object_holders_made
from .errors import ConversionError, DualadError
from .tracing import Traced, new_level
from .trees import tree_map

__all__ = [
    "Argnums",
    "AuxOutput",
    "as_differentiable",
    "as_dtype",
    "check_output",
    "check_real_output",
    "derivative_dtype",
    "describe",
    "guard_opaque_calls",
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
    if arr.dtype == object and type(x).__module__ != "builtins" \
            and not isinstance(x, (np.ndarray, list, tuple, dict)):
        cls = type(x)
        raise TypeError(
            f"dualad: cannot differentiate with respect to the {what}, a "
            f"{cls.__module__}.{cls.__qualname__} object: dualad does not know its "
            f"contents. Dataclasses, NamedTuples, tuples, "
            f"lists and dicts of arrays work as they are; for another container type, "
            f"register it: ad.register_tree({cls.__name__}, flatten, unflatten) with "
            f"flatten(obj) -> (children, aux) and unflatten(aux, children) -> obj."
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
    if isinstance(out, Traced):  # a traced comparison (a tape's ValueNode) has none
        return not getattr(out, "without_derivative", False)
    if isinstance(out, (np.floating, np.complexfloating, complex)):
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
    if isinstance(x, (np.floating, np.complexfloating)):
        return np.asarray(x)  # numpy's scalar keeps its dtype (np.float32 stays float32)
    if isinstance(x, complex):
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


class AuxOutput:
    """``f`` returning ``(output, aux)`` seen as returning ``output``; ``aux`` kept aside.

    For ``has_aux=True``: a transform differentiates the wrapper, then hands back
    :meth:`aux`, with the values of the differentiations begun after this object was made
    (those of the transform) taken out, so ``aux`` comes back as plain numpy.

    Example:
        >>> import numpy as np, dualad as ad
        >>> aux = AuxOutput(lambda x: (x * 2.0, {"x": x}), "grad(f)")
        >>> float(ad.grad(lambda x: np.sum(aux(x)))(np.float64(3.0)))
        2.0
        >>> aux.aux()
        {'x': array(3.)}
    """

    def __init__(self, f: Any, fname: str) -> None:
        self.f = f
        self.fname = fname
        self.mark = new_level()  # every level drawn from now on belongs to this transform
        self._aux: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.f(*args, **kwargs)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            what = (f"a {type(result).__name__} of length {len(result)}"
                    if isinstance(result, (tuple, list)) else describe(result))
            raise ValueError(
                f"{self.fname}: has_aux=True, so the function must return a pair "
                f"(output, aux), but it returned {what}. Return `output, aux` (aux: any "
                f"tree of values to hand back undifferentiated), or drop has_aux=True."
            )
        self._aux[:] = [result[1]]  # the last call's (a traced one: see ``aux``)
        return result[0]

    def aux(self) -> Any:
        """The ``aux`` of the last call, as plain values (this transform's tracing removed)."""
        if not self._aux:
            return None
        mark = self.mark

        def plain(leaf: Any) -> Any:
            was_traced = False
            while isinstance(leaf, Traced) and leaf.level > mark:
                leaf = leaf._primal()
                was_traced = True
            return to_user(leaf) if was_traced else leaf

        return tree_map(plain, self._aux[0])


#: Hints for errors raised inside a library's Python function on traced values:
#: ``hint(module, name, frame) -> str | None`` (e.g. the name of a drop-in), registered by
#: the layers that know the library (:mod:`dualad.scipy_rules`).
_LIBRARY_HINTS: list[Callable[[str, str, Any], str | None]] = []


def register_library_hint(hint: Callable[[str, str, Any], str | None]) -> None:
    """Add ``hint(module, function name, frame)`` to the explanations of failures inside a
    library function called on traced values (the outermost numpy / scipy frame)."""
    _LIBRARY_HINTS.append(hint)


def _library_frame(tb: Any) -> tuple[str, str, Any] | None:
    """``(module, function, frame)`` of the outermost numpy or scipy frame of ``tb``."""
    while tb is not None:
        frame = tb.tb_frame
        module = frame.f_globals.get("__name__", "") or ""
        if module.split(".")[0] in ("numpy", "scipy"):
            return module, frame.f_code.co_name, frame
        tb = tb.tb_next
    return None


def _library_message(fname: str, e: BaseException) -> str | None:
    found = _library_frame(e.__traceback__)
    if found is None:
        return None
    module, name, frame = found
    for hint in _LIBRARY_HINTS:
        text = hint(module, name, frame)
        if text:
            return f"{fname}: {text} (it failed with {type(e).__name__}: {e})"
    if module.split(".")[0] == "numpy" and not isinstance(e, ConversionError):
        return (
            f"{fname}: np.{name} turned a traced value into an array of Python objects and "
            f"failed ({type(e).__name__}: {e}). numpy converts a Python list or tuple "
            f"argument with np.asarray, which cannot see traced values inside it: pass "
            f"one array instead, e.g. np.stack([a, b]) rather than [a, b]."
        )
    return None


def guard_opaque_calls(f: Any, fname: str) -> Any:
    """``f``, with a failure of compiled code on traced values explained.

    Compiled code (a C extension, ``scipy.ndimage``, Numba, Cython) sees a traced value as
    an array of Python objects and fails with its own message; the error is re-raised as a
    :class:`DualadError` that says what happened and how to fix it (``ad.primitive`` and
    a rule, or the drop-in dualad offers for a scipy function). Float allocations inside
    ``f`` can hold derivatives (:mod:`dualad.core.allocations`) unless ``f`` was marked
    ``allocations="strict"``.
    """
    f = promoting(f)

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        before = object_holders_made()
        try:
            return f(*args, **kwargs)
        except (TypeError, ValueError, RuntimeError) as e:
            if isinstance(e, ConversionError) or (not isinstance(e, DualadError)
                                                  and object_holders_made() != before):
                message = _library_message(fname, e)
                if message is not None:
                    # a TypeError stays one (ConversionError is a DualadError and a TypeError)
                    kind = ConversionError if isinstance(e, TypeError) else DualadError
                    raise kind(message) from e
            if isinstance(e.__cause__, ConversionError) and not isinstance(e, DualadError):
                # numpy wrapped dualad's refusal of a conversion in its own error (e.g.
                # "setting an array element with a sequence"): dualad's says what to do
                raise ConversionError(str(e.__cause__)) from e
            if isinstance(e, DualadError) or object_holders_made() == before:
                raise
            raise DualadError(
                f"{fname}: a traced value seems to have reached code dualad cannot see "
                f"into (compiled code: a C extension, scipy.ndimage, Numba, Cython ...), "
                f"which turned it into an array of Python objects and failed with: "
                f"{type(e).__name__}: {e}\n"
                f"Make the function that calls it a primitive with ad.primitive and give it "
                f"a derivative rule (@ad.gradient.dispatch for reverse mode, "
                f"@ad.forward.dispatch for forward mode, or ad.define_rule for an "
                f"elementwise function); or call it on ad.value(x) outside the derivative."
            ) from e

    return call


def describe(x: Any) -> str:
    """``x`` in the user's words: traced values are arrays to them, not graph nodes or Duals.

    Example:
        >>> import numpy as np, dualad as ad
        >>> describe(ad.Variable(np.ones(2))), describe(2.0), describe("a")
        ('an array of shape (2,)', 'a number', 'a str')
    """
    if isinstance(x, (Traced, np.ndarray)):
        shape = x.shape
        return "a number (0-d array)" if shape == () else f"an array of shape {shape}"
    if isinstance(x, (int, float, complex, np.number)) and not isinstance(x, bool):
        return "a number"
    return f"a {type(x).__name__}"
