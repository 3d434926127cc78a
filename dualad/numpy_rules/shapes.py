"""Rules for functions that move, add, drop or repeat entries.

reshape, ravel, transpose, swapaxes, moveaxis, expand_dims, squeeze, broadcast_to,
atleast_1d/2d/3d, flip / fliplr / flipud, rot90, roll, tile, repeat, pad (every mode
that copies entries), diag, diagonal, diagflat, tril, triu, copy, matrix_transpose.
Gradients map ``grad`` back (the inverse move, or a sum over copies); tangents apply the
same move to the partials' value axes. Functions that copy entries irregularly use an
index map (see :mod:`dualad.numpy_rules._support`).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.reshape(x, (3, 2)) ** 2))(np.ones(6))
    array([2., 2., 2., 2., 2., 2.])
    >>> ad.grad(lambda x: np.sum(np.tile(x, 3)))(np.ones(2))
    array([3., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    Traced,
    declare_index_map,
    innermost_tag,
    shape_of,
    unbroadcast,
)
from ._signatures import bind
from ._support import (
    dual_or_value,
    gradient_rule,
    kfirst,
    klast,
    ndim_of,
    normalize_axes,
    normalize_axes_in_order,
    normalize_axis,
    tangent_rule,
    unsupported_tangent,
)
from .indexing import gather_gradient, gather_tangent, index_map

__all__ = ["index_map_rules", "roll_array"]


@gradient_rule(np.reshape)
def _reshape(grad: Any, output: Any, x: Any, *args: Any,
             **kwargs: Any):
    order = bind(("a", "shape", "order"), (x,) + args, kwargs).get("order") or "C"
    return (_unflatten(grad, x, order),) + (None,) * len(args)


@gradient_rule(np.ravel)
def _ravel(grad: Any, output: Any, x: Any, *args: Any,
           **kwargs: Any):
    order = bind(("a", "order"), (x,) + args, kwargs).get("order") or "C"
    return (_unflatten(grad, x, order),) + (None,) * len(args)


def _unflatten(grad: Any, x: Any, order: str) -> Any:
    """``grad`` of a reshape of ``x`` read in ``order``, back in ``x``'s shape."""
    if order not in ("C", "F"):
        base = x
        while not isinstance(base, np.ndarray) and hasattr(base, "_primal"):
            base = base._primal()
        base = np.asarray(base)
        if order == "A":  # Fortran order for Fortran-contiguous x, else C order
            order = "F" if base.flags.f_contiguous and not base.flags.c_contiguous else "C"
    if order in ("C", "F"):
        return np.reshape(grad, shape_of(x), order=order)
    # ravel(order="K") reads x in its memory layout: find where each read entry came from.
    where = np.empty_like(base, dtype=np.intp)
    where[...] = np.arange(where.size).reshape(where.shape)
    source = np.ravel(where, order=order)
    return np.reshape(np.reshape(grad, (-1,))[np.argsort(source)], shape_of(x))


@gradient_rule(np.transpose)
def _transpose(grad: Any, output: Any, x: Any, *args: Any,
               **kwargs: Any):
    axes = bind(("a", "axes"), (x,) + args, kwargs).get("axes")
    if axes is None:
        return (np.transpose(grad),) + (None,) * len(args)
    ndim = len(shape_of(x))
    inverse = np.argsort([a % ndim for a in axes])
    return (np.transpose(grad, tuple(int(i) for i in inverse)),) + (None,) * len(args)


@gradient_rule(np.swapaxes)
def _swapaxes(grad: Any, output: Any, x: Any, axis1: Any,
              axis2: Any):
    return (np.swapaxes(grad, axis1, axis2), None, None)


@gradient_rule(np.broadcast_to)
def _broadcast_to(grad: Any, output: Any, x: Any, *args: Any,
                  **kwargs: Any):
    return (unbroadcast(grad, shape_of(x)),) + (None,) * len(args)


# -- both modes: axes moved, added or removed --------------------------------------------


