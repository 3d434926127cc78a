"""Rows, peer loading and per-method error capture shared by the benchmark scripts."""

from __future__ import annotations

import contextlib
import importlib
import os
import statistics
import sys
from dataclasses import dataclass, field

from .timing import Timing, measure, once

# Method kinds: the baseline sets the ratio, "dualad" rows are ours, "peer" rows are
# other AD libraries (the summary compares those with dualad), "reference" rows are
# other non-AD ways (finite differences, numba) shown for context.
BASELINE, DUALAD, PEER, REFERENCE = "baseline", "dualad", "peer", "reference"


@dataclass
class Row:
    """One measured (or failed, or skipped) method at one problem size."""

    benchmark: str
    case: str  # problem size as shown in the table; rows of one case share a baseline
    method: str
    kind: str
    times: Timing | None = None
    error: str | None = None
    size: float | None = None  # x value for the plot
    extra: dict[str, str] = field(default_factory=dict)
    series: str | None = None  # plot line name (default: method)
    panel: str | None = None  # plot sub-panel (default: one panel)


class Skip(Exception):
    """Raised by a method's builder when it cannot run here (recorded as skipped)."""


#: How a row whose ``ad.jit`` call does not compile begins (instead of a time).
FALLS_BACK = "ad.jit falls back"


_NOTES: list[str] = []
_PEERS: dict[str, object] = {}


def note(msg: str) -> None:
    """Print a note once and keep it for the report."""
    if msg not in _NOTES:
        _NOTES.append(msg)
        print(f"note: {msg}", flush=True)


def notes() -> list[str]:
    """Notes printed so far."""
    return list(_NOTES)


