"""The dual number types that live inside Numba's nopython mode.

``DualType(width)`` is one number: its value and ``width`` partials held in a fixed-width
tuple (the width stays small: the Jacobian is computed in chunks of directions).
``DualArrayType(ndim, width)`` is an array of them: a float64 array of values and a
float64 array of partials with one more, last axis of length ``width``. Both are plain
structs (no boxing: they never leave compiled code). This module gives their data models,
constructors, element access, array creation and comparisons; the arithmetic and the
``math``/``np`` functions come from the rules tables (:mod:`dualad.njit.rule_overloads`).

Example:
    >>> import numba
    >>> from dualad.njit.dual_type import make_dual
    >>> @numba.njit
    ... def value_of_product(a, b):
    ...     d = make_dual(a, (1.0, 0.0))
    ...     return d.v * b, d.p
    >>> value_of_product(2.0, 3.0)
    (6.0, (1.0, 0.0))
"""

from __future__ import annotations

import operator

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.typeconv import Conversion
from numba.extending import (
    intrinsic,
    lower_cast,
    make_attribute_wrapper,
    models,
    overload,
    overload_attribute,
    overload_method,
    register_model,
)

__all__ = [
    "BUFFER_WRITE",
    "DualArrayIterType",
    "DualArrayType",
    "DualType",
    "CREATION_STANDINS",
    "ERROR_MARKER",
    "OVERLOAD_OPTIONS",
    "is_dual",
    "is_dual_array",
    "make_dual",
    "dual_array_maker",
    "dual_constant",
    "dual_linear",
    "load_dual",
    "store_dual",
    "store_number",
    "user_error",
]

#: Options of every overload: called from compiled code only, so no C or Python wrapper.
OVERLOAD_OPTIONS = {"no_cfunc_wrapper": True}

#: The start of the message of a dual number written into a float buffer: the drivers
#: then compile a version whose float allocations are dual arrays.
BUFFER_WRITE = "a dual number is written into"

#: Prefix of dualad's own messages raised while Numba types a function; the transforms
#: find it in Numba's error and raise it as a dualad error.
ERROR_MARKER = "[dualad-njit] "


def user_error(message: str) -> TypingError:
    """A typing error carrying a message for the user (see :data:`ERROR_MARKER`)."""
    return TypingError(ERROR_MARKER + message + " [end]")


class DualType(types.Type):
    """A dual number in nopython code: ``.v`` (float64) and ``.p`` (``width`` float64s)."""

    def __init__(self, width: int) -> None:
        self.width = int(width)
        super().__init__(name=f"DualNumber(width={self.width})")

    def unify(self, typingctx, other):
        """A variable holding a plain number and later a dual number (``s = 0.0``,
        ``s += x[i]``) becomes a dual number."""
        if isinstance(other, (types.Number, types.Boolean)):
            return self
        if isinstance(other, DualType) and other.width == self.width:
            return self
        return None

    def can_convert_from(self, typingctx, other):
        if isinstance(other, (types.Number, types.Boolean)):
            return Conversion.safe
        return None


class DualArrayType(types.IterableType):
    """An array of dual numbers: ``.values`` (ndim, C) and ``.partials`` (ndim + 1, C).
    A 1-d one iterates over its dual numbers (``y1, y2 = y``; see dualad.njit.idioms)."""

    def __init__(self, ndim: int, width: int, readonly: bool = False) -> None:
        self.ndim = int(ndim)
        self.width = int(width)
        self.readonly = bool(readonly)
        self.values_type = types.Array(types.float64, self.ndim, "C")
        self.partials_type = types.Array(types.float64, self.ndim + 1, "C")
        flag = ", readonly" if self.readonly else ""
        super().__init__(name=f"DualArray(ndim={self.ndim}, width={self.width}{flag})")

    @property
    def iterator_type(self) -> types.Type:
        if self.ndim != 1:
            raise user_error(f"iterating over a {self.ndim}-d array of dual numbers is not "
                             f"supported; index its elements (x[i, j]) in a loop")
        return DualArrayIterType(self)

    def unify(self, typingctx, other):
        """A variable holding the (read-only) input or a new array is read-only."""
        if isinstance(other, DualArrayType) and (other.ndim, other.width) == (
                self.ndim, self.width):
            return DualArrayType(self.ndim, self.width, self.readonly or other.readonly)
        return None

    def can_convert_to(self, typingctx, other):
        if isinstance(other, DualArrayType) and (other.ndim, other.width) == (
                self.ndim, self.width) and (other.readonly or not self.readonly):
            return Conversion.safe
        return None


