"""Sparse Jacobians and Hessians: detection, colouring, compressed passes, scipy solves."""

from __future__ import annotations

import numpy as np

from .brusselator2d import ALPHA, A, make_rhs
from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, require, require_dualad

TITLE = "Sparse Jacobians (2-D Brusselator) and sparse Hessians (Rosenbrock)"
XLABEL = "states"
DESCRIPTION = """
The 2-D Brusselator of brusselator2d.py (np.roll Laplacian, periodic N x N grid, 2N² states,
6 nonzeros per Jacobian row) at N = 32 and N = 128. "sparse Jacobian" rows time one
Jacobian as scipy.sparse (CSR) at a random point: baseline scipy
approx_derivative(method="2-point", sparsity=(pattern, groups)) (sparse forward
differences with scipy's column groups); dualad.sparse.sparse_jacobian (pattern and
colouring found by the first, untimed, call; each timed call is one forward pass with one
direction per colour plus one check direction, decompressed into CSR); jax.jit of a
compressed jvp with dualad's colours (vmap of jvp over the seed columns, then the same
gather, all inside jit); the analytic sparse Jacobian; and (N = 32) dualad's dense forward
Jacobian. "detection + colouring" rows time jacobian_sparsity + color_columns from scratch
against scipy's group_columns on the known pattern (colouring only); the colours column
gives both counts. asdex (JAX's automatic sparse differentiation, its own detection and
colouring) has a row when it is installed (it is not a dependency). "solve_ivp BDF" times whole solves (interleaved rounds) with
jac_sparsity=pattern (scipy's sparse finite differences, the baseline) and with
jac=ad.ode_jacobian(f, sparse=True). "sparse Hessian" times dualad.sparse.sparse_hessian of
the extended Rosenbrock function at n = 10⁴ against one dualad gradient (the baseline).
"""


def _point(n, seed=2):
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [1.0 + 0.1 * rng.standard_normal(n * n), 3.0 + 0.1 * rng.standard_normal(n * n)]
    )


def analytic_sparse(y, n):
    """The analytic Jacobian as scipy.sparse CSR."""
    import scipy.sparse as sp

    m = n * n
    u, v = y[:m], y[m:]
    e = sp.identity(n, format="csr")
    t = (-2.0 * e + sp.eye(n, k=1) + sp.eye(n, k=-1) + sp.eye(n, k=n - 1)
         + sp.eye(n, k=-(n - 1)))
    lap = (sp.kron(t, e) + sp.kron(e, t)) * (n * n)
    return sp.block_array(
        [[ALPHA * lap + sp.diags(2 * u * v - (A + 1)), sp.diags(u * u)],
         [sp.diags(A - 2 * u * v), ALPHA * lap - sp.diags(u * u)]], format="csr")


def _err(ref):
    def check(result):
        import scipy.sparse as sp

        if not sp.issparse(result):  # a JAX sparse or dense array (asdex)
            dense = result.todense() if hasattr(result, "todense") else result
            result = sp.csr_array(np.asarray(dense))
        diff = abs(result - ref)
        return {"max abs err": f"{diff.max() if diff.nnz else 0.0:.1e}"}

    return check


def _jacobian_rows(bench, n, quick):
    import scipy.sparse as sp
    from scipy.optimize._numdiff import approx_derivative, group_columns

    ad = require_dualad()
    from dualad.sparse import color_columns, jacobian_sparsity, sparse_jacobian

    f = make_rhs(n)
    y = _point(n)
    states = 2 * n * n
    case = f"N={n} ({states} states)"
    ref = analytic_sparse(y, n)
    pattern = jacobian_sparsity(f)(y)
    colors = min((color_columns(pattern, order=o) for o in ("largest_first", "smallest_last")),
                 key=lambda c: c.max())  # the colouring sparse_jacobian uses
    groups = group_columns(pattern)
    k = int(colors.max()) + 1
    check = _err(ref)

    def scipy_fd():
        return lambda: sp.csr_array(approx_derivative(f, y, method="2-point",
                                                      sparsity=(pattern, groups)))

    def dualad_sparse():
        jac = sparse_jacobian(f)
        jac(y)  # detection and colouring: not timed here
        return lambda: jac(y)

    def jax_compressed():
        jax = require("jax")
        jnp = jax.numpy
        fj = make_rhs(n, jnp)
        seed = np.zeros((states, k))
        seed[np.arange(states), colors] = 1.0
        rows = np.repeat(np.arange(states), np.diff(pattern.indptr))
        take = jnp.asarray(rows * k + colors[pattern.indices])
        seed_j = jnp.asarray(seed)

        @jax.jit
        def data(v):
            comp = jax.vmap(lambda s: jax.jvp(fj, (v,), (s,))[1], in_axes=1, out_axes=1)(seed_j)
            return comp.reshape(-1)[take]

        yj = jnp.asarray(y)

        def call():
            d = np.asarray(data(yj).block_until_ready())
            return sp.csr_array((d, pattern.indices, pattern.indptr), shape=pattern.shape)

        return call

    def asdex_jacobian():
        jax = require("jax")
        asdex = require("asdex")
        fj = make_rhs(n, jax.numpy)
        try:
            jac = jax.jit(asdex.jacobian(fj, input_shape=states))
        except TypeError:  # older releases take a sample input
            jac = jax.jit(asdex.jacobian(fj, jax.numpy.asarray(y)))
        yj = jax.numpy.asarray(y)
        return lambda: jax.block_until_ready(jac(yj))

    extra = {"colours": f"dualad {k}, scipy groups {int(groups.max()) + 1}"}
    methods = [
        ("scipy approx_derivative(sparsity=)", BASELINE, scipy_fd, None),
        ("analytic sparse", REFERENCE, lambda: lambda: analytic_sparse(y, n), None),
        ("dualad sparse_jacobian", DUALAD, dualad_sparse, None),
        ("jax.jit compressed jvp", PEER, jax_compressed, "jax"),
        ("asdex jax.jit(asdex.jacobian)", PEER, asdex_jacobian, "asdex"),
    ]
    def dense():
        jac = ad.jacobian(f, mode="forward")
        return lambda: sp.csr_array(jac(y))

    if n <= 32:
        methods.append(("dualad jacobian (dense, forward)", DUALAD, dense, None))
    for name, kind, make, peer_name in methods:
        bench.time(f"{case} sparse Jacobian", name, kind, make, size=states, check=check,
                   extra=extra, peer_name=peer_name, panel="sparse Jacobian")


