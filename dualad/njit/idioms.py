"""How nopython code is written, for dual numbers: buffers, lists of scalars, unpacking.

* ``np.zeros(n)`` / ``np.empty(n)`` / ``np.ones(n)`` / ``np.full(n, v)`` (float, ``n`` an
  int or a tuple) in a dual version made for width ``w`` (:func:`allocation_standins`)
  are dual arrays of that width: the driver compiles such a version when the plain one
  fails because a dual number is written into a float buffer (the array type is inferred
  from the writes, by trying);
* ``np.array([a, b, c])`` / ``np.asarray(...)`` of dual numbers (a list or a tuple,
  numbers mixed in) are dual arrays (:data:`ARRAY_STANDINS`);
* ``y1, y2, y3 = y`` and ``for v in y`` on a 1-d dual array (iteration);
* ``np.sum(a)`` / ``a.sum()`` and ``np.dot(a, b)`` of 1-d dual arrays (and float arrays).

Example:
    >>> import numba, numpy as np, dualad as ad
    >>> @numba.njit
    ... def rhs(t, y):
    ...     y1, y2 = y
    ...     out = np.zeros(2)
    ...     out[0] = y1 * y2
    ...     out[1] = np.sum(y) + np.dot(y, y)
    ...     return out
    >>> ad.ode_jacobian(rhs)(0.0, np.array([1.0, 2.0]))
    array([[2., 1.],
           [3., 5.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.imputils import RefType, impl_ret_borrowed, iternext_impl, lower_builtin
from numba.extending import overload, overload_method

from .dual_type import (
    OVERLOAD_OPTIONS,
    DualArrayIterType,
    DualArrayType,
    DualType,
    dual_array_maker,
    load_dual,
    make_dual,
    store_dual,
    store_number,
    user_error,
)

__all__ = ["ARRAY_STANDINS", "allocation_standins", "array", "asarray"]


def _plain_dtype(dtype: Any) -> bool:
    """Whether an allocation's ``dtype`` asks for something other than float64."""
    if dtype is None or isinstance(dtype, (types.Omitted, types.NoneType)):
        return False
    if isinstance(dtype, types.NumberClass):
        return dtype.dtype != types.float64
    if isinstance(dtype, types.DType):
        return dtype.dtype != types.float64
    if isinstance(dtype, types.Function) and getattr(dtype, "typing_key", None) is float:
        return False
    return True


def _shape_kind(shape: Any) -> str | None:
    if isinstance(shape, types.Integer):
        return "int"
    if isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer)
                                                  for t in shape.types):
        return "tuple"
    return None


_STANDINS: dict[int, dict[str, Any]] = {}


def allocation_standins(width: int) -> dict[str, Any]:
    """numpy's float allocators for a dual version of ``width``: name -> stand-in."""
    found = _STANDINS.get(width)
    if found is not None:
        return found
    make = dual_array_maker(width)

    def zeros(shape, dtype=None):  # pragma: no cover - replaced by its overload
        return np.zeros(shape)

    def empty(shape, dtype=None):  # pragma: no cover - replaced by its overload
        return np.empty(shape)

    def ones(shape, dtype=None):  # pragma: no cover - replaced by its overload
        return np.ones(shape)

    def full(shape, fill_value, dtype=None):  # pragma: no cover - replaced by its overload
        return np.full(shape, fill_value)

    def typer(kind: str):
        numpy_fn = getattr(np, kind)

        def type_allocation(shape, dtype=None):
            if _plain_dtype(dtype):
                return lambda shape, dtype=None: numpy_fn(shape, dtype)
            shape_kind = _shape_kind(shape)
            if shape_kind is None:
                return None
            fill = np.ones if kind == "ones" else np.zeros if kind == "zeros" else np.empty
            if shape_kind == "int":
                def impl(shape, dtype=None):
                    return make(fill(shape), np.zeros((shape, width)))
            else:
                def impl(shape, dtype=None):
                    return make(fill(shape), np.zeros(shape + (width,)))
            return impl

        return type_allocation

    def type_full(shape, fill_value, dtype=None):
        if _plain_dtype(dtype) or not isinstance(fill_value, (types.Float, DualType)):
            return lambda shape, fill_value, dtype=None: np.full(shape, fill_value, dtype)
        shape_kind = _shape_kind(shape)
        if shape_kind is None:
            return None
        if isinstance(fill_value, DualType):
            def impl(shape, fill_value, dtype=None):
                values = np.full(shape, fill_value.v)
                out = make(values, np.zeros(values.shape + (width,)))
                for i in range(values.size):
                    store_dual(out, i, fill_value)
                return out
            return impl

        def impl_number(shape, fill_value, dtype=None):
            values = np.full(shape, fill_value)
            return make(values, np.zeros(values.shape + (width,)))
        return impl_number

    for fn in (zeros, empty, ones):
        overload(fn, jit_options=OVERLOAD_OPTIONS)(typer(fn.__name__))
    overload(full, jit_options=OVERLOAD_OPTIONS)(type_full)
    found = _STANDINS[width] = {"zeros": zeros, "empty": empty, "ones": ones, "full": full}
    return found


