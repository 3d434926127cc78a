"""Sparsity detection: loop-style and vectorised right-hand sides."""

from __future__ import annotations

import numpy as np

from .brusselator2d import make_rhs
from .common import BASELINE, DUALAD, Bench, require_dualad

TITLE = "Sparsity detection of loop-style and vectorised right-hand sides"
XLABEL = "states"
DESCRIPTION = """
Time of `ad.jacobian_sparsity(f)(y)` from scratch (a new transform each call), against
one plain evaluation `f(y)` (the baseline). Loop-style: the 1-D Brusselator written as a
Python loop over grid points that reads and writes single entries (400 states), which
takes the tracer's scalar path (entries' sets as tuples of ints, Python arithmetic on
them, writes merged into the rows in one step). Vectorised: the 2-D Brusselator of
brusselator2d.py (np.roll Laplacian) at N = 32 (2048 states). Lorenz-96 as an @njit loop
(n = 1000) is detected through its Python source.
"""


def brusselator_loop(y):
    """1-D Brusselator with Dirichlet ends, one grid point at a time."""
    n = y.shape[0] // 2
    out = np.empty_like(y)
    c = 0.02 * (n + 1.0) ** 2
    for i in range(n):
        u = y[2 * i]
        v = y[2 * i + 1]
        ul = y[2 * i - 2] if i > 0 else 1.0
        ur = y[2 * i + 2] if i < n - 1 else 1.0
        vl = y[2 * i - 1] if i > 0 else 3.0
        vr = y[2 * i + 3] if i < n - 1 else 3.0
        out[2 * i] = 1.0 + u * u * v - 4.0 * u + c * (ul - 2.0 * u + ur)
        out[2 * i + 1] = 3.0 * u - u * u * v + c * (vl - 2.0 * v + vr)
    return out


def run(quick: bool = False):
    """Loop-style 1-D Brusselator (400 states), 2-D Brusselator N = 32, njit Lorenz-96."""
    ad = require_dualad()
    bench = Bench("sparse_detection")
    cases = []
    y1 = np.concatenate([np.ones(200), 3 * np.ones(200)]).reshape(2, 200).T.reshape(-1)
    cases.append(("1-D Brusselator loop (400 states)", brusselator_loop, y1, 400))
    f2 = make_rhs(32)
    y2 = np.concatenate([np.ones(32 * 32), 3 * np.ones(32 * 32)])
    cases.append(("2-D Brusselator N=32 vectorised (2048 states)", f2, y2, 2048))
    try:
        import numba

        @numba.njit(cache=False)
        def lorenz96(x):
            n = x.shape[0]
            out = np.empty_like(x)
            for i in range(n):
                out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8.0
            return out

        x = np.random.default_rng(1).standard_normal(1000) + 8.0
        lorenz96(x)
        cases.append(("Lorenz-96 @njit loop (1000 states)", lorenz96, x, 1000))
    except ImportError:
        pass
    for case, f, y, states in cases:
        nnz = ad.jacobian_sparsity(f)(y).nnz
        extra = {"nnz": str(nnz)}
        bench.time(case, "f(y), one evaluation", BASELINE, lambda f=f, y=y: lambda: f(y),
                   size=states, extra=extra)
        bench.time(case, "dualad jacobian_sparsity(f)(y)", DUALAD,
                   lambda f=f, y=y: lambda: ad.jacobian_sparsity(f)(y), size=states,
                   extra=extra, repeat=5 if not quick else 3)
    return bench.rows
