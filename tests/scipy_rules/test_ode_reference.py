"""Sensitivities of solve_ivp against jax.experimental.ode.odeint on four standard problems.

Lorenz, Van der Pol (μ = 1000, stiff), Robertson (stiff) and the 2-D Brusselator (N = 16,
512 states) at rtol = 1e-8. The references are computed by jax: the forward-sensitivity
system ``y' = f, S' = J S + df/dp`` written with ``jax.jvp`` and solved by jax's odeint
(Dormand-Prince, an independent solver and independent derivatives), and, where it is
finite, jax's own reverse-mode gradient of odeint. (That one recomputes ``y`` backwards
together with the adjoint, the "backsolve" adjoint, which gives nan on the stiff Robertson
and Van der Pol problems: the reason dualad's adjoint interpolates the forward solution.)
Both of dualad's sensitivities (forward and adjoint) must agree with them to 1e-5.
"""

import numpy as np
import pytest

import dualad as ad
from dualad.scipy_rules.integrate import solve_ivp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
jax_odeint = pytest.importorskip("jax.experimental.ode").odeint

RTOL = 1e-8
N_BRUSSELATOR = 16


def lorenz(t, y, p, xp=np):
    s, r, b = p[0], p[1], p[2]
    return xp.stack([s * (y[1] - y[0]), y[0] * (r - y[2]) - y[1], y[0] * y[1] - b * y[2]])


def van_der_pol(t, y, p, xp=np):
    return xp.stack([y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0]])


def robertson(t, y, p, xp=np):
    r1 = p[0] * y[0]
    r2 = p[2] * y[1] * y[2]
    r3 = p[1] * y[1] * y[1]
    return xp.stack([r2 - r1, r1 - r2 - r3, r3])


def brusselator(t, y, p, xp=np):
    n = N_BRUSSELATOR
    m = n * n
    a, b, alpha = p[0], p[1], p[2]
    u = xp.reshape(y[:m], (n, n))
    v = xp.reshape(y[m:], (n, n))

    def lap(z):
        return (xp.roll(z, 1, 0) + xp.roll(z, -1, 0) + xp.roll(z, 1, 1) + xp.roll(z, -1, 1)
                - 4 * z) * (n * n)

    uuv = u * u * v
    du = b + uuv - (a + 1) * u + alpha * lap(u)
    dv = a * u - uuv + alpha * lap(v)
    return xp.concatenate([xp.reshape(du, (m,)), xp.reshape(dv, (m,))])


def _brusselator_y0():
    n = N_BRUSSELATOR
    x = np.arange(n) / n
    u = 1.0 + np.sin(2 * np.pi * x)[:, None] * np.cos(2 * np.pi * x)[None, :]
    return np.concatenate([u.ravel(), 3.0 * np.ones(n * n)])


# name, f, y0, parameters, t_end, method, atol, options
PROBLEMS = [
    ("lorenz", lorenz, np.array([1.0, 1.0, 1.0]), np.array([10.0, 28.0, 8.0 / 3.0]), 0.5,
     "RK45", 1e-10, {}),
    ("van der pol", van_der_pol, np.array([2.0, 0.0]), np.array([1000.0]), 0.5, "BDF",
     1e-14, {}),  # dy/dmu is about 1e-7: atol well below it
    ("robertson", robertson, np.array([1.0, 0.0, 0.0]), np.array([0.04, 3e7, 1e4]), 0.5,
     "Radau", 1e-12, {}),
    ("brusselator 2-D", brusselator, _brusselator_y0(), np.array([3.4, 1.0, 0.002]), 0.05,
     "BDF", 1e-10, {"sparse": True}),
]
IDS = [p[0] for p in PROBLEMS]


def _weights(n, m):
    return np.cos(np.arange(n * m)).reshape(n, m) + 1.5


