"""How dependencies flow through numpy functions: the sparsity tracer and its rules.

A :class:`SparsityTracer` is an array whose every entry carries the *set of input entries
it depends on*, stored for the whole array as one boolean scipy.sparse matrix ``rows`` of
shape ``(value.size, n)`` (row ``i``: the index set of entry ``i``). It also keeps the
array's value at the given point, so shapes and Python branches work as in plain numpy
(a branch on a value is taken at the given point; ``np.where`` keeps both branches).

Numpy calls on tracers go through ``index_flow``, a rule function of dualad's dispatcher
(the same one as ``forward`` and ``gradient``), with one method per operator type. The
methods are *declared*, not written one by one:

- every elementwise call (``Broadcasted[f]``) flows as the table rule of ``f`` says (the
  tables under ``rules/`` and ``ad.define_rule``; one method reads the rule registry): the
  output depends on the union of its broadcast arguments, leaving out arguments whose
  derivative is "not differentiable" or zero; an argument whose derivative expression
  names another argument (or the output) marks that pair as interacting, which gives
  Hessian patterns;
- the numpy family files declare their functions at their end, with
  :func:`declare_index_map` (functions that move, repeat or drop entries: applied to
  ``arange(size)`` they say which input entry each output entry copies),
  :func:`declare_reduction`, :func:`declare_contraction`, :func:`declare_elementwise`
  (for non-ufunc elementwise functions such as ``np.where``) and
  :func:`declare_allocation` (``np.empty_like`` and friends: buffers to write into).

A function with no declaration (a user's own primitive) takes the *conservative* flow:
every entry of its result depends on every entry of its arguments, a superset of the truth,
with a one-time :class:`ConservativeFlowWarning` naming it; under ``strict=True`` (the
``STRICT`` context variable the sparse transforms set) it raises
:class:`~dualad.core.errors.MissingRuleError` instead. A result that carries no derivative
(``np.shape``, ``np.argmax``, comparisons) is a constant.

Example:
    >>> import numpy as np
    >>> from dualad.sparsity.flows import trace_inputs
    >>> x, trace = trace_inputs(np.arange(4.0))
    >>> y = np.sin(x[1:]) * x[:-1]
    >>> y.rows.toarray().astype(int)
    array([[1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
"""

from __future__ import annotations

import contextvars
import operator
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import plum

from ..core.arguments import is_differentiable_output
from ..core.array_protocol import NumpyOverloads, lift_object_array
from ..core.dispatch import RuleFunction
from ..core.errors import MissingRuleError
from ..core.operators import Broadcasted, Method, Operator, function_name
from ..core.tracing import Traced, new_level
from ..derivatives.registry import derivative_kind, get_rule, on_rule_registered, operator_type
from ..derivatives.tangent_product import tangent_product
from .index_sets import IndexSets, combine, union, vstack

__all__ = [
    "CURRENT_TRACE",
    "PROBE_LIMIT",
    "STRICT",
    "ConservativeFlowWarning",
    "SparsityTracer",
    "Trace",
    "declare_allocation",
    "declare_composite",
    "declare_contraction",
    "declare_elementwise",
    "declare_index_map",
    "declare_reduction",
    "declare_scan",
    "index_flow",
    "index_map_data",
    "is_contraction",
    "is_linear_in",
    "linear_reduction_axis",
    "note_index_map",
    "note_linear",
    "note_order_statistic",
    "note_scatter",
    "order_statistic_axis",
    "scatter_positions",
    "trace_inputs",
    "probed_flow",
]


def _sparse() -> Any:
    """scipy.sparse, imported on first use (``import dualad`` does not import scipy)."""
    import scipy.sparse

    return scipy.sparse


_EMPTY_INDICES = np.zeros(0, dtype=np.int64)


def _empty(m: int, n: int) -> IndexSets:
    return IndexSets.empty(m, n)


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class Trace:
    """One sparsity detection: ``n`` input entries, and (for Hessians) the pairs of input
    entries that meet in a nonlinear operation."""

    __slots__ = ("n", "level", "second", "pairs")

    def __init__(self, n: int, hessian: bool = False) -> None:
        self.n = n
        self.level = new_level()
        self.second: list[Any] | None = [] if hessian else None
        #: interactions of the scalar fast path: pairs of sorted tuples of input entries
        self.pairs: list[tuple[tuple, tuple]] = []

    def interact(self, a: IndexSets, b: IndexSets) -> None:
        """Entries of ``a``'s sets meet those of ``b``'s sets (row by row) nonlinearly."""
        if self.second is not None and a.nnz and b.nnz:
            self.second.append(a.to_scipy().T @ b.to_scipy())

    def hessian_pattern(self) -> Any:
        """The symmetric ``n x n`` pattern (scipy.sparse) of every interaction recorded."""
        sp = _sparse()
        n = self.n
        total = sp.csr_array((n, n), dtype=bool)
        for part in self.second or ():
            total = total + part
        if self.pairs:
            rows = [i for a, b in self.pairs for i in a for _ in b]
            cols = [j for a, b in self.pairs for _ in a for j in b]
            total = total + sp.csr_array((np.ones(len(rows), dtype=bool), (rows, cols)),
                                         shape=(n, n))
        return (total + total.T).tocsr()


