"""Test problems for the sparse tests: plain numpy functions of one flat array."""

from __future__ import annotations

import numpy as np


def brusselator2d(n):
    """2-D Brusselator on an n x n periodic grid (np.roll Laplacian); 2n² states."""
    m = n * n
    a_, b_, alpha = 3.4, 1.0, 10.0

    def lap(a):
        return (np.roll(a, 1, -2) + np.roll(a, -1, -2) + np.roll(a, 1, -1)
                + np.roll(a, -1, -1) - 4 * a) * (n * n)

    def f(y):
        u = np.reshape(y[:m], (n, n))
        v = np.reshape(y[m:], (n, n))
        uuv = u * u * v
        du = b_ + uuv - (a_ + 1) * u + alpha * lap(u)
        dv = a_ * u - uuv + alpha * lap(v)
        return np.concatenate([np.reshape(du, (m,)), np.reshape(dv, (m,))])

    return f


def brusselator1d(n):
    """1-D Brusselator with Dirichlet ends: constants joined in with concatenate."""
    one, three = np.ones(1), 3.0 * np.ones(1)
    c = (n + 1) ** 2 / 50.0

    def f(y):
        u, v = y[:n], y[n:]
        lap_u = np.concatenate([one, u[:-1]]) - 2 * u + np.concatenate([u[1:], one])
        lap_v = np.concatenate([three, v[:-1]]) - 2 * v + np.concatenate([v[1:], three])
        uuv = u * u * v
        return np.concatenate([1.0 + uuv - 4.0 * u + c * lap_u, 3.0 * u - uuv + c * lap_v])

    return f


def lorenz96(x, forcing=8.0):
    """Lorenz-96 with np.roll."""
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + forcing


def lorenz96_loop(x, forcing=8.0):
    """Lorenz-96 written entry by entry into an empty_like buffer."""
    n = len(x)
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + forcing
    return out


def rosenbrock(x):
    """The extended Rosenbrock function (scalar)."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_residuals(x):
    """Residuals whose squared norm is the Rosenbrock function."""
    return np.concatenate([10.0 * (x[1:] - x[:-1] ** 2), 1.0 - x[:-1]])


def rosenbrock_hessian(x):
    """Analytic (dense) Hessian of rosenbrock."""
    n = x.size
    h = np.zeros((n, n))
    i = np.arange(n - 1)
    h[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    h[i + 1, i + 1] += 200.0
    h[i, i + 1] = h[i + 1, i] = -400.0 * x[:-1]
    return h


def brusselator1d_loop(y):
    """The 1-D Brusselator with Dirichlet ends, one grid point at a time (u, v interleaved),
    as benchmarks/sparse_detection.py writes it."""
    n = y.shape[0] // 2
    out = np.empty_like(y)
    c = 0.02 * (n + 1.0) ** 2
    for i in range(n):
        u = y[2 * i]
        v = y[2 * i + 1]
        ul = y[2 * i - 2] if i > 0 else 1.0
        ur = y[2 * i + 2] if i < n - 1 else 1.0
        vl = y[2 * i - 1] if i > 0 else 3.0
        vr = y[2 * i + 3] if i < n - 1 else 3.0
        out[2 * i] = 1.0 + u * u * v - 4.0 * u + c * (ul - 2.0 * u + ur)
        out[2 * i + 1] = 3.0 * u - u * u * v + c * (vl - 2.0 * v + vr)
    return out
