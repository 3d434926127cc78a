"""Rules for selecting entries: where, select, clip, take, take_along_axis, sort, ...

``where(c, x, y)`` and ``select`` route the gradient to the chosen argument; ``clip`` is
``minimum(maximum(x, lo), hi)`` and, like those, splits the gradient equally where ``x``
equals a bound; ``sort`` and ``partition`` differentiate through the permutation they
apply (equal entries keep a fixed order); ``take``, ``take_along_axis``, ``compress`` and
``extract`` gather entries (repeated indices accumulate in the gradient);
``nan_to_num`` passes derivatives through finite entries only.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda x: np.sum(np.sort(x) * np.arange(3.0)))(np.array([3.0, 1.0, 2.0]))
    array([2., 0., 1.])
    >>> ad.grad(lambda x: np.sum(np.clip(x, 0.0, 1.0)))(np.array([-1.0, 0.5, 1.0]))
    array([0. , 1. , 0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_elementwise,
    declare_index_map,
    declare_scalar_form,
    declare_select,
    declare_sort,
    innermost_tag,
    note_order_statistic,
    observed_level,
    register_keyword_aliases,
    shape_of,
    unbroadcast,
)
from ._signatures import bind
from ._support import (
    add_terms,
    dual_or_value,
    gradient_rule,
    split_duals,
    tangent_rule,
)
from .indexing import gather_gradient, gather_tangent, index_map
from .shapes import index_map_rules

__all__: list[str] = []

_NoValue = getattr(np, "_NoValue", None)


def _factor(s: Any) -> Any:
    """A factor of 0.0 / 0.5 / 1.0 entries as floats (computed from a tape's recorded
    values, it stays recorded)."""
    return s if hasattr(s, "_primal") else np.asarray(s, dtype=np.float64)


def _column(mask: Any) -> Any:
    """A plain mask or factor (or a tape's recorded comparison) shaped to multiply
    partials."""
    m = mask if hasattr(mask, "_primal") else np.asarray(mask)
    return m if len(shape_of(m)) == 0 else m[..., None]


def _full_partials(p: Any, shape: tuple[int, ...], k: int) -> Any:
    target = tuple(shape) + (k,)
    return p if shape_of(p) == target else np.broadcast_to(p, target)


# -- where and select ---------------------------------------------------------------------


@gradient_rule(np.where)
def _where(grad: Any, output: Any, condition: Any, *xy: Any) -> tuple:
    if len(xy) != 2:
        return (None,) * (1 + len(xy))
    x, y = xy
    c = mask_of(condition)
    return (None, unbroadcast(np.where(c, grad, 0.0), shape_of(x)),
            unbroadcast(np.where(c, 0.0, grad), shape_of(y)))


def value_of(x: Any) -> Any:
    """The plain value behind a traced condition (conditions are never differentiated).
    Under a tape, the value the tape records stays as it is (and a comparison it
    recorded): the tape recomputes what is computed from it on replay, and reading it as
    a plain array is a guard of the recording."""
    level = observed_level()
    while hasattr(x, "_primal") and not isinstance(x, np.ndarray) and \
            not getattr(x, "without_derivative", False) and \
            (level is None or getattr(x, "level", None) != level):
        x = x._primal()
    return x


def mask_of(condition: Any) -> Any:
    """A condition as a boolean array, or as the tape's recorded comparison (which
    ``np.where`` reads as it is, so that a replayed or compiled tape's mask follows its
    arguments)."""
    c = value_of(condition)
    return c if getattr(c, "without_derivative", False) else np.asarray(c, dtype=bool)


@tangent_rule(np.where, duals=(0, 1, 2))
def _where_tangent(condition: Any, *xy: Any) -> Any:
    tag = innermost_tag((condition,) + xy)
    c = mask_of(condition)
    if len(xy) != 2:
        return np.where(c, *xy)
    (xv, yv), (xp, yp) = split_duals(xy, tag)
    value = np.where(c, xv, yv)
    if xp is None and yp is None:
        return value
    k = shape_of(xp if xp is not None else yp)[-1]
    p = np.where(_column(c), 0.0 if xp is None else xp, 0.0 if yp is None else yp)
    return Dual._make(value, _full_partials(p, shape_of(value), k), tag)


def _select_masks(condlist: Any) -> tuple[list[np.ndarray], np.ndarray]:
    taken = None
    masks = []
    for c in condlist:
        c = mask_of(c)
        masks.append(c if taken is None else c & ~taken)
        taken = c if taken is None else taken | c
    return masks, (~taken if taken is not None else np.array(True))


@gradient_rule(np.select)
def _select(grad: Any, output: Any, condlist: Any, choicelist: Any, *args: Any,
            **kwargs: Any) -> tuple:
    masks, rest = _select_masks(condlist)
    grads = tuple(unbroadcast(np.where(m, grad, 0.0), shape_of(c))
                  for m, c in zip(masks, choicelist))
    default = bind(("default",), args, kwargs).get("default", 0)
    tail = (unbroadcast(np.where(rest, grad, 0.0), shape_of(default)),) if args else ()
    return (None, grads) + tail


@tangent_rule(np.select, duals="any")
def _select_tangent(condlist: Any, choicelist: Any, *args: Any, **kwargs: Any) -> Any:
    default = bind(("default",), args, kwargs).get("default", 0)
    tag = innermost_tag(list(choicelist) + [default])
    if tag is None:
        return np.select([value_of(c) for c in condlist], choicelist, *args, **kwargs)
    values, partials = split_duals(list(choicelist) + [default], tag)
    masks, rest = _select_masks(condlist)
    value = np.select(masks, values[:-1], values[-1])
    k = next(shape_of(p)[-1] for p in partials if p is not None)
    acc = None
    for m, p in zip(masks + [rest], partials):
        if p is not None:
            acc = add_terms(acc, p * _column(m))
    return Dual._make(value, _full_partials(acc, shape_of(value), k), tag)


# -- clip ------------------------------------------------------------------------------------


def _clip_bounds(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    p = bind(("a_min", "a_max"), args, kwargs)
    lo = p.get("a_min", _NoValue)
    hi = p.get("a_max", _NoValue)
    if lo is _NoValue:
        lo = kwargs.get("min", None)
    if hi is _NoValue:
        hi = kwargs.get("max", None)
    return (None if lo is _NoValue else lo), (None if hi is _NoValue else hi)


def _clip_factors(x: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """``d max(x, lo) / dx`` and ``d min(m, hi) / dm`` with ties split equally."""
    xv, lov, hiv = value_of(x), value_of(lo), value_of(hi)
    if lov is None:
        s1, m = 1.0, xv
    else:
        s1 = (xv > lov) + 0.5 * (xv == lov)
        m = np.maximum(xv, lov)
    s2 = 1.0 if hiv is None else (m < hiv) + 0.5 * (m == hiv)
    return s1, s2


def _both_bounds(args: list) -> list:
    """numpy wants both bounds of np.clip once one is positional."""
    return [None if a is np._NoValue else a for a in args] + [None] * (3 - len(args))


# a traced bound passed as min= / max= becomes positional (a_min / a_max), so it gets a
# gradient
register_keyword_aliases(np.clip, {"min": "a_min", "max": "a_max"}, complete=_both_bounds)


@gradient_rule(np.clip)
def _clip(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    lo, hi = _clip_bounds(args, kwargs)
    s1, s2 = _clip_factors(x, lo, hi)
    result: list[Any] = [unbroadcast(grad * (s1 * s2), shape_of(x))]
    if len(args) >= 1:
        result.append(None if lo is None else unbroadcast(grad * ((1.0 - s1) * s2),
                                                          shape_of(lo)))
    if len(args) >= 2:
        result.append(None if hi is None else unbroadcast(grad * (1.0 - s2), shape_of(hi)))
    return tuple(result) + (None,) * (len(args) - 2 if len(args) > 2 else 0)


@tangent_rule(np.clip, duals="any")
def _clip_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    lo, hi = _clip_bounds(args, kwargs)
    tag = innermost_tag([x, lo, hi])
    if tag is None:
        return np.clip(x, *args, **kwargs)
    (xv, lov, hiv), (xp, lop, hip) = split_duals([x, lo, hi], tag)
    value = np.clip(xv, lov, hiv)
    s1, s2 = _clip_factors(xv, lov, hiv)
    acc = None
    if xp is not None:
        acc = add_terms(acc, xp * _column(_factor(s1 * s2)))
    if lop is not None:
        acc = add_terms(acc, lop * _column(_factor((1.0 - s1) * s2)))
    if hip is not None:
        acc = add_terms(acc, hip * _column(_factor(1.0 - s2)))
    k = next(shape_of(p)[-1] for p in (xp, lop, hip) if p is not None)
    return Dual._make(value, _full_partials(acc, shape_of(value), k), tag)


# -- gathers -----------------------------------------------------------------------------------


def _take_map(x: Any, indices: Any, axis: Any = None, out: Any = None,
              mode: str = "raise") -> np.ndarray:
    return index_map(np.take, shape_of(x), value_of(indices), axis, mode=mode)


def _take_along_axis_map(x: Any, indices: Any, axis: Any = -1, **kwargs: Any) -> np.ndarray:
    return index_map(np.take_along_axis, shape_of(x), value_of(indices), axis)


def _sort_map(x: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
              stable: Any = None) -> np.ndarray:
    v = value_of(x)
    if axis is None:
        return np.argsort(np.reshape(v, (-1,)), kind="stable")
    return index_map(lambda a: np.take_along_axis(
        a, np.argsort(v, axis=axis, kind="stable"), axis), shape_of(x))


def _partition_map(x: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
                   order: Any = None) -> np.ndarray:
    v = value_of(x)
    if axis is None:
        return np.argpartition(np.reshape(v, (-1,)), kth)
    return index_map(lambda a: np.take_along_axis(a, np.argpartition(v, kth, axis=axis),
                                                  axis), shape_of(x))


def _compress_map(condition: Any, x: Any, axis: Any = None, out: Any = None) -> np.ndarray:
    return index_map(lambda a: np.compress(value_of(condition), a, axis), shape_of(x))


index_map_rules(np.take, _take_map)
index_map_rules(np.take_along_axis, _take_along_axis_map)
index_map_rules(np.sort, _sort_map, permutation=True)
index_map_rules(np.partition, _partition_map, tangent=False, permutation=True)


@tangent_rule(np.partition)
def _partition_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    index = _partition_map(x.value, *args, **kwargs)
    flat = np.reshape(x.value, (-1,))
    return Dual._make(flat[index], gather_tangent(x.partials, index), x.tag)


def _condition_first_rules(func: Any, build: Any) -> None:
    """Rules for ``func(condition, x, ...)`` that gathers entries of ``x``."""

    def grad_impl(grad: Any, output: Any, condition: Any, x: Any, *args: Any,
                  **kwargs: Any) -> tuple:
        index = build(condition, x, *args, **kwargs)
        return (None, gather_gradient(grad, index, shape_of(x))) + (None,) * len(args)

    def tangent_impl(condition: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(x, Dual):  # only the condition is traced: it selects, no derivative
            return func(value_of(condition), x, *args, **kwargs)
        index = build(condition, x.value, *args, **kwargs)
        value = func(value_of(condition), x.value, *args, **kwargs)
        return dual_or_value(value, gather_tangent(x.partials, index), x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func, duals=(1,))(tangent_impl)


_condition_first_rules(np.compress, _compress_map)
_condition_first_rules(np.extract, lambda c, x: index_map(
    lambda a: np.extract(value_of(c), a), shape_of(x)))


# -- finite parts, real parts -------------------------------------------------------------------


_NAN_TO_NUM_NAMES = ("x", "copy", "nan", "posinf", "neginf")
_NAN_TO_NUM_PICKS = {"nan": np.isnan, "posinf": np.isposinf, "neginf": np.isneginf}


@gradient_rule(np.nan_to_num)
def _nan_to_num(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    # a replacement value (nan=, posinf=, neginf=) gets the gradient of the entries it fills
    plain = value_of(x)
    replaced = [unbroadcast(grad * _NAN_TO_NUM_PICKS[name](plain), shape_of(a))
                if name in _NAN_TO_NUM_PICKS and a is not None and not isinstance(a, bool)
                else None for name, a in zip(_NAN_TO_NUM_NAMES[1:], args)]
    return (grad * np.isfinite(plain),) + tuple(replaced)


def _nan_to_num_where(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
                      neginf: Any = None) -> Any:
    """``np.nan_to_num`` as selections, for traced replacement values."""
    info = np.finfo(np.result_type(value_of(x), np.float64) if np.isrealobj(value_of(x))
                    else np.float64)
    plain = value_of(x)
    y = np.where(np.isposinf(plain), info.max if posinf is None else posinf, x)
    y = np.where(np.isneginf(plain), info.min if neginf is None else neginf, y)
    return np.where(np.isnan(plain), nan, y)


@tangent_rule(np.nan_to_num, duals="any")
def _nan_to_num_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    if any(innermost_tag([a]) is not None for a in args + tuple(kwargs.values())):
        return _nan_to_num_where(x, *args, **kwargs)
    if innermost_tag([x]) is None:
        return np.nan_to_num(x, *args, **kwargs)
    value = np.nan_to_num(x.value, *args, **kwargs)
    return Dual._make(value, x.partials * _column(np.isfinite(value_of(x.value))), x.tag)


@gradient_rule(np.real, np.real_if_close)
def _real(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    return (grad,) + (None,) * len(args)


@tangent_rule(np.real, np.real_if_close)
def _real_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


@gradient_rule(np.imag)
def _imag(grad: Any, output: Any, x: Any) -> tuple:
    return (np.zeros(shape_of(x)),)


@tangent_rule(np.imag)
def _imag_tangent(x: Any) -> Any:
    return Dual._make(np.imag(x.value), np.zeros(shape_of(x.partials)), x.tag)



# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# np.where is elementwise in both branches (the condition carries no derivative): its
# pattern is the union of the branches, whatever the condition at the traced point.

declare_index_map(np.take, np.take_along_axis)
declare_index_map(np.compress, np.extract, data=(1,))
declare_elementwise(np.where, flowing=(1, 2))
# compiled programs (ad.jit) write it into their scalar loops
declare_scalar_form(np.where, ("c", "a", "b"), "where(c != 0, a, b)",
                    ("not differentiable", "where(c != 0, 1, 0)", "where(c != 0, 0, 1)"))
declare_elementwise(np.clip)

declare_elementwise(np.nan_to_num, flowing=(0,))
declare_sort(np.sort, np.argsort)
note_order_statistic(np.sort, axis_default=-1)  # every rank of each line, for compilers
declare_sort(np.partition, np.argpartition)
declare_select(np.select)
