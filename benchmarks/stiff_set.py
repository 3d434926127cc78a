"""The public stiff test set: one Jacobian, and whole solve_ivp solves (BDF, Radau)."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, require, require_dualad
from .stiff_problems import PROBLEMS

TITLE = "public stiff test set (Hairer & Wanner, Bari IVP test set): Jacobians and solve_ivp"
XLABEL = "states"
DESCRIPTION = """
Robertson, OREGO, HIRES, POLLU, E5 (t in [0, 1e5]), Van der Pol (mu = 1e3), the 1-D
Brusselator reaction-diffusion PDE (100 points, 200 states, banded) and the 2-D
Brusselator (16 x 16 periodic grid, 512 states), written from their published definitions
the way packages write them (np.zeros(n) filled entry by entry, np.empty with strided
writes, np.array([...]) of scalars; see benchmarks/stiff_problems.py), unchanged for
dualad. Baseline: the Jacobian written by hand (scipy.sparse for the two PDEs). "jac"
rows time one Jacobian at a perturbed initial state: dualad eager (ad.ode_jacobian(f)),
sparse (sparse=True), compiled (ad.ode_jacobian(numba.njit(f)): the same source under
numba; ad.jit(ad.ode_jacobian(f)) when dualad has ad.jit), jax.jit(jacfwd) of the jnp form,
scipy's finite differences (approx_derivative, 2-point). "solve" rows time whole
solve_ivp runs (methods take turns, one solve each per round), with njev, nfev and the
max relative error of y(T) against a Radau solve at rtol = 1e-9 (atol / 100) with the
hand-written Jacobian. dualad's row for a solve is the one the issue targets: uncompiled where the
problem has 100 states or more, compiled below.
"""

COMPILED_BELOW = 100
REFERENCE_RTOL = 1e-9


def _dense(j):
    return j.toarray() if hasattr(j, "toarray") else np.asarray(j)


def _point(problem):
    rng = np.random.default_rng(7)
    return problem.y0 * (1.0 + 0.05 * rng.random(problem.n)) + 1e-3 * rng.random(problem.n)


def _compiled(problem):
    ad = require_dualad()
    if hasattr(ad, "jit"):
        return ad.jit(ad.ode_jacobian(problem.rhs))
    import numba

    return ad.ode_jacobian(numba.njit(problem.njit_source))


def _jax(problem):
    jax = require("jax")
    jj = jax.jit(jax.jacfwd(problem.rhs_xp(jax.numpy), argnums=1))
    return lambda t, y: np.asarray(jj(t, y))


def _fd(problem):
    from scipy.optimize._numdiff import approx_derivative

    return lambda t, y: approx_derivative(lambda v: problem.rhs(t, v), y, method="2-point")


def jacobian_sources(problem):
    """(method, kind, make jac, peer) for one problem."""
    ad = require_dualad
    rows = [
        ("hand-written jac", BASELINE, lambda: problem.jac, None),
        ("dualad ode_jacobian (eager)", DUALAD, lambda: ad().ode_jacobian(problem.rhs), None),
        ("dualad sparse=True", DUALAD,
         lambda: ad().ode_jacobian(problem.rhs, sparse=True), None),
        ("dualad compiled", DUALAD, lambda: _compiled(problem), None),
        ("jax.jit(jacfwd)", PEER, lambda: _jax(problem), "jax"),
        ("scipy FD (2-point)", REFERENCE, lambda: _fd(problem), None),
    ]
    return rows


def _time_jacobians(bench, problem, quick):
    y = _point(problem)
    hand = _dense(problem.jac(0.0, y))
    scale = max(1.0, float(np.max(np.abs(hand))))

    def check(result):
        return {"max rel err": f"{float(np.max(np.abs(_dense(result) - hand))) / scale:.1e}"}

    def at_y(make):
        def build():
            jac = make()
            return lambda: jac(0.0, y)
        return build

    for method, kind, make, peer_name in jacobian_sources(problem):
        bench.time(f"{problem.name}: jac", method, kind, at_y(make),
                   size=problem.n, check=check, peer_name=peer_name,
                   repeat=3 if quick else 7)


def _solve(problem, method, jac, rtol=None, atol=None):
    from scipy.integrate import solve_ivp

    sol = solve_ivp(problem.rhs, problem.t_span, problem.y0, method=method, jac=jac,
                    rtol=problem.rtol if rtol is None else rtol,
                    atol=problem.atol if atol is None else atol)
    if not sol.success:
        raise RuntimeError(sol.message)
    return sol


def _time_solves(bench, problem, method, quick, reference):
    scale = np.maximum(np.abs(reference), problem.atol / problem.rtol)

    def check(sol):
        err = float(np.max(np.abs(sol.y[:, -1] - reference) / scale))
        return {"njev": str(sol.njev), "nfev": str(sol.nfev), "nlu": str(sol.nlu),
                "max rel err": f"{err:.1e}"}

    ad = require_dualad
    if problem.n >= COMPILED_BELOW:
        target = ("dualad sparse=True" if problem.sparse else "dualad ode_jacobian (eager)")
        dualad = [(target, DUALAD, (lambda: ad().ode_jacobian(problem.rhs, sparse=True))
                   if problem.sparse else (lambda: ad().ode_jacobian(problem.rhs)), None)]
    else:
        dualad = [("dualad compiled", DUALAD, lambda: _compiled(problem), None),
                  ("dualad ode_jacobian (eager)", DUALAD,
                   lambda: ad().ode_jacobian(problem.rhs), None)]
    methods = [("hand-written jac", BASELINE, lambda: problem.jac, None), *dualad,
               ("jac=None (scipy FD)", REFERENCE, lambda: None, None)]

    def bind(make):
        def build():
            jac = make()
            if jac is not None:
                jac(0.0, problem.y0)  # compile / detect the pattern before the timed solves
            return lambda: _solve(problem, method, jac)
        return build

    bench.time_interleaved(f"{problem.name}: solve {method}",
                           [(m, k, bind(make), p) for m, k, make, p in methods],
                           repeat=1 if quick else 3, size=problem.n, check=check)


def run(quick: bool = False):
    """Rows for every problem: one Jacobian per source, then BDF and Radau solves."""
    bench = Bench("stiff_set")
    for problem in PROBLEMS:
        _time_jacobians(bench, problem, quick)
        reference = _solve(problem, "Radau", problem.jac, rtol=REFERENCE_RTOL,
                           atol=problem.atol * 1e-2).y[:, -1]
        for method in (("BDF",) if quick else ("BDF", "Radau")):
            _time_solves(bench, problem, method, quick, reference)
    return bench.rows
