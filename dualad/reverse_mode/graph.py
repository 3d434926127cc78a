"""Graph objects of reverse mode: AbstractNode, LeafNode, Variable, Node, CachedNode.

``Variable`` is a leaf holding a value and accumulating ``.grad``; every numpy call on
nodes returns a ``CachedNode``: the recorded call (a ``Node``: operator, arguments,
keyword arguments) plus its cached ``output``. Nodes hold their inputs, never the reverse,
so a graph lives exactly as long as the caller keeps its output.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.array([1.0, 2.0]))
    >>> y = np.sum(x * x)
    >>> y.backward()
    >>> x.grad
    array([2., 4.])
"""

from __future__ import annotations

import inspect
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..core.arguments import as_differentiable, is_differentiable_output, value
from ..core.array_protocol import (
    BINARY_OPERATORS,
    NumpyOverloads,
    value_observer,
)
from ..core.dispatch import backward, forward, gradient, missing_rule_message
from ..core.errors import MissingRuleError
from ..core.operators import Broadcasted, Method, Operator
from ..core.tracing import PAUSED as _paused  # noqa: N811 - read on hot paths
from ..core.tracing import (
    Traced,
    apply_operator,
    innermost,
    normalize_arguments,
    recording_paused,
)
from ..derivatives.registry import get_rule, not_differentiable_message, refused_positions
from .fast_path import PLAIN_VALUES, RECORDS, fast_path, general_pull

_Node = TypeVar("_Node", bound="CachedNode")

__all__ = [
    "AbstractNode",
    "LeafNode",
    "Variable",
    "Node",
    "CachedNode",
    "MutableNode",
    "AliasedNode",
    "not_writable_message",
    "primal_at",
    "register",
    "register_alias_hooks",
    "register_function_hook",
    "register_keyword_aliases",
    "register_write_hook",
]


class AbstractNode(Traced, NumpyOverloads):
    """Base of everything that lives in a reverse-mode graph."""

    __slots__ = ()

    @classmethod
    def _apply(cls, op: Operator, args: tuple, kwargs: dict, level: int) -> Any:
        if _MUTABLE_MADE:  # calls made after a write into an aliased value use its target
            args = _targets(args)
            if kwargs:
                kwargs = dict(zip(kwargs, _targets(tuple(kwargs.values()))))
        if not kwargs:
            out = record_call(op, args)
            if out is not _GENERAL:
                return out
        if kwargs and isinstance(op, Method) \
                and any(isinstance(v, AbstractNode) for v in kwargs.values()):
            # e.g. a primitive called with a traced keyword: rules give one gradient per
            # positional argument, so the node moves to its positional slot
            args, kwargs = _traced_keywords_positional(op.f, args, kwargs)
        values = tuple([
            a._primal() if isinstance(a, AbstractNode) and a.level == level
            else (primal_at(a, level) if type(a) in (list, tuple) else a)
            for a in args
        ])
        if kwargs:
            kw = {k: primal_at(v, level) for k, v in kwargs.items()}
            out = forward(op, *values, **kw)
        else:
            out = forward(op, *values)
        return _record_result(op, args, kwargs, values, out, level)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:
            op = _UFUNC_CALLS.get(ufunc)
            if op is None:
                op = _ufunc_call(ufunc)
            if op is not None:
                out = record_call(op, inputs)
                if out is not _GENERAL:
                    return out
        return NumpyOverloads.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        op = _FUNCTION_CALLS.get(func)
        if op is not None and (not kwargs or _constant_keywords(kwargs)):
            out = record_call(op, args, kwargs) if func not in _TRACED_OPTION_HOOKS or \
                len(args) == 1 or not any(isinstance(a, Traced) for a in args[1:]) \
                else _GENERAL
            if out is not _GENERAL:
                return _noted_view(func, args, kwargs, out)
        elif op is None and func not in _FUNCTION_HOOKS:
            _FUNCTION_CALLS[func] = Method.instance(func)
        normalized = normalize_arguments(args)
        if normalized is not None:  # foreign arrays, object arrays of traced values
            args = normalized
        if kwargs and any(isinstance(v, AbstractNode) for v in kwargs.values()):
            args, kwargs = _traced_keywords_positional(func, args, kwargs)
        hook = _FUNCTION_HOOKS.get(func)
        if hook is not None:
            handler, in_place = hook
            result = handler(func, args, kwargs)
            if result is not None or in_place:
                return result
        result = NumpyOverloads.__array_function__(self, func, types, args, kwargs)
        return _noted_view(func, args, kwargs, result)

    def __setitem__(self, key: Any, item: Any) -> None:
        raise TypeError(not_writable_message(self, f"x[{key!r}] = ..."))

    def copy(self, order: str = "K") -> Any:
        """A writable copy (``np.copy``)."""
        return np.copy(self)

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> Any:
        """Float dtypes keep the derivative (a copy, cast as numpy casts: ``np.astype``);
        other dtypes give the plain value."""
        if np.dtype(dtype).kind in "fc":
            if np.dtype(dtype) != getattr(self._primal(), "dtype", np.dtype(float)):
                return np.copy(np.astype(self, dtype))  # type: ignore[call-overload]
            return np.copy(self) if copy else self
        return np.asarray(value(self)).astype(dtype, **kwargs)

    def backward(self, seed: Any = None) -> None:
        """Reverse pass from this node; every reached ``Variable.grad`` accumulates.

        ``seed`` defaults to 1 for a scalar output and is required otherwise.
        """
        backward(self, seed)


