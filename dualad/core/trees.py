"""Trees of arguments and results: nested containers with array leaves.

Tuples, lists, dicts, ``NamedTuple``\\ s and dataclasses (frozen or not) are containers
without registration; any other class becomes one with :func:`register_tree`, following
JAX's convention (``flatten(obj) -> (children, aux)``, ``unflatten(aux, children) -> obj``).
A dataclass field declared with ``field(metadata={"static": True})`` is kept as data of the
container, not a leaf (a name, a flag, a configuration).

Example:
    >>> from dualad.core.trees import tree_flatten, tree_unflatten
    >>> leaves, spec = tree_flatten({"a": 1.0, "b": (2.0, [3.0])})
    >>> leaves
    [1.0, 2.0, 3.0]
    >>> tree_unflatten(spec, [x * 10 for x in leaves])
    {'a': 10.0, 'b': (20.0, [30.0])}
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "register_tree", "is_container"]

_LEAF = None

# type -> (flatten, unflatten); container types users registered.
_REGISTERED: dict[type, tuple[Callable[[Any], tuple[Any, Any]], Callable[[Any, Any], Any]]] = {}
_LOCK = threading.Lock()


def register_tree(cls: type, flatten: Callable[[Any], tuple[Any, Any]],
                  unflatten: Callable[[Any, Any], Any]) -> type:
    """Make instances of ``cls`` containers: transforms then see through them to their leaves.

    ``flatten(obj)`` returns ``(children, aux)``: an iterable of children (arrays, numbers
    or further containers) and hashable data that is not differentiated; ``unflatten(aux,
    children)`` rebuilds an object from them. Gradients then come back as ``cls`` objects.
    Returns ``cls``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> class Point:
        ...     def __init__(self, x, y):
        ...         self.x, self.y = x, y
        >>> _ = ad.register_tree(Point, lambda p: ((p.x, p.y), None),
        ...                      lambda aux, children: Point(*children))
        >>> g = ad.grad(lambda p: p.x * p.y ** 2)(Point(2.0, 3.0))
        >>> type(g).__name__, float(g.x), float(g.y)
        ('Point', 9.0, 12.0)
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_tree: expected a class, got {type(cls).__name__}.")
    if not callable(flatten) or not callable(unflatten):
        raise TypeError(
            "register_tree(cls, flatten, unflatten): flatten(obj) -> (children, aux) and "
            "unflatten(aux, children) -> obj must be callables."
        )
    with _LOCK:
        _REGISTERED[cls] = (flatten, unflatten)
    return cls


def is_container(x: Any) -> bool:
    """Whether ``x`` is a tree node rather than a leaf (a tuple, list, dict, dataclass
    instance or an object of a registered class)."""
    return (isinstance(x, (tuple, list, dict)) or type(x) in _REGISTERED
            or (dataclasses.is_dataclass(x) and not isinstance(x, type)))


class _Custom:
    """The container part of a spec for a registered class or a dataclass."""

    __slots__ = ("cls", "unflatten", "aux")

    def __init__(self, cls: type, unflatten: Callable[[Any, Any], Any], aux: Any) -> None:
        self.cls, self.unflatten, self.aux = cls, unflatten, aux

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Custom) and self.cls is other.cls
                and self.unflatten is other.unflatten and _same(self.aux, other.aux))

    def __hash__(self) -> int:
        return hash(self.cls)

    def __repr__(self) -> str:
        return f"{self.cls.__name__}(aux={self.aux!r})"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays as aux: compare by identity
        return a is b


def _dataclass_flatten(obj: Any) -> tuple[list[Any], Any]:
    names, children, static = [], [], []
    for f in dataclasses.fields(obj):
        if f.metadata.get("static", False):
            static.append((f.name, getattr(obj, f.name)))
        else:
            names.append(f.name)
            children.append(getattr(obj, f.name))
    return children, (tuple(names), tuple(static))


def _dataclass_unflatten_for(cls: type) -> Callable[[Any, Any], Any]:
    def unflatten(aux: Any, children: Any) -> Any:
        # Fields are set directly (no __init__ / __post_init__, which may validate or
        # convert values: a gradient or a traced value must come through unchanged).
        names, static = aux
        obj: Any = object.__new__(cls)
        for name, child in zip(names, children):
            object.__setattr__(obj, name, child)
        for name, v in static:
            object.__setattr__(obj, name, v)
        return obj

    return unflatten


_DATACLASS_UNFLATTEN: dict[type, Callable[[Any, Any], Any]] = {}


def _container(item: Any) -> tuple[Any, list[Any]] | None:
    """``(spec kind, children)`` for a registered class or a dataclass; else ``None``."""
    cls = type(item)
    entry = _REGISTERED.get(cls)
    if entry is not None:
        children, aux = entry[0](item)
        return _Custom(cls, entry[1], aux), list(children)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        unflatten = _DATACLASS_UNFLATTEN.get(cls)
        if unflatten is None:
            unflatten = _DATACLASS_UNFLATTEN.setdefault(cls, _dataclass_unflatten_for(cls))
        children, aux = _dataclass_flatten(item)
        return _Custom(cls, unflatten, aux), children
    return None


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """Leaves of ``tree`` in order, and a spec to rebuild it (iterative, any depth)."""
    leaves: list[Any] = []

    def spec_of(node: Any) -> Any:
        # Build specs without recursion: an explicit stack of (node, container-spec slot).
        root: list[Any] = [None]
        stack: list[tuple[Any, list[Any], int]] = [(node, root, 0)]
        while stack:
            item, parent, slot = stack.pop()
            if isinstance(item, dict):
                keys = list(item.keys())
                children: list[Any] = [None] * len(keys)
                parent[slot] = ("dict", keys, children)
                for i in reversed(range(len(keys))):
                    stack.append((item[keys[i]], children, i))
            elif type(item) in (tuple, list) or isinstance(item, tuple):  # namedtuples too
                children = [None] * len(item)
                parent[slot] = (type(item), None, children)
                for i in reversed(range(len(item))):
                    stack.append((item[i], children, i))
            elif (custom := _container(item)) is not None:
                kind, items = custom
                children = [None] * len(items)
                parent[slot] = (kind, None, children)
                for i in reversed(range(len(items))):
                    stack.append((items[i], children, i))
            else:
                parent[slot] = _LEAF
                leaves.append(item)
        return root[0]

    return leaves, spec_of(tree)


def tree_unflatten(spec: Any, leaves: list[Any]) -> Any:
    """Rebuild a tree of the shape ``spec`` describes from ``leaves``."""
    it = iter(leaves)

    def build(s: Any) -> Any:
        if s is _LEAF:
            return next(it)
        kind, keys, children = s
        built = [build(c) for c in children]
        if kind == "dict":
            return dict(zip(keys, built))
        if isinstance(kind, _Custom):
            return kind.unflatten(kind.aux, built)
        if kind is not tuple and kind is not list and hasattr(kind, "_make"):
            return kind._make(built)  # a namedtuple, e.g. np.linalg.eigh's result
        return kind(built)

    return build(spec)


def tree_map(f: Callable[[Any], Any], tree: Any) -> Any:
    """Apply ``f`` to every leaf of ``tree``."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten(spec, [f(x) for x in leaves])
