"""``ravel_pytree``: a tree of arrays as one flat vector, and the function that rebuilds it.

As ``jax.flatten_util.ravel_pytree``: the leaves (in :func:`~dualad.core.trees.tree_flatten`
order, the order of every dualad transform: dicts in insertion order, where JAX sorts
their keys) are raveled and concatenated into a 1-D array of their common dtype (float64 when
they are all integers or booleans); ``unravel(flat)`` splits a vector of that size back
into leaves of the original shapes and dtypes, in a tree of the original structure.
``unravel`` is plain numpy slicing and reshaping, so it works on traced vectors too: a
loss of a dataclass becomes a function of a flat vector for ``scipy.optimize``.

Example:
    >>> import numpy as np, dualad as ad
    >>> flat, unravel = ad.ravel_pytree({"w": np.ones((2, 2)), "b": 0.5})
    >>> flat
    array([1. , 1. , 1. , 1. , 0.5])
    >>> unravel(flat * 2)["w"]
    array([[2., 2.],
           [2., 2.]])
    >>> ad.grad(lambda v: np.sum(unravel(v)["w"] ** 2) + unravel(v)["b"])(flat)
    array([2., 2., 2., 2., 1.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .array_protocol import shape_of
from .tracing import Traced
from .trees import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(tree: Any) -> tuple[np.ndarray, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves of ``tree`` as one 1-D array, and its inverse."""
    leaves, spec = tree_flatten(tree)
    arrays = [np.asarray(leaf) for leaf in leaves]
    for leaf, array in zip(leaves, arrays):
        if array.dtype == object or isinstance(leaf, Traced):
            raise TypeError(
                f"ravel_pytree: the leaves must be numbers or numeric arrays (got "
                f"{type(leaf).__name__}); register container classes with ad.register_tree."
            )
    dtypes = [a.dtype for a in arrays]
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    if not np.issubdtype(dtype, np.inexact):
        dtype = np.dtype(np.float64)
    shapes = [a.shape for a in arrays]
    sizes = [a.size for a in arrays]
    total = int(sum(sizes))
    flat = (np.concatenate([np.ravel(a).astype(dtype, copy=False) for a in arrays])
            if arrays else np.zeros(0, dtype))
    offsets = np.cumsum([0] + sizes)

    def unravel(vector: Any) -> Any:
        shape = shape_of(vector)
        if tuple(shape) != (total,):
            raise ValueError(
                f"unravel: expected a 1-D vector of size {total} (the flattened tree), got "
                f"shape {tuple(shape)}"
            )
        parts = []
        for start, stop, leaf_shape, leaf_dtype in zip(offsets[:-1], offsets[1:], shapes,
                                                       dtypes):
            part = np.reshape(vector[int(start):int(stop)], leaf_shape)
            if not isinstance(part, Traced) and part.dtype != leaf_dtype:
                part = _cast(part, leaf_dtype)
            parts.append(part)
        return tree_unflatten(spec, parts)

    return flat, unravel


def _cast(part: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A plain part back in its leaf's dtype (a complex part keeps its imaginary part only
    when the leaf was complex, as JAX warns and drops it)."""
    if np.iscomplexobj(part) and not np.issubdtype(dtype, np.complexfloating):
        part = part.real
    return part.astype(dtype)
