"""scipy.special.boxcox's derivative in lmbda has a removable singularity at lmbda = 0: the
rule takes a series there, so first and second derivatives are right near and at 0."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

sp = pytest.importorskip("scipy.special")


def _program(v0):
    """The random program where the wrong second derivative was found."""
    v4 = sp.pdtr(np.array([5, 3, 3, 1]), v0 + 0.95)
    return np.sum(sp.boxcox(v4, v0))


def test_the_found_program_has_the_right_second_derivative():
    x = np.float64(0.0)
    expected = numerical_jacobian(ad.grad(_program), (x,), 0)
    np.testing.assert_allclose(ad.hessian(_program)(x), expected, rtol=1e-7)
    np.testing.assert_allclose(ad.jacobian(ad.grad(_program), mode="forward")(x), expected,
                               rtol=1e-7)
    tape = ad.record(_program, np.float64(0.3))
    np.testing.assert_allclose(tape.hvp((x,), np.float64(1.0)), expected, rtol=1e-7)


@pytest.mark.parametrize("lmbda", [0.0, 1e-12, -1e-7, 1e-4, 0.03, -0.05, 0.2, -0.7, 1.5])
def test_boxcox_derivatives_in_lmbda_near_zero(lmbda):
    x = np.array([0.2, 0.9, 1.0, 2.5])
    lam = np.float64(lmbda)
    for mode in ("forward", "reverse"):
        d1 = ad.jacobian(lambda t: sp.boxcox(x, t), mode=mode)(lam)
        np.testing.assert_allclose(d1, numerical_jacobian(lambda t: sp.boxcox(x, t), (lam,), 0),
                                   rtol=1e-7, atol=1e-9)
    # the second derivative, log(x)**3 / 3 at 0, against differences of the first
    second = ad.jacobian(lambda t: ad.jacobian(lambda s: sp.boxcox(x, s))(t),
                         mode="forward")(lam)
    expected = numerical_jacobian(lambda t: ad.jacobian(lambda s: sp.boxcox(x, s))(t), (lam,), 0)
    np.testing.assert_allclose(second, expected, rtol=1e-6, atol=1e-8)
    if lmbda == 0.0:
        np.testing.assert_allclose(second, np.log(x) ** 3 / 3, rtol=1e-12, atol=1e-15)
