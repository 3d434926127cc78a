"""Rules for elementwise numpy functions that are not ufuncs, and for ``np.linspace``.

``np.sinc`` and ``np.angle`` are plain Python functions in numpy (reached through
``__array_function__`` as ``Method[f]``), so the ufunc rules tables do not cover them.
``sinc'(0) = 0``; ``angle`` of a real array is piecewise constant (derivative 0).
``np.linspace(start, stop, num)`` is linear in ``start`` and ``stop``.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda a: np.sum(np.linspace(a, 2.0, 5)))(0.0)
    array(2.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dual import Dual, innermost_tag
from ..numpy_bridge import shape_of
from ..unbroadcast import unbroadcast
from ._signatures import bind
from ._support import add_terms, gradient_rule, split_duals, tangent_rule

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