class SparsityTracer(Traced, NumpyOverloads):
    """An array of index sets: ``value`` (the array at the given point) and ``rows``, an
    :class:`~dualad.sparsity.index_sets.IndexSets` of shape ``(value.size, n)`` (set ``i``:
    what entry ``i`` depends on). Writing into it (``y[i] = ...``) replaces the written
    entries' sets.

    Loop-style code (``out[i] = (x[i + 1] - x[i - 2]) * x[i - 1]``) takes a scalar fast
    path: an entry read with integer indices holds its set as a sorted tuple of ints,
    Python arithmetic on such scalars unites the tuples without numpy calls, and writes of
    single entries are kept aside and merged into ``rows`` in one vectorised step when
    ``rows`` is next read.
    """

    __slots__ = ("value", "_rows", "trace", "level", "deps", "_pending", "_owned", "_lists",
                 "_view_of", "_views", "__weakref__")

    def __init__(self, value: Any, rows: Any, trace: Trace) -> None:
        if type(value) is not np.ndarray or value.dtype != np.float64:
            value = np.asarray(value, dtype=np.result_type(value, np.float64))
        self.value = value
        self._rows = rows
        self.deps = None
        self._pending = None
        self._owned = False
        self._lists = None
        self.trace = trace
        self.level = trace.level
        # numpy's aliasing: (base, flat positions in it) for a view of another tracer, and
        # weak references to this tracer's views with their positions
        self._view_of: tuple[Any, np.ndarray] | None = None
        self._views: list[tuple[Any, np.ndarray]] | None = None

    @property
    def rows(self) -> IndexSets:
        """The index sets of the entries (single-entry writes merged in first)."""
        if self._pending:
            self._flush()
        rows = self._rows
        if rows is None:  # a scalar of the fast path
            deps = self.deps
            rows = self._rows = IndexSets(np.array([0, len(deps)], dtype=np.int64),
                                          np.array(deps, dtype=np.int64), self.trace.n)
        return rows

    @rows.setter
    def rows(self, rows: IndexSets) -> None:
        self._rows = rows
        self.deps = None
        self._pending = None
        self._lists = None

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        base = self._rows
        m, n = base.m, base.n
        written = np.fromiter(pending, dtype=np.int64, count=len(pending))
        written.sort()
        keep = np.arange(m, dtype=np.int64)
        keep[written] = -1
        lengths = np.zeros(m, dtype=np.int64)
        sets = [pending[r] for r in written.tolist()]
        lengths[written] = [len(d) for d in sets]
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = [i for d in sets for i in d]
        fresh = IndexSets(indptr, np.array(flat, dtype=np.int64), n)
        self._rows = union([base.take(keep), fresh], m, n)
        self._lists = None

    def _entry(self, key: Any) -> int | None:
        """The flat position of an integer key (or tuple of them), else None."""
        shape = self.value.shape
        if type(key) is int or isinstance(key, np.integer):
            if len(shape) != 1:
                return None
            k, d = int(key), shape[0]
            if not -d <= k < d:
                return None
            return k % d
        if type(key) is tuple and len(key) == len(shape) and len(shape) > 0 and all(
                type(k) is int or isinstance(k, np.integer) for k in key):
            flat = 0
            for k, d in zip(key, shape):
                k = int(k)
                if not -d <= k < d:
                    return None
                flat = flat * d + k % d
            return flat
        return None

    def __getitem__(self, key: Any) -> Any:
        flat = self._entry(key) if self.value.dtype.kind == "f" else None
        if flat is None:
            return super().__getitem__(key)
        pending = self._pending
        if pending is not None and flat in pending:
            deps = pending[flat]
        else:
            lists = self._lists
            if lists is None:  # the rows as Python lists, once: reads are list slices
                rows = self._rows if self._rows is not None else self.rows
                lists = self._lists = (rows.indptr.tolist(), rows.indices.tolist())
            indptr, indices = lists
            deps = tuple(indices[indptr[flat]:indptr[flat + 1]])
        return _scalar(self.value.item(flat), deps, self.trace)

    def _fast(self, other: Any, op: Callable[[Any, Any], Any], reflected: bool) -> Any:
        """``self op other`` (or ``other op self``) of a scalar, without numpy: the union
        of the sets (and, for Hessians, the pairs that meet nonlinearly, as the rules'
        tables say); ``NotImplemented`` where the general path is needed."""
        if self.value.ndim:
            return NotImplemented
        t = type(other)
        if t is float or t is int or t is np.float64:
            odeps: tuple = ()
            ov = other
        elif t is SparsityTracer and other.trace is self.trace and not other.value.ndim:
            odeps = other.deps if other.deps is not None else \
                tuple(other.rows.indices.tolist())
            ov = other.value.item()
        else:
            return NotImplemented
        deps = self.deps if self.deps is not None else tuple(self.rows.indices.tolist())
        v = self.value.item()
        try:
            value = op(ov, v) if reflected else op(v, ov)
        except (ZeroDivisionError, OverflowError):
            return NotImplemented
        if type(value) is complex:
            return NotImplemented
        if not odeps or odeps is deps:
            union_deps = deps
        elif not deps:
            union_deps = odeps
        else:
            union_deps = tuple(sorted({*deps, *odeps}))
        if self.trace.second is not None and op is not operator.add and op is not operator.sub:
            left, right = (odeps, deps) if reflected else (deps, odeps)
            pairs = self.trace.pairs
            if op is operator.mul:
                pairs.append((left, right))
            elif op is operator.truediv:
                pairs.append((left, right))
                pairs.append((right, right))
            else:  # power: every traced operand meets the base and itself
                pairs.append((left, left))
                pairs.append((left, right))
                pairs.append((right, union_deps))
        return _scalar(value, union_deps, self.trace)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs and not self.value.ndim:
            r = _scalar_ufunc(ufunc, inputs, self.trace)
            if r is not NotImplemented:
                return r
        return super().__array_ufunc__(ufunc, method, *inputs, **kwargs)

    def __neg__(self) -> Any:
        if self.value.ndim == 0 and self.deps is not None:
            return _scalar(-self.value.item(), self.deps, self.trace)
        return super().__neg__()

    def _primal(self) -> Any:
        return self.value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    def __repr__(self) -> str:
        return f"SparsityTracer(shape={self.shape}, nnz={self.rows.nnz}, n={self.trace.n})"

    @classmethod
    def _apply(cls, op: Operator, args: tuple, kwargs: dict, level: int) -> Any:
        # np.array([a, b]) of tracers is an object array: one traced array here
        args = tuple(lift_object_array(a) if type(a) is np.ndarray and a.dtype == object else a
                     for a in args)
        out = index_flow(op, *args, **kwargs)
        if type(out) is SparsityTracer and out.value.base is not None:
            _note_view(op, args, kwargs, out)
        return out

    # -- numpy's aliasing: a write into an array reaches its views, and a write into a view
    # reaches the array (and its other views)
    def _sync_after_write(self) -> None:
        view_of = self._view_of
        if view_of is not None:
            base = view_of[0]()
            if base is not None:  # write these entries through (it refreshes its views)
                base._set_entries(view_of[1], self)
                return
        self._refresh_views()

    def _set_entries(self, positions: np.ndarray, item: SparsityTracer) -> None:
        """Entries ``positions`` (flat) take ``item``'s values and index sets."""
        key = np.unravel_index(positions, self.value.shape)
        self.__setitem__(key, item)

    def _refresh_views(self) -> None:
        views = self._views
        if not views:
            return
        alive = []
        for ref, positions in views:
            view = ref()
            if view is None:
                continue
            alive.append((ref, positions))
            view.value = self.value.reshape(-1)[positions]
            view._owned = True
            view.rows = self.rows.take(positions.reshape(-1))
            view._refresh_views()
        self._views = alive

    def _in_place(self, result: Any) -> SparsityTracer:
        if np.shape(plain(result)) != self.value.shape:
            raise ValueError(
                f"non-broadcastable output operand with shape {self.value.shape} doesn't "
                f"match the broadcast shape {np.shape(plain(result))}"
            )
        self[...] = result
        return self

    def __iadd__(self, other: Any) -> SparsityTracer:
        return self._in_place(self + other)

    def __isub__(self, other: Any) -> SparsityTracer:
        return self._in_place(self - other)

    def __imul__(self, other: Any) -> SparsityTracer:
        return self._in_place(self * other)

    def __itruediv__(self, other: Any) -> SparsityTracer:
        return self._in_place(self / other)

    def __ipow__(self, other: Any) -> SparsityTracer:
        return self._in_place(self ** other)

    def __imatmul__(self, other: Any) -> SparsityTracer:
        return self._in_place(self @ other)

    def copy(self) -> SparsityTracer:
        """A tracer with a copy of the value and the same index sets."""
        return SparsityTracer(self.value.copy(), self.rows, self.trace)

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        """Float dtypes keep the index sets; other dtypes give the plain value."""
        if np.dtype(dtype).kind in "fc":
            return self.copy() if copy else self
        return self.value.astype(dtype)

    def __setitem__(self, key: Any, item: Any) -> None:
        flat = self._entry(key)
        if flat is not None:
            t = type(item)
            if t is SparsityTracer and item.trace is self.trace and not item.value.ndim \
                    and self.value.dtype.kind == "f" and item.value.dtype.kind == "f":
                deps = item.deps if item.deps is not None else \
                    tuple(item.rows.indices.tolist())
                value = item.value.item()
            elif t is float or t is int or t is np.float64:
                deps, value = (), item
            else:
                deps = None
            if deps is not None:
                if not self._owned:
                    self.value = self.value.copy()
                    self._owned = True
                self.value.flat[flat] = value
                if self._rows is None:
                    self.rows  # noqa: B018 - a fast-path scalar's sets as rows first
                if self._pending is None:
                    self._pending = {}
                self._pending[flat] = deps
                if self._view_of is not None or self._views:
                    self._sync_after_write()
                return
        key = plain(key)
        value = plain(item)
        self.value = np.array(self.value, dtype=np.result_type(self.value, value), copy=True)
        self._owned = True
        self.value[key] = value
        size = self.value.size
        # the source of every entry: -1 nothing, 0.. this array, size.. the item
        mapping = np.arange(size, dtype=np.int64).reshape(self.value.shape)
        if isinstance(item, SparsityTracer):
            mapping[key] = np.arange(size, size + item.value.size,
                                     dtype=np.int64).reshape(item.value.shape)
            self.rows = vstack([self.rows, item.rows], self.trace.n).take(mapping.reshape(-1))
        else:
            mapping[key] = -1
            self.rows = self.rows.take(mapping.reshape(-1))
        if self._view_of is not None or self._views:
            self._sync_after_write()


