"""Memory per recorded operation, and whether a dropped graph is freed."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
import weakref
from pathlib import Path

import numpy as np

from .common import BASELINE, DUALAD, PEER, Bench, Row, require, require_dualad, short_error
from .timing import measure

TITLE = "memory per recorded operation over a long scalar chain"
XLABEL = "ops in the chain"
DESCRIPTION = """
Records a chain of n scalar ops (cycling np.sin, * 1.0001, + 0.1) starting from a leaf
(ad.Variable, a torch tensor with requires_grad, autograd's traced value) and measures:
traced B/op = growth of Python-heap memory seen by tracemalloc while the graph is held,
per op; peak B/op likewise at the peak; RSS B/op = growth of resident memory, measured
in a fresh interpreter (coarse; the only number that sees torch's C++ graph); freed = whether a weakref to a node from
the middle of the chain dies when the output is dropped (by reference counting alone, or
only after gc.collect()); retained B/op = tracemalloc memory still held after that.
The time column is the time to record the chain (no backward pass), per op. autograd is
measured inside its grad trace (its graph only lives there); jax keeps no graph outside
a trace and is not measured. Baseline: the same chain on a plain float.
"""


def chain_with_probe(x, sin, n):
    """The op chain; returns (output, weakref to the node after op n//2 or None)."""
    mid = None
    for i in range(n):
        r = i % 3
        if r == 0:
            x = sin(x)
        elif r == 1:
            x = x * 1.0001
        else:
            x = x + 0.1
        if i == n // 2:
            try:
                mid = weakref.ref(x)
            except TypeError:
                mid = None
    return x, mid


def rss() -> int:
    """Resident set size in bytes (Linux), or 0."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def rss_growth(record, n):
    """Growth of resident memory per op while ``record``'s graph is held."""
    record(min(n, 300), lambda: None)  # warm caches (dispatch tables, imports) first
    gc.collect()
    stats = {}

    def at_end():
        stats["rss"] = rss()

    rss0 = rss()
    out, mid = record(n, at_end)
    del out, mid
    return max(0, stats["rss"] - rss0) / n


def rss_in_child(method, n):
    """``rss_growth`` of ``method`` measured in a fresh interpreter (bytes per op)."""
    root = Path(__file__).resolve().parent.parent
    code = (
        "import json, sys; from benchmarks import memory as m; "
        "rec = {name: r for name, _, r, _ in m.METHODS}[sys.argv[1]]; "
        "print(json.dumps(m.rss_growth(rec, int(sys.argv[2]))))"
    )
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", code, method, str(n)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr.strip().splitlines() or ["child failed"])[-1])
    return float(proc.stdout.strip().splitlines()[-1])


def memory_profile(record, n):
    """Run ``record(n, at_end)`` under tracemalloc; return the extra columns."""
    record(min(n, 300), lambda: None)  # warm caches (dispatch tables, imports) first
    gc.collect()
    stats = {}

    def at_end():
        gc.collect()
        stats["cur"], stats["peak"] = tracemalloc.get_traced_memory()

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out, mid = record(n, at_end)
        del out
        freed = "n/a"
        if mid is not None:
            if mid() is None:
                freed = "yes (refcount)"
            else:
                gc.collect()
                freed = "yes (after gc)" if mid() is None else "NO (leak)"
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return {
        "traced B/op": f"{(stats['cur'] - base) / n:.0f}",
        "peak B/op": f"{(stats['peak'] - base) / n:.0f}",
        "freed": freed,
        "retained B/op": f"{max(0, after - base) / n:.1f}",
    }


def _plain(n, at_end):
    out, _ = chain_with_probe(0.5, np.sin, n)
    at_end()
    return out, None


def _dualad(n, at_end):
    ad = require_dualad()
    out, mid = chain_with_probe(ad.Variable(np.float64(0.5)), np.sin, n)
    at_end()
    return out, mid


def _torch(n, at_end):
    torch = require("torch")
    x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    out, _ = chain_with_probe(x, torch.sin, n)
    at_end()
    return out, None  # torch's graph nodes are C++ objects: no weakref probe


def _autograd(n, at_end):
    autograd = require("autograd")

    def f(x):
        out, _ = chain_with_probe(x, autograd.numpy.sin, n)
        at_end()
        return out

    autograd.grad(f)(0.5)
    return None, None


def _autograd_time(n):
    require("autograd")
    from autograd.core import make_vjp  # records the forward trace, no backward pass

    def f(x):
        return chain_with_probe(x, require("autograd").numpy.sin, n)[0]

    return lambda: make_vjp(f, 0.5)


METHODS = [
    ("plain float (no graph)", BASELINE, _plain, None),
    ("dualad Variable", DUALAD, _dualad, None),
    ("torch requires_grad", PEER, _torch, "torch"),
    ("autograd (in grad trace)", PEER, _autograd, "autograd"),
]


def _timer(record, n, name):
    if name.startswith("autograd"):
        return _autograd_time(n)
    return lambda: record(n, lambda: None)


def run(quick: bool = False):
    """Rows for a 100k-op chain (quick: 5k)."""
    from .common import peer

    bench = Bench("memory")
    n = 5_000 if quick else 100_000
    for method, kind, record, peer_name in METHODS:
        row = Row("memory", f"n={n} ops", method, kind, size=n)
        if peer_name is not None and peer(peer_name) is None:
            row.error = f"skipped: {peer_name} not installed"
            bench.add(row)
            continue
        try:
            row.extra.update(memory_profile(record, n))
            row.extra["RSS B/op"] = f"{rss_in_child(method, n):.0f}"
            row.times = measure(_timer(record, n, method), number=1, warmup=0, repeat=3).scaled(
                1.0 / n
            )
        except Exception as exc:
            row.error = short_error(exc)
        bench.add(row)
    return bench.rows
