"""numpy's dispatch protocols and Python's operators for traced objects.

A class that mixes in :class:`NumpyOverloads` and implements ``_primal()`` (its numpy
value) behaves like an array in plain numpy code: ufuncs go through
``__array_ufunc__`` (as ``Broadcasted[ufunc]``, gufuncs and ufunc methods as ``Method``),
other numpy functions through ``__array_function__`` (as ``Method[func]``), and both end
in :func:`dualad.core.tracing.apply_operator`.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.array([1.0, 2.0]))
    >>> (np.sin(x) * 2 + x).shape
    (2,)
"""

from __future__ import annotations

import contextvars
import operator
import sys
import threading
from typing import Any

import numpy as np

from .errors import ConversionError, MissingRuleError
from .operators import Broadcasted, Method
from .tracing import apply_operator, is_foreign_array

__all__ = [
    "BINARY_OPERATORS",
    "NumpyOverloads",
    "lift_object_array",
    "HOLDERS",
    "object_holders_made",
    "count_object_holder",
    "register_ufunc_method",
    "shape_of",
    "observed_level",
    "value_observer",
]

# Per context: an object told where traced values decide control flow (``observer.on_bool``)
# and given results that carry no derivative (``observer.on_result``); set by ``ad.record``.
value_observer: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "dualad_value_observer", default=None)


def observed_level() -> int | None:
    """The level of the traced values the current observer records (a tape's), or None.

    Rules that decide from plain values (a mask, a permutation) stop unwrapping there:
    what they compute from the recorded values is recorded too, so that a replay
    recomputes it instead of reusing the recorded decision.

    Example:
        >>> observed_level() is None   # nothing records here
        True
    """
    return getattr(value_observer.get(), "level", None)


# How many object arrays holding traced values (np.asarray(x) of a traced x) this thread
# made (``HOLDERS.made``): a transform compares it before and after a failed call (which
# runs in one thread), to tell a traced value that reached compiled code (which cannot run
# on them) from other errors.


class _HolderCount(threading.local):
    made = 0


HOLDERS = _HolderCount()


def object_holders_made() -> int:
    """The number of object arrays holding traced values made so far in this thread."""
    return HOLDERS.made