def _record_result(op: Operator, args: tuple, kwargs: dict, values: tuple, out: Any,
                   level: int) -> Any:
    """The recorded node of ``op(*args)`` whose value is ``out`` (``values``: the arguments'
    values at ``level``); a result without derivative is returned as it is."""
    if not is_differentiable_output(out) or recording_paused():
        observer = value_observer.get()
        if observer is not None and not recording_paused():
            return observer.on_result(op, args, kwargs, out, level)
        return out
    if type(op) not in _HAS_GRADIENT:
        _require_gradient_rule(op, out, values)
    refused = _REFUSED.get(type(op), ())
    if refused:
        _refuse_traced(op, refused, args, level)
    if _MUTABLE_MADE:
        args, kwargs = _current_states(args, kwargs)
    node = _node(op, args, kwargs, out, level)
    if isinstance(out, (tuple, list)):
        items = [
            CachedNode.recorded(_OUTPUT_ITEM, (node, i), {}, o, level)
            if is_differentiable_output(o) else o
            for i, o in enumerate(out)
        ]
        if hasattr(out, "_fields"):  # a namedtuple
            return out._make(items)  # type: ignore[union-attr]
        return type(out)(items)
    return node


_F64 = np.float64
_F64_DTYPE = np.dtype(np.float64)
_ND = np.ndarray
# The keyword arguments of the scalar nodes (none; shared, never written to).
_NO_KEYWORDS: dict = {}


_UNSEEN = object()  # (a pullback not looked for yet)
_ONE = object()  # (_record_array of one argument)
#: A marker: the call needs the general path (:func:`~dualad.core.tracing.apply_operator`).
_GENERAL = object()


def record_call(op: Operator, args: tuple, kwargs: dict | None = None) -> Any:
    """Record ``op(*args, **kwargs)`` when its traced arguments are graph nodes of one
    level, the others plain numbers or arrays, and its keywords constants; else
    :data:`_GENERAL`.

    The entry of numpy's protocols and Python's operators on graph nodes: one pass over
    the arguments, one lookup of the call's :class:`~dualad.reverse_mode.fast_path.FastPath`
    record, and a node that keeps its pullback: a table rule's on float64 numbers
    (``pull``) or on arrays, else the resolved gradient method (``array_pull``).
    """
    if kwargs:
        if len(args) == 1:  # a reduction's axis=, keepdims=: one array
            a = args[0]
            ta = type(a)
            if ta is CachedNode or ta is Variable:
                va = a.output
                types = (type(op), type(va))
                try:
                    record = RECORDS[types]
                except KeyError:
                    record = fast_path(op, types)
                if record is not None:
                    return _recorded(op, args, kwargs, (va,), record.evaluate(va, **kwargs),
                                     a.level, record, types, 1)
        return _record_values(op, args, kwargs)
    if len(args) == 2:  # binary calls on nodes holding numbers, and numbers: the hot case
        a, b = args
        ta = type(a)
        tb = type(b)
        if ta is CachedNode:
            va = a.output
            if type(va) is _F64:
                level = a.level
                if tb is CachedNode:
                    vb = b.output
                    if type(vb) is _F64 and b.level == level:
                        return _record_scalar(op, args, (type(op), _F64, _F64), va, vb, 3,
                                              level)
                elif tb is float or tb is _F64 or tb is int:
                    return _record_scalar(op, args, (type(op), _F64, tb), va, b, 1, level)
        elif tb is CachedNode and (ta is float or ta is _F64 or ta is int):
            vb = b.output
            if type(vb) is _F64:
                return _record_scalar(op, args, (type(op), ta, _F64), a, vb, 2, b.level)
        # arrays: nodes (one level) and plain values, without the general loop
        if ta is CachedNode or ta is Variable:
            level = a.level
            va = a.output
            if tb is CachedNode or tb is Variable:
                if b.level == level:
                    return _record_array(op, args, a.output, b.output, 3, level)
            elif tb in PLAIN_VALUES and not (tb is _ND and b.dtype.hasobject):
                return _record_array(op, args, va, b, 1, level)
        elif (tb is CachedNode or tb is Variable) and ta in PLAIN_VALUES \
                and not (ta is _ND and a.dtype.hasobject):
            return _record_array(op, args, a, b.output, 2, b.level)
    elif len(args) == 1:
        a = args[0]
        ta = type(a)
        if ta is CachedNode or ta is Variable:
            va = a.output
            if type(va) is _F64 and ta is CachedNode:
                return _record_scalar(op, args, (type(op), _F64), va, None, 1, a.level)
            return _record_array(op, args, va, _ONE, 1, a.level)
    return _record_values(op, args)