def _scalar_operator(name: str, op: Callable[[Any, Any], Any], reflected: bool) -> Any:
    """``SparsityTracer``'s operator ``name``: the scalar fast path, else the inherited
    operator (numpy's protocol)."""

    def method(self: SparsityTracer, other: Any) -> Any:
        r = self._fast(other, op, reflected)
        return getattr(super(SparsityTracer, self), name)(other) if r is NotImplemented else r

    method.__name__ = name
    return method


for _name, _op, _reflected in (
        ("__add__", operator.add, False), ("__radd__", operator.add, True),
        ("__sub__", operator.sub, False), ("__rsub__", operator.sub, True),
        ("__mul__", operator.mul, False), ("__rmul__", operator.mul, True),
        ("__truediv__", operator.truediv, False), ("__rtruediv__", operator.truediv, True),
        ("__pow__", operator.pow, False), ("__rpow__", operator.pow, True)):
    setattr(SparsityTracer, _name, _scalar_operator(_name, _op, _reflected))
del _name, _op, _reflected


def _note_view(op: Operator, args: tuple, kwargs: dict, out: SparsityTracer) -> None:
    """``out`` (a result of ``op``) shares the memory of a tracer among ``args``: note it
    as a view of that tracer, with the flat positions of its entries there."""
    for i, a in enumerate(args):
        if type(a) is SparsityTracer and a.trace is out.trace \
                and np.may_share_memory(out.value, a.value):
            f = getattr(op, "f", None)
            if f is None:
                return
            index = np.arange(a.value.size, dtype=np.int64).reshape(a.value.shape)
            call = [plain(b) for b in args]
            call[i] = index
            try:
                positions = f(*call, **{k: plain(v) for k, v in kwargs.items()})
            except Exception:  # noqa: BLE001 - no index map: not followed as a view
                return
            if not (isinstance(positions, np.ndarray) and positions.dtype == np.int64
                    and positions.shape == out.value.shape):
                return
            out._view_of = (weakref.ref(a), positions)
            if a._views is None:
                a._views = []
            a._views.append((weakref.ref(out), positions))
            return


def _scalar(value: Any, deps: tuple, trace: Trace) -> SparsityTracer:
    """A 0-d tracer of the fast path: ``value`` depending on the sorted ints ``deps``."""
    t = SparsityTracer.__new__(SparsityTracer)
    t.value = np.array(value, dtype=np.float64)
    t._rows = None
    t.deps = deps
    t._pending = None
    t._owned = True
    t._lists = None
    t.trace = trace
    t.level = trace.level
    t._view_of = None
    t._views = None
    return t


def trace_inputs(x: Any, hessian: bool = False) -> tuple[SparsityTracer, Trace]:
    """A tracer for input ``x`` (entry ``i`` depends on itself) and its :class:`Trace`."""
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    trace = Trace(n, hessian)
    return SparsityTracer(x.copy(), IndexSets.identity(n), trace), trace


def plain(obj: Any) -> Any:
    """``obj`` with tracers replaced by their values (inside lists and tuples too)."""
    if isinstance(obj, SparsityTracer):
        return obj.value
    if type(obj) in (list, tuple):
        return type(obj)(plain(o) for o in obj)
    return obj


def _tracers(obj: Any, out: list[SparsityTracer]) -> list[SparsityTracer]:
    if isinstance(obj, SparsityTracer):
        out.append(obj)
    elif type(obj) in (list, tuple):
        for o in obj:
            _tracers(o, out)
    return out


def _result(value: Any, rows: Any, trace: Trace) -> Any:
    """A tracer, or the plain value when it carries no derivative."""
    if not is_differentiable_output(value):
        return value
    if rows is None:
        rows = _empty(_size(np.shape(value)), trace.n)
    return SparsityTracer(value, rows, trace)


def _broadcast_rows(x: SparsityTracer, shape: tuple[int, ...]) -> Any:
    """``x``'s index sets for every entry of ``broadcast_to(x, shape)``."""
    if x.value.shape == shape:
        return x.rows
    index = np.broadcast_to(np.arange(x.value.size, dtype=np.intp).reshape(x.value.shape),
                            shape)
    return x.rows.take(index.reshape(-1))


def _union(parts: Sequence[IndexSets], m: int, n: int) -> IndexSets:
    return union(parts, m, n)


# -- the rule function -------------------------------------------------------------------

def _call_name(op: Operator) -> str:
    f = getattr(op, "f", None)
    if f is None:
        return type(op).__name__
    name = function_name(f)
    if isinstance(f, np.ufunc) or getattr(f, "__module__", None) == "numpy" \
            or getattr(np, getattr(f, "__name__", ""), None) is f:
        return f"np.{name}"
    return name


_DECLARED: set[type] = set()


def _index_flow(op: Operator, *args: Any, **kwargs: Any):
    """The tracer result of ``op(*args, **kwargs)`` for sparsity tracers among ``args``."""
    return _without_flow(op, args, kwargs)


