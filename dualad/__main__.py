"""``python -m dualad``: a short demonstration on built-in examples (no downloads).

1. a plain numpy function differentiated in both modes and checked with ``gradcheck``;
   parameters in a dataclass, a loss returned with diagnostics (``has_aux``);
2. a simulation Jacobian (the Lorenz-96 right-hand side): dualad, eager and compiled
   (``ad.jit``), against central finite differences and the hand-written Jacobian, in
   accuracy and time;
3. a stiff ODE (the 1-D Brusselator) solved with scipy's BDF: ``jac=`` from dualad against
   scipy's own finite differences and a hand-written Jacobian.

Every timing is the best of repeated runs on this machine; ratios are against the
hand-written derivative (the fastest a person can do by working it out).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

__all__ = ["main", "demo_gradient", "demo_lorenz96", "demo_stiff_ode", "lorenz96",
           "lorenz96_jacobian", "brusselator", "brusselator_jacobian"]


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
    print("  " + " | ".join(f"{c:<24}" if i == 0 else f"{c:>13}" for i, c in enumerate(cells)))


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

    @dataclasses.dataclass
    class Model:  # parameters in a dataclass: gradients come back as a Model
        w: np.ndarray
        b: float

    def loss(p: Model, x: np.ndarray, y: np.ndarray) -> Any:
        residual = np.tanh(p.w * x + p.b) - y
        return np.mean(residual ** 2), {"max residual": np.max(np.abs(residual))}

    g, aux = ad.grad(loss, has_aux=True)(Model(np.full(5, 0.5), 0.1), x, np.sin(x))
    print(f"  a dataclass of parameters and has_aux=True: grad is a {type(g).__name__} "
          f"(w {np.round(g.w, 3)}, b {float(g.b):.3f}); aux {aux['max residual']:.3f}")


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
    print(f"\n2. a simulation Jacobian: the Lorenz-96 right-hand side, n = {n} (dense {n}x{n})")
    x = np.random.default_rng(0).standard_normal(n) + 8.0
    exact = lorenz96_jacobian(x)
    hand = _best_time(lambda: lorenz96_jacobian(x))
    _row("method", "max |error|", "time (us)", "vs hand-written")
    _row("hand-written Jacobian", "0 (exact)", f"{hand * 1e6:.1f}", "1.0x")
    compiled = ad.jit(ad.jacobian(lorenz96))
    start = time.perf_counter()
    compiled(x)  # the first call records the program and compiles it (Numba; cached on disk)
    first = time.perf_counter() - start
    for label, jac in (("dualad ad.jacobian(f)", ad.jacobian(lorenz96)),
                       ("ad.jit(ad.jacobian(f))", compiled)):
        t = _best_time(lambda jac=jac: jac(x))
        _row(label, f"{np.max(np.abs(jac(x) - exact)):.1e}", f"{t * 1e6:.1f}",
             f"{t / hand:.1f}x")
    print(f"  (ad.jit's first call, which records and compiles: {first:.2f} s)")
    t = _best_time(lambda: numerical_jacobian(lorenz96, (x,), 0))
    _row("central differences",
         f"{np.max(np.abs(numerical_jacobian(lorenz96, (x,), 0) - exact)):.1e}",
         f"{t * 1e6:.1f}", f"{t / hand:.1f}x")
    print("  dualad is exact to rounding with no derivative written by hand; finite "
          "differences lose half the digits.")


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


def brusselator_jacobian(t: float, y: np.ndarray, a: float = 1.0, b: float = 3.0,
                         alpha: float = 0.02) -> np.ndarray:
    """The Brusselator's Jacobian, worked out by hand (the yardstick)."""
    n = y.size // 2
    u, v = y[:n], y[n:]
    c = alpha * (n + 1) ** 2
    i = np.arange(n)
    jac = np.zeros((2 * n, 2 * n))
    jac[i, i] = 2 * u * v - (b + 1.0) - 2 * c
    jac[i[1:], i[:-1]] = c
    jac[i[:-1], i[1:]] = c
    jac[i, n + i] = u * u
    jac[n + i, i] = b - 2 * u * v
    jac[n + i, n + i] = -u * u - 2 * c
    jac[n + i[1:], n + i[:-1]] = c
    jac[n + i[:-1], n + i[1:]] = c
    return jac


def demo_stiff_ode() -> None:
    n = 40
    print(f"\n3. an ODE solve: the 1-D Brusselator, {2 * n} states, scipy BDF on t in [0, 10]")
    grid = np.arange(1, n + 1) / (n + 1)
    y0 = np.concatenate([1 + np.sin(2 * np.pi * grid), np.full(n, 3.0)])
    jac = ad.ode_jacobian(brusselator, mode="forward")
    exact = brusselator_jacobian(0.0, y0)
    fd = numerical_jacobian(lambda y: brusselator(0.0, y), (y0,), 0)
    hand = _best_time(lambda: brusselator_jacobian(0.0, y0), 0.2)
    _row("one Jacobian at y0", "max |error|", "time (us)", "vs hand-written")
    _row("hand-written", "0 (exact)", f"{hand * 1e6:.1f}", "1.0x")
    for label, fn in (("ad.ode_jacobian(f)", lambda: jac(0.0, y0)),
                      ("central differences",
                       lambda: numerical_jacobian(lambda y: brusselator(0.0, y), (y0,), 0))):
        t = _best_time(fn, 0.2)
        error = np.max(np.abs((fd if label.startswith("central") else jac(0.0, y0)) - exact))
        _row(label, f"{error:.1e}", f"{t * 1e6:.1f}", f"{t / hand:.1f}x")
    _row("jac=", "best wall (s)", "nfev / njev", "vs hand-written")
    results, walls = {}, {}
    for label, j in (("hand-written", brusselator_jacobian),
                     ("ad.ode_jacobian(f)", jac),
                     ("None (scipy differences)", None)):
        if sys.stderr.isatty():
            print(f"  ... solving with jac={label}", end="\r", file=sys.stderr, flush=True)
        wall = float("inf")
        for _ in range(2):  # the best of two runs: the first also warms caches up
            start = time.perf_counter()
            sol = solve_ivp(brusselator, (0.0, 10.0), y0, method="BDF", jac=j, rtol=1e-6,
                            atol=1e-8)
            wall = min(wall, time.perf_counter() - start)
        if sys.stderr.isatty():
            print(" " * 60, end="\r", file=sys.stderr, flush=True)
        results[label], walls[label] = sol.y[:, -1], wall
        _row(label, f"{wall:.2f}", f"{sol.nfev} / {sol.njev}",
             f"{wall / walls['hand-written']:.2f}x")
    finals = list(results.values())
    spread = max(np.max(np.abs(f - finals[0])) for f in finals[1:])
    print(f"  final states agree to {spread:.1e}: dualad's Jacobian is exact and needs no "
          f"derivation by hand.")


def main() -> None:
    """Run the three demonstrations (about ten seconds on an idle machine)."""
    start = time.perf_counter()
    demo_gradient()
    demo_lorenz96()
    demo_stiff_ode()
    print(f"\ndone in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
