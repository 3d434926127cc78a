"""Batched dual numbers: a value together with ``k`` tangent directions (forward mode).

A :class:`Dual` holds ``value`` (shape ``S``) and ``partials`` (shape ``S + (k,)``): the
derivatives of the value along ``k`` directions, carried at once. Numpy calls on Duals
return Duals; the tangent rules that do this are ``forward`` methods for Dual arguments
(elementwise ones come from the rules tables, see :mod:`dualad.forward_mode.elementwise`).

Every differentiation owns a :class:`Tag` (a fresh level). A call is handled by the
innermost tag among its arguments; Duals of other (outer) tags are constants to it, so
nested derivatives never mix partials. Hand-made Duals (``tag=None``) share one default
tag, lower than every transform's.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Dual(np.array([1.0, 2.0]), np.eye(2))
    >>> y = x * x + np.sin(0.0)
    >>> y.value, y.partials
    (array([1., 4.]), array([[2., 0.],
           [0., 4.]]))

Rule writers use :func:`tangent_parts` to split a call's arguments::

    @ad.forward.dispatch
    def forward(op: ad.Method[my_scale], x: ad.Dual, c: object):
        tag, ((xv, xp), (cv, cp)) = tangent_parts((x, c))
        return Dual(my_scale(xv, cv), xp * cv, tag)   # c treated as a constant here
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import plum

from ..core.arguments import is_differentiable_output
from ..core.arguments import value as _plain_value
from ..core.array_protocol import (
    BINARY_OPERATORS,
    HOLDERS,
    NumpyOverloads,
    shape_of,
)
from ..core.dispatch import forward, missing_rule_message
from ..core.errors import MissingRuleError, ShapeError, TagMismatchError
from ..core.operators import Broadcasted, Method, Operator
from ..core.tracing import Traced, apply_operator, new_level, normalize_arguments
from ..derivatives.kinds import scale_scalar_tangent
from ..derivatives.tangent_product import tangent_product

__all__ = [
    "Dual",
    "Tag",
    "DEFAULT_TAG",
    "tangent_parts",
    "innermost_tag",
    "value_at",
    "partials_at",
    "dual_result",
    "zero_partials",
    "FastPath",
    "ROW_MAX",
    "ROW",
    "active_fast_path",
    "new_dual",
    "register_fast_ufunc",
    "register_fast_function",
    "register_scalar_ufunc",
    "register_lean_ufunc",
    "register_forward",
    "dual_signatures",
    "partials_key",
]


class Tag:
    """The identity of one differentiation; ``level`` orders nested ones (higher = inner).

    Example:
        >>> from dualad.forward_mode.dual import Tag
        >>> Tag().level < Tag().level
        True
    """

    __slots__ = ("level", "name")

    def __init__(self, level: int | None = None, name: str = "") -> None:
        self.level = new_level() if level is None else int(level)
        self.name = name

    def __repr__(self) -> str:
        extra = f", {self.name!r}" if self.name else ""
        return f"Tag({self.level}{extra})"


#: The tag of Duals made by hand with ``tag=None``; lower than every transform's tag.
DEFAULT_TAG = Tag(name="default")

# Plain (untraced) scalars the scalar fast path combines with a scalar Dual.
_PLAIN_SCALARS = frozenset((float, int, np.float64))
_F64 = np.float64
_ZERO = np.float64(0.0)
_ND = np.ndarray
_F64_DTYPE = np.dtype(np.float64)

#: The most directions a 0-d Dual keeps as a list of floats (a *row*, see
#: :mod:`dualad.forward_mode.rows`) instead of an array. Measured per operation on a 0-d
#: Dual (one thread, loaded 2-core AMD EPYC; µs, row against array): x * y 1.4 / 2.7 at
#: k = 3, 1.7 / 2.9 at k = 8, 2.0 / 2.8 at k = 16, 2.4 / 2.9 at k = 24, 2.8 / 2.8 at k = 32;
#: 2 * x 1.2 / 1.8 at k = 3, 1.6 / 1.9 at k = 24, 1.8 / 1.8 at k = 32.
ROW_MAX = 24


class _RowMark:
    """The ``_d`` of a row Dual (its partials, ``_p``, a list): one check on hot paths tells
    rows, scalars with one direction (``_d`` their derivative) and arrays (``_d`` None)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ROW"


#: ``new_dual(value, row, tag, ROW)`` makes a row Dual.
ROW = _RowMark()


