"""Gradient of tr(x1 @ x2) with respect to both matrices."""

from __future__ import annotations

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    PEER,
    Bench,
    jit,
    max_abs_err,
    require,
    require_dualad,
    to_numpy,
)

TITLE = "gradient of tr(x1 @ x2) w.r.t. x1 and x2"
XLABEL = "n (matrices n x n)"
DESCRIPTION = """
Reverse-mode gradient of the scalar tr(x1 @ x2) with respect to both n x n arguments
(one call returns both gradients): eager ad.grad, and ad.jit(ad.grad(f)) (compiled at
the untimed first call; where np.trace does not compile the row says ad.jit falls back,
and why). Baseline: hand-written numpy (z = x1 @ x2, then eye @ x2.T and x1.T @ eye). max abs err is against the exact gradients (x2.T, x1.T).
"""


def f_np(a, b):
    """tr(a @ b) in plain numpy (traced by dualad)."""
    return np.trace(a @ b)


def _baseline(x1, x2):
    def fn():
        z = x1 @ x2
        g = np.eye(z.shape[0])
        return z.trace(), (g @ x2.T, x1.T @ g)

    return lambda: fn()[1]


def _dualad(x1, x2):
    ad = require_dualad()
    g = ad.grad(f_np, argnums=(0, 1))
    return lambda: g(x1, x2)


def _dualad_jit(x1, x2):
    ad = require_dualad()
    g = jit(ad.grad(f_np, argnums=(0, 1)))
    return lambda: g(x1, x2)


def _torch(x1, x2):
    torch = require("torch")
    a0, b0 = torch.from_numpy(x1), torch.from_numpy(x2)

    def fn():
        a = a0.detach().requires_grad_(True)
        b = b0.detach().requires_grad_(True)
        return torch.autograd.grad(torch.trace(a @ b), (a, b))

    return fn


def _jax(x1, x2):
    jax = require("jax")
    jnp = jax.numpy
    g = jax.jit(jax.grad(lambda a, b: jnp.trace(a @ b), argnums=(0, 1)))
    a, b = jnp.asarray(x1), jnp.asarray(x2)
    return lambda: jax.block_until_ready(g(a, b))


def _autograd(x1, x2):
    autograd = require("autograd")
    anp = autograd.numpy
    g = autograd.grad(lambda ab: anp.trace(ab[0] @ ab[1]))
    return lambda: g((x1, x2))


METHODS = [
    ("numpy by hand", BASELINE, _baseline, None),
    ("dualad grad", DUALAD, _dualad, None),
    ("ad.jit(grad)", DUALAD, _dualad_jit, None),
    ("torch", PEER, _torch, "torch"),
    ("jax.jit(grad)", PEER, _jax, "jax"),
    ("autograd", PEER, _autograd, "autograd"),
]


def run(quick: bool = False):
    """Rows for n = 30 (and 300 unless quick)."""
    bench = Bench("tr_matmul")
    rng = np.random.default_rng(0)
    for n in (30,) if quick else (30, 300):
        x1, x2 = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        check = max_abs_err(np.stack([x2.T, x1.T]))
        for method, kind, make, peer_name in METHODS:
            bench.time(
                f"n={n}",
                method,
                kind,
                lambda make=make, x1=x1, x2=x2: make(x1, x2),
                size=n,
                check=lambda r, check=check: check(np.stack(to_numpy(tuple(r)))),
                peer_name=peer_name,
            )
    return bench.rows
