"""The first hour's first second: a fresh process imports dualad and computes a Jacobian.

Each sample is one whole new interpreter (start-up included), timed from outside, as a
user experiences ``python my_script.py``; the median of several is reported. Bytecode is
cached by an untimed first run (the warm disk cache of an installed package). Rows:

* ``import numpy`` (the baseline: dualad cannot start faster than numpy does);
* ``import numpy, plum`` (reference: the dispatch library dualad's rules are methods of);
* ``import dualad``;
* ``import dualad + first forward Jacobian``: ``ad.jacobian(f, mode="forward")`` of an
  8-element function (sin and a product), the issue's target (0.6 s together);
* the same with ``jax.jacfwd`` (peer; skipped by --quick).

Run alone: ``python -m benchmarks.first_call [--quick]``.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, Row, peer, short_error
from .timing import Timing

TITLE = "first call: a fresh process imports dualad and computes a forward Jacobian"
XLABEL = "(one fresh process)"
DESCRIPTION = __doc__

ROOT = Path(__file__).resolve().parent.parent

FIRST_JACOBIAN = """
import time
t0 = time.perf_counter()
import numpy as np
import dualad as ad
t1 = time.perf_counter()
J = ad.jacobian(lambda x: np.sin(x) * x[0], mode="forward")(np.arange(8.0))
t2 = time.perf_counter()
assert J.shape == (8, 8) and abs(J[1, 0] - np.sin(1.0)) < 1e-12
print("PHASES", t1 - t0, t2 - t1)
"""

JAX_FIRST_JACOBIAN = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
J = jax.jacfwd(lambda x: jnp.sin(x) * x[0])(np.arange(8.0))
assert J.shape == (8, 8)
"""

CASES = [
    ("import numpy", BASELINE, "import numpy", None),
    ("import numpy, plum", REFERENCE, "import numpy, plum", None),
    ("import dualad", DUALAD, "import dualad", None),
    ("import dualad + first forward Jacobian", DUALAD, FIRST_JACOBIAN, None),
    ("import jax + first jax.jacfwd", PEER, JAX_FIRST_JACOBIAN, "jax"),
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh_process(code: str, timeout: float = 300) -> tuple[float, str, float]:
    """Wall seconds of ``python -c code`` in a new interpreter, its output, its CPU seconds.

    CPU seconds (user + system of the child) stay meaningful on a loaded machine, where
    the wall time also counts waiting for a core.
    """
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(tail)
    return elapsed, proc.stdout, cpu


def _timing(samples_us: list[float]) -> Timing:
    return Timing(statistics.median(samples_us), min(samples_us), max(samples_us), 1,
                  len(samples_us), tuple(samples_us))


def run(quick: bool = False) -> list[Row]:
    """One row per case; times in µs of whole fresh processes, interleaved across cases."""
    bench = Bench("first_call")
    reps = 3 if quick else 7
    live = []
    for method, kind, code, peer_name in CASES:
        row = Row("first_call", "fresh process", method, kind, size=1)
        bench.rows.append(row)
        if peer_name is not None and (quick or peer(peer_name) is None):
            row.error = "skipped: --quick" if quick else f"skipped: {peer_name} not installed"
            continue
        try:
            fresh_process(code)  # untimed: writes bytecode, warms the disk cache
            live.append((row, code, [], [], []))
        except Exception as exc:  # noqa: BLE001 - one case failing must not stop the run
            row.error = short_error(exc)
    for _ in range(reps):  # interleaved: machine load drifts over all cases alike
        for _row, code, samples, phases, cpus in live:
            seconds, out, cpu = fresh_process(code)
            samples.append(seconds * 1e6)
            cpus.append(cpu)
            for line in out.splitlines():
                if line.startswith("PHASES"):
                    phases.append([float(v) for v in line.split()[1:]])
    for row, _, samples, phases, cpus in live:
        row.times = _timing(samples)
        row.extra["cpu"] = f"{statistics.median(cpus):.3f} s"
        if phases:
            imp = statistics.median(p[0] for p in phases)
            first = statistics.median(p[1] for p in phases)
            row.extra["inside: import"] = f"{imp * 1e3:.0f} ms"
            row.extra["inside: first Jacobian"] = f"{first * 1e3:.1f} ms"
    return bench.rows


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rows = run(quick=quick)
    base = next((r.times.median for r in rows if r.kind == BASELINE and r.times), None)
    print(f"{'case':42s} {'median':>9s} {'min':>9s} {'max':>9s} {'vs numpy':>9s}")
    for r in rows:
        if r.times is None:
            print(f"{r.method:42s} {r.error}")
            continue
        t = r.times
        ratio = f"{t.median / base:.2f}x" if base else "-"
        extra = "  ".join(f"{k} {v}" for k, v in r.extra.items())
        print(f"{r.method:42s} {t.median / 1e6:8.3f}s {t.min / 1e6:8.3f}s "
              f"{t.max / 1e6:8.3f}s {ratio:>9s}  {extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