class FastPath:
    """The fast paths of one ufunc or numpy function: calls that skip numpy's protocols and
    plum for the rules dualad registers itself, from the narrowest case to the widest.

    - ``scalar``: ``(value, derivatives)`` for 0-d Duals with one direction and plain
      numbers: ``value(*args)`` is the result, ``derivatives(*args, y)`` one partial per
      argument (or ``None``);
    - ``row``: ``impl(*args)`` for 0-d Duals whose partials are a list of floats (a few
      directions, see :mod:`dualad.forward_mode.rows`) and plain numbers, or ``None``;
    - ``lean``: ``impl(*inputs)`` for plain numpy operands of one tag and shape; it returns
      ``None`` for calls it does not handle (the next tier decides);
    - ``general``: ``impl(args, kwargs)``, the rule's whole tangent for calls whose innermost
      traced argument is a Dual;
    - ``unpacked``: ``impl(*args, **kwargs)``, the same as ``general`` without packing
      (numpy functions).

    Every function has two records: the registered one (what dualad provides) and the active
    one, read on hot paths; :func:`_refresh_fast_paths` derives the active records in one
    place, dropping a function as soon as someone registers their own ``forward`` method for
    it with Dual arguments, so a user's rule always wins. Until then a stale record is
    empty, and calls take the checking entry, which refreshes.
    """

    __slots__ = ("scalar", "row", "lean", "general", "unpacked")

    def __init__(self) -> None:
        self.scalar: tuple[Callable[..., Any], Callable[..., tuple]] | None = None
        self.row: Callable[..., Any] | None = None
        self.lean: Callable[..., Any] | None = None
        self.general: Callable[[tuple, dict], Any] | None = None
        self.unpacked: Callable[..., Any] | None = None

    def clear(self) -> None:
        self.scalar = self.row = self.lean = self.general = self.unpacked = None

    def __repr__(self) -> str:
        tiers = [n for n in self.__slots__ if getattr(self, n) is not None]
        return f"FastPath({', '.join(tiers) or 'empty'})"


# function -> the fast paths dualad registered for it, and the active ones (hot paths).
_REGISTERED: dict[Any, FastPath] = {}
_ACTIVE: dict[Any, FastPath] = {}
# Whether forward gained methods since the active fast paths were derived.
_STALE = [True]


def _registered(f: Any) -> FastPath:
    rec = _REGISTERED.get(f)
    if rec is None:
        rec = _REGISTERED[f] = FastPath()
    return rec


def active_fast_path(f: Any) -> FastPath:
    """The active :class:`FastPath` record of ``f`` (one object per function, for good:
    operators hold it, refreshing fills it in place)."""
    rec = _ACTIVE.get(f)
    if rec is None:
        rec = _ACTIVE[f] = FastPath()
    return rec


def register_fast_ufunc(ufunc: Any, impl: Callable[[tuple, dict], Any]) -> None:
    """Let ``ufunc(*Duals)`` call ``impl(args, kwargs)`` without going through dispatch.

    ``impl`` must be the same computation as the ``forward`` method registered for
    ``Broadcasted[ufunc]``; it sees calls whose innermost traced argument is a Dual.
    """
    _registered(ufunc).general = impl
    _mark_stale()


def register_fast_function(func: Any, impl: Callable[[tuple, dict], Any],
                           direct: Callable[..., Any] | None = None) -> None:
    """As :func:`register_fast_ufunc`, for a numpy function reached via ``__array_function__``;
    ``direct(*args, **kwargs)``, when given, is the same impl called without packing."""
    rec = _registered(func)
    rec.general = impl
    rec.unpacked = direct
    _mark_stale()


def register_scalar_ufunc(ufunc: Any, derivatives: Callable[..., tuple],
                          value: Callable[..., Any] | None = None,
                          row: Callable[..., Any] | None = None) -> None:
    """Scalar fast path: ``value(*args)`` (default: the ufunc) is the result and
    ``derivatives(*args, y)`` gives one partial per argument (or None); ``row(*args)`` the
    result for 0-d Duals with a few directions held as lists (or None to decline)."""
    rec = _registered(ufunc)
    rec.scalar = (ufunc if value is None else value, derivatives)
    rec.row = row
    _mark_stale()


def register_lean_ufunc(ufunc: Any, impl: Callable[..., Any]) -> None:
    """Try ``impl(*inputs)`` first for ``ufunc`` on Duals; it returns ``None`` for calls it
    does not handle. It must agree with the ``forward`` method of ``Broadcasted[ufunc]``."""
    _registered(ufunc).lean = impl
    _mark_stale()


def _mark_stale() -> None:
    _STALE[0] = True
    for rec in _ACTIVE.values():  # hot paths take the checking entry until refreshed
        rec.clear()


forward.on_change(_mark_stale)


def _refresh_fast_paths() -> None:
    """Re-derive the active fast paths: a function keeps its fast paths unless a method that
    is not dualad's own (a user's rule) takes Dual arguments for it."""
    replaced = set()
    for m in forward.user_methods:  # not .methods: that would resolve every rule
        sig = m.signature
        types = tuple(sig.types)
        varargs = getattr(sig, "varargs", None)
        rest = types[1:] + ((varargs,) if isinstance(varargs, type) else ())
        if types and any(isinstance(t, type) and issubclass(t, Dual) for t in rest):
            replaced.add(getattr(types[0], "f", None))
    for rec in _ACTIVE.values():
        rec.clear()
    for f, reg in _REGISTERED.items():
        if f in replaced:
            continue
        rec = active_fast_path(f)
        rec.lean = reg.lean
        if reg.general is not None:
            rec.general = reg.general
            rec.scalar = reg.scalar
            rec.row = reg.row
            rec.unpacked = reg.unpacked
    _STALE[0] = False


