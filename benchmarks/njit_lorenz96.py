"""Jacobian of a user's @numba.njit Lorenz-96 loop, differentiated as it is."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    PEER,
    REFERENCE,
    Bench,
    Row,
    max_abs_err,
    note,
    require,
    require_dualad,
    short_error,
)
from .lorenz96 import analytic, lorenz96
from .timing import Timing

TITLE = "dense Jacobian of a user's @numba.njit Lorenz-96 loop (compiled dual numbers)"
XLABEL = "n (states)"
DESCRIPTION = """
The model is an ordinary `@numba.njit` loop (`out = np.empty_like(x)`, `out[i] = (x[i+1]
- x[i-2]) * x[i-1] - x[i] + 8`); `ad.jacobian(model)` compiles it again with dual numbers
(8 directions per pass, all passes in one compiled driver). Baseline: a hand-written
`@numba.njit` analytic Jacobian (dense n x n, compilation excluded). Peer: `jax.jit
(jax.jacfwd)` of the numpy form with `jnp.roll` (compilation excluded). Reference:
`ad.jacobian` of the numpy form (numpy-mode forward duals). No ad.jit row: the Jacobian of
an @njit function is compiled code already, and ad.jit does not take one (the numpy form's
compiled Jacobian is in the lorenz96 benchmark). max abs err is against the analytic
Jacobian. The "compile" rows run in fresh interpreters: the first
`ad.jacobian(model)(x)` with an empty cache directory (cold: generate and compile), and
again in a new process with the cache that run left (warm: load from disk); "numba warm"
rows time it after the process has already called one cached @njit function (numba's own
start-up is then paid), the plain rows include it. The cpu column is the process's CPU
time over the same span (the wall time grows when the machine is loaded).
"""

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''
import numba
import numpy as np


@numba.njit(cache=True)
def lorenz96_loop(x):
    n = x.shape[0]
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8.0
    return out
'''

FIRST_JACOBIAN = """
import json, time
import numpy as np
import dualad as ad
import njit_l96_model as m
x = np.linspace(-1.0, 1.0, 100) + 8.0
w1, c1 = time.perf_counter(), time.process_time()
m.lorenz96_loop(x)  # numba's own start-up: a cached @njit call
w2, c2 = time.perf_counter(), time.process_time()
jac = ad.jacobian(m.lorenz96_loop)(x)
w3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"numba_start": [w2 - w1, c2 - c1], "first": [w3 - w2, c3 - c2]}))
"""


def _numba_functions():
    import numba

    from .lorenz96_loops import analytic_loop as analytic_source
    from .lorenz96_loops import lorenz96_loop as model_source

    lorenz96_loop = numba.njit(cache=False)(model_source)
    analytic_loop = numba.njit(cache=False)(analytic_source)

    return lorenz96_loop, analytic_loop


def methods(x, model, analytic_loop):
    """(name, kind, make, peer) for the point x."""

    def dualad_njit():
        ad = require_dualad()
        jac = ad.jacobian(model)
        return lambda: jac(x)

    def dualad_numpy():
        ad = require_dualad()
        jac = ad.jacobian(lorenz96, mode="forward")
        return lambda: jac(x)

    def jax_jacfwd():
        jax = require("jax")
        jac = jax.jit(jax.jacfwd(lambda y: lorenz96(y, jax.numpy.roll)))
        xj = jax.numpy.asarray(x)
        return lambda: jac(xj).block_until_ready()

    return [
        ("analytic @njit", BASELINE, lambda: lambda: analytic_loop(x), None),
        ("dualad jacobian(@njit model)", DUALAD, dualad_njit, None),
        ("jax.jit(jacfwd) numpy form", PEER, jax_jacfwd, "jax"),
        ("dualad jacobian numpy form", REFERENCE, dualad_numpy, None),
    ]


def _subprocess(code: str, cwd: str, cache: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), cwd, env.get("PYTHONPATH", "")])
    env["DUALAD_KERNEL_CACHE"] = cache
    env["NUMBA_CACHE_DIR"] = cache
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(tail)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _timing(seconds: list[float]) -> Timing:
    us = [s * 1e6 for s in seconds]
    return Timing(statistics.median(us), min(us), max(us), 1, len(us), tuple(us))


def compile_rows(bench: Bench, repeat: int) -> None:
    """Cold and disk-cached first Jacobian in fresh interpreters (n = 100).

    Rows are wall times; the "cpu" column is the process's CPU time for the same span
    (on a loaded machine the wall time is longer)."""
    samples: dict[str, list[tuple[float, float]]] = {
        "cold": [], "cold_warm": [], "disk": [], "disk_warm": []}
    error = None
    try:
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "njit_l96_model.py").write_text(MODEL)
                cache = str(Path(tmp, "cache"))
                cold = _subprocess(FIRST_JACOBIAN, tmp, cache)
                disk = _subprocess(FIRST_JACOBIAN, tmp, cache)
            for key, result in (("cold", cold), ("disk", disk)):
                start, first = result["numba_start"], result["first"]
                samples[key].append((start[0] + first[0], start[1] + first[1]))
                samples[key + "_warm"].append((first[0], first[1]))
    except Exception as exc:
        error = short_error(exc)
    labels = {
        "cold": "first jacobian, empty cache",
        "cold_warm": "first jacobian, empty cache, numba warm",
        "disk": "first jacobian, new process, disk cache",
        "disk_warm": "first jacobian, disk cache, numba warm",
    }
    for key, label in labels.items():
        row = Row(bench.name, "compile n=100", label, DUALAD, size=100)
        if error or not samples[key]:
            row.error = error or "no samples"
        else:
            row.times = _timing([wall for wall, _ in samples[key]])
            row.extra["cpu"] = f"{statistics.median(c for _, c in samples[key]):.3g} s"
        bench.rows.append(row)
        status = row.error or f"{row.times.median / 1e6:.3g} s (cpu {row.extra['cpu']})"
        print(f"  {bench.name:14s} {'compile n=100':22s} {label:30s} {status}", flush=True)


def run(quick: bool = False):
    """Rows for n = 10, 100, 1000 (quick: 10, 100), then the compile rows."""
    bench = Bench("njit_lorenz96")
    rng = np.random.default_rng(1)
    sizes = (10, 100) if quick else (10, 100, 1000)
    note("njit_lorenz96: analytic @njit and jax.jit times exclude compilation; the compile "
         "rows measure dualad's")
    try:
        model, analytic_loop = _numba_functions()
    except ImportError as exc:
        note(f"njit_lorenz96: numba not installed ({exc}); skipped")
        return bench.rows
    for n in sizes:
        x = rng.standard_normal(n) + 8.0
        check = max_abs_err(analytic(x))
        for method, kind, make, peer_name in methods(x, model, analytic_loop):
            bench.time(f"n={n}", method, kind, make, size=n, check=check, peer_name=peer_name)
    compile_rows(bench, 1 if quick else 3)
    return bench.rows