def _record_scalar(op: Operator, args: tuple, types: tuple, va: Any, vb: Any, mask: int,
                   level: int) -> Any:
    """:func:`record_call` of one or two float64 numbers (``vb`` None for one)."""
    try:
        record = RECORDS[types]
    except KeyError:
        record = fast_path(op, types)
    if record is not None:
        pulls = record.pulls
        if pulls is not None:
            out = record.evaluate(va) if vb is None else record.evaluate(va, vb)
            if type(out) is _F64:
                pull = pulls[mask]
                if pull is not None:
                    if recording_paused():
                        return out
                    return _node(op, args, _NO_KEYWORDS, out, level, pull)
    return _record_values(op, args)


def _record_array(op: Operator, args: tuple, va: Any, vb: Any, mask: int, level: int) -> Any:
    """:func:`record_call` of two values, or of one (``vb`` is :data:`_ONE`); ``mask``:
    which arguments are nodes."""
    one = vb is _ONE
    types = (type(op), type(va)) if one else (type(op), type(va), type(vb))
    try:
        record = RECORDS[types]
    except KeyError:
        record = fast_path(op, types)
    if record is None:
        return _GENERAL
    out = record.evaluate(va) if one else record.evaluate(va, vb)
    pulls = record.array_pulls
    if pulls is not None:
        to = type(out)
        if to is _ND and out.dtype is _F64_DTYPE or to is _F64:
            pull = pulls[mask]
            if pull is not None:  # a table rule on arrays
                if _paused.get():
                    return out
                return _node(op, args, _NO_KEYWORDS, out, level, None, pull)
    return _recorded(op, args, {}, (va,) if one else (va, vb), out, level, record, types, mask)


def _record_values(op: Operator, args: tuple, kwargs: dict | None = None) -> Any:
    """:func:`record_call` of any arguments."""
    values = []
    level = None
    mask = 0  # bit i: argument i is a CachedNode or Variable
    bit = 1
    for a in args:
        t = type(a)
        if t is CachedNode or t is Variable:
            if level is None:
                level = a.level
            elif a.level != level:
                return _GENERAL
            values.append(a.output)
            mask |= bit
        elif t in PLAIN_VALUES:
            if t is _ND and a.dtype.hasobject:  # traced values inside: normalised first
                return _GENERAL
            values.append(a)
        elif isinstance(a, AbstractNode) and t is not MutableNode and t is not AliasedNode:
            if level is None:
                level = a.level
            elif a.level != level:
                return _GENERAL
            values.append(a._primal())
            mask = -1  # no scalar pullback for other node types
        else:  # lists, writable nodes, other traced types, foreign arrays
            return _GENERAL
        bit <<= 1
    types = (type(op), *map(type, values))
    try:
        record = RECORDS[types]
    except KeyError:
        record = fast_path(op, types)
    if record is None or level is None:
        return _GENERAL
    if kwargs:
        out = record.evaluate(*values, **kwargs)
    else:
        out = record.evaluate(*values)
        kwargs = {}
    to = type(out)
    if mask > 0:
        if to is _F64 and record.pulls is not None:
            pull = record.pulls[mask]
            if pull is not None:  # a table rule on float64 numbers
                if recording_paused():
                    return out
                return _node(op, args, _NO_KEYWORDS, out, level, pull)
        elif record.array_pulls is not None and (to is _ND and out.dtype is _F64_DTYPE
                                                 or to is _F64):
            pull = record.array_pulls[mask]
            if pull is not None:  # a table rule on arrays
                if recording_paused():
                    return out
                return _node(op, args, _NO_KEYWORDS, out, level, None, pull)
    return _recorded(op, args, kwargs, values, out, level, record, types, mask)


def _recorded(op: Operator, args: tuple, kwargs: dict, values: Any, out: Any, level: int,
              record: Any, types: tuple, mask: int) -> Any:
    """The node of a call whose value is ``out``, with the resolved gradient method of
    ``record`` as its pullback (see :func:`record_call`)."""
    to = type(out)
    if to is _F64 or to is _ND and out.dtype.kind in "fc":
        if _paused.get():
            return out
        if type(op) not in _HAS_GRADIENT:
            _require_gradient_rule(op, out, tuple(values))
        refused = _REFUSED.get(type(op))
        if refused:
            _refuse_traced(op, refused, args, level)
        pull = None
        if mask > 0 and (to is _F64 or out.dtype is _F64_DTYPE):
            pull = record.general_pulls.get((to, mask), _UNSEEN)
            if pull is _UNSEEN:
                pull = general_pull(record, op, types, to, mask)
        return _node(op, args, kwargs, out, level, None, pull)
    return _record_result(op, args, kwargs, tuple(values), out, level)


# ufunc -> Broadcasted[ufunc] (elementwise ufuncs; None for gufuncs, which take the
# general path)
_UFUNC_CALLS: dict[Any, Any] = {}


def _ufunc_call(ufunc: Any) -> Any:
    op = _UFUNC_CALLS[ufunc] = Broadcasted.instance(ufunc) if ufunc.signature is None \
        else Method.instance(ufunc)
    return op


