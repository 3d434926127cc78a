"""ad.jit: recorded programs compiled with Numba, against hand-written derivatives and jax.jit."""

from __future__ import annotations

import functools
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .common import (
    BASELINE,
    DUALAD,
    PEER,
    REFERENCE,
    Bench,
    Row,
    Skip,
    max_abs_err,
    note,
    require,
    require_dualad,
)
from .lorenz96 import analytic as lorenz96_analytic
from .lorenz96 import lorenz96
from .stiff_problems import PROBLEMS
from .timing import Timing

TITLE = "ad.jit: compiled Jacobians and gradients (Numba) vs hand-written and jax.jit"
XLABEL = "case"
DESCRIPTION = """
The targets of issue 21, each beside its baseline in the same run: the dense Jacobians of
the dense problems of the stiff test set (benchmarks/stiff_problems.py: Robertson, OREGO,
HIRES, POLLU, E5, Van der Pol; 2-20 states, written as their packages write them) from
ad.jit(ad.ode_jacobian(f)) against the hand-written Jacobian (baseline), eager dualad and
jax.jit(jacfwd) of the same code; Lorenz-96 dense Jacobians (n = 10, 100, 1000) against the
analytic numpy Jacobian; the gradient of a 100-op scalar chain against the derivative by
hand; the Hessian-vector product of a function that slices, reverses and fancy-indexes
(n = 50, duplicate indices) against eager ad.hvp (baseline), the tape's Python replay and
jax.jit; 1000 Lorenz-96 Jacobians (n = 40) through .batch; the Python entry cost of a compiled
call over its Numba kernel; compile time cold and from the disk cache (new processes).
jax rows get their input as a jax array and block until ready (their best case); compiled
times exclude compilation (the untimed warm-up).
"""


#: The dense problems of the stiff test set, written as their packages write them.
DENSE = [p for p in PROBLEMS if not p.sparse]


def _jax_ode(rhs_xp):
    jax = require("jax")
    jj = jax.jit(jax.jacfwd(rhs_xp(jax.numpy), argnums=1))
    return jax, jj


def stiff_rows(bench: Bench) -> None:
    for p in DENSE:
        name, f, hand, y0 = p.name, p.rhs, p.jac, p.y0
        case = f"{name} ({y0.size})"
        check = max_abs_err(hand(0.0, y0))

        def compiled(f=f, y0=y0):
            jac = require_dualad().jit(require_dualad().ode_jacobian(f), fallback="error")
            return lambda: jac(0.0, y0)

        def eager(f=f, y0=y0):
            jac = require_dualad().ode_jacobian(f)
            return lambda: jac(0.0, y0)

        def jax_jac(rhs_xp=p.rhs_xp, y0=y0):
            jax, jj = _jax_ode(rhs_xp)
            yj = jax.numpy.asarray(y0)
            return lambda: jj(0.0, yj).block_until_ready()

        bench.time(case, "hand-written Jacobian", BASELINE, lambda hand=hand, y0=y0:
                   lambda: hand(0.0, y0), size=y0.size, check=check)
        bench.time(case, "ad.jit(ode_jacobian)", DUALAD, compiled, size=y0.size, check=check)
        bench.time(case, "ad.ode_jacobian (eager)", DUALAD, eager, size=y0.size, check=check)
        bench.time(case, "jax.jit(jacfwd)", PEER, jax_jac, size=y0.size, check=check,
                   peer_name="jax")


