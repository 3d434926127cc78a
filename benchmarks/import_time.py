"""Cold-start costs: importing dualad, and first use of compiled kernels."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, Row, peer, short_error
from .timing import Timing

TITLE = "import time and first-use (compile) cost, each in a fresh interpreter"
XLABEL = "(one run)"
DESCRIPTION = """
Wall time of `python -c "import X"` in a new subprocess (median of several; bytecode
caches written by an untimed first run). Baseline: `import numpy` (which dualad needs).
"first call" rows time, inside a fresh interpreter after the import, the first
ad.grad(np.sin)(0.5) (dispatch set-up) and the first np.sin on an ad.Dual (8 values, 2
directions) with the numba kernel forced, with empty kernel and numba cache directories
(DUALAD_KERNEL_CACHE, NUMBA_CACHE_DIR; cold: generates and compiles) and again with the
caches such a run left (warm: loads), next to the same first call with the kernels off
(what is left is first-use set-up unrelated to numba). Those need dualad.forward_mode.kernels'
switch and are skipped without it. --quick skips the jax and torch imports.
"""

ROOT = Path(__file__).resolve().parent.parent

FIRST_GRAD = """
import json, time
import numpy as np
import dualad as ad
t0 = time.perf_counter()
ad.grad(np.sin)(0.5)
t1 = time.perf_counter()
ad.grad(np.sin)(0.5)
t2 = time.perf_counter()
print(json.dumps({"first": t1 - t0, "second": t2 - t1}))
"""

FIRST_KERNEL = """
import json, time
import numpy as np
import dualad as ad
from benchmarks.common import Skip
from benchmarks.kernels import backend_switch
import sys
try:
    with backend_switch(sys.argv[1], ops=("sin",)):
        d = ad.Dual(np.linspace(0.1, 1.0, 8), np.ones((8, 2)))
        t0 = time.perf_counter()
        np.sin(d)
        t1 = time.perf_counter()
        np.sin(d)
        t2 = time.perf_counter()
except Skip as exc:
    print(json.dumps({"skip": str(exc)}))
    raise SystemExit(0)
print(json.dumps({"first": t1 - t0, "second": t2 - t1}))
"""


def _env(extra=None):
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def _run(code, env=None, timeout=300, args=()):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    elapsed = (time.perf_counter() - t0) * 1e6
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(tail)
    return elapsed, proc.stdout


def _cache_env(path):
    """Point dualad's generated kernel modules and numba's cache at ``path``."""
    return {"DUALAD_KERNEL_CACHE": path, "NUMBA_CACHE_DIR": path}


def _timing(samples):
    return Timing(
        statistics.median(samples), min(samples), max(samples), 1, len(samples), tuple(samples)
    )


def _json(out):
    return json.loads(out.strip().splitlines()[-1])


def run(quick: bool = False):
    """Import and first-use rows."""
    bench = Bench("import_time")
    reps = 1 if quick else 5
    imports = [
        ("python -c pass", REFERENCE, "pass", None),
        ("import numpy", BASELINE, "import numpy", None),
        ("import dualad", DUALAD, "import dualad", None),
        ("import autograd", PEER, "import autograd", "autograd"),
        ("import jax", PEER, "import jax", "jax"),
        ("import torch", PEER, "import torch", "torch"),
    ]
    for method, kind, code, peer_name in imports:
        row = Row("import_time", "import", method, kind, size=1)
        if peer_name is not None and peer(peer_name) is None:
            row.error = f"skipped: {peer_name} not installed"
        elif quick and peer_name in ("jax", "torch"):
            row.error = "skipped: --quick"
        else:
            try:
                if not (quick and kind == PEER):
                    _run(code)  # writes bytecode caches, warms the file cache
                n = (1 if quick else 3) if kind == PEER else reps
                row.times = _timing([_run(code)[0] for _ in range(n)])
            except Exception as exc:
                row.error = short_error(exc)
        bench.add(row)

    row = Row("import_time", "first call", "dualad first ad.grad call", DUALAD, size=1)
    try:
        runs = [_json(_run(FIRST_GRAD)[1]) for _ in range(reps)]
        row.times = _timing([r["first"] * 1e6 for r in runs])
        row.extra["second call"] = f"{statistics.median(r['second'] for r in runs) * 1e6:.3g} µs"
    except Exception as exc:
        row.error = short_error(exc)
    bench.add(row)

    kernel_runs = [
        ("kernels off", "numpy", True),
        ("numba, cold cache", "numba", False),
        ("numba, warm cache", "numba", True),
    ]
    for label, backend, reuse in kernel_runs:
        row = Row("import_time", "first call", f"dualad first Dual sin, {label}", DUALAD, size=1)
        try:
            samples, seconds = [], []
            with tempfile.TemporaryDirectory() as cache:
                if reuse:
                    _run(FIRST_KERNEL, _cache_env(cache), args=(backend,))
                for i in range(max(1, reps - 2) if reuse else max(1, reps // 2)):
                    sub = cache if reuse else os.path.join(cache, str(i))
                    res = _json(_run(FIRST_KERNEL, _cache_env(sub), args=(backend,))[1])
                    if "skip" in res:
                        raise _Skipped(res["skip"])
                    samples.append(res["first"] * 1e6)
                    seconds.append(res["second"] * 1e6)
            row.times = _timing(samples)
            row.extra["second call"] = f"{statistics.median(seconds):.3g} µs"
        except _Skipped as exc:
            row.error = f"skipped: {exc}"
        except Exception as exc:
            row.error = short_error(exc)
        bench.add(row)
    return bench.rows


class _Skipped(Exception):
    pass
