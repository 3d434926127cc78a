"""Per-operation overhead: forward + backward through a chain of scalar elementwise ops."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, Bench, jit, require, require_dualad, to_numpy

TITLE = "per-op overhead of a scalar elementwise chain (times are µs per op)"
XLABEL = "ops in the chain"
DESCRIPTION = """
A chain of n scalar operations cycling np.sin, * 1.0001, + 0.1, starting at x = 0.5;
gradient (forward + backward pass) of the final value: eager ad.grad, and
ad.jit(ad.grad(chain)) (compiled at the untimed first call: straight-line Numba code, or the
compiled interpreter beyond the compile-cost cap). Every time in this table is the
per-call time divided by n, i.e. the cost per recorded operation. Baseline: plain numpy
evaluation of the same chain (forward only, no derivative). max abs err is against the
analytic derivative accumulated by hand.
"""


def chain(x, sin, n):
    """n ops cycling sin, *1.0001, +0.1."""
    for i in range(n):
        r = i % 3
        if r == 0:
            x = sin(x)
        elif r == 1:
            x = x * 1.0001
        else:
            x = x + 0.1
    return x


def exact(x0, n):
    """Value-and-derivative of the chain by hand (for the error column)."""
    x, d = x0, 1.0
    for i in range(n):
        r = i % 3
        if r == 0:
            x, d = np.sin(x), d * np.cos(x)
        elif r == 1:
            x, d = x * 1.0001, d * 1.0001
        else:
            x = x + 0.1
    return d


def methods(n, x0):
    """(name, kind, make, peer) for a chain of length n."""

    def numpy_eval():
        return lambda: chain(x0, np.sin, n)

    def dualad_grad():
        ad = require_dualad()
        g = ad.grad(lambda x: chain(x, np.sin, n))
        return lambda: g(x0)

    def dualad_jit():
        ad = require_dualad()
        g = jit(ad.grad(lambda x: chain(x, np.sin, n)))
        return lambda: g(x0)

    def torch_grad():
        torch = require("torch")

        def fn():
            x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
            return torch.autograd.grad(chain(x, torch.sin, n), x)[0]

        return fn

    def jax_grad(jit):
        def make():
            jax = require("jax")
            g = jax.grad(lambda x: chain(x, jax.numpy.sin, n))
            if jit:
                g = jax.jit(g)
            x = jax.numpy.asarray(x0)
            return lambda: g(x).block_until_ready()

        return make

    def autograd_grad():
        autograd = require("autograd")
        g = autograd.grad(lambda x: chain(x, autograd.numpy.sin, n))
        return lambda: g(x0)

    return [
        ("numpy forward only", BASELINE, numpy_eval, None),
        ("dualad grad", DUALAD, dualad_grad, None),
        ("ad.jit(grad)", DUALAD, dualad_jit, None),
        ("torch", PEER, torch_grad, "torch"),
        ("autograd", PEER, autograd_grad, "autograd"),
        ("jax grad (no jit)", PEER, jax_grad(False), "jax"),
        ("jax.jit(grad)", PEER, jax_grad(True), "jax"),
    ]


def run(quick: bool = False):
    """Rows for chains of 100 ops (and 10, 1000 unless quick)."""
    bench = Bench("op_chain")
    x0 = 0.5
    for n in (100,) if quick else (10, 100, 1000):
        want = exact(x0, n)

        def check(r, want=want):
            return {"max abs err": f"{abs(float(to_numpy(r)) - want):.1e}"}

        for method, kind, make, peer_name in methods(n, x0):
            bench.time(
                f"n={n} ops",
                method,
                kind,
                make,
                size=n,
                scale=1.0 / n,
                check=None if kind == BASELINE else check,
                peer_name=peer_name,
            )
    return bench.rows