def _as_value(value: Any) -> Any:
    if isinstance(value, Traced):
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return np.float64(value) if value.dtype.kind in "fiub" else value[()]
        if value.dtype.kind in "iub":
            return value.astype(np.float64)
        return value
    if isinstance(value, (float, int, np.floating, np.integer, bool, np.bool_)):
        return np.float64(value)
    arr = np.asarray(value)
    if arr.dtype.kind in "iub":
        arr = arr.astype(np.float64)
    return arr[()] if arr.ndim == 0 else arr


# Fallbacks for a call with Dual arguments and no tangent rule, tried in order before
# MissingRuleError: ``fallback(op, args, kwargs)`` returns the result or NotImplemented.
# (The rule files register one that differentiates the reverse-mode rule.)
_TANGENT_FALLBACKS: list[Any] = []


def register_tangent_fallback(fallback: Any) -> None:
    """Try ``fallback(op, args, kwargs)`` for calls on Duals that have no tangent rule."""
    if fallback not in _TANGENT_FALLBACKS:
        _TANGENT_FALLBACKS.append(fallback)


def new_dual(value: Any, partials: Any, tag: Tag, d: Any = None) -> Dual:
    """A Dual made without checks (rules): ``partials`` of shape ``value.shape + (k,)``, or
    ``partials=None`` and the scalar derivative ``d`` for a 0-d Dual with one direction."""
    obj = _new_object(Dual)
    obj.value = value
    obj._p = partials
    obj._d = d
    obj.tag = tag
    obj.level = tag.level
    return obj


_new_object = object.__new__


