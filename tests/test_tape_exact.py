"""Tapes replay exactly what eager mode computes: each case once silently wrong in a tape
is checked at points away from the recording (value and gradient against eager reverse
mode and central differences), and in both eager modes."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

X = np.array([0.3, -1.2, 2.1, 0.7])
POINTS = [X, np.array([0.3, 1.2, -2.1, 0.7]), np.array([-0.5, -1.1, -0.4, 1.7]),
          np.array([1.3, 0.2, 0.9, -0.6])]


def check_everywhere(f, x0=X, points=POINTS, atol=1e-6):
    """``f`` recorded at ``x0``: at every point the tape's value, gradient, jvp and hvp
    equal eager mode's, and the gradient equals central differences, in both modes."""
    tape = ad.record(f, x0)
    v = np.array([1.0, -0.5, 0.25, 2.0])
    for x in points:
        expected = numerical_jacobian(f, (x,), 0)
        for mode in ("forward", "reverse"):
            np.testing.assert_allclose(ad.jacobian(f, mode=mode)(x), expected, atol=atol,
                                       err_msg=mode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            np.testing.assert_allclose(tape(x), f(x), rtol=1e-12, atol=1e-12)
            g = tape.grad(x)
            assert g.dtype == np.float64, g.dtype
            np.testing.assert_allclose(g, ad.grad(f)(x), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(g, expected, atol=atol)
            _, t = tape.jvp((x,), (v,))
            np.testing.assert_allclose(t, ad.jvp(f, (x,), (v,))[1], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(tape.hvp((x,), v), ad.hvp(f, x, v), rtol=1e-8,
                                       atol=1e-10)
    return tape


# -- real gradients through complex intermediates --------------------------------------------


def _transfer_matrix(x):
    """The reflectance of a stack of layers (2x2 complex transfer matrices)."""
    m = np.eye(2, dtype=complex)
    for d in x:
        phase = np.exp(1j * d)
        layer = np.array([[phase, 0.2 * phase], [0.2 / phase, 1.0 / phase]])
        m = m @ layer
    return np.abs(m[1, 0] / m[0, 0]) ** 2


@pytest.mark.parametrize("f", [
    lambda x: np.sum(np.abs(x + 1j * x ** 2)),
    lambda x: np.sum(np.real(np.exp(1j * x))),
    lambda x: np.sum(np.angle(x + 1j * (x ** 2 + 0.1))),
    lambda x: np.sum(np.abs(np.fft.fft(x * x)) ** 2),
    lambda x: np.imag(np.sum(np.exp(1j * x) * x)),
    _transfer_matrix,
], ids=["abs", "real_exp", "angle", "fft", "imag_sum", "transfer_matrix"])
def test_real_function_through_complex_intermediates_has_a_real_gradient(f):
    check_everywhere(f)


def test_bfgs_on_a_tape_through_complex_values_finds_the_eager_optimum():
    import scipy.optimize

    def loss(x):
        return np.sum(np.abs(np.exp(1j * x) - (0.3 + 0.4j)) ** 2) + 0.1 * np.sum(x ** 2)

    tape = ad.record(loss, X)
    a = scipy.optimize.minimize(tape.value_and_grad, X, jac=True, method="BFGS")
    b = scipy.optimize.minimize(ad.value_and_grad(loss), X, jac=True, method="BFGS")
    np.testing.assert_allclose(a.x, b.x, atol=1e-6)
    assert np.max(np.abs(ad.grad(loss)(a.x))) < 1e-5


def test_complex_input_records_apart_from_real_input():
    f = lambda z: np.sum(np.abs(z) ** 2)  # noqa: E731
    tape = ad.record(f, X)
    z = X + 1j * X[::-1]
    with pytest.warns(ad.TapeRetraceWarning, match="complex"):
        g = tape.grad(z)
    np.testing.assert_allclose(g, ad.grad(f)(z))
    assert np.iscomplexobj(g)


# -- index sets computed from traced values -------------------------------------------------


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x[np.where(x > 0)] ** 2),
    lambda x: np.sum(x[np.nonzero(x > 0)] ** 2),
    lambda x: np.sum(x[(x > 0).nonzero()] ** 2),
    lambda x: np.sum(x[np.nonzero(x > 0)[0]] ** 3),
    lambda x: np.sum(np.take(x, np.flatnonzero(x > 0)) ** 2),
    lambda x: np.sum(x.reshape(2, 2)[np.where(x.reshape(2, 2) < 0.5)] * 3.0),
    lambda x: np.sum(x[np.argwhere(x > 0)[:, 0]] * x[0]),
    lambda x: x.reshape(2, 2)[np.unravel_index(np.argmax(x), (2, 2))] * np.sum(x),
], ids=["where", "nonzero", "method", "nonzero_item", "flatnonzero", "where_2d", "argwhere",
        "unravel_index"])
def test_indices_computed_from_traced_values_follow_the_new_point(f):
    check_everywhere(f)


# -- in-place writes -----------------------------------------------------------------------


def _putmask(x):
    y = np.copy(x)
    np.putmask(y, x > 0, x * 3.0)
    return np.sum(y ** 2)


def _putmask_short_values(x):
    y = np.zeros_like(x)
    np.putmask(y, x < 1.0, x[:3] ** 2)
    return np.sum(y * x)


def _place(x):
    y = np.copy(x)
    np.place(y, x > 0, x[:2] * 3.0)
    return np.sum(y ** 2)


def _place_constant(x):
    y = np.copy(x)
    np.place(y, x < 0, [2.0])
    return np.sum(y * x)


def _copyto_where(x):
    y = np.zeros_like(x)
    np.copyto(y, np.sin(x), where=x > 0.5)
    return np.sum(y * x)


def _put(x):
    y = np.ones_like(x)
    np.put(y, [3, 0], x[1:3] * x[0])
    return np.sum(y * y)


def _ufunc_at(x):
    y = np.copy(x)
    np.multiply.at(y, [0, 0, 2], x[1])
    return np.sum(y)


def _fill(x):
    y = np.zeros_like(x)
    y.fill(x[2])
    return np.sum(y * x)


def _slice_mask_fancy(x):
    y = np.zeros_like(x)
    y[1:3] = x[:2] ** 2
    y[x > 0] = 2.0 * x[x > 0]
    y[[0, 3]] = y[[3, 0]] + x[1]
    return np.sum(y * x)


@pytest.mark.parametrize("f", [_putmask, _putmask_short_values, _place, _place_constant,
                               _copyto_where, _put, _ufunc_at, _fill, _slice_mask_fancy])
def test_every_in_place_write_is_replayed(f):
    check_everywhere(f)


def test_putmask_and_place_into_a_plain_array_raise():
    def f(x):
        y = np.zeros(4)
        np.putmask(y, x > 0, x)
        return np.sum(y)

    def g(x):
        y = np.zeros(4)
        np.place(y, x > 0, x)
        return np.sum(y)

    for h in (f, g):
        for mode in ("forward", "reverse"):
            with pytest.raises(TypeError, match="plain numpy array"):
                ad.jacobian(h, mode=mode)(X)
        with pytest.raises(TypeError, match="plain numpy array"):
            ad.record(h, X)


def test_putmask_and_place_on_plain_arrays_are_numpy():
    a, b = np.arange(5.0), np.arange(5.0)
    np.putmask(a, a > 1, [9.0, 8.0])
    np.place(b, b > 1, [9.0, 8.0])
    np.testing.assert_array_equal(a, [0, 1, 9, 8, 9])
    np.testing.assert_array_equal(b, [0, 1, 9, 8, 9])