def _reshape_rules(*funcs: Any) -> None:
    """Rules for functions whose output is ``x`` reshaped (same entries, C order)."""

    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        return (np.reshape(grad, shape_of(x)),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        value = funcs[0](x.value, *args, **kwargs)
        p = x.partials
        return dual_or_value(value, np.reshape(p, shape_of(value) + shape_of(p)[-1:]), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{funcs[0].__name__}"
    gradient_rule(*funcs)(grad_impl)
    tangent_rule(*funcs)(tangent_impl)


_reshape_rules(np.expand_dims)
_reshape_rules(np.squeeze)


def _atleast_rules(func: Any) -> None:
    """``np.atleast_Nd``: a reshape of each argument (a tuple of results for several)."""

    def grad_impl(grad: Any, output: Any, *arys: Any) -> tuple:
        if len(arys) == 1:
            return (np.reshape(grad, shape_of(arys[0])),)
        return tuple(np.reshape(g, shape_of(a)) for g, a in zip(grad, arys))

    def one(x: Any, tag: Any) -> Any:
        if not (isinstance(x, Dual) and x.tag is tag):
            return func(x)
        value = func(x.value)
        p = x.partials
        return Dual._make(value, np.reshape(p, shape_of(value) + shape_of(p)[-1:]), tag)

    def tangent_impl(*arys: Any) -> Any:
        tag = innermost_tag(arys)
        if tag is None:
            return func(*arys)
        if len(arys) == 1:
            return one(arys[0], tag)
        return tuple(one(a, tag) for a in arys)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals="any")(tangent_impl)


for _f in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    _atleast_rules(_f)


@gradient_rule(np.moveaxis)
def _moveaxis(grad: Any, output: Any, x: Any, source: Any, destination: Any) -> tuple:
    return (np.moveaxis(grad, destination, source), None, None)


@tangent_rule(np.moveaxis)
def _moveaxis_tangent(x: Any, source: Any, destination: Any) -> Any:
    nd = ndim_of(x.value)
    src = _axes_list(source, nd, "moveaxis")
    dst = _axes_list(destination, nd, "moveaxis")
    return dual_or_value(np.moveaxis(x.value, source, destination),
                         np.moveaxis(x.partials, src, dst), x.tag)


def _axes_list(axis: Any, nd: int, fname: str) -> Any:
    if isinstance(axis, (int, np.integer)):
        return normalize_axis(axis, nd, fname)
    return [normalize_axis(a, nd, fname) for a in axis]


@gradient_rule(np.matrix_transpose, np.linalg.matrix_transpose)
def _matrix_transpose(grad: Any, output: Any, x: Any) -> tuple:
    return (np.swapaxes(grad, -1, -2),)


@tangent_rule(np.matrix_transpose, np.linalg.matrix_transpose)
def _matrix_transpose_tangent(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


@gradient_rule(np.copy)
def _copy(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    return (grad,) + (None,) * len(args)


@tangent_rule(np.copy)
def _copy_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    return Dual._make(np.copy(x.value), np.copy(x.partials), x.tag)


# -- flips and rotations ------------------------------------------------------------------


def _flip_axes(x: Any, axis: Any) -> tuple[int, ...]:
    return normalize_axes(axis, ndim_of(x), "flip")


@gradient_rule(np.flip)
def _flip(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    axis = bind(("axis",), args, kwargs).get("axis")
    return (np.flip(grad, _flip_axes(x, axis)),) + (None,) * len(args)


@tangent_rule(np.flip)
def _flip_tangent(x: Any, axis: Any = None) -> Any:
    axes = _flip_axes(x.value, axis)
    return dual_or_value(np.flip(x.value, axes), np.flip(x.partials, axes), x.tag)


@gradient_rule(np.fliplr)
def _fliplr(grad: Any, output: Any, x: Any) -> tuple:
    return (np.flip(grad, 1),)


@gradient_rule(np.flipud)
def _flipud(grad: Any, output: Any, x: Any) -> tuple:
    return (np.flip(grad, 0),)


@tangent_rule(np.fliplr)
def _fliplr_tangent(x: Any) -> Any:
    return np.flip(x, 1)


@tangent_rule(np.flipud)
def _flipud_tangent(x: Any) -> Any:
    return np.flip(x, 0)


def _rot90_params(x: Any, args: tuple, kwargs: dict) -> tuple[int, tuple[int, int]]:
    p = bind(("m", "k", "axes"), (x,) + args, kwargs)
    axes = p.get("axes", (0, 1))
    nd = ndim_of(x)
    return int(p.get("k", 1)), (normalize_axis(axes[0], nd, "rot90"),
                                 normalize_axis(axes[1], nd, "rot90"))


@gradient_rule(np.rot90)
def _rot90(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    k, axes = _rot90_params(x, args, kwargs)
    return (np.rot90(grad, -k, axes),) + (None,) * len(args)


@tangent_rule(np.rot90)
def _rot90_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    k, axes = _rot90_params(x.value, args, kwargs)
    return dual_or_value(np.rot90(x.value, k, axes), np.rot90(x.partials, k, axes), x.tag)


@gradient_rule(np.roll)
def _roll(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    p = bind(("shift", "axis"), args, kwargs)
    shift, axis = p["shift"], p.get("axis")
    if isinstance(shift, (int, np.integer)):
        back: Any = -int(shift)
    else:
        back = tuple(-int(s) for s in shift)
    if axis is None:
        g = np.reshape(np.roll(np.reshape(grad, (-1,)), back), shape_of(x))
    else:
        g = np.roll(grad, back, axis)
    return (g,) + (None,) * len(args)


# -- tiles, repeats, pads: index maps -------------------------------------------------------


def index_map_rules(func: Any, build: Any, name: str | None = None,
                    tangent: bool = True, permutation: bool = False) -> None:
    """Rules for a function that copies entries of its first argument.

    ``build(x, *args, **kwargs)`` returns the index map: for each output entry the flat
    index of the input entry it copies, ``-1`` where the output is a constant.
    """

    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        index = build(x, *args, **kwargs)
        return (gather_gradient(grad, index, shape_of(x), permutation),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        value = func(x.value, *args, **kwargs)
        index = build(x.value, *args, **kwargs)
        return dual_or_value(value, gather_tangent(x.partials, index), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{name or func.__name__}"
    gradient_rule(func)(grad_impl)
    if tangent:
        tangent_rule(func)(tangent_impl)


def _tile_map(x: Any, reps: Any) -> np.ndarray:
    return index_map(np.tile, shape_of(x), reps)


def _repeat_map(x: Any, repeats: Any, axis: Any = None) -> np.ndarray:
    return index_map(np.repeat, shape_of(x), repeats, axis)


_GATHER_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "empty")


def _pad_map(x: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> np.ndarray:
    if callable(mode) or mode not in _GATHER_PAD_MODES:
        raise NotImplementedError(
            f"dualad: np.pad(..., mode={mode!r}) is not differentiable yet; modes "
            f"{', '.join(_GATHER_PAD_MODES)} are."
        )
    if mode in ("constant", "empty"):
        return index_map(np.pad, shape_of(x), pad_width, mode="constant", constant_values=-1)
    return index_map(np.pad, shape_of(x), pad_width, mode=mode,
                     **{k: v for k, v in kwargs.items() if k == "reflect_type"})


index_map_rules(np.tile, _tile_map)
index_map_rules(np.repeat, _repeat_map)
index_map_rules(np.pad, _pad_map)


# -- diagonals and triangles ------------------------------------------------------------------


def _diag_map(x: Any, k: int = 0) -> np.ndarray:
    if ndim_of(x) == 1:
        return index_map(lambda a: np.diag(a + 1, k) - 1, shape_of(x))
    return index_map(np.diag, shape_of(x), k)


def _diagonal_map(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> np.ndarray:
    return index_map(np.diagonal, shape_of(x), offset, axis1, axis2)


index_map_rules(np.diag, _diag_map)
index_map_rules(np.diagonal, _diagonal_map)
index_map_rules(np.diagflat, lambda x, k=0: index_map(
    lambda a: np.diagflat(a + 1, k) - 1, shape_of(x)), "diagflat")


@gradient_rule(np.linalg.diagonal)
def _linalg_diagonal(grad: Any, output: Any, x: Any, *, offset: int = 0) -> tuple:
    return (gather_gradient(grad, _diagonal_map(x, offset, -2, -1), shape_of(x)),)


@tangent_rule(np.linalg.diagonal)
def _linalg_diagonal_tangent(x: Any, *, offset: int = 0) -> Any:
    return np.diagonal(x, offset, -2, -1)


def _triangle_rules(func: Any) -> None:
    def k_of(args: tuple, kwargs: dict) -> int:
        return int(bind(("k",), args, kwargs).get("k", 0))

    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        k = k_of(args, kwargs)
        if ndim_of(x) >= 2:
            return (func(grad, k),) + (None,) * len(args)
        index = index_map(lambda a: func(a + 1, k) - 1, shape_of(x))
        return (gather_gradient(grad, index, shape_of(x)),) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        k = k_of(args, kwargs)
        value = func(x.value, k)
        if ndim_of(x.value) >= 2:
            return dual_or_value(value, klast(func(kfirst(x.partials), k)), x.tag)
        index = index_map(lambda a: func(a + 1, k) - 1, shape_of(x.value))
        return dual_or_value(value, gather_tangent(x.partials, index), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func)(tangent_impl)


_triangle_rules(np.tril)
_triangle_rules(np.triu)


# -- tangents of reshape, ravel, transpose, swapaxes, broadcast_to and roll ------------


@tangent_rule(np.reshape)
def _reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None,
             copy: Any = None) -> Any:
    if shape is None:
        shape = newshape
    if order not in ("C", "F"):
        raise unsupported_tangent("reshape", f"order={order!r}")
    kw = {} if copy is None else {"copy": copy}
    v = np.reshape(a.value, shape, order=order, **kw)
    p = a.partials
    return Dual._make(v, np.reshape(p, shape_of(v) + (shape_of(p)[-1],), order=order, **kw),
                      a.tag)


@tangent_rule(np.ravel)
def _ravel(a: Any, order: str = "C") -> Any:
    if order not in ("C", "F"):
        raise unsupported_tangent("ravel", f"order={order!r}")
    v = np.ravel(a.value, order=order)
    p = a.partials
    return Dual._make(v, np.reshape(p, shape_of(v) + (shape_of(p)[-1],), order=order), a.tag)


@tangent_rule(np.transpose)
def _transpose(a: Any, axes: Any = None) -> Any:
    nd = ndim_of(a.value)
    perm = tuple(reversed(range(nd))) if axes is None else normalize_axes_in_order(axes, nd, "transpose")
    v = np.transpose(a.value, perm)
    return Dual._make(v, np.transpose(a.partials, perm + (nd,)), a.tag)


@tangent_rule(np.swapaxes)
def _swapaxes(a: Any, axis1: Any, axis2: Any) -> Any:
    nd = ndim_of(a.value)
    a1, a2 = normalize_axes_in_order((axis1, axis2), nd, "swapaxes")
    return Dual._make(np.swapaxes(a.value, a1, a2), np.swapaxes(a.partials, a1, a2), a.tag)


@tangent_rule(np.broadcast_to)
def _broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    p = array.partials
    return Dual._make(np.broadcast_to(array.value, shape),
                      np.broadcast_to(p, shape + (shape_of(p)[-1],)), array.tag)


_ROLL_INDEX: dict[tuple[int, int], np.ndarray] = {}


def _roll_index(n: int, shift: int) -> np.ndarray:
    key = (n, shift)
    idx = _ROLL_INDEX.get(key)
    if idx is None:
        idx = (np.arange(n) - shift) % n
        if len(_ROLL_INDEX) < 256:
            _ROLL_INDEX[key] = idx
    return idx


def roll_array(a: np.ndarray, shift: int, axis: int) -> np.ndarray:
    """``np.roll(a, shift, axis)`` for one int shift and one non-negative axis, faster."""
    n = a.shape[axis]
    if n == 0:
        return a.copy()
    s = int(shift) % n
    if a.size <= 4096:  # gathering beats two slice copies on small arrays
        return a.take(_roll_index(n, s), axis=axis)
    out = np.empty_like(a)
    lead = (slice(None),) * axis
    out[lead + (slice(s, None),)] = a[lead + (slice(None, n - s),)]
    out[lead + (slice(None, s),)] = a[lead + (slice(n - s, None),)]
    return out


@tangent_rule(np.roll)
def _roll(a: Any, shift: Any, axis: Any = None) -> Any:
    v, p = a.value, a.partials
    plain = type(v) is np.ndarray and type(p) is np.ndarray
    if plain and isinstance(shift, (int, np.integer)):
        if axis is None and v.ndim == 1:
            n = v.shape[0]
            if n and v.size * p.shape[-1] <= 4096:
                idx = _roll_index(n, int(shift) % n)
                return Dual._make(v.take(idx), p.take(idx, axis=0), a.tag)
            return Dual._make(roll_array(v, shift, 0), roll_array(p, shift, 0), a.tag)
        if isinstance(axis, (int, np.integer)):
            ax = normalize_axes_in_order(axis, v.ndim, "roll")[0]
            return Dual._make(roll_array(v, shift, ax), roll_array(p, shift, ax), a.tag)
    shape = shape_of(v)
    k = shape_of(p)[-1]
    if axis is None:
        rv = np.roll(np.reshape(v, (-1,)), shift)
        rp = np.roll(np.reshape(p, (-1, k)), shift, axis=0)
        return Dual._make(np.reshape(rv, shape), np.reshape(rp, shape + (k,)), a.tag)
    axes = normalize_axes_in_order(axis, len(shape), "roll")
    if isinstance(axis, (int, np.integer)):
        axes = axes[0]
    return Dual._make(np.roll(v, shift, axes), np.roll(p, shift, axes), a.tag)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# These functions only move, repeat or drop entries (tril/triu/diag fill constant zeros).

declare_index_map(
    np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.broadcast_to, np.copy,
    np.flip, np.fliplr, np.flipud, np.rot90, np.roll, np.tile, np.repeat, np.diag,
    np.diagonal, np.diagflat, np.squeeze, np.expand_dims, np.atleast_1d, np.atleast_2d,
    np.atleast_3d, np.tril, np.triu,
)

declare_index_map(np.matrix_transpose, np.linalg.matrix_transpose)
declare_index_map(np.pad, moves=lambda array, pad_width, mode="constant", **kwargs:
                  mode in ("constant", "edge", "wrap", "reflect", "symmetric", "empty")
                  and not isinstance(kwargs.get("constant_values"), Traced))