class Dual(Traced, NumpyOverloads):
    """A value with ``k`` tangent directions: ``Dual(value, partials, tag=None)``.

    ``value`` has shape ``S``, ``partials`` shape ``S + (k,)``. ``tag`` (a :class:`Tag`)
    names the differentiation the partials belong to; ``None`` means the shared default
    tag of hand-made Duals.

    Example:
        >>> import numpy as np, dualad as ad
        >>> d = ad.Dual(2.0, [1.0])
        >>> e = np.exp(d * 3)
        >>> bool(np.isclose(e.partials[0], 3 * np.exp(6.0)))
        True
    """

    __slots__ = ("value", "_p", "_d", "tag", "level", "__weakref__")
    _needs_tangent_rule = True

    def __init__(self, value: Any, partials: Any, tag: Tag | None = None) -> None:
        if tag is None:
            tag = DEFAULT_TAG
        elif not isinstance(tag, Tag):
            raise TypeError(
                f"Dual: tag must be a dualad.forward_mode.dual.Tag or None, got {type(tag).__name__}; "
                f"omit it for hand-made Duals."
            )
        value = _as_value(value)
        if not isinstance(partials, Traced):
            partials = np.asarray(partials, dtype=np.float64)
        vs, ps = shape_of(value), shape_of(partials)
        if len(ps) != len(vs) + 1 or ps[:-1] != vs:
            raise ShapeError(
                f"Dual: partials must have shape value.shape + (k,) = {vs} + (k,), got "
                f"{ps}; e.g. Dual(x, np.ones(x.shape + (1,))) for one direction."
            )
        self.value = value
        self._p = partials
        self._d = None
        self.tag = tag
        self.level = tag.level

    # -- construction without checks (rules): see new_dual ---------------------------
    _make = staticmethod(new_dual)
    _scalar = staticmethod(lambda value, d, tag: new_dual(value, None, tag, d))

    # -- attributes ------------------------------------------------------------------
    @property
    def partials(self) -> Any:
        """The tangents, shape ``value.shape + (k,)``."""
        p = self._p
        if p is None:
            p = self._p = np.array([self._d], dtype=np.float64)
        elif p.__class__ is list:  # a row (see dualad.forward_mode.rows)
            p = self._p = np.array(p, dtype=np.float64)
            self._d = None
        return p

    @partials.setter
    def partials(self, p: Any) -> None:
        self._p = p
        self._d = None

    @property
    def k(self) -> int:
        """The number of tangent directions."""
        p = self._p
        if p is None:
            return 1
        if p.__class__ is list:
            return len(p)
        return shape_of(p)[-1]

    def _primal(self) -> Any:
        return self.value

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value)

    @property
    def dtype(self) -> np.dtype:
        return getattr(self.value, "dtype", np.dtype(np.float64))

    def __repr__(self) -> str:
        return f"Dual({self.value!r}, {self.partials!r}, tag={self.tag!r})"

    def copy(self) -> Dual:
        """A Dual with copies of the value and the partials."""
        return Dual._make(np.copy(self.value), np.copy(self.partials), self.tag)

    def __copy__(self) -> Dual:
        return new_dual(self.value, self._p, self.tag, self._d)  # (rows are never written to)

    def __deepcopy__(self, memo: dict) -> Dual:
        return self.copy()

    def __reduce__(self) -> tuple:
        return (_rebuild, (self.value, self.partials, self.tag.level, self.tag.name))

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        """Float dtypes keep the derivative (cast as numpy casts: ``np.astype``); other
        dtypes give the plain value."""
        if np.dtype(dtype).kind in "fc":
            if np.dtype(dtype) != getattr(self.value, "dtype", np.dtype(float)):
                return np.astype(self, dtype)  # type: ignore[call-overload]
            return self.copy() if copy else self
        return np.asarray(_strip(self.value)).astype(dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if dtype is None and type(self.value) is np.float64:  # np.array([x, y]) of scalars
            holder = np.empty((), dtype=object)
            holder[()] = self
            HOLDERS.made += 1  # (count_object_holder, inline)
            return holder
        return NumpyOverloads.__array__(self, dtype, copy)

    # -- dispatch --------------------------------------------------------------------
    @classmethod
    def _apply(cls, op: Operator, args: tuple, kwargs: dict, level: int) -> Any:
        return forward(op, *args, **kwargs)

    @classmethod
    def _without_tangent_rule(cls, op: Operator, args: tuple, kwargs: dict) -> Any:
        """``forward``'s fallback for Dual arguments: fine only for a result with no
        derivative (np.shape, np.argmax, np.isclose, ...), else :class:`MissingRuleError`."""
        found, out = _on_values_if_constant(op, args, kwargs)
        if found:
            return out
        for fallback in _TANGENT_FALLBACKS:
            out = fallback(op, args, kwargs)
            if out is not NotImplemented:
                return out
        raise MissingRuleError(missing_rule_message(op, args, "forward"))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            if len(inputs) == 1:
                return _unary_entry(ufunc, self)
            if len(inputs) == 2:
                return _binary_entry(ufunc, inputs[0], inputs[1])
            return _call_ufunc(ufunc, inputs)
        return NumpyOverloads.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if _STALE[0]:
            _refresh_fast_paths()
        rec = _ACTIVE.get(func)
        if rec is not None and _duals_and_constants(args, kwargs):  # (the common case)
            impl = rec.unpacked
            if impl is not None:
                return impl(*args, **kwargs)
            if rec.general is not None:
                return rec.general(args, kwargs)
        normalized = normalize_arguments(args)
        if normalized is not None:  # foreign arrays, object arrays of traced values
            return apply_operator(Method.instance(func), args, kwargs)
        if rec is not None and rec.general is not None and _dual_is_innermost(args, kwargs):
            impl = rec.unpacked
            return impl(*args, **kwargs) if impl is not None else rec.general(args, kwargs)
        return NumpyOverloads.__array_function__(self, func, types, args, kwargs)

    # -- Python operators: the ufunc's fast path, else its rule (set below) -----------------
    # -- in-place operators: numpy semantics (the array is updated when possible) ------
    def _inplace(self, result: Any) -> Any:
        own = self.value
        if type(own) is np.ndarray:  # numpy keeps the array's shape and dtype kind
            got = np.shape(_plain_value(result))
            if got != own.shape:
                raise ValueError(
                    f"non-broadcastable output operand with shape {own.shape} doesn't match "
                    f"the broadcast shape {got} (an in-place operator keeps the array's "
                    f"shape; write y = y op v for a new array)"
                )
            kind = np.result_type(_plain_value(result)).kind
            if kind == "c" and own.dtype.kind != "c":
                raise TypeError(
                    f"Cannot cast an in-place operator's complex result to {own.dtype!r} with "
                    f"casting rule 'same_kind' (as numpy); write y = y op v for a new "
                    f"complex array."
                )
        if (
            type(result) is Dual
            and result.tag is self.tag
            and isinstance(self.value, np.ndarray)
            and isinstance(self._p, np.ndarray)
            and isinstance(result.value, np.ndarray)
            and isinstance(result.partials, np.ndarray)
            and result.value.shape == self.value.shape
            and result.partials.shape == self._p.shape
            and self.value.flags.writeable
            and self._p.flags.writeable
        ):
            self.value[...] = result.value
            self._p[...] = result.partials
            return self
        return result

    def __iadd__(self, other: Any) -> Any:
        return self._inplace(self + other)

    def __isub__(self, other: Any) -> Any:
        return self._inplace(self - other)

    def __imul__(self, other: Any) -> Any:
        return self._inplace(self * other)

    def __itruediv__(self, other: Any) -> Any:
        return self._inplace(self / other)

    def __ipow__(self, other: Any) -> Any:
        return self._inplace(self ** other)

    def __imatmul__(self, other: Any) -> Any:
        return self._inplace(self @ other)

    # -- indexing: the getitem rule's fast path, else its rule ---------------------------
    def __getitem__(self, key: Any) -> Any:
        impl = _GETITEM_PATH.unpacked
        if impl is None:
            if _STALE[0]:
                _refresh_fast_paths()
            impl = _GETITEM_PATH.unpacked
        if impl is not None:
            tk = type(key)
            if tk is int:  # y[i] of a vector with a few directions: a row
                v, p = self.value, self._p
                if type(v) is _ND and type(p) is _ND and v.ndim == 1 \
                        and 2 <= p.shape[1] <= ROW_MAX and v.dtype is _F64_DTYPE \
                        and p.dtype is _F64_DTYPE:
                    return new_dual(v[key], p[key].tolist(), self.tag, ROW)
                return impl(self, key)
            if tk in _PLAIN_KEYS or _dual_is_innermost((self, key)):
                return impl(self, key)
        return NumpyOverloads.__getitem__(self, key)

    def __iter__(self) -> Any:
        # ``y1, y2, y3 = y``: ``y[0], y[1], ...`` read one at a time, as numpy iterates
        # (writes into ``y`` during the loop are seen)
        if type(self.value) is _ND and self.value.ndim == 1:
            return _iterate_vector(self)
        return NumpyOverloads.__iter__(self)

    # -- writing into preallocated arrays ---------------------------------------------
    def __setitem__(self, key: Any, item: Any) -> None:
        # the common case first: plain writable arrays, an item of this tag or a number
        v, p = self.value, self._p
        if type(v) is np.ndarray and type(p) is np.ndarray and v.ndim:
            ti = type(item)
            if ti is Dual:
                ip = item._p
                iv = item.value
                if item.tag is self.tag and type(ip) is np.ndarray \
                        and (type(iv) is np.ndarray or type(iv) is np.float64) \
                        and ip.shape[-1] == p.shape[-1]:
                    if v.flags.writeable and p.flags.writeable:
                        v[key] = item.value
                        p[partials_key(key)] = ip
                        return
                elif ip.__class__ is list and item.tag is self.tag and type(iv) is np.float64 \
                        and len(ip) == p.shape[-1]:  # a row (numpy broadcasts it as (k,))
                    if v.flags.writeable and p.flags.writeable:
                        v[key] = iv
                        p[key if type(key) is int else partials_key(key)] = ip
                        return
            elif ti is float or ti is int or ti is np.float64 or (
                    ti is np.ndarray and item.dtype.kind in "fiub"):
                if v.flags.writeable and p.flags.writeable:
                    v[key] = item
                    p[partials_key(key)] = 0.0
                    return
        _setitem(self, key, item)


def _iterate_vector(x: Dual) -> Any:
    """``x[0], x[1], ...`` for a 1-D ``x``: rows made here while ``x`` holds plain float64
    arrays with a few directions (the getitem fast path's test), else ``x[i]``."""
    tag = x.tag
    v, p = x.value, x._p
    rows = type(v) is _ND and type(p) is _ND and 2 <= p.shape[-1] <= ROW_MAX \
        and v.dtype is _F64_DTYPE and p.dtype is _F64_DTYPE
    for i in range(v.shape[0]):
        # (the test holds while x keeps these arrays: an item is read when it is reached,
        # so writes into x during the loop show, as numpy's iteration shows them)
        if rows and x.value is v and x._p is p and _GETITEM_PATH.unpacked is not None:
            yield new_dual(v[i], p[i].tolist(), tag, ROW)
        else:
            yield x[i]


def _rebuild(value: Any, partials: Any, level: int, name: str) -> Dual:
    return Dual(value, partials, Tag(level, name))


def _strip(x: Any) -> Any:
    while isinstance(x, Dual):
        x = x.value
    return x


# Argument types that are neither traced nor need normalising (numpy function options).
_CONSTANT_ARGUMENTS = frozenset((int, float, bool, type(None), str, np.float64, np.int64))


def _duals_and_constants(args: tuple, kwargs: dict) -> bool:
    """Whether ``args`` and ``kwargs`` hold only Duals, plain numbers, strings, None and
    numeric numpy arrays (then nothing needs normalising, and the innermost traced argument
    is a Dual): one cheap scan for the common call, ``np.roll(x, 1)``."""
    for a in args:
        t = type(a)
        if t is Dual or t in _CONSTANT_ARGUMENTS:
            continue
        if t is not _ND or a.dtype.hasobject:
            return False
    if kwargs:
        for v in kwargs.values():
            if type(v) not in _CONSTANT_ARGUMENTS:
                return False
    return True


def _dual_is_innermost(args: tuple, kwargs: dict | None = None) -> bool:
    """Whether the innermost traced object among ``args`` (and one list level) is a Dual."""
    best: Any = None
    for a in args:
        if isinstance(a, Traced):
            if best is None or a.level > best.level:
                best = a
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Traced) and (best is None or b.level > best.level):
                    best = b
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, Traced) and (best is None or a.level > best.level):
                best = a
    return type(best) is Dual


