"""The benchmark harness's ad.jit rows: a call that compiles is timed; one that does not
compile says that ad.jit falls back, and why, instead of a time (and never times the
Python replay under the name ad.jit); other failures stay errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dualad as ad

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import common, report, timing  # noqa: E402
from benchmarks.common import BASELINE, DUALAD, Bench, jit  # noqa: E402


@pytest.fixture(autouse=True)
def quick_timing(tmp_path, monkeypatch):
    """Short timings, and generated modules in a directory of the test's own."""
    monkeypatch.setenv("DUALAD_KERNEL_CACHE", str(tmp_path))
    saved = dict(timing.SETTINGS)
    timing.configure(repeat=2, warmup=1, target=0.0005, budget=0.05, min_repeat=1)
    yield
    timing.SETTINGS.update(saved)


def eigh_energy(u):
    """A call with two results (eigh): ad.jit does not compile it (it falls back)."""
    return np.sum(np.linalg.eigh(np.outer(u, u) + np.eye(u.size))[0] * u) + np.sum(u ** 4)


def real_energy(u):
    return np.sum(np.sin(u) ** 2) + np.sum(u ** 4)


def _rows(x):
    bench = Bench("demo")
    bench.time("n=8", "numpy", BASELINE, lambda: lambda: np.cos(x), size=8)
    compiled = bench.time("n=8", "ad.jit(grad) real", DUALAD,
                          lambda: (lambda g: lambda: g(x))(jit(ad.grad(real_energy))), size=8,
                          check=common.max_abs_err(ad.grad(real_energy)(x)))
    falling_row = bench.time("n=8", "ad.jit(grad)", DUALAD,
                             lambda: (lambda g: lambda: g(x))(jit(ad.grad(eigh_energy))),
                             size=8)
    return bench, compiled, falling_row


def test_a_non_compiling_jit_row_says_it_falls_back_and_why():
    x = np.linspace(0.1, 0.8, 8)
    # the eager transform itself works: only compilation is missing
    assert np.all(np.isfinite(ad.grad(eigh_energy)(x)))
    bench, compiled, row = _rows(x)
    assert row.times is None
    assert row.error.startswith("ad.jit falls back: ")
    assert "cannot compile" in row.error and "several values" in row.error
    assert "fallback='warn'" not in row.error  # the advice to the caller is left out
    assert common.falls_back(row) and not common.falls_back(compiled)
    # a call that compiles in the same benchmark is timed and checked
    assert compiled.times is not None and compiled.times.median > 0
    assert float(compiled.extra["max abs err"]) < 1e-12

    text = report.summary(bench.rows)
    assert "ad.jit rows not compiled (1)" in text
    assert "demo n=8/ad.jit(grad): ad.jit(" in text
    assert "1 measured, 0 errored or skipped" in text  # not counted as an error
    table = "\n".join(report.table(bench.rows, report.baselines(bench.rows)))
    line = next(ln for ln in table.splitlines() if "| ad.jit(grad) |" in ln)
    assert "ad.jit falls back: " in line and "µs" not in line
    # the who-wins table compares timed rows only: the fallback row is in no verdict
    assert all("ad.jit(grad) |" not in ln for ln in report.who_wins(bench.rows))


def test_interleaved_rows_report_a_fallback_too():
    x = np.linspace(0.1, 0.8, 8)
    bench = Bench("demo")
    rows = bench.time_interleaved(
        "n=8",
        [("numpy", BASELINE, lambda: lambda: np.cos(x), None),
         ("ad.jit(grad)", DUALAD, lambda: (lambda g: lambda: g(x))(
             jit(ad.grad(eigh_energy))), None)],
        repeat=2)
    assert rows[0].times is not None
    assert rows[1].times is None and rows[1].error.startswith("ad.jit falls back: ")


def test_a_jit_error_while_timing_and_other_errors():
    calls = [0]

    def later_fails():
        calls[0] += 1
        if calls[0] > 2:
            raise ad.JitError("ad.jit(f): cannot compile np.thing; it runs as the tape's "
                              "Python replay instead. Pass fallback='warn' to accept that.\n"
                              "more detail")
        return 1.0

    def broken():
        raise ValueError("shapes (3,) and (4,) differ")

    bench = Bench("demo")
    row = bench.time("c", "ad.jit(f)", DUALAD, lambda: later_fails)
    assert row.times is None
    assert row.error == ("ad.jit falls back: ad.jit(f): cannot compile np.thing; it runs as "
                         "the tape's Python replay instead.")
    other = bench.time("c", "eager", DUALAD, lambda: broken)
    assert other.error.startswith("error: ValueError: shapes (3,)")
    assert not common.falls_back(other)
    skipped = bench.time("c", "peer", DUALAD, lambda: (_ for _ in ()).throw(common.Skip("no")))
    assert skipped.error == "skipped: no"