_index_flow.__name__ = "index_flow"
#: ``index_flow(op, *args, **kwargs)``: how the entries of a call's arguments reach its result.
index_flow = RuleFunction(_index_flow)


def _without_flow(op: Operator, args: tuple, kwargs: dict) -> Any:
    """A call with no declared flow: a constant when its result carries no derivative,
    else the conservative flow (every output entry on every input entry of the call) with
    a one-time warning, or an error under ``strict=True``."""
    f = getattr(op, "f", None)
    out = None
    if f is not None:
        with np.errstate(all="ignore"):
            out = f(*plain(args), **{k: plain(v) for k, v in kwargs.items()})
        if not is_differentiable_output(out) and not _nested_differentiable(out):
            return out  # shape, argmax, comparisons: a constant
    name = _call_name(op)
    types = ", ".join(type(a).__name__ for a in args)
    advice = (
        f"Declare its flow with dualad.extend.declare_index_map({name}) for a function that "
        f"only moves, repeats or drops entries, or declare_elementwise / declare_reduction / "
        f"declare_contraction / declare_dense (all in dualad.extend); or pass the pattern "
        f"yourself with sparsity=."
    )
    if f is None or STRICT.get():
        raise MissingRuleError(
            f"dualad cannot detect sparsity through {name} (called with ({types})): no flow "
            f"is declared for it{' and strict=True' if f is not None else ''}. {advice}"
        )
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(
            f"dualad: no sparsity flow is declared for {name}; assuming every entry of its "
            f"result depends on every entry of its arguments (a superset: correct, but the "
            f"pattern may be denser than it is). {advice} Pass strict=True to make this an "
            f"error.", ConservativeFlowWarning, stacklevel=4,
        )
    return conservative_result(out, _tracers(list(args) + list(kwargs.values()), []))


#: ``strict=True`` on a sparse transform: a call without a flow raises instead of falling
#: back to the conservative flow (per thread and task).
STRICT: contextvars.ContextVar[bool] = contextvars.ContextVar("dualad_sparsity_strict",
                                                              default=False)
#: The detection in progress in this thread or task (its :class:`Trace`), or None.
CURRENT_TRACE: contextvars.ContextVar[Any] = contextvars.ContextVar("dualad_sparsity_trace",
                                                                   default=None)
_WARNED: set[str] = set()  # functions warned about (once each per process, as warnings do)


class ConservativeFlowWarning(UserWarning):
    """A function without a declared flow was traced with the conservative flow."""


def rebuild(container: Any, items: list[Any]) -> Any:
    """A list or tuple (named tuples too) like ``container`` holding ``items``."""
    if isinstance(container, tuple) and hasattr(container, "_fields"):
        return type(container)(*items)
    return type(container)(items)


def _nested_differentiable(out: Any) -> bool:
    return isinstance(out, (list, tuple)) and any(
        is_differentiable_output(o) or _nested_differentiable(o) for o in out)


def every_entry(tracers: Sequence[SparsityTracer]) -> IndexSets:
    """One set: every input entry any of ``tracers`` depends on."""
    n = tracers[0].trace.n
    parts = [t.rows.indices for t in tracers if t.rows.nnz]
    indices = np.unique(np.concatenate(parts)) if parts else _EMPTY_INDICES
    return IndexSets(np.array([0, indices.size], dtype=np.int64), indices, n)


def repeat_set(single: IndexSets, m: int) -> IndexSets:
    """``m`` copies of the one set ``single``."""
    k = single.nnz
    return IndexSets(np.arange(m + 1, dtype=np.int64) * k, np.tile(single.indices, m),
                     single.n)


def conservative_result(out: Any, tracers: Sequence[SparsityTracer]) -> Any:
    """``out`` (an array or nested tuples / lists of arrays) with every entry depending on
    every entry of ``tracers``; they all meet nonlinearly (for Hessians)."""
    if not tracers:
        return out
    trace = tracers[0].trace
    every = every_entry(tracers)
    trace.interact(every, every)

    def build(o: Any) -> Any:
        if isinstance(o, (list, tuple)):
            return rebuild(o, [build(a) for a in o])
        if not is_differentiable_output(o):
            return o
        return _result(o, repeat_set(every, _size(np.shape(o))), trace)

    return build(out)


def _register(op_type: type, impl: Callable[..., Any], name: str) -> None:
    if op_type in _DECLARED:  # one declaration per operator (np.max is np.amax)
        return
    _DECLARED.add(op_type)
    _UFUNC_STRUCTURES.clear()

    def method(op, *args, **kwargs):  # plum: no annotations here
        return impl(*args, **kwargs)

    method.__name__ = method.__qualname__ = f"index_flow_{name}"
    index_flow.register(method, plum.Signature(op_type, varargs=object), builtin=True)


def _op_types(func: Any) -> list[type]:
    """The operator types a call of ``func`` can record as."""
    if isinstance(func, np.ufunc):
        return [Broadcasted[func] if func.signature is None else Method[func]]
    op = getattr(func, "__dualad_operator__", None)
    if isinstance(op, Operator):
        return [type(op)]
    return [Method[func]]


# -- elementwise --------------------------------------------------------------------------

def _elementwise(f: Callable[..., Any], flowing: frozenset[int],
                 pairs: tuple[tuple[int, int], ...]) -> Callable[..., Any]:
    def impl(*args: Any, **kwargs: Any) -> Any:
        values = [a.value if type(a) is SparsityTracer else plain(a) for a in args]
        with np.errstate(all="ignore"):
            out = f(*values, **{k: plain(v) for k, v in kwargs.items()}) if kwargs \
                else f(*values)
        if not is_differentiable_output(out):
            return out
        shape = np.shape(out)
        trace = None
        parts: dict[int, IndexSets] = {}
        for i, a in enumerate(args):
            if isinstance(a, SparsityTracer):
                trace = a.trace
                if i in flowing:
                    parts[i] = _broadcast_rows(a, shape)
        if trace.second is not None:
            for i, j in pairs:
                if i in parts and j in parts:
                    trace.interact(parts[i], parts[j])
        return _result(out, _union(list(parts.values()), _size(shape), trace.n), trace)

    return impl


def _rule_flow_impl(rule: Any) -> Callable[..., Any]:
    """The flow of one elementwise table rule: which arguments flow, which pairs meet."""
    flowing, pairs = _rule_structure(rule)
    return _elementwise(rule.function, flowing, pairs)


def _rule_structure(rule: Any) -> tuple[frozenset[int], tuple[tuple[int, int], ...]]:
    """``(flowing, pairs)`` of a table rule: the arguments with a derivative, and the
    pairs of arguments that meet nonlinearly (a derivative naming the other, or the
    output)."""
    kinds = [derivative_kind(d) for d in rule.expressions]
    names = rule.arg_names
    flowing = frozenset(i for i, k in enumerate(kinds) if k not in ("none", "zero"))
    pairs = []
    for i, d in enumerate(rule.expressions):
        if i not in flowing or kinds[i] != "expr":
            continue
        used = d.names
        for j, other in enumerate(names):
            if j in flowing and (other in used or "y" in used):
                pairs.append((i, j))
    return flowing, tuple(pairs)