_new = object.__new__
# The function behind ``x[key]`` (the Python protocol), and keys that hold nothing traced.
_GETITEM = operator.getitem
_PLAIN_KEYS = frozenset((slice, int, type(Ellipsis), type(None)))




_GETITEM_PATH = active_fast_path(_GETITEM)


def _unary_entry(ufunc: Any, x: Dual) -> Any:
    """``ufunc(x)`` for a Dual ``x``: the one entry of forward mode's unary calls (numpy's
    protocol and ``-x``), through the ufunc's fast paths, else dispatch."""
    rec = _ACTIVE.get(ufunc)
    if rec is not None:
        d = x._d
        if d is ROW:  # a few directions, as a row
            row = rec.row
            if row is not None:
                r = row(x)
                if r is not None:
                    return r
        elif d is not None:  # a scalar with one direction
            sr = rec.scalar
            if sr is not None:
                v = x.value
                y = sr[0](v)
                if d.__class__ is _F64 and d == 0.0:  # NaN-safe: a zero tangent stays zero
                    return new_dual(y, None, x.tag, _ZERO)
                g = sr[1](v, y)[0]
                return new_dual(y, None, x.tag, _ZERO if g is None else g * d
                                if d.__class__ is _F64 else tangent_product(d, g))
        lean = rec.lean
        if lean is not None:
            r = lean(x)
            if r is not None:
                return r
        impl = rec.general
        if impl is not None:
            return impl((x,), _NO_KWARGS)
    return _call_ufunc(ufunc, (x,))


