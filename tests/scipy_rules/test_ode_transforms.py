"""solve_ivp / odeint drop-ins: every transform, every method, both sensitivities, against
central differences, and the errors."""

import numpy as np
import pytest
import scipy.integrate

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.scipy_rules import integrate
from dualad.scipy_rules.integrate import OdeSolveError, odeint, solve_ivp

TOL = dict(rtol=1e-10, atol=1e-10)
P0 = np.array([1.5, 1.0, 1.0, 3.0])
Y0 = np.array([1.0, 1.0])
TIMES = np.linspace(0.0, 1.5, 4)


def lotka_volterra(t, y, p):
    return np.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])


def _close(a, b, rel=1e-6):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, float(np.max(np.abs(b)))))


def test_plain_calls_are_scipy():
    ours = solve_ivp(lotka_volterra, (0.0, 1.5), Y0, args=(P0,), t_eval=TIMES)
    theirs = scipy.integrate.solve_ivp(lotka_volterra, (0.0, 1.5), Y0, args=(P0,), t_eval=TIMES)
    np.testing.assert_array_equal(ours.y, theirs.y)
    t = np.linspace(0, 1, 3)
    np.testing.assert_array_equal(odeint(lambda y, t: -y, Y0, t),
                                  scipy.integrate.odeint(lambda y, t: -y, Y0, t))


def test_integrate_face_lists_scipy_names():
    assert {"solve_ivp", "odeint", "ode_jacobian"} <= set(integrate.__all__)


@pytest.mark.parametrize("method", ["RK45", "DOP853", "BDF", "Radau", "LSODA"])
@pytest.mark.parametrize("sensitivity", ["forward", "adjoint"])
def test_grad_against_central_differences(method, sensitivity):
    def loss(p, y0):
        sol = solve_ivp(lotka_volterra, (0.0, 1.5), y0, method=method, t_eval=TIMES,
                        args=(p,), sensitivity=sensitivity, **TOL)
        return np.sum(sol.y ** 2)

    g_p, g_y0 = ad.grad(loss, argnums=(0, 1))(P0, Y0)
    _close(g_p, numerical_jacobian(loss, (P0, Y0), 0), 1e-6)
    _close(g_y0, numerical_jacobian(loss, (P0, Y0), 1), 1e-6)


@pytest.mark.parametrize("method", ["RK45", "BDF"])
def test_jacobian_forward_equals_reverse(method):
    def final(y0, p):
        return solve_ivp(lotka_volterra, (0.0, 1.5), y0, method=method, args=(p,),
                         t_eval=TIMES, **TOL).y

    for argnum, x in ((0, Y0), (1, P0)):
        jf = ad.jacobian(final, argnum, mode="forward")(Y0, P0)
        jr = ad.jacobian(final, argnum, mode="reverse")(Y0, P0)
        assert jf.shape == final(Y0, P0).shape + x.shape
        _close(jf, jr, 1e-7)
        _close(jf, numerical_jacobian(final, (Y0, P0), argnum), 1e-6)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_time_points_differentiate(mode):
    def at_times(ts):
        return solve_ivp(lotka_volterra, (ts[0], ts[1]), Y0, args=(P0,),
                         t_eval=np.array([ts[2], ts[1]]), **TOL).y

    ts = np.array([0.1, 1.3, 0.7])
    _close(ad.jacobian(at_times, mode=mode)(ts), numerical_jacobian(at_times, (ts,), 0))

    def end(t1):  # t_eval=None: the last grid point moves with t_span[1]
        return solve_ivp(lotka_volterra, (0.0, t1), Y0, args=(P0,), **TOL).y[:, -1]

    _close(ad.jacobian(end, mode=mode)(1.2), numerical_jacobian(end, (1.2,), 0))


