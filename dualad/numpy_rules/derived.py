"""Rules for numpy functions that are other functions in disguise (both modes).

* ``np.rollaxis`` is ``np.moveaxis`` with numpy's older convention for ``start``;
* ``np.linalg.cond`` is ``s_max / s_min`` of the singular values (``p`` None, 2, -2) or
  ``norm(a, p) * norm(inv(a), p)`` for the other norms;
* ``np.round`` / ``np.around`` with ``decimals`` are piecewise constant: derivative 0, as
  ``rint`` (API.md section 8);
* shape functions called with keyword arguments (``np.swapaxes(x, axis1=0, axis2=1)``,
  ``np.moveaxis(x, source=0, destination=1)``) are recorded with positional ones, the form
  their rules are written for.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.grad(lambda a: np.linalg.cond(a))(np.diag([2.0, 1.0]))
    array([[ 1.,  0.],
           [ 0., -2.]])
    >>> ad.jacobian(lambda x: np.rollaxis(x, 1), mode="forward")(np.ones((1, 2))).shape
    (2, 1, 1, 2)
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_elementwise,
    register_function_hook,
    shape_of,
    tangent_parts,
)
from ._support import composite_rules, gradient_rule, normalize_axis, tangent_rule

__all__ = ["rollaxis", "cond"]


# -- rollaxis ------------------------------------------------------------------------------


def rollaxis(a: Any, axis: Any, start: Any = 0) -> Any:
    """``np.rollaxis`` written with ``np.moveaxis``."""
    n = len(shape_of(a))
    axis = normalize_axis(axis, n, "rollaxis")
    start = int(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(
            f"rollaxis: start ({start}) must be >= {-n} and < {n + 1}")
    if axis < start:
        start -= 1
    if axis == start:
        return a[...]
    return np.moveaxis(a, axis, start)


composite_rules(np.rollaxis, rollaxis, lambda args, kwargs: [0])


# -- cond --------------------------------------------------------------------------------


def cond(x: Any, p: Any = None) -> Any:
    """``np.linalg.cond`` written with ``svd`` (2-norms) or ``norm`` and ``inv`` (others)."""
    if p is None or p == 2 or p == -2:
        s = np.linalg.svd(x, compute_uv=False)
        if p == -2:
            return s[..., -1] / s[..., 0]
        return s[..., 0] / s[..., -1]
    return np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p,
                                                                axis=(-2, -1))


composite_rules(np.linalg.cond, cond, lambda args, kwargs: [0])


# -- round with decimals -------------------------------------------------------------------


def _round_gradient(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    return (np.zeros(shape_of(a)),) + (None,) * len(args)


def _round_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    tag, [(v, p)] = tangent_parts((a,))
    out = np.round(v, *args, **kwargs)
    return Dual._make(out, np.zeros(shape_of(out) + (shape_of(p)[-1],)), tag)


_round_gradient.__name__ = _round_tangent.__name__ = "_round"
gradient_rule(np.round, np.around)(_round_gradient)
tangent_rule(np.round, np.around)(_round_tangent)


# -- keyword arguments of shape functions --------------------------------------------------


def _positional(func: Any, args: tuple, kwargs: dict) -> Any:
    """Call ``func`` again with its keyword arguments bound to positions (None when there
    are none: the call is then recorded as it is)."""
    if not kwargs:
        return None
    bound = inspect.signature(func).bind(*args, **kwargs)
    if bound.kwargs:
        return None
    return func(*bound.args)


for _func in (np.swapaxes, np.moveaxis, np.rollaxis):
    register_function_hook(_func, _positional)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_elementwise(np.round, np.around, flowing=())  # derivative zero (as JAX)
