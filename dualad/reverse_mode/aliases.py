"""numpy's aliasing for computed values in reverse mode: in-place writes reach every name
and every view of the array they write into.

numpy's ``y += v`` writes into ``y``'s memory: another name for it (``a = y``), a view of
it (``y[1:]``, ``y.T``, ``y.reshape(...)``) and the array a view was taken from all show
the new values. A graph node is both the handle the user holds and the recorded call
that later calls used, so a write cannot simply change it. Here:

- a view of a computed value (indexing or a numpy function whose result shares its
  memory) is noted on its base, with weak references, when it is made: code that takes
  no views pays nothing, and a note lives only as long as the view;
- an in-place operator on a computed value that nothing else refers to (no other name,
  no view, no call in a container) records the operation and rebinds the name, as
  numpy's result is then the same;
- otherwise the value's family (the array its views were taken from, all their views)
  turns into :class:`~dualad.reverse_mode.graph.AliasedNode` handles of writable
  :class:`~dualad.reverse_mode.graph.MutableNode` s, which record each write as a
  functional update: calls recorded before keep the contents they saw, everything
  after sees the write. ``y[i] = ...`` on a computed value works the same way.

The result is cast to the written array's dtype, and its shape must be the array's, as
in numpy. numpy's scalars (``x[0]`` of a vector, ``np.sum(x)``) are immutable: their
in-place operators rebind, as numpy's do.

Example:
    >>> import numpy as np, dualad as ad
    >>> def f(x):
    ...     y = x * 1.0
    ...     tail = y[1:]
    ...     y += x * x
    ...     return tail
    >>> ad.jacobian(f, mode="reverse")(np.array([1.0, 2.0, 3.0]))
    array([[0., 5., 0.],
           [0., 0., 7.]])
"""

from __future__ import annotations

import operator
import sys
import weakref
from typing import Any

import numpy as np

from ..core.arguments import value
from ..core.array_protocol import shape_of
from .graph import (
    AliasedNode,
    CachedNode,
    LeafNode,
    MutableNode,
    not_writable_message,
    register_alias_hooks,
)

__all__ = ["in_place", "writable"]

# id(base) -> (weak reference to the base, [(weak reference to a view, key, call)]): the
# view is base[key] (call None) or func(*args, **kwargs) with the base at args[position]
# (call = (func, args without the base, position, kwargs)).
_VIEWS: dict[int, tuple[Any, list[tuple[Any, Any, Any]]]] = {}


def _note(base: CachedNode, view: CachedNode, key: Any, call: Any) -> None:
    bid = id(base)
    entry = _VIEWS.get(bid)
    if entry is None:
        # (the callback keeps what it uses: it may run while the interpreter exits)
        entry = _VIEWS[bid] = (weakref.ref(base, lambda _, pop=_VIEWS.pop: pop(bid, None)),
                               [])
    views = entry[1]
    views.append((weakref.ref(view), key, call))
    n = len(views)
    if n >= 64 and n & (n - 1) == 0:  # at each doubling, forget views no longer alive
        views[:] = [v for v in views if v[0]() is not None]


def _shares(view: Any, base: Any) -> bool:
    """Whether the computed value ``view`` shares the memory of the computed value
    ``base`` (both plain nodes of one level)."""
    if type(base) is not CachedNode or base.level != view.level:
        return False
    array, part = base.output, view.output
    if type(array) is np.ndarray and type(part) is np.ndarray:
        owner = part.base  # numpy's views refer to the array that owns the memory
        return part is array or owner is not None and (owner is array or owner is array.base)
    array = value(array)  # in forward-over-reverse the outputs are Duals
    return type(array) is np.ndarray and np.may_share_memory(value(part), array)


def note_item_view(base: Any, view: CachedNode, key: Any) -> None:
    """``view = base[key]`` shares ``base``'s memory: note it (called by indexing)."""
    if _shares(view, base):
        _note(base, view, key, None)


def note_function_view(func: Any, view: CachedNode, args: tuple, kwargs: dict,
                       item: int | None) -> None:
    """``view = func(*args, **kwargs)`` (``np.reshape``, ``np.transpose``, ...; item
    ``item`` of a list of results, ``np.split``) shares the memory of a computed argument:
    note it on that argument."""
    for i, a in enumerate(args):
        if _shares(view, a):  # the note must not keep the base alive: args without it
            _note(a, view, None, (func, args[:i] + (None,) + args[i + 1:], i, kwargs, item))
            return


def _remake(target: MutableNode, key: Any, call: Any) -> Any:
    """The noted view of a base, made again from the writable node ``target``."""
    if call is None:
        return target[key]
    func, args, i, kwargs, item = call
    result = func(*args[:i], target, *args[i + 1:], **kwargs)
    return result if item is None else result[item]


def _base_of(node: CachedNode) -> CachedNode | None:
    """The computed value ``node`` was noted as a view of, if any."""
    out = value(node.output)
    if type(out) is np.ndarray and out.base is None:
        return None
    for a in node.args:
        if type(a) is CachedNode:
            entry = _VIEWS.get(id(a))
            if entry is not None and any(ref() is node for ref, _, _ in entry[1]):
                return a
    return None


# The in-place operators' ufuncs and Python's binary operators (numpy's operators on arrays)
_OPERATORS = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
              np.true_divide: operator.truediv, np.floor_divide: operator.floordiv,
              np.remainder: operator.mod, np.power: operator.pow, np.matmul: operator.matmul}


def _sharing(node: Any) -> tuple[int, int]:
    """(the opcode the caller of the in-place operator runs, references to ``node``)."""
    frame = sys._getframe(3)
    return frame.f_code.co_code[frame.f_lasti], sys.getrefcount(node)


