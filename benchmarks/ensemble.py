"""Scale-out: an ensemble of Jacobians on worker processes with dask.distributed.

The Jacobian of an ODE right-hand side (Lorenz-96, 40 states) at 1,000 states, e.g. for
a sensitivity study or an ensemble Kalman filter: an in-process loop (the baseline)
against ``Client.map`` on a ``LocalCluster`` of 1 and 2 worker processes (one thread
each). The states are sent in batches (one task per batch, ``ad.vmap`` inside): a task
costs about a millisecond of scheduling, more than one small Jacobian, so the number of
tasks comes from a measurement (the loop's time per Jacobian and a no-op task's round
trip on the cluster; see ``batch_count``); per-state tasks (100 of them, scaled to the
ensemble) are shown once for comparison. Two more in-process rows compile the Jacobian,
``jac = ad.jit(ad.ode_jacobian(f))`` (at an untimed first call; fallback="error"): a loop of
its calls, and ``ad.vmap(jac, in_axes=(None, 0))``. Compiled, the whole ensemble costs about
a task round trip (the "task overhead" column), so it is not sent to the workers.
Times are per Jacobian (wall time of the whole ensemble / 1,000);
"Jacobians/s" is the throughput. The cluster's start-up (seconds) is not timed: it is paid
once per session. A real cluster runs the same code with ``Client("scheduler-address")``.

Run alone: ``python -m benchmarks.ensemble [--quick]``; needs ``dask[distributed]``.
"""

from __future__ import annotations

import logging
import sys
import time

import numpy as np

from .common import BASELINE, DUALAD, Row, row_error, short_error
from .timing import Timing

TITLE = "ensemble of 1,000 ODE Jacobians: in-process loop vs dask worker processes"
XLABEL = "worker processes"
DESCRIPTION = __doc__

N_STATES = 1000
DIM = 40
PER_STATE_TASKS = 100


def lorenz96(t, y, forcing=8.0):
    return (np.roll(y, -1) - np.roll(y, 2)) * np.roll(y, 1) - y + forcing


def ensemble_states(n=N_STATES, dim=DIM, seed=0):
    return list(np.random.default_rng(seed).standard_normal((n, dim)) + 8.0)


