"""Fixed costs of forward mode: one dense Jacobian of a small right-hand side, in alternation
with the hand-written Jacobian and scipy's finite differences."""

from __future__ import annotations

import statistics

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    REFERENCE,
    Row,
    jit,
    max_abs_err,
    require_dualad,
    row_error,
)
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
for Lorenz-96 one plain call of f. ad.jit rows: ad.jit(ad.ode_jacobian(f)) (Lorenz-96:
ad.jit(ad.jacobian(f))), compiled at the untimed first call (fallback="error": where a
call does not compile, the row says ad.jit falls back and why). The methods of one problem
are timed in alternation, 41 rounds of a few ms each (quick: 7), so load from other
processes falls on all alike; median over rounds. max abs err is against the hand-written
Jacobian. "target" is issue 24's, for the eager rows: Robertson at most 20 µs and at most
finite differences; Lorenz-96 n = 10 at most 8 µs.
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


def _alternate(bench_name, case, size, methods, rounds, add, check=None):
    """Time ``methods`` ((method, kind, fn)) in alternation and add their rows;
    ``check(result)`` gives extra columns (the error against the hand-written Jacobian)."""
    rows, live = [], []
    for method, kind, make in methods:
        row = Row(bench_name, case, method, kind, size=size)
        rows.append(row)
        try:
            fn = make()
            result = fn()
            if check is not None and kind != BASELINE:
                row.extra.update(check(result))
            live.append((row, fn, max(1, pick_number(fn, 0.002)), []))
        except Exception as exc:  # one method failing must not stop the run
            row.error = row_error(exc)
    for _ in range(rounds):
        for row, fn, number, samples in live:
            if row.error is None:
                try:
                    samples.append(_loop(fn, number) / number * 1e6)
                except Exception as exc:  # e.g. ad.JitError where a new recording
                    row.error = row_error(exc)  # does not compile
    for row, _fn, number, samples in live:
        if row.error is None:
            row.times = _timing(samples, number)
    medians = {row.method: row.times.median for row in rows if row.times}
    fd = medians.get("scipy FD (2-point)")
    for row in rows:
        if row.kind == DUALAD and row.times and not row.method.startswith("ad.jit"):
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
            ("ad.jit(ode_jacobian)", DUALAD,
             lambda rhs=rhs, y=y: (lambda j: lambda: j(0.0, y))(jit(ad.ode_jacobian(rhs)))),
            ("scipy FD (2-point)", REFERENCE, lambda rhs=rhs, y=y: _fd(rhs, y)),
        ]
        _alternate(bench.name, case, n, methods, rounds, bench.add,
                   check=max_abs_err(jac(0.0, y)))
    x = np.random.default_rng(1).standard_normal(10) + 8.0
    methods = [
        ("analytic numpy", BASELINE, lambda: lambda: lorenz96_jacobian(x)),
        ("dualad jacobian (auto)", DUALAD,
         lambda: (lambda j: lambda: j(x))(ad.jacobian(lorenz96))),
        ("dualad jacobian forward", DUALAD,
         lambda: (lambda j: lambda: j(x))(ad.jacobian(lorenz96, mode="forward"))),
        ("ad.jit(jacobian)", DUALAD, lambda: (lambda j: lambda: j(x))(jit(ad.jacobian(lorenz96)))),
        ("plain f (one call)", REFERENCE, lambda: lambda: lorenz96(x)),
    ]
    jac = lorenz96_jacobian(x)
    _alternate(bench.name, "Lorenz-96 n=10", 10, methods, rounds, bench.add,
               check=lambda r: max_abs_err(jac)(r) if np.shape(r) == jac.shape else {})
    return bench.rows
