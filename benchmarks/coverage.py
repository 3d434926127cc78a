"""What the newly covered functions cost: a convolution loss, a median loss, the Hessian of
a primitive that has only a reverse-mode rule, and ad.grad of an @njit function."""

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
    require,
    require_dualad,
)

TITLE = "newly covered functions: convolve, median, reverse-only primitives, grad of @njit"
XLABEL = "n (inputs)"
DESCRIPTION = """
Four cases, each against a baseline in the same run. (1) gradient of
sum(convolve(x, k, "same") ** 2) for a signal of n entries and a kernel of 9: baseline the
gradient by hand (a correlation of the residual); dualad ad.grad (the convolution is a sum
of 9 shifted copies) and ad.jit(ad.grad(loss)); jax.jit(grad), autograd. (2) gradient of
sum(median(X, axis=1) ** 2) for X of shape (n/10, 10): baseline by hand (the two middle
entries of each sorted row); dualad ad.grad and ad.jit(ad.grad(loss)); jax.jit(grad).
(3) Hessian of sum(softplus(x) ** 2) with softplus a primitive: baseline dualad with a
written forward rule; dualad with only a gradient rule (forward mode from the reverse rule,
one reverse pass per direction), eager and through ad.jit(ad.hessian(f)). (4) gradient of
the Rosenbrock function written as an @njit loop: baseline the gradient by hand in numpy;
dualad ad.grad of the @njit function (compiled forward mode, all directions in one call)
and ad.grad of the same Python function in numpy mode (reverse mode); numba's compile time
is in the untimed warm-up (no ad.jit row: ad.grad of an @njit function is compiled code
already, and ad.jit does not take it). ad.jit rows are compiled at the untimed first call
with fallback="error": where a call does not compile (yet), the row says ad.jit falls back
and why.
"""

KERNEL = np.linspace(-1.0, 1.0, 9) ** 2


def _conv_loss(m):
    def convolve_loss(x):
        return m.sum(m.convolve(x, m.asarray(KERNEL), "same") ** 2)

    return convolve_loss


def _conv_by_hand(x):
    r = np.convolve(x, KERNEL, "same")
    full = np.zeros(x.size + KERNEL.size - 1)
    start = (KERNEL.size - 1) // 2
    full[start:start + x.size] = 2 * r
    return np.convolve(full, KERNEL[::-1], "valid")


def _median_loss(m):
    def median_loss(x):
        return m.sum(m.median(x, axis=1) ** 2)

    return median_loss


def _softplus_primitives():
    """Two copies of softplus as primitives: one with only a gradient rule, one with a
    tangent rule too (registered with dualad.extend's helpers)."""
    require_dualad()
    from dualad import extend

    def softplus_reverse_only(x):
        return np.log1p(np.exp(x))

    def softplus_both(x):
        return np.log1p(np.exp(x))

    rev = extend.primitive(softplus_reverse_only)
    both = extend.primitive(softplus_both)

    def gradient(grad, output, x):
        return (grad / (1.0 + np.exp(-x)),)

    def tangent(x):
        s = 1.0 / (1.0 + np.exp(-x.value))
        return extend.Dual(both(x.value), x.partials * s[..., None], x.tag)

    extend.gradient_rule(rev, both)(gradient)
    extend.tangent_rule(both)(tangent)
    return rev, both


def _sum_of_squares(softplus):
    def softplus_squares(v):
        return np.sum(softplus(v) ** 2)

    return softplus_squares


def _softplus_hessian(x):
    s = 1.0 / (1.0 + np.exp(-x))
    sp = np.log1p(np.exp(x))
    return np.diag(2 * (s * s + sp * s * (1 - s)))


