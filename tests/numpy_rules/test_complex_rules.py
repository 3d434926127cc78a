"""Complex numbers, as JAX: grad of a real-valued f of complex z is the conjugate of the
steepest-ascent direction (dL/dx - i dL/dy); holomorphic=True gives f'(z); jvp takes complex
tangents. Checked against central differences in the real and imaginary directions, between
the modes, and against JAX (when installed)."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


def crand(*shape):
    return rand(*shape) + 1j * rand(*shape)


def fd_complex_grad(f, z, h=1e-6):
    """dL/dx - i dL/dy by central differences, for a real-valued f."""
    g = np.zeros(z.shape, dtype=complex)
    for idx in np.ndindex(z.shape):
        e = np.zeros(z.shape)
        e[idx] = h
        dx = (f(z + e) - f(z - e)) / (2 * h)
        dy = (f(z + 1j * e) - f(z - 1j * e)) / (2 * h)
        g[idx] = dx - 1j * dy
    return g


def fd_directional(f, z, t, h=1e-6):
    return (f(z + h * t) - f(z - h * t)) / (2 * h)


A = crand(3, 3) + 3 * np.eye(3)
B = crand(3, 3)

# real-valued functions of a complex matrix
REAL_VALUED = {
    "abs2": lambda z: np.sum(np.abs(z) ** 2),
    "real_exp": lambda z: np.sum(np.real(np.exp(z))),
    "imag_log": lambda z: np.sum(np.imag(np.log(z + 3))),
    "angle": lambda z: np.sum(np.angle(z + 0.1) * np.arange(z.size).reshape(z.shape)),
    "conj_product": lambda z: np.real(np.sum(np.conj(z) * B * z)),
    "sin_sqrt_power": lambda z: np.sum(np.abs(np.sin(z) * np.sqrt(z + 4) / (z ** 2 + 2))),
    "matmul_trace": lambda z: np.real(np.trace(z @ B @ z)),
    "solve": lambda z: np.sum(np.abs(np.linalg.solve(z + 3 * np.eye(3), B[:, 0]))),
    "inv_det": lambda z: np.abs(np.linalg.det(np.linalg.inv(z + 3 * np.eye(3)))),
    "sum_mean": lambda z: np.abs(np.sum(z) * np.mean(z, axis=0)[1]),
    "fft": lambda z: np.sum(np.abs(np.fft.fft2(z) * B) ** 2),
    "attributes": lambda z: np.sum(z.real * z.imag + np.abs(z.conj())),
}


@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_grad_of_real_function_is_conjugate_steepest_ascent(name):
    f = REAL_VALUED[name]
    z = crand(3, 3)
    np.testing.assert_allclose(ad.grad(f)(z), fd_complex_grad(f, z), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_real_function_through_real_and_imaginary_parts_both_modes(name):
    f = REAL_VALUED[name]
    check(lambda x, y: f(x + 1j * y), rand(3, 3), rand(3, 3))


@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_second_order_through_complex_intermediates(name):
    f = REAL_VALUED[name]
    check_second_order(lambda v: f(v[:9].reshape(3, 3) + 1j * v[9:].reshape(3, 3)), rand(18),
                       atol=1e-4, rtol=1e-3)


COMPLEX_VALUED = {
    "exp_log": lambda z: np.exp(z) * np.log(z + 4),
    "conj": lambda z: np.conj(z) * z,
    "abs_angle": lambda z: np.abs(z) + 1j * np.angle(z),
    "real_imag": lambda z: np.real(z) * 2 - 3j * np.imag(z) ** 2,
    "matmul": lambda z: z @ B @ z,
    "solve": lambda z: np.linalg.solve(z + 3 * np.eye(3), B),
    "fft": lambda z: np.fft.ifft(np.fft.fft(z, axis=0) * B, axis=1),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_VALUED))
def test_jvp_with_complex_tangents_is_the_directional_derivative(name):
    f = COMPLEX_VALUED[name]
    z, t = crand(3, 3), crand(3, 3)
    out, tangent = ad.jvp(f, (z,), (t,))
    np.testing.assert_allclose(out, f(z))
    np.testing.assert_allclose(tangent, fd_directional(f, z, t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(COMPLEX_VALUED))
def test_vjp_is_the_transpose_of_jvp(name):
    """Re <ct, J t> = Re <vjp(ct), t> (the pairing of JAX's convention)."""
    f = COMPLEX_VALUED[name]
    z, t, ct = crand(3, 3), crand(3, 3), crand(3, 3)
    _, tangent = ad.jvp(f, (z,), (t,))
    _, pullback = ad.vjp(f, z)
    (g,) = pullback(ct)
    np.testing.assert_allclose(np.real(np.sum(ct * tangent)), np.real(np.sum(g * t)),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("f", [np.exp, np.sin, lambda z: z ** 3, lambda z: 1 / (z + 3),
                               lambda z: np.sqrt(z + 4), lambda z: z @ A @ z])
def test_holomorphic_jacobian_and_grad(f):
    z = crand(3, 3)
    jac = ad.jacobian(f, holomorphic=True)(z)
    for idx in [(0, 0), (1, 2)]:
        e = np.zeros((3, 3))
        e[idx] = 1.0
        np.testing.assert_allclose(jac[(...,) + idx], fd_directional(f, z, e),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(jac[(...,) + idx], fd_directional(f, z, 1j * e) / 1j,
                                   rtol=1e-5, atol=1e-6)
    g = ad.grad(lambda z: np.sum(f(z)), holomorphic=True)(z)
    np.testing.assert_allclose(g, np.sum(jac, axis=(0, 1)), rtol=1e-10)


def test_complex_outputs_of_real_inputs_in_both_modes():
    x = rand(4)
    expected = np.fft.fft(np.eye(4))
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(np.fft.fft, mode=mode)(x), expected, atol=1e-12)
        np.testing.assert_allclose(ad.jacobian(lambda x: np.exp(1j * x), mode=mode)(x),
                                   np.diag(1j * np.exp(1j * x)), atol=1e-12)


def test_errors():
    z = crand(2)
    with pytest.raises(TypeError, match="holomorphic=True"):
        ad.jacobian(np.exp)(z)
    with pytest.raises(TypeError, match="real-valued output"):
        ad.grad(lambda z: np.sum(z * z))(z)
    with pytest.raises(TypeError, match="needs complex inputs"):
        ad.grad(lambda x: np.sum(x * x), holomorphic=True)(rand(2))
    with pytest.raises(TypeError, match="tangent of primal 0 is complex"):
        ad.jvp(np.exp, (rand(2),), (z,))
    # a real tangent of a complex primal is a complex direction with zero imaginary part
    out, tangent = ad.jvp(np.exp, (z,), (np.ones(2),))
    np.testing.assert_allclose(tangent, np.exp(z))


jax = pytest.importorskip("jax", reason="JAX is the oracle for these tests")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

ORACLE = [
    (lambda m: lambda z: m.sum(m.abs(z) ** 2 + m.real(m.exp(z)) * m.imag(z))),
    (lambda m: lambda z: m.sum(m.abs(m.sin(z) * m.conj(z)))),
    (lambda m: lambda z: m.real(m.trace(z @ z @ m.linalg.inv(z + 3 * m.eye(3))))),
    (lambda m: lambda z: m.sum(m.angle(z + 0.1) + m.abs(m.log(z + 3)))),
    (lambda m: lambda z: m.sum(m.abs(m.fft.fft(z, axis=0)) ** 2 * m.arange(9.0).reshape(3, 3))),
    (lambda m: lambda z: m.abs(m.linalg.det(z + 3 * m.eye(3)))),
]


@pytest.mark.parametrize("make", ORACLE)
def test_grad_matches_jax(make):
    z = crand(3, 3)
    ours = ad.grad(make(np))(z)
    theirs = np.asarray(jax.grad(make(jnp))(jnp.asarray(z)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("make", [lambda m: lambda z: m.sum(m.exp(z) * m.sin(z)),
                                  lambda m: lambda z: m.sum(z @ z @ z),
                                  lambda m: lambda z: m.sum(m.linalg.solve(z + 3 * m.eye(3),
                                                                           m.ones(3)))])
def test_holomorphic_grad_matches_jax(make):
    z = crand(3, 3)
    ours = ad.grad(make(np), holomorphic=True)(z)
    theirs = np.asarray(jax.grad(make(jnp), holomorphic=True)(jnp.asarray(z)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("make", [lambda m: lambda z: m.conj(z) * m.abs(z) + m.angle(z),
                                  lambda m: lambda z: m.real(z) ** 2 + 1j * m.imag(z) * z])
def test_vjp_matches_jax(make):
    z, ct = crand(4), crand(4)
    _, pullback = ad.vjp(make(np), z)
    _, jax_pullback = jax.vjp(make(jnp), jnp.asarray(z))
    np.testing.assert_allclose(pullback(ct)[0], np.asarray(jax_pullback(jnp.asarray(ct))[0]),
                               rtol=1e-8, atol=1e-10)


def test_sparsity_flows_through_the_parts_of_complex_intermediates():
    """real, imag, angle and real_if_close flow entry by entry (declared beside their
    rules): the detected pattern covers the Jacobian and the compressed Jacobian is it."""

    def f(x):
        z = x * (1.0 + 2.0j)
        return (np.real(z) * np.imag(z[::-1] * 1j) + np.angle(x + 1j)
                + np.real_if_close(x) + np.abs(np.conj(z)))

    for x in (np.array([1.0, 2.0, 3.0]), np.linspace(-1.0, 2.0, 5)):
        pattern = ad.jacobian_sparsity(f)(x).toarray()
        dense = ad.jacobian(f)(x)
        n = x.size
        expected = np.eye(n, dtype=bool) | np.eye(n, dtype=bool)[::-1]
        np.testing.assert_array_equal(pattern, expected)
        assert not np.any(dense[~pattern])
        np.testing.assert_allclose(ad.sparse_jacobian(f)(x).toarray(), dense, rtol=1e-12)
        np.testing.assert_allclose(dense, numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)
