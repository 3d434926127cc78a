"""Rules for numpy functions written in Python: sinc, angle, linspace, diff, gradient, ...

``np.sinc`` and ``np.angle`` are plain Python functions in numpy (reached through
``__array_function__`` as ``Method[f]``), so the ufunc rules tables do not cover them.
``sinc'(0) = 0``; ``angle`` of a real array is piecewise constant (derivative 0).
``np.linspace(start, stop, num)`` is linear in ``start`` and ``stop``.

``diff`` (with prepend/append), ``gradient`` (scalar spacings, edge_order 1 or 2),
``average`` (weights), ``trapezoid``, ``cov``, ``corrcoef``, ``polyval``, ``interp``
(w.r.t. ``x`` and ``fp``; the knots ``xp`` are constants, derivatives at a knot are
one-sided from the right; ``period=`` as numpy: the knots reduced modulo the period)
and ``meshgrid`` are written here with numpy calls that have rules, which gives both
their tangents and their gradients
(:func:`~dualad.numpy_rules._support.composite_rules`).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda a: np.sum(np.linspace(a, 2.0, 5)))(0.0)
    array(2.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_elementwise,
    declare_probed,
    innermost_tag,
    note_linear,
    shape_of,
    unbroadcast,
)
from ._signatures import bind
from ._support import (
    add_terms,
    composite_rules,
    gradient_rule,
    normalize_axes,
    normalize_axis,
    split_duals,
    tangent_rule,
)

__all__: list[str] = []


def _sinc_derivative(x: Any) -> Any:
    zero = np.asarray(x == 0)
    safe = np.where(zero, 1.0, x)
    return np.where(zero, 0.0, (np.cos(np.pi * safe) - np.sinc(safe)) / safe)


@gradient_rule(np.sinc)
def _sinc(grad: Any, output: Any, x: Any) -> tuple:
    return (grad * _sinc_derivative(x),)


@tangent_rule(np.sinc)
def _sinc_tangent(x: Any) -> Any:
    d = _sinc_derivative(x.value)
    column = d if len(shape_of(d)) == 0 else np.expand_dims(d, -1)
    return Dual._make(np.sinc(x.value), x.partials * column, x.tag)


@gradient_rule(np.angle)
def _angle(grad: Any, output: Any, z: Any, *args: Any, **kwargs: Any) -> tuple:
    return (np.zeros(shape_of(z)),) + (None,) * len(args)


@tangent_rule(np.angle)
def _angle_tangent(z: Any, *args: Any, **kwargs: Any) -> Any:
    return Dual._make(np.angle(z.value, *args, **kwargs), np.zeros(shape_of(z.partials)), z.tag)


_LINSPACE = ("start", "stop", "num", "endpoint", "retstep", "dtype", "axis")


def _linspace_weights(p: dict, out_shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """The weight ``t`` of ``stop`` in each sample (shaped to broadcast), and the axis."""
    num = int(p.get("num", 50))
    if p.get("retstep", False):
        raise NotImplementedError("dualad: np.linspace(..., retstep=True) is not "
                                  "differentiable yet; compute the step as (stop - start) / n.")
    div = (num - 1) if p.get("endpoint", True) else num
    t = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    if p.get("endpoint", True) and num > 1:
        t[-1] = 1.0
    axis = int(p.get("axis", 0)) % max(len(out_shape), 1)
    shape = [1] * len(out_shape)
    if shape:
        shape[axis] = num
    return t.reshape(shape), axis


@gradient_rule(np.linspace)
def _linspace(grad: Any, output: Any, *args: Any, **kwargs: Any) -> tuple:
    p = bind(_LINSPACE, args, kwargs)
    t, axis = _linspace_weights(p, shape_of(output))
    start, stop = p["start"], p["stop"]
    g_start = unbroadcast(np.sum(grad * (1.0 - t), axis=axis), shape_of(start))
    g_stop = unbroadcast(np.sum(grad * t, axis=axis), shape_of(stop))
    return (g_start, g_stop) + (None,) * (len(args) - 2)


@tangent_rule(np.linspace, duals="any")
def _linspace_tangent(*args: Any, **kwargs: Any) -> Any:
    p = bind(_LINSPACE, args, kwargs)
    tag = innermost_tag([p.get("start"), p.get("stop")])
    if tag is None:
        return np.linspace(*args, **kwargs)
    (sv, ev), (sp, ep) = split_duals([p["start"], p["stop"]], tag)
    rest = {k: v for k, v in p.items() if k not in ("start", "stop")}
    value = np.linspace(sv, ev, **rest)
    t, axis = _linspace_weights(p, shape_of(value))
    t = np.expand_dims(t, -1)
    k = shape_of(sp if sp is not None else ep)[-1]
    bshape = tuple(np.broadcast_shapes(shape_of(sv), shape_of(ev)))
    acc = None
    for part, w in ((sp, 1.0 - t), (ep, t)):
        if part is not None:
            full = np.broadcast_to(part, bshape + (k,))
            acc = add_terms(acc, np.expand_dims(full, axis) * w)
    return Dual._make(value, np.broadcast_to(acc, shape_of(value) + (k,)), tag)


# -- functions written with other numpy calls ---------------------------------------------------
# Their rules come from composite_rules: forward mode runs the composition on Duals, reverse
# mode pulls the gradient back through it.

_NoValue = getattr(np, "_NoValue", None)


def _given(x: Any) -> bool:
    return x is not None and x is not _NoValue


def _along(axis: int, nd: int, index: Any) -> tuple:
    key = [slice(None)] * nd
    key[axis] = index
    return tuple(key)


def _diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _NoValue,
          append: Any = _NoValue) -> Any:
    nd = len(shape_of(a))
    ax = normalize_axis(axis, nd, "diff")
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
        elif extra is not _NoValue:
            if len(shape_of(extra)) == 0:
                shape = list(shape_of(a))
                shape[ax] = 1
                extra = np.broadcast_to(extra, tuple(shape))
            parts.append(extra)
    if len(parts) > 1:
        a = np.concatenate(parts, axis=ax)
    for _ in range(int(n)):
        a = a[_along(ax, nd, slice(1, None))] - a[_along(ax, nd, slice(None, -1))]
    return a


def _average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
             keepdims: Any = _NoValue) -> Any:
    if returned:
        raise NotImplementedError("dualad: np.average(..., returned=True) is not "
                                  "differentiable yet; compute np.sum(weights) separately.")
    keep = False if keepdims is _NoValue else bool(keepdims)
    if weights is None:
        return np.mean(a, axis=axis, keepdims=keep)
    shape = shape_of(a)
    w = weights
    if shape_of(w) != shape:
        ax = normalize_axis(axis, len(shape), "average")
        bshape = [1] * len(shape)
        bshape[ax] = shape[ax]
        w = np.broadcast_to(np.reshape(w, tuple(bshape)), shape)
    return np.sum(a * w, axis=axis, keepdims=keep) / np.sum(w, axis=axis, keepdims=keep)


def _trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    nd = len(shape_of(y))
    ax = normalize_axis(axis, nd, "trapezoid")
    if x is None:
        d = dx
    elif len(shape_of(x)) == 1:
        d = np.diff(x)
        shape = [1] * nd
        shape[ax] = shape_of(d)[0]
        d = np.reshape(d, tuple(shape))
    else:
        d = np.diff(x, axis=ax)
    upper = y[_along(ax, nd, slice(1, None))]
    lower = y[_along(ax, nd, slice(None, -1))]
    return np.sum(d * (upper + lower) / 2.0, axis=ax)


def _as_rows(m: Any, rowvar: bool) -> Any:
    x = np.atleast_2d(m)
    if not rowvar and shape_of(x)[0] != 1:
        x = np.transpose(x)
    return x


def _cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
         fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Any:
    if fweights is not None or aweights is not None:
        raise NotImplementedError("dualad: np.cov with fweights/aweights is not "
                                  "differentiable yet.")
    x = _as_rows(m, rowvar)
    if y is not None:
        x = np.concatenate([x, _as_rows(y, rowvar)], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    centered = x - np.mean(x, axis=1, keepdims=True)
    c = np.matmul(centered, np.transpose(centered)) / (shape_of(x)[1] - ddof)
    return np.squeeze(c)


def _corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Any:
    c = _cov(x, y, rowvar)
    if len(shape_of(c)) == 0:
        return c / c
    s = np.sqrt(np.diagonal(c))
    return np.clip(c / np.expand_dims(s, 1) / np.expand_dims(s, 0), -1.0, 1.0)


def _polyval(p: Any, x: Any) -> Any:
    n = len(p) if isinstance(p, (list, tuple)) else shape_of(p)[0]
    y = p[0] + 0.0 * x
    for i in range(1, n):
        y = y * x + p[i]
    return y


def _plain(x: Any) -> Any:
    while hasattr(x, "_primal") and not isinstance(x, np.ndarray):
        x = x._primal()
    return np.asarray(x)


def _interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
            period: Any = None) -> Any:
    if period is not None:
        return _interp_periodic(x, xp, fp, period)
    knots = _plain(xp)
    n = knots.shape[0]
    i = np.clip(np.searchsorted(knots, _plain(x), side="right"), 1, n - 1)
    if isinstance(xp, (list, tuple)):
        xp = np.stack(xp) if any(hasattr(k, "_primal") for k in xp) else knots
    if isinstance(fp, (list, tuple)):
        fp = np.stack(fp)
    x0, x1 = xp[i - 1], xp[i]  # the breakpoints are differentiated too
    f0, f1 = fp[i - 1], fp[i]
    y = f0 + (x - x0) / (x1 - x0) * (f1 - f0)
    below = fp[0] if left is None else left
    above = fp[n - 1] if right is None else right
    y = np.where(_plain(x) < knots[0], below, y)
    return np.where(_plain(x) > knots[n - 1], above, y)


def _interp_periodic(x: Any, xp: Any, fp: Any, period: Any) -> Any:
    """numpy's periodic interpolation: the knots reduced modulo ``period``, sorted, and
    extended by one period at each end (``left`` / ``right`` are ignored, as numpy)."""
    period = float(_plain(period))
    if period == 0:
        raise ValueError("np.interp: period must be a non-zero value")
    period = abs(period)
    knots = _plain(xp) % period
    order = np.argsort(knots)
    knots = knots[order]
    fp = (np.asarray(fp) if isinstance(fp, (list, tuple)) else fp)[order]
    knots = np.concatenate([knots[-1:] - period, knots, knots[:1] + period])
    fp = np.concatenate([fp[-1:], fp, fp[:1]])
    return _interp(x % period, knots, fp)


def _gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    nd = len(shape_of(f))
    axes = normalize_axes(axis, nd, "gradient") if axis is not None else tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axes = (normalize_axis(axis, nd, "gradient"),)
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and len(shape_of(varargs[0])) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes) and all(len(shape_of(h)) == 0 for h in varargs):
        spacing = list(varargs)
    else:
        raise NotImplementedError("dualad: np.gradient with coordinate arrays is not "
                                  "differentiable yet; pass scalar spacings.")
    out = []
    for ax, h in zip(axes, spacing):
        def at(index: Any, ax: int = ax) -> Any:
            return f[_along(ax, nd, index)]

        interior = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
        if edge_order == 1:
            first = (at(slice(1, 2)) - at(slice(0, 1))) / h
            last = (at(slice(-1, None)) - at(slice(-2, -1))) / h
        else:
            first = (-1.5 * at(slice(0, 1)) + 2.0 * at(slice(1, 2))
                     - 0.5 * at(slice(2, 3))) / h
            last = (1.5 * at(slice(-1, None)) - 2.0 * at(slice(-2, -1))
                    + 0.5 * at(slice(-3, -2))) / h
        out.append(np.concatenate([first, interior, last], axis=ax))
    return out[0] if len(out) == 1 else tuple(out)


def _meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    nd = len(xi)
    ones = (1,) * nd
    out = [np.reshape(x, ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and nd > 1:
        out[0] = np.reshape(out[0], (1, -1) + ones[2:])
        out[1] = np.reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        shape = np.broadcast_shapes(*[shape_of(o) for o in out])
        out = [np.broadcast_to(o, shape) for o in out]
    return tuple(out)


def _positions(*names: str) -> Any:
    """``positions`` for composite_rules: arguments 0.. named ``names`` that are given."""

    def chosen(args: tuple, kwargs: dict) -> list[int]:
        return [i for i, name in enumerate(names) if i < len(args) and name
                and _given(args[i]) and not isinstance(args[i], (bool, str))]

    return chosen


composite_rules(np.diff, _diff, _positions("a", "", "", "prepend", "append"))
composite_rules(np.average, _average, _positions("a", "", "weights"))
composite_rules(np.trapezoid, _trapezoid, _positions("y", "x", "dx"))
composite_rules(np.cov, _cov, _positions("m", "y"))
composite_rules(np.corrcoef, _corrcoef, _positions("x", "y"))
composite_rules(np.polyval, _polyval, _positions("p", "x"))
# linear in these arguments while the others stay constant (for compilers: a matrix)
note_linear(np.diff, args=(0, 3, 4))  # a, prepend, append
note_linear(np.trapezoid, np.polyval, np.average, args=(0,))  # y; coefficients p; a
composite_rules(np.interp, _interp, _positions("x", "xp", "fp", "left", "right"))
composite_rules(np.gradient, _gradient, lambda args, kwargs: list(range(len(args))))
composite_rules(np.meshgrid, _meshgrid, lambda args, kwargs: list(range(len(args))))

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_elementwise(np.sinc)
declare_probed(np.linspace)  # linear in start and stop