def short_error(exc: BaseException, limit: int = 120) -> str:
    """``error: Type: message`` on one line, cut to ``limit`` characters."""
    msg = " ".join(str(exc).split())
    text = f"error: {type(exc).__name__}" + (f": {msg}" if msg else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def jit_fallback(exc: BaseException) -> str | None:
    """``ad.jit falls back: <why>`` for an ``ad.JitError`` (the first line of its message,
    without the advice to pass ``fallback='warn'``); None for any other exception.

    Compiled rows are built with ``ad.jit(..., fallback="error")``: where the call does not
    compile, the row says so instead of timing the Python replay under the name ``ad.jit``,
    and it becomes a timed row by itself once the call compiles.
    """
    mod = sys.modules.get("dualad")
    jit_error = getattr(mod, "JitError", None)
    if jit_error is None or not isinstance(exc, jit_error):
        return None
    lines = str(exc).strip().splitlines() or [""]
    why = lines[0].split(" Pass fallback=")[0].strip()
    return f"{FALLS_BACK}: {why}" if why else FALLS_BACK


def row_error(exc: BaseException) -> str:
    """The text a row shows instead of a time when building, checking or timing it raised
    ``exc``: ``skipped: ...`` (:class:`Skip`), ``ad.jit falls back: ...`` (an
    ``ad.JitError``), else ``error: Type: message``."""
    if isinstance(exc, Skip):
        return f"skipped: {exc}"
    return jit_fallback(exc) or short_error(exc)


def falls_back(row: Row) -> bool:
    """Whether ``row`` is an ``ad.jit`` row whose call does not compile."""
    return row.times is None and (row.error or "").startswith(FALLS_BACK)


def jit(fn):
    """``ad.jit(fn, fallback="error")``: what the compiled rows time. A call that does not
    compile raises ``ad.JitError`` (the row then says why) rather than running the replay."""
    return require_dualad().jit(fn, fallback="error")


def peer(name: str):
    """The peer library ``name`` ("jax", "torch", "autograd"), or None when missing."""
    if name in _PEERS:
        return _PEERS[name]
    mod = None
    try:
        if name == "jax":
            mod = importlib.import_module("jax")
            mod.config.update("jax_enable_x64", True)
            importlib.import_module("jax.numpy")
        elif name == "torch":
            mod = importlib.import_module("torch")
            mod.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
            mod.set_default_dtype(mod.float64)
        elif name == "autograd":
            mod = importlib.import_module("autograd")
            importlib.import_module("autograd.numpy")
        else:
            raise ValueError(name)
    except ImportError as exc:
        note(f"{name} not installed ({exc}); its rows are skipped")
        mod = None
    _PEERS[name] = mod
    return mod


def dualad():
    """The dualad package, or None (with a note) when it cannot be imported."""
    if "dualad" in _PEERS:
        return _PEERS["dualad"]
    try:
        mod = importlib.import_module("dualad")
    except Exception as exc:  # the library may be half-written
        note(f"dualad does not import ({short_error(exc)}); its rows record the error")
        mod = None
    _PEERS["dualad"] = mod
    return mod


def require_dualad():
    """The dualad package; raises ImportError when it does not import."""
    mod = dualad()
    if mod is None:
        raise ImportError("dualad does not import")
    return mod


def require(name: str):
    """The peer ``name``; raises ImportError when it is missing."""
    mod = peer(name)
    if mod is None:
        raise ImportError(f"{name} not installed")
    return mod


class Bench:
    """Collects rows for one benchmark; runs each method with its own error capture."""

    def __init__(self, name: str):
        self.name = name
        self.rows: list[Row] = []

    def time(
        self,
        case: str,
        method: str,
        kind: str,
        make,
        *,
        size: float | None = None,
        check=None,
        scale: float = 1.0,
        extra: dict[str, str] | None = None,
        series: str | None = None,
        panel: str | None = None,
        peer_name: str | None = None,
        context=None,
        **measure_kw,
    ) -> Row:
        """Build ``fn = make()``, check it, time it, and record a row.

        ``make`` returns the zero-argument callable to time (building it is not
        timed). ``check(result)`` returns a dict of extra columns (e.g. an error
        against the analytic answer). A missing peer gives a skipped row; any other
        exception gives an ``error: ...`` row. ``context()``, when given, returns a
        context manager entered around building, checking and timing.
        """
        row = Row(self.name, case, method, kind, size=size, series=series, panel=panel)
        row.extra.update(extra or {})
        if peer_name is not None and peer(peer_name) is None:
            row.error = f"skipped: {peer_name} not installed"
            self.rows.append(row)
            return row
        try:
            with context() if context is not None else contextlib.nullcontext():
                fn = make()
                result = fn()
                if check is not None:
                    row.extra.update(check(result))
                row.times = measure(fn, **measure_kw)
            if scale != 1.0:
                row.times = row.times.scaled(scale)
        except Exception as exc:  # one method failing must not stop the run
            row.error = row_error(exc)
        self.rows.append(row)
        status = row.error or f"{row.times.median:.4g} µs"
        print(f"  {self.name:14s} {case:22s} {method:30s} {status}", flush=True)
        return row

    def time_interleaved(self, case, methods, *, repeat=3, size=None, check=None) -> list[Row]:
        """Time long-running methods in rounds (one call of each per round).

        ``methods`` holds ``(method, kind, make, peer_name)``. Interleaving spreads any
        load from other processes over all methods alike. Each call is timed once.
        """
        rows, live = [], []  # live: (row, fn, samples) of methods that built and ran
        for method, kind, make, peer_name in methods:
            row = Row(self.name, case, method, kind, size=size)
            rows.append(row)
            if peer_name is not None and peer(peer_name) is None:
                row.error = f"skipped: {peer_name} not installed"
                continue
            try:
                fn = make()
                result = fn()
                if check is not None:
                    row.extra.update(check(result))
                live.append((row, fn, []))
            except Exception as exc:
                row.error = row_error(exc)
        for _ in range(repeat):
            for row, fn, samples in live:
                if row.error is None:
                    try:
                        samples.append(once(fn)[0])
                    except Exception as exc:
                        row.error = row_error(exc)
        for row, _, samples in live:
            if row.error is None and samples:
                row.times = Timing(
                    statistics.median(samples),
                    min(samples),
                    max(samples),
                    1,
                    len(samples),
                    tuple(samples),
                )
        for row in rows:
            self.add(row)
        return rows

    def add(self, row: Row) -> Row:
        """Record a row built by hand."""
        self.rows.append(row)
        status = row.error or (f"{row.times.median:.4g} µs" if row.times else "")
        print(f"  {self.name:14s} {row.case:22s} {row.method:30s} {status}", flush=True)
        return row


def max_abs_err(ref):
    """A ``check`` callback: max |result - ref| as an extra column."""
    import numpy as np

    def check(result):
        arr = np.asarray(to_numpy(result), dtype=float)
        want = np.asarray(ref, dtype=float)
        if arr.shape != want.shape:
            return {"max abs err": f"shape {arr.shape} != {want.shape}"}
        return {"max abs err": f"{float(np.max(np.abs(arr - want))) if arr.size else 0.0:.1e}"}

    return check


def to_numpy(x):
    """Convert (trees of) torch/jax/numpy results to numpy arrays."""
    import numpy as np

    if isinstance(x, (tuple, list)):
        return type(x)(to_numpy(v) for v in x)
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)