def count_object_holder() -> None:
    """Count one more object array holding a traced value (see :func:`object_holders_made`)."""
    HOLDERS.made += 1


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array, scalar, or traced object."""
    if type(x) is float or type(x) is int:
        return ()
    shape = getattr(x, "shape", None)
    if shape is None:
        return np.shape(x)
    return shape


def lift_object_array(x: Any) -> Any:
    """An object array holding traced values (``np.array([a, b])``) as one traced array.

    Anything else is returned unchanged.

    Example:
        >>> import numpy as np, dualad as ad
        >>> v = ad.Variable(2.0)
        >>> type(lift_object_array(np.array([v, v * v]))).__name__
        'CachedNode'
    """
    if is_foreign_array(x):  # xarray.DataArray (pandas, ...) holding traced values
        arr = np.asarray(x)
        return lift_object_array(arr) if arr.dtype == object else x
    if not (isinstance(x, np.ndarray) and x.dtype == object):
        return x
    items = [lift_object_array(item) for item in x.reshape(-1)]
    if not any(isinstance(item, NumpyOverloads) for item in items):
        return np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return items[0]
    return np.reshape(np.stack(items), x.shape + tuple(np.shape(items[0])))


# ufunc -> the operator of its calls (Broadcasted, or Method for a gufunc).
_CALL_OPERATORS: dict[Any, Any] = {}

# ufunc method name ("at", "reduce", ...) -> (handler(ufunc, inputs, kwargs), first)
_UFUNC_METHODS: dict[str, tuple[Any, bool]] = {}


def register_ufunc_method(method: str, handler: Any, *, first: bool = False) -> None:
    """Run ``handler(ufunc, inputs, kwargs)`` for ``ufunc.<method>(...)`` on traced values.

    ``first``: always (``ufunc.at`` writes in place, it is never recorded as one call);
    otherwise only when the call has no rule of its own (a ``MissingRuleError``).
    """
    _UFUNC_METHODS[method] = (handler, first)


def _refuse_out(name: str, kwargs: dict) -> None:
    out = kwargs.get("out")
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise TypeError(
            f"dualad cannot record np.{name}(..., out=...): writing into an existing array "
            f"hides the result from differentiation. Use the returned value instead, "
            f"e.g. y = np.{name}(x)."
        )


# How to write a reduction of a plain array with a traced initial= value.
_COMBINE = {
    "sum": "np.sum(a) + x", "nansum": "np.nansum(a) + x", "prod": "np.prod(a) * x",
    "nanprod": "np.nanprod(a) * x", "max": "np.maximum(np.max(a), x)",
    "amax": "np.maximum(np.max(a), x)", "min": "np.minimum(np.min(a), x)",
    "amin": "np.minimum(np.min(a), x)",
}


def _reduction_reading(x: Any) -> tuple[str, str] | None:
    """``(numpy function, keyword)`` when ``x`` is being converted to a number by one of
    numpy's reductions of a plain array (``np.sum(a, initial=x)``), else None."""
    frame: Any = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "_wrapreduction" and "numpy" in code.co_filename:
            keywords = frame.f_locals.get("passkwargs") or {}
            keyword = next((k for k, v in keywords.items() if v is x), None)
            if keyword is None:
                return None
            outer = frame.f_back
            fname = outer.f_code.co_name if outer is not None else ""
            if not fname.isidentifier() or fname.startswith("_"):
                fname = str(frame.f_locals.get("method", "reduce"))
            return fname, keyword
        frame = frame.f_back
    return None


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Any:
    op = Broadcasted.instance(ufunc)

    if reflected:
        def method(self: Any, other: Any) -> Any:
            return apply_operator(op, (other, self), {})
    else:
        def method(self: Any, other: Any) -> Any:
            return apply_operator(op, (self, other), {})

    method.__name__ = f"__{'r' if reflected else ''}{ufunc.__name__}__"
    return method


_NEGATIVE = Broadcasted.instance(np.negative)

#: Python's binary operators and the ufuncs numpy maps them to: name -> (ufunc, reflected).
BINARY_OPERATORS: dict[str, tuple[np.ufunc, bool]] = {
    f"__{prefix}{name}__": (ufunc, prefix == "r")
    for name, ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                        ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                        ("mod", np.remainder), ("pow", np.power))
    for prefix in ("", "r")
}


