"""One ODE solve as one differentiable operation: the problem and its primitive.

An :class:`OdeProblem` holds what stays fixed while the solution is differentiated: the
right-hand side ``rhs(t, y, *leaves)`` (the user's ``fun`` with the traced leaves of its
``args`` put back in place), the method, the tolerances and the solver options.
:func:`ode_values` is the primitive: ``ode_values(problem, t0, times, y0, *leaves)`` is the
solution at ``times`` (shape ``(n, m)``), computed by ``scipy.integrate.solve_ivp``; its
tangent rule (:mod:`.ode_forward`: forward sensitivities) and gradient rule
(:mod:`.ode_adjoint`: the adjoint) call it again on plain values, so transforms nest.

The last plain solve (with its dense output) is kept on the problem, so a gradient right
after the solve it differentiates reuses the forward solution instead of solving again.

Example:
    >>> import numpy as np
    >>> from dualad.scipy_rules.ode_problem import OdeProblem, ode_values
    >>> problem = OdeProblem(lambda t, y, k: -k * y, method="RK45", rtol=1e-10, atol=1e-12)
    >>> y = ode_values(problem, 0.0, np.array([1.0]), np.array([2.0]), 3.0)
    >>> bool(np.allclose(y, 2.0 * np.exp(-3.0)))
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.integrate as _si
import scipy.sparse as _sparse

from .. import njit as _njit
from ..api import jacobian
from ..core.errors import DualadError
from ..core.tracing import primitive
from ..extend import declare_dense
from ..sparse.ode import sparse_ode_jacobian

__all__ = ["OdeProblem", "OdeSolveError", "ode_values", "IMPLICIT_METHODS", "plain_key"]

#: Methods that solve linear systems with the Jacobian (dualad supplies it exactly).
IMPLICIT_METHODS = frozenset(("BDF", "Radau", "LSODA"))


class OdeSolveError(DualadError, RuntimeError):
    """scipy's solver failed (``status == -1``) on a solve that is being differentiated."""


def plain_key(*values: Any) -> tuple:
    """A hashable key of plain numbers and arrays (their bytes and shapes)."""
    key = []
    for v in values:
        a = np.asarray(v, dtype=np.float64)
        key.append((a.shape, a.tobytes()))
    return tuple(key)