# ufunc -> (flowing, pairs) of its table rule, or None (no rule, or a flow declared for it);
# emptied whenever a rule or a flow is registered
_UFUNC_STRUCTURES: dict[Any, Any] = {}


def _ufunc_structure(ufunc: Any) -> Any:
    try:
        return _UFUNC_STRUCTURES[ufunc]
    except KeyError:
        pass
    rule = get_rule(ufunc)
    found = None
    if rule is not None and ufunc.nout == 1 and ufunc.signature is None \
            and Broadcasted[ufunc] not in _DECLARED:
        found = _rule_structure(rule)
    _UFUNC_STRUCTURES[ufunc] = found
    return found


def _scalar_ufunc(ufunc: Any, inputs: tuple, trace: Trace) -> Any:
    """A ufunc with a table rule on scalars of the fast path (and plain numbers): its value
    and the union of the flowing arguments' sets, without the dispatcher;
    ``NotImplemented`` where the general path is needed."""
    structure = _ufunc_structure(ufunc)
    if structure is None:
        return NotImplemented
    flowing, pairs = structure
    values: list[Any] = []
    sets: list[tuple | None] = []
    for a in inputs:
        t = type(a)
        if t is SparsityTracer:
            if a.trace is not trace or a.value.ndim or a.value.dtype.kind != "f":
                return NotImplemented
            values.append(a.value.item())
            sets.append(a.deps if a.deps is not None else tuple(a.rows.indices.tolist()))
        elif t is float or t is int or t is np.float64:
            values.append(a)
            sets.append(None)
        else:
            return NotImplemented
    with np.errstate(all="ignore"):
        out = ufunc(*values)
    if not isinstance(out, np.floating):
        return NotImplemented
    union_deps: tuple = ()
    for i in flowing:
        d = sets[i] if i < len(sets) else None
        if d:
            union_deps = d if not union_deps or union_deps is d else \
                tuple(sorted({*union_deps, *d}))
    if trace.second is not None:
        for i, j in pairs:
            if i < len(sets) and j < len(sets) and sets[i] and sets[j]:
                trace.pairs.append((sets[i], sets[j]))
    return _scalar(float(out), union_deps, trace)


# Flows made from rules, by rule (a rule registered again for the same function is a new
# object, so its flow is made again).
_RULE_FLOWS: dict[int, tuple[Any, Callable[..., Any]]] = {}


def _flow_of_rule(rule: Any) -> Callable[..., Any]:
    entry = _RULE_FLOWS.get(id(rule))
    if entry is None or entry[0] is not rule:
        entry = _RULE_FLOWS[id(rule)] = (rule, _rule_flow_impl(rule))
    return entry[1]


def _broadcasted_flow(op, *args, **kwargs):  # plum: no annotations here
    """Every ``Broadcasted[f]`` call: the flow of ``f``'s table rule (one method for all
    rules, which keeps ``index_flow``'s method table small)."""
    rule = get_rule(op.f)
    if rule is None:
        return _without_flow(op, args, kwargs)
    return _flow_of_rule(rule)(*args, **kwargs)


index_flow.register(_broadcasted_flow, plum.Signature(Broadcasted, varargs=object),
                    builtin=True)


def _rule_flow(rule: Any) -> None:
    """The generator's hook: a rule recorded as something other than ``Broadcasted[f]``
    (a primitive's own operator) gets a method of its own; the scalar path's cache of
    ufunc rules is emptied."""
    _UFUNC_STRUCTURES.clear()
    op_type = operator_type(rule.function)
    if not issubclass(op_type, Broadcasted):
        _register(op_type, _rule_flow_impl(rule), rule.name)


on_rule_registered(_rule_flow)


def declare_elementwise(*funcs: Any, flowing: Iterable[int] | None = None,
                        interacting: Iterable[tuple[int, int]] = ()) -> None:
    """Elementwise, broadcasting ``funcs`` whose result depends on the positional arguments
    ``flowing`` (default all); ``interacting`` pairs meet nonlinearly (for Hessians).

    Example: ``declare_elementwise(np.where, flowing=(1, 2))``.
    """
    pairs = tuple((int(i), int(j)) for i, j in interacting)
    for func in funcs:
        flow = frozenset(range(64)) if flowing is None else frozenset(flowing)
        for t in _op_types(func):
            _register(t, _elementwise(func, flow, pairs), function_name(func))


# forward mode's NaN-safe tangent product, recorded on traced values (``ad.jvp`` inside a
# function whose pattern is detected): elementwise, its two arguments multiplied
declare_elementwise(tangent_product, interacting=((0, 1),))


# -- moving entries: index maps -------------------------------------------------------------

def _index_map(func: Callable[..., Any], data: tuple[int, ...],
               moves: Callable[..., bool] | None = None) -> Callable[..., Any]:
    def impl(*args: Any, **kwargs: Any) -> Any:
        if moves is not None and not moves(*args, **kwargs):
            out = func(*plain(args), **{k: plain(v) for k, v in kwargs.items()})
            return conservative_result(out, _tracers(list(args), []))
        tracers: list[SparsityTracer] = []
        offset = [1]

        def to_index(x: Any) -> Any:
            if isinstance(x, SparsityTracer):
                tracers.append(x)
                start = offset[0]
                offset[0] += x.value.size
                return np.arange(start, offset[0], dtype=np.intp).reshape(x.value.shape)
            if type(x) in (list, tuple):
                return type(x)(to_index(o) for o in x)
            return np.zeros(np.shape(x), dtype=np.intp)

        index_args = [to_index(a) if i in data else plain(a) for i, a in enumerate(args)]
        kw = {k: plain(v) for k, v in kwargs.items()}
        out = func(*plain(args), **kw)
        index = func(*index_args, **kw)
        if not tracers:
            return out
        trace = tracers[0].trace
        # index 0: no dependence (constants, fill values); then each tracer's entries from
        # its offset on
        if len(tracers) == 1:
            stacked, shift = tracers[0].rows, 1  # index - 1: constants become -1 (empty)
        else:
            stacked, shift = vstack([_empty(1, trace.n)] + [t.rows for t in tracers],
                                    trace.n), 0

        def build(o: Any, ix: Any) -> Any:
            if type(o) in (list, tuple):
                return type(o)(build(a, b) for a, b in zip(o, ix))
            return _result(o, stacked.take(np.asarray(ix).reshape(-1) - shift), trace)

        return build(out, index)

    return impl