class NumpyOverloads:
    """Mixin: numpy protocols, operators, indexing and array attributes."""

    __slots__ = ()
    __array_priority__ = 1000.0
    # pandas defers its binary operators to a type of higher priority (Series 3000,
    # DataFrame 4000): Series * traced then runs traced.__rmul__, which unwraps the Series.
    __pandas_priority__ = 5000

    def _primal(self) -> Any:
        raise NotImplementedError

    # numpy protocols -------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs:
            out = kwargs.get("out")
            if method == "__call__" and type(out) is tuple and len(out) == 1 \
                    and isinstance(out[0], NumpyOverloads):
                # np.add(y, z, out=y): computed, then written into the traced array y
                # (its own write: in place for Duals, numpy's aliasing for graph nodes)
                del kwargs["out"]
                out[0][...] = ufunc(*inputs, **kwargs)  # type: ignore[index]
                return out[0]
            _refuse_out(ufunc.__name__, kwargs)
            kwargs.pop("out", None)
        if method == "__call__":
            op = _CALL_OPERATORS.get(ufunc)
            if op is None:
                op = _CALL_OPERATORS[ufunc] = Broadcasted.instance(ufunc) \
                    if ufunc.signature is None else Method.instance(ufunc)
            return apply_operator(op, inputs, kwargs)
        op = Method.instance(getattr(ufunc, method))
        handler = _UFUNC_METHODS.get(method)
        if handler is None:
            return apply_operator(op, inputs, kwargs)
        run, first = handler
        if first:
            return run(ufunc, inputs, kwargs)
        try:
            return apply_operator(op, inputs, kwargs)
        except MissingRuleError:
            return run(ufunc, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        _refuse_out(getattr(func, "__name__", "function"), kwargs)
        return apply_operator(Method.instance(func), args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if dtype is None or np.dtype(dtype) == object:
            # np.array([x, y]) of traced values: an object array that holds them; the
            # transforms turn it back into one traced array (see lift_object_array).
            # A non-0-d value is held entry by entry, so the holder has the value's shape.
            HOLDERS.made += 1
            shape = self.shape
            holder = np.empty(shape, dtype=object)
            if shape == ():
                holder[()] = self
            else:
                for index in np.ndindex(shape):
                    holder[index] = self[index]
            return holder
        raise ConversionError(
            f"dualad: a traced value (shape {self.shape}) was converted to a plain "
            f"{np.dtype(dtype)} array, which would drop its derivative. This happens "
            f"when writing it into a plain array (out = np.empty(n); out[i] = x) that dualad "
            f"did not reach (a function called as an object's attribute, or "
            f"allocations='strict'): allocate with np.empty_like(x) / np.zeros_like(x) "
            f"instead, and use numpy functions "
            f"rather than math.*; or when a Python list of traced values is passed to a numpy "
            f"function that does not look inside lists (np.mean([a, b]), np.std, np.var, "
            f"np.median): make one array first, np.mean(np.stack([a, b])); or when a "
            f"conversion such as np.asarray(x, dtype=float), np.array(x, dtype=...) or "
            f"np.float32(x) is applied to it (numpy offers no hook for those): write "
            f"x.astype(float) / np.astype(x, np.float32), which keep the derivative, or "
            f"skip the conversion for traced values."
        )

    def _refuse_conversion(self, call: str) -> Any:
        reduction = _reduction_reading(self)
        if reduction is not None:
            fname, keyword = reduction
            combine = _COMBINE.get(fname, f"np.{fname}(a) combined with x")
            raise ConversionError(
                f"dualad: np.{fname}(a, ..., {keyword}=<traced value>) with a plain array a: "
                f"numpy reads {keyword}= as a plain number (it never hands it to dualad), "
                f"which would drop its derivative. Reduce the plain array and combine the "
                f"result with the traced value instead: {combine}."
            )
        raise ConversionError(
            f"dualad: {call} of a traced value (shape {self.shape}) would drop its "
            f"derivative. Use numpy functions (np.sin, not math.sin; np.round, not round) "
            f"and keep values as arrays; to fill an array entry by entry allocate it with "
            f"np.empty_like(x) / np.zeros_like(x), not np.empty(n) (dualad does that for "
            f"functions it reaches by name, unless allocations='strict'); use ad.value(x) to read "
            f"the number deliberately (e.g. to print or log it). Comparisons (if x > 0:) "
            f"work as they are. (numpy itself calls {call} on arguments it does not hand to "
            f"dualad, such as initial= of a reduction of a plain array, np.add.reduce(a, "
            f"initial=x): write np.sum(a) + x instead.)"
        )

    def __float__(self) -> float:
        return self._refuse_conversion("float()")

    def __int__(self) -> int:
        return self._refuse_conversion("int()")

    def __complex__(self) -> complex:
        return self._refuse_conversion("complex()")

    def __round__(self, ndigits: Any = None) -> Any:
        return self._refuse_conversion("round()")

    def item(self, *args: Any) -> Any:
        return self._refuse_conversion(".item()")

    def tolist(self) -> Any:
        return self._refuse_conversion(".tolist()")

    def __format__(self, spec: str) -> str:
        """``f"{x:.3f}"`` prints the value (formatting is for reading, not computing)."""
        if not spec:
            return str(self)
        x: Any = self
        while isinstance(x, NumpyOverloads):
            x = x._primal()
        if spec and isinstance(x, np.ndarray) and x.ndim == 0:
            x = x[()]
        return format(x, spec)

    def __bool__(self) -> bool:
        outcome = bool(self._primal())
        observer = value_observer.get()
        if observer is not None:
            observer.on_bool(self, outcome)
        return outcome

    # attributes ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self._primal())

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return getattr(self._primal(), "dtype", np.dtype(np.float64))

    @property
    def T(self) -> Any:
        return np.transpose(self)

    @property
    def real(self) -> Any:
        return np.real(self)

    @property
    def imag(self) -> Any:
        return np.imag(self)

    def conj(self) -> Any:
        return np.conjugate(self)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d traced value")
        return shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key: Any) -> Any:
        return apply_operator(Method.instance(operator.getitem), (self, key), {})

    # array methods ---------------------------------------------------------------
    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        if len(shape) == 1:
            shape = shape[0]
        return np.reshape(self, shape, **kwargs)

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            return np.transpose(self, axes[0] or None)
        return np.transpose(self, axes or None)

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        return np.sum(self, *args, **kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        return np.mean(self, *args, **kwargs)

    def prod(self, *args: Any, **kwargs: Any) -> Any:
        return np.prod(self, *args, **kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        return np.max(self, *args, **kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        return np.min(self, *args, **kwargs)

    def dot(self, other: Any) -> Any:
        return np.dot(self, other)

    def ravel(self, order: Any = "C") -> Any:
        return np.ravel(self, order)

    def flatten(self, order: Any = "C") -> Any:
        return np.ravel(self, order)

    def squeeze(self, axis: Any = None) -> Any:
        return np.squeeze(self, axis)

    def clip(self, min: Any = None, max: Any = None, out: Any = None,  # noqa: A002
             **kwargs: Any) -> Any:
        """``ndarray.clip``: bounds by position or as ``min=`` / ``max=``, as numpy's
        method takes them."""
        if out is not None:
            kwargs["out"] = out
        return np.clip(self, min, max, **kwargs)

    # operators: set below from BINARY_OPERATORS (straight to the ufunc's operator)
    def __matmul__(self, other: Any) -> Any:
        return np.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return np.matmul(other, self)

    def __neg__(self) -> Any:
        return apply_operator(_NEGATIVE, (self,), {})

    def __pos__(self) -> Any:
        return np.positive(self)

    def __abs__(self) -> Any:
        return np.absolute(self)

    def __lt__(self, other: Any) -> Any:
        return np.less(self, other)

    def __le__(self, other: Any) -> Any:
        return np.less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return np.greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return np.greater_equal(self, other)

    def __eq__(self, other: Any) -> Any:
        return np.equal(self, other)

    def __ne__(self, other: Any) -> Any:
        return np.not_equal(self, other)

    __hash__ = object.__hash__


for _op_name, (_op_ufunc, _op_reflected) in BINARY_OPERATORS.items():
    setattr(NumpyOverloads, _op_name, _binary(_op_ufunc, _op_reflected))
del _op_name, _op_ufunc, _op_reflected


def _numpy_method(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(np, name)(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"np.{name}(self, ...), as ndarray.{name}."
    return method


def _in_place_method(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        self[...] = getattr(np, name)(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = (f"In place, as ndarray.{name}: self[...] = np.{name}(self, ...) "
                      f"(for arrays that may be written into).")
    return method


def _dropping_method(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"dualad: x.{name}() on a traced {type(self).__name__} (shape {self.shape}) would "
            f"drop its derivative (it reads raw memory or leaves numpy); call it on "
            f"ad.value(x) to use the number deliberately."
        )

    method.__name__ = name
    return method


def _view(self: Any, dtype: Any = None, type: Any = None) -> Any:  # noqa: A002
    """``x.view()`` (same dtype, same type): a view; other dtypes or types are refused."""
    if (dtype is None or np.dtype(dtype) == self.dtype) and type is None:
        return self[...]
    raise TypeError(
        f"dualad: x.view(dtype={dtype}, type={type}) reinterprets the memory of a traced "
        f"value, which has no derivative; use ad.value(x).view(...) deliberately."
    )


def _no_device(device: Any) -> Any:
    raise ValueError(f"dualad: traced values live on 'cpu'; cannot move to {device!r}")


def _resize(self: Any, *args: Any, **kwargs: Any) -> None:
    raise TypeError(
        "dualad: x.resize(...) changes a traced array's size in place; use "
        "y = np.resize(x, shape) (a new array) instead."
    )


# ndarray's methods that are numpy functions of the array: x.std() is np.std(x)
_FUNCTION_METHODS = (
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "choose",
    "conj", "conjugate", "cumprod", "cumsum", "diagonal", "nonzero", "ptp", "repeat",
    "round", "searchsorted", "std", "swapaxes", "take", "trace", "var",
)
for _name in _FUNCTION_METHODS:
    if _name not in NumpyOverloads.__dict__ or _name in ("conj", "conjugate"):
        setattr(NumpyOverloads, _name, _numpy_method(_name))
for _name in ("sort", "partition"):
    setattr(NumpyOverloads, _name, _in_place_method(_name))
for _name in ("byteswap", "dump", "dumps", "tobytes", "tofile", "getfield", "setfield"):
    setattr(NumpyOverloads, _name, _dropping_method(_name))
NumpyOverloads.compress = (  # type: ignore[attr-defined]
    lambda self, condition, axis=None: np.compress(condition, self, axis))
NumpyOverloads.view = _view  # type: ignore[attr-defined]
NumpyOverloads.resize = _resize  # type: ignore[attr-defined]
NumpyOverloads.fill = lambda self, value: self.__setitem__(Ellipsis, value)  # type: ignore
NumpyOverloads.put = lambda self, *a, **k: np.put(self, *a, **k)  # type: ignore
NumpyOverloads.real = property(lambda self: np.real(self))  # type: ignore
NumpyOverloads.imag = property(lambda self: np.imag(self))  # type: ignore
NumpyOverloads.flat = property(lambda self: np.ravel(self))  # type: ignore
NumpyOverloads.mT = property(lambda self: np.swapaxes(self, -1, -2))  # type: ignore
NumpyOverloads.device = property(lambda self: "cpu")  # type: ignore
NumpyOverloads.to_device = (  # type: ignore[attr-defined]
    lambda self, device, /, *, stream=None: self if device == "cpu" else _no_device(device))
NumpyOverloads.base = property(lambda self: None)  # type: ignore
NumpyOverloads.flags = property(lambda self: np.asarray(self._primal()).flags)  # type: ignore
NumpyOverloads.strides = property(  # type: ignore
    lambda self: np.asarray(self._primal()).strides)
NumpyOverloads.setflags = lambda self, *a, **k: None  # type: ignore
NumpyOverloads.itemsize = property(lambda self: self.dtype.itemsize)  # type: ignore
NumpyOverloads.nbytes = property(lambda self: self.size * self.dtype.itemsize)  # type: ignore
del _name


def _object_loop_method(ufunc: np.ufunc) -> Any:
    def method(self: Any) -> Any:
        return ufunc(self)

    method.__name__ = ufunc.__name__
    method.__doc__ = f"np.{ufunc.__name__}(self): numpy's object-array loops call this."
    return method


# numpy evaluates a unary ufunc on an object array by calling the method of that name
# on each element, so traced values inside np.array([...]) keep working.
for _name, _ufunc in list(vars(np).items()):  # not getattr: it would import np.f2py, np.ma ...
    if (isinstance(_ufunc, np.ufunc) and _ufunc.nin == 1 and _ufunc.nout == 1
            and not hasattr(NumpyOverloads, _ufunc.__name__)):
        setattr(NumpyOverloads, _ufunc.__name__, _object_loop_method(_ufunc))
del _name, _ufunc