def lorenz_rows(bench: Bench, quick: bool) -> None:
    rng = np.random.default_rng(1)
    for n in (10, 100) if quick else (10, 100, 1000):
        x = rng.standard_normal(n) + 8.0
        check = max_abs_err(lorenz96_analytic(x))
        case = f"Lorenz-96 n={n}"

        def compiled(x=x):
            ad = require_dualad()
            jac = ad.jit(ad.jacobian(lorenz96), fallback="error")
            return lambda: jac(x)

        def eager(x=x):
            jac = require_dualad().jacobian(lorenz96, mode="forward")
            return lambda: jac(x)

        def jax_jac(x=x):
            jax = require("jax")
            jac = jax.jit(jax.jacfwd(lambda y: lorenz96(y, jax.numpy.roll)))
            xj = jax.numpy.asarray(x)
            return lambda: jac(xj).block_until_ready()

        bench.time(case, "analytic numpy", BASELINE, lambda x=x: lambda: lorenz96_analytic(x),
                   size=n, check=check)
        def compiled_ode(x=x):
            ad = require_dualad()
            jac = ad.jit(ad.ode_jacobian(lambda t, y: lorenz96(y)), fallback="error")
            return lambda: jac(0.0, x)

        bench.time(case, "ad.jit(jacobian)", DUALAD, compiled, size=n, check=check)
        bench.time(case, "ad.jit(ode_jacobian) (compressed)", DUALAD, compiled_ode, size=n,
                   check=check)
        bench.time(case, "ad.jacobian forward (eager)", DUALAD, eager, size=n, check=check)
        bench.time(case, "jax.jit(jacfwd)", PEER, jax_jac, size=n, check=check,
                   peer_name="jax")


def brusselator_2d(y, xp=np, N=32):
    """The 2-D Brusselator's right-hand side on an N x N periodic grid."""
    u, v = y[:N * N].reshape(N, N), y[N * N:].reshape(N, N)

    def lap(a):
        return (xp.roll(a, 1, 0) + xp.roll(a, -1, 0) + xp.roll(a, 1, 1)
                + xp.roll(a, -1, 1) - 4 * a) * N * N

    uuv = u * u * v
    return xp.concatenate([(1.0 + uuv - 4.4 * u + 10.0 * lap(u)).ravel(),
                           (3.4 * u - uuv + 10.0 * lap(v)).ravel()])


def brusselator_rows(bench: Bench) -> None:
    import scipy.sparse

    N = 32
    f = brusselator_2d

    y0 = np.concatenate([1 + np.sin(np.linspace(0, 3, N * N)), 3 * np.ones(N * N)])
    ad = require_dualad()
    reference = ad.sparse_jacobian(f)(y0)

    def check(result):
        return {"max abs err": f"{abs(scipy.sparse.csr_array(result) - reference).max():.1e}"}

    def compiled():
        jac = require_dualad().jit(require_dualad().sparse_jacobian(f), fallback="error")
        return lambda: jac(y0)

    def eager():
        jac = require_dualad().sparse_jacobian(f)
        return lambda: jac(y0)

    def jax_compressed():
        jax = require("jax")
        pattern = ad.jacobian_sparsity(f)(y0)
        colors = ad.color_columns(pattern)
        seeds = jax.numpy.asarray(np.eye(colors.max() + 1)[colors])
        jvp = jax.jit(lambda y: jax.vmap(lambda s: jax.jvp(lambda z: f(z, jax.numpy), (y,),
                                                            (s,))[1], 1, 1)(seeds))
        coo = pattern.tocoo()
        rows, cols = coo.row, coo.col
        yj = jax.numpy.asarray(y0)

        def run():
            comp = np.asarray(jvp(yj))
            return scipy.sparse.csr_array((comp[rows, colors[cols]], (rows, cols)),
                                          shape=pattern.shape)

        return run

    case = f"Brusselator 2-D N={N} sparse"
    bench.time(case, "ad.sparse_jacobian (eager)", BASELINE, eager, size=2 * N * N, check=check)
    bench.time(case, "ad.jit(sparse_jacobian)", DUALAD, compiled, size=2 * N * N, check=check)
    bench.time(case, "jax.jit compressed jvp + CSR", PEER, jax_compressed, size=2 * N * N,
               check=check, peer_name="jax")


def mlp_rows(bench: Bench) -> None:
    from . import mlp

    params, x, onehot = mlp.problem(64, 32)
    check = mlp._check(mlp.by_hand(*params, x, onehot))

    def compiled(params, x, onehot):
        ad = require_dualad()
        g = ad.jit(ad.grad(mlp.loss, argnums=(0, 1, 2, 3)), fallback="error")
        return lambda: g(*params, x, onehot)

    def tape(params, x, onehot):
        ad = require_dualad()
        t = ad.record(mlp.loss, *params, x, onehot)
        return lambda: t.grad(*params, x, onehot, argnums=(0, 1, 2, 3))

    case = "MLP 64x32 gradient"
    for method, kind, make, peer_name in [
            ("numpy by hand", BASELINE, mlp._baseline, None),
            ("ad.jit(grad)", DUALAD, compiled, None),
            ("tape.grad (Python replay)", DUALAD, tape, None),
            ("ad.grad (eager)", DUALAD, mlp._dualad, None),
            ("jax.jit(grad)", PEER, mlp._jax, "jax")]:
        bench.time(case, method, kind, lambda make=make: make(params, x, onehot),
                   size=64 * 32, check=check, peer_name=peer_name)


