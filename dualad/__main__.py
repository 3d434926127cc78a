"""``python -m dualad``: a short demonstration on built-in examples (no downloads).

1. a plain numpy function differentiated in both modes and checked with ``gradcheck``;
2. the dense Jacobian of the Lorenz-96 right-hand side against its analytic Jacobian;
3. a stiff ODE (the 1-D Brusselator) solved with scipy's BDF, using dualad's Jacobian
   versus scipy's own finite differences.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dualad as ad
from dualad.gradcheck import numerical_jacobian


def _best_time(f: Callable[[], Any], budget: float = 0.3) -> float:
    f()
    best = float("inf")
    deadline = time.perf_counter() + budget
    while True:
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
        if time.perf_counter() > deadline:
            return best


def _row(*cells: Any) -> None:
    print("  " + " | ".join(f"{c:<22}" if i == 0 else f"{c:>14}" for i, c in enumerate(cells)))


def demo_gradient() -> None:
    print("1. f(x) = sum(sin(x) * x**2), x = linspace(-1, 2, 5)")

    def f(x: np.ndarray) -> Any:
        return np.sum(np.sin(x) * x ** 2)

    x = np.linspace(-1.0, 2.0, 5)
    analytic = np.cos(x) * x ** 2 + 2 * x * np.sin(x)
    g_rev = ad.grad(f)(x)
    g_fwd = ad.jacobian(f, mode="forward")(x)
    fd = numerical_jacobian(f, (x,), 0)
    _row("method", "max |err|", "time (us)")
    _row("reverse (ad.grad)", f"{np.max(np.abs(g_rev - analytic)):.1e}",
         f"{_best_time(lambda: ad.grad(f)(x)) * 1e6:.1f}")
    _row("forward (ad.jacobian)", f"{np.max(np.abs(g_fwd - analytic)):.1e}",
         f"{_best_time(lambda: ad.jacobian(f, mode='forward')(x)) * 1e6:.1f}")
    _row("central differences", f"{np.max(np.abs(fd - analytic)):.1e}",
         f"{_best_time(lambda: numerical_jacobian(f, (x,), 0)) * 1e6:.1f}")
    print(f"  gradcheck (forward and reverse): {ad.gradcheck(f, x)}")


def lorenz96(x: np.ndarray, forcing: float = 8.0) -> Any:
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + forcing


def lorenz96_jacobian(x: np.ndarray) -> np.ndarray:
    n = x.size
    jac = -np.eye(n)
    i = np.arange(n)
    jac[i, (i + 1) % n] += x[(i - 1) % n]
    jac[i, (i - 2) % n] -= x[(i - 1) % n]
    jac[i, (i - 1) % n] += x[(i + 1) % n] - x[(i - 2) % n]
    return jac


def demo_lorenz96() -> None:
    n = 100
    print(f"\n2. Lorenz-96 right-hand side, n = {n}: dense Jacobian")
    x = np.random.default_rng(0).standard_normal(n) + 8.0
    exact = lorenz96_jacobian(x)
    _row("method", "max |err|", "time (us)")
    for label, jac in (("dualad forward", ad.jacobian(lorenz96, mode="forward")),
                       ("dualad reverse", ad.jacobian(lorenz96, mode="reverse"))):
        _row(label, f"{np.max(np.abs(jac(x) - exact)):.1e}",
             f"{_best_time(lambda jac=jac: jac(x)) * 1e6:.1f}")
    _row("central differences",
         f"{np.max(np.abs(numerical_jacobian(lorenz96, (x,), 0) - exact)):.1e}",
         f"{_best_time(lambda: numerical_jacobian(lorenz96, (x,), 0)) * 1e6:.1f}")
    _row("analytic (hand-written)", "0", f"{_best_time(lambda: lorenz96_jacobian(x)) * 1e6:.1f}")


def brusselator(t: float, y: np.ndarray, a: float = 1.0, b: float = 3.0,
                alpha: float = 0.02) -> Any:
    n = y.size // 2
    u, v = y[:n], y[n:]
    dx2 = (1.0 / (n + 1)) ** 2
    u_left = np.concatenate([np.ones(1), u[:-1]])
    u_right = np.concatenate([u[1:], np.ones(1)])
    v_left = np.concatenate([np.full(1, 3.0), v[:-1]])
    v_right = np.concatenate([v[1:], np.full(1, 3.0)])
    du = a + u * u * v - (b + 1.0) * u + alpha * (u_left - 2 * u + u_right) / dx2
    dv = b * u - u * u * v + alpha * (v_left - 2 * v + v_right) / dx2
    return np.concatenate([du, dv])


def demo_stiff_ode() -> None:
    try:
        from scipy.integrate import solve_ivp
    except ImportError:
        print("\n3. stiff ODE: skipped (scipy is not installed: pip install scipy)")
        return
    n = 100
    print(f"\n3. stiff ODE: 1-D Brusselator, {2 * n} states, scipy BDF on t in [0, 10]")
    grid = np.arange(1, n + 1) / (n + 1)
    y0 = np.concatenate([1 + np.sin(2 * np.pi * grid), np.full(n, 3.0)])
    jac = ad.ode_jacobian(brusselator, mode="forward")
    fd = numerical_jacobian(lambda y: brusselator(0.0, y), (y0,), 0)
    print(f"  Jacobian at y0: max |dualad - central differences| = "
          f"{np.max(np.abs(jac(0.0, y0) - fd)):.1e}")
    _row("jac=", "best wall (s)", "nfev / njev")
    results = {}
    for label, j in (("None (scipy differences)", None), ("ad.ode_jacobian", jac)):
        if sys.stderr.isatty():
            print(f"  ... solving with jac={label}", end="\r", file=sys.stderr, flush=True)
        else:
            print(f"  ... solving with jac={label}", file=sys.stderr, flush=True)
        wall = float("inf")
        for _ in range(2):  # the best of two runs: the first also warms caches up
            start = time.perf_counter()
            sol = solve_ivp(brusselator, (0.0, 10.0), y0, method="BDF", jac=j, rtol=1e-6,
                            atol=1e-8)
            wall = min(wall, time.perf_counter() - start)
        if sys.stderr.isatty():
            print(" " * 60, end="\r", file=sys.stderr, flush=True)
        results[label] = sol.y[:, -1]
        _row(label, f"{wall:.2f}", f"{sol.nfev} / {sol.njev}")
    a, b = results.values()
    print(f"  final states agree to {np.max(np.abs(a - b)):.1e}")


def main() -> None:
    """Run the three demonstrations (about ten seconds)."""
    start = time.perf_counter()
    demo_gradient()
    demo_lorenz96()
    demo_stiff_ode()
    print(f"\ndone in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
