"""Recorded tapes (ad.record) replayed at new points, against eager dualad and by hand."""

from __future__ import annotations

import statistics
import time

import numpy as np

from . import mlp, op_chain, tr_matmul
from .common import (
    BASELINE,
    DUALAD,
    Bench,
    Row,
    max_abs_err,
    peer,
    require_dualad,
    row_error,
    to_numpy,
)
from .timing import Timing, pick_number

TITLE = "record once, replay: tape gradients against eager ad.grad and hand-written numpy"
DESCRIPTION = """
The same three problems as op_chain, tr_matmul and mlp. "dualad replayed grad" records the
function once with ad.record (not timed) and times tape.grad at the point, "dualad record"
times ad.record itself (one traced run plus building the replay program; its "vs eager"
column divides by the eager grad row of the same case), "dualad eager grad" is ad.grad,
"ad.jit(grad)" is ad.jit(ad.grad(f)) (compiled at the untimed first call, as jax.jit is;
where the call does not compile, the row says ad.jit falls back and why).
The chain rows are per operation (the call divided by n = 100), against plain numpy
evaluation of the chain (forward only); tr(x1 @ x2) at 30 x 30 and the MLP loss at
64 x 32 are against the backward pass written by hand. jax.jit and torch rows come from
the op_chain, tr_matmul and mlp benchmarks' own makers (skipped when not installed).
"""


def _record():
    require_dualad()
    from dualad.tape import record

    return record


def _chain_methods(n, x0):
    f = lambda x: op_chain.chain(x, np.sin, n)  # noqa: E731

    def replayed():
        tape = _record()(f, x0 + 0.1)
        return lambda: tape.grad(x0)

    def recording():
        record = _record()
        return lambda: record(f, x0)

    named = {m[0]: m for m in op_chain.methods(n, x0)}
    return [m for m in op_chain.methods(n, x0) if m[1] == BASELINE] + [
        ("dualad eager grad", DUALAD, named["dualad grad"][2], None),
        ("dualad replayed grad", DUALAD, replayed, None),
        ("dualad record", DUALAD, recording, None),
        named["ad.jit(grad)"],
        named["torch"], named["jax.jit(grad)"],
    ]


def _tr_methods():
    def replayed(x1, x2):
        tape = _record()(tr_matmul.f_np, x2, x1)
        return lambda: tape.grad(x1, x2, argnums=(0, 1))

    def recording(x1, x2):
        record = _record()
        return lambda: record(tr_matmul.f_np, x1, x2)

    named = {m[0]: m for m in tr_matmul.METHODS}
    return [named["numpy by hand"], ("dualad eager grad", DUALAD, named["dualad grad"][2], None),
            ("dualad replayed grad", DUALAD, replayed, None),
            ("dualad record", DUALAD, recording, None),
            named["ad.jit(grad)"], named["torch"], named["jax.jit(grad)"]]


def _mlp_methods():
    def replayed(params, x, onehot):
        other, x0, y0 = mlp.problem(x.shape[0], x.shape[1], seed=1)
        tape = _record()(mlp.loss, *other, x0, y0)
        return lambda: tape.grad(*params, x, onehot, argnums=(0, 1, 2, 3))

    def recording(params, x, onehot):
        record = _record()
        return lambda: record(mlp.loss, *params, x, onehot)

    named = {m[0]: m for m in mlp.METHODS}
    return [named["numpy by hand"], ("dualad eager grad", DUALAD, named["dualad grad"][2], None),
            ("dualad replayed grad", DUALAD, replayed, None),
            ("dualad record", DUALAD, recording, None),
            named["ad.jit(grad)"], named["torch"], named["jax.jit(grad)"]]


def _vs_eager(rows):
    """Add "vs eager" to the record rows: record time over one eager grad, same case."""
    eager = {r.case: r for r in rows if r.method == "dualad eager grad" and r.times}
    for r in rows:
        if r.method in ("dualad record", "dualad replayed grad", "ad.jit(grad)") and \
                r.times and \
                r.case in eager:
            r.extra["vs eager"] = f"{r.times.median / eager[r.case].times.median:.2f}x"


def _interleaved(bench, case, methods, *, rounds, size, check, scale=1.0):
    """Time ``methods`` in interleaved rounds: per round, each method runs a short loop
    (about 2 ms of calls, caches warm); the per-call median over rounds is reported.
    Load from other processes then falls on every method alike, so the ratios hold."""
    live = []
    for method, kind, make, peer_name in methods:
        row = Row(bench.name, case, method, kind, size=size)
        if peer_name is not None and peer(peer_name) is None:
            row.error = f"skipped: {peer_name} not installed"
            live.append((row, None, 0, []))
            continue
        try:
            fn = make()
            result = fn()
            if check is not None and kind != BASELINE and method != "dualad record":
                row.extra.update(check(result))
            live.append((row, fn, pick_number(fn, 0.002), []))
        except Exception as exc:  # one method failing must not stop the others
            row.error = row_error(exc)
            live.append((row, None, 0, []))
    for _ in range(rounds):
        for row, fn, number, samples in live:
            if fn is not None and row.error is None:
                t0 = time.perf_counter()
                try:
                    for _ in range(number):
                        fn()
                except Exception as exc:  # e.g. ad.JitError where a new recording
                    row.error = row_error(exc)  # does not compile
                    continue
                samples.append((time.perf_counter() - t0) * 1e6 / number * scale)
    for row, _fn, number, samples in live:
        if samples and row.error is None:
            row.times = Timing(statistics.median(samples), min(samples), max(samples), number,
                               len(samples), tuple(samples))
        bench.add(row)
    return [row for row, _, _, _ in live]


def run(quick: bool = False):
    """Rows for the 100-op chain, tr(x1 @ x2) at 30 x 30 and the MLP loss at 64 x 32."""
    bench = Bench("replay")
    rounds = 5 if quick else 41
    n, x0 = 100, 0.5
    want = op_chain.exact(x0, n)

    def chain_check(r):
        return {"max abs err": f"{abs(float(to_numpy(r)) - want):.1e}"}

    _interleaved(bench, f"chain n={n} (per op)", _chain_methods(n, x0), rounds=rounds,
                 size=n, check=chain_check, scale=1.0 / n)

    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal((2, 30, 30))
    check = max_abs_err(np.stack([x2.T, x1.T]))
    _interleaved(bench, "tr(x1 @ x2) n=30",
                 [(m, k, lambda make=mk: make(x1, x2), p) for m, k, mk, p in _tr_methods()],
                 rounds=rounds, size=30,
                 check=lambda r: check(np.stack(to_numpy(tuple(r)))))

    params, x, onehot = mlp.problem(64, 32)
    _interleaved(bench, "MLP n=64 d=32",
                 [(m, k, lambda make=mk: make(params, x, onehot), p)
                  for m, k, mk, p in _mlp_methods()],
                 rounds=rounds, size=64, check=mlp._check(mlp.by_hand(*params, x, onehot)))
    _vs_eager(bench.rows)
    return bench.rows


if __name__ == "__main__":  # a quick look without the report: python -m benchmarks.replay
    for row in run():
        t = f"{row.times.median:10.3f} µs" if row.times else row.error
        print(f"{row.case:22s} {row.method:24s} {t} {row.extra}")