def indexed(x, xp=np):
    """A scalar function that slices, reverses and fancy-indexes (duplicates) its input."""
    idx = np.r_[np.arange(x.shape[0]), np.arange(0, x.shape[0], 2)]
    return (xp.sum(xp.sin(x[1:]) * x[:-1]) + xp.sum(x[::-1] * xp.cos(x))
            + xp.sum(xp.exp(x[idx] * 0.1)))


def indexing_rows(bench: Bench) -> None:
    n = 50
    x = np.linspace(-1.0, 1.0, n)
    v = np.cos(np.arange(n, dtype=float))
    ad = require_dualad()
    check = max_abs_err(ad.hvp(indexed, x, v))

    def eager():
        return lambda: ad.hvp(indexed, x, v)

    def compiled():
        h = ad.jit(lambda x, v: ad.hvp(indexed, x, v), fallback="error")
        return lambda: h(x, v)

    def replay():
        t = ad.record(lambda x, v: ad.hvp(indexed, x, v), x, v)
        return lambda: t(x, v)

    def jax_hvp():
        jax = require("jax")
        f = lambda y: indexed(y, jax.numpy)  # noqa: E731
        h = jax.jit(lambda y, w: jax.jvp(jax.grad(f), (y,), (w,))[1])
        xj, vj = jax.numpy.asarray(x), jax.numpy.asarray(v)
        return lambda: h(xj, vj).block_until_ready()

    case = f"hvp through indexing n={n}"
    bench.time(case, "ad.hvp (eager)", BASELINE, eager, size=n, check=check)
    bench.time(case, "ad.jit(hvp)", DUALAD, compiled, size=n, check=check)
    bench.time(case, "tape replay (the fallback before)", DUALAD, replay, size=n, check=check)
    bench.time(case, "jax.jit(jvp(grad))", PEER, jax_hvp, size=n, check=check,
               peer_name="jax")


def chain(x, n=100):
    """n scalar ops cycling sin, * 1.0001, + 0.1 (as benchmarks/op_chain.py)."""
    for i in range(n):
        r = i % 3
        if r == 0:
            x = np.sin(x)
        elif r == 1:
            x = x * 1.0001
        else:
            x = x + 0.1
    return x


def chain_by_hand(x, n=100):
    d = 1.0
    for i in range(n):
        r = i % 3
        if r == 0:
            x, d = np.sin(x), d * np.cos(x)
        elif r == 1:
            x, d = x * 1.0001, d * 1.0001
        else:
            x = x + 0.1
    return d


def chain_rows(bench: Bench) -> None:
    import math

    x0 = 0.3
    check = max_abs_err(chain_by_hand(x0))

    def hand_floats():
        def grad(x, n=100):
            d = 1.0
            for i in range(n):
                r = i % 3
                if r == 0:
                    x, d = math.sin(x), d * math.cos(x)
                elif r == 1:
                    x, d = x * 1.0001, d * 1.0001
                else:
                    x = x + 0.1
            return d

        return lambda: grad(x0)

    def compiled():
        ad = require_dualad()
        g = ad.jit(ad.grad(chain), fallback="error")
        return lambda: g(x0)

    def tape():
        ad = require_dualad()
        t = ad.record(chain, x0)
        return lambda: t.grad(x0)

    def eager():
        g = require_dualad().grad(chain)
        return lambda: g(x0)

    def jax_grad():
        jax = require("jax")
        g = jax.jit(jax.grad(lambda x: chain_jax(jax, x)))
        xj = jax.numpy.asarray(x0)
        return lambda: g(xj).block_until_ready()

    case = "100-op chain gradient"
    bench.time(case, "by hand (Python floats)", BASELINE, hand_floats, size=100, check=check)
    bench.time(case, "ad.jit(grad)", DUALAD, compiled, size=100, check=check)
    bench.time(case, "tape.grad (Python replay)", DUALAD, tape, size=100, check=check)
    bench.time(case, "ad.grad (eager)", DUALAD, eager, size=100, check=check)
    bench.time(case, "jax.jit(grad)", PEER, jax_grad, size=100, check=check, peer_name="jax")