def _jax_reference(f, y0, p, times, atol):
    """Solution (n, m) and Jacobian d y / d p (n, m, P) by jax: the forward-sensitivity
    system solved by jax's odeint."""
    n, k = y0.size, p.size

    def augmented(z, t, p):
        y, s = z[:n], z[n:].reshape(n, k)
        fy, js = jax.jvp(lambda yy: f(t, yy, p, jnp), (y,), (s[:, 0],))
        cols = [js]
        for j in range(1, k):
            cols.append(jax.jvp(lambda yy: f(t, yy, p, jnp), (y,), (s[:, j],))[1])
        fp = jax.jacfwd(lambda pp: f(t, y, pp, jnp))(p)
        return jnp.concatenate([fy, (jnp.stack(cols, axis=1) + fp).reshape(-1)])

    z0 = jnp.concatenate([jnp.asarray(y0), jnp.zeros(n * k)])
    z = np.asarray(jax_odeint(augmented, z0, jnp.asarray(times), jnp.asarray(p),
                              rtol=RTOL, atol=atol, mxstep=10 ** 6))
    y = z[:, :n].T
    sens = np.transpose(z[:, n:].reshape(len(times), n, k), (1, 0, 2))
    return y, sens


@pytest.fixture(scope="module", params=PROBLEMS, ids=IDS)
def problem(request):
    name, f, y0, p, t_end, method, atol, options = request.param
    times = np.linspace(0.0, t_end, 4)
    y_ref, sens_ref = _jax_reference(f, y0, p, times, atol)
    return name, f, y0, p, times, method, atol, options, y_ref, sens_ref


def _solve(problem, p, sensitivity="auto"):
    name, f, y0, _, times, method, atol, options, *_ = problem
    return solve_ivp(f, (0.0, times[-1]), y0, method=method, t_eval=times, args=(p,),
                     rtol=RTOL, atol=atol, sensitivity=sensitivity, **options).y


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_solution_matches_jax(problem):
    *_, y_ref, _ = problem
    assert _rel(_solve(problem, problem[3]), y_ref) < 1e-5


@pytest.mark.parametrize("sensitivity", ["forward", "adjoint"])
def test_gradient_matches_jax_sensitivities(problem, sensitivity):
    p, y_ref, sens_ref = problem[3], problem[-2], problem[-1]
    w = _weights(*y_ref.shape)

    def loss(p):
        return np.sum(w * _solve(problem, p, sensitivity))

    expected = np.tensordot(w, sens_ref, axes=([0, 1], [0, 1]))
    assert _rel(ad.grad(loss)(p), expected) < 1e-5


def test_forward_jacobian_matches_jax_sensitivities(problem):
    p, sens_ref = problem[3], problem[-1]
    jac = ad.jacobian(lambda p: _solve(problem, p), mode="forward")(p)
    assert jac.shape == sens_ref.shape
    assert _rel(jac, sens_ref) < 1e-5


@pytest.mark.parametrize("name", ["lorenz"])
def test_gradient_matches_jax_odeint_gradient(name):
    """Where jax's own (backsolve) adjoint is finite, it agrees too (also on the
    Brusselator, left out here for time)."""
    _, f, y0, p, t_end, method, atol, options = PROBLEMS[IDS.index(name)]
    times = np.linspace(0.0, t_end, 4)
    w = _weights(y0.size, times.size)

    def jax_loss(p):
        y = jax_odeint(lambda y, t, p: f(t, y, p, jnp), jnp.asarray(y0), jnp.asarray(times),
                       p, rtol=RTOL, atol=atol, mxstep=10 ** 6)
        return jnp.sum(jnp.asarray(w.T) * y)

    expected = np.asarray(jax.grad(jax_loss)(jnp.asarray(p)))
    assert np.all(np.isfinite(expected))

    def loss(p):
        return np.sum(w * solve_ivp(f, (0.0, t_end), y0, method=method, t_eval=times,
                                    args=(p,), rtol=RTOL, atol=atol,
                                    sensitivity="adjoint", **options).y)

    assert _rel(ad.grad(loss)(p), expected) < 1e-5
