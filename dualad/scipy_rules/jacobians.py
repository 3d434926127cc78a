"""Jacobians in the form ``solve_ivp`` and ``optimize`` expect (``ad.ode_jacobian``).

``ad.grad(fun)``, ``ad.hessian(fun)`` and ``ad.jacobian(fun)`` already pass straight to
``scipy.optimize.minimize(jac=, hess=)`` and ``scipy.optimize.root(jac=)``: extra
positional arguments (``args=``) reach ``fun`` undifferentiated. ODE right-hand sides take
the time first, so they get their own wrapper.

Example:
    >>> import numpy as np, dualad as ad
    >>> from scipy.integrate import solve_ivp
    >>> def rhs(t, y, k):
    ...     return np.array([-k * y[0] * y[1], k * y[0] * y[1] - y[1]])
    >>> sol = solve_ivp(rhs, (0, 1), [1.0, 0.5], method="BDF", args=(2.0,),
    ...                 jac=ad.ode_jacobian(rhs))
    >>> sol.success
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import njit as _njit
from ..api import jacobian
from ..core.allocations import allocation_policy
from ..core.arguments import guard_opaque_calls
from ..core.marks import mark_transform
from ..forward_mode.transforms import jacobian_forward
from ..sparse.coloring import color_columns
from ..sparse.ode import ode_sparsity, sparse_ode_jacobian
from ..sparsity.detection import jacobian_sparsity

__all__ = ["ode_jacobian"]

_F64 = np.dtype(np.float64)
_FIRST = (0,)


def ode_jacobian(f: Callable[..., Any], *, mode: str = "auto",
                 chunk: int | None = None, sparse: bool = False,
                 allocations: str = "promote") -> Callable[..., np.ndarray]:
    """For a right-hand side ``f(t, y, *args)``, the ``jac(t, y, *args)`` of ``solve_ivp``.

    The result is the dense Jacobian ``df/dy`` of shape ``(n, n)``; ``t`` and ``args`` pass
    through undifferentiated. ``mode`` and ``chunk`` are those of :func:`dualad.jacobian`.
    With ``sparse=True`` it is a ``scipy.sparse.csr_array`` from compressed passes (see
    :func:`dualad.sparse.sparse_jacobian`). ``jac.sparsity(t0, y0, *args)`` gives the
    boolean pattern for ``solve_ivp(..., jac_sparsity=)``.
    """
    f = allocation_policy(f, allocations, "ode_jacobian")
    if _njit.is_njit(f):  # a numba.njit right-hand side: compiled dual numbers
        if sparse:  # compiled compressed passes, one direction per colour
            return sparse_ode_jacobian(f)
        jac_njit = _njit.ode_jacobian(f, chunk=chunk)
        jac_njit.sparsity = ode_sparsity(f)  # type: ignore[attr-defined]
        return jac_njit
    if sparse:
        return sparse_ode_jacobian(f, mode=mode)

    def rhs_of_y(y: Any, t: Any, *args: Any) -> Any:
        return f(t, y, *args)

    # a right-hand side maps n states to n derivatives: "auto" is forward mode, decided
    # here once instead of by a trial call of f at every Jacobian
    jac_y = jacobian(rhs_of_y, 0, mode="forward" if mode == "auto" else mode, chunk=chunk)
    # the float64 vector states of solve_ivp go straight to the forward Jacobian (what
    # jac_y does for them, without its checks of argument kinds)
    direct = mode in ("auto", "forward")
    fname = f"ode_jacobian({getattr(f, '__name__', 'f')})"
    guarded = guard_opaque_calls(rhs_of_y, fname)

    @functools.wraps(f)
    def jac(t: Any, y: Any, *args: Any) -> np.ndarray:
        if type(y) is not np.ndarray or y.dtype is not _F64:
            y = np.asarray(y, dtype=np.float64)
        if direct and y.ndim == 1:
            result = jacobian_forward(guarded, _FIRST, (y, t, *args), {}, chunk, fname)[0]
        else:
            result = jac_y(y, t, *args)
        if type(result) is not np.ndarray:
            result = np.asarray(result)
        if result.ndim == 2:
            return result
        n = y.size
        return result.reshape(np.size(result) // max(n, 1), n)

    def sparsity(t0: Any, y0: Any, *args: Any) -> Any:
        """The boolean pattern of ``df/dy`` at ``(t0, y0)``, for ``jac_sparsity=``."""

        return ode_sparsity(f)(t0, y0, *args)

    jac.sparsity = sparsity  # type: ignore[attr-defined]
    return mark_transform(jac, "ode_jacobian", f, 1,
                          lambda g, **o: ode_jacobian(g, **{"mode": mode, "chunk": chunk, **o}),
                          mode=mode, chunk=chunk, detect=jacobian_sparsity(f, 1),
                          color=color_columns)

