"""Differentiable ``solve_ivp`` and ``odeint`` with scipy's signatures.

On plain arrays both are scipy's own functions. When ``y0``, a leaf of ``args`` (any tree
of arrays), the ``t_span`` endpoints, ``t_eval`` or ``odeint``'s ``t`` are traced (inside
``ad.grad``, ``ad.jacobian``, ``ad.jvp``, ``ad.vjp``, ``ad.hessian``, ``ad.record``), the
solve is one differentiable operation: ``sol.y`` (and ``odeint``'s result) differentiate,
by forward sensitivities in forward mode (:mod:`.ode_forward`) and by the adjoint or
forward sensitivities in reverse mode (:mod:`.ode_adjoint`).

``sensitivity=`` chooses how reverse mode differentiates: ``"adjoint"`` (one backward solve
per cotangent, the cost independent of the number of parameters: for many parameters and a
scalar loss), ``"forward"`` (one augmented solve with a direction per input, reused by
every cotangent: for few inputs or many outputs), or ``"auto"`` (the default): forward up
to ``FORWARD_MAX_INPUTS`` inputs (entries of ``y0``, traced parameters and ``t0``), adjoint
above. Forward mode (``jvp``, ``jacobian(mode="forward")``) always uses forward
sensitivities. Nested transforms (``hessian``) differentiate the forward-sensitivity solve
again, so they work with every method, at the price of ``(1 + k)`` times larger states.

Details and limits:

* Implicit methods (BDF, Radau, LSODA) get dualad's exact Jacobian unless ``jac=`` is
  given (``sparse=True``: a sparse one from compressed passes; a ``numba.njit`` ``fun`` a
  compiled one). Each call finds a sparse Jacobian's pattern anew (about 1.6 s for the
  512-state 2-D Brusselator); when solving many times (fitting), build
  ``jac=ad.ode_jacobian(fun, sparse=True)`` once and pass it with ``sparse=True``.
* ``sensitivity_error_control=False`` drops the sensitivities from the step-size control.
* With ``t_eval=None`` the solution is differentiated at the solver's own time grid: its
  interior points are constants, its ends move with ``t_span`` (a tape keeps the grid of
  its recording).
* ``dense_output=True``: ``sol.sol(t)`` differentiates too (each traced evaluation is a
  solve of its own up to ``t``).
* ``events=`` with traced inputs is refused (event times are not differentiated): solve up
  to the event with plain values, then differentiate a solve over that fixed span.
* An integral loss ``∫ g(y) dt`` is differentiated exactly by adding ``q' = g(y)`` as one
  more state and reading ``q`` at the end, or approximately by a quadrature over
  ``t_eval``.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules.integrate import solve_ivp
    >>> def decay(t, y, k):
    ...     return -k * y
    >>> def final(k):
    ...     return solve_ivp(decay, (0.0, 1.0), [1.0], args=(k,), rtol=1e-10, atol=1e-12).y[0, -1]
    >>> bool(np.isclose(ad.grad(final)(2.0), -np.exp(-2.0)))
    True
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate as _si
from scipy.optimize import OptimizeResult

from ..core.array_protocol import lift_object_array, shape_of
from ..core.tracing import Traced
from ..core.trees import tree_flatten, tree_unflatten
from . import ode_adjoint as _ode_adjoint  # noqa: F401  (registers the gradient rule)
from . import ode_forward as _ode_forward  # noqa: F401  (registers the tangent rule)
from ._dropin import constant
from .ode_problem import OdeProblem, OdeSolveError, ode_values, plain_key

__all__ = ["solve_ivp", "odeint", "OdeSolveError"]

_SENSITIVITIES = ("auto", "forward", "adjoint")


def _traced_leaves(tree: Any) -> bool:
    return any(isinstance(x, Traced) or (isinstance(x, np.ndarray) and x.dtype == object)
               for x in tree_flatten(tree)[0])


def _as_state(y0: Any, fname: str) -> Any:
    """``y0`` as a 1-D float state (traced or plain)."""
    if isinstance(y0, (list, tuple)) and any(isinstance(v, Traced) for v in y0):
        entries: list[Any] = [v if isinstance(v, Traced) else np.float64(v) for v in y0]
        y0 = np.stack(entries)
    if not isinstance(y0, Traced):
        y0 = np.asarray(y0)
        if y0.dtype == object:
            y0 = np.stack(list(y0.reshape(-1)))
        elif y0.dtype.kind == "c":
            raise TypeError(
                f"dualad: {fname} differentiates real states; got a complex y0 "
                f"(shape {y0.shape}). Split it into real and imaginary parts."
            )
        else:
            y0 = y0.astype(np.float64)
    shape = shape_of(y0)
    if len(shape) == 0:
        y0 = np.reshape(y0, (1,))
    elif len(shape) != 1:
        raise ValueError(f"dualad: {fname}: `y0` must be 1-dimensional, got shape {shape}.")
    return y0


def _as_time(t: Any) -> Any:
    t = lift_object_array(t)
    if isinstance(t, Traced):
        return t
    return np.float64(constant(t))


class DenseSolution:
    """``sol.sol`` of a differentiated solve: ``sol(t)`` is the solution at ``t`` (scalar:
    shape ``(n,)``; 1-D: ``(n, len(t))``), differentiable in the solve's inputs and ``t``.
    Plain evaluations use scipy's interpolant; traced ones solve up to ``t``."""

    def __init__(self, problem: OdeProblem, t0: Any, y0: Any, leaves: tuple,
                 plain: Any, traced: bool) -> None:
        self.problem, self.t0, self.y0, self.leaves = problem, t0, y0, leaves
        self.plain, self.traced = plain, traced
        self.t_min, self.t_max = (plain.t_min, plain.t_max) if plain is not None else (t0, t0)

    def __call__(self, t: Any) -> Any:
        if not self.traced and not isinstance(t, Traced):
            return self.plain(t)
        scalar = len(shape_of(t)) == 0
        times = np.reshape(t, (1,)) if scalar else t
        tv = np.asarray(constant(times), dtype=np.float64)
        forward = float(constant(self.t_max)) >= float(constant(self.t0))
        order = np.argsort(tv if forward else -tv, kind="stable")
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        ordered = times if np.all(order == np.arange(order.size)) else times[order]
        y = ode_values(self.problem, self.t0, ordered, self.y0, *self.leaves)
        if not np.all(order == np.arange(order.size)):
            y = y[:, inverse]
        return y[:, 0] if scalar else y


