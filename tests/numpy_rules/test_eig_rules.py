"""np.linalg.eig / eigvals (general matrices) in both modes against finite differences."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad


def parts(z):
    return np.stack([np.real(z), np.imag(z)])


def real_spectrum(*batch, n=3):
    """Non-symmetric matrices with well-separated real eigenvalues and well-conditioned
    eigenvectors (a generator of their own: the same matrices whatever ran before)."""
    rng = np.random.default_rng(1000 + n + len(batch))
    v = np.eye(n) + 0.3 * rng.standard_normal(batch + (n, n))
    return (v * (np.arange(1.0, n + 1) * 1.7)) @ np.linalg.inv(v)


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (4, 4), (1, 1)])
def test_eigvals_and_eigenvalues_of_eig_complex_spectrum(shape):
    a = rand(*shape)
    check(lambda a: parts(np.linalg.eigvals(a)), a)
    check(lambda a: parts(np.linalg.eig(a).eigenvalues), a)


@pytest.mark.parametrize("batch", [(), (2,)])
def test_real_spectrum_gives_real_derivatives(batch):
    a = real_spectrum(*batch)
    assert not np.iscomplexobj(np.linalg.eigvals(a))
    check(np.linalg.eigvals, a)
    for mode in ("forward", "reverse"):
        assert not np.iscomplexobj(ad.jacobian(np.linalg.eigvals, mode=mode)(a))


@pytest.mark.parametrize("make", [lambda: rand(3, 3), lambda: real_spectrum(),
                                  lambda: rand(2, 4, 4)], ids=["complex", "real", "batch"])
def test_eigenvectors_through_phase_invariant_functions(make):
    a = make()
    check(lambda a: np.abs(np.linalg.eig(a)[1]), a)

    def projector(a):
        w, v = np.linalg.eig(a)
        return parts(v[..., :, :1] @ np.conj(np.swapaxes(v[..., :, :1], -1, -2)))

    check(projector, a)

    def rebuilt(a):
        w, v = np.linalg.eig(a)
        return parts((v * w[..., None, :]) @ np.linalg.inv(v))

    check(rebuilt, a)


def test_eigenvalue_gradient_matches_the_closed_form():
    a = rand(3, 3)
    w, v = np.linalg.eig(a)
    vinv = np.linalg.inv(v)
    # d w_0 / d A_ij = (V^-1)[0, i] V[j, 0], split into real and imaginary parts
    expected = np.outer(vinv[0], v[:, 0])
    jac = ad.jacobian(lambda a: parts(np.linalg.eigvals(a)), mode="reverse")(a)
    idx = 0
    np.testing.assert_allclose(jac[0, idx], np.real(expected), atol=1e-10)
    np.testing.assert_allclose(jac[1, idx], np.imag(expected), atol=1e-10)


def test_repeated_eigenvalues_keep_eigenvalue_gradients_finite():
    a = np.diag([1.0, 1.0, 2.0])
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda a: np.sum(np.linalg.eigvals(a) ** 2), mode=mode)(a)
        np.testing.assert_allclose(jac, 2 * a, atol=1e-12)
        jac = ad.jacobian(lambda a: np.abs(np.linalg.eig(a)[1]), mode=mode)(a)
        assert np.all(np.isfinite(jac))


@pytest.mark.parametrize("func", [
    lambda a: np.abs(np.linalg.eigvals(np.reshape(a, (3, 3)))) ** 2,
    lambda a: np.real(np.linalg.eigvals(np.reshape(a, (3, 3))) ** 3),
    lambda a: np.abs(np.linalg.eig(np.reshape(a, (3, 3)))[1]),
], ids=["abs_eigvals", "real_cube", "abs_eigvecs"])
def test_second_order(func):
    check_second_order(func, rand(9))