# -- np.array / np.asarray of dual scalars ---------------------------------------------


def array(obj, dtype=None):  # pragma: no cover - replaced by its overload
    """``np.array`` in recompiled code."""
    return np.array(obj)


def asarray(obj, dtype=None):  # pragma: no cover - replaced by its overload
    """``np.asarray`` in recompiled code."""
    return np.asarray(obj)


def _sequence_of_duals(obj: Any) -> tuple[int, tuple] | None:
    """``(width, element types)`` of a list / tuple holding dual numbers, else None."""
    if isinstance(obj, types.BaseTuple):
        items = tuple(obj.types)
    elif isinstance(obj, types.List):
        items = (obj.dtype,)
    else:
        return None
    widths = {t.width for t in items if isinstance(t, DualType)}
    if not widths:
        return None
    if len(widths) > 1:
        raise user_error("np.array of dual numbers of different widths")
    bad = [t for t in items if not isinstance(t, (DualType, types.Number, types.Boolean))]
    if bad:
        raise user_error(f"np.array of dual numbers and {bad[0]}: only numbers and dual "
                         f"numbers can be put in one array (a 1-d list or tuple)")
    return widths.pop(), items


_GENERATED: dict[tuple, Any] = {}


def _tuple_builder(width: int, items: tuple) -> Any:
    key = (width, tuple(isinstance(t, DualType) for t in items))
    fn = _GENERATED.get(key)
    if fn is not None:
        return fn
    lines = ["def build(obj, dtype=None):",
             f"    out = make(np.empty({len(items)}), np.zeros(({len(items)}, {width})))"]
    for i, t in enumerate(items):
        store = "store_dual" if isinstance(t, DualType) else "store_number"
        lines.append(f"    {store}(out, {i}, obj[{i}])")
    lines.append("    return out")
    namespace = {"np": np, "make": dual_array_maker(width), "store_dual": store_dual,
                 "store_number": store_number}
    exec(compile("\n".join(lines) + "\n", "<dualad njit array>", "exec"),  # noqa: S102
         namespace)
    fn = _GENERATED[key] = namespace["build"]
    return fn


def _array_typer(numpy_fn: Any, copy: bool):
    def type_array(obj, dtype=None):
        if isinstance(obj, DualArrayType):
            if _plain_dtype(dtype):
                raise user_error("np.array(x, dtype=...) of an array of dual numbers would "
                                 "drop its derivatives; leave dtype out")
            if copy:
                make = dual_array_maker(obj.width)
                return lambda obj, dtype=None: make(obj.values.copy(), obj.partials.copy())
            return lambda obj, dtype=None: obj
        found = _sequence_of_duals(obj)
        if found is None:
            if dtype is None or isinstance(dtype, (types.Omitted, types.NoneType)):
                return lambda obj, dtype=None: numpy_fn(obj)
            return lambda obj, dtype=None: numpy_fn(obj, dtype)
        width, items = found
        if isinstance(obj, types.BaseTuple):
            return _tuple_builder(width, items)
        make = dual_array_maker(width)

        def from_list(obj, dtype=None):
            n = len(obj)
            out = make(np.empty(n), np.zeros((n, width)))
            for i in range(n):
                store_dual(out, i, obj[i])
            return out
        return from_list

    return type_array