def _binary_entry_for(ufunc: Any, reflected: bool = False) -> Callable[[Any, Any], Any]:
    """``entry(a, b)``: ``ufunc(a, b)`` with a Dual among ``a, b`` (``ufunc(b, a)`` when
    ``reflected``), the one entry of forward mode's binary calls: numpy's protocol and the
    Python operators (which are these functions). Through the ufunc's fast paths (scalars
    with one direction, then the lean path), else :func:`_call_ufunc`."""
    rec = active_fast_path(ufunc)

    def entry(x: Any, y: Any) -> Any:
        a, b = (y, x) if reflected else (x, y)
        ta = type(a)
        if ta is Dual:
            da = a._d
            if da is ROW:  # a few directions, as a row: the commonest scalar case
                row = rec.row
                if row is not None:
                    r = row(a, b)
                    if r is not None:
                        return r
            elif da is not None:  # a scalar with one direction
                sr = rec.scalar
                if sr is not None:
                    tb = type(b)
                    if tb is Dual:
                        db = b._d
                        if db is not None and db is not ROW and b.tag is a.tag:
                            va, vb = a.value, b.value
                            v = sr[0](va, vb)
                            ga, gb = sr[1](va, vb, v)
                            return new_dual(v, None, a.tag, scale_scalar_tangent(ga, da)
                                            + scale_scalar_tangent(gb, db))
                    elif tb in _PLAIN_SCALARS:
                        va = a.value
                        v = sr[0](va, b)
                        if da.__class__ is _F64 and da == 0.0:  # NaN-safe
                            return new_dual(v, None, a.tag, _ZERO)
                        g = sr[1](va, b, v)[0]
                        return new_dual(v, None, a.tag, _ZERO if g is None else g * da
                                        if da.__class__ is _F64 else tangent_product(da, g))
        elif type(b) is Dual:
            db = b._d
            if db is ROW:
                row = rec.row
                if row is not None:
                    r = row(a, b)
                    if r is not None:
                        return r
            elif db is not None and ta in _PLAIN_SCALARS:
                sr = rec.scalar
                if sr is not None:
                    vb = b.value
                    v = sr[0](a, vb)
                    if db.__class__ is _F64 and db == 0.0:  # NaN-safe
                        return new_dual(v, None, b.tag, _ZERO)
                    g = sr[1](a, vb, v)[1]
                    return new_dual(v, None, b.tag, _ZERO if g is None else g * db
                                    if db.__class__ is _F64 else tangent_product(db, g))
        lean = rec.lean
        if lean is not None:
            r = lean(a, b)
            if r is not None:
                return r
        return _call_ufunc(ufunc, (a, b))

    entry.__name__ = f"{'r' if reflected else ''}{ufunc.__name__}"
    return entry


# ufunc -> its binary entry (see _binary_entry_for)
_BINARY_ENTRIES: dict[Any, Callable[[Any, Any], Any]] = {}