class DualArrayIterType(types.SimpleIteratorType):
    """An iterator over a 1-d dual array, yielding dual numbers."""

    def __init__(self, array_type: DualArrayType) -> None:
        self.array_type = array_type
        super().__init__(f"iter({array_type})", DualType(array_type.width))


@register_model(DualArrayIterType)
class _DualArrayIterModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("array", fe_type.array_type), ("index", types.EphemeralPointer(types.intp))]
        super().__init__(dmm, fe_type, members)


def is_dual(t: types.Type) -> bool:
    """Whether the Numba type ``t`` is a dual number."""
    return isinstance(t, DualType)


def is_dual_array(t: types.Type) -> bool:
    """Whether the Numba type ``t`` is an array of dual numbers."""
    return isinstance(t, DualArrayType)


@register_model(DualType)
class _DualModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("v", types.float64), ("p", types.UniTuple(types.float64, fe_type.width))]
        super().__init__(dmm, fe_type, members)


@register_model(DualArrayType)
class _DualArrayModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("values", fe_type.values_type), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(DualType, "v", "v")
make_attribute_wrapper(DualType, "p", "p")
make_attribute_wrapper(DualArrayType, "values", "values")
make_attribute_wrapper(DualArrayType, "partials", "partials")


@intrinsic
def make_dual(typingctx, value, partials):
    """``make_dual(value, partials_tuple)``: a dual number (value cast to float64)."""
    if not isinstance(value, (types.Number, types.Boolean)):
        return None
    if not isinstance(partials, types.BaseTuple) or not all(
        isinstance(t, (types.Number, types.Boolean)) for t in partials.types
    ):
        return None
    width = len(partials.types)
    ptype = types.UniTuple(types.float64, width)
    sig = DualType(width)(value, partials)

    def codegen(context, builder, signature, args):
        dual = cgutils.create_struct_proxy(signature.return_type)(context, builder)
        dual.v = context.cast(builder, args[0], signature.args[0], types.float64)
        items = [
            context.cast(builder, builder.extract_value(args[1], i), t, types.float64)
            for i, t in enumerate(signature.args[1].types)
        ]
        dual.p = context.make_tuple(builder, ptype, items)
        return dual._getvalue()

    return sig, codegen


def _dual_array_maker(width: int, readonly: bool):
    @intrinsic
    def make(typingctx, values, partials):
        if not (
            isinstance(values, types.Array) and isinstance(partials, types.Array)
            and values.layout == "C" and partials.layout == "C"
            and partials.ndim == values.ndim + 1
        ):
            return None
        rtype = DualArrayType(values.ndim, width, readonly)
        sig = rtype(values, partials)

        def codegen(context, builder, signature, args):
            arr = cgutils.create_struct_proxy(rtype)(context, builder)
            context.nrt.incref(builder, signature.args[0], args[0])
            context.nrt.incref(builder, signature.args[1], args[1])
            arr.values = args[0]
            arr.partials = args[1]
            return arr._getvalue()

        return sig, codegen

    return make


_ARRAY_MAKERS: dict[tuple[int, bool], object] = {}


def dual_array_maker(width: int, readonly: bool = False):
    """The intrinsic ``make(values, partials)`` building a ``DualArrayType(ndim, width)``.

    ``readonly`` arrays (the arguments: their buffers are shared by every pass) cannot be
    written into; arrays made from them by ``np.empty_like`` & co. can.
    """
    maker = _ARRAY_MAKERS.get((width, readonly))
    if maker is None:
        maker = _ARRAY_MAKERS[(width, readonly)] = _dual_array_maker(width, readonly)
    return maker