overload(array, jit_options=OVERLOAD_OPTIONS)(_array_typer(np.array, True))
overload(asarray, jit_options=OVERLOAD_OPTIONS)(_array_typer(np.asarray, False))

#: numpy's list-to-array functions and their stand-ins in recompiled code.
ARRAY_STANDINS = {np.array: array, np.asarray: asarray}


# -- iteration: ``y1, y2 = y`` and ``for v in y`` on a 1-d dual array ---------------------


@lower_builtin("getiter", DualArrayType)
def _getiter(context, builder, sig, args):
    [arrty], [arr] = sig.args, args
    it = context.make_helper(builder, sig.return_type)
    it.index = cgutils.alloca_once_value(builder, context.get_constant(types.intp, 0))
    it.array = arr
    context.nrt.incref(builder, arrty, arr)
    return impl_ret_borrowed(context, builder, sig.return_type, it._getvalue())


@lower_builtin("iternext", DualArrayIterType)
@iternext_impl(RefType.BORROWED)
def _iternext(context, builder, sig, args, result):
    [itty], [itval] = sig.args, args
    it = context.make_helper(builder, itty, value=itval)
    arrty = itty.array_type
    arr = cgutils.create_struct_proxy(arrty)(context, builder, value=it.array)
    values = context.make_array(arrty.values_type)(context, builder, value=arr.values)
    n = builder.extract_value(values.shape, 0)
    index = builder.load(it.index)
    is_valid = builder.icmp_signed("<", index, n)
    result.set_valid(is_valid)
    with builder.if_then(is_valid):
        sig_load = DualType(arrty.width)(arrty, types.intp)
        load = context.compile_internal(builder, lambda a, i: load_dual(a, i), sig_load,
                                        [it.array, index])
        result.yield_(load)
        builder.store(builder.add(index, context.get_constant(types.intp, 1)), it.index)


# -- reductions and products ------------------------------------------------------------


@overload(np.sum, jit_options=OVERLOAD_OPTIONS)
def _dual_sum(a):
    if not isinstance(a, DualArrayType):
        return None

    def impl(a):
        n = a.values.size
        s = _zero(a)
        for i in range(n):
            s = s + load_dual(a, i)
        return s
    return impl


@overload_method(DualArrayType, "sum", jit_options=OVERLOAD_OPTIONS)
def _dual_sum_method(a):
    return lambda a: np.sum(a)


def _zero(a):  # pragma: no cover - replaced by its overload
    return 0.0


@overload(_zero, jit_options=OVERLOAD_OPTIONS)
def _zero_dual(a):
    if not isinstance(a, DualArrayType):
        return None
    zero_partials = (0.0,) * a.width
    return lambda a: make_dual(0.0, zero_partials)


@overload(np.dot, jit_options=OVERLOAD_OPTIONS)
def _dual_dot(a, b):
    da, db = isinstance(a, DualArrayType), isinstance(b, DualArrayType)
    if not (da or db):
        return None
    for t in (a, b):
        if not ((isinstance(t, DualArrayType) and t.ndim == 1)
                or (isinstance(t, types.Array) and t.ndim == 1)):
            raise user_error(f"np.dot of {t} is not supported for dual numbers; np.dot "
                             f"takes two 1-d arrays here (write matrix products as loops)")
    def impl(a, b):
        n = len(a)
        if len(b) != n:
            raise ValueError("np.dot: the two arrays have different lengths")
        s = _zero(dual_of(a, b))
        for i in range(n):
            s = s + a[i] * b[i]
        return s
    return impl


def dual_of(a, b):  # pragma: no cover - replaced by its overload
    return a


@overload(dual_of, jit_options=OVERLOAD_OPTIONS)
def _dual_of(a, b):
    if isinstance(a, DualArrayType):
        return lambda a, b: a
    if isinstance(b, DualArrayType):
        return lambda a, b: b
    return None