#: Operator types that only move entries, with their data positions (for compilers).
_INDEX_MAPS: dict[type, tuple[int, ...]] = {}
#: Operator types of first-order reductions, with the position of their ``axis``.
_REDUCTIONS: dict[type, int] = {}
#: Operator types of matrix products.
_CONTRACTIONS: set[type] = set()
#: Operator types that add the entries of their first argument into zeros, with the
#: function giving the output position of each entry (for compilers).
_SCATTERS: dict[type, Callable[..., Any]] = {}
#: Operator types linear in each of some positional arguments while the others stay
#: constant, with those positions (None: every positional argument).
_LINEAR: dict[type, tuple[int, ...] | None] = {}


#: Operator types whose output entries are order statistics of groups of their first
#: argument, with the position and the default of their ``axis`` (for compilers).
_ORDER_STATISTICS: dict[type, tuple[int, Any]] = {}


def note_index_map(*funcs: Any, data: Sequence[int] = (0,)) -> None:
    """Note that ``funcs`` only move entries of their arguments ``data`` (what
    :func:`declare_index_map` notes too), without declaring a sparsity flow."""
    for func in funcs:
        for t in _op_types(func):
            _INDEX_MAPS.setdefault(t, tuple(data))


def note_scatter(func: Any, positions: Callable[..., Any]) -> None:
    """Note that ``func(values, *params)`` adds each entry of ``values`` into an array of
    zeros, entries sent to one position adding up (``np.add.at``), so that a compiler may
    write it as a scatter-add. ``positions(values, *params)`` returns the flat output
    position of each entry of ``values`` broadcast to its target, in an int array of the
    target's shape; ``values`` broadcasts to that shape.

    Example: ``note_scatter(index_add, lambda v, key, shape:
    np.arange(math.prod(shape)).reshape(shape)[key])``.
    """
    for t in _op_types(func):
        _SCATTERS.setdefault(t, positions)


def note_linear(*funcs: Any, args: Sequence[int] | None = None) -> None:
    """Note that ``funcs`` are linear (or affine) in each of their positional arguments
    ``args`` (None: every positional argument) while the others stay constant, so that a
    compiler may write a call with one computed argument among them as a constant sparse
    matrix, read from probes and checked at random points. Functions declared with
    :func:`~dualad.sparsity.coarse.declare_probed`, and scans that are not second order,
    are noted so already.

    Example: ``note_linear(np.trace)``; ``note_linear(np.convolve, args=(0, 1))``.
    """
    positions = None if args is None else tuple(int(a) for a in args)
    for func in funcs:
        for t in _op_types(func):
            _LINEAR.setdefault(t, positions)


def is_linear_in(op_type: type, position: int) -> bool:
    """Whether an operator type was noted linear in its positional argument ``position``."""
    if op_type not in _LINEAR:
        return False
    positions = _LINEAR[op_type]
    return positions is None or position in positions


def note_order_statistic(*funcs: Any, axis_at: int = 1, axis_default: Any = None) -> None:
    """Note that each output entry of ``funcs(a, ...)`` is a weighted sum of the k-th
    smallest entries of one group of ``a``, the entries along ``axis`` (``axis_at``: its
    position among the positional arguments; ``axis_default``: its default; None: all
    entries), with the ranks k and the weights fixed by the other arguments (``np.median``:
    the middle one or two; ``np.sort``: every rank). A compiler may then sort each group
    at run time; it finds the ranks and the weights by probing the call.

    Example: ``note_order_statistic(np.sort, axis_default=-1)``;
    ``note_order_statistic(np.quantile, axis_at=2)``.
    """
    for func in funcs:
        for t in _op_types(func):
            _ORDER_STATISTICS.setdefault(t, (axis_at, axis_default))


def order_statistic_axis(op_type: type) -> tuple[int, Any] | None:
    """``(position, default)`` of ``axis`` for an operator type noted an order statistic
    (:func:`note_order_statistic`), else None."""
    return _ORDER_STATISTICS.get(op_type)


def scatter_positions(op_type: type) -> Callable[..., Any] | None:
    """The ``positions`` function of an operator type noted a scatter, else None."""
    return _SCATTERS.get(op_type)


def index_map_data(op_type: type) -> tuple[int, ...] | None:
    """The data positions of an operator type declared an index map, else None."""
    return _INDEX_MAPS.get(op_type)


def is_contraction(op_type: type) -> bool:
    """Whether an operator type was declared a matrix product (bilinear in its operands)."""
    return op_type in _CONTRACTIONS


def linear_reduction_axis(op_type: type) -> int | None:
    """The position of ``axis`` for a first-order reduction's operator type, else None."""
    return _REDUCTIONS.get(op_type)


def declare_index_map(*funcs: Any, data: Sequence[int] = (0,),
                      moves: Callable[..., bool] | None = None) -> None:
    """``funcs`` only move, repeat or drop entries of their positional arguments ``data``
    (each an array or a sequence of arrays); other arguments are parameters.

    The function applied to index arrays in place of the data says which input entry each
    output entry copies; constants among the data become entries with no dependence.

    ``moves(*args, **kwargs)``, when given, says whether a call only moves entries (``np.pad``
    with ``mode="edge"`` does, ``mode="mean"`` does not); the other calls take the
    conservative flow.

    Example: ``declare_index_map(np.roll, np.reshape)``; ``declare_index_map(np.append,
    data=(0, 1))``.
    """
    if moves is None:  # always moves entries: a compiler may copy them
        note_index_map(*funcs, data=data)
    for func in funcs:
        for t in _op_types(func):
            _register(t, _index_map(func, tuple(data), moves), function_name(func))


# -- reductions ------------------------------------------------------------------------------

def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(int(a) % max(ndim, 1) for a in axis))