def test_jvp_vjp_and_hessian():
    def loss(p):
        sol = solve_ivp(lotka_volterra, (0.0, 1.0), Y0, args=(p,), t_eval=[0.5, 1.0], **TOL)
        return np.sum(sol.y ** 2)

    g = ad.grad(loss)(P0)
    v = np.array([0.3, -1.0, 0.5, 2.0])
    value, tangent = ad.jvp(loss, (P0,), (v,))
    assert np.isclose(value, loss(P0))
    assert np.isclose(tangent, g @ v, rtol=1e-8)
    out, pullback = ad.vjp(lambda p: solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,),
                                               **TOL).y[:, -1], P0)
    (vjp_p,) = pullback(np.array([1.0, -2.0]))
    jac = ad.jacobian(lambda p: solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,),
                                          **TOL).y[:, -1])(P0)
    _close(vjp_p, np.array([1.0, -2.0]) @ jac, 1e-8)
    hess = ad.hessian(loss)(P0)
    _close(hess, hess.T, 1e-6)
    _close(hess, numerical_jacobian(ad.grad(loss), (P0,), 0), 1e-5)


def test_dense_output_differentiates():
    def dense(p, t):
        sol = solve_ivp(lotka_volterra, (0.0, 1.0), Y0, args=(p,), dense_output=True, **TOL)
        return sol.sol(t)

    _close(ad.jacobian(lambda p: dense(p, 0.37))(P0),
           numerical_jacobian(lambda p: dense(p, 0.37), (P0,), 0))
    ts = np.array([0.9, 0.2, 0.5])  # unsorted points come back in their order
    j = ad.jacobian(lambda p: dense(p, ts), mode="reverse")(P0)
    assert j.shape == (2, 3, 4)
    _close(j, numerical_jacobian(lambda p: dense(p, ts), (P0,), 0))
    _close(ad.derivative(lambda t: dense(P0, t))(0.4), lotka_volterra(0.4, dense(P0, 0.4), P0))


def test_tape_records_and_replays():
    def loss(p):
        return np.sum(solve_ivp(lotka_volterra, (0.0, 1.0), Y0, method="BDF", args=(p,),
                                t_eval=[1.0], **TOL).y)

    tape = ad.record(loss, P0)
    for p in (P0, P0 * 1.1):
        assert np.isclose(tape(p), loss(p))
        _close(tape.grad(p), ad.grad(loss)(p), 1e-9)


def test_odeint_differentiates():
    t = np.linspace(0.0, 1.0, 5)

    def f(y, t, p):
        return lotka_volterra(t, y, p)

    def loss(p, y0):
        return np.sum(np.sin(odeint(f, y0, t, args=(p,), rtol=1e-11, atol=1e-11)))

    assert odeint(f, ad.Variable(Y0), t, args=(P0,)).shape == (5, 2)
    for argnum in (0, 1):
        g = ad.grad(loss, argnum)(P0, Y0)
        _close(g, numerical_jacobian(loss, (P0, Y0), argnum), 1e-5)
    jf = ad.jacobian(lambda y0: odeint(f, y0, t, args=(P0,)), mode="forward")(Y0)
    assert jf.shape == (5, 2, 2)
    _close(jf[0], np.eye(2), 1e-12)  # the first row is y0 itself


def test_scalar_state_dict_args_and_object_arrays():
    def decay(t, y, d):
        return -d["k"] * y

    def final(k):
        return solve_ivp(decay, (0.0, 1.0), 2.0, args=({"k": k, "name": "decay"},),
                         rtol=1e-11, atol=1e-12).y[0, -1]

    assert np.isclose(ad.derivative(final)(0.5), -2.0 * np.exp(-0.5), rtol=1e-8)
    assert np.isclose(ad.grad(final)(0.5), -2.0 * np.exp(-0.5), rtol=1e-8)
    g = ad.grad(lambda a: solve_ivp(decay, (0, 1), np.array([a, 2 * a]), args=({"k": 1.0},),
                                    **TOL).y[1, -1])(1.0)
    assert np.isclose(g, 2 * np.exp(-1.0), rtol=1e-8)


def test_sensitivity_error_control_off_is_close():
    def final(p, control):
        return solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,), rtol=1e-9, atol=1e-9,
                         sensitivity_error_control=control).y[:, -1]

    on = ad.jacobian(lambda p: final(p, True), mode="forward")(P0)
    off = ad.jacobian(lambda p: final(p, False), mode="forward")(P0)
    _close(off, on, 1e-4)


