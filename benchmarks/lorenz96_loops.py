"""Lorenz-96 as a user writes it for Numba: the right-hand side and its analytic Jacobian
as plain loops (the benchmarks compile them with ``numba.njit``).

Example:
    >>> import numpy as np
    >>> from benchmarks.lorenz96_loops import analytic_loop, lorenz96_loop
    >>> x = np.arange(5.0)
    >>> bool(np.all(lorenz96_loop(x) == (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8))
    True
    >>> analytic_loop(x).shape
    (5, 5)
"""

import numpy as np


def lorenz96_loop(x):
    """``out[i] = (x[i+1] - x[i-2]) * x[i-1] - x[i] + 8`` (periodic)."""
    n = x.shape[0]
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8.0
    return out


def analytic_loop(x):
    """The dense Jacobian of :func:`lorenz96_loop`, entry by entry."""
    n = x.shape[0]
    jac = np.zeros((n, n))
    for i in range(n):
        jac[i, (i + 1) % n] = x[(i - 1) % n]
        jac[i, (i - 2) % n] = -x[(i - 1) % n]
        jac[i, (i - 1) % n] = x[(i + 1) % n] - x[(i - 2) % n]
        jac[i, i] = -1.0
    return jac