def _binary_entry(ufunc: Any, a: Any, b: Any) -> Any:
    """``ufunc(a, b)`` through the ufunc's binary entry."""
    entry = _BINARY_ENTRIES.get(ufunc)
    if entry is None:
        entry = _BINARY_ENTRIES[ufunc] = _binary_entry_for(ufunc)
    return entry(a, b)


def _call_ufunc(ufunc: Any, inputs: tuple) -> Any:
    """``ufunc(*inputs)`` with at least one Dual among ``inputs`` once the narrow fast paths
    declined (or the records were stale): refresh, then the rule's general tangent, else
    dispatch."""
    if _STALE[0]:
        _refresh_fast_paths()
        if len(inputs) == 1:
            return _unary_entry(ufunc, inputs[0])
        if len(inputs) == 2:
            return _binary_entry(ufunc, inputs[0], inputs[1])
    rec = _ACTIVE.get(ufunc)
    impl = None if rec is None else rec.general
    if len(inputs) == 1:
        if impl is not None:
            return impl(inputs, _NO_KWARGS)
    else:
        if not _dual_is_innermost(inputs):
            return apply_operator(_operator_of(ufunc), inputs, {})
        if normalize_arguments(inputs) is not None:  # foreign or object arrays
            return apply_operator(_operator_of(ufunc), inputs, {})
        if impl is not None:
            return impl(inputs, _NO_KWARGS)
    return apply_operator(_operator_of(ufunc), inputs, {})


def _operator_of(ufunc: Any) -> Operator:
    return Broadcasted.instance(ufunc) if ufunc.signature is None else Method.instance(ufunc)


_NO_KWARGS: dict = {}


def _strip_tag(x: Any, tag: Tag | None) -> Any:
    if isinstance(x, Dual) and x.tag is tag:
        return x.value
    if type(x) in (list, tuple):
        return type(x)(_strip_tag(a, tag) for a in x)
    return x


def _on_values_if_constant(op: Operator, args: tuple, kwargs: dict) -> tuple[bool, Any]:
    """``(True, result)`` when ``op`` on the values gives a non-float result, else ``(False, None)``."""
    f = getattr(op, "f", None)
    if f is None:
        return False, None
    tag = innermost_tag(tuple(args) + tuple(kwargs.values()))
    out = f(*[_strip_tag(a, tag) for a in args],
            **{k: _strip_tag(v, tag) for k, v in kwargs.items()})
    if is_differentiable_output(out):
        return False, None
    return True, out


# -- helpers for rule writers ------------------------------------------------------------


def innermost_tag(args: Sequence[Any]) -> Tag | None:
    """The tag of the innermost (highest-level) Dual among ``args`` (and one list level)."""
    tag: Tag | None = None
    for a in args:
        if type(a) is Dual or isinstance(a, Dual):
            if tag is None or a.tag.level > tag.level:
                tag = a.tag
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Dual) and (tag is None or b.tag.level > tag.level):
                    tag = b.tag
    return tag


def value_at(x: Any, tag: Tag | None) -> Any:
    """What ``x`` stands for as a value at ``tag``: a Dual of that tag gives its value, else ``x``."""
    if isinstance(x, Dual) and x.tag is tag:
        return x.value
    return x


def partials_at(x: Any, tag: Tag | None) -> Any:
    """The partials of ``x`` at ``tag``, or ``None`` when ``x`` is a constant there."""
    if isinstance(x, Dual) and x.tag is tag:
        return x.partials
    return None


def _k_mismatch(k1: int, k2: int) -> ShapeError:
    return ShapeError(
        f"Duals of one differentiation carry different numbers of directions ({k1} and "
        f"{k2}); build them with the same k."
    )


def tangent_parts(args: Sequence[Any]) -> tuple[Tag | None, list[tuple[Any, Any]]]:
    """``(tag, [(value, partials or None), ...])`` for a rule's positional arguments.

    ``tag`` is the innermost tag among the Duals in ``args``; a Dual of that tag gives
    its value and partials, anything else (plain arrays, numbers, Duals of outer tags)
    is a constant: ``(x, None)``. All partials of one tag must have the same ``k``.

    Example:
        >>> import numpy as np
        >>> from dualad.forward_mode.dual import Dual, tangent_parts
        >>> tag, parts = tangent_parts((Dual(1.0, [2.0]), 3.0))
        >>> parts
        [(np.float64(1.0), array([2.])), (3.0, None)]
    """
    tag = innermost_tag(args)
    parts = []
    k = None
    for a in args:
        if isinstance(a, Dual) and a.tag is tag:
            p = a.partials
            ka = shape_of(p)[-1]
            if k is None:
                k = ka
            elif ka != k:
                raise _k_mismatch(k, ka)
            parts.append((a.value, p))
        else:
            if isinstance(a, Dual) and a.tag.level == tag.level:  # type: ignore[union-attr]
                raise TagMismatchError(
                    f"two different tags share level {a.tag.level} ({a.tag!r} and {tag!r}); "
                    f"create tags with Tag() so each gets its own level."
                )
            parts.append((a, None))
    return tag, parts


