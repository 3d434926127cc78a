"""Forward-mode elementwise kernels: numpy formulas vs fused numba loops vs dualad.Dual."""

from __future__ import annotations

import contextlib
import importlib

import numpy as np

from .common import BASELINE, DUALAD, REFERENCE, Bench, Skip, note, require_dualad

TITLE = "forward-mode elementwise op on n values carrying k tangent directions"
XLABEL = "n (values)"
DESCRIPTION = """
One elementwise op on a dual array: value shape (n,), partials shape (n, k). Baseline:
plain numpy formulas on (x.value, x.partials), e.g. sin: (np.sin(v), np.cos(v)[:, None]
* p); multiply: (a*b, b[:, None]*ap + a[:, None]*bp). Reference: a fused numba loop
computing value and partials in one pass into numpy-allocated outputs, laid out as
dualad's generated kernels are (compilation excluded). dualad rows apply the numpy
function to ad.Dual(value, partials).
max abs err is against the baseline's partials. "dualad Dual" is the default, which uses
the numba kernel only above per-op size thresholds and for k >= 2; "[numpy]" turns the
kernels off (dual_kernels.set_enabled(False)); "[numba]" forces them at every size.
"""

OPS = ("sin", "exp", "multiply")


# -- baseline: numpy formulas on (value, partials) ------------------------------------


def numpy_formula(op):
    """(value, partials) -> (value, partials) with plain numpy."""
    if op == "sin":
        return lambda v, p: (np.sin(v), np.cos(v)[:, None] * p)
    if op == "exp":

        def exp(v, p):
            e = np.exp(v)
            return e, e[:, None] * p

        return exp
    if op == "multiply":
        return lambda a, ap, b, bp: (a * b, b[:, None] * ap + a[:, None] * bp)
    raise ValueError(op)


# -- reference: fused numba loops ------------------------------------------------------

_NUMBA = {}


def numba_fused(op):
    """A fused numba kernel for op, called as dualad's generated kernels are.

    The loop writes value and partials in one pass into output arrays allocated by numpy
    (outer loop over elements, inner loop over the k directions).
    """
    if op in _NUMBA:
        return _NUMBA[op]
    try:
        import numba
    except ImportError as exc:
        raise Skip("numba not installed") from exc

    if op in ("sin", "exp"):
        fun = np.sin if op == "sin" else np.exp
        op_is_sin = op == "sin"

        @numba.njit(cache=False)
        def unary(v, p, out, outp):
            for i in range(out.shape[0]):
                x = v[i]
                y = fun(x)
                d = np.cos(x) if op_is_sin else y
                out[i] = y
                for j in range(outp.shape[1]):
                    outp[i, j] = d * p[i, j]

        def kern(v, p):
            out, outp = np.empty(v.shape), np.empty(p.shape)
            unary(v, p, out, outp)
            return out, outp

    else:

        @numba.njit(cache=False)
        def mul(a, ap, b, bp, out, outp):
            for i in range(out.shape[0]):
                x = a[i]
                y = b[i]
                out[i] = x * y
                for j in range(outp.shape[1]):
                    outp[i, j] = y * ap[i, j] + x * bp[i, j]

        def kern(a, ap, b, bp):
            out, outp = np.empty(a.shape), np.empty(ap.shape)
            mul(a, ap, b, bp, out, outp)
            return out, outp

    _NUMBA[op] = kern
    return kern


# -- dualad ----------------------------------------------------------------------------


@contextlib.contextmanager
def backend_switch(name, ops=OPS):
    """Select dualad's forward-mode kernel backend, "numpy" or "numba", inside a ``with``.

    The single wiring point for ``dualad.forward_mode.kernels``: "numpy" turns the fused kernels
    off (``set_enabled(False)``); "numba" turns them on and forces them at every size
    (size thresholds of ``ops`` set to 0, ``MIN_K`` to 1), so the two backends can be
    compared where dualad's own thresholds would choose one. Raises Skip when dualad has
    no such switch. Everything is restored on exit.
    """
    try:
        mod = importlib.import_module("dualad.forward_mode.kernels")
    except ImportError as exc:
        raise Skip("dualad.forward_mode.kernels does not exist yet") from exc
    if not callable(getattr(mod, "set_enabled", None)):
        raise Skip("dualad.forward_mode.kernels has no set_enabled switch")
    if name not in ("numpy", "numba"):
        raise ValueError(name)
    enabled, min_k, saved = mod.ENABLED, getattr(mod, "MIN_K", None), []
    try:
        mod.set_enabled(name == "numba")
        if name == "numba":
            if min_k is not None:
                mod.MIN_K = 1
            for op in ops:
                rk = mod.kernels_for(getattr(np, op))
                if rk is not None and hasattr(rk, "threshold"):
                    saved.append((rk, rk.threshold))
                    rk.threshold = 0
        yield
    finally:
        mod.set_enabled(enabled)
        if min_k is not None:
            mod.MIN_K = min_k
        for rk, threshold in saved:
            rk.threshold = threshold


def dualad_op(op):
    """(value, partials, ...) -> Dual: np.<op> applied to dualad.Dual inputs."""
    ad = require_dualad()
    fun = getattr(np, op)

    def call(*args):
        duals = [ad.Dual(args[i], args[i + 1]) for i in range(0, len(args), 2)]
        return lambda: fun(*duals)

    call.prepared = True
    return call


def bind(fun, args):
    """A zero-argument callable running ``fun(*args)`` (Duals are built once, untimed)."""
    if getattr(fun, "prepared", False):
        return fun(*args)
    return lambda: fun(*args)


def _pair(result):
    """(value, partials) from a Dual or a (value, partials) tuple."""
    if isinstance(result, tuple):
        return result
    return np.asarray(result.value), np.asarray(result.partials)


def sizes(quick):
    """(ns, ks)."""
    if quick:
        return (10, 10_000), (1, 4)
    return (10, 100, 1_000, 10_000, 100_000, 1_000_000), (1, 4, 16)


def run(quick: bool = False):
    """Rows for each op, n and k."""
    bench = Bench("kernels")
    rng = np.random.default_rng(3)
    ns, ks = sizes(quick)
    ops = ("sin", "multiply") if quick else OPS
    note("kernels: numba times exclude compilation (done in the untimed warm-up)")
    for op in ops:
        for k in ks:
            for n in ns:
                nargs = 2 if op == "multiply" else 1
                args = []
                for _ in range(nargs):
                    args += [rng.standard_normal(n), rng.standard_normal((n, k))]
                want = numpy_formula(op)(*args)

                def check(result, want=want):
                    v, p = _pair(result)
                    err = max(np.max(np.abs(v - want[0])), np.max(np.abs(p - want[1])))
                    return {"max abs err": f"{float(err):.1e}"}

                methods = [
                    ("numpy formulas", BASELINE, numpy_formula, None),
                    ("numba fused", REFERENCE, numba_fused, None),
                    ("dualad Dual (auto)", DUALAD, dualad_op, None),
                    ("dualad Dual [numpy]", DUALAD, dualad_op, "numpy"),
                    ("dualad Dual [numba]", DUALAD, dualad_op, "numba"),
                ]
                for method, kind, builder, backend in methods:
                    bench.time(
                        f"{op} n={n:,} k={k}",
                        method,
                        kind,
                        lambda b=builder, op=op, a=args: bind(b(op), a),
                        size=n,
                        check=check,
                        series=method,
                        panel=f"{op}, k={k}",
                        budget=0.5,
                        context=None if backend is None else (lambda b=backend: backend_switch(b)),
                    )
    return bench.rows
