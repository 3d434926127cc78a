"""Run the benchmarks and write BENCHMARKS.md and plots.

Usage: ``python -m benchmarks [NAME ...] [--quick] [--threads N] [--output PATH] [--no-plots]``
(or ``python benchmarks/run.py ...``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = [
    "tr_matmul",
    "mlp",
    "op_chain",
    "replay",
    "sigmoid",
    "stiff_set",
    "lorenz96",
    "njit_lorenz96",
    "dual_overhead",
    "small_jacobians",
    "brusselator1d",
    "brusselator2d",
    "stiff_ode",
    "ode_sensitivity",
    "compiled",
    "sparse_brusselator",
    "sparse_njit",
    "sparse_arrowhead",
    "sparse_detection",
    "memory",
    "kernels",
    "spectral",
    "import_time",
    "first_call",
    "ensemble",
    "coverage",
]
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def pin_threads(threads: int) -> None:
    """Set thread-count variables (must run before numpy, numba, jax or torch load)."""
    for var in THREAD_VARS:
        os.environ[var] = str(threads)
    if threads == 1 and "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = (
            "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run (default all: {', '.join(NAMES)})",
    )
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke run)")
    p.add_argument(
        "--threads", type=int, default=1, help="BLAS/numba/torch/XLA threads (default 1)"
    )
    p.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="markdown report path")
    p.add_argument(
        "--plots", default=str(ROOT / "benchmarks" / "plots"), help="directory for PNG plots"
    )
    p.add_argument("--no-plots", action="store_true", help="do not draw plots")
    p.add_argument("--no-write", action="store_true", help="print results only; write no files")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    return args


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or platform's guess)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(name: str, mod) -> str:
    ver = getattr(mod, "__version__", None)
    if ver is None:
        try:
            from importlib.metadata import version

            ver = version(name)
        except Exception:
            ver = "?"
    return str(ver)


def _load() -> str:
    if not hasattr(os, "getloadavg"):
        return "?"
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_lines(threads: int, load_start: str = "?") -> list[str]:
    """Lines describing the machine, versions and thread settings."""
    import numpy as np

    from . import common

    versions = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    for name in ("scipy", "numba", "jax", "torch", "autograd", "matplotlib"):
        try:
            mod = importlib.import_module(name)
            versions.append(f"{name} {_version(name, mod)}")
        except Exception:
            versions.append(f"{name} (not installed)")
    mod = common.dualad()
    versions.append(f"dualad {_version('dualad', mod) if mod else '(does not import)'}")
    env = ", ".join(f"{v}={os.environ.get(v, '')}" for v in THREAD_VARS[:4])
    return [
        f"- Load average (1, 5, 15 min) at start: {load_start}; at end: {_load()}"
        " (other processes on the machine add noise)",
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; {platform.system()} {platform.release()}",
        f"- Versions: {', '.join(versions)}",
        f"- Threads: {threads} ({env}; torch.set_num_threads({threads})"
        + (f"; XLA_FLAGS={os.environ['XLA_FLAGS']}" if "XLA_FLAGS" in os.environ else "")
        + ")",
    ]


def run(names: list[str], quick: bool) -> tuple[list, dict]:
    """Run the named benchmark modules; return (rows, {name: module})."""
    from . import common

    rows, modules = [], {}
    for name in names:
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"benchmarks.{name}")
            modules[name] = mod
            rows.extend(mod.run(quick=quick))
        except Exception as exc:  # a whole script failing is recorded, not fatal
            rows.append(
                common.Row(
                    name,
                    "—",
                    "(benchmark script)",
                    common.REFERENCE,
                    error=common.short_error(exc, 200),
                )
            )
            print(f"  {name}: {rows[-1].error}", flush=True)
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    return rows, modules


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    pin_threads(args.threads)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))

    from . import report, timing

    if args.quick:
        timing.configure(repeat=3, warmup=1, target=0.002, budget=0.3, min_repeat=2)
    names = args.names or NAMES
    load_start = _load()
    t0 = time.perf_counter()
    rows, modules = run(names, args.quick)
    elapsed = time.perf_counter() - t0
    text = report.markdown(
        rows,
        modules,
        machine_lines(args.threads, load_start),
        quick=args.quick,
        elapsed=elapsed,
        argv=argv,
    )
    summary = report.summary(rows)
    print()
    print(summary)
    if not args.no_write:
        out = Path(args.output)
        out.write_text(text)
        print(f"wrote {out}")
        if not args.no_plots:
            for path in report.plots(rows, Path(args.plots), modules):
                print(f"wrote {path}")
    else:
        print(text)
    print(f"total {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        # Run as a script: make ``benchmarks`` importable as a package.
        sys.path.insert(0, str(ROOT))
        __package__ = "benchmarks"  # noqa: A001
        importlib.import_module("benchmarks")
    sys.exit(main())