def solve_ivp(fun: Callable[..., Any], t_span: Any, y0: Any, method: Any = "RK45",
              t_eval: Any = None, dense_output: bool = False, events: Any = None,
              vectorized: bool = False, args: Any = None, *, sensitivity: str = "auto",
              sparse: bool = False, sensitivity_error_control: bool = True,
              **options: Any) -> Any:
    """``scipy.integrate.solve_ivp``, differentiable in ``y0``, ``args``, ``t_span`` and
    ``t_eval`` (see the module's docstring).

    Extra keywords: ``sensitivity`` (``"auto"``, ``"forward"``, ``"adjoint"``: how reverse
    mode differentiates), ``sparse`` (sparse Jacobians for implicit methods),
    ``sensitivity_error_control`` (whether the step-size control covers the forward
    sensitivities).
    """
    if sensitivity not in _SENSITIVITIES:
        raise ValueError(
            f"dualad: solve_ivp(sensitivity={sensitivity!r}): choose one of "
            f"{', '.join(map(repr, _SENSITIVITIES))}."
        )
    if args is not None and not isinstance(args, tuple):
        args = (args,)  # as scipy does
    traced = _traced_leaves((t_span, y0, t_eval, args))
    if not traced:
        if sparse and "jac" not in options and method in ("BDF", "Radau"):
            from ..sparse.ode import sparse_ode_jacobian
            options["jac"] = sparse_ode_jacobian(fun)
        return _si.solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval,
                             dense_output=dense_output, events=events, vectorized=vectorized,
                             args=args, **options)
    if events is not None:
        raise ValueError(
            "dualad: solve_ivp(events=...) with traced inputs: event times are not "
            "differentiated. Solve up to the event with plain values (without the transform) "
            "to find its time, then differentiate a solve over that fixed t_span."
        )
    try:
        t0, t1 = t_span
    except (TypeError, ValueError):
        raise ValueError(
            f"dualad: solve_ivp: t_span must be a pair (t0, t1), got {t_span!r}."
        ) from None
    t0, t1 = _as_time(t0), _as_time(t1)
    y0 = _as_state(y0, "solve_ivp")
    if t_eval is not None:
        t_eval = lift_object_array(t_eval)
        if not isinstance(t_eval, Traced):
            t_eval = np.asarray(t_eval, dtype=np.float64)
    leaves, spec = tree_flatten(args if args is not None else ())
    leaves = [lift_object_array(leaf) for leaf in leaves]
    traced_at = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Traced)]
    fixed = list(leaves)

    def bind(traced_leaves: tuple) -> tuple:
        full = list(fixed)
        for i, leaf in zip(traced_at, traced_leaves):
            full[i] = leaf
        return tuple(tree_unflatten(spec, full))

    rtol = options.pop("rtol", 1e-3)
    atol = options.pop("atol", 1e-6)
    jac = options.pop("jac", None)
    options.pop("vectorized", None)
    problem = OdeProblem(fun, method=method, rtol=rtol, atol=atol, bind=bind, jac=jac,
                         sparse=sparse, sensitivity=sensitivity, options=options,
                         error_control=sensitivity_error_control)
    traced_leaves = tuple(leaves[i] for i in traced_at)
    plain_leaves = tuple(np.asarray(constant(v), dtype=np.float64) for v in traced_leaves)
    t0v, t1v = float(constant(t0)), float(constant(t1))
    y0v = np.asarray(constant(y0), dtype=np.float64)
    t_eval_v = None if t_eval is None else np.asarray(constant(t_eval), dtype=np.float64)
    if t_eval_v is not None and t_eval_v.ndim != 1:
        raise ValueError(f"dualad: solve_ivp: t_eval must be 1-D, got shape {t_eval_v.shape}.")
    if t_eval_v is not None and t_eval_v.size and (
            np.any(t_eval_v < min(t0v, t1v)) or np.any(t_eval_v > max(t0v, t1v))):
        raise ValueError(f"dualad: solve_ivp: values in t_eval are not within t_span "
                         f"({t0v}, {t1v}), as scipy requires.")
    if t_eval is not None and not dense_output:
        assert t_eval_v is not None
        # The times are known: the solve happens once, in the primitive (reverse mode and
        # plain values) or as part of the sensitivity system (forward mode).
        result = OptimizeResult(t=t_eval if isinstance(t_eval, Traced) else t_eval_v,
                                sol=None, t_events=None, y_events=None)
        result.y = ode_values(problem, t0, t_eval, y0, *traced_leaves) if t_eval_v.size \
            else np.zeros((shape_of(y0)[0], 0))
        _copy_statistics(result, problem)
        return result
    plain = _solve_plain(problem, t0v, t1v, y0v, plain_leaves, t_eval_v)
    if t_eval is None:
        interior = np.asarray(plain.t[1:-1], dtype=np.float64)
        times = np.concatenate([np.reshape(t0, (1,)), interior, np.reshape(t1, (1,))]) \
            if plain.t.size > 1 else np.reshape(t0, (1,))
        times_v = np.asarray(plain.t, dtype=np.float64)
    else:
        assert t_eval_v is not None
        times, times_v = t_eval, t_eval_v
    problem._last = (plain_key(t0v, times_v, y0v, *plain_leaves), plain)
    result = copy.copy(plain)
    if times_v.size:
        result.y = ode_values(problem, t0, times, y0, *traced_leaves)
    result.t = times if isinstance(times, Traced) else times_v
    if dense_output:
        result.sol = DenseSolution(problem, t0, y0, traced_leaves, plain.sol, True)
    else:
        result.sol = None
    return result