class _Probe:
    """Measures :func:`_sharing` of a value that only its own name refers to."""

    def __iadd__(self, other: Any) -> Any:
        return _probe_in_place(self, None, other)


def _probe_in_place(node: Any, ufunc: Any, other: Any) -> Any:  # in_place's shape
    return _sharing(node)


def _calibrate() -> tuple[int, int]:
    probe = _Probe()
    probe += None
    return probe  # type: ignore[return-value]


#: ``y += v`` with ``y`` referred to by its own name only: the caller's opcode and the
#: reference count :func:`in_place` sees (more references: other names, views, lists).
_UNSHARED = _calibrate()


def in_place(node: Any, ufunc: np.ufunc, other: Any) -> Any:
    """``node <op>= other`` as numpy does it; the value the name is rebound to."""
    t = type(node)
    if t is CachedNode:
        if type(value(node.output)) is not np.ndarray:  # numpy's scalars are immutable
            return _result_like(node, ufunc, other)
        _refuse_argument_view(node, f"{_SYMBOLS.get(ufunc, ufunc.__name__)}=")
        opcode, count = _sharing(node)
        if opcode == _UNSHARED[0] and count <= _UNSHARED[1] and _base_of(node) is None:
            return _result_like(node, ufunc, other)  # no other name or view: rebind
        node = writable(node)
    elif t is AliasedNode:
        node = node.target
    elif t is not MutableNode:
        return NotImplemented
    node[...] = _result_like(node, ufunc, other)
    return node


def set_item(node: Any, key: Any, item: Any) -> None:
    """``node[key] = item`` on a computed value: written as numpy writes it."""
    if type(node) is not CachedNode or type(value(node.output)) is not np.ndarray:
        raise TypeError(not_writable_message(node, f"x[{key!r}] = ..."))
    _refuse_argument_view(node, f"[{key!r}] = ...")
    writable(node)[key] = item


_SYMBOLS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
            np.floor_divide: "//", np.remainder: "%", np.power: "**", np.matmul: "@"}


def _refuse_argument_view(node: CachedNode, write: str) -> None:
    """Refuse a write into a view of a differentiated argument: numpy would write into the
    argument (the caller's array), which reverse mode cannot follow."""
    out = value(node.output)
    while out.base is not None and node is not None:  # up through views of views
        for a in node.args:
            if isinstance(a, LeafNode) and isinstance(value(a), np.ndarray) \
                    and np.may_share_memory(out, value(a)):
                break
        else:
            node = _base_of(node)
            continue
        raise TypeError(
            f"dualad: an in-place write (v{write}) into a view (shape {out.shape}) of a "
            f"differentiated argument (shape {np.shape(value(a))}): numpy would change "
            f"the argument itself, which reverse mode does not follow. Copy the "
            f"argument first (x = x.copy()) or write v = v op ... for a new array."
        )


def _result_like(node: Any, ufunc: np.ufunc, other: Any) -> Any:
    """``ufunc(node, other)`` with numpy's in-place rules: the shape of ``node`` and cast
    to its dtype (``same_kind``)."""
    result = _OPERATORS[ufunc](node, other)
    if type(result) is CachedNode:
        a, r = node.output, result.output
        if type(a) is np.ndarray and type(r) is np.ndarray and a.shape == r.shape \
                and a.dtype == r.dtype:
            return result
    shape = node.shape
    if shape_of(result) != shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {shape} doesn't match the "
            f"broadcast shape {shape_of(result)} (an in-place np.{ufunc.__name__} keeps "
            f"the array's shape; write y = y op v for a new array)"
        )
    dtype, got = node.dtype, getattr(result, "dtype", None)
    if got is not None and got != dtype:
        if not np.can_cast(got, dtype, "same_kind"):
            raise TypeError(
                f"Cannot cast ufunc '{ufunc.__name__}' output from {got!r} to {dtype!r} "
                f"with casting rule 'same_kind' (an in-place operator keeps the array's "
                f"dtype, as in numpy); write y = y op v for a new {got} array."
            )
        result = np.astype(result, dtype)  # type: ignore[call-overload]
    return result


def writable(node: CachedNode) -> MutableNode:
    """The writable node ``node`` becomes, with its family: the computed value it is a view
    of (up to the first that is not a view) and all views of them turn into aliased
    nodes of writable nodes, views of one another as numpy's arrays are."""
    root = node
    while True:
        base = _base_of(root)
        if base is None:
            break
        root = base
    target = MutableNode.from_state(_copy(root))
    _become(root, target)
    found = target if root is node else None
    stack = [(root, target)]
    while stack:
        base, base_target = stack.pop()
        entry = _VIEWS.pop(id(base), None)
        if entry is None:
            continue
        for ref, key, call in entry[1]:
            view = ref()
            if view is None or type(view) is not CachedNode:
                continue
            view_target = _remake(base_target, key, call)
            if type(view_target) is not MutableNode:
                raise TypeError(
                    f"dualad: an in-place write into an array (shape {base.shape}) that a "
                    f"view of shape {view.shape} shares cannot be followed in reverse mode; "
                    f"copy the view (np.copy) or the array before writing."
                )
            _become(view, view_target)
            if view is node:
                found = view_target
            stack.append((view, view_target))
    assert found is not None  # node is root or one of its views
    return found


def _copy(node: CachedNode) -> CachedNode:
    """A node with ``node``'s recorded call and number (the contents before the write)."""
    copy = CachedNode.recorded(node.op, node.args, node.kwargs, node.output, node.level)
    copy.seq = node.seq
    return copy


def _become(node: CachedNode, target: MutableNode) -> None:
    node.__class__ = AliasedNode
    node._target = target


register_alias_hooks(in_place, note_item_view, set_item, note_function_view)