# numpy function -> Method[function], for functions without a hook (filled on first use)
_FUNCTION_CALLS: dict[Any, Any] = {}
# Keyword values recorded as they are (anything else takes the general path).
_CONSTANT_TYPES = frozenset((int, bool, float, str, type(None), np.dtype, type))


def _constant_keywords(kwargs: dict) -> bool:
    """Whether every keyword argument is a plain constant (``axis=1``, ``keepdims=True``,
    a tuple of ints), and none is ``out=``."""
    for k, v in kwargs.items():
        t = type(v)
        if t in _CONSTANT_TYPES:
            if k == "out" and v is not None:
                return False
            continue
        if t is tuple and all(type(i) is int for i in v):
            continue
        return False
    return True


def _matmul(self: Any, other: Any) -> Any:
    out = record_call(_MATMUL, (self, other))
    return np.matmul(self, other) if out is _GENERAL else out


def _rmatmul(self: Any, other: Any) -> Any:
    out = record_call(_MATMUL, (other, self))
    return np.matmul(other, self) if out is _GENERAL else out


_MATMUL = Method.instance(np.matmul)
AbstractNode.__matmul__ = _matmul  # type: ignore[method-assign]
AbstractNode.__rmatmul__ = _rmatmul  # type: ignore[method-assign]


def _operator(ufunc: np.ufunc, reflected: bool) -> Any:
    """Python's operator for ``ufunc`` on graph nodes (``x * y``, ``2.0 - x``)."""
    op = Broadcasted.instance(ufunc)

    if reflected:
        def method(self: Any, other: Any) -> Any:
            out = record_call(op, (other, self))
            return apply_operator(op, (other, self), {}) if out is _GENERAL else out
    else:
        def method(self: Any, other: Any) -> Any:
            out = record_call(op, (self, other))
            return apply_operator(op, (self, other), {}) if out is _GENERAL else out

    method.__name__ = f"__{'r' if reflected else ''}{ufunc.__name__}__"
    return method


for _name, (_ufunc, _reflected) in BINARY_OPERATORS.items():
    setattr(AbstractNode, _name, _operator(_ufunc, _reflected))
del _name, _ufunc, _reflected
_NEGATIVE = Broadcasted.instance(np.negative)


def _negative(self: Any) -> Any:
    out = record_call(_NEGATIVE, (self,))
    return apply_operator(_NEGATIVE, (self,), {}) if out is _GENERAL else out


AbstractNode.__neg__ = _negative  # type: ignore[method-assign]


def _noted_view(func: Any, args: tuple, kwargs: dict, result: Any) -> Any:
    """``result`` of a numpy function on graph nodes, as numpy's aliasing has it: a view
    of a writable node is a writable view of it; a view of a computed value is noted on
    that value (``np.reshape(y)``, ``y.T``), so later writes into it reach the view."""
    if _MUTABLE_MADE and (type(result) is CachedNode or type(result) in (list, tuple)):
        result = _function_view(func, args, kwargs, result)
    if type(result) is CachedNode:
        out = result.output
        if type(out) is _ND and (out.base is not None
                                 or bool(args) and out is _output_of(args[0])) \
                or isinstance(out, Traced):  # np.reshape(y), y.T, np.real(y): a view?
            _ALIAS_HOOKS[3](func, result, args, kwargs, None)
    elif type(result) in (list, tuple):  # np.split(y, 2): views of y?
        for i, r in enumerate(result):
            if type(r) is CachedNode and (type(r.output) is _ND and r.output.base is not None
                                          or isinstance(r.output, Traced)):
                _ALIAS_HOOKS[3](func, r, args, kwargs, i)
    return result


class LeafNode(AbstractNode):
    """Base of leaves: nodes with no inputs."""

    __slots__ = ()