def chain_jax(jax, x, n=100):
    for i in range(n):
        r = i % 3
        if r == 0:
            x = jax.numpy.sin(x)
        elif r == 1:
            x = x * 1.0001
        else:
            x = x + 0.1
    return x


def chain_vector_loss(x, n):
    return np.sum(chain(x, n))


def rk4_step(p, y, xp=np, h=0.05):
    """One explicit RK4 step of Lotka-Volterra with parameters ``p``."""
    def rhs(y):
        return xp.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])

    k1 = rhs(y)
    k2 = rhs(y + (h / 2) * k1)
    k3 = rhs(y + (h / 2) * k2)
    k4 = rhs(y + h * k3)
    return y + (h / 6) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def rk4_loss(p, steps=200):
    """Lotka-Volterra integrated by explicit RK4 (h = 0.05, ``steps`` steps, a Python loop
    as written), then the final state's squared norm: a function of the 4 parameters."""
    y = np.array([1.0, 0.5])
    for _ in range(steps):
        y = rk4_step(p, y)
    return np.sum(y * y)


def rk4_loss_jax(jnp, p, steps=200):
    """The same with ``jax.lax.fori_loop`` (unrolled, XLA compiles 200 steps for minutes
    and 5 GB): how a JAX user writes it."""
    import jax

    y = jax.lax.fori_loop(0, steps, lambda i, y: rk4_step(p, y, jnp), jnp.array([1.0, 0.5]))
    return jnp.sum(y * y)


def _interpreted():
    """A context in which ad.jit sends every program to the interpreter (the entries are
    built at the first call, inside it)."""
    import contextlib

    from dualad.tape import numba_backend

    @contextlib.contextmanager
    def cap():
        old = numba_backend.MAX_COMPILE_COST
        numba_backend.MAX_COMPILE_COST = 0
        try:
            yield
        finally:
            numba_backend.MAX_COMPILE_COST = old

    return cap()


