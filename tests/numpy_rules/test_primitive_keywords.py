"""A traced value passed to a primitive by keyword gets its gradient (it moves to its
positional slot), in both modes; a keyword-only traced argument is a clear error."""

import numpy as np
import pytest

import dualad as ad


def _scale(x, s=1.0):
    return x * s


scale = ad.primitive(_scale)


@ad.gradient.dispatch
def gradient(op: ad.Method[scale], grad, output, x, s=1.0):
    return (grad * s, np.sum(grad * x))


@ad.forward.dispatch
def forward(op: ad.Method[scale], x, s=1.0):
    return x * s


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_traced_keyword_gets_its_gradient(mode):
    x = np.array([1.0, 2.0])
    jac_kw = ad.jacobian(lambda s: scale(x, s=s), mode=mode)(3.0)
    jac_pos = ad.jacobian(lambda s: scale(x, s), mode=mode)(3.0)
    np.testing.assert_allclose(jac_kw, x)
    np.testing.assert_allclose(jac_pos, x)


def test_keyword_only_traced_argument_is_refused():
    def _f(x, *, s):
        return x * s

    f = ad.primitive(_f)
    with pytest.raises(TypeError, match="pass it positionally"):
        ad.grad(lambda s: f(3.0, s=s))(2.0)
