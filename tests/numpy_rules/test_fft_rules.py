"""np.fft in both modes against finite differences, with n / s, axis / axes and norm,
real and complex inputs, and second order."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

F = np.fft
NORMS = [None, "ortho", "forward"]


def parts(y):
    """Real and imaginary parts stacked: a real array carrying all of a complex one."""
    return np.stack([np.real(y), np.imag(y)])


@pytest.mark.parametrize("func", [F.fft, F.ifft])
@pytest.mark.parametrize("shape,axis", [((5,), -1), ((4, 3), 0), ((2, 3, 4), 1), ((1,), 0)])
@pytest.mark.parametrize("n", [None, 2, 7])
@pytest.mark.parametrize("norm", NORMS)
def test_fft_ifft_real_and_complex_inputs(func, shape, axis, n, norm):
    x, y = rand(*shape), rand(*shape)
    check(lambda x: parts(func(x, n, axis, norm)), x)
    check(lambda x, y: parts(func(x + 1j * y, n=n, axis=axis, norm=norm)), x, y)


@pytest.mark.parametrize("shape,axis", [((6,), -1), ((5,), 0), ((4, 3), 0), ((2, 3, 5), -1)])
@pytest.mark.parametrize("n", [None, 3, 8])
@pytest.mark.parametrize("norm", NORMS)
def test_rfft_irfft(shape, axis, n, norm):
    x, y = rand(*shape), rand(*shape)
    check(lambda x: parts(F.rfft(x, n, axis, norm)), x)
    # irfft reads a Hermitian half spectrum: real and imaginary parts are both inputs
    check(lambda x, y: F.irfft(x + 1j * y, n, axis, norm), x, y)
    check(lambda x: F.irfft(F.rfft(x, axis=axis) * np.exp(1j * np.sum(x)), axis=axis), x)


@pytest.mark.parametrize("func", [F.fftn, F.ifftn, F.fft2, F.ifft2])
@pytest.mark.parametrize("shape,s,axes", [((3, 4), None, None), ((2, 3, 4), (2, 5), (0, 2)),
                                          ((2, 3, 4), None, (-1, -2)), ((3, 4), (4, 2), None)])
@pytest.mark.parametrize("norm", NORMS)
def test_fftn_ifftn_fft2_ifft2(func, shape, s, axes, norm):
    if axes is None and func in (F.fft2, F.ifft2):
        axes = (-2, -1)
    if axes is None and s is not None:
        axes = tuple(range(len(shape) - len(s), len(shape)))
    x, y = rand(*shape), rand(*shape)
    check(lambda x: parts(func(x, s, axes, norm)), x)
    check(lambda x, y: parts(func(x + 1j * y, s=s, axes=axes, norm=norm)), x, y)


@pytest.mark.parametrize("shape,s,axes", [((3, 4), None, None), ((2, 3, 4), (2, 6), (0, 2)),
                                          ((4, 5), (3, 4), (0, 1)), ((2, 3, 4), None, (1,))])
@pytest.mark.parametrize("norm", NORMS)
def test_rfftn_irfftn(shape, s, axes, norm):
    x, y = rand(*shape), rand(*shape)
    check(lambda x: parts(F.rfftn(x, s, axes, norm)), x)
    check(lambda x, y: F.irfftn(x + 1j * y, s, axes, norm), x, y)


@pytest.mark.parametrize("norm", NORMS)
def test_rfft2_irfft2(norm):
    x, y = rand(2, 3, 4), rand(2, 3, 4)
    check(lambda x: parts(F.rfft2(x, norm=norm)), x)
    check(lambda x: parts(F.rfft2(x, s=(2, 5), axes=(0, 1), norm=norm)), x)
    check(lambda x, y: F.irfft2(x + 1j * y, norm=norm), x, y)
    check(lambda x, y: F.irfft2(x + 1j * y, s=(3, 5), norm=norm), x, y)


@pytest.mark.parametrize("n", [None, 5, 8])
@pytest.mark.parametrize("norm", NORMS)
def test_hfft_ihfft(n, norm):
    x, y = rand(4), rand(2, 4)
    check(lambda x, y: F.hfft(x + 1j * y, n, -1, norm), x, y)
    check(lambda y: F.hfft(y * (1 - 2j), n=n, axis=0, norm=norm), y)
    check(lambda x: parts(F.ihfft(x, n, -1, norm)), x)
    check(lambda y: parts(F.ihfft(y, n=n, axis=0, norm=norm)), y)


@pytest.mark.parametrize("func", [F.fftshift, F.ifftshift])
@pytest.mark.parametrize("shape,axes", [((5,), None), ((4, 5), None), ((4, 5), 1),
                                        ((3, 4, 5), (0, 2))])
def test_fftshift_ifftshift(func, shape, axes):
    x, y = rand(*shape), rand(*shape)
    check(lambda x: func(x, axes) * np.arange(x.size).reshape(x.shape), x)
    check(lambda x, y: parts(func(x + 1j * y, axes=axes)), x, y)


def test_parseval_gradient_is_exact():
    x = rand(6)
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda x: np.sum(np.abs(F.fft(x)) ** 2), mode=mode)(x)
        np.testing.assert_allclose(jac, 2 * 6 * x, rtol=1e-12)
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(np.abs(F.rfft(x, norm="ortho")) ** 2)
                                       + np.sum(np.abs(F.rfft(x, norm="ortho")[1:3]) ** 2))(x),
                               2 * x, rtol=1e-12)


def test_spectral_derivative_program():
    """A spectral method: differentiate a periodic signal with rfft / irfft."""
    n = 16
    k = 2j * np.pi * F.rfftfreq(n, d=1.0 / n)

    def energy(u):
        du = F.irfft(k * F.rfft(u), n)
        return np.sum(du ** 2) + np.sum(u ** 4)

    u = np.sin(2 * np.pi * np.arange(n) / n) + 0.1 * rand(n)
    check(energy, u)
    check_second_order(lambda u: F.irfft(k * F.rfft(u), n) ** 2, u)


@pytest.mark.parametrize("func", [
    lambda x: np.abs(F.rfft(x)) ** 2,
    lambda x: F.irfft(F.rfft(x) ** 2, 6),
    lambda x: np.real(F.fft(x * np.exp(1j * x))),
    lambda x: np.abs(F.fftn(np.reshape(x, (2, 3)) ** 2, norm="ortho")).ravel(),
    lambda x: F.hfft(F.ihfft(x ** 3), 6),
    lambda x: F.irfftn(F.rfftn(np.reshape(x, (2, 3)) ** 2) * (1 + 1j), s=(2, 3), axes=(0, 1)).ravel(),
    lambda x: np.abs(F.rfft2(np.reshape(x, (3, 2)), norm="ortho")).ravel() ** 2,
    lambda x: F.fftshift(x ** 2) * F.ifftshift(x),
], ids=["abs_rfft", "irfft_square", "fft_phase", "fftn", "hfft_ihfft", "rfftn_irfftn", "rfft2",
        "shifts"])
def test_second_order(func):
    check_second_order(func, rand(6))


def test_hessian_through_rfft_matches_forward_over_reverse_and_reverse_over_reverse():
    x = rand(5)

    def f(x):
        return np.sum(np.abs(F.rfft(np.sin(x))) ** 3)

    h = ad.hessian(f)(x)
    h_rr = ad.jacobian(ad.grad(f), mode="reverse")(x)
    np.testing.assert_allclose(h, h_rr, rtol=1e-8, atol=1e-10)
    fd = ad.gradcheck  # the gradient itself against finite differences
    assert fd(ad.grad(f), x, atol=1e-5, rtol=1e-4)


def test_jvp_with_complex_tangents_is_the_transform_of_the_tangent():
    z = rand(5) + 1j * rand(5)
    t = rand(5) + 1j * rand(5)
    out, tangent = ad.jvp(lambda z: F.fft(z, norm="ortho"), (z,), (t,))
    np.testing.assert_allclose(out, F.fft(z, norm="ortho"))
    np.testing.assert_allclose(tangent, F.fft(t, norm="ortho"), rtol=1e-12)
    out, tangent = ad.jvp(lambda z: F.irfft(z, 8), (z,), (t,))
    np.testing.assert_allclose(tangent, F.irfft(t, 8), rtol=1e-12)


def test_gradient_of_real_loss_of_complex_input_follows_jax_convention():
    z = rand(4) + 1j * rand(4)
    # L = sum |fft(z)|^2 = n * sum |z|^2, whose JAX gradient is 2 n conj(z)
    g = ad.grad(lambda z: np.sum(np.abs(F.fft(z)) ** 2))(z)
    np.testing.assert_allclose(g, 2 * 4 * np.conj(z), rtol=1e-12)
