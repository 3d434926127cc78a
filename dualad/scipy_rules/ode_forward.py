"""Forward sensitivities of an ODE solve: the tangent rule of :func:`.ode_values`.

For ``k`` tangent directions the state grows to ``z = [y, S]`` with ``S`` of shape
``(n, k)``, and the augmented system

    y' = f(t, y, p),    S' = J S + (df/dp) P,    S(t0) = dy0 - f(t0, y0) dt0

is solved by the same method with the same tolerances. ``J S + (df/dp) P`` is one
evaluation of ``f`` on dual numbers with ``k`` directions (compiled dual numbers for a
``numba.njit`` right-hand side). Implicit methods get the exact Jacobian of the augmented system: ``J`` and ``J ⊗ I`` on
the diagonal (``S`` is stored row-major) and the second-derivative block
``d(J S + (df/dp) P)/dy`` below it, from dualad's forward mode over the dual evaluation
(sparse with ``sparse=True``). Leaving that block out (a block-diagonal Newton matrix)
looks harmless but is not: on Robertson over ``[0, 100]`` Newton then fails so often that
the solve takes 33 times more evaluations (measured: 33354 vs 1115).

The error control covers ``S`` too (``sensitivity_error_control=True``, the default, as
CVODES' ``errconS``); with ``False`` the step size follows ``y`` alone (cheaper, less
accurate sensitivities). A time point ``t_i`` that is differentiated adds
``f(t_i, y(t_i)) dt_i``.

The augmented solve is :func:`.ode_values` again, on an augmented problem, so an outer
differentiation differentiates it in turn (higher derivatives).

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules.ode_problem import OdeProblem, ode_values
    >>> problem = OdeProblem(lambda t, y, k: -k * y, rtol=1e-10, atol=1e-12)
    >>> d = ad.derivative(lambda k: ode_values(problem, 0.0, np.array([1.0]), np.ones(1), k))
    >>> bool(np.allclose(d(2.0), -np.exp(-2.0)))
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as _sparse

from .. import njit as _njit
from ..api import jacobian
from ..core.array_protocol import shape_of
from ..extend import Dual, innermost_tag, lift_object_array, tangent_rule
from ..forward_mode.dual import Tag
from ..sparse.compressed import sparse_jacobian
from .ode_problem import OdeProblem, ode_values

__all__ = ["forward_sensitivities", "augmented_problem"]

#: Newton matrices of at most this many rows are dense (LAPACK LU), larger ones sparse.
DENSE_MAX = 64

#: Absolute tolerance on sensitivities left out of the error control.
_UNCONTROLLED_ATOL = 1e300


def augmented_problem(problem: OdeProblem, k: int, moving: tuple[bool, ...]) -> OdeProblem:
    """The problem of ``z = [y, S]`` for ``k`` directions; ``moving[j]``: whether leaf ``j``
    has a tangent (its tangent, shape ``leaf.shape + (k,)``, is then an extra leaf)."""
    key = ("forward", k, moving)
    found = problem.derived.get(key)
    if found is not None:
        return found
    n_leaves = len(moving)

    def rhs(t: Any, z: Any, *all_leaves: Any) -> Any:
        leaves, tangents = all_leaves[:n_leaves], all_leaves[n_leaves:]
        n = shape_of(z)[0] // (k + 1)
        y = z[:n]
        s = np.reshape(z[n:], (n, k))
        return np.concatenate([*_f_and_jvp(problem, t, y, s, leaves, tangents, moving)])

    def jac(t: Any, z: Any, *all_leaves: Any) -> Any:
        n = np.shape(z)[0] // (k + 1)
        leaves, tangents = all_leaves[:n_leaves], all_leaves[n_leaves:]
        s = np.reshape(z[n:], (n, k))

        column = _column_jacobian(problem, key, np.asarray(z[:n], dtype=np.float64),
                                  (t, s, leaves, tangents, moving))
        j = column[:n]
        if problem.method == "LSODA" or n * (k + 1) <= DENSE_MAX:
            column = column.toarray() if _sparse.issparse(column) else column
            j = column[:n]
            out = np.zeros((n * (k + 1),) * 2)
            out[:, :n] = column
            out[n:, n:] = np.kron(j, np.eye(k))  # S is stored row-major, shape (n, k)
            return out
        j = _sparse.csc_array(j)
        right = _sparse.vstack([_sparse.csc_array((n, n * k)),
                                _sparse.kron(j, _sparse.eye_array(k))])
        return _sparse.hstack([_sparse.csc_array(column), right], format="csc")

    aug = OdeProblem(rhs, method=problem.method, rtol=problem.rtol, atol=problem.atol,
                     jac=jac, options=_solver_options(problem.options), name=problem.name,
                     error_control=problem.error_control)
    aug.base_atol = problem.atol
    aug.directions = k
    problem.derived[key] = aug
    return aug


def _augmented_of_y(y: Any, t: Any, s: Any, leaves: tuple, tangents: tuple,
                    moving: tuple[bool, ...], problem: OdeProblem) -> Any:
    return np.concatenate([*_f_and_jvp(problem, t, y, s, leaves, tangents, moving)])


def _column_jacobian(problem: OdeProblem, key: Any, y: np.ndarray, rest: tuple) -> Any:
    """``d [f, J S + (df/dp) P] / dy``: the first block column of the augmented Jacobian
    (``J`` and the second-derivative terms), dense, or sparse with ``sparse=True`` (its
    pattern and colouring found once per augmented problem)."""
    if problem.sparse:
        column = problem.derived.get(("sparse column", key))
        if column is None:
            column = sparse_jacobian(_augmented_of_y, 0)
            problem.derived[("sparse column", key)] = column
        return column(y, *rest, problem)
    return np.asarray(jacobian(_augmented_of_y, 0, mode="forward")(y, *rest, problem))


def _solver_options(options: dict) -> dict:
    out = dict(options)
    out.pop("jac_sparsity", None)  # the augmented Jacobian is given exactly
    return out


def _f_and_jvp(problem: OdeProblem, t: Any, y: Any, s: Any, leaves: tuple, tangents: tuple,
               moving: tuple[bool, ...]) -> tuple[Any, Any]:
    """``f(t, y)`` and ``J S + (df/dp) P`` (flattened), by dual numbers with ``k`` directions."""
    n, k = shape_of(s)
    if _njit.is_njit(problem.fun) and not any(moving) and not isinstance(y, Dual):
        # a compiled right-hand side: its compiled Jacobian times S
        f = problem.rhs(t, y, *leaves)
        return f, np.reshape(np.asarray(problem.jacobian(t, y, *leaves)) @ s, (-1,))
    tag = Tag()
    yd = Dual._make(y, s, tag)
    it = iter(tangents)
    dleaves = [Dual._make(v, next(it), tag) if m else v for v, m in zip(leaves, moving)]
    fun = problem.python_fun
    out = fun(t, yd, *problem.bind(tuple(dleaves)))
    if isinstance(out, Dual) and out.tag is tag:
        return out.value, np.reshape(out.partials, (-1,))
    if isinstance(out, np.ndarray) and out.dtype == object:
        out = lift_object_array(out)
        if isinstance(out, Dual) and out.tag is tag:
            return out.value, np.reshape(out.partials, (-1,))
    return out, np.zeros(n * k)


def _augmented_atol(aug: OdeProblem, n: int) -> Any:
    if aug.error_control:
        return aug.base_atol
    k = aug.directions
    base = np.broadcast_to(np.asarray(aug.base_atol, dtype=np.float64), (n,))
    return np.concatenate([base, np.full(n * k, _UNCONTROLLED_ATOL)])


def forward_sensitivities(problem: OdeProblem, t0: Any, times: Any, y0: Any, leaves: tuple,
                          dt0: Any, dtimes: Any, dy0: Any, dleaves: tuple, k: int
                          ) -> tuple[Any, Any]:
    """The solution ``Y`` (``(n, m)``) and its tangents (``(n, m, k)``) for the directions
    ``dt0`` (``(k,)``), ``dtimes`` (``(m, k)``), ``dy0`` (``(n, k)``) and ``dleaves``
    (``None`` where a leaf has no tangent); any of these may be ``None``."""
    n = shape_of(y0)[0]
    moving = tuple(d is not None for d in dleaves)
    if dy0 is None and dt0 is None and not any(moving):
        y = ode_values(problem, t0, times, y0, *leaves)
        tangent = np.zeros(shape_of(y) + (k,))
    else:
        s0 = np.zeros((n, k)) if dy0 is None else dy0
        if dt0 is not None:
            f0 = problem.rhs(t0, y0, *leaves)
            s0 = s0 - f0[:, None] * dt0[None, :]
        aug = augmented_problem(problem, k, moving)
        if not getattr(aug, "controlled", True):
            aug.atol = _augmented_atol(aug, n)
        z0 = np.concatenate([y0, np.reshape(s0, (-1,))])
        z = ode_values(aug, t0, times, z0, *leaves, *[d for d in dleaves if d is not None])
        y = z[:n]
        m = shape_of(z)[1]
        tangent = np.moveaxis(np.reshape(z[n:], (n, k, m)), 1, 2)
    if dtimes is not None:
        m = shape_of(y)[1]
        cols = [problem.rhs(times[i], y[:, i], *leaves) for i in range(m)]
        f_at = np.stack(cols, axis=1)  # (n, m)
        tangent = tangent + f_at[:, :, None] * dtimes[None, :, :]
    return y, tangent


@tangent_rule(ode_values, duals="any")
def _ode_values_tangent(problem: OdeProblem, t0: Any, times: Any, y0: Any, *leaves: Any) -> Any:
    tag = innermost_tag((t0, times, y0) + leaves)
    if tag is None:
        return ode_values(problem, t0, times, y0, *leaves)

    def parts(x: Any) -> tuple[Any, Any]:
        if isinstance(x, Dual) and x.tag is tag:
            return x.value, x.partials
        return x, None

    (t0v, dt0), (tv, dt), (y0v, dy0) = parts(t0), parts(times), parts(y0)
    split = [parts(x) for x in leaves]
    k = next(shape_of(p)[-1] for _, p in [(None, dt0), (None, dt), (None, dy0)] + split
             if p is not None)
    if dt0 is not None:
        dt0 = np.reshape(dt0, (k,))
    y, tangent = forward_sensitivities(problem, t0v, tv, y0v, tuple(v for v, _ in split),
                                       dt0, dt, dy0, tuple(p for _, p in split), k)
    return Dual._make(y, tangent, tag)