@lower_cast(DualArrayType, DualArrayType)
def _dual_array_to_readonly(context, builder, fromty, toty, val):
    return val


# -- generated element access ------------------------------------------------------------

_SOURCES: dict[tuple, object] = {}


def _generated(key: tuple, source: str, name: str, namespace: dict) -> object:
    """Compile (once) a small generated Python function used as an overload body."""
    fn = _SOURCES.get(key)
    if fn is None:
        ns = dict(namespace)
        exec(compile(source, f"<dualad njit {name}>", "exec"), ns)  # noqa: S102
        fn = _SOURCES[key] = ns[name]
    return fn


def _index_expr(ndim: int, index_type: types.Type) -> str | None:
    """How to spell the element index ``i`` (or ``i[0], i[1]``) for an index type."""
    if ndim == 1 and isinstance(index_type, types.Integer):
        return "i"
    if isinstance(index_type, types.BaseTuple) and len(index_type.types) == ndim and all(
        isinstance(t, types.Integer) for t in index_type.types
    ):
        return ", ".join(f"i[{d}]" for d in range(ndim))
    return None


def _flat_index_lines(ndim: int, index: str) -> list[str]:
    """Statements computing ``flat``, the C-order element number (negative indices wrap)."""
    names = [f"i{d}" for d in range(ndim)]
    parts = [f"i[{d}]" for d in range(ndim)] if ndim > 1 else ["i"]
    lines = ["    s = a.values.shape"]
    for d, (name, part) in enumerate(zip(names, parts)):
        lines += [f"    {name} = {part}", f"    if {name} < 0:", f"        {name} += s[{d}]"]
    flat = names[0]
    for d in range(1, ndim):
        flat = f"({flat}) * s[{d}] + {names[d]}"
    lines.append(f"    flat = {flat}")
    return lines


def _getitem_impl(ndim: int, width: int, index: str):
    lines = ["def getitem(a, i):", *_flat_index_lines(ndim, index),
             "    return load_dual(a, flat)"]
    return _generated(("get", ndim, width, index), "\n".join(lines) + "\n", "getitem",
                      {"load_dual": load_dual})


def _setitem_impl(ndim: int, width: int, index: str, dual_value: bool):
    store = "store_dual" if dual_value else "store_number"
    lines = ["def setitem(a, i, d):", *_flat_index_lines(ndim, index),
             f"    {store}(a, flat, d)"]
    return _generated(("set", ndim, width, index, dual_value), "\n".join(lines) + "\n",
                      "setitem", {"store_dual": store_dual, "store_number": store_number})


# -- intrinsics: element access and the partials' linear combinations, emitted as LLVM
# (no per-width Python code to type, so the compile time hardly depends on the width) --


def _array_pointers(context, builder, arrty, arrval):
    arr = cgutils.create_struct_proxy(arrty)(context, builder, value=arrval)
    values = context.make_array(arrty.values_type)(context, builder, value=arr.values)
    partials = context.make_array(arrty.partials_type)(context, builder, value=arr.partials)
    return values.data, partials.data


def _dual_value(context, builder, width, v, items):
    dual = cgutils.create_struct_proxy(DualType(width))(context, builder)
    dual.v = v
    dual.p = context.make_tuple(builder, types.UniTuple(types.float64, width), items)
    return dual._getvalue()


def _parts(context, builder, dualty, dualval):
    dual = cgutils.create_struct_proxy(dualty)(context, builder, value=dualval)
    return dual.v, [builder.extract_value(dual.p, j) for j in range(dualty.width)]


@lower_cast(types.Number, DualType)
@lower_cast(types.Boolean, DualType)
def _number_to_dual(context, builder, fromty, toty, val):
    v = context.cast(builder, val, fromty, types.float64)
    zero = ir.Constant(ir.DoubleType(), 0.0)
    return _dual_value(context, builder, toty.width, v, [zero] * toty.width)