def _detection_rows(bench, n):
    from scipy.optimize._numdiff import group_columns

    from dualad.sparse import color_columns, jacobian_sparsity

    f = make_rhs(n)
    y = _point(n)
    states = 2 * n * n
    pattern = jacobian_sparsity(f)(y)
    counts = {o: int(color_columns(pattern, order=o).max()) + 1 for o in
              ("natural", "largest_first", "smallest_last")}
    g = int(group_columns(pattern).max()) + 1
    case = f"N={n} ({states} states) detection + colouring"
    extra = {"colours": ", ".join(f"{o} {c}" for o, c in counts.items())
             + f"; scipy groups {g}"}

    def ours():
        def run():
            p = jacobian_sparsity(f)(y)
            return color_columns(p)

        return run

    bench.time(case, "scipy group_columns (colouring only)", BASELINE,
               lambda: lambda: group_columns(pattern), size=states, extra=extra,
               panel="detection", repeat=3, warmup=0)
    bench.time(case, "dualad jacobian_sparsity + color_columns", DUALAD, ours, size=states,
               extra=extra, panel="detection", repeat=3, warmup=0)


def _solve_rows(bench, n, quick):
    from scipy.integrate import solve_ivp

    ad = require_dualad()
    f = make_rhs(n)

    def rhs(t, y):
        return f(y)

    y0 = _point(n, seed=5)
    span = (0.0, 0.5 if quick else 2.0)
    pattern = ad.ode_jacobian(rhs).sparsity(0.0, y0)

    def solve(**jac):
        sol = solve_ivp(rhs, span, y0, method="BDF", rtol=1e-6, atol=1e-8, **jac)
        if not sol.success:
            raise RuntimeError(sol.message)
        return sol

    ref = solve(jac_sparsity=pattern).y[:, -1]

    def check(sol):
        return {"nfev": str(sol.nfev), "njev": str(sol.njev), "nlu": str(sol.nlu),
                "final rel diff": f"{np.max(np.abs(sol.y[:, -1] - ref) / np.abs(ref)):.1e}"}

    def sparse_jac():
        jac = ad.ode_jacobian(rhs, sparse=True)
        jac(0.0, y0)
        return lambda: solve(jac=jac)

    bench.time_interleaved(
        f"N={n} ({2 * n * n} states) solve_ivp BDF t={span}",
        [("jac_sparsity=pattern (scipy FD)", BASELINE, lambda: lambda: solve(
            jac_sparsity=pattern), None),
         ("jac=ode_jacobian(f, sparse=True)", DUALAD, sparse_jac, None)],
        repeat=2 if quick else 3, size=2 * n * n, check=check)


def rosenbrock(x):
    """The extended Rosenbrock function."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    """Analytic sparse Hessian of rosenbrock."""
    import scipy.sparse as sp

    d = np.zeros(x.size)
    d[:-1] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    d[1:] += 200.0
    off = -400.0 * x[:-1]
    return sp.diags([off, d, off], [-1, 0, 1], format="csr")


def _hessian_rows(bench, n):
    ad = require_dualad()
    from dualad.sparse import sparse_hessian

    x = np.random.default_rng(7).uniform(-1.0, 1.0, n)
    ref = rosenbrock_hessian(x)
    case = f"n={n} Rosenbrock sparse Hessian"

    def ours():
        hess = sparse_hessian(rosenbrock)
        hess(x)
        return lambda: hess(x)

    def check(result):
        if hasattr(result, "nnz"):
            sym = abs(result - result.T)
            return {"max abs err": f"{abs(result - ref).max():.1e}",
                    "symmetric": str(sym.nnz == 0 or sym.max() == 0.0)}
        return {}

    gradient = ad.grad(rosenbrock)
    bench.time(case, "dualad grad (one gradient)", BASELINE, lambda: lambda: gradient(x),
               size=n, panel="Hessian")
    bench.time(case, "dualad sparse_hessian", DUALAD, ours, size=n, check=check,
               panel="Hessian")
    bench.time(case, "analytic sparse Hessian", REFERENCE, lambda: lambda: rosenbrock_hessian(x),
               size=n, check=check, panel="Hessian")


def run(quick: bool = False):
    """Rows for N = 32 and 128 (quick: N = 16 and 32), BDF at N = 32, Hessian at n = 10⁴."""
    bench = Bench("sparse_brusselator")
    sizes = (16, 32) if quick else (32, 128)
    for n in sizes:
        _detection_rows(bench, n)
        _jacobian_rows(bench, n, quick)
    _solve_rows(bench, 16 if quick else 32, quick)
    _hessian_rows(bench, 1000 if quick else 10_000)
    return bench.rows