def _copy_statistics(result: Any, problem: OdeProblem) -> None:
    """nfev, njev, nlu, status, message and success of the solve that ran (the plain one,
    or the sensitivity system's in forward mode)."""
    solved = [problem] + list(v for v in problem.derived.values() if isinstance(v, OdeProblem))
    sol = next((q._last[1] for q in solved if q._last is not None and q._last[1] is not None),
               None)
    for name, default in (("nfev", 0), ("njev", 0), ("nlu", 0), ("status", 0),
                          ("message", "The solver successfully reached the end of the "
                                      "integration interval."), ("success", True)):
        result[name] = getattr(sol, name, default) if sol is not None else default


def _solve_plain(problem: OdeProblem, t0: float, t1: float, y0: np.ndarray, leaves: tuple,
                 t_eval: np.ndarray | None) -> Any:
    sol = problem.solve(t0, t1, y0, leaves, t_eval=t_eval, dense_output=True)
    if sol.status < 0:
        raise OdeSolveError(
            f"dualad: solve_ivp (method {problem.method!r}) failed on a differentiated "
            f"solve: {sol.message} Loosen the tolerances, pick a stiff method (BDF, Radau) "
            f"or shorten t_span."
        )
    return sol


def odeint(func: Callable[..., Any], y0: Any, t: Any, args: Any = (), Dfun: Any = None,
           col_deriv: int = 0, full_output: int = 0, ml: Any = None, mu: Any = None,
           rtol: Any = None, atol: Any = None, tcrit: Any = None, h0: float = 0.0,
           hmax: float = 0.0, hmin: float = 0.0, ixpr: int = 0, mxstep: int = 0,
           mxhnil: int = 0, mxordn: int = 12, mxords: int = 5, printmessg: int = 0,
           tfirst: bool = False, *, sensitivity: str = "auto") -> Any:
    """``scipy.integrate.odeint``, differentiable in ``y0``, ``args`` and ``t``.

    Traced calls solve with ``solve_ivp(method="LSODA")`` (the same algorithm as odeint's
    ODEPACK LSODA, from scipy's other wrapper) at odeint's default tolerances (1.49012e-8);
    the result has odeint's shape ``(len(t), len(y0))``. ``full_output`` then returns
    ``(y, info)`` with ``info`` holding ``nfe``, ``nje`` and ``message``.
    """
    if not isinstance(args, tuple):
        args = (args,)
    if not _traced_leaves((y0, t, args)):
        return _si.odeint(func, y0, t, args=args, Dfun=Dfun, col_deriv=col_deriv,
                          full_output=full_output, ml=ml, mu=mu, rtol=rtol, atol=atol,
                          tcrit=tcrit, h0=h0, hmax=hmax, hmin=hmin, ixpr=ixpr, mxstep=mxstep,
                          mxhnil=mxhnil, mxordn=mxordn, mxords=mxords, printmessg=printmessg,
                          tfirst=tfirst)
    if tcrit is not None:
        raise ValueError("dualad: odeint(tcrit=...) is not supported with traced inputs; "
                         "split the solve at the critical times instead.")
    if shape_of(t) == () or len(shape_of(t)) != 1:
        raise ValueError(f"dualad: odeint: t must be a 1-D sequence of times, got shape "
                         f"{shape_of(t)}.")
    t = lift_object_array(t)
    if not isinstance(t, Traced):
        t = np.asarray(t, dtype=np.float64)

    def fun(time: Any, y: Any, *a: Any) -> Any:
        return func(time, y, *a) if tfirst else func(y, time, *a)

    jac = None
    if Dfun is not None:
        def jac(time: Any, y: Any, *a: Any) -> Any:
            j = np.asarray(Dfun(time, y, *a) if tfirst else Dfun(y, time, *a))
            return j.T if col_deriv else j

    options: dict[str, Any] = {}
    if hmax:
        options["max_step"] = hmax
    if h0:
        options["first_step"] = h0
    if hmin:
        options["min_step"] = hmin
    tol = 1.49012e-8
    sol = solve_ivp(fun, (t[0], t[-1]), y0, method="LSODA", t_eval=t, args=args or None,
                    rtol=tol if rtol is None else rtol, atol=tol if atol is None else atol,
                    jac=jac, sensitivity=sensitivity, **options)
    y = np.transpose(sol.y)
    if full_output:
        return y, {"nfe": sol.nfev, "nje": sol.njev, "message": sol.message}
    return y
