"""Per-operation cost of forward mode: one Dual operation against the numpy work it does."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, Bench, require_dualad

TITLE = "per-op overhead of a Dual (forward mode) against the same numpy work by hand"
XLABEL = "n = k (values = directions)"
DESCRIPTION = """
One operation on Duals holding n values with k = n directions (value shape (n,), partials
(n, k)), against the numpy calls a hand-written dual number does for it on the value and
the partials: `x * y` (v*w, p*w[:,None] + q*v[:,None]), `np.sin(x)` (sin, cos, p*c[:,None]),
`x[1:]` (two slices), `out[1:] = y` (two slice assignments), `np.roll(x, 1)` (np.roll of
both), `np.sum(x)` (v.sum(), p.sum(axis=0)). Baseline: that numpy work. The column
"over numpy" is the dualad time minus the numpy time (the target is at most 1 µs).
"""

TIMING = {"repeat": 25, "target": 0.004, "budget": 0.6}
CASES = ("x * y", "np.sin(x)", "x[1:]", "out[1:] = y", "np.roll(x, 1)", "np.sum(x)")


def numpy_work(case, v, p, w, q, ov, op):
    """The zero-argument callable doing ``case``'s numpy work on values and partials."""
    if case == "x * y":
        return lambda: (v * w, p * w[:, None] + q * v[:, None])
    if case == "np.sin(x)":
        def sin():
            s = np.sin(v)
            return s, p * np.cos(v)[:, None]
        return sin
    if case == "x[1:]":
        return lambda: (v[1:], p[1:])
    if case == "out[1:] = y":
        vs, ps = w[1:], q[1:]

        def write():
            ov[1:] = vs
            op[1:] = ps
        return write
    if case == "np.roll(x, 1)":
        return lambda: (np.roll(v, 1), np.roll(p, 1, axis=0))
    if case == "np.sum(x)":
        return lambda: (v.sum(), p.sum(axis=0))
    raise ValueError(case)


def dual_op(case, x, y, out, ys):
    """The zero-argument callable doing ``case`` on Duals."""
    if case == "x * y":
        return lambda: x * y
    if case == "np.sin(x)":
        return lambda: np.sin(x)
    if case == "x[1:]":
        return lambda: x[1:]
    if case == "out[1:] = y":
        def write():
            out[1:] = ys
        return write
    if case == "np.roll(x, 1)":
        return lambda: np.roll(x, 1)
    if case == "np.sum(x)":
        return lambda: np.sum(x)
    raise ValueError(case)


def _case_rows(bench, n, rng):
    v, w, ov = rng.standard_normal((3, n))
    p, q, op = rng.standard_normal((3, n, n))

    def make_dual():
        ad = require_dualad()
        x, y = ad.Dual(v.copy(), p.copy()), ad.Dual(w.copy(), q.copy())
        out = ad.Dual(ov.copy(), op.copy())
        return x, y, out, y[1:]

    for case in CASES:
        label = f"n=k={n} {case}"
        # many short repeats: a median that load from other processes moves less
        base = bench.time(label, "numpy work", BASELINE,
                          lambda case=case: numpy_work(case, v, p, w, q, ov.copy(), op.copy()),
                          size=n, **TIMING)
        row = bench.time(label, "dualad Dual", DUALAD,
                         lambda case=case: dual_op(case, *make_dual()), size=n, series=case,
                         **TIMING)
        if row.times is not None and base.times is not None:
            row.extra["over numpy"] = f"{row.times.median - base.times.median:+.2f} µs"


def run(quick: bool = False):
    """Rows for n = k = 10 and 100."""
    bench = Bench("dual_overhead")
    rng = np.random.default_rng(0)
    for n in (10, 100):
        _case_rows(bench, n, rng)
    return bench.rows