class OdeProblem:
    """The fixed part of a differentiated solve.

    ``rhs(t, y, *leaves)`` is the right-hand side with the traced leaves of ``args`` passed
    separately (``bind`` puts them back into the user's ``args``); ``jac`` is the user's
    Jacobian (callable or matrix) or ``None``, then implicit methods get dualad's exact one
    (sparse with ``sparse=True``). ``options`` go to ``solve_ivp`` unchanged.
    """

    def __init__(self, fun: Callable[..., Any], *, method: Any = "RK45", rtol: Any = 1e-3,
                 atol: Any = 1e-6, bind: Callable[[tuple], tuple] | None = None,
                 jac: Any = None, sparse: bool = False, sensitivity: str = "auto",
                 options: dict | None = None, name: str = "solve_ivp",
                 error_control: bool = True) -> None:
        self.fun = fun
        self.method = method
        self.rtol = rtol
        self.atol = atol
        self.bind = bind if bind is not None else (lambda leaves: tuple(leaves))
        self.user_jac = jac
        self.sparse = bool(sparse)
        self.sensitivity = sensitivity
        self.options = dict(options or {})
        self.name = name
        self.error_control = bool(error_control)  # on forward sensitivities
        self._jac: Callable[..., Any] | None = None
        self._last: tuple[tuple, Any] | None = None
        #: augmented problems by their shape, their Jacobians, the last sensitivities
        self.derived: dict[Any, Any] = {}
        #: on an augmented problem of forward sensitivities (see ode_forward): the
        #: original problem's atol and the number of directions carried
        self.base_atol: Any = atol
        self.directions = 0

    # -- the right-hand side and its Jacobian ----------------------------------------
    def rhs(self, t: Any, y: Any, *leaves: Any) -> Any:
        """``fun(t, y, *args)`` with ``leaves`` put back into ``args``."""
        return self.fun(t, y, *self.bind(leaves))

    @property
    def python_fun(self) -> Callable[..., Any]:
        """``fun`` as Python code (an ``@njit`` function's ``py_func``), for dual numbers."""
        return self.fun.py_func if _njit.is_njit(self.fun) else self.fun  # type: ignore

    @property
    def implicit(self) -> bool:
        return isinstance(self.method, str) and self.method in IMPLICIT_METHODS

    def jacobian(self, t: Any, y: Any, *leaves: Any) -> Any:
        """``d rhs / dy`` at plain values: dense, or sparse with ``sparse=True``."""
        if self._jac is None:
            self._jac = self._make_jacobian()
        return self._jac(t, y, *leaves)

    def _make_jacobian(self) -> Callable[..., Any]:
        user = self.user_jac
        if user is not None:
            if callable(user):
                return lambda t, y, *leaves: user(t, y, *self.bind(leaves))
            return lambda t, y, *leaves: user
        if _njit.is_njit(self.fun):
            njit_jac = _njit.ode_jacobian(self.fun)
            return lambda t, y, *leaves: njit_jac(t, y, *self.bind(leaves))
        if self.sparse:
            return sparse_ode_jacobian(self.rhs)

        def rhs_of_y(y: Any, t: Any, *leaves: Any) -> Any:
            return self.rhs(t, y, *leaves)

        jac_y = jacobian(rhs_of_y, 0, mode="forward")

        def dense(t: Any, y: Any, *leaves: Any) -> np.ndarray:
            y = np.asarray(y, dtype=np.float64)
            return np.asarray(jac_y(y, t, *leaves)).reshape(y.size, y.size)

        return dense

    def solver_jac(self) -> Any:
        """What ``solve_ivp(jac=)`` gets: dualad's Jacobian for implicit methods, else None."""
        if not self.implicit:
            return None
        if self.method == "LSODA":  # LSODA takes dense matrices only
            def dense(t: Any, y: Any, *leaves: Any) -> np.ndarray:
                j = self.jacobian(t, y, *leaves)
                return j.toarray() if _sparse.issparse(j) else np.asarray(j)
            return dense
        return self.jacobian

    # -- solving -----------------------------------------------------------------------
    def solve(self, t0: float, t1: float, y0: np.ndarray, leaves: tuple,
              t_eval: np.ndarray | None = None, dense_output: bool = True) -> Any:
        """``scipy.integrate.solve_ivp`` of this problem on plain values."""
        jac = self.solver_jac()
        kwargs = dict(self.options)
        if jac is not None:
            kwargs["jac"] = jac
        return _si.solve_ivp(self.rhs, (t0, t1), y0, method=self.method, t_eval=t_eval,
                             dense_output=dense_output, args=tuple(leaves) or None,
                             rtol=self.rtol, atol=self.atol, **kwargs)

    def forward_solution(self, t0: Any, times: Any, y0: Any, leaves: tuple) -> Any:
        """The dense forward solution for these plain values (the last one is reused)."""
        t0 = float(t0)
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        y0 = np.asarray(y0, dtype=np.float64)
        key = plain_key(t0, times, y0, *leaves)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        t1 = float(times[-1]) if times.size else t0
        if t1 == t0:
            sol = None
        else:
            sol = self.solve(t0, t1, y0, leaves, t_eval=times, dense_output=True)
            if sol.status < 0:
                raise OdeSolveError(
                    f"dualad: {self.name} (method {self.method!r}) failed while solving a "
                    f"differentiated problem: {sol.message} Loosen the tolerances, pick a "
                    f"stiff method (BDF, Radau) or shorten the time span."
                )
        self._last = (key, sol)
        return sol


def _ode_values(problem: OdeProblem, t0: Any, times: Any, y0: Any, *leaves: Any) -> np.ndarray:
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    y0 = np.asarray(y0, dtype=np.float64)
    sol = problem.forward_solution(t0, times, y0, leaves)
    if sol is None:  # every time point is t0
        return np.repeat(y0[:, None], times.size, axis=1)
    y = np.asarray(sol.y)
    if y.shape[1] != times.size:  # solve_ivp leaves out t_eval points equal to t0 only
        raise OdeSolveError(
            f"dualad: {problem.name} returned {y.shape[1]} of {times.size} time points."
        )
    return y


ode_values = primitive(_ode_values)
# sparsity: every point of the solution depends on every input of the solve
declare_dense(ode_values)
ode_values.__doc__ = """The solution of ``problem`` at ``times`` from ``(t0, y0)``: shape ``(n, m)``."""
