"""``vmap``: a function mapped over an axis of its arguments, with JAX's meaning.

``vmap(fn, in_axes=0, out_axes=0)(*args)`` calls ``fn`` once per index along the mapped
axis of each mapped argument and stacks the results along ``out_axes``. ``in_axes`` is an
int, ``None`` (not mapped: passed whole to every call) or a tuple with one such entry per
positional argument; a mapped argument may be a tree (every leaf mapped along the same
axis). ``out_axes`` is an int or a tree matching the result (``None``: not stacked, the
first call's value).

For the compiled functions of ``ad.jit``, ``in_axes`` that map one array argument over
its leading axis (``0``, ``(0, None)``, ``(None, 0)``: a solver's ``jac(t, y)`` over
states) run one compiled loop over its rows (``.batch``). Otherwise it loops, which is
correct for any function: a batched pass of plain numpy code with the batch as an extra
axis is only right when every operation treats that axis as a batch (``np.roll(y, 1)``
without ``axis=`` does not, nor does ``np.max(y)``), which dualad cannot tell from the
outside.

Example:
    >>> import numpy as np, dualad as ad
    >>> jac = ad.vmap(ad.jacobian(lambda x: x ** 2))
    >>> jac(np.array([[1.0, 2.0], [3.0, 4.0]])).shape
    (2, 2, 2)
    >>> ad.vmap(lambda a, b: a @ b, in_axes=(0, None))(np.ones((3, 2)), np.ones(2))
    array([2., 2., 2.])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .core.trees import tree_flatten, tree_unflatten

__all__ = ["vmap"]

Axes = int | None | Sequence[Any]


def _axes_per_argument(in_axes: Axes, nargs: int, fname: str) -> list[Any]:
    if in_axes is None or isinstance(in_axes, (int, np.integer)):
        return [in_axes] * nargs
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple):
        raise TypeError(f"{fname}: in_axes must be an int, None or a tuple of them, got "
                        f"{type(in_axes).__name__}.")
    if len(in_axes) != nargs:
        raise ValueError(
            f"{fname}: in_axes has {len(in_axes)} entries but the function was called with "
            f"{nargs} positional argument(s); give one entry (an int or None) per argument."
        )
    return list(in_axes)


def _mapped_leaves(args: tuple, axes: list[Any], fname: str) -> tuple[list, list, int]:
    """Flattened arguments, each leaf's axis (None: not mapped), and the batch size."""
    leaves_of, axes_of, size = [], [], None
    for position, (arg, axis) in enumerate(zip(args, axes)):
        leaves, spec = tree_flatten(arg)
        leaf_axes: list[int | None] = []
        for leaf in leaves:
            if axis is None:
                leaf_axes.append(None)
                continue
            shape = np.shape(leaf)
            if not shape:
                raise ValueError(
                    f"{fname}: argument {position} is mapped over axis {axis} but is a "
                    f"scalar; pass in_axes=None for it (or give it a leading axis)."
                )
            ax = int(axis)
            if not -len(shape) <= ax < len(shape):
                raise ValueError(f"{fname}: in_axes={axis} is out of range for argument "
                                 f"{position} of shape {shape}.")
            n = shape[ax]
            if size is not None and n != size:
                raise ValueError(
                    f"{fname}: mapped arguments disagree on the batch size: {size} and {n} "
                    f"(argument {position}, shape {shape}, axis {axis})."
                )
            size = n
            leaf_axes.append(ax % len(shape))
        leaves_of.append((leaves, spec))
        axes_of.append(leaf_axes)
    if size is None:
        raise ValueError(f"{fname}: no argument is mapped (in_axes are all None); at least "
                         f"one argument needs an axis to map over.")
    return leaves_of, axes_of, size


def _slice(leaves_of: list, axes_of: list, i: int) -> tuple:
    args = []
    for (leaves, spec), leaf_axes in zip(leaves_of, axes_of):
        taken = [leaf if ax is None else np.asarray(leaf)[(slice(None),) * ax + (i,)]
                 for leaf, ax in zip(leaves, leaf_axes)]
        args.append(tree_unflatten(spec, taken))
    return tuple(args)


def _stack(results: list[Any], out_axes: Any, fname: str) -> Any:
    first_leaves, spec = tree_flatten(results[0])
    columns = [[leaf] for leaf in first_leaves]
    for r in results[1:]:
        leaves, other = tree_flatten(r)
        if other != spec or len(leaves) != len(columns):
            raise ValueError(f"{fname}: the function returned results of different "
                             f"structures for different rows.")
        for column, leaf in zip(columns, leaves):
            column.append(leaf)
    if out_axes is None or isinstance(out_axes, (int, np.integer)):
        leaf_axes = [out_axes] * len(columns)
    else:
        leaf_axes, out_spec = tree_flatten(out_axes)
        if len(leaf_axes) != len(columns):
            raise ValueError(f"{fname}: out_axes has {len(leaf_axes)} leaves but the result "
                             f"has {len(columns)}; give an int or a tree like the result.")
    stacked = []
    for column, ax in zip(columns, leaf_axes):
        if ax is None:
            stacked.append(column[0])
        else:
            stacked.append(np.stack([np.asarray(c) for c in column], axis=int(ax)))
    return tree_unflatten(spec, stacked)


def _moveaxis(tree: Any, out_axes: Any) -> Any:
    leaves, spec = tree_flatten(tree)
    if out_axes is None or isinstance(out_axes, (int, np.integer)):
        axes = [out_axes] * len(leaves)
    else:
        axes, _ = tree_flatten(out_axes)
    moved = [leaf if ax is None or ax == 0 else np.moveaxis(np.asarray(leaf), 0, int(ax))
             for leaf, ax in zip(leaves, axes)]
    return tree_unflatten(spec, moved)


def vmap(fn: Callable[..., Any], in_axes: Axes = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """``fn`` mapped over ``in_axes`` of its arguments, results stacked along ``out_axes``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> g = ad.vmap(ad.grad(lambda x: np.sum(x ** 3)), out_axes=1)
        >>> g(np.array([[1.0, 2.0], [3.0, 0.0]]))
        array([[ 3., 27.],
               [12.,  0.]])
    """
    fname = f"vmap({getattr(fn, '__name__', 'fn')})"

    @functools.wraps(fn)
    def mapped(*args: Any) -> Any:
        axes = _axes_per_argument(in_axes, len(args), fname)
        mapped = [i for i, a in enumerate(axes) if a is not None]
        if len(mapped) == 1 and isinstance(args[mapped[0]], np.ndarray) and \
                (axes[mapped[0]] == 0 or axes[mapped[0]] == -1 and args[mapped[0]].ndim == 1):
            batch_at = getattr(fn, "_batch_at", None)  # ad.jit's: any argument's rows
            if callable(batch_at):
                return _moveaxis(batch_at(mapped[0], args), out_axes)
            batch = getattr(fn, "batch", None)  # the first argument's rows
            if callable(batch) and mapped[0] == 0:
                return _moveaxis(batch(*args), out_axes)
        leaves_of, axes_of, size = _mapped_leaves(args, axes, fname)
        if size == 0:
            raise ValueError(f"{fname}: the mapped axis has length 0; there is no call to "
                             f"take the result's shape from.")
        results = [fn(*_slice(leaves_of, axes_of, i)) for i in range(size)]
        return _stack(results, out_axes, fname)

    return mapped
