"""Derivatives of ODE solutions: adjoint and forward sensitivities against the solve alone."""

from __future__ import annotations

import numpy as np

from .common import BASELINE, DUALAD, PEER, REFERENCE, Bench, jit, note, require, require_dualad

TITLE = "Differentiating through solve_ivp / odeint: sensitivities vs the forward solve"
XLABEL = "case"
DESCRIPTION = """
Stiff solves with BDF at rtol = 1e-8 (dualad's exact Jacobian in every method): Robertson
(3 states, t in [0, 100], parameters k1, k2, k3) and the 2-D Brusselator on a 16 x 16
periodic grid (512 states, t in [0, 1], parameters A = 3.4, B = 1, alpha = 1 with the
Laplacian scaled by N², stiff; sparse Jacobians). The
baseline is the forward solve alone (`solve_ivp(..., jac=ad.ode_jacobian(f))`, the
Jacobian built once; the differentiated solves get the same `jac=`, as a user fitting
parameters would pass it, so the sparsity pattern is found once). The "jac=ad.jit" rows
pass `jac=ad.jit(ad.ode_jacobian(f))` instead (compiled in the untimed first run;
fallback="error": where it does not compile, the row says ad.jit falls back and why); the
forward solve with it is a reference row, and the targets stay with the eager rows. Rows:
the gradient of a scalar loss (a weighted sum of the solution at 5 times) by the adjoint
(target <= 4x the solve) and by forward sensitivities, and the forward-mode Jacobian
d y(T) / d p with k = 1 or 3 parameters (target <= (1 + 0.5 k)x). jax's odeint
(Dormand-Prince, jit-compiled, its own backsolve adjoint) runs beside on the same loss;
"grad rel err" is against dualad's forward-sensitivity gradient (nan: jax's backsolve
adjoint diverges on a stiff problem). ode_net: autograd's example (an MLP right-hand side
y' = MLP(y) with layers [2, 150, 2], relu, fitted to a spiral), the gradient of its L1
loss over 30 times through odeint at the example's rtol = 0.01; the baseline is
autograd's odeint gradient; "grad rel err" compares the two gradients at rtol = atol =
1e-10 (at rtol = 0.01 both are only as accurate as the solves).
"""

RTOL = 1e-8
N_GRID = 16


def robertson(t, y, p, xp=np):
    r1 = p[0] * y[0]
    r2 = p[2] * y[1] * y[2]
    r3 = p[1] * y[1] * y[1]
    return xp.stack([r2 - r1, r1 - r2 - r3, r3])


def brusselator(t, y, p, xp=np):
    n = N_GRID
    m = n * n
    a, b, alpha = p[0], p[1], p[2]
    u = xp.reshape(y[:m], (n, n))
    v = xp.reshape(y[m:], (n, n))

    def lap(z):
        return (xp.roll(z, 1, 0) + xp.roll(z, -1, 0) + xp.roll(z, 1, 1) + xp.roll(z, -1, 1)
                - 4 * z) * (n * n)

    uuv = u * u * v
    return xp.concatenate([xp.reshape(b + uuv - (a + 1) * u + alpha * lap(u), (m,)),
                           xp.reshape(a * u - uuv + alpha * lap(v), (m,))])


def _brusselator_y0():
    x = np.arange(N_GRID) / N_GRID
    u = 1.0 + np.sin(2 * np.pi * x)[:, None] * np.cos(2 * np.pi * x)[None, :]
    return np.concatenate([u.ravel(), 3.0 * np.ones(N_GRID * N_GRID)])


def problems():
    """(case, f, y0, p, t_end, atol, options)."""
    return [
        ("Robertson (3 states, 3 params)", robertson, np.array([1.0, 0.0, 0.0]),
         np.array([0.04, 3e7, 1e4]), 100.0, 1e-12, {}),
        ("Brusselator 2-D (512 states, 3 params)", brusselator, _brusselator_y0(),
         np.array([3.4, 1.0, 1.0]), 1.0, 1e-10, {"sparse": True}),
    ]


