"""Dense Jacobian of the vectorised Lorenz-96 right-hand side."""

from __future__ import annotations

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    PEER,
    REFERENCE,
    Bench,
    jit,
    max_abs_err,
    note,
    require,
    require_dualad,
)

TITLE = "dense Jacobian of Lorenz-96, f(x) = (roll(x,-1) - roll(x,2)) * roll(x,1) - x + 8"
XLABEL = "n (states)"
DESCRIPTION = """
Full n x n Jacobian of the Lorenz-96 right-hand side written with np.roll, at a random
point. Baseline: the analytic Jacobian filled in with numpy fancy indexing. References:
the same analytic Jacobian as a numba loop, and central finite differences (all 2n
perturbed points in one batched call). dualad: eager ad.jacobian (forward and reverse
mode), and ad.jit(ad.jacobian(f)) (compiled at the untimed first call, as jax.jit is).
max abs err is against the analytic Jacobian.
"""


def lorenz96(x, roll=np.roll):
    """Lorenz-96 right-hand side (forcing 8)."""
    return (roll(x, -1) - roll(x, 2)) * roll(x, 1) - x + 8.0


def analytic(x):
    """Analytic Jacobian with numpy indexing."""
    n = x.shape[0]
    i = np.arange(n)
    jac = np.zeros((n, n))
    jac[i, (i + 1) % n] = x[i - 1]
    jac[i, (i - 2) % n] = -x[i - 1]
    jac[i, (i - 1) % n] = x[(i + 1) % n] - x[i - 2]
    jac[i, i] = -1.0
    return jac


def _numba():
    try:
        import numba
    except ImportError as exc:
        raise ImportError("numba not installed") from exc

    from .lorenz96_loops import analytic_loop

    jac_loop = numba.njit(cache=False)(analytic_loop)
    return jac_loop


def central_fd(f, x):
    """Central differences, all 2n points in one call of a batched f (rows are points)."""
    h = np.cbrt(np.finfo(float).eps) * np.maximum(1.0, np.abs(x))
    steps = np.diag(h)
    up, down = f(x + steps), f(x - steps)  # row j: f at x +/- h_j e_j
    return ((up - down) / (2 * h)[:, None]).T


def _batched(x):
    return lorenz96(x, lambda a, s: np.roll(a, s, axis=-1))


def methods(x):
    """(name, kind, make, peer) for the point x."""

    def dualad_jac(mode):
        def make():
            ad = require_dualad()
            jac = ad.jacobian(lorenz96, mode=mode)
            return lambda: jac(x)

        return make

    def dualad_jit():
        ad = require_dualad()
        jac = jit(ad.jacobian(lorenz96))
        return lambda: jac(x)

    def numba_jac():
        fn = _numba()
        return lambda: fn(x)

    def jax_jac(which):
        def make():
            jax = require("jax")
            jac = jax.jit(getattr(jax, which)(lambda y: lorenz96(y, jax.numpy.roll)))
            xj = jax.numpy.asarray(x)
            return lambda: jac(xj).block_until_ready()

        return make

    def torch_jacfwd():
        torch = require("torch")
        jac = torch.func.jacfwd(lambda y: lorenz96(y, torch.roll))
        xt = torch.from_numpy(x)
        return lambda: jac(xt)

    def autograd_jac():
        autograd = require("autograd")
        jac = autograd.jacobian(lambda y: lorenz96(y, autograd.numpy.roll))
        return lambda: jac(x)

    return [
        ("analytic numpy", BASELINE, lambda: lambda: analytic(x), None),
        ("analytic numba", REFERENCE, numba_jac, None),
        ("central FD (batched)", REFERENCE, lambda: lambda: central_fd(_batched, x), None),
        ("dualad jacobian forward", DUALAD, dualad_jac("forward"), None),
        ("dualad jacobian reverse", DUALAD, dualad_jac("reverse"), None),
        ("ad.jit(jacobian)", DUALAD, dualad_jit, None),
        ("jax.jit(jacfwd)", PEER, jax_jac("jacfwd"), "jax"),
        ("jax.jit(jacrev)", PEER, jax_jac("jacrev"), "jax"),
        ("torch.func.jacfwd", PEER, torch_jacfwd, "torch"),
        ("autograd.jacobian", PEER, autograd_jac, "autograd"),
    ]


def run(quick: bool = False):
    """Rows for n = 10, 100, 1000 (quick: 10, 100)."""
    bench = Bench("lorenz96")
    rng = np.random.default_rng(1)
    sizes = (10, 100) if quick else (10, 100, 1000)
    note("lorenz96: numba and jax.jit times exclude compilation (done in the untimed warm-up)")
    for n in sizes:
        x = rng.standard_normal(n) + 8.0
        check = max_abs_err(analytic(x))
        for method, kind, make, peer_name in methods(x):
            bench.time(f"n={n}", method, kind, make, size=n, check=check, peer_name=peer_name)
    return bench.rows
