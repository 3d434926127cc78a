"""The Taylor test (pyadjoint's check of a gradient and a Hessian action).

For a scalar ``f``, a point ``x`` and a direction ``dx``, the Taylor remainders over a
halving sequence of steps ``h`` are

    order 1:  r(h) = |f(x + h dx) - f(x) - h grad f(x) . dx|             ~ h^2
    order 2:  r(h) = |f(x + h dx) - f(x) - h grad f . dx - h^2/2 dx . H dx|  ~ h^3

so halving ``h`` divides ``r`` by 4 (order 1) or 8 (order 2): the observed convergence
rates ``log2(r(h) / r(h/2))`` are about 2 and 3 when the derivatives are right, and
about 1 (or 2) when they are wrong.

Example:
    >>> import numpy as np
    >>> from dualad.diagnostics.taylor import taylor_test
    >>> f = lambda x: np.sum(np.sin(x) * x)
    >>> rates = taylor_test(f, np.array([0.5, 1.0]), np.array([1.0, -0.5]))
    >>> bool(np.all(np.abs(rates - 2) < 0.2))
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..api import hvp
from ..core.errors import GradcheckError
from ..reverse_mode.transforms import grad

__all__ = ["taylor_test"]


def taylor_test(f: Callable[..., Any], x: Any, dx: Any, *, order: int = 1,
                h: float | None = None, steps: int = 5, tolerance: float = 0.2,
                gradient: Callable[..., Any] | None = None) -> np.ndarray:
    """The observed convergence rates of the Taylor remainders of ``f`` at ``x`` along ``dx``.

    ``order`` is 1 (checks the gradient; rates about 2) or 2 (checks the Hessian action
    too; rates about 3). ``h`` is the first step (default: 1e-2 of the size of ``x``
    over the size of ``dx``, at least 1e-2 / size of ``dx``), halved ``steps - 1`` times.
    ``gradient`` (default ``ad.grad(f)``) is the gradient to check, e.g. ``tape.grad``.
    Raises :class:`~dualad.GradcheckError` with the remainders and rates when a rate is
    more than ``tolerance`` below the expected one. Remainders at rounding-error level
    (``f`` polynomial of degree ``order``) count as exact; their rates are ``inf``.
    """
    name = getattr(f, "__name__", "f")
    if order not in (1, 2):
        raise ValueError(f"taylor_test({name}): order={order!r}; use 1 (gradient) or 2 "
                         f"(gradient and Hessian).")
    if steps < 2:
        raise ValueError(f"taylor_test({name}): steps={steps}; need at least 2 steps for a "
                         f"rate.")
    x = np.asarray(x, dtype=np.float64)
    dx = np.asarray(dx, dtype=np.float64)
    if x.shape != dx.shape:
        raise ValueError(f"taylor_test({name}): dx has shape {dx.shape} but x has shape "
                         f"{x.shape}; pass a direction shaped like x.")
    size = float(np.max(np.abs(dx))) if dx.size else 0.0
    if not size:
        raise ValueError(f"taylor_test({name}): dx is zero; the test needs a nonzero "
                         f"direction (e.g. a random one of x's shape).")
    if not np.all(np.isfinite(dx)):
        raise ValueError(f"taylor_test({name}): dx has non-finite entries.")
    f0 = float(np.asarray(f(x)))
    g = np.asarray((gradient or grad(f))(x), dtype=np.float64)
    slope = float(np.sum(g * dx))
    curvature = float(np.sum(dx * np.asarray(hvp(f, x, dx)))) if order == 2 else 0.0
    if h is None:
        scale = float(np.max(np.abs(x))) if x.size else 0.0
        h = 1e-2 * max(scale, 1.0) / size
    hs = h * 0.5 ** np.arange(steps)
    residuals = np.empty(steps)
    for k, hk in enumerate(hs):
        fk = float(np.asarray(f(x + hk * dx)))
        residuals[k] = abs(fk - f0 - hk * slope - 0.5 * hk * hk * curvature)
    # rounding error of evaluating f and the terms: below it a remainder is exact
    noise = 64 * np.finfo(float).eps * (abs(f0) + abs(h * slope) + abs(h * h * curvature)
                                        + 1e-300)
    rates = np.empty(steps - 1)
    for k in range(steps - 1):
        a, b = residuals[k], residuals[k + 1]
        if a <= noise and b <= noise:
            rates[k] = np.inf
        elif b <= noise:
            rates[k] = np.inf
        else:
            rates[k] = np.log2(a / b)
    expected = order + 1
    if np.any(rates < expected - tolerance):
        raise GradcheckError(
            f"taylor_test({name}, order={order}): the remainders converge at rates "
            f"{np.array2string(rates, precision=3)}, expected about {expected} (h from "
            f"{h:.3g}, remainders {np.array2string(residuals, precision=3)}). "
            + ("The gradient" if order == 1 else "The gradient or the Hessian action")
            + f" of {name} disagrees with its values along dx."
        )
    return rates
