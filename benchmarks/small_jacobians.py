"""Fixed costs of forward mode: one dense Jacobian of a small right-hand side, in alternation
with the hand-written Jacobian and scipy's finite differences."""

from __future__ import annotations

import statistics

import numpy as np

from .common import BASELINE, DUALAD, REFERENCE, Row, require_dualad, short_error
from .lorenz96 import analytic as lorenz96_jacobian
from .lorenz96 import lorenz96
from .timing import Timing, _loop, pick_number

TITLE = "fixed costs of forward mode: dense Jacobians of small right-hand sides"
XLABEL = "states"
DESCRIPTION = """
One dense Jacobian of a small right-hand side at a perturbed initial state: the public stiff
test set as packages write it (benchmarks/stiff_problems.py: tuple unpacking and
np.array([...]) of scalars, np.empty / np.zeros buffers filled entry by entry), and
Lorenz-96 at n = 10 (np.roll). Baseline: the
Jacobian written by hand. dualad: ad.ode_jacobian(f) (forward mode; Lorenz-96:
ad.jacobian(f) with mode="auto", which remembers its choice per argument signature after
one trial call). References: scipy's 2-point finite differences (approx_derivative), and
for Lorenz-96 one plain call of f. The methods of one problem are timed in alternation, 41
rounds of a few ms each (quick: 7), so load from other processes falls on all alike;
median over rounds. "target" is issue 24's: Robertson at most 20 µs and at most finite
differences; Lorenz-96 n = 10 at most 8 µs.
"""


def _fd(rhs, y):
    from scipy.optimize._numdiff import approx_derivative

    return lambda: approx_derivative(lambda v: rhs(0.0, v), y, method="2-point")


def _problems():
    """(case, states, rhs(t, y), hand-written jac(t, y), point)."""
    from .stiff_problems import PROBLEMS

    rng = np.random.default_rng(7)
    out = []
    for p in PROBLEMS:
        if p.n > 30:
            continue
        y = p.y0 * (1.0 + 0.05 * rng.random(p.n)) + 1e-3 * rng.random(p.n)
        out.append((p.name, p.n, p.rhs, p.jac, y))
    return out


def _target(case, dualad_us, fd_us):
    if case.startswith("Robertson"):
        met = dualad_us <= 20.0 and (fd_us is None or dualad_us <= fd_us)
        return ("met" if met else "missed") + " (<= 20 µs, <= FD)"
    if case.startswith("Lorenz-96"):
        return ("met" if dualad_us <= 8.0 else "missed") + " (<= 8 µs)"
    return ""


def _timing(samples, number):
    return Timing(statistics.median(samples), min(samples), max(samples), number,
                  len(samples), tuple(samples))


def _alternate(bench_name, case, size, methods, rounds, add):
    """Time ``methods`` ((method, kind, fn)) in alternation and add their rows."""
    rows, live = [], []
    for method, kind, make in methods:
        row = Row(bench_name, case, method, kind, size=size)
        rows.append(row)
        try:
            fn = make()
            fn()
            live.append((row, fn, max(1, pick_number(fn, 0.002)), []))
        except Exception as exc:  # one method failing must not stop the run
            row.error = short_error(exc)
    for _ in range(rounds):
        for _row, fn, number, samples in live:
            samples.append(_loop(fn, number) / number * 1e6)
    for row, _fn, number, samples in live:
        row.times = _timing(samples, number)
    medians = {row.method: row.times.median for row in rows if row.times}
    fd = medians.get("scipy FD (2-point)")
    for row in rows:
        if row.kind == DUALAD and row.times:
            target = _target(case, row.times.median, fd)
            if target:
                row.extra["target"] = target
        add(row)


def run(quick: bool = False):
    """Rows for each small problem, then Lorenz-96 at n = 10."""
    from .common import Bench

    bench = Bench("small_jacobians")
    rounds = 7 if quick else 41
    ad = require_dualad()
    for case, n, rhs, jac, y in _problems():
        methods = [
            ("hand-written jac", BASELINE, lambda jac=jac, y=y: lambda: jac(0.0, y)),
            ("dualad ode_jacobian", DUALAD,
             lambda rhs=rhs, y=y: (lambda j: lambda: j(0.0, y))(ad.ode_jacobian(rhs))),
            ("scipy FD (2-point)", REFERENCE, lambda rhs=rhs, y=y: _fd(rhs, y)),
        ]
        _alternate(bench.name, case, n, methods, rounds, bench.add)
    x = np.random.default_rng(1).standard_normal(10) + 8.0
    methods = [
        ("analytic numpy", BASELINE, lambda: lambda: lorenz96_jacobian(x)),
        ("dualad jacobian (auto)", DUALAD,
         lambda: (lambda j: lambda: j(x))(ad.jacobian(lorenz96))),
        ("dualad jacobian forward", DUALAD,
         lambda: (lambda j: lambda: j(x))(ad.jacobian(lorenz96, mode="forward"))),
        ("plain f (one call)", REFERENCE, lambda: lambda: lorenz96(x)),
    ]
    _alternate(bench.name, "Lorenz-96 n=10", 10, methods, rounds, bench.add)
    return bench.rows
