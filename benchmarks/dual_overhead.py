"""Per-operation cost of forward mode: one Dual operation against the numpy work it does."""

from __future__ import annotations

import statistics

import numpy as np

from .common import BASELINE, DUALAD, Bench, Row, require_dualad, short_error
from .timing import Timing, _loop, pick_number

TITLE = "per-op overhead of a Dual (forward mode) against the same numpy work by hand"
XLABEL = "n = k (values = directions)"
DESCRIPTION = """
One operation on Duals holding n values with k = n directions (value shape (n,), partials
(n, k)), against the numpy calls a hand-written dual number does for it on the value and
the partials: `x * y` (v*w, p*w[:,None] + q*v[:,None]), `np.sin(x)` (sin, cos, p*c[:,None]),
`x[1:]` (two slices), `out[1:] = y` (two slice assignments), `np.roll(x, 1)` (np.roll of
both), `np.sum(x)` (v.sum(), p.sum(axis=0)), and `np.sqrt(x)` where x[0] = 0 (sqrt, its
infinite derivative there, and the NaN-safe product: zero partials stay zero, np.where by
hand). Baseline: that numpy work. The column
"over numpy" is the median over rounds of (dualad - numpy) time: the two are timed in
alternation, 41 rounds of a few ms each, so load from other processes falls on both alike;
"over numpy (min)" compares the fastest rounds. The target is at most 1 µs.
"""

CASES = ("x * y", "np.sin(x)", "x[1:]", "out[1:] = y", "np.roll(x, 1)", "np.sum(x)",
         "np.sqrt(x), x[0] = 0")


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
    if case == "np.sqrt(x), x[0] = 0":
        z = _with_zero(v)
        pz = p.copy()
        pz[0, 1:] = 0.0  # x[0] moves along the first direction only

        def sqrt():  # a NaN-safe dual number by hand
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.sqrt(z)
                d = (0.5 / s)[:, None]
                return s, np.where(pz != 0, pz * d, 0.0)
        return sqrt
    raise ValueError(case)


def _with_zero(v):
    """``|v|`` with a zero first entry (sqrt's derivative is infinite there)."""
    z = np.abs(v)
    z[0] = 0.0
    return z


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
    if case == "np.sqrt(x), x[0] = 0":
        xz = type(x)(_with_zero(x.value), x.partials.copy())
        xz.partials[0, 1:] = 0.0  # x[0] moves along the first direction only
        return lambda: np.sqrt(xz)
    raise ValueError(case)


def _interleaved(fa, fb, rounds, number):
    """Per-call µs of ``fa`` and ``fb``, timed in alternation (load falls on both alike)."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(_loop(fa, number) / number * 1e6)
        tb.append(_loop(fb, number) / number * 1e6)
    return ta, tb


def _timing(samples, number):
    return Timing(statistics.median(samples), min(samples), max(samples), number,
                  len(samples), tuple(samples))


def _case_rows(bench, n, rng, rounds):
    v, w, ov = rng.standard_normal((3, n))
    p, q, op = rng.standard_normal((3, n, n))
    ad = require_dualad()
    x, y = ad.Dual(v.copy(), p.copy()), ad.Dual(w.copy(), q.copy())
    out = ad.Dual(ov.copy(), op.copy())
    ys = y[1:]
    for case in CASES:
        label = f"n=k={n} {case}"
        base = Row(bench.name, label, "numpy work", BASELINE, size=n)
        row = Row(bench.name, label, "dualad Dual", DUALAD, size=n, series=case)
        try:
            fa = numpy_work(case, v, p, w, q, ov.copy(), op.copy())
            fb = dual_op(case, x, y, out, ys)
            fa(), fb()
            number = max(1, pick_number(fb, 0.002))
            ta, tb = _interleaved(fa, fb, rounds, number)
            base.times, row.times = _timing(ta, number), _timing(tb, number)
            over = statistics.median(b - a for a, b in zip(ta, tb))
            row.extra["over numpy"] = f"{over:+.2f} µs"
            row.extra["over numpy (min)"] = f"{min(tb) - min(ta):+.2f} µs"
        except Exception as exc:  # one case failing must not stop the run
            row.error = short_error(exc)
        bench.add(base)
        bench.add(row)


def run(quick: bool = False):
    """Rows for n = k = 10 and 100."""
    bench = Bench("dual_overhead")
    rng = np.random.default_rng(0)
    for n in (10, 100):
        _case_rows(bench, n, rng, rounds=7 if quick else 41)
    return bench.rows
