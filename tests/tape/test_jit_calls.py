"""Calls with no compiled form run as themselves between the compiled parts
(dualad.tape.calls): every transform of functions using np.sort, np.linalg.solve, det,
np.prod, np.trapezoid, argsort indices, ... compiles (fallback="error") and agrees with
eager mode and central differences, at several points and shapes, 0-d included."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.lowering import Call, lower

pytest.importorskip("numba")


def compiled_only(fn):
    return ad.jit(fn, fallback="error")


def sort_loss(x):
    return np.sum(np.sort(x) * np.cos(x))


def solve_map(x):  # a vector function through a linear solve
    A = np.diag(2.0 + x * x) + 0.1 * np.outer(np.sin(x), np.ones_like(x))
    return np.linalg.solve(A, np.exp(-x)) * x


def det_loss(x):
    A = np.outer(x, x) + np.eye(x.size) * (1.0 + np.sum(x * x))
    return np.log(np.linalg.det(A)) + np.prod(np.tanh(x) + 2.0)


def trapezoid_loss(x):
    return np.trapezoid(np.sin(x) ** 2, np.cumsum(np.abs(x) + 0.1))


def argsort_pick(x):  # a value without derivative (indices) read by a call
    order = np.argsort(x)
    return np.take(x * x, order[-2:]).sum() + np.sum(x)


LOSSES = [sort_loss, det_loss, trapezoid_loss, argsort_pick,
          lambda x: np.sum(solve_map(x) ** 2)]
POINTS = [np.array([0.3, -1.2, 0.8]), np.array([1.5, 0.2, -0.7, 0.4, 2.0])]


def _calls(fn, x):
    from dualad.tape import record
    return [i for i in lower(record(fn, x).program, [x]).instructions if isinstance(i, Call)]


def test_the_programs_hold_calls():
    for loss in LOSSES:
        if loss is sort_loss:  # an order statistic: compiled (lowering.Order), no call
            assert not _calls(loss, POINTS[0])
            continue
        assert _calls(loss, POINTS[0]), loss


@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: getattr(f, "__name__", "solve"))
def test_gradients_and_values(loss):
    g, vg, v = compiled_only(ad.grad(loss)), compiled_only(ad.value_and_grad(loss)), \
        compiled_only(loss)
    for x in POINTS + [POINTS[1][::-1].copy()]:
        expected = ad.grad(loss)(x)
        np.testing.assert_allclose(g(x), expected, rtol=1e-12, atol=1e-13)
        value, grad = vg(x)
        np.testing.assert_allclose(value, loss(x), rtol=1e-13)
        np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(v(x), loss(x), rtol=1e-13)
        np.testing.assert_allclose(g(x), numerical_jacobian(loss, (x,), 0), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobians_forward_and_reverse(mode):
    jac = compiled_only(ad.jacobian(solve_map, mode=mode))
    sorted_jac = compiled_only(ad.jacobian(lambda x: np.sort(x) * x[::-1], mode=mode))
    for x in POINTS:
        np.testing.assert_allclose(jac(x), ad.jacobian(solve_map, mode="forward")(x),
                                   rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(jac(x), ad.jacobian(solve_map, mode="reverse")(x),
                                   rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(jac(x), numerical_jacobian(solve_map, (x,), 0),
                                   rtol=1e-5, atol=1e-6)
        f = lambda x: np.sort(x) * x[::-1]  # noqa: E731
        np.testing.assert_allclose(sorted_jac(x), ad.jacobian(f)(x), rtol=1e-13)


def test_hessian_hvp_jvp_vjp():
    x = POINTS[1]
    v = np.linspace(-1.0, 1.0, x.size)
    for loss in (det_loss, sort_loss):
        np.testing.assert_allclose(compiled_only(ad.hessian(loss))(x), ad.hessian(loss)(x),
                                   rtol=1e-10, atol=1e-11)
        hvp = compiled_only(lambda x, v, loss=loss: ad.hvp(loss, x, v))
        np.testing.assert_allclose(hvp(x, v), ad.hvp(loss, x, v), rtol=1e-10, atol=1e-11)
        H = numerical_jacobian(ad.grad(loss), (x,), 0)
        np.testing.assert_allclose(compiled_only(ad.hessian(loss))(x), H, rtol=1e-5,
                                   atol=1e-5)
    out, tangent = compiled_only(lambda x, v: ad.jvp(solve_map, (x,), (v,)))(x, v)
    e_out, e_tangent = ad.jvp(solve_map, (x,), (v,))
    np.testing.assert_allclose(out, e_out, rtol=1e-13)
    np.testing.assert_allclose(tangent, e_tangent, rtol=1e-11, atol=1e-12)
    pull = compiled_only(lambda x, v: ad.vjp(solve_map, x)[1](v)[0])
    np.testing.assert_allclose(pull(x, v), ad.vjp(solve_map, x)[1](v)[0], rtol=1e-11,
                               atol=1e-12)
    np.testing.assert_allclose(pull(x, v), numerical_jacobian(solve_map, (x,), 0).T @ v,
                               rtol=1e-5, atol=1e-6)


def test_zero_d_and_broadcast_arguments():
    def f(s, x):  # a 0-d argument broadcast against a vector, through a call
        return np.sum(np.sort(s * x) ** 2) + np.prod(x + s)

    s, x = np.float64(0.7), np.array([1.0, -2.0, 0.5])
    g = compiled_only(ad.grad(f, argnums=(0, 1)))
    gs, gx = g(s, x)
    es, ex = ad.grad(f, argnums=(0, 1))(s, x)
    np.testing.assert_allclose(gs, es, rtol=1e-13)
    np.testing.assert_allclose(gx, ex, rtol=1e-13)
    assert np.shape(gs) == np.shape(es) == ()
    np.testing.assert_allclose(gs, numerical_jacobian(f, (s, x), 0), rtol=1e-6)
    h = compiled_only(ad.grad(lambda t: np.prod(np.sort(np.array([t, 2.0 * t, -t])))))
    for t in (0.5, -1.5):
        np.testing.assert_allclose(h(t), 6.0 * t ** 2 * -1.0, rtol=1e-13)


def test_guards_on_a_calls_value_record_again():
    def f(x):
        if np.linalg.det(np.diag(x)) > 0:
            return np.sum(np.sort(x) * x)
        return np.sum(x ** 3)

    g = compiled_only(ad.grad(f))
    a, b = np.array([1.0, 2.0, 3.0]), np.array([-1.0, 2.0, 3.0])
    np.testing.assert_allclose(g(a), ad.grad(f)(a), rtol=1e-13)
    with pytest.warns(ad.TapeRetraceWarning):
        np.testing.assert_allclose(g(b), ad.grad(f)(b), rtol=1e-13)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (a, b, a * 2):
            np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-13)


def test_sparse_ode_and_batch_entries():
    def rhs(t, y):
        return np.sort(y) * np.roll(y, 1) - 0.5 * y

    y = np.array([0.4, -0.3, 1.2, 0.9, 0.1, -1.1, 0.6, 0.2])
    f = lambda y: rhs(0.0, y)  # noqa: E731
    ys = np.stack([y, y[::-1], y * 2.0, np.roll(y, 3)])
    jac = compiled_only(ad.ode_jacobian(rhs))
    batched = compiled_only(ad.jacobian(f))
    for r in ys:  # a sort's pattern follows the point: no pattern fixed at the first call
        np.testing.assert_allclose(jac(0.0, r), ad.ode_jacobian(rhs)(0.0, r), rtol=1e-13)
        np.testing.assert_allclose(batched(r), ad.jacobian(f)(r), rtol=1e-13)
        np.testing.assert_allclose(batched(r), numerical_jacobian(f, (r,), 0), rtol=1e-6,
                                   atol=1e-8)
    np.testing.assert_allclose(batched.batch(ys), np.stack([ad.jacobian(f)(r) for r in ys]),
                               rtol=1e-13)
    with pytest.raises(ad.JitError, match="pattern may change"):  # the replay, re-detected
        compiled_only(ad.sparse_jacobian(f))(y)
    with pytest.warns(ad.JitFallbackWarning):
        sparse = ad.jit(ad.sparse_jacobian(f))
        first = sparse(y)
    for r in ys:
        np.testing.assert_allclose(sparse(r).toarray(), ad.jacobian(f)(r), rtol=1e-13)
    assert first.nnz == ad.sparse_jacobian(f)(y).nnz


def test_guards_on_readings_of_calls():
    """``np.all`` of a mask and an index from ``np.argmax`` are calls without derivative
    whose readings are guarded: a new reading records again."""
    def branch(x):
        if np.all(x > 0):
            return np.sum(x ** 2)
        return np.sum(np.sin(x))

    def picked(x):
        return x[int(np.argmax(x))] * np.sum(x * x)

    for f in (branch, picked):
        g = compiled_only(ad.grad(f))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            for x in (np.array([1.0, 2.0, 3.0]), np.array([-1.0, 2.0, 0.5]),
                      np.array([3.0, 1.0, 0.2]), np.array([1.0, 2.0, 3.0])):
                np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-13)
                np.testing.assert_allclose(g(x), numerical_jacobian(f, (x,), 0), rtol=1e-6,
                                           atol=1e-8)


# -- complex values between calls ------------------------------------------------------------

def _spectral_energy(u):
    k = 2j * np.pi * np.fft.rfftfreq(u.size, d=1.0 / u.size)
    ux = np.fft.irfft(k * np.fft.rfft(u), u.size)
    return np.sum(ux ** 2) + np.sum(u ** 4)


def _spectral_by_hand(u):
    k = 2j * np.pi * np.fft.rfftfreq(u.size, d=1.0 / u.size)
    ux = np.fft.irfft(k * np.fft.rfft(u), u.size)
    return -2.0 * np.fft.irfft(k * np.fft.rfft(ux), u.size) + 4.0 * u ** 3


@pytest.mark.parametrize("n", [4, 8, 33])
def test_complex_intermediates_between_calls(n):
    """FFTs make complex values; calls run as themselves read and write them in the glue,
    the real values around them compile."""
    u = np.random.default_rng(n).standard_normal(n)
    g = compiled_only(ad.grad(_spectral_energy))
    np.testing.assert_allclose(g(u), _spectral_by_hand(u), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g(u), ad.grad(_spectral_energy)(u), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g(u), numerical_jacobian(_spectral_energy, (u,), 0),
                               rtol=1e-5, atol=1e-6)

    def derivative_times_u(u):
        k = 2j * np.pi * np.fft.rfftfreq(u.size, d=1.0 / u.size)
        return np.fft.irfft(k * np.fft.rfft(u), u.size) * u + np.abs(np.fft.fft(u))

    for mode in ("forward", "reverse"):
        J = compiled_only(ad.jacobian(derivative_times_u, mode=mode))
        for x in (u, u[::-1].copy()):
            np.testing.assert_allclose(J(x), ad.jacobian(derivative_times_u, mode=mode)(x),
                                       rtol=1e-11, atol=1e-11)
            np.testing.assert_allclose(J(x), numerical_jacobian(derivative_times_u, (x,), 0),
                                       rtol=1e-5, atol=1e-5)
    H = compiled_only(ad.hessian(_spectral_energy))
    np.testing.assert_allclose(H(u), ad.hessian(_spectral_energy)(u), rtol=1e-10, atol=1e-10)


def test_a_complex_result_falls_back():
    f = lambda x: np.fft.fft(x) * 2.0  # noqa: E731
    x = np.array([1.0, 2.0, 0.5])
    with pytest.raises(ad.JitError, match="complex"):
        compiled_only(f)(x)
    with pytest.warns(ad.JitFallbackWarning):
        np.testing.assert_allclose(ad.jit(f)(x), f(x))


def test_keyword_arguments_reach_the_calls_rules():
    """``np.sort(x, axis=0)``: the keyword goes to the call and to its gradient rule."""
    def f(x):
        return np.sum(np.sin(np.sort(x, axis=0) * -1.0 + 2.5) * np.array([-0.6, 1.5, 1.3]))

    g = compiled_only(ad.grad(f))
    jac = compiled_only(ad.jacobian(lambda x: np.sort(x, axis=0) * x))
    for x in (np.array([[1.6, 0.5, 0.0], [0.0, 0.2, 1.0]]),
              np.array([[[1.6, 0.5, 0.0]], [[0.0, 0.0, 1.0]]])[:, 0, :].copy()):
        np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-13)
        np.testing.assert_allclose(g(x), numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jac(x), ad.jacobian(lambda x: np.sort(x, axis=0) * x)(x),
                                   rtol=1e-13)
