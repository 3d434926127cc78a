"""scipy.integrate's names, differentiable: ``solve_ivp`` and ``odeint`` (solutions that
differentiate with respect to ``y0``, ``args`` and the time points) and ``ode_jacobian``
(the ``jac=`` that scipy's stiff solvers take). A solve that fails, or one that cannot
be differentiated as asked, raises ``OdeSolveError``.

Importing this module imports ``scipy.integrate``; ``import dualad`` does not.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules import integrate
    >>> def rhs(t, y, k):
    ...     return -k * y
    >>> end = lambda k: integrate.solve_ivp(rhs, (0.0, 1.0), np.array([1.0]), args=(k,),
    ...                                     rtol=1e-10, atol=1e-12).y[0, -1]
    >>> round(float(ad.grad(end)(2.0)), 6)  # d/dk exp(-k) at k = 2
    -0.135335
"""

from __future__ import annotations

from .jacobians import ode_jacobian
from .ode_solvers import OdeSolveError, odeint, solve_ivp

__all__ = ["OdeSolveError", "ode_jacobian", "odeint", "solve_ivp"]


def __dir__() -> list[str]:
    """This module's face: its functions, nothing else."""
    return sorted(__all__)