def interpreter_rows(bench: Bench, quick: bool) -> None:
    """Programs beyond the compile-cost cap (MAX_COMPILE_COST): gradients of 400- and
    1000-op chains of 8-vectors and of an RK4 integration (200 steps, 4 parameters) run
    by the compiled interpreter, against the tape's Python replay (the fallback before,
    baseline), eager mode and jax.jit(grad); on a 100-op chain, which both compile, the
    interpreter against the straight-line compiled code (baseline). ``tape.compile()``'s
    jvp, vjp and hvp of the 1000-op chain by the interpreter, against the tape's replay.
    Then what a new program costs once the interpreter is compiled: its recording,
    lowering, encoding and first call, against the same with the straight-line source
    written in full before the cap refuses it."""
    x = np.linspace(0.1, 0.5, 8)
    p = np.array([1.1, 0.4, 0.1, 0.4])
    problems = [(f"{n}-op chain of 8-vectors grad", functools.partial(chain_vector_loss, n=n),
                 x, lambda jnp, y, n=n: jnp.sum(chain_jax_any(jnp, y, n)))
                for n in (400, 1000)]
    problems.append(("RK4 200 steps grad (params)", rk4_loss, p, rk4_loss_jax))
    for case, f, x0, f_jax in problems:
        ad = require_dualad()
        expected = ad.grad(f)(x0)
        check = max_abs_err(expected)

        def interp(f=f, x0=x0):
            g = require_dualad().jit(require_dualad().grad(f), fallback="error")
            g(x0)
            kernel = g._fast_entry.kernel
            if not kernel.__qualname__.startswith("InterpretedProgram."):
                raise RuntimeError("not interpreted: below the cap")
            return lambda: g(x0)

        def replay(f=f, x0=x0):
            t = require_dualad().record(f, x0)
            return lambda: t.grad(x0)

        def eager(f=f, x0=x0):
            g = require_dualad().grad(f)
            return lambda: g(x0)

        def jax_grad(f_jax=f_jax, x0=x0):
            jax = require("jax")
            g = jax.jit(jax.grad(lambda y: f_jax(jax.numpy, y)))
            xj = jax.numpy.asarray(x0)
            return lambda: g(xj).block_until_ready()

        bench.time(case, "tape.grad (Python replay)", BASELINE, replay, size=x0.size,
                   check=check)
        bench.time(case, "ad.jit(grad) (interpreter)", DUALAD, interp, size=x0.size,
                   check=check)
        bench.time(case, "ad.grad (eager)", DUALAD, eager, size=x0.size, check=check)
        bench.time(case, "jax.jit(grad)", PEER, jax_grad, size=x0.size, check=check,
                   peer_name="jax")
    # both compile: the interpreter against the straight-line code
    f = functools.partial(chain_vector_loss, n=100)
    check = max_abs_err(require_dualad().grad(f)(x))
    case = "100-op chain of 8-vectors grad"

    def straight():
        g = require_dualad().jit(require_dualad().grad(f), fallback="error")
        return lambda: g(x)

    def interp100():
        g = require_dualad().jit(require_dualad().grad(f), fallback="error")
        g(x)
        if not g._fast_entry.kernel.__qualname__.startswith("InterpretedProgram."):
            raise RuntimeError("not interpreted")
        return lambda: g(x)

    def jax100():
        jax = require("jax")
        g = jax.jit(jax.grad(lambda y: jax.numpy.sum(chain_jax_any(jax.numpy, y, 100))))
        xj = jax.numpy.asarray(x)
        return lambda: g(xj).block_until_ready()

    bench.time(case, "ad.jit(grad) (straight-line)", BASELINE, straight, size=8, check=check)
    bench.time(case, "ad.jit(grad) (interpreter)", DUALAD, interp100, size=8, check=check,
               context=_interpreted)
    bench.time(case, "jax.jit(grad)", PEER, jax100, size=8, check=check, peer_name="jax")
    # tape.compile() beyond the cap: jvp, vjp and hvp by the interpreter, against the tape's
    # replay (what served them before)
    ad = require_dualad()
    n = 1000
    case = f"{n}-op chain of 8-vectors, tape.compile()"
    v, c = np.linspace(1.0, 2.0, 8), np.linspace(-1.0, 1.0, 8)
    f = functools.partial(chain, n=n)
    loss = functools.partial(chain_vector_loss, n=n)
    expected = {"jvp": ad.jvp(f, (x,), (v,))[1], "vjp": ad.vjp(f, x)[1](c)[0],
                "hvp": ad.hvp(loss, x, v)}
    calls = {"jvp": lambda t: t.jvp((x,), (v,))[1], "vjp": lambda t: t.vjp(x)[1](c)[0],
             "hvp": lambda t: t.hvp((x,), v)}
    for method in ("jvp", "vjp", "hvp"):
        fn = loss if method == "hvp" else f

        def replayed(fn=fn, method=method):
            tape = require_dualad().record(fn, x)
            return lambda: calls[method](tape)

        def by_interpreter(fn=fn, method=method):
            tape = require_dualad().record(fn, x).compile(fallback="error")
            return lambda: calls[method](tape)

        check = max_abs_err(expected[method])
        bench.time(case, f"tape.{method} (Python replay)", BASELINE, replayed, size=8,
                   check=check)
        bench.time(case, f"tape.compile().{method} (interpreter)", DUALAD, by_interpreter,
                   size=8, check=check)
    # a new program, the interpreter compiled: record, lower, encode, first call; against
    # the same with the straight-line source written and pruned in full before the cap
    # refuses it (as before dualad/tape/cost_bound.py), calls interleaved. Each call's
    # program is new (a constant of its own, in this run and any before), as the disk
    # cache keeps the programs it met.
    fresh = itertools.count(1)
    this_run = time.time_ns()
    for n in (400, 1000):
        case = f"new {n}-op program (8-vectors)"

        def new_program(n=n):
            c = ((this_run + next(fresh)) % 10**12 + 1) * 1e-21
            return lambda y: chain_vector_loss(y + c, n)

        def first_call(new_program=new_program):
            ad = require_dualad()
            ad.jit(ad.grad(new_program()), fallback="error")(x)  # the interpreter compiled
            return lambda: ad.jit(ad.grad(new_program()), fallback="error")(x)

        def written_in_full(new_program=new_program):
            from dualad.tape.cost_bound import CostBound

            ad = require_dualad()

            def call():
                add = CostBound.add
                CostBound.add = lambda self, line, numba=True: 0.0  # never passes the cap
                try:
                    return ad.jit(ad.grad(new_program()), fallback="error")(x)
                finally:
                    CostBound.add = add

            return call

        def encode_only(n=n):
            from dualad.tape import record
            from dualad.tape.interpreter import InterpretedProgram
            from dualad.tape.lowering import lower

            program = record(functools.partial(chain_vector_loss, n=n), x).program
            return lambda: InterpretedProgram(lower(program, [x])).gradient((0,))

        bench.time_interleaved(case, [
            ("ad.jit(grad) first call", DUALAD, first_call, None),
            ("ad.jit(grad) first call, source written in full (before)", BASELINE,
             written_in_full, None),
            ("lower + encode (no call)", REFERENCE, encode_only, None)],
            repeat=7, size=n)


