"""Sparse Jacobians of unmodified @numba.njit models: Lorenz-96 and a 2-D Brusselator."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, note, require, require_dualad
from .lorenz96 import analytic, lorenz96

TITLE = "Sparse Jacobians of @numba.njit loops (compiled compressed passes)"
XLABEL = "states"
DESCRIPTION = """
The models are ordinary `@numba.njit` loops. `ad.sparse_jacobian(model)` detects the
pattern through the model's Python source on index sets, colours it, and computes each
Jacobian in one compiled call (one dual direction per colour plus a check direction,
decompressed into CSR data and checked in compiled code); the timed calls reuse pattern,
colouring and driver. Lorenz-96 (n = 100, 1000; 4 nonzeros per row, 4 colours): baseline
the hand-written dense analytic `@njit` Jacobian of njit_lorenz96.py (the issue's
baseline); reference a hand-written sparse analytic `@njit` Jacobian (CSR data for the
known pattern, wrapped in scipy's csr_array); peer `jax.jit(jax.jacfwd)` of the numpy
form (dense); and dualad's dense `ad.jacobian(model)`. 2-D Brusselator on an N x N periodic
grid (N = 32, 2048 states, 6 nonzeros per row): baseline a hand-written sparse analytic
`@njit` Jacobian (CSR data), then `ad.sparse_jacobian(model)`. Compilation is excluded
everywhere (one untimed call first).
"""


def _lorenz96_functions():
    import numba

    from .lorenz96_loops import analytic_loop, lorenz96_loop

    model = numba.njit(cache=False)(lorenz96_loop)
    analytic_dense = numba.njit(cache=False)(analytic_loop)

    @numba.njit(cache=False)
    def analytic_data(x, slots):
        """The nonzeros in CSR order; slots[i, :] says where each of row i's four goes."""
        n = x.shape[0]
        data = np.empty(4 * n)
        for i in range(n):
            data[4 * i + slots[i, 0]] = x[(i - 1) % n]
            data[4 * i + slots[i, 1]] = -x[(i - 1) % n]
            data[4 * i + slots[i, 2]] = x[(i + 1) % n] - x[(i - 2) % n]
            data[4 * i + slots[i, 3]] = -1.0
        return data

    return model, analytic_dense, analytic_data


def _l96_pattern(n):
    """indptr, indices of the Lorenz-96 pattern and each row's slots (CSR order)."""
    cols = np.stack([(np.arange(n) + 1) % n, (np.arange(n) - 2) % n, (np.arange(n) - 1) % n,
                     np.arange(n)], axis=1)
    order = np.argsort(cols, axis=1)
    slots = np.argsort(order, axis=1).astype(np.int64)
    indices = np.take_along_axis(cols, order, axis=1).reshape(-1).astype(np.int32)
    indptr = np.arange(0, 4 * n + 1, 4, dtype=np.int32)
    return indptr, indices, slots


def _brusselator_functions(n):
    import numba

    m = n * n
    alpha = 10.0 * m

    @numba.njit(cache=False)
    def lap(y, off, i, j):
        return (y[off + ((i + 1) % n) * n + j] + y[off + ((i - 1) % n) * n + j]
                + y[off + i * n + (j + 1) % n] + y[off + i * n + (j - 1) % n]
                - 4.0 * y[off + i * n + j])

    @numba.njit(cache=False)
    def model(y):
        out = np.empty_like(y)
        for i in range(n):
            for j in range(n):
                u = y[i * n + j]
                v = y[m + i * n + j]
                uuv = u * u * v
                out[i * n + j] = 1.0 + uuv - 4.4 * u + alpha * lap(y, 0, i, j)
                out[m + i * n + j] = 3.4 * u - uuv + alpha * lap(y, m, i, j)
        return out

    @numba.njit(cache=False)
    def analytic_data(y, indptr, indices):
        """The nonzeros of the analytic Jacobian, in the CSR order of (indptr, indices)."""
        data = np.zeros(indices.shape[0])
        for r in range(2 * m):
            block = r // m
            c = r % m
            i, j = c // n, c % n
            u = y[c]
            v = y[m + c]
            for p in range(indptr[r], indptr[r + 1]):
                col = indices[p]
                cb = col // m
                cc = col % m
                d = 0.0
                if cb == block:
                    if cc == c:
                        d = -4.0 * alpha
                    else:
                        ci, cj = cc // n, cc % n
                        if (ci == (i + 1) % n or ci == (i - 1) % n) and cj == j:
                            d = alpha
                        if ci == i and (cj == (j + 1) % n or cj == (j - 1) % n):
                            d = alpha
                if cc == c:
                    if block == 0 and cb == 0:
                        d += 2.0 * u * v - 4.4
                    elif block == 0:
                        d += u * u
                    elif cb == 0:
                        d += 3.4 - 2.0 * u * v
                    else:
                        d -= u * u
                data[p] = d
        return data

    return model, analytic_data


def _csr(data, indices, indptr, shape):
    import scipy.sparse as sp

    return sp.csr_array((data, indices, indptr), shape=shape)


def _err(ref):
    def check(result):
        dense = result.toarray() if hasattr(result, "toarray") else np.asarray(result)
        return {"max abs err": f"{np.max(np.abs(dense - ref)):.1e}"}

    return check


def _lorenz96_rows(bench, sizes):
    model, analytic_dense, analytic_data = _lorenz96_functions()
    rng = np.random.default_rng(1)
    for n in sizes:
        x = rng.standard_normal(n) + 8.0
        ref = analytic(x)
        indptr, indices, slots = _l96_pattern(n)
        case = f"Lorenz-96 n={n}"

        def sparse_analytic(x=x, indptr=indptr, indices=indices, slots=slots, n=n):
            return lambda: _csr(analytic_data(x, slots), indices, indptr, (n, n))

        def ours(x=x):
            ad = require_dualad()
            jac = ad.sparse_jacobian(model)
            jac(x)
            return lambda: jac(x)

        def dense(x=x):
            ad = require_dualad()
            jac = ad.jacobian(model)
            return lambda: jac(x)

        def jax_jacfwd(x=x):
            jax = require("jax")
            jac = jax.jit(jax.jacfwd(lambda y: lorenz96(y, jax.numpy.roll)))
            xj = jax.numpy.asarray(x)
            return lambda: jac(xj).block_until_ready()

        for method, kind, make, peer_name in (
            ("analytic @njit (dense)", BASELINE, lambda x=x: lambda: analytic_dense(x), None),
            ("analytic @njit (sparse CSR)", REFERENCE, sparse_analytic, None),
            ("dualad sparse_jacobian(@njit model)", DUALAD, ours, None),
            ("dualad jacobian(@njit model) dense", DUALAD, dense, None),
            ("jax.jit(jacfwd) numpy form", PEER, jax_jacfwd, "jax"),
        ):
            bench.time(case, method, kind, make, size=n, check=_err(ref), peer_name=peer_name,
                       panel="Lorenz-96")


def _brusselator_rows(bench, n):
    ad = require_dualad()
    model, analytic_data = _brusselator_functions(n)
    y = np.concatenate([1.0 + 0.1 * np.random.default_rng(2).standard_normal(n * n),
                        3.0 + 0.1 * np.random.default_rng(3).standard_normal(n * n)])
    states = 2 * n * n
    pattern = ad.jacobian_sparsity(model)(y)
    indptr, indices = pattern.indptr, pattern.indices
    ref = _csr(analytic_data(y, indptr, indices), indices, indptr, pattern.shape).toarray()
    k = int(ad.color_columns(pattern).max()) + 1
    case = f"2-D Brusselator N={n} ({states} states)"

    def ours():
        jac = ad.sparse_jacobian(model)
        jac(y)
        return lambda: jac(y)

    extra = {"colours": str(k)}
    bench.time(case, "analytic @njit (sparse CSR)", BASELINE,
               lambda: lambda: _csr(analytic_data(y, indptr, indices), indices, indptr,
                                    pattern.shape),
               size=states, check=_err(ref), extra=extra, panel="2-D Brusselator")
    bench.time(case, "dualad sparse_jacobian(@njit model)", DUALAD, ours, size=states,
               check=_err(ref), extra=extra, panel="2-D Brusselator")


def run(quick: bool = False):
    """Lorenz-96 at n = 100, 1000 (quick: 100), the 2-D Brusselator at N = 32."""
    bench = Bench("sparse_njit")
    try:
        import numba  # noqa: F401
    except ImportError as exc:
        note(f"sparse_njit: numba not installed ({exc}); skipped")
        return bench.rows
    _lorenz96_rows(bench, (100,) if quick else (100, 1000))
    _brusselator_rows(bench, 32)
    return bench.rows
