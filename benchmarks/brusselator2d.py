"""Jacobian of the 2-D Brusselator reaction-diffusion right-hand side."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    PEER,
    REFERENCE,
    Bench,
    jit,
    max_abs_err,
    require,
    require_dualad,
)

TITLE = "Jacobian of the 2-D Brusselator on an N x N periodic grid (2N² states)"
XLABEL = "states (2N²)"
DESCRIPTION = """
du = B + u²v - (A+1)u + alpha ∇²u, dv = A u - u²v + alpha ∇²v with A = 3.4, B = 1,
alpha = 10, on an N x N periodic grid of spacing 1/N (5-point Laplacian via np.roll);
state y = [u.ravel(), v.ravel()] of length 2N², dense 2N² x 2N² Jacobian at a random
point. Baseline: central finite differences (all perturbed points in one batched call).
Reference: the analytic dense Jacobian. dualad: eager ad.jacobian, and
ad.jit(ad.jacobian(f)) (compiled at the untimed first call, as jax.jit is). max abs err is against the analytic Jacobian.
"""

A, B, ALPHA = 3.4, 1.0, 10.0


def core(u, v, n, roll):
    """(du, dv) for fields u, v whose last two axes are the grid."""

    def lap(a):
        return (roll(a, 1, -2) + roll(a, -1, -2) + roll(a, 1, -1) + roll(a, -1, -1) - 4 * a) * (
            n * n
        )

    uuv = u * u * v
    return B + uuv - (A + 1) * u + ALPHA * lap(u), A * u - uuv + ALPHA * lap(v)


def make_rhs(n, xp=np):
    """f(y) for a flat state of length 2n², using the array namespace xp."""
    m = n * n

    def f(y):
        u = xp.reshape(y[:m], (n, n))
        v = xp.reshape(y[m:], (n, n))
        du, dv = core(u, v, n, xp.roll)
        return xp.concatenate([xp.reshape(du, (m,)), xp.reshape(dv, (m,))])

    return f


def batched_rhs(n):
    """f(Y) for a batch of states (rows)."""
    m = n * n

    def f(ys):
        k = ys.shape[0]
        du, dv = core(ys[:, :m].reshape(k, n, n), ys[:, m:].reshape(k, n, n), n, np.roll)
        return np.concatenate([du.reshape(k, m), dv.reshape(k, m)], axis=1)

    return f


def analytic(y, n):
    """Dense analytic Jacobian."""
    m = n * n
    u, v = y[:m], y[m:]
    t = -2.0 * np.eye(n) + np.roll(np.eye(n), 1, 0) + np.roll(np.eye(n), -1, 0)
    lap = (np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)) * (n * n)
    jac = np.empty((2 * m, 2 * m))
    jac[:m, :m] = ALPHA * lap + np.diag(2 * u * v - (A + 1))
    jac[:m, m:] = np.diag(u * u)
    jac[m:, :m] = np.diag(A - 2 * u * v)
    jac[m:, m:] = ALPHA * lap - np.diag(u * u)
    return jac


def central_fd(fb, y):
    """Central differences with one batched call per side."""
    h = np.cbrt(np.finfo(float).eps) * np.maximum(1.0, np.abs(y))
    steps = np.diag(h)
    return ((fb(y + steps) - fb(y - steps)) / (2 * h)[:, None]).T


def methods(y, n, quick):
    """(name, kind, make, peer) for grid size n."""

    def dualad_jac(mode):
        def make():
            ad = require_dualad()
            jac = ad.jacobian(make_rhs(n), mode=mode)
            return lambda: jac(y)

        return make

    def dualad_jit():
        ad = require_dualad()
        jac = jit(ad.jacobian(make_rhs(n)))
        return lambda: jac(y)

    def jax_jac(which):
        def make():
            jax = require("jax")
            jac = jax.jit(getattr(jax, which)(make_rhs(n, jax.numpy)))
            yj = jax.numpy.asarray(y)
            return lambda: jac(yj).block_until_ready()

        return make

    def torch_jacfwd():
        torch = require("torch")
        tx = SimpleNamespace(roll=torch.roll, reshape=torch.reshape, concatenate=torch.cat)
        jac = torch.func.jacfwd(make_rhs(n, tx))
        yt = torch.from_numpy(y)
        return lambda: jac(yt)

    def autograd_jac():
        autograd = require("autograd")
        jac = autograd.jacobian(make_rhs(n, autograd.numpy))
        return lambda: jac(y)

    fb = batched_rhs(n)
    out = [
        ("central FD (batched)", BASELINE, lambda: lambda: central_fd(fb, y), None),
        ("analytic numpy (dense)", REFERENCE, lambda: lambda: analytic(y, n), None),
        ("dualad jacobian forward", DUALAD, dualad_jac("forward"), None),
        ("ad.jit(jacobian)", DUALAD, dualad_jit, None),
    ]
    if n <= 16:
        out.append(("dualad jacobian reverse", DUALAD, dualad_jac("reverse"), None))
    out += [
        ("jax.jit(jacfwd)", PEER, jax_jac("jacfwd"), "jax"),
        ("jax.jit(jacrev)", PEER, jax_jac("jacrev"), "jax"),
        ("torch.func.jacfwd", PEER, torch_jacfwd, "torch"),
    ]
    if n <= 16 or not quick:
        out.append(("autograd.jacobian", PEER, autograd_jac, "autograd"))
    return out


def run(quick: bool = False):
    """Rows for N = 8, 16, 32 (quick: 8)."""
    bench = Bench("brusselator2d")
    rng = np.random.default_rng(2)
    for n in (8,) if quick else (8, 16, 32):
        y = np.concatenate(
            [1.0 + 0.1 * rng.standard_normal(n * n), 3.0 + 0.1 * rng.standard_normal(n * n)]
        )
        check = max_abs_err(analytic(y, n))
        for method, kind, make, peer_name in methods(y, n, quick):
            bench.time(
                f"N={n} ({2 * n * n} states)",
                method,
                kind,
                make,
                size=2 * n * n,
                check=check,
                peer_name=peer_name,
            )
    return bench.rows
