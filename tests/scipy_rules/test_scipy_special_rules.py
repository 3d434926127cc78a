"""dualad.scipy_rules.special (non-elementwise scipy.special) in both modes against finite
differences, against scipy's values, and to second order. The elementwise functions of the
table are covered entry by entry in tests/test_elementwise_rules.py."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

ssp = pytest.importorskip("scipy.special")
from dualad.scipy_rules import special  # noqa: E402


@pytest.mark.parametrize("shape,axis", [((), None), ((4,), None), ((4,), 0), ((3, 4), 1),
                                        ((3, 4), (0, 1)), ((2, 3, 4), -2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp(shape, axis, keepdims):
    a = rand(*shape)
    np.testing.assert_allclose(special.logsumexp(a, axis, keepdims=keepdims),
                               ssp.logsumexp(a, axis, keepdims=keepdims))
    check(lambda a: special.logsumexp(a, axis=axis, keepdims=keepdims), a)


@pytest.mark.parametrize("bshape", [(3, 4), (4,), (3, 1), ()])
def test_logsumexp_with_b_by_keyword_and_position(bshape):
    a, b = rand(3, 4), np.abs(rand(*bshape)) + 0.5
    np.testing.assert_allclose(special.logsumexp(a, 1, b), ssp.logsumexp(a, 1, b))
    check(lambda a, b: special.logsumexp(a, axis=1, b=b), a, b)
    check(lambda a, b: special.logsumexp(a, None, b), a, b)


def test_logsumexp_return_sign():
    a, b = rand(3, 4), rand(3, 4)
    out, sign = special.logsumexp(a, axis=0, b=b, return_sign=True)
    ref_out, ref_sign = ssp.logsumexp(a, axis=0, b=b, return_sign=True)
    np.testing.assert_allclose(out, ref_out)
    np.testing.assert_array_equal(sign, ref_sign)
    check(lambda a, b: special.logsumexp(a, axis=0, b=b, return_sign=True)[0], a, b)
    check(lambda a, b: special.logsumexp(a, 0, b, False, True)[1] * a, a, b)  # sign: constant


def test_logsumexp_is_stable_for_large_inputs():
    a = np.array([1000.0, 1001.0])
    g = ad.grad(special.logsumexp)(a)
    np.testing.assert_allclose(g, ssp.softmax(a))
    np.testing.assert_allclose(ad.hessian(special.logsumexp)(a),
                               np.diag(g) - np.outer(g, g), atol=1e-12)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((4,), None), ((3, 4), 0), ((3, 4), -1),
                                        ((2, 3, 4), (1, 2))])
def test_softmax_log_softmax(name, shape, axis):
    x = rand(*shape)
    f = getattr(special, name)
    np.testing.assert_allclose(f(x, axis=axis), getattr(ssp, name)(x, axis=axis))
    check(lambda x: f(x, axis=axis), x)


def test_softplus_multigammaln_polygamma():
    x = rand(5)
    np.testing.assert_allclose(special.softplus(x), np.logaddexp(0, x))
    check(special.softplus, x)
    a = np.abs(rand(2, 3)) + 2.0
    np.testing.assert_allclose(special.multigammaln(a, 3), ssp.multigammaln(a, 3))
    check(lambda a: special.multigammaln(a, 3), a)
    check(lambda a: special.multigammaln(a, 1), a)
    check(lambda x: special.polygamma(2, x), np.abs(x) + 0.5)
    with pytest.raises(ValueError, match="condition"):
        ad.grad(lambda a: special.multigammaln(a, 5))(1.0)


def test_table_functions_through_the_module():
    x = np.abs(rand(4)) + 0.5
    assert special.gammaln is ssp.gammaln
    check(lambda x: special.gammaln(x) + special.beta(x, 2.0) + special.xlogy(x, x), x)
    check(lambda x: ssp.betainc(2.0, 3.0, x / 3) + ssp.iv(1.5, x) + ssp.entr(x), x)


def test_missing_rules_name_scipy_special():
    with pytest.raises(ad.MissingRuleError, match=r"scipy\.special\.zeta"):
        ad.grad(lambda x: special.zeta(x, 2.0))(3.0)
    assert special.zeta(3.0, 2.0) == ssp.zeta(3.0, 2.0)
    with pytest.raises(ad.MissingRuleError, match=r"scipy\.special\.wofz"):
        ad.grad(lambda x: np.real(ssp.wofz(x)))(1.0)
    for mode in ("forward", "reverse"):
        with pytest.raises(ad.MissingRuleError, match=r"scipy\.special\.gammainc.*'a'"):
            ad.jacobian(lambda a: ssp.gammainc(a, 1.0), mode=mode)(np.array([2.0]))
        with pytest.raises(ad.MissingRuleError, match=r"scipy\.special\.iv.*'v'"):
            ad.jacobian(lambda v: ssp.iv(v, 1.0), mode=mode)(np.array([2.0]))


@pytest.mark.parametrize("func", [
    lambda x: special.logsumexp(x),
    lambda x: special.logsumexp(np.reshape(x, (2, 3)), axis=0, b=np.arange(1.0, 4.0)),
    lambda x: special.softmax(x),
    lambda x: special.log_softmax(x ** 2),
    lambda x: special.multigammaln(x ** 2 + 2.0, 2),
], ids=["logsumexp", "logsumexp_b", "softmax", "log_softmax", "multigammaln"])
def test_second_order(func):
    check_second_order(func, rand(6))
