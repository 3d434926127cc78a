"""Scalar paths that skip ``np.errstate`` where the table's ``quiet_when`` holds.

``divide`` (``quiet_when = "nonzero divisor"``, Python ``/`` there) and the logarithms and
``sqrt`` (``quiet_when = "positive"``) on float64 numbers: forward rows, forward lean Duals
and reverse-mode scalar nodes must give numpy's values and derivatives bit for bit, at
points where the condition holds and where it does not (zero divisors, non-positive
logarithms, inf, nan), with no warning where the condition holds.
"""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.derivatives.registry import get_rule, quiet_condition
from dualad.diagnostics.gradcheck import gradcheck, numerical_jacobian


def _f(x):
    a, b = x[0], x[1]
    return np.array([a / b, b / a, 3.0 / b, a / 2.0, np.divide(a, b), np.log(a), np.sqrt(a),
                     np.log2(a), np.log10(a), np.log1p(a), a ** 2.5, a ** b])


def _expected(a, b):
    """The Jacobian of ``_f`` by the table's formulas, in numpy, silenced as the rules are."""
    a, b = np.float64(a), np.float64(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        q, r = a / b, b / a
        return np.array([
            [1 / b, -q / b], [-r / a, 1 / a], [0.0, -(3.0 / b) / b], [0.5, 0.0],
            [1 / b, -q / b], [1 / a, 0.0], [0.5 / np.sqrt(a), 0.0],
            [1 / (a * np.log(2)), 0.0], [1 / (a * np.log(10)), 0.0], [1 / (1 + a), 0.0],
            [2.5 * np.where(a == 0, 1, a) ** 1.5 if a != 0 else 0.0, 0.0],
            [b * np.where((b == 0) & (a == 0), 1, a) ** (b - 1),
             np.where(a == 0, 0, np.log(np.where(a == 0, 1, a)) * a ** b)],
        ])


def _values(a, b):
    a, b = np.float64(a), np.float64(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.array([a / b, b / a, 3.0 / b, a / 2.0, np.divide(a, b), np.log(a),
                         np.sqrt(a), np.log2(a), np.log10(a), np.log1p(a), a ** 2.5, a ** b])


CALM = [(2.0, 0.5), (0.25, -3.0), (7.0, 1e-3), (1e100, 0.5), (1e-100, 2.0)]
EDGE = [(2.0, 0.0), (0.0, 2.0), (-1.0, 0.5), (0.0, 0.0), (np.inf, np.inf), (np.nan, 1.0),
        (1.0, np.nan), (-0.0, -0.0), (5.0, np.inf)]


@pytest.mark.parametrize(("a", "b"), CALM + EDGE)
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_bit_for_bit(a, b, mode):
    if mode == "reverse" and (a, b) in EDGE:
        pytest.skip("reverse mode pulls back a zero cotangent times an infinite partial "
                    "(nan) where forward mode keeps the exact zero: compared below instead")
    x = np.array([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's own primal warnings at edge points
        jac = ad.jacobian(_f, mode=mode)(x)
    expected = _expected(a, b)
    assert jac.shape == expected.shape
    assert np.array_equal(jac, expected, equal_nan=True), (jac, expected)


@pytest.mark.parametrize(("a", "b"), CALM + EDGE)
def test_values_and_modes_agree(a, b):
    x = np.array([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, _ = ad.value_and_grad(lambda x: _f(x)[0])(x)
        forward = ad.jacobian(_f, mode="forward")(x)
        reverse = ad.jacobian(_f, mode="reverse")(x)
    assert np.array_equal(value, _values(a, b)[0], equal_nan=True)
    finite = np.isfinite(forward) & np.isfinite(reverse)
    assert np.array_equal(forward[finite], reverse[finite])
    # where both are infinite or nan they agree too, except reverse's nan for 0 * inf
    both = ~np.isnan(forward) & ~np.isnan(reverse)
    assert np.array_equal(forward[both], reverse[both])


@pytest.mark.parametrize(("a", "b"), CALM[:3])
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_no_warning_where_the_condition_holds(a, b, mode):
    x = np.array([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ad.jacobian(_f, mode=mode)(x)
        ad.grad(lambda x: np.sum(_f(x)))(x)


@pytest.mark.parametrize("point", [(2.0, 0.5), (0.3, -1.7), (1.5, 4.0)])
def test_against_central_differences(point):
    x = np.array(point)
    assert gradcheck(_f, x)
    numeric = numerical_jacobian(_f, (x,), 0)
    assert np.allclose(ad.jacobian(_f, mode="reverse")(x), numeric, rtol=1e-6, atol=1e-8)


def _chain(x):
    y = x[0] * 1.0  # float64 nodes from here on: the scalar paths of both modes
    return y / (y * x[1]) + np.log(y - 1.0) + 1.0 / y


@pytest.mark.parametrize("point", [(2.0, 3.0), (1.5, -0.25), (4.0, 0.5)])
def test_scalar_chain_against_central_differences(point):
    x = np.array(point)
    assert gradcheck(_chain, x)
    a, b = point
    expected = np.array([1 / (a - 1) - 1 / a**2, -1 / b**2])
    assert np.allclose(ad.grad(_chain)(x), expected, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.allclose(ad.grad(_chain)(x), ad.jacobian(_chain, mode="forward")(x),
                           rtol=1e-14, atol=0)


@pytest.mark.parametrize("point", [(1.0, 0.0), (0.0, 2.0), (1.0, 1.0)])
def test_scalar_chain_at_zero_divisors_and_logarithms_is_not_finite(point):
    x = np.array(point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grad = ad.grad(_chain)(x)
        fwd = ad.jacobian(_chain, mode="forward")(x)
    assert not np.all(np.isfinite(grad)) and not np.all(np.isfinite(fwd))


def test_quiet_conditions():
    divisor, positive = quiet_condition("nonzero divisor"), quiet_condition("positive")
    assert divisor(1.0, 2.0) and divisor(np.float64(0.0), -3) and not divisor(1.0, 0.0)
    assert not divisor(1.0, np.inf) and not divisor(1.0, np.nan)
    assert not divisor(np.ones(2), 2.0)  # arrays take the silenced path
    assert positive(np.float64(2.0)) and positive(np.inf) and not positive(0.0)
    assert not positive(np.nan) and not positive(-1.0) and not positive(1.0, -2.0)
    assert get_rule(np.divide).quiet_when is divisor
    assert get_rule(np.log).quiet_when is positive
    assert get_rule(np.multiply).quiet_when is None
    base = quiet_condition("positive base")
    assert base(2.0, -3.5) and base(np.float64(1e-300), 2) and not base(5e-324, 0.0)
    assert not base(0.0, 2.0) and not base(-1.0, 2.0) and not base(2.0, np.inf)
    assert not base(np.inf, 1.0) and not base(2.0, np.nan)
    assert get_rule(np.power).quiet_when is base


def _scalar(x):
    return x / 3.0 + 2.0 / x + np.log(x) + np.sqrt(x) + x / (x * 0.5)


def _scalar_expected(x):
    x = np.float64(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = x / (x * 0.5)
        return (np.float64(1 / 3.0) + (-(2.0 / x) / x) + 1 / x + 0.5 / np.sqrt(x)
                + (1 / (x * 0.5) + (-q / (x * 0.5)) * 0.5))


@pytest.mark.parametrize("x", [0.5, 2.0, 1e-3, 7.25, 0.0, -1.0, np.inf, np.nan])
def test_scalar_duals_of_numbers(x):
    # ad.derivative of a number: the scalar Dual path (not rows, not lean arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = ad.derivative(_scalar)(x)
        g = ad.grad(_scalar)(x)
    expected = _scalar_expected(x)
    assert np.array_equal(d, expected, equal_nan=True), (d, expected)
    # reverse mode sums the same terms in another order
    assert np.allclose(g, expected, rtol=1e-14, atol=0, equal_nan=True) or np.isnan(g)
    if x > 0 and np.isfinite(x):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ad.derivative(_scalar)(x)
        if x >= 0.5:  # (central differences lose accuracy near the pole at 0)
            assert np.allclose(d, numerical_jacobian(_scalar, (np.float64(x),), 0), rtol=1e-5)