def test_sparse_and_njit_right_hand_sides():
    numba = pytest.importorskip("numba")
    n = 6

    def chain(t, y, k):
        return np.concatenate([-k * y[:1], k * (y[:-1] - y[1:])])

    @numba.njit
    def chain_njit(t, y):
        out = np.empty_like(y)
        for i in range(y.shape[0]):
            out[i] = -y[i] * y[i]
        return out

    y0 = np.linspace(1.0, 2.0, n)

    def loss(k, y0, sparse):
        return np.sum(solve_ivp(chain, (0, 2), y0, method="BDF", args=(k,), sparse=sparse,
                                **TOL).y[:, -1] ** 2)

    for argnum in (0, 1):
        g = ad.grad(loss, argnum)(0.7, y0, True)
        _close(g, ad.grad(loss, argnum)(0.7, y0, False), 1e-8)
        _close(g, numerical_jacobian(lambda *a: loss(*a, True), (0.7, y0), argnum), 1e-6)

    def njit_final(y0):
        return solve_ivp(chain_njit, (0, 1), y0, method="Radau", **TOL).y[:, -1]

    expected = np.diag(1.0 / (1.0 + y0) ** 2)  # y(1) = y0 / (1 + y0)
    _close(ad.jacobian(njit_final, mode="forward")(y0), expected, 1e-7)
    _close(ad.jacobian(njit_final, mode="reverse")(y0), expected, 1e-7)


def test_errors_are_clear():
    p = ad.Variable(P0)
    with pytest.raises(ValueError, match="events"):
        solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,), events=lambda t, y, p: y[0] - 1)
    with pytest.raises(ValueError, match="sensitivity"):
        solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,), sensitivity="backsolve")
    with pytest.raises(ValueError, match="1-dimensional"):
        solve_ivp(lambda t, y: -y, (0, 1), ad.Variable(np.ones((2, 2))))
    with pytest.raises(ValueError, match="within t_span"):
        solve_ivp(lotka_volterra, (0, 1), Y0, args=(p,), t_eval=[0.5, 2.0])
    with pytest.raises(OdeSolveError, match="failed"):
        solve_ivp(lambda t, y: y * y, (0, 10), ad.Variable(np.ones(1)))


@pytest.mark.parametrize("method", ["BDF", "LSODA"])
def test_hessian_through_implicit_methods(method):
    def logistic(t, y, p):
        return p[0] * y * (1.0 - y / p[1])

    def loss(p):
        sol = solve_ivp(logistic, (0.0, 2.0), [0.1], method=method, t_eval=[1.0, 2.0],
                        args=(p,), rtol=1e-10, atol=1e-12)
        return np.sum(sol.y ** 2)

    p = np.array([1.3, 2.0])
    hess = ad.hessian(loss)(p)
    _close(hess, numerical_jacobian(ad.grad(loss), (p,), 0), 1e-5)


def test_auto_sensitivity_follows_the_number_of_inputs():
    from dualad.scipy_rules.ode_adjoint import FORWARD_MAX_INPUTS, choose_sensitivity
    from dualad.scipy_rules.ode_problem import OdeProblem

    auto = OdeProblem(lotka_volterra)
    assert choose_sensitivity(auto, FORWARD_MAX_INPUTS) == "forward"
    assert choose_sensitivity(auto, FORWARD_MAX_INPUTS + 1) == "adjoint"
    forced = OdeProblem(lotka_volterra, sensitivity="adjoint")
    assert choose_sensitivity(forced, 1) == "adjoint"
    # many parameters: the adjoint's gradient equals the forward one
    weights = np.linspace(0.5, 1.5, 12)

    def loss(w, sensitivity):
        return solve_ivp(lambda t, y, w: -np.sum(w) * y, (0, 1), [1.0], args=(w,),
                         sensitivity=sensitivity, **TOL).y[0, -1]

    _close(ad.grad(lambda w: loss(w, "auto"))(weights),
           ad.grad(lambda w: loss(w, "forward"))(weights), 1e-8)