class Variable(LeafNode):
    """A leaf holding ``value``; ``grad`` is ``None`` until a backward pass reaches it.

    Example:
        >>> import numpy as np, dualad as ad
        >>> x = ad.Variable(3.0)
        >>> (x * x).backward(); (x * x).backward()
        >>> float(x.grad)  # accumulates across passes
        12.0
    """

    __slots__ = ("output", "grad", "level", "__weakref__")

    def __init__(self, value: Any, level: int = 0) -> None:
        self.output = as_differentiable(value, "Variable value")
        self.grad: Any = None
        self.level = level

    @property
    def value(self) -> Any:
        """The value this leaf holds (``output``, as graph nodes name their values)."""
        return self.output

    @value.setter
    def value(self, value: Any) -> None:
        self.output = value

    def _primal(self) -> Any:
        return self.output

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (``grad`` becomes ``None``)."""
        self.grad = None

    def __repr__(self) -> str:
        return f"Variable({self.value!r})"


class Node:
    """A recorded call: ``op`` (an :class:`~dualad.Operator`), ``args`` and ``kwargs``."""

    __slots__ = ("op", "args", "kwargs")

    def __init__(self, op: Operator, args: tuple, kwargs: dict | None = None) -> None:
        self.op = op
        self.args = args
        self.kwargs = kwargs or {}

    def __repr__(self) -> str:
        return f"Node({self.op!r}, {len(self.args)} args)"


#: Recording order: every node's ``seq`` is larger than its inputs', so the reverse pass
#: visits nodes by decreasing ``seq`` without sorting the graph first (thread-safe).
_next_seq = itertools.count(1).__next__
_new = object.__new__


class CachedNode(AbstractNode):
    """A :class:`Node` plus its cached ``output``.

    The call's parts are stored flat (``op``, ``args``, ``kwargs``) to keep a recorded
    operation small; ``.node`` gives them as a :class:`Node`. ``seq`` numbers nodes in
    recording order (inputs first). ``pull`` is the scalar pullback of a table rule's call
    on float64 numbers, ``array_pull`` that of its call on arrays (see
    :mod:`dualad.reverse_mode.fast_path`); else ``None``.
    """

    # (_target: set only once the node turned into an AliasedNode; never read otherwise)
    __slots__ = ("__weakref__", "_target", "args", "array_pull", "kwargs", "level", "op",
                 "output", "pull", "seq")
    _target: MutableNode

    def __init__(self, node: Node, output: Any, level: int = 0) -> None:
        self.op = node.op
        self.args = node.args
        self.kwargs = node.kwargs
        self.output = output
        self.level = level
        self.seq = _next_seq()
        self.pull = None
        self.array_pull = None

    @classmethod
    def recorded(cls: type[_Node], op: Operator, args: tuple, kwargs: dict, output: Any,
                 level: int, pull: Any = None, array_pull: Any = None) -> _Node:
        """Build a node from a call's parts without an intermediate :class:`Node`."""
        return _node(op, args, kwargs, output, level, pull, array_pull, cls)

    @property
    def node(self) -> Node:
        return Node(self.op, self.args, self.kwargs)

    def _primal(self) -> Any:
        return self.output

    def __repr__(self) -> str:
        return f"CachedNode({self.op!r}, output={self.output!r})"

    # numpy's aliasing (see dualad.reverse_mode.aliases): a view taken from a computed
    # value sees later in-place writes into it; in-place operators write
    def __getitem__(self, key: Any) -> Any:
        out = NumpyOverloads.__getitem__(self, key)
        if type(out) is CachedNode and (type(out.output) is _ND and out.output.base is not None
                                        or isinstance(out.output, Traced)):
            _ALIAS_HOOKS[1](self, out, key)
        return out

    def __setitem__(self, key: Any, item: Any) -> None:
        _ALIAS_HOOKS[2](self, key, item)

    def __iadd__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.add, other)

    def __isub__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.subtract, other)

    def __imul__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.multiply, other)

    def __itruediv__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.true_divide, other)

    def __ifloordiv__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.floor_divide, other)

    def __imod__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.remainder, other)

    def __ipow__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.power, other)

    def __imatmul__(self, other: Any) -> Any:
        return _ALIAS_HOOKS[0](self, np.matmul, other)


def _output_of(node: Any) -> Any:
    return node.output if isinstance(node, CachedNode) else None


# Set by dualad.reverse_mode.aliases: in_place(node, ufunc, other), note_item_view(base,
# view, key), set_item(node, key, item), note_function_view(func, view, args, kwargs, item).
_ALIAS_HOOKS: list[Any] = []


def register_alias_hooks(in_place: Any, note_item_view: Any, set_item: Any,
                         note_function_view: Any) -> None:
    """How computed values follow numpy's aliasing (:mod:`dualad.reverse_mode.aliases`)."""
    _ALIAS_HOOKS[:] = [in_place, note_item_view, set_item, note_function_view]


def _node(op: Operator, args: tuple, kwargs: dict, output: Any, level: int,
          pull: Any = None, array_pull: Any = None, cls: Any = None) -> Any:
    """:meth:`CachedNode.recorded` (a ``cls`` node, by default a CachedNode); the recording
    hot paths call this function (a plain call costs less than a class method's)."""
    self = _new(CachedNode if cls is None else cls)
    self.op = op
    self.args = args
    self.kwargs = kwargs
    self.output = output
    self.level = level
    self.seq = _next_seq()
    self.pull = pull
    self.array_pull = array_pull
    return self