def chain_jax_any(jnp, x, n):
    for i in range(n):
        r = i % 3
        x = jnp.sin(x) if r == 0 else (x * 1.0001 if r == 1 else x + 0.1)
    return x


def batch_rows(bench: Bench, quick: bool) -> None:
    """1000 Lorenz-96 Jacobians (n = 40): the compiled batch loop on one and on two
    threads, against a loop of compiled calls, eager mode and jax.jit(vmap(jacfwd))."""
    import numba

    n, count = 40, 1000
    xs = np.random.default_rng(2).standard_normal((count, n)) + 8.0
    expected = np.stack([lorenz96_analytic(x) for x in xs])
    check = max_abs_err(expected)
    case = f"{count} Lorenz-96 n={n}"

    def compiled_batch(threads):
        def make():
            ad = require_dualad()
            jac = ad.jit(ad.jacobian(lorenz96), fallback="error")
            if numba.config.NUMBA_NUM_THREADS < threads:
                raise Skip(f"Numba has {numba.config.NUMBA_NUM_THREADS} thread(s)")

            def run():
                old = numba.get_num_threads()
                numba.set_num_threads(threads)
                try:
                    return jac.batch(xs)
                finally:
                    numba.set_num_threads(old)

            return run
        return make

    def compiled_loop():
        ad = require_dualad()
        jac = ad.jit(ad.jacobian(lorenz96), fallback="error")
        return lambda: np.stack([jac(x) for x in xs])

    def eager_loop():
        jac = require_dualad().jacobian(lorenz96, mode="forward")
        return lambda: np.stack([jac(x) for x in xs])

    def jax_vmap():
        jax = require("jax")
        jac = jax.jit(jax.vmap(jax.jacfwd(lambda y: lorenz96(y, jax.numpy.roll))))
        xj = jax.numpy.asarray(xs)
        return lambda: jac(xj).block_until_ready()

    bench.time(case, "analytic numpy loop", BASELINE,
               lambda: lambda: np.stack([lorenz96_analytic(x) for x in xs]), size=count,
               check=check)
    bench.time(case, "ad.jit(jacobian).batch, 1 thread", DUALAD, compiled_batch(1),
               size=count, check=check)
    bench.time(case, "ad.jit(jacobian).batch, 2 threads", DUALAD, compiled_batch(2),
               size=count, check=check)
    bench.time(case, "ad.jit(jacobian) loop", DUALAD, compiled_loop, size=count, check=check)
    if not quick:
        bench.time(case, "ad.jacobian loop (eager)", DUALAD, eager_loop, size=count,
                   check=check)
    bench.time(case, "jax.jit(vmap(jacfwd))", PEER, jax_vmap, size=count, check=check,
               peer_name="jax")


def _direct(jitted, args):
    """The Numba kernel behind ``jitted``'s fast call, called with ``args`` directly."""
    kernel = jitted._fast_entry.kernel
    return lambda: kernel(*args)