def _stiff_cases(bench, quick):
    ad = require_dualad()
    from dualad.scipy_rules.integrate import solve_ivp

    for case, f, y0, p, t_end, atol, options in problems():
        times = np.linspace(0.0, t_end, 5)
        w = np.cos(np.arange(y0.size * times.size)).reshape(y0.size, times.size) + 1.5
        jac = ad.ode_jacobian(f, sparse=options.get("sparse", False))
        # what a user would pass for speed: the same Jacobian compiled (at its first call,
        # in the untimed first run of each method)
        jit_jac = jit(ad.ode_jacobian(f, sparse=options.get("sparse", False)))

        def solve(p=p, f=f, y0=y0, times=times, atol=atol, jac=jac):
            import scipy.integrate

            return scipy.integrate.solve_ivp(f, (0.0, times[-1]), y0, method="BDF",
                                             t_eval=times, args=(p,), rtol=RTOL, atol=atol,
                                             jac=jac).y

        def loss(p, sensitivity, f=f, y0=y0, times=times, atol=atol, w=w, options=options,
                 jac=jac):
            y = solve_ivp(f, (0.0, times[-1]), y0, method="BDF", t_eval=times, args=(p,),
                          rtol=RTOL, atol=atol, sensitivity=sensitivity, jac=jac,
                          **options).y
            return np.sum(w * y)

        reference = ad.grad(lambda q: loss(q, "forward"))(p)

        def grad_check(g, reference=reference):
            g = np.asarray(g, dtype=float)
            err = float(np.max(np.abs(g - reference)) / np.max(np.abs(reference)))
            return {"grad rel err": f"{err:.1e}"}

        def final_state(q, keep, f=f, y0=y0, p=p, times=times, atol=atol, options=options,
                        jac=jac):
            full = np.concatenate([q, p[len(q):]]) if keep < len(p) else q
            return solve_ivp(f, (0.0, times[-1]), y0, method="BDF", args=(full,),
                             t_eval=times[-1:], rtol=RTOL, atol=atol, jac=jac,
                             **options).y[:, -1]

        def jax_grad(f=f, y0=y0, times=times, atol=atol, w=w, p=p):
            jax = require("jax")
            jnp = jax.numpy
            from jax.experimental.ode import odeint

            def jloss(q):
                y = odeint(lambda y, t, q: f(t, y, q, jnp), jnp.asarray(y0),
                           jnp.asarray(times), q, rtol=RTOL, atol=atol, mxstep=10 ** 6)
                return jnp.sum(jnp.asarray(w.T) * y)

            g = jax.jit(jax.grad(jloss))
            pj = jnp.asarray(p)
            return lambda: np.asarray(g(pj))

        methods = [
            ("forward solve alone", BASELINE, lambda solve=solve: solve, None, None),
            ("forward solve alone, jac=ad.jit", REFERENCE,
             lambda solve=solve, jit_jac=jit_jac: lambda: solve(jac=jit_jac), None, None),
            ("dualad grad, adjoint", DUALAD,
             lambda loss=loss, p=p: lambda: ad.grad(lambda q: loss(q, "adjoint"))(p), None,
             "<= 4x"),
            ("dualad grad, adjoint, jac=ad.jit", DUALAD,
             lambda loss=loss, p=p, jit_jac=jit_jac: lambda: ad.grad(
                 lambda q: loss(q, "adjoint", jac=jit_jac))(p), None, None),
            ("dualad grad, forward sens.", DUALAD,
             lambda loss=loss, p=p: lambda: ad.grad(lambda q: loss(q, "forward"))(p), None,
             "<= 2.5x"),
            ("dualad grad, forward sens., jac=ad.jit", DUALAD,
             lambda loss=loss, p=p, jit_jac=jit_jac: lambda: ad.grad(
                 lambda q: loss(q, "forward", jac=jit_jac))(p), None, None),
        ]
        for k in (1, 3):
            methods.append((
                f"dualad jacobian fwd, k={k}", DUALAD,
                lambda k=k, final_state=final_state, p=p: lambda: ad.jacobian(
                    lambda q: final_state(q, k), mode="forward")(p[:k]),
                None, f"<= {1 + 0.5 * k:g}x"))
        methods.append(("jax odeint grad (dopri5)", PEER, jax_grad, "jax", None))
        rows = bench.time_interleaved(
            case,
            [(m, kind, make, peer) for m, kind, make, peer, _ in methods],
            repeat=2 if quick else 3,
            check=lambda result: grad_check(result) if np.ndim(result) == 1 and
            np.size(result) == 3 else {},
        )
        for row, (*_, target) in zip(rows, methods):
            if target:
                row.extra["target"] = target


