"""Stiff ODEs with scipy's BDF: finite-difference vs dualad vs analytic Jacobians."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, jit, require, require_dualad

TITLE = "scipy.integrate.solve_ivp(method='BDF'): Jacobian sources"
XLABEL = "states"
DESCRIPTION = """
Whole solve_ivp(method="BDF") wall time (the methods take turns, one solve each per
round, so load from other processes falls on all of them alike) on the Robertson problem (3 states, t in
[0, 1e5]) and the 1-D Brusselator (Hairer & Wanner: A = 1, B = 3, alpha = 1/50,
Dirichlet ends; 200 grid points x 2 species = 400 states, t in [0, 10]), with
jac=None (scipy's finite differences), jac=ad.ode_jacobian(f),
jac=ad.jit(ad.ode_jacobian(f)) (compiled during the untimed first solve, as jax.jit is;
fallback="error": where the call does not compile, the row says ad.jit falls back and
why), jax.jit(jacfwd) and the analytic Jacobian (baseline). nfev/njev/nlu are from the solver (its nfev leaves out
the calls made for finite-difference Jacobians; f calls counts every call of f by the
solver); final diff is
max |y(T) - y_analytic(T)|.
"""

RTOL, ATOL = 1e-6, 1e-10


def robertson(t, y, xp=np):
    """Robertson's chemical kinetics."""
    r1 = 0.04 * y[0]
    r2 = 1e4 * y[1] * y[2]
    r3 = 3e7 * y[1] * y[1]
    return xp.stack([r2 - r1, r1 - r2 - r3, r3])


def robertson_jac(t, y):
    """Analytic Jacobian of robertson."""
    return np.array(
        [
            [-0.04, 1e4 * y[2], 1e4 * y[1]],
            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
            [0.0, 6e7 * y[1], 0.0],
        ]
    )


def make_brusselator(n, xp=np):
    """1-D Brusselator with n grid points: (f, analytic jac, y0)."""
    a, b = 1.0, 3.0
    c = (n + 1) ** 2 / 50.0
    one, three = np.ones(1), 3.0 * np.ones(1)

    def f(t, y):
        u, v = y[:n], y[n:]
        lap_u = xp.concatenate([one, u[:-1]]) - 2 * u + xp.concatenate([u[1:], one])
        lap_v = xp.concatenate([three, v[:-1]]) - 2 * v + xp.concatenate([v[1:], three])
        uuv = u * u * v
        return xp.concatenate([a + uuv - (b + 1) * u + c * lap_u, b * u - uuv + c * lap_v])

    tri = c * (np.eye(n, k=1) + np.eye(n, k=-1) - 2 * np.eye(n))

    def jac(t, y):
        u, v = y[:n], y[n:]
        out = np.empty((2 * n, 2 * n))
        out[:n, :n] = tri + np.diag(2 * u * v - (b + 1))
        out[:n, n:] = np.diag(u * u)
        out[n:, :n] = np.diag(b - 2 * u * v)
        out[n:, n:] = tri - np.diag(u * u)
        return out

    x = np.arange(1, n + 1) / (n + 1)
    y0 = np.concatenate([1 + np.sin(2 * np.pi * x), 3.0 * np.ones(n)])
    return f, jac, y0


def problems(quick):
    """(case, states, f(xp), analytic jac, y0, t_span)."""
    grid = 50 if quick else 200
    bf, bjac, by0 = make_brusselator(grid)
    return [
        (
            "Robertson (3 states)",
            3,
            lambda xp: lambda t, y: robertson(t, y, xp),
            robertson_jac,
            np.array([1.0, 0.0, 0.0]),
            (0.0, 1e5),
        ),
        (
            f"Brusselator 1-D ({2 * grid} states)",
            2 * grid,
            lambda xp: bf if xp is np else make_brusselator(grid, xp)[0],
            bjac,
            by0,
            (0.0, 10.0),
        ),
    ]


def _bind(solve, jac):
    return lambda: solve(jac)


def run(quick: bool = False):
    """Rows for both problems and each Jacobian source."""
    from scipy.integrate import solve_ivp

    bench = Bench("stiff_ode")
    for case, states, fxp, ajac, y0, span in problems(quick):
        f = fxp(np)

        def solve(jac, f=f, y0=y0, span=span):
            calls = [0]

            def counted(t, y):
                calls[0] += 1
                return f(t, y)

            sol = solve_ivp(counted, span, y0, method="BDF", jac=jac, rtol=RTOL, atol=ATOL)
            if not sol.success:
                raise RuntimeError(sol.message)
            sol.fcalls = calls[0]
            return sol

        ref = solve(ajac).y[:, -1]

        def check(sol, ref=ref):
            return {
                "nfev": str(sol.nfev),
                "f calls": str(sol.fcalls),
                "njev": str(sol.njev),
                "nlu": str(sol.nlu),
                "final diff": f"{float(np.max(np.abs(sol.y[:, -1] - ref))):.1e}",
            }

        def dualad_jac(f=f):
            return require_dualad().ode_jacobian(f)

        def dualad_jit(f=f):
            return jit(require_dualad().ode_jacobian(f))

        def jax_jac(fxp=fxp):
            jax = require("jax")
            jj = jax.jit(jax.jacfwd(fxp(jax.numpy), argnums=1))
            return lambda t, y: np.asarray(jj(t, y))

        methods = [
            ("analytic jac", BASELINE, lambda ajac=ajac: ajac, None),
            ("jac=None (scipy FD)", REFERENCE, lambda: None, None),
            ("dualad ode_jacobian", DUALAD, dualad_jac, None),
            ("ad.jit(ode_jacobian)", DUALAD, dualad_jit, None),
            ("jax.jit(jacfwd)", PEER, jax_jac, "jax"),
        ]
        bench.time_interleaved(
            case,
            [
                (m, k, lambda jac=jac, solve=solve: _bind(solve, jac()), p)
                for m, k, jac, p in methods
            ],
            repeat=2 if quick else 5,
            size=states,
            check=check,
        )
    return bench.rows