def entry_rows(bench: Bench) -> None:
    """The Python entry cost: compiled calls against their Numba kernels called directly,
    timed with timeit in interleaved rounds (one round of each per turn), with the
    garbage collector off and then on; the cost is the difference of the medians (and of
    the fastest rounds, which preemption by other processes does not reach)."""
    import gc
    import timeit

    ad = require_dualad()
    name, f, y0 = DENSE[0].name, DENSE[0].rhs, DENSE[0].y0
    x = np.linspace(7.0, 9.0, 10)
    ode = ad.jit(ad.ode_jacobian(f), fallback="error")
    jac = ad.jit(ad.jacobian(lorenz96), fallback="error")
    grad = ad.jit(ad.grad(lambda x: np.sum(np.sin(x) * x)), fallback="error")
    cases = []
    for label, fn, args in [(f"ode_jacobian {name}", ode, (0.0, y0)),
                            ("jacobian Lorenz-96 n=10", jac, (x,)),
                            ("grad, 10 inputs", grad, (x,))]:
        fn(*args)
        cases.append((label, lambda fn=fn, args=args: fn(*args), _direct(fn, args)))
    number, rounds = 2000, 15
    for collect in (False, True):
        for label, jitted, direct in cases:
            samples: dict[str, list[float]] = {"kernel": [], "jit": []}
            for _ in range(rounds):
                if not collect:
                    gc.disable()
                try:
                    samples["kernel"].append(timeit.timeit(direct, number=number) / number)
                    samples["jit"].append(timeit.timeit(jitted, number=number) / number)
                finally:
                    gc.enable()
            case = f"entry: {label}, gc {'on' if collect else 'off'}"
            rows = []
            for key, method, kind in (("kernel", "Numba kernel called directly", BASELINE),
                                      ("jit", "ad.jit call", DUALAD)):
                us = [t * 1e6 for t in samples[key]]
                row = Row("compiled", case, method, kind,
                          Timing(statistics.median(us), min(us), max(us), number, len(us),
                                 tuple(us)), size=1)
                bench.add(row)
                rows.append(row)
            rows[1].extra["over the kernel"] = \
                f"{rows[1].times.median - rows[0].times.median:.3f} µs"
            # the fastest rounds: what is left when no other process preempts either
            rows[1].extra["over the kernel (min)"] = \
                f"{rows[1].times.min - rows[0].times.min:.3f} µs"


_COMPILE = """
import sys, time
sys.path.insert(0, {root!r})
import warnings
import numpy as np, dualad as ad
from benchmarks.compiled import compile_cases
warnings.simplefilter("ignore")
for label, fn, args in compile_cases():
    start = time.perf_counter()
    fn(*args)
    print(label, time.perf_counter() - start)
"""


def compile_cases():
    """(label, compiled function, arguments) whose first call is timed in a new process."""
    ad = require_dualad()
    cases = []
    for p in DENSE:
        cases.append((f"ode_jacobian {p.name} ({p.n})",
                      ad.jit(ad.ode_jacobian(p.rhs), fallback="error"), (0.0, p.y0)))
    cases.append(("grad of the 100-op chain", ad.jit(ad.grad(chain), fallback="error"), (0.3,)))
    cases.append(("jacobian Lorenz-96 n=100", ad.jit(ad.jacobian(lorenz96), fallback="error"),
                  (np.linspace(7, 9, 100),)))
    from . import mlp

    params, x, onehot = mlp.problem(64, 32)
    cases.append(("grad MLP 64x32", ad.jit(ad.grad(mlp.loss, argnums=(0, 1, 2, 3)),
                                           fallback="error"), (*params, x, onehot)))
    y0 = np.concatenate([1 + np.sin(np.linspace(0, 3, 32 * 32)), 3 * np.ones(32 * 32)])
    cases.append(("sparse_jacobian Brusselator N=32",
                  ad.jit(ad.sparse_jacobian(brusselator_2d), fallback="error"), (y0,)))
    for n in (10, 100, 400, 1000):  # 400 and 1000: beyond the compile-cost cap, interpreted
        cases.append((f"grad of a {n}-op chain of 8-vectors",
                      ad.jit(ad.grad(lambda x, n=n: np.sum(chain(x, n))), fallback="warn"),
                      (np.linspace(0.1, 0.5, 8),)))
    from .coverage import _rosenbrock_py

    # last: a compile it starts in the background must not slow the rows after it
    cases.append(("grad of the loop-written Rosenbrock n=100",  # 800 scalar ops, unrolled
                  ad.jit(ad.grad(_rosenbrock_py), fallback="warn"),
                  (np.linspace(-1.0, 1.5, 100),)))
    return cases