class MutableNode(CachedNode):
    """A graph node that numpy code may write into: ``y[key] = value``.

    Made by ``np.empty_like`` / ``zeros_like`` / ``ones_like`` / ``full_like`` / ``np.copy``
    of a node (see :mod:`dualad.numpy_rules.writes`). ``_state`` is the recorded node of
    its current contents; a write records ``assign(_state, key, value)`` and rebinds this
    node (and ``_state``) to it. Calls that use this node record ``_state`` instead, so they
    keep the contents they saw when later writes happen.

    numpy's aliasing is kept: what numpy returns as a view of the array (``y[1:]``,
    ``y[0]`` of a matrix, ``y.T``, ``y.reshape(...)``: results that share its memory) is a
    writable node too, refreshed after every write into ``y``; a write into the view
    (``v[0] = ...``, ``v += ...``) is written through to ``y``. In-place operators
    (``y += x``) are writes.
    """

    __slots__ = ("_state", "_views", "_base", "_key", "_recompute")
    _state: CachedNode
    _views: Any  # None, or a list of weak references to the views of this node
    _base: MutableNode | None
    _key: Any
    _recompute: Any  # a view's: (the state of its base) -> its own state

    @classmethod
    def from_state(cls, state: CachedNode) -> MutableNode:
        """A writable node whose current contents are ``state``."""
        self = cls.recorded(state.op, state.args, state.kwargs, state.output, state.level)
        _handle_made(self)
        self._state = state
        self._views = None
        self._base = None
        self._key = None
        self._recompute = None
        return self

    def _rebind(self, state: CachedNode) -> None:
        self.op, self.args, self.kwargs = state.op, state.args, state.kwargs
        self.output, self.level, self.seq = state.output, state.level, state.seq
        self._state = state
        if self._base is not None:  # a view: the write goes through to its base
            self._write_back()
        if self._views:
            self._refresh_views()

    # -- numpy's aliasing: views of a writable node follow its writes, and writes into a
    # view reach the array it views
    def _view(self, out: Any, key: Any, recompute: Any) -> Any:
        """``out`` (computed from this node) as a view of it when numpy's result shares
        memory with this node's array, else ``out`` unchanged."""
        # (the values: in forward-over-reverse the outputs are Duals)
        out_value, own_value = value(getattr(out, "output", None)), value(self.output)
        if not (type(out) is CachedNode and out.level == self.level
                and isinstance(out_value, np.ndarray) and isinstance(own_value, np.ndarray)
                and np.may_share_memory(out_value, own_value)):
            return out
        view = MutableNode.from_state(out)
        view._base = self
        view._key = key
        view._recompute = recompute
        if self._views is None:
            self._views = []
        self._views.append(weakref.ref(view))
        return view

    def _refresh_views(self) -> None:
        alive = []
        for ref in self._views:
            view = ref()
            if view is None:
                continue
            alive.append(ref)
            state = view._recompute(self._state)
            view.op, view.args, view.kwargs = state.op, state.args, state.kwargs
            view.output, view.level, view.seq = state.output, state.level, state.seq
            view._state = state
            if view._views:
                view._refresh_views()
        self._views = alive

    def _write_back(self) -> None:
        base = self._base
        if self._key is _NOT_INDEXED:
            raise TypeError(
                f"dualad: writing into a view made by a numpy function (shape "
                f"{self.shape}) of an array allocated with np.empty_like / np.zeros_like / "
                f"np.copy is not supported in reverse mode; write into the array itself "
                f"with an index (y[i, :] = ..., y[..., j] = ...)."
            )
        _WRITE_RULE[0](base, self._key, self._state)

    def __getitem__(self, key: Any) -> Any:
        out = NumpyOverloads.__getitem__(self, key)
        return self._view(out, key, lambda state: state[key])

    def __setitem__(self, key: Any, item: Any) -> None:
        if not _WRITE_RULE:
            raise TypeError(not_writable_message(self, f"x[{key!r}] = ..."))
        _WRITE_RULE[0](self, key, item)


class AliasedNode(CachedNode):
    """A computed value that numpy code wrote into in place, or a view of one.

    ``y = x * 1.0; v = y[1:]; y += x * x`` turns ``y`` and ``v`` into aliased nodes (see
    :mod:`dualad.reverse_mode.aliases`): their own fields stay the recorded call they
    were, which the calls recorded before the write still use, and everything done with
    them from then on (values, calls, writes, a reverse pass from them) uses ``target``: a
    :class:`MutableNode` holding the contents numpy would show.
    """

    __slots__ = ()

    @property
    def target(self) -> MutableNode:
        """The writable node this value is now (its views are views of it)."""
        return self._target

    @property
    def _state(self) -> CachedNode:
        return self._target._state

    def _primal(self) -> Any:
        return self._target.output

    def __getitem__(self, key: Any) -> Any:
        return self.target[key]

    def __setitem__(self, key: Any, item: Any) -> None:
        self.target[key] = item

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(a.target if type(a) is AliasedNode else a for a in inputs)
        if "out" in kwargs:
            out = kwargs["out"]
            kwargs["out"] = tuple(o.target if type(o) is AliasedNode else o for o in out) \
                if type(out) is tuple else (out.target if type(out) is AliasedNode else out)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        return func(*_targets(args), **dict(zip(kwargs, _targets(tuple(kwargs.values())))))

    def backward(self, seed: Any = None) -> None:
        self.target.backward(seed)

    def __repr__(self) -> str:
        return f"AliasedNode(output={self._primal()!r})"


def _targets(args: tuple) -> tuple:
    """``args`` with each aliased node (also in lists and tuples) replaced by its target."""
    def target(a: Any) -> Any:
        t = type(a)
        if t is AliasedNode:
            return a.target
        if (t is list or t is tuple) and any(type(b) is AliasedNode for b in a):
            return t(b.target if type(b) is AliasedNode else b for b in a)
        return a

    return tuple(target(a) for a in args)


# The key of a view made by a numpy function (np.transpose, x.T, reshape), not by indexing.
_NOT_INDEXED = object()