@intrinsic
def load_dual(typingctx, arr, flat):
    """``arr`` element number ``flat`` (C order, non-negative) as a dual number."""
    if not isinstance(arr, DualArrayType) or not isinstance(flat, types.Integer):
        return None
    width = arr.width

    def codegen(context, builder, sig, args):
        vptr, pptr = _array_pointers(context, builder, sig.args[0], args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        v = builder.load(builder.gep(vptr, [i]))
        base = builder.mul(i, ir.Constant(i.type, width))
        items = [builder.load(builder.gep(pptr, [builder.add(base, ir.Constant(i.type, j))]))
                 for j in range(width)]
        return _dual_value(context, builder, width, v, items)

    return DualType(width)(arr, flat), codegen


@intrinsic
def store_dual(typingctx, arr, flat, dual):
    """Write the dual number ``dual`` at element number ``flat`` of ``arr``."""
    if not (isinstance(arr, DualArrayType) and isinstance(flat, types.Integer)
            and isinstance(dual, DualType) and dual.width == arr.width):
        return None
    width = arr.width

    def codegen(context, builder, sig, args):
        vptr, pptr = _array_pointers(context, builder, sig.args[0], args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        v, items = _parts(context, builder, sig.args[2], args[2])
        builder.store(v, builder.gep(vptr, [i]))
        base = builder.mul(i, ir.Constant(i.type, width))
        for j, item in enumerate(items):
            builder.store(item, builder.gep(pptr, [builder.add(base, ir.Constant(i.type, j))]))
        return context.get_dummy_value()

    return types.none(arr, flat, dual), codegen


@intrinsic
def store_number(typingctx, arr, flat, value):
    """Write the plain number ``value`` (zero partials) at element number ``flat``."""
    if not (isinstance(arr, DualArrayType) and isinstance(flat, types.Integer)
            and isinstance(value, (types.Number, types.Boolean))):
        return None
    width = arr.width

    def codegen(context, builder, sig, args):
        vptr, pptr = _array_pointers(context, builder, sig.args[0], args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        v = context.cast(builder, args[2], sig.args[2], types.float64)
        builder.store(v, builder.gep(vptr, [i]))
        base = builder.mul(i, ir.Constant(i.type, width))
        zero = ir.Constant(ir.DoubleType(), 0.0)
        for j in range(width):
            builder.store(zero, builder.gep(pptr, [builder.add(base, ir.Constant(i.type, j))]))
        return context.get_dummy_value()

    return types.none(arr, flat, value), codegen


def _float(t: types.Type) -> bool:
    return isinstance(t, (types.Number, types.Boolean))


@intrinsic
def dual_linear(typingctx, value, terms):
    """``dual_linear(y, (d0, a0, d1, a1, ...))``: value ``y``, partials ``sum_k dk * ak.p``
    (``dk`` numbers, ``ak`` dual numbers of one width); a zero partial of ``ak`` adds zero
    whatever ``dk`` is (NaN-safe)."""
    if not _float(value) or not isinstance(terms, types.BaseTuple):
        return None
    ts = terms.types
    if len(ts) % 2 or not ts:
        return None
    coefs, duals = ts[0::2], ts[1::2]
    if not all(_float(c) for c in coefs) or not all(isinstance(d, DualType) for d in duals):
        return None
    widths = {d.width for d in duals}
    if len(widths) != 1:
        return None
    width = widths.pop()

    def codegen(context, builder, sig, args):
        y = context.cast(builder, args[0], sig.args[0], types.float64)
        zero = ir.Constant(ir.DoubleType(), 0.0)
        acc = None
        for k in range(len(coefs)):
            c = context.cast(builder, builder.extract_value(args[1], 2 * k), coefs[k],
                             types.float64)
            _, items = _parts(context, builder, duals[k], builder.extract_value(args[1], 2 * k + 1))
            # NaN-safe: a zero partial contributes zero, even times an inf or NaN derivative
            scaled = [builder.select(builder.fcmp_ordered("==", item, zero), zero,
                                     builder.fmul(c, item)) for item in items]
            acc = scaled if acc is None else [builder.fadd(a, b) for a, b in zip(acc, scaled)]
        return _dual_value(context, builder, width, y, acc)

    return DualType(width)(value, terms), codegen


@intrinsic
def dual_constant(typingctx, value, like):
    """A dual number of ``like``'s width with value ``value`` and zero partials."""
    if not _float(value) or not isinstance(like, DualType):
        return None
    width = like.width

    def codegen(context, builder, sig, args):
        y = context.cast(builder, args[0], sig.args[0], types.float64)
        zero = ir.Constant(ir.DoubleType(), 0.0)
        return _dual_value(context, builder, width, y, [zero] * width)

    return DualType(width)(value, like), codegen


def _describe(t: types.Type) -> str:
    if isinstance(t, DualType):
        return "a dual number"
    if isinstance(t, DualArrayType):
        return f"a {t.ndim}-d array of dual numbers"
    if isinstance(t, types.Array):
        return f"a {t.ndim}-d {t.dtype} array"
    return str(t)


@overload(operator.getitem, jit_options=OVERLOAD_OPTIONS)
def _dual_array_getitem(a, i):
    if not isinstance(a, DualArrayType):
        return None
    index = _index_expr(a.ndim, i)
    if index is None:
        raise user_error(
            f"indexing {_describe(a)} with {i} is not supported; index single elements "
            f"with integers (x[i] or x[i, j]) and loop over them"
        )
    return _getitem_impl(a.ndim, a.width, index)


@overload(operator.setitem, jit_options=OVERLOAD_OPTIONS)
def _dual_array_setitem(a, i, d):
    if isinstance(a, types.Array) and isinstance(d, DualType):
        raise user_error(
            f"{BUFFER_WRITE} {_describe(a)} (e.g. out = np.empty(n) or "
            f"np.zeros(n), then out[i] = ...), which can only hold plain floats; allocate "
            f"the array from a differentiated argument instead: out = np.empty_like(x) or "
            f"np.zeros_like(x)"
        )
    if not isinstance(a, DualArrayType):
        return None
    if a.readonly:
        raise user_error(
            "the function writes into one of its arguments (the array being "
            "differentiated, or another float array argument); differentiated code "
            "treats arguments as read-only: copy the array first (y = x.copy()) and "
            "write into the copy"
        )
    index = _index_expr(a.ndim, i)
    if index is None:
        raise user_error(
            f"assigning to {_describe(a)} at index {i} is not supported; assign single "
            f"elements with integers (out[i] = ... or out[i, j] = ...)"
        )
    if isinstance(d, DualType):
        if d.width != a.width:
            raise user_error(f"dual widths differ ({d.width} and {a.width})")
        return _setitem_impl(a.ndim, a.width, index, True)
    if isinstance(d, (types.Number, types.Boolean)):
        return _setitem_impl(a.ndim, a.width, index, False)
    raise user_error(f"cannot store {d} into {_describe(a)}")


@overload(len, jit_options=OVERLOAD_OPTIONS)
def _dual_array_len(a):
    if isinstance(a, DualArrayType):
        return lambda a: len(a.values)
    return None


@overload_attribute(DualArrayType, "shape", jit_options=OVERLOAD_OPTIONS)
def _dual_array_shape(a):
    return lambda a: a.values.shape


@overload_attribute(DualArrayType, "size", jit_options=OVERLOAD_OPTIONS)
def _dual_array_size(a):
    return lambda a: a.values.size


@overload_attribute(DualArrayType, "ndim", jit_options=OVERLOAD_OPTIONS)
def _dual_array_ndim(a):
    return lambda a: a.values.ndim


@overload_attribute(DualType, "real", jit_options=OVERLOAD_OPTIONS)
def _dual_real(a):
    return lambda a: a


# -- array creation --------------------------------------------------------------------


# Numba's own np.empty_like & co. accept any argument (a non-array becomes a 0-d array
# of it), and which of two matching overloads wins depends on import order. So the dual
# versions of user functions call these stand-ins instead (see dualad.njit.recompile):
# dual arrays get dual arrays, everything else goes to numpy's functions.


def empty_like(a, dtype=None):  # pragma: no cover - replaced by its overload
    """``np.empty_like`` in recompiled code."""
    return np.empty_like(a, dtype)


def zeros_like(a, dtype=None):  # pragma: no cover - replaced by its overload
    """``np.zeros_like`` in recompiled code."""
    return np.zeros_like(a, dtype)


def ones_like(a, dtype=None):  # pragma: no cover - replaced by its overload
    """``np.ones_like`` in recompiled code."""
    return np.ones_like(a, dtype)


def copy(a):  # pragma: no cover - replaced by its overload
    """``np.copy`` in recompiled code."""
    return np.copy(a)


#: numpy's array-creation functions and their stand-ins in recompiled code.
CREATION_STANDINS = {np.empty_like: empty_like, np.zeros_like: zeros_like,
                     np.ones_like: ones_like, np.copy: copy}


def _creation(kind: str):
    numpy_fn = getattr(np, kind)

    def typer(a, dtype=None):
        if not isinstance(a, DualArrayType):
            if dtype is None or isinstance(dtype, (types.Omitted, types.NoneType)):
                return lambda a, dtype=None: numpy_fn(a)
            return lambda a, dtype=None: numpy_fn(a, dtype)
        if not (dtype is None or isinstance(dtype, (types.Omitted, types.NoneType))):
            raise user_error(
                f"np.{kind}(x, dtype=...) of {_describe(a)}: leave dtype out, so the "
                f"new array holds dual numbers"
            )
        make = dual_array_maker(a.width)
        if kind == "empty_like":
            def impl(a, dtype=None):
                return make(np.empty_like(a.values), np.empty_like(a.partials))
        elif kind == "zeros_like":
            def impl(a, dtype=None):
                return make(np.zeros_like(a.values), np.zeros_like(a.partials))
        else:
            def impl(a, dtype=None):
                return make(np.ones_like(a.values), np.zeros_like(a.partials))
        return impl

    return typer


overload(empty_like, jit_options=OVERLOAD_OPTIONS)(_creation("empty_like"))
overload(zeros_like, jit_options=OVERLOAD_OPTIONS)(_creation("zeros_like"))
overload(ones_like, jit_options=OVERLOAD_OPTIONS)(_creation("ones_like"))


@overload(copy, jit_options=OVERLOAD_OPTIONS)
def _dual_array_np_copy(a):
    if not isinstance(a, DualArrayType):
        return lambda a: np.copy(a)
    make = dual_array_maker(a.width)
    return lambda a: make(a.values.copy(), a.partials.copy())


@overload_method(DualArrayType, "copy", jit_options=OVERLOAD_OPTIONS)
def _dual_array_copy(a):
    make = dual_array_maker(a.width)
    return lambda a: make(a.values.copy(), a.partials.copy())


# -- comparisons: on the values (branches follow the primal) ---------------------------

_COMPARISONS = {
    operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
    operator.eq: "==", operator.ne: "!=",
}


def _comparison(symbol: str):
    def typer(a, b):
        da, db = isinstance(a, DualType), isinstance(b, DualType)
        if not (da or db):
            return None
        if not all(isinstance(t, (DualType, types.Number, types.Boolean)) for t in (a, b)):
            return None
        left = "a.v" if da else "a"
        right = "b.v" if db else "b"
        src = f"def compare(a, b):\n    return {left} {symbol} {right}\n"
        return _generated(("cmp", symbol, da, db), src, "compare", {})

    return typer


for _op, _sym in _COMPARISONS.items():
    overload(_op, jit_options=OVERLOAD_OPTIONS)(_comparison(_sym))


@overload(bool, jit_options=OVERLOAD_OPTIONS)
def _dual_bool(a):
    if isinstance(a, DualType):
        return lambda a: a.v != 0.0
    return None


@overload(float, jit_options=OVERLOAD_OPTIONS)
def _dual_float(a):
    if isinstance(a, DualType):
        raise user_error(
            "float(x) of a dual number would drop its derivative; keep the number as it is "
            "(arithmetic and math/np functions accept it)"
        )
    return None