_FIRST_SOLVE = """
import sys, time
sys.path.insert(0, {root!r})
import warnings
import numpy as np, dualad as ad
from scipy.integrate import solve_ivp
from benchmarks.compiled import DENSE
warnings.simplefilter("ignore")
p = next(p for p in DENSE if p.name == "POLLU")
jac = {jac}
start = time.perf_counter()
first = jac(p.t_span[0], p.y0) if callable(jac) else None
mid = time.perf_counter()
solve_ivp(p.rhs, p.t_span, p.y0, method="BDF", jac=jac, rtol=p.rtol, atol=p.atol)
print(mid - start, time.perf_counter() - start)
"""


def first_solve_rows(bench: Bench) -> None:
    """A new process's first solve of POLLU with BDF (its first Jacobian included): compiled
    cold in the caller's thread, cold in the background, eager, and scipy's differences."""
    root = str(Path(__file__).resolve().parents[1])
    methods = [("eager ad.ode_jacobian", BASELINE, "ad.ode_jacobian(p.rhs)"),
               ("ad.jit(ode_jacobian)", DUALAD, "ad.jit(ad.ode_jacobian(p.rhs))"),
               ("ad.jit(ode_jacobian, background=True)", DUALAD,
                "ad.jit(ad.ode_jacobian(p.rhs), background=True)"),
               ("jac=None (scipy FD)", REFERENCE, "None")]
    for method, role, jac in methods:
        firsts, solves = [], []
        for _ in range(2):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, DUALAD_KERNEL_CACHE=cache)
                out = subprocess.run([sys.executable, "-c",
                                      _FIRST_SOLVE.format(root=root, jac=jac)],
                                     env=env, capture_output=True, text=True, cwd=root)
            if out.returncode:
                note(f"compiled: first-solve run failed: {out.stderr[-300:]}")
                return
            first, solve = (float(v) * 1e6 for v in out.stdout.split())
            firsts.append(first)
            solves.append(solve)
        for label, us in (("first solve_ivp BDF of POLLU, new process", solves),
                          ("first Jacobian of POLLU, new process", firsts)):
            if jac == "None" and label.startswith("first Jacobian"):
                continue
            bench.add(Row("compiled", label, method, role,
                          Timing(statistics.median(us), min(us), max(us), 1, len(us),
                                 tuple(us))))


def compile_rows(bench: Bench, quick: bool) -> None:
    root = str(Path(__file__).resolve().parents[1])
    runs = {"cold (empty cache)": [], "from the disk cache": []}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DUALAD_KERNEL_CACHE=cache)
        for label in runs:
            for _ in range(1 if quick or label.startswith("cold") else 2):
                out = subprocess.run([sys.executable, "-c", _COMPILE.format(root=root)],
                                     env=env, capture_output=True, text=True, cwd=root)
                if out.returncode:
                    note(f"compiled: compile-time run failed: {out.stderr[-300:]}")
                    return
                runs[label].append([line.rsplit(" ", 1) for line in out.stdout.splitlines()])
    for label, samples in runs.items():
        for i, (case, _) in enumerate(samples[0]):
            seconds = [float(s[i][1]) for s in samples]
            us = [v * 1e6 for v in seconds]
            row = Row("compiled", f"compile: {case}", label,
                      DUALAD if label.startswith("cold") else REFERENCE,
                      Timing(statistics.median(us), min(us), max(us), 1, len(us), tuple(us)))
            bench.add(row)


def run(quick: bool = False):
    bench = Bench("compiled")
    note("compiled: jax rows take jax arrays and block until ready; compiled rows exclude "
         "compilation (warm-up)")
    stiff_rows(bench)
    first_solve_rows(bench)
    lorenz_rows(bench, quick)
    brusselator_rows(bench)
    chain_rows(bench)
    indexing_rows(bench)
    mlp_rows(bench)
    interpreter_rows(bench, quick)
    batch_rows(bench, quick)
    entry_rows(bench)
    compile_rows(bench, quick)
    return bench.rows
