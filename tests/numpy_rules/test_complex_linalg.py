"""Complex linear algebra: rules checked against central differences and JAX, and clear
refusals where a complex rule is not written (never a silently wrong number)."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(28)


def _complex(x, shape):
    n = int(np.prod(shape))
    return (x[:n] + 1j * x[n:2 * n]).reshape(shape)


def _hermitian(z):
    return z + np.conj(np.swapaxes(z, -1, -2))


def _real_imag(f):
    """A real function of a real vector from a (possibly complex) function."""
    def g(x):
        y = f(x)
        return np.concatenate([np.ravel(np.real(y)), np.ravel(np.imag(y))])
    return g


# -- refusals: complex inputs whose rule is real-only ----------------------------------------

REFUSED = {
    "slogdet": lambda x: np.linalg.slogdet(_complex(x, (3, 3)))[1],
    "cholesky": lambda x: np.linalg.cholesky(_hermitian(_complex(x, (3, 3))) + 9 * np.eye(3)),
    "qr": lambda x: np.linalg.qr(_complex(x, (4, 3)))[1],
    "lstsq": lambda x: np.linalg.lstsq(_complex(x, (4, 2)), np.ones(4), rcond=None)[0],
}


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_complex_without_rule_is_refused(name, mode):
    f = _real_imag(REFUSED[name])
    with pytest.raises(ad.MissingRuleError, match=rf"np\.linalg\.{name} of a complex array"):
        ad.jacobian(f, mode=mode)(RNG.standard_normal(24))


def test_real_inputs_keep_their_rules():
    x = RNG.standard_normal(12)
    f = lambda x: np.linalg.qr(x.reshape(4, 3))[1].ravel()  # noqa: E731
    np.testing.assert_allclose(ad.jacobian(f)(x), numerical_jacobian(f, (x,), 0), atol=1e-6)


PENDING = {
    "norm": lambda x: np.linalg.norm(_complex(x, (5,))),
    "svd": lambda x: np.linalg.svd(_complex(x, (3, 2)), compute_uv=False),
    "eigh": lambda x: np.linalg.eigh(_hermitian(_complex(x, (3, 3))))[0],
    "eigvalsh": lambda x: np.linalg.eigvalsh(_hermitian(_complex(x, (3, 3)))),
    "pinv": lambda x: np.linalg.pinv(_complex(x, (2, 4, 2))),
}


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", sorted(PENDING))
def test_pending_complex_rules_are_refused(name, mode):
    f = _real_imag(PENDING[name])
    with pytest.raises(ad.MissingRuleError, match=rf"np\.linalg\.{name} of a complex array"):
        ad.jacobian(f, mode=mode)(RNG.standard_normal(40))