def _batches(items, n_batches):
    size = -(-len(items) // n_batches)
    return [items[i:i + size] for i in range(0, len(items), size)]


def batch_count(per_item: float, n_items: int, n_workers: int, per_task: float) -> int:
    """How many tasks to split the ensemble into, from measured times (seconds).

    Each task should take at least 20 task overheads (so scheduling costs under 5%), and
    every worker gets the same number of tasks (at least one; at most 4, for balance).
    """
    total = per_item * n_items
    tasks = int(total / (20.0 * per_task)) // n_workers * n_workers
    return max(n_workers, min(tasks, 4 * n_workers, n_items))


def _jacobian_batch(jac, batch):
    import dualad as ad

    return ad.vmap(jac, in_axes=(None, 0))(0.0, np.asarray(batch))


def _noop(x):
    return x


def task_overhead(client, n_workers, rounds=3):
    """Seconds per small task round trip on this cluster (the best of a few rounds)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        client.gather(client.map(_noop, range(4 * n_workers), pure=False))
        best = min(best, (time.perf_counter() - t0) / (4 * n_workers) * n_workers)
    return best


def _row(method, kind, seconds, workers, extra=None):
    per = [s / N_STATES * 1e6 for s in seconds]
    row = Row("ensemble", f"{N_STATES} states", method, kind, size=max(workers, 1),
              times=Timing(min(per), min(per), max(per), 1, len(per), tuple(per)))
    row.extra["Jacobians/s"] = f"{N_STATES / min(seconds):,.0f}"
    row.extra.update(extra or {})
    return row


def _compiled_rows(states, reference, repeat) -> list[Row]:
    """The ensemble in process with ``jac = ad.jit(ad.ode_jacobian(f))``: a loop of calls,
    and ``ad.vmap(jac, in_axes=(None, 0))`` (compiled at an untimed first call; where the
    call does not compile, the row says ad.jit falls back and why)."""
    import dualad as ad

    from .common import jit

    stacked = np.asarray(states)
    methods = [
        ("in-process loop, jac=ad.jit(ode_jacobian)",
         lambda jac: lambda: [jac(0.0, y) for y in states]),
        ("in-process ad.vmap(ad.jit(ode_jacobian))",
         lambda jac: (lambda batched: lambda: list(batched(0.0, stacked)))(
             ad.vmap(jac, in_axes=(None, 0)))),
    ]
    rows = []
    for method, make in methods:
        try:
            fn = make(jit(ad.ode_jacobian(lorenz96)))
            results = fn()  # compiles; not timed
            err = max(float(np.max(np.abs(a - b))) for a, b in zip(results, reference))
            seconds = []
            for _ in range(max(repeat, 3)):
                t0 = time.perf_counter()
                fn()
                seconds.append(time.perf_counter() - t0)
            rows.append(_row(method, DUALAD, seconds, 0, {"max abs diff": f"{err:.1e}"}))
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the run
            rows.append(Row("ensemble", f"{N_STATES} states", method, DUALAD, size=1,
                            error=row_error(exc)))
    return rows


def run(quick: bool = False) -> list[Row]:
    """Rows: the in-process loop, then 1 and 2 worker processes (best of ``repeat``)."""
    import dualad as ad

    rows: list[Row] = []
    states = ensemble_states()
    jac = ad.ode_jacobian(lorenz96)
    repeat = 1 if quick else 3
    reference = [jac(0.0, y) for y in states]  # warm-up and the answer
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        [jac(0.0, y) for y in states]
        seconds.append(time.perf_counter() - t0)
    rows.append(_row("in-process loop", BASELINE, seconds, 0))
    per_state = min(seconds) / N_STATES
    rows.extend(_compiled_rows(states, reference, repeat))
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        for n in (1, 2):
            row = Row("ensemble", f"{N_STATES} states", f"Client.map, {n} worker(s)", DUALAD,
                      size=n, error=f"skipped: dask.distributed not installed ({exc})")
            rows.append(row)
        return rows
    for n_workers in (1, 2):
        method = f"Client.map, {n_workers} worker process(es)"
        try:
            with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                              dashboard_address=None, silence_logs=logging.CRITICAL
                              ) as cluster, Client(cluster) as client:
                jac_remote = client.scatter(jac, broadcast=True)
                overhead = task_overhead(client, n_workers)
                batches = _batches(states, batch_count(per_state, N_STATES, n_workers,
                                                       overhead))
                client.gather(client.map(_jacobian_batch, [jac_remote] * len(batches),
                                         batches, pure=False))  # warm the workers up
                seconds = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    futures = client.map(_jacobian_batch, [jac_remote] * len(batches),
                                         batches, pure=False)
                    results = [j for batch in client.gather(futures) for j in batch]
                    seconds.append(time.perf_counter() - t0)
                extra = {"task overhead": f"{overhead * 1e3:.1f} ms"}
                err = max(float(np.max(np.abs(a - b))) for a, b in zip(results, reference))
                rows.append(_row(method, DUALAD, seconds, n_workers,
                                 {"tasks": str(len(batches)), "max abs diff": f"{err:.1e}",
                                  **extra}))
                if n_workers == 2:  # 100 single-state tasks, scaled to the ensemble
                    some = states[:PER_STATE_TASKS]
                    t0 = time.perf_counter()
                    one_each = client.gather(client.map(jac, [0.0] * len(some), some,
                                                        pure=False))
                    t = (time.perf_counter() - t0) * N_STATES / len(some)
                    assert len(one_each) == len(some)
                    rows.append(_row(f"{method}, one task per state", DUALAD, [t], n_workers,
                                     {"tasks": f"{len(some)} (timed, scaled)"}))
        except Exception as exc:  # noqa: BLE001 - one case failing must not stop the run
            rows.append(Row("ensemble", f"{N_STATES} states", method, DUALAD, size=n_workers,
                            error=short_error(exc)))
    return rows


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rows = run(quick=quick)
    base = next((r.times.median for r in rows if r.kind == BASELINE and r.times), None)
    print(f"{'method':56s} {'µs/Jacobian':>12s} {'Jacobians/s':>12s} {'vs loop':>8s}")
    for r in rows:
        if r.times is None:
            print(f"{r.method:56s} {r.error}")
            continue
        speed = f"{base / r.times.median:.2f}x" if base else "-"
        print(f"{r.method:56s} {r.times.median:12.1f} {r.extra['Jacobians/s']:>12s} "
              f"{speed:>8s}  {r.extra.get('tasks', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
