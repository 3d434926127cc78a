"""Rule source specialised to the numbers a node reads, written without branches
(dualad/tape/scalar_fold.py), and the compiled programs that use it: against eager mode
and central differences, at the points where the folded conditions decide."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.cost_bound import line_cost
from dualad.tape.scalar_fold import fold
from dualad.tape.scalar_select import where


def test_power_of_a_number_folds():
    partial = "(p * np.power((1.0 if ((p == 0.0) and (x == 0.0)) else x), (p - 1.0)))"
    assert fold(partial, (("p", 2.0),)) == "2.0 * x"
    assert fold(partial, (("p", 3.0),)) == "3.0 * (x * x)"
    assert fold("np.power(x, p)", (("p", 2.0),)) == "x * x"
    assert fold("np.power(x, p)", (("p", 1.0),)) == "x"
    # p == 0 decides nothing about x: the select stays, as a call
    assert fold(partial, (("p", 0.0),)) == "0.0 * np.power(_where(x == 0.0, 1.0, x), -1.0)"


def test_conditions_without_branches():
    assert fold("(1.0 if ((x > 0.0) and (y < 1.0)) else 0.0)", ()) == \
        "_where((x > 0.0) & (y < 1.0), 1.0, 0.0)"
    assert fold("(a or (x > 0.0))", ()) == "a or x > 0.0"  # a may be a number: kept
    assert fold("_t0 = ((x == 0.0))", ()) == "_t0 = x == 0.0"


def test_only_finite_numbers_are_written_in():
    assert fold("(x if (p > 0.0) else p)", (("p", float("nan")),)) == "_where(p > 0.0, x, p)"
    assert fold("(p / 0.0)", (("p", 1.0),)) == "1.0 / 0.0"  # not folded (Python raises)


def test_unparsable_source_is_kept():
    assert fold("x +", ()) == "x +"


def test_where_selects():
    assert where(True, 1.0, 2.0) == 1.0
    assert where(False, 1.0, np.inf) == np.inf


def test_compiled_where_selects_as_a_branch_would():
    import numba

    select = numba.njit(lambda c, a, b: where(c, a, b))
    branch = numba.njit(lambda c, a, b: a if c else b)
    cases = [(True, 1.0, 2.0), (False, 1.0, np.inf), (True, np.nan, 1.0), (False, np.nan, 1.0),
             (np.nan, 1.0, 2.0), (0.0, 1.0, 2.0), (-0.0, 1.0, 2.0), (2, 1.5, 3),
             (True, 1, 2.5), (False, 1, 2.5), (False, True, 2), (True, -0.0, 0.0)]
    for c, a, b in cases:
        got, want = select(c, a, b), branch(c, a, b)
        assert type(got) is type(want)
        assert got == want or (got != got and want != want)
        assert np.signbit(got) == np.signbit(want)
    with pytest.raises(numba.core.errors.TypingError):
        select(True, np.ones(2), 1.0)  # numbers only


def test_cost_counts_subscripts_selects_and_branches():
    plain = line_cost("    _l1 = _l0 * 2.0")
    assert line_cost("    _l1 = _x0[3] * 2.0") > plain
    assert line_cost("    _l1 = _where(_l0 > 0.0, _l0, 0.0)") > plain
    assert line_cost("    _l1 = (_l0 if _l0 > 0.0 else 0.0)") > \
        line_cost("    _l1 = _where(_l0 > 0.0, _l0, 0.0)")


def _rosenbrock_loop(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def _mixed(x):
    """Powers of numbers (0, 1, 2, 3), and selects that stay (abs, maximum, where)."""
    y = np.abs(x) ** 3 + x ** 2 * 0.5 + x ** 1 - x ** 0
    y = np.maximum(y, 0.2 * x) + np.where(x > 0.1, np.tanh(x), x * x)
    return np.sum(y * x[::-1])


def _compiled(f):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled, not the replay
        return ad.jit(f, fallback="error")


@pytest.mark.parametrize("x", [np.linspace(-1.0, 1.5, 12), np.zeros(12),
                               np.array([0.0, 1.0, -1.0, 2.0, 0.5, -0.3])])
def test_loop_written_rosenbrock(x):
    eager = ad.grad(_rosenbrock_loop)(x)
    got = _compiled(ad.grad(_rosenbrock_loop))(x)
    np.testing.assert_allclose(got, eager, rtol=1e-13, atol=1e-13)
    fd = numerical_jacobian(_rosenbrock_loop, [x], 0)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("x", [np.array([0.7, -0.4, 1.3, 0.25, -1.1]),
                               np.array([0.0, 0.3, 0.0, -2.0, 1.0])])
def test_folded_powers_and_selects_against_eager(x):
    eager_g = ad.grad(_mixed)(x)
    np.testing.assert_allclose(_compiled(ad.grad(_mixed))(x), eager_g, rtol=1e-12,
                               atol=1e-12)
    jac = lambda v: np.abs(v) ** 3 + v ** 2 * 0.5 + v ** 1 - v ** 0  # noqa: E731
    np.testing.assert_allclose(_compiled(ad.jacobian(jac))(x), ad.jacobian(jac)(x),
                               rtol=1e-12, atol=1e-12)
    if np.all(np.abs(x) > 1e-3):  # away from the kinks: central differences agree
        fd = numerical_jacobian(_mixed, [x], 0)
        np.testing.assert_allclose(eager_g, fd, rtol=1e-6, atol=1e-6)


def test_zero_to_the_zero_keeps_jax_convention():
    """d/dx x ** 0 is 0 at x = 0 (the base replaced by 1, not 0 ** -1 = inf)."""
    f = lambda x: np.sum(x ** 0.0 + 2.0 * x)  # noqa: E731
    x = np.array([0.0, 1.0])
    np.testing.assert_array_equal(_compiled(ad.grad(f))(x), ad.grad(f)(x))
    np.testing.assert_array_equal(_compiled(ad.grad(f))(x), [2.0, 2.0])