def _function_view(func: Any, args: tuple, kwargs: dict, out: Any, item: Any = None) -> Any:
    """``out = func(*args, **kwargs)`` as a view of the writable node among ``args`` when
    numpy's result shares its memory (``x.T``, ``np.reshape``; each item of ``np.split``'s
    list: ``out`` is item ``item`` of the result), else ``out`` unchanged.

    A write into such a view reaches its base through the base's entries the view shows,
    found by applying ``func`` to the base's flat indices."""
    if type(out) in (list, tuple) and item is None:
        return type(out)(_function_view(func, args, kwargs, o, j) for j, o in enumerate(out))
    if type(out) is not CachedNode:
        return out
    for i, a in enumerate(args):
        if type(a) is MutableNode:
            def recompute(state: Any, i: int = i) -> Any:
                call = list(args)
                call[i] = state
                result = func(*call, **kwargs)
                return result if item is None else result[item]

            key: Any = _NOT_INDEXED
            shape = a.shape
            try:
                index = recompute(np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape))
                if (isinstance(index, np.ndarray) and index.dtype.kind == "i"
                        and index.shape == out.shape):
                    key = np.unravel_index(index, shape)
            except Exception:  # noqa: BLE001 - no index map: writes through it are refused
                key = _NOT_INDEXED
            return a._view(out, key, recompute)
    return out


#: Whether writable nodes are alive: calls then record their states (no fast path). It
#: falls back to False when the last one is gone, so code that writes nothing into
#: arrays runs the fast path again.
_MUTABLE_MADE = False
_HANDLES: set[Any] = set()  # weak references to the live writable nodes
_HANDLES_LOCK = threading.RLock()  # (a reference may die inside a locked section)


def _handle_made(node: MutableNode) -> None:
    global _MUTABLE_MADE
    with _HANDLES_LOCK:
        _HANDLES.add(weakref.ref(node, _handle_gone))
        _MUTABLE_MADE = True


def _handle_gone(ref: Any, handles: set = _HANDLES, lock: Any = _HANDLES_LOCK) -> None:
    global _MUTABLE_MADE
    with lock:
        handles.discard(ref)
        if not handles:
            _MUTABLE_MADE = False
# Handles whose recorded contents are their current state (``_state``).
_STATEFUL = frozenset((MutableNode, AliasedNode))


