"""Second order through complex intermediates and through irfft / irfft2 / irfftn (with
n= / s=), and Jacobians / Hessians of complex inputs (forward and reverse mode, JAX's
conventions)."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(2031)


def _cz(x):
    n = x.size // 2
    return x[:n] + 1j * x[n:]


THROUGH_COMPLEX = {
    "sum": lambda x: np.real(np.sum(_cz(x) ** 2)),
    "mean": lambda x: np.abs(np.mean(_cz(x) ** 2)),
    "max-of-real": lambda x: np.max(np.real(_cz(x) ** 2)),
    "max": lambda x: np.real(np.max(_cz(x) ** 2)),
    "min": lambda x: np.imag(np.min(_cz(x) * 1j)),
    "prod": lambda x: np.real(np.prod(_cz(x))),
    "real-imag-conj": lambda x: np.sum(np.real(_cz(x)) ** 2 * np.imag(_cz(x))
                                       + np.real(np.conj(_cz(x)) * _cz(x) ** 2)),
    "add": lambda x: np.abs(np.sum(np.add(_cz(x), _cz(x[::-1]) ** 2))),
    "vstack": lambda x: np.sum(np.abs(np.vstack([_cz(x), _cz(x) ** 2])) ** 2),
    "hstack": lambda x: np.sum(np.abs(np.hstack([_cz(x), _cz(x) ** 2])) ** 3),
    "column_stack": lambda x: np.sum(np.abs(np.column_stack([_cz(x), _cz(x) ** 2])) ** 3),
    "irfft-n": lambda x: np.sum(np.fft.irfft(_cz(x), n=8) ** 3),
    "irfft-short-n": lambda x: np.sum(np.fft.irfft(_cz(x), n=5) ** 3),
    "irfft2-s": lambda x: np.sum(np.fft.irfft2(_cz(x).reshape(2, 3), s=(2, 4)) ** 3),
    "irfftn-s": lambda x: np.sum(np.fft.irfftn(_cz(x).reshape(2, 3), s=(3, 5), axes=(0, 1)) ** 3),
    "irfftn": lambda x: np.sum(np.fft.irfftn(_cz(x).reshape(2, 3)) ** 3),
    "hfft-n": lambda x: np.sum(np.fft.hfft(_cz(x), n=7) ** 3),
}


@pytest.mark.parametrize("name", sorted(THROUGH_COMPLEX))
def test_hessians_through_complex_values(name):
    f = THROUGH_COMPLEX[name]
    x = RNG.standard_normal(12)
    expected = numerical_jacobian(ad.grad(f), (x,), 0)
    np.testing.assert_allclose(ad.hessian(f)(x), expected, atol=1e-6)
    np.testing.assert_allclose(ad.jacobian(ad.grad(f), mode="reverse")(x), expected, atol=1e-6)


jax = pytest.importorskip("jax", reason="JAX is the oracle")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

REAL_OF_COMPLEX = [
    lambda m: lambda z: m.abs(z) ** 2 * m.real(z[0]),
    lambda m: lambda z: m.real(m.fft.fft(z)),
    lambda m: lambda z: m.stack([m.sum(m.abs(z)), m.imag(z[1] * z[2])]),
    lambda m: lambda z: m.sum(m.abs(z) ** 3),
]


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
@pytest.mark.parametrize("make", REAL_OF_COMPLEX, ids=range(len(REAL_OF_COMPLEX)))
def test_jacobian_of_complex_inputs_matches_jax_jacrev(make, mode):
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    ours = ad.jacobian(make(np), mode=mode)(z)
    theirs = np.asarray(jax.jacrev(make(jnp))(jnp.asarray(z)))
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_jacobian_of_complex_inputs_in_trees_and_with_real_arguments():
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    g = lambda a, d: np.abs(d["z"]) * a + np.real(d["w"]) * a  # noqa: E731
    ga, gd = ad.jacobian(g, argnums=(0, 1), mode="forward")(2.0, {"z": z, "w": np.ones(3)})
    np.testing.assert_allclose(ga, np.abs(z) + 1.0)
    np.testing.assert_allclose(gd["z"], np.diag(2.0 * np.conj(z) / np.abs(z)))
    np.testing.assert_allclose(gd["w"], 2.0 * np.eye(3))


def test_complex_outputs_of_complex_inputs_and_complex_hessians_say_what_to_do():
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j])
    with pytest.raises(TypeError, match="holomorphic=True"):
        ad.jacobian(lambda z: z * 2)(z)
    with pytest.raises(TypeError, match="real and imaginary parts"):
        ad.hessian(lambda z: np.sum(np.abs(z) ** 2))(z)


def test_holomorphic_hessian_matches_jax():
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j])
    ours = ad.hessian(lambda z: np.sum(z ** 3 * z[0]), holomorphic=True)(z)
    theirs = jax.hessian(lambda z: jnp.sum(z ** 3 * z[0]), holomorphic=True)(z)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)