def _ode_net(bench, quick):
    """autograd's ode_net example: the gradient of the L1 fit loss through odeint."""
    ad = require_dualad()
    from dualad.scipy_rules.integrate import odeint

    rng = np.random.default_rng(0)
    d, hidden, n_times = 2, 150, 30
    params = [(0.1 * rng.standard_normal((d, hidden)), 0.1 * rng.standard_normal(hidden)),
              (0.1 * rng.standard_normal((hidden, d)), 0.1 * rng.standard_normal(d))]
    true_a = np.array([[-0.1, 2.0], [-2.0, -0.1]])
    y0 = np.array([2.0, 0.0])
    ts = np.linspace(0.0, 25.0 if not quick else 10.0, n_times)
    import scipy.integrate

    target = scipy.integrate.odeint(lambda y, t: np.dot(y ** 3, true_a), y0, ts)

    def mlp(xp):
        def predict(y, t, params):
            inputs = y
            for w, b in params:
                outputs = xp.dot(inputs, w) + b
                inputs = xp.maximum(0.0, outputs)
            return outputs

        return predict

    def loss_with(odeint_fn, xp, pack=tuple, **tol):
        def loss(params):
            pred = odeint_fn(mlp(xp), y0, ts, pack((params,)), **tol)
            return xp.mean(xp.abs(pred - target))

        return loss

    def autograd_parts():
        autograd = require("autograd")
        from autograd.builtins import tuple as ag_tuple
        from autograd.scipy.integrate import odeint as ag_odeint

        return autograd, lambda *a, **k: ag_odeint(*a, **k), ag_tuple

    def flat(grads):
        return np.concatenate([np.ravel(g) for pair in grads for g in pair])

    tight = dict(rtol=1e-10, atol=1e-10)
    try:
        autograd, ag_odeint, ag_tuple = autograd_parts()
        ours = flat(ad.grad(loss_with(odeint, np, **tight))(params))
        theirs = flat(autograd.grad(loss_with(ag_odeint, autograd.numpy, ag_tuple,
                                              **tight))(params))
        err = f"{float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs))):.1e}"
    except Exception as exc:  # autograd missing or failing: the timing rows say why
        err = f"n/a ({type(exc).__name__})"

    def make_autograd():
        autograd, ag_odeint, ag_tuple = autograd_parts()
        g = autograd.grad(loss_with(ag_odeint, autograd.numpy, ag_tuple, rtol=0.01))
        return lambda: g(params)

    def make_dualad():
        g = ad.grad(loss_with(odeint, np, rtol=0.01))
        return lambda: g(params)

    rows = bench.time_interleaved(
        "ode_net (MLP 2-150-2, 30 times)",
        [("autograd odeint grad", BASELINE, make_autograd, "autograd"),
         ("dualad odeint grad", DUALAD, make_dualad, None)],
        repeat=2 if quick else 3,
    )
    for row in rows:
        row.extra["grad rel err"] = err
    rows[-1].extra["target"] = "<= 1x"


def run(quick: bool = False):
    """Rows for the two stiff problems and ode_net."""
    bench = Bench("ode_sensitivity")
    note("ode_sensitivity: jax's time excludes compilation (done in the untimed warm-up)")
    _stiff_cases(bench, quick)
    _ode_net(bench, quick)
    return bench.rows
