"""scipy.linalg.schur (dualad.scipy_rules.linalg.schur): derivatives of T and Z against
central differences in both modes and to second order; T and Z are unique up to the
signs / phases of Z's columns, so the checks use what does not see them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.scipy_rules import linalg

RNG = np.random.default_rng(2032)
S = RNG.standard_normal((3, 3))
REAL_SPECTRUM = (S @ np.diag([1.0, -2.0, 3.5]) @ np.linalg.inv(S)).ravel()


def _complex(x):
    return (x[:9] + 1j * x[9:]).reshape(3, 3)


def _real_imag(f):
    def g(x):
        y = f(x)
        return np.concatenate([np.ravel(np.real(y)), np.ravel(np.imag(y))])
    return g


def _mH(z):
    return np.conj(z.T)


CASES = {
    "real-T": (lambda x: linalg.schur(x.reshape(3, 3))[0], REAL_SPECTRUM),
    "real-ZTZt": (lambda x: (lambda t, z: z @ np.diag(np.diag(t)) @ z.T)(
        *linalg.schur(x.reshape(3, 3))), REAL_SPECTRUM),
    "real-|Z|": (lambda x: np.abs(linalg.schur(x.reshape(3, 3))[1]), REAL_SPECTRUM),
    "complex-output-of-real": (lambda x: np.abs(linalg.schur(x.reshape(3, 3),
                                                               output="complex")[0]),
                               RNG.standard_normal(9)),
    "complex-diagonal": (lambda x: np.diagonal(linalg.schur(_complex(x), output="complex")[0]),
                         RNG.standard_normal(18)),
    "complex-|T|": (lambda x: np.abs(linalg.schur(_complex(x), output="complex")[0]),
                    RNG.standard_normal(18)),
    "complex-|Z|": (lambda x: np.abs(linalg.schur(_complex(x), output="complex")[1]),
                    RNG.standard_normal(18)),
    "complex-projector": (lambda x: (lambda t, z: z[:, :1] @ _mH(z[:, :1]))(
        *linalg.schur(_complex(x), output="complex")), RNG.standard_normal(18)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_schur(name):
    f, x = CASES[name]
    g = _real_imag(f)
    expected = numerical_jacobian(g, (x,), 0)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(g, mode=mode)(x), expected, atol=2e-6,
                                   err_msg=mode)


def test_values_are_scipy_and_plain_arrays_pass_through():
    a = REAL_SPECTRUM.reshape(3, 3)
    for ours, theirs in zip(linalg.schur(a), scipy.linalg.schur(a)):
        np.testing.assert_array_equal(ours, theirs)
    out, _ = ad.jvp(lambda a: linalg.schur(a)[0], (a,), (np.ones_like(a),))
    np.testing.assert_allclose(out, scipy.linalg.schur(a)[0])


def test_second_order():
    w = np.arange(9.0).reshape(3, 3)
    f = lambda x: np.sum(linalg.schur(x.reshape(3, 3))[0] ** 2 * w)  # noqa: E731
    x = REAL_SPECTRUM
    hess = ad.hessian(f)(x)
    forward_forward = ad.jacobian(ad.jacobian(f, mode="forward"), mode="forward")(x)
    np.testing.assert_allclose(hess, forward_forward, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(hess, numerical_jacobian(ad.grad(f), (x,), 0, eps=1e-6),
                               rtol=1e-4, atol=1e-3)


def test_real_output_with_complex_eigenvalues_is_refused():
    with pytest.raises(ad.MissingRuleError, match="output='complex'"):
        ad.grad(lambda a: np.sum(linalg.schur(a)[0]))(np.array([[0.0, -1.0], [1.0, 0.0]]))


def test_sparsity_flow_is_dense():
    f = lambda a: linalg.schur(a.reshape(3, 3))[0].ravel()  # noqa: E731
    assert ad.jacobian_sparsity(f)(REAL_SPECTRUM).toarray().all()
    hess = ad.sparse_hessian(lambda a: np.sum(linalg.schur(a.reshape(3, 3))[0] ** 2))
    np.testing.assert_allclose(hess(REAL_SPECTRUM).toarray(),
                               ad.hessian(lambda a: np.sum(linalg.schur(a.reshape(3, 3))[0] ** 2))(
                                   REAL_SPECTRUM), rtol=1e-8, atol=1e-8)