def reduce_groups(rows: IndexSets, shape: tuple[int, ...], axes: tuple[int, ...]
                  ) -> IndexSets:
    """The sets of a reduction over ``axes`` of an array of ``shape``: each output entry's
    set is the union over its group of reduced entries."""
    size = _size(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    groups = np.arange(size, dtype=np.int64).reshape(shape).transpose(kept + list(axes))
    out_size = _size(tuple(shape[d] for d in kept))
    width = _size(tuple(shape[d] for d in axes))
    target = np.repeat(np.arange(out_size, dtype=np.int64), width)
    return combine(rows, groups.reshape(-1), target, out_size)


def _reduction(func: Callable[..., Any], second_order: bool, axis_at: int,
               axis_default: Any = None) -> Callable[..., Any]:
    def impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        if type(a) in (list, tuple):  # np.sum([x, y]): the stacked array
            a = np.stack(a)
        kw = {k: plain(v) for k, v in kwargs.items()}
        out = func(plain(a), *plain(args), **kw)
        if not isinstance(a, SparsityTracer):
            return out
        axis = args[axis_at - 1] if len(args) >= axis_at else kwargs.get("axis", axis_default)
        rows = reduce_groups(a.rows, a.value.shape, _axes(axis, a.value.ndim))
        if second_order:
            a.trace.interact(rows, rows)
        return _result(out, rows, a.trace)

    return impl


def declare_reduction(*funcs: Any, second_order: bool = False, axis_at: int = 1,
                      axis_default: Any = None) -> None:
    """``funcs(a, axis=None, ..., keepdims=...)``: each output entry depends on its group
    of reduced entries. ``second_order``: entries of a group meet nonlinearly (``prod``).
    ``axis_at``: the position of ``axis`` among the positional arguments;
    ``axis_default``: its default (``0`` for ``np.add.reduce``).

    Example: ``declare_reduction(np.sum, np.mean)``; ``declare_reduction(np.prod,
    second_order=True)``.
    """
    for func in funcs:
        for t in _op_types(func):
            if not second_order and axis_default is None:
                _REDUCTIONS.setdefault(t, axis_at)
            _register(t, _reduction(func, second_order, axis_at, axis_default),
                      function_name(func))


def _scan(func: Callable[..., Any], second_order: bool, axis_default: Any = None
          ) -> Callable[..., Any]:
    def impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = func(plain(a), *plain(args), **{k: plain(v) for k, v in kwargs.items()})
        if not isinstance(a, SparsityTracer):
            return out
        axis = args[0] if args else kwargs.get("axis", axis_default)
        shape = a.value.shape
        index = np.arange(a.value.size, dtype=np.int64).reshape(shape)
        if axis is None:  # numpy scans the flattened array
            index = index.reshape(-1)
            axis = 0
        lines = np.moveaxis(index, int(axis) % max(index.ndim, 1), -1)
        length = lines.shape[-1]
        lines = lines.reshape(-1, length)
        # entry i of a line depends on entries 0..i of that line
        # (the output has the input's layout, flattened for axis=None: same flat indices)
        target, source = np.tril_indices(length)
        rows = combine(a.rows, lines[:, source].reshape(-1), lines[:, target].reshape(-1),
                       a.value.size)
        if second_order:
            a.trace.interact(rows, rows)
        return _result(out, rows, a.trace)

    return impl


def declare_scan(*funcs: Any, second_order: bool = False, axis_default: Any = None) -> None:
    """``funcs(a, axis=None, ...)`` (``np.cumsum``): entry ``i`` along the axis depends on
    entries ``0..i`` (of the flattened array for ``axis=None``).
    ``second_order``: those entries meet nonlinearly (``np.cumprod``).
    """
    if not second_order:  # a scan of sums is linear: a compiler may write it as a matrix
        note_linear(*funcs, args=(0,))
    for func in funcs:
        for t in _op_types(func):
            _register(t, _scan(func, second_order, axis_default), function_name(func))


# -- contractions ---------------------------------------------------------------------------

def _as_matrix(x: Any, left: bool) -> tuple[np.ndarray, bool]:
    v = np.asarray(plain(x))
    if v.ndim == 1:
        return (v[None, :] if left else v[:, None]), True
    return v, False


def _matrix_product(func: Callable[..., Any]) -> Callable[..., Any]:
    def impl(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        out = func(plain(a), plain(b), *plain(args), **{k: plain(v) for k, v in kwargs.items()})
        av, bv = np.asarray(plain(a)), np.asarray(plain(b))
        if av.ndim == 0 or bv.ndim == 0:
            return index_flow(Broadcasted.instance(np.multiply), a, b)
        if av.ndim > 2 or bv.ndim > 2:  # stacks of matrices: probed (linear in each)
            return probed_flow(func)(a, b, *args, **kwargs)
        am, _ = _as_matrix(a, True)
        bm, _ = _as_matrix(b, False)
        m, k = am.shape
        p = bm.shape[1]
        ta, tb = isinstance(a, SparsityTracer), isinstance(b, SparsityTracer)
        trace = (a if ta else b).trace
        mask_a = np.ones(am.shape, dtype=bool) if ta else am != 0
        mask_b = np.ones(bm.shape, dtype=bool) if tb else bm != 0
        parts = []
        ii = np.arange(m, dtype=np.int64)[:, None]
        jj = np.arange(p, dtype=np.int64)[None, :]
        if ta:  # out (i, j) <- a (i, l) where b (l, j) != 0
            nl, nj = np.nonzero(mask_b)
            parts.append(combine(a.rows, (ii * k + nl).reshape(-1),
                                 (ii * p + nj).reshape(-1), m * p))
        if tb:  # out (i, j) <- b (l, j) where a (i, l) != 0
            ni, nl = np.nonzero(mask_a)
            parts.append(combine(b.rows, (nl[:, None] * p + jj).reshape(-1),
                                 (ni[:, None] * p + jj).reshape(-1), m * p))
        if ta and tb and trace.second is not None:
            # a (i, l) meets b (l, j) for every i, l, j: gather b's sets onto a's rows
            i3, l3, j3 = np.meshgrid(np.arange(m), np.arange(k), np.arange(p), indexing="ij")
            linked = combine(b.rows, (l3 * p + j3).reshape(-1), (i3 * k + l3).reshape(-1),
                             m * k)
            trace.interact(a.rows, linked)
        rows = _union(parts, m * p, trace.n)
        return _result(out, rows, trace)

    return impl


def declare_contraction(*funcs: Any) -> None:
    """Matrix products (``np.matmul``, ``np.dot``): for operands with at most 2 dimensions
    ``out[i, j]`` depends on ``a[i, l]`` and ``b[l, j]`` for every ``l`` where the other
    factor is not a constant zero; two traced factors meet nonlinearly. Stacks of matrices
    take the probed flow of :func:`dualad.sparsity.coarse.declare_probed`.
    """
    for func in funcs:
        for t in _op_types(func):
            _CONTRACTIONS.add(t)
            _register(t, _matrix_product(func), function_name(func))


# -- composites ---------------------------------------------------------------------------

def declare_composite(func: Any, impl: Callable[..., Any]) -> None:
    """``func`` is ``impl``, written with numpy calls that have flows of their own (the
    family files' composite rules): its flow is traced through ``impl``.
    """
    for t in _op_types(func):
        _register(t, impl, function_name(func))


# -- buffers ---------------------------------------------------------------------------------

def _allocation(func: Callable[..., Any], fill: int | None) -> Callable[..., Any]:
    def impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = func(plain(a), *plain(args), **{k: plain(v) for k, v in kwargs.items()})
        if not isinstance(a, SparsityTracer) or not is_differentiable_output(out):
            return out
        trace = a.trace
        rows = None
        if fill is not None:
            value = args[fill - 1] if len(args) >= fill else kwargs.get("fill_value")
            if isinstance(value, SparsityTracer):
                rows = _broadcast_rows(value, np.shape(out))
        return SparsityTracer(np.array(out), rows if rows is not None
                              else _empty(_size(np.shape(out)), trace.n), trace)

    return impl


def declare_allocation(*funcs: Any, fill: int | None = None) -> None:
    """``funcs(a, ...)`` allocate a new array shaped like ``a`` that code then writes into:
    its entries depend on nothing (or on the positional argument ``fill``, ``np.full_like``).
    """
    for func in funcs:
        for t in _op_types(func):
            _register(t, _allocation(func, fill), function_name(func))



# -- value-dependent moves: sorting -------------------------------------------------------

def _sorting(func: Callable[..., Any], arg_func: Callable[..., Any]) -> Callable[..., Any]:
    def impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        kw = {k: plain(v) for k, v in kwargs.items()}
        out = func(plain(a), *plain(args), **kw)
        if not isinstance(a, SparsityTracer):
            return out
        order = arg_func(a.value, *plain(args), **kw)
        index = np.arange(a.value.size, dtype=np.int64).reshape(a.value.shape)
        axis = args[-1] if len(args) >= 1 + (arg_func is np.argpartition) \
            else kwargs.get("axis", -1)
        if axis is None:
            index = index.reshape(-1)
            axis = -1
        moved = np.take_along_axis(index, order, axis=axis)
        return _result(out, a.rows.take(moved.reshape(-1)), a.trace)

    return impl


def declare_sort(func: Any, arg_func: Any) -> None:
    """``func`` reorders its first argument along an axis as ``arg_func`` (its ``arg``
    version, with the same arguments) says: ``declare_sort(np.sort, np.argsort)``."""
    for t in _op_types(func):
        _register(t, _sorting(func, arg_func), function_name(func))


# -- choices and histograms ------------------------------------------------------------------

def _select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    out = np.select(plain(condlist), plain(choicelist), plain(default))
    tracers = [c for c in list(choicelist) + [default] if isinstance(c, SparsityTracer)]
    if not tracers or not is_differentiable_output(out):
        return out
    shape = np.shape(out)
    parts = [_broadcast_rows(c, shape) for c in tracers]
    return _result(out, _union(parts, _size(shape), tracers[0].trace.n), tracers[0].trace)


def _bincount(x: Any, weights: Any = None, minlength: int = 0) -> Any:
    out = np.bincount(plain(x), plain(weights), minlength)
    if not isinstance(weights, SparsityTracer):
        return out
    bins = np.asarray(plain(x), dtype=np.int64).reshape(-1)
    rows = combine(weights.rows, np.arange(bins.size, dtype=np.int64), bins, out.size)
    return _result(out, rows, weights.trace)


def declare_select(func: Any) -> None:
    """``np.select(condlist, choicelist, default)``: an entry depends on the entries at its
    position of every choice and the default (both branches kept, as ``np.where``)."""
    for t in _op_types(func):
        _register(t, _select, function_name(func))


def declare_bincount(func: Any) -> None:
    """``np.bincount(x, weights)``: bin ``k`` depends on the weights of the entries ``x``
    puts in it."""
    for t in _op_types(func):
        _register(t, _bincount, function_name(func))


# -- functions that write into their first argument -----------------------------------------

def _write(func: Callable[..., Any], data: tuple[int, ...]) -> Callable[..., Any]:
    def impl(target: Any, *args: Any, **kwargs: Any) -> Any:
        kw = {k: plain(v) for k, v in kwargs.items()}
        if not isinstance(target, SparsityTracer):
            if _tracers(list(args), []):
                raise TypeError(
                    f"dualad: {function_name(func)} writes traced values into a plain numpy "
                    f"array; allocate the target from the traced input (np.zeros_like(x)) so "
                    f"that it can hold them."
                )
            return func(target, *plain(args), **kw)
        # index 0: no dependence; the target's entries from 1, then each traced source's
        sources = [target]
        offset = 1 + target.value.size
        target_index = np.arange(1, offset, dtype=np.intp).reshape(target.value.shape)
        index_args = []
        for pos, a in enumerate(args, 1):
            if pos in data and isinstance(a, SparsityTracer):
                sources.append(a)
                index_args.append(np.arange(offset, offset + a.value.size,
                                            dtype=np.intp).reshape(a.value.shape))
                offset += a.value.size
            elif pos in data:
                index_args.append(np.zeros(np.shape(plain(a)), dtype=np.intp))
            else:
                index_args.append(plain(a))
        func(target.value, *plain(args), **kw)
        func(target_index, *index_args, **kw)
        n = target.trace.n
        stacked = vstack([_empty(1, n)] + [t.rows for t in sources], n)
        target.rows = stacked.take(target_index.reshape(-1))
        return None

    return impl


def declare_write(*funcs: Any, data: Sequence[int] = (1,)) -> None:
    """``funcs(target, ...)`` write the entries of their positional arguments ``data`` into
    ``target`` in place (``np.copyto``, ``np.put``): the written entries take those sets.
    """
    for func in funcs:
        for t in _op_types(func):
            _register(t, _write(func, tuple(data)), function_name(func))


# -- probed flows (functions linear in each traced argument) ---------------------------------

#: Above this many entries in a traced argument, probing gives way to the dense flow.
PROBE_LIMIT = 4096


def probed_flow(func: Callable[..., Any]) -> Callable[..., Any]:
    """The flow of ``func`` linear in each traced argument, read from unit-vector probes
    (see :func:`dualad.sparsity.coarse.declare_probed`), as a function of its arguments."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        kw = {k: plain(v) for k, v in kwargs.items()}
        with np.errstate(all="ignore"):
            out = func(*plain(args), **kw)
        traced = [i for i, a in enumerate(args) if isinstance(a, SparsityTracer)]
        if not traced or not is_differentiable_output(out):
            return out
        if any(args[i].value.size > PROBE_LIMIT for i in traced) or \
                any(isinstance(v, SparsityTracer) for v in kwargs.values()):
            return conservative_result(out, [args[i] for i in traced] +
                                       [v for v in kwargs.values()
                                        if isinstance(v, SparsityTracer)])
        trace = args[traced[0]].trace
        m = _size(np.shape(out))
        base = [np.ones(a.value.shape) if isinstance(a, SparsityTracer) else
                (np.abs(a) if isinstance(a, np.ndarray) and a.dtype.kind in "fciu" else a)
                for a in args]
        parts = []
        for i in traced:
            x = args[i]
            source, target = [], []
            probe = list(base)
            probe[i] = np.zeros(x.value.shape)
            with np.errstate(all="ignore"):
                at_zero = np.asarray(func(*probe, **kw))
            for j in range(x.value.size):
                unit = np.zeros(x.value.size)
                unit[j] = 1.0
                probe[i] = unit.reshape(x.value.shape)
                with np.errstate(all="ignore"):
                    reached = np.flatnonzero(np.asarray(func(*probe, **kw)) != at_zero)
                source.append(np.full(reached.size, j, dtype=np.int64))
                target.append(reached)
            src = np.concatenate(source) if source else np.zeros(0, np.int64)
            tgt = np.concatenate(target) if target else np.zeros(0, np.int64)
            parts.append(combine(x.rows, src, tgt, m))
        rows = union(parts, m, trace.n)
        if trace.second is not None:
            for a in range(len(parts)):
                for b in range(a + 1, len(parts)):
                    trace.interact(parts[a], parts[b])
        return _result(out, rows, trace)

    return impl
