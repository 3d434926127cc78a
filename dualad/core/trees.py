"""Trees of arguments and results: nested tuples, lists and dicts with array leaves.

Example:
    >>> from dualad.core.trees import tree_flatten, tree_unflatten
    >>> leaves, spec = tree_flatten({"a": 1.0, "b": (2.0, [3.0])})
    >>> leaves
    [1.0, 2.0, 3.0]
    >>> tree_unflatten(spec, [x * 10 for x in leaves])
    {'a': 10.0, 'b': (20.0, [30.0])}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["tree_flatten", "tree_unflatten", "tree_map"]

_LEAF = None


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
        if kind is not tuple and kind is not list and hasattr(kind, "_make"):
            return kind._make(built)  # a namedtuple, e.g. np.linalg.eigh's result
        return kind(built)

    return build(spec)


def tree_map(f: Callable[[Any], Any], tree: Any) -> Any:
    """Apply ``f`` to every leaf of ``tree``."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten(spec, [f(x) for x in leaves])