def _current_states(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with each MutableNode (also in lists) replaced by its state."""
    found = False
    for a in args:
        t = type(a)
        if t in _STATEFUL or ((t is list or t is tuple)
                              and any(type(b) in _STATEFUL for b in a)):
            found = True
            break
    if not found and not any(type(v) in _STATEFUL for v in kwargs.values()):
        return args, kwargs

    def state(a: Any) -> Any:
        t = type(a)
        if t in _STATEFUL:
            return a._state
        if t is list or t is tuple:
            return t(b._state if type(b) in _STATEFUL else b for b in a)
        return a

    return tuple(state(a) for a in args), {k: state(v) for k, v in kwargs.items()}


# numpy function -> (handler(func, args, kwargs), in_place), run for calls on graph nodes
# before recording; a handler returns None to fall back to recording the call (an in-place
# function's handler always returns None). The rule files register them.
_FUNCTION_HOOKS: dict[Any, tuple[Any, bool]] = {}
# How ``writable[key] = value`` is recorded (set by the rule file of writes).
_WRITE_RULE: list[Any] = []


# Functions whose hook acts only on traced values after the first argument.
_TRACED_OPTION_HOOKS: set[Any] = set()


def register_function_hook(func: Any, handler: Any, *, in_place: bool = False,
                           traced_options_only: bool = False) -> None:
    """Run ``handler(func, args, kwargs)`` for ``func`` called on graph nodes.

    ``in_place``: ``func`` writes into an argument and returns None (``np.copyto``).
    ``traced_options_only``: the handler returns None unless a traced value is passed
    after the first argument (``initial=``), so calls without one skip it.
    """
    _FUNCTION_HOOKS[func] = (handler, in_place)
    _FUNCTION_CALLS.pop(func, None)
    if traced_options_only:
        _TRACED_OPTION_HOOKS.add(func)
        _FUNCTION_CALLS[func] = Method.instance(func)
    else:
        _TRACED_OPTION_HOOKS.discard(func)


def register_write_hook(write: Any) -> None:
    """Record ``node[key] = value`` on a :class:`MutableNode` with ``write(node, key, value)``."""
    _WRITE_RULE[:] = [write]


def not_writable_message(node: Any, what: str = "x[key] = value") -> str:
    """The error for a write into a node that is not writable."""
    kind = "a differentiated argument" if not isinstance(node, CachedNode) else \
        "a computed graph node"
    return (
        f"dualad: {what} writes in place into {kind} (shape {node.shape}), which "
        f"reverse mode cannot record. Allocate the array to fill from a traced value instead: "
        f"y = np.empty_like(x) (or np.zeros_like(x), np.copy(x)) and write into y; or build "
        f"a new array (np.where(mask, new, x), np.concatenate([...]))."
    )


# Keyword-only parameters that stand for positional ones (np.clip's min= is a_min), and a
# completion of the positional arguments numpy needs; registered by the rule files.
_KEYWORD_ALIASES: dict[Any, dict[str, str]] = {}
_COMPLETIONS: dict[Any, Any] = {}
_SIGNATURES: dict[Any, Any] = {}


def register_keyword_aliases(func: Any, aliases: dict[str, str],
                             complete: Any = None) -> None:
    """Traced keywords of ``func``: ``aliases`` maps keyword names to parameter names;
    ``complete(args) -> args`` fixes the positional arguments up for numpy."""
    _KEYWORD_ALIASES[func] = dict(aliases)
    if complete is not None:
        _COMPLETIONS[func] = complete


def _traced_keywords_positional(func: Any, args: tuple | list, kwargs: dict
                                ) -> tuple[tuple, dict]:
    """Move graph nodes passed by keyword to their positional slots.

    Gradient rules return one gradient per *positional* argument, so a node passed by
    keyword (``np.diff(x, prepend=y)``) would get none; it is passed positionally instead
    (missing earlier parameters take their defaults), or refused with a clear error.
    """
    params = _SIGNATURES.get(func)
    if params is None:
        try:
            params = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            params = []
        _SIGNATURES[func] = params
    aliases = _KEYWORD_ALIASES.get(func, {})
    kwargs = {aliases.get(k, k): v for k, v in kwargs.items()}
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in positional]
    args = list(args)
    for name, v in list(kwargs.items()):
        if not isinstance(v, AbstractNode):
            continue
        if name not in names:
            if any(p.kind == p.VAR_POSITIONAL for p in params) or not params:
                continue  # e.g. np.einsum(..., out=): not a differentiable input
            if getattr(getattr(v, "output", None), "dtype", np.dtype(float)).kind in "biu":
                continue  # a mask or an index computed while a tape records: no gradient
            raise TypeError(
                f"dualad: np.{getattr(func, '__name__', func)}(..., {name}=<traced value>): "
                f"a traced value passed by this keyword would get no gradient; pass it "
                f"positionally."
            )
        index = names.index(name)
        while len(args) < index:  # fill earlier slots: given keywords, else defaults
            slot = names[len(args)]
            if slot in kwargs:
                args.append(kwargs.pop(slot))
                continue
            default = positional[len(args)].default
            if default is inspect.Parameter.empty:
                break
            args.append(default)
        if len(args) == index and name in kwargs:
            args.append(kwargs.pop(name))
    while len(args) < len(names) and names[len(args)] in kwargs:  # following keywords
        args.append(kwargs.pop(names[len(args)]))
    complete = _COMPLETIONS.get(func)
    if complete is not None:
        args = complete(args)
    return tuple(args), kwargs


# Operator types known to have a gradient rule (checked once per type when recording).
_HAS_GRADIENT: set[type] = set()


def _require_gradient_rule(op: Operator, out: Any, values: tuple) -> None:
    """Raise MissingRuleError now (not at backward time) when ``op`` has no gradient rule."""
    types = (type(op), type(out), type(out)) + tuple(map(type, values))
    if not gradient.has_rule(types):
        raise MissingRuleError(missing_rule_message(op, values, "reverse"))
    _HAS_GRADIENT.add(type(op))
    if isinstance(op, Broadcasted):
        _REFUSED[type(op)] = refused_positions(op.f) or ()


# Elementwise operator types -> arguments whose derivative has no closed form (a table's
# "no closed form"): a traced value there is refused when the call is recorded.
_REFUSED: dict[type, tuple[int, ...]] = {}


def _refuse_traced(op: Operator, positions: tuple[int, ...], args: tuple, level: int) -> None:
    for i in positions:
        a = args[i] if i < len(args) else None
        if isinstance(a, AbstractNode) and a.level == level:
            rule = get_rule(op.f)
            assert rule is not None  # positions are refused for table rules only
            raise MissingRuleError(not_differentiable_message(rule, i))


def primal_at(x: Any, level: int) -> Any:
    """The value ``x`` stands for at ``level``: a node's own value, else ``x`` itself."""
    if isinstance(x, AbstractNode):
        if x.level == level:
            return x._primal()
        return x
    if type(x) in (list, tuple):
        return type(x)([primal_at(a, level) for a in x])
    return x


def register(f: Callable[..., Any], *args: Any, **kwargs: Any) -> CachedNode:
    """Record the call ``f(*args, **kwargs)`` and return its node.

    ``f`` need not be a primitive; its gradient comes from ``ad.gradient`` methods for
    ``ad.Method[f]``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> x = ad.Variable(np.array([1.0, 2.0]))
        >>> y = ad.register(np.sin, x)   # records the call, as np.sin(x) does
        >>> type(y).__name__
        'CachedNode'
    """
    op = f if isinstance(f, Operator) else Method.instance(f)
    top = innermost(args, kwargs)
    level = 0 if top is None else top.level
    values = tuple(primal_at(a, level) for a in args)
    kw = {k: primal_at(v, level) for k, v in kwargs.items()}
    return CachedNode(Node(op, args, kwargs), forward(op, *values, **kw), level)


def _output_item(outputs: tuple, index: int) -> Any:
    """Item ``index`` of a multi-output call's result (its own recorded operator)."""
    return outputs[index]


_OUTPUT_ITEM = Method.instance(_output_item)