def zero_partials(shape: tuple[int, ...], k: int) -> np.ndarray:
    """Zero partials for a constant of ``shape`` with ``k`` directions."""
    return np.zeros(tuple(shape) + (k,))


def dual_result(value: Any, partials: Any, tag: Tag | None) -> Any:
    """A rule's result: ``Dual(value, partials, tag)``, or ``value`` when ``tag`` is None."""
    if tag is None:
        return value
    return Dual._make(_as_value(value) if not isinstance(value, (np.ndarray, Traced,
                                                                   np.float64)) else value,
                      partials, tag)


# -- setitem ----------------------------------------------------------------------------


def partials_key(key: Any) -> Any:
    """``key`` for the partials (the trailing ``k`` axis stays whole)."""
    if type(key) is tuple and any(p is Ellipsis for p in key):
        return key + (slice(None),)
    if key is Ellipsis:
        return (Ellipsis, slice(None))
    return key


def _promote(arr: Any, like: Dual) -> Dual:
    """``arr`` (a plain array) as a Dual of ``like``'s tag with zero partials."""
    return Dual._make(arr, np.zeros(shape_of(arr) + (like.k,)), like.tag)


def _assign(container: Any, key: Any, item: Any) -> Any:
    """``container[key] = item``; a plain container becomes traced if ``item`` is.

    Writing a Dual of an outer tag promotes the container to such a Dual; writing a graph
    node of an outer reverse pass makes it a writable node (``np.zeros_like`` of the node).
    """
    if isinstance(item, Traced) and not isinstance(container, Traced):
        if isinstance(item, Dual):
            container = _promote(container, item)
        else:
            holder = np.zeros_like(item, shape=shape_of(container))
            holder[...] = container
            container = holder
    container[key] = item
    return container


def _setitem(target: Dual, key: Any, item: Any) -> None:
    tag = target.tag
    if isinstance(item, Traced) and item.level > target.level:
        raise TagMismatchError(
            f"cannot write a value of an inner differentiation (level {item.level}) into a "
            f"Dual of an outer one (level {target.level}); allocate the array inside the "
            f"inner function (np.empty_like of one of its arguments)."
        )
    if isinstance(target.value, Traced) or isinstance(target.value, np.ndarray):
        pass
    else:  # a 0-d value held as a scalar
        target.value = np.array(target.value)
    if target._p is None:
        target.partials = target.partials.copy()
    elif target._p.__class__ is list:  # a row
        target._p = np.array(target._p, dtype=np.float64)
        target._d = None
    elif isinstance(target._p, np.ndarray) and not target._p.flags.writeable:
        target._p = target._p.copy()
    if isinstance(target.value, np.ndarray) and not target.value.flags.writeable:
        target.value = target.value.copy()
    pkey = partials_key(key)
    if isinstance(item, Dual) and item.tag is tag:
        if item.k != target.k:
            raise ShapeError(
                f"setitem: the Dual written carries {item.k} directions but the array "
                f"has {target.k}."
            )
        target.value = _assign(target.value, key, item.value)
        target._p = _assign(target._p, pkey, item.partials)
    else:
        target.value = _assign(target.value, key, item)
        target._p = _assign(target._p, pkey, 0.0)
    if isinstance(target.value, np.ndarray) and target.value.ndim == 0:
        target.value = target.value[()]


def register_forward(op_type: type, arg_types: Sequence[type], method: Callable[..., Any],
                     varargs: type | None = None) -> None:
    """Add ``method`` to ``forward`` for ``(op_type, *arg_types)`` (no annotations needed).

    Example:
        >>> import numpy as np
        >>> from dualad.forward_mode.dual import Dual, register_forward
        >>> from dualad.core.operators import Method
        >>> def twice(x):
        ...     return 2 * x
        >>> register_forward(Method[twice], (Dual,), lambda op, x: Dual(2 * x.value,
        ...                  2 * x.partials, x.tag))
    """
    if varargs is None:
        signature = plum.Signature(op_type, *arg_types)
    else:
        signature = plum.Signature(op_type, *arg_types, varargs=varargs)
    forward.register(method, signature, builtin=True)


def dual_signatures(n: int) -> list[tuple[type, ...]]:
    """Every way ``n`` positional arguments can hold at least one Dual (others ``object``)."""
    out: list[tuple[type, ...]] = []
    for bits in range(1, 2**n):
        out.append(tuple(Dual if bits >> i & 1 else object for i in range(n)))
    return out


for _name, (_ufunc, _reflected) in BINARY_OPERATORS.items():
    setattr(Dual, _name, _binary_entry_for(_ufunc, _reflected))
Dual.__neg__ = lambda self: _unary_entry(np.negative, self)  # type: ignore[method-assign, arg-type]
del _name, _ufunc, _reflected
