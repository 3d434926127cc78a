"""The adjoint of an ODE solve: the gradient rule of :func:`.ode_values`.

For a cotangent ``G`` on the solution at ``t_1 < ... < t_m`` the adjoint state ``λ`` is
solved backwards from ``t_m`` to ``t0``:

    λ' = -Jᵀ λ,    μ' = -(df/dp)ᵀ λ,    λ jumps by ``G[:, i]`` at each ``t_i``,

and the gradients are ``λ(t0)`` for ``y0``, ``μ(t0)`` for the parameters,
``G[:, i] · f(t_i, y_i)`` for the time points and ``-λ(t0) · f(t0, y0)`` for ``t0``.
``Jᵀλ`` and ``(df/dp)ᵀλ`` are one vector-Jacobian product of dualad's reverse mode.

The state ``y(t)`` along the backward solve comes from the forward solve's dense output
(the *interpolating* adjoint). Solving ``y`` backwards together with ``λ`` (the
"backsolve" adjoint) needs no storage but is unstable for stiff problems: the modes that
decay forward grow backward, and the recomputed ``y`` drifts away from the forward
solution. The interpolant costs memory proportional to the number of steps, and is as
accurate as the forward solve. Implicit methods get the Newton matrix ``-Jᵀ`` for ``λ``.

``sensitivity="forward"`` (or a solve whose inputs an outer differentiation traces, for
higher derivatives) computes the same gradient from forward sensitivities instead:
``Sᵀ G`` with one direction per input; the sensitivities are kept, so a reverse-mode
Jacobian (one pullback per output) solves once. ``"auto"`` takes the adjoint when there
are more inputs than :data:`FORWARD_MAX_INPUTS`.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules.ode_problem import OdeProblem, ode_values
    >>> problem = OdeProblem(lambda t, y, k: -k * y, rtol=1e-10, atol=1e-12,
    ...                      sensitivity="adjoint")
    >>> g = ad.grad(lambda k: ode_values(problem, 0.0, np.array([1.0]), np.ones(1), k)[0, 0])
    >>> bool(np.allclose(g(2.0), -np.exp(-2.0)))
    True
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.integrate as _si
import scipy.sparse as _sparse

from ..core.array_protocol import shape_of
from ..extend import (
    Dual,
    Traced,
    gradient_rule,
    gradients_needed,
    lift_object_array,
)
from ..forward_mode.dual import Tag
from ..reverse_mode.transforms import vjp
from ..tape import record
from .ode_forward import forward_sensitivities
from .ode_problem import OdeProblem, OdeSolveError, ode_values, plain_key

__all__ = ["adjoint_gradients", "choose_sensitivity", "FORWARD_MAX_INPUTS", "DUAL_PULLBACK_MAX"]

#: ``sensitivity="auto"``: forward sensitivities up to this many inputs (entries of ``y0``,
#: the traced parameters and ``t0``), the adjoint above. Forward sensitivities cost one
#: dual evaluation of ``f`` with ``k`` directions per step and a ``(1 + k) n`` state; the
#: adjoint a backward solve of ``n + p`` states with one reverse-mode vjp per evaluation.
#: Measured (benchmarks/ode_sensitivity, BDF, rtol 1e-8, 3 parameters, 2-core AMD EPYC
#: shared and loaded): Robertson forward 6.4x the solve vs adjoint 7.1x; 2-D Brusselator
#: (512 states) 12x vs 10.6x: about even at 3 inputs, so forward up to a few more.
FORWARD_MAX_INPUTS = 8

#: The adjoint's ``[Jᵀλ, (df/dp)ᵀλ]`` comes from one dual evaluation with ``n + p``
#: directions up to this size, from a recorded tape's reverse sweep above. Measured on
#: Robertson (n = 3, p = 3, 2-core AMD EPYC, loaded): 0.11 ms dual, 0.17 ms tape vjp,
#: 0.54 ms plain ``ad.vjp``, per evaluation (``f`` itself: 5 µs).
DUAL_PULLBACK_MAX = 32

#: Newton matrices of at most this many rows are dense (LAPACK LU), larger ones sparse
#: (SuperLU): scipy's sparse path costs ~0.1 ms of Python per factorisation.
DENSE_MAX = 64


def choose_sensitivity(problem: OdeProblem, n_inputs: int) -> str:
    """``"forward"`` or ``"adjoint"`` for a gradient with ``n_inputs`` inputs."""
    if problem.sensitivity in ("forward", "adjoint"):
        return problem.sensitivity
    return "forward" if n_inputs <= FORWARD_MAX_INPUTS else "adjoint"


def _size(x: Any) -> int:
    return int(np.prod(shape_of(x), dtype=np.int64))


def adjoint_gradients(problem: OdeProblem, grad: np.ndarray, y: np.ndarray, t0: float,
                      times: np.ndarray, y0: np.ndarray, leaves: tuple) -> tuple:
    """``(g_t0, g_times, g_y0, g_leaves)`` for the cotangent ``grad`` (``(n, m)``) on the
    solution ``y`` at ``times``, by the interpolating adjoint (plain values only)."""
    sol = problem.forward_solution(t0, times, y0, leaves)
    n, m = y.shape
    sizes = [_size(v) for v in leaves]
    shapes = [shape_of(v) for v in leaves]
    p = int(sum(sizes))
    f_of = problem.rhs
    pull = _pullback(problem, leaves, n, p, float(t0), y0)

    def rhs(t: float, state: np.ndarray) -> np.ndarray:
        return -pull(t, sol.sol, state[:n])

    jac = None
    if problem.implicit:
        def jac(t: float, state: np.ndarray) -> Any:
            j = problem.jacobian(t, sol.sol(t), *leaves)
            if problem.method == "LSODA" or n + p <= DENSE_MAX:
                j = j.toarray() if _sparse.issparse(j) else np.asarray(j)
                full = np.zeros((n + p, n + p))
                full[:n, :n] = -j.T
                return full
            j = _sparse.csc_array(j).T
            return _sparse.block_diag([-j, _sparse.csc_array((p, p))], format="csc")

    atol = problem.atol
    if np.ndim(atol):
        atol = np.concatenate([np.broadcast_to(atol, (n,)), np.full(p, np.min(atol))])
    options = {k: v for k, v in problem.options.items()
               if k in ("max_step", "first_step", "min_step")}
    options.pop("first_step", None)
    state = np.zeros(n + p)
    g_times = np.zeros(m)
    for i in range(m - 1, -1, -1):
        t_i = float(times[i])
        g_times[i] = float(np.dot(grad[:, i], np.asarray(f_of(t_i, y[:, i], *leaves))))
        state[:n] += grad[:, i]
        t_prev = float(times[i - 1]) if i > 0 else float(t0)
        if t_prev != t_i and np.any(state[:n]):
            kwargs = dict(options)
            if jac is not None:
                kwargs["jac"] = jac
            back = _si.solve_ivp(rhs, (t_i, t_prev), state, method=problem.method,
                                 rtol=problem.rtol, atol=atol, **kwargs)
            if back.status < 0:
                raise OdeSolveError(
                    f"dualad: the adjoint solve of {problem.name} failed: {back.message}"
                )
            state = back.y[:, -1].copy()
    lam = state[:n]
    g_t0 = -float(np.dot(lam, np.asarray(f_of(float(t0), y0, *leaves))))
    g_leaves = []
    offset = n
    for size, shape in zip(sizes, shapes):
        g_leaves.append(np.reshape(state[offset:offset + size], shape))
        offset += size
    return g_t0, g_times, lam.copy(), tuple(g_leaves)


def _forward_gradients(problem: OdeProblem, grad: Any, t0: Any, times: Any, y0: Any,
                       leaves: tuple, needed: list[bool]) -> tuple:
    """The same gradients from forward sensitivities, one direction per needed input
    (works on traced values too: higher derivatives). ``needed``: for ``t0``, ``times``,
    ``y0`` and each leaf, whether its gradient is wanted."""
    n = shape_of(y0)[0]
    sizes = [_size(v) for v in leaves]
    want_t0, want_y0, want_leaves = needed[0], needed[2], needed[3:]
    k = int(want_t0) + (n if want_y0 else 0) + sum(s for s, w in zip(sizes, want_leaves) if w)
    eye = np.eye(max(k, 1))
    offset = 0
    dt0 = dy0 = None
    if want_t0:
        dt0, offset = eye[0], 1
    if want_y0:
        dy0, offset = eye[offset:offset + n], offset + n
    dleaves: list[Any] = []
    for v, size, want in zip(leaves, sizes, want_leaves):
        if want:
            dleaves.append(np.reshape(eye[offset:offset + size], shape_of(v) + (k,)))
            offset += size
        else:
            dleaves.append(None)
    plain = not any(isinstance(x, Traced) for x in (t0, times, y0, *leaves))
    cache_key = ("sens", tuple(needed), plain_key(t0, times, y0, *leaves)) if plain else None
    cached = problem.derived.get("sensitivity cache")
    if cache_key is not None and cached is not None and cached[0] == cache_key:
        y, tangent = cached[1]
    else:
        y, tangent = forward_sensitivities(problem, t0, times, y0, tuple(leaves), dt0, None,
                                           dy0, tuple(dleaves), max(k, 1))
        if cache_key is not None:
            problem.derived["sensitivity cache"] = (cache_key, (y, tangent))
    flat = np.tensordot(grad, tangent, axes=([0, 1], [0, 1]))  # (k,)
    g_times = None
    if needed[1]:
        m = shape_of(y)[1]
        f_cols = [problem.rhs(times[i], y[:, i], *leaves) for i in range(m)]
        g_times = np.sum(grad * np.stack(f_cols, axis=1), axis=0)
    offset = 0
    g_t0 = g_y0 = None
    if want_t0:
        g_t0, offset = flat[0], 1
    if want_y0:
        g_y0, offset = flat[offset:offset + n], offset + n
    g_leaves: list[np.ndarray | None] = []
    for v, size, want in zip(leaves, sizes, want_leaves):
        if want:
            g_leaves.append(np.reshape(flat[offset:offset + size], shape_of(v)))
            offset += size
        else:
            g_leaves.append(None)
    return g_t0, g_times, g_y0, tuple(g_leaves)


def _pullback(problem: OdeProblem, leaves: tuple, n: int, p: int, t0: float,
              y0: np.ndarray) -> Any:
    """``pull(t, y_of, λ)``: ``[Jᵀλ, (df/dp)ᵀλ]`` flattened, at ``y_of(t)`` (plain values).

    Few inputs (``n + p <=`` :data:`DUAL_PULLBACK_MAX`): one evaluation of ``f`` on dual
    numbers with ``n + p`` directions gives ``[J, df/dp]``, then a product with ``λ``.
    Otherwise a reverse-mode vjp of a tape of ``f`` recorded once (the tape re-records
    where a value-dependent branch changes), or of ``f`` itself where recording fails.
    """
    if n + p <= DUAL_PULLBACK_MAX:
        eye = np.eye(n + p)
        seeds = [eye[:n]]
        offset = n
        for v in leaves:
            size = _size(v)
            seeds.append(np.reshape(eye[offset:offset + size], shape_of(v) + (n + p,)))
            offset += size
        fun = problem.python_fun

        last: list[Any] = [None, None]  # t and [J, df/dp] there

        def dual_pull(t: float, y_of: Any, lam: np.ndarray) -> np.ndarray:
            # The adjoint is linear in λ: Newton's iterations at one t reuse the matrix.
            if last[0] != t:
                tag = Tag()
                out = fun(t, Dual._make(y_of(t), seeds[0], tag),
                          *problem.bind(tuple(Dual._make(v, s, tag)
                                              for v, s in zip(leaves, seeds[1:]))))
                out = lift_object_array(out)
                if isinstance(out, Dual) and out.tag is tag:
                    last[1] = np.reshape(out.partials, (n, n + p))
                else:
                    last[1] = np.zeros((n, n + p))
                last[0] = t
            return last[1].T @ lam

        return dual_pull

    def rhs_of(t: Any, y: Any, *ls: Any) -> Any:
        return problem.rhs(t, y, *ls)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tape = record(rhs_of, t0, y0, *leaves)
    except Exception:  # a function the tape cannot record: plain reverse mode per call
        tape = None

    current: list[Any] = [None, None]  # t and the pullback there

    def tape_pull(t: float, y_of: Any, lam: np.ndarray) -> np.ndarray:
        # The adjoint is linear in λ: Newton's iterations at one t reuse the pullback.
        if current[0] != t:
            y = y_of(t)
            if tape is not None:
                pullback = tape.vjp(t, y, *leaves)[1]
                current[1] = lambda c: pullback(c)[1:]
            else:
                current[1] = vjp(lambda yy, *ll: rhs_of(t, yy, *ll), y, *leaves)[1]
            current[0] = t
        grads = current[1](lam)
        parts = [np.zeros(_size(v)) if g is None else
                 np.reshape(np.asarray(g, dtype=np.float64), (-1,))
                 for g, v in zip(grads, (np.zeros(n), *leaves))]
        return np.concatenate(parts)

    return tape_pull


@gradient_rule(ode_values)
def _ode_values_gradient(grad: Any, output: Any, problem: OdeProblem, t0: Any, times: Any,
                         y0: Any, *leaves: Any) -> tuple:
    needs = gradients_needed()
    needed = [True] * (3 + len(leaves)) if needs is None else list(needs[1:])
    n_inputs = int(needed[0]) + (_size(y0) if needed[2] else 0) + sum(
        _size(v) for v, w in zip(leaves, needed[3:]) if w)
    traced = any(isinstance(x, Traced) for x in (grad, t0, times, y0, *leaves))
    if traced or choose_sensitivity(problem, n_inputs) == "forward":
        g_t0, g_times, g_y0, g_leaves = _forward_gradients(problem, grad, t0, times, y0,
                                                           leaves, needed)
    else:
        times_v = np.atleast_1d(np.asarray(times, dtype=np.float64))
        g_t0, g_times, g_y0, g_leaves = adjoint_gradients(
            problem, np.asarray(grad, dtype=np.float64), np.asarray(output),
            float(t0), times_v, np.asarray(y0, dtype=np.float64), tuple(leaves))
    if g_times is not None:
        g_times = np.reshape(g_times, shape_of(times))
    return (None, g_t0, g_times, g_y0, *g_leaves)