def _rosenbrock_py(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def _rosenbrock_by_hand(x):
    g = np.zeros_like(x)
    d = x[1:] - x[:-1] ** 2
    g[:-1] += -400.0 * x[:-1] * d - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * d
    return g


def _jax_grad(make, x):
    jax = require("jax")
    g = jax.jit(jax.grad(make(jax.numpy)))
    xj = jax.numpy.asarray(x)
    return lambda: jax.block_until_ready(g(xj))


def _autograd_grad(make, x):
    autograd = require("autograd")
    g = autograd.grad(make(autograd.numpy))
    return lambda: g(x)


def run(quick: bool = False):
    """Rows for each case at a few sizes (quick: the smaller ones)."""
    ad = require_dualad()
    bench = Bench("coverage")
    rng = np.random.default_rng(28)

    for n in ((100, 1000) if quick else (100, 1000, 10000)):
        x = rng.standard_normal(n)
        check = max_abs_err(_conv_by_hand(x))
        case, panel = f"convolve n={n}", "convolve"
        bench.time(case, "numpy by hand", BASELINE, lambda x=x: lambda: _conv_by_hand(x),
                   size=n, check=check, panel=panel)
        bench.time(case, "dualad grad", DUALAD,
                   lambda x=x: (lambda g: lambda: g(x))(ad.grad(_conv_loss(np))),
                   size=n, check=check, panel=panel)
        bench.time(case, "ad.jit(grad)", DUALAD,
                   lambda x=x: (lambda g: lambda: g(x))(jit(ad.grad(_conv_loss(np)))),
                   size=n, check=check, panel=panel)
        bench.time(case, "jax.jit(grad)", PEER, lambda x=x: _jax_grad(_conv_loss, x),
                   size=n, check=check, peer_name="jax", panel=panel)
        bench.time(case, "autograd grad", PEER, lambda x=x: _autograd_grad(_conv_loss, x),
                   size=n, check=check, peer_name="autograd", panel=panel)

    for n in ((100, 1000) if quick else (100, 1000, 10000)):
        x = rng.standard_normal((n // 10, 10))
        check = max_abs_err(_median_grad_by_hand(x))
        case, panel = f"median n={n}", "median"
        bench.time(case, "numpy by hand", BASELINE,
                   lambda x=x: lambda: _median_grad_by_hand(x), size=n, check=check,
                   panel=panel)
        bench.time(case, "dualad grad", DUALAD,
                   lambda x=x: (lambda g: lambda: g(x))(ad.grad(_median_loss(np))),
                   size=n, check=check, panel=panel)
        bench.time(case, "ad.jit(grad)", DUALAD,
                   lambda x=x: (lambda g: lambda: g(x))(jit(ad.grad(_median_loss(np)))),
                   size=n, check=check, panel=panel)
        bench.time(case, "jax.jit(grad)", PEER, lambda x=x: _jax_grad(_median_loss, x),
                   size=n, check=check, peer_name="jax", panel=panel)

    rev, both = _softplus_primitives()
    for n in ((10, 50) if quick else (10, 50, 200)):
        x = rng.standard_normal(n)
        check = max_abs_err(_softplus_hessian(x))
        case, panel = f"hessian n={n}", "reverse-only primitive"
        for method, kind, prim, compiled in (
                ("dualad, forward rule written", BASELINE, both, False),
                ("dualad, gradient rule only", DUALAD, rev, False),
                ("ad.jit(hessian), gradient rule only", DUALAD, rev, True)):
            bench.time(case, method, kind,
                       lambda x=x, p=prim, compiled=compiled: (lambda h: lambda: h(x))(
                           (jit if compiled else lambda h: h)(
                               ad.hessian(_sum_of_squares(p)))),
                       size=n, check=check, panel=panel)

    import numba

    rosen_njit = numba.njit(_rosenbrock_py)
    for n in ((10, 100) if quick else (10, 100, 1000)):
        x = np.linspace(-1.0, 1.5, n)
        check = max_abs_err(_rosenbrock_by_hand(x))
        case, panel = f"njit grad n={n}", "grad of @njit"
        bench.time(case, "numpy by hand", BASELINE, lambda x=x: lambda: _rosenbrock_by_hand(x),
                   size=n, check=check, panel=panel)
        bench.time(case, "dualad grad(@njit)", DUALAD,
                   lambda x=x: (lambda g: lambda: g(x))(ad.grad(rosen_njit)),
                   size=n, check=check, panel=panel)
        bench.time(case, "dualad grad(py_func), numpy mode", REFERENCE,
                   lambda x=x: (lambda g: lambda: g(x))(ad.grad(_rosenbrock_py)),
                   size=n, check=check, panel=panel)
    return bench.rows


def _median_grad_by_hand(x):
    """d/dx sum(median(x, axis=1) ** 2): 2 m times 1/2 on each of the two middle entries
    (rows of even length)."""
    order = np.argsort(x, axis=1, kind="stable")
    rows = np.arange(x.shape[0])
    m = np.median(x, axis=1)
    g = np.zeros_like(x)
    n = x.shape[1]
    middle = ((n - 1) // 2, n // 2) if n % 2 == 0 else (n // 2,)
    weight = 1.0 / len(middle)
    for col in middle:
        g[rows, order[:, col]] += 2.0 * m * weight
    return g
