"""The 1-D Brusselator written as a Python loop: its Jacobian, and solve_ivp(BDF) with it."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, REFERENCE, Bench, jit, max_abs_err, require_dualad
from .stiff_ode import make_brusselator

TITLE = "1-D Brusselator as a Python loop (400 states): Jacobian, and solve_ivp(BDF)"
XLABEL = "states"
DESCRIPTION = """
The 1-D Brusselator of the stiff_ode benchmark (Hairer & Wanner: A = 1, B = 3,
alpha = 1/50, Dirichlet ends, 200 grid points x 2 species = 400 states), but written the
way simulation code often is: a Python loop over grid points that writes each entry of
dy = np.empty_like(y). Jacobian rows: baseline scipy's own finite differences
(`scipy.optimize._numdiff.approx_derivative`, 2-point, what solve_ivp uses for jac=None),
`ad.ode_jacobian(f)` (default chunk), `ad.jit(ad.ode_jacobian(f))` (the loop recorded and
compiled at the untimed first call; a program this long runs in the compiled interpreter)
and the analytic Jacobian; max abs err is against the analytic one. solve_ivp rows: whole
solve_ivp(method="BDF", t in [0, T]) wall time with the analytic (hand-written) jac as
baseline, jac=None, jac=ad.ode_jacobian(f) and jac=ad.jit(ad.ode_jacobian(f)) (compiled in
the untimed first solve); the methods take turns, one solve each per round. ad.jit rows use
fallback="error": where the call does not compile, the row says ad.jit falls back and why.
"""

GRID = 200
RTOL, ATOL = 1e-6, 1e-10


def make_loop(n):
    """The right-hand side as a loop over the n grid points (same equations as stiff_ode)."""
    a, b = 1.0, 3.0
    c = (n + 1) ** 2 / 50.0

    def f(t, y):
        dy = np.empty_like(y)
        for i in range(n):
            u, v = y[i], y[n + i]
            ul = y[i - 1] if i > 0 else 1.0
            ur = y[i + 1] if i < n - 1 else 1.0
            vl = y[n + i - 1] if i > 0 else 3.0
            vr = y[n + i + 1] if i < n - 1 else 3.0
            uuv = u * u * v
            dy[i] = a + uuv - (b + 1) * u + c * (ul - 2 * u + ur)
            dy[n + i] = b * u - uuv + c * (vl - 2 * v + vr)
        return dy

    return f


def run(quick: bool = False):
    """Jacobian rows at y0 and solve_ivp rows (quick: 50 grid points, shorter span)."""
    from scipy.integrate import solve_ivp
    from scipy.optimize._numdiff import approx_derivative

    grid = 50 if quick else GRID
    states = 2 * grid
    span = (0.0, 1.0 if quick else 2.0)
    bench = Bench("brusselator1d")
    f = make_loop(grid)
    fvec, jac, y0 = make_brusselator(grid)
    if not np.allclose(f(0.0, y0), fvec(0.0, y0), rtol=1e-13, atol=1e-10):
        raise AssertionError("the loop and the vectorised Brusselator differ")
    check = max_abs_err(jac(0.0, y0))
    case = f"jacobian, {states} states"

    def fd():
        return lambda: approx_derivative(lambda y: f(0.0, y), y0)

    def dualad_jac(chunk=None, compiled=False):
        def make():
            j = require_dualad().ode_jacobian(f, chunk=chunk)
            if compiled:
                j = jit(j)
            return lambda: j(0.0, y0)

        return make

    bench.time(case, "scipy approx_derivative", BASELINE, fd, size=states, check=check)
    bench.time(case, "dualad ode_jacobian", DUALAD, dualad_jac(), size=states, check=check)
    bench.time(case, "ad.jit(ode_jacobian)", DUALAD, dualad_jac(compiled=True), size=states,
               check=check)
    bench.time(case, "analytic jac", REFERENCE, lambda: lambda: jac(0.0, y0), size=states,
               check=check)

    def solve(jac_fn):
        sol = solve_ivp(f, span, y0, method="BDF", jac=jac_fn, rtol=RTOL, atol=ATOL)
        if not sol.success:
            raise RuntimeError(sol.message)
        return sol

    ref = solve(jac).y[:, -1]

    def solve_check(sol):
        return {"njev": str(sol.njev), "nfev": str(sol.nfev),
                "final diff": f"{float(np.max(np.abs(sol.y[:, -1] - ref))):.1e}"}

    bench.time_interleaved(
        f"solve_ivp BDF t<={span[1]:g}, {states} states",
        [
            ("hand-written jac", BASELINE, lambda: lambda: solve(jac), None),
            ("jac=None (scipy FD)", REFERENCE, lambda: lambda: solve(None), None),
            ("jac=ad.ode_jacobian(f)", DUALAD,
             lambda: (lambda j: lambda: solve(j))(require_dualad().ode_jacobian(f)), None),
            ("jac=ad.jit(ad.ode_jacobian(f))", DUALAD,
             lambda: (lambda j: lambda: solve(j))(jit(require_dualad().ode_jacobian(f))), None),
        ],
        repeat=2 if quick else 3,
        size=states,
        check=solve_check,
    )
    return bench.rows
