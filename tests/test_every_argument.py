"""Every argument of a rule is differentiated or refused: traced values in keyword and
secondary positions (initial=, nan=, np.gradient's spacing, np.interp's breakpoints,
where= masks) get their derivatives in both modes and in tapes, and dtype casts follow
numpy."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

X = np.array([0.3, -1.2, 2.1, 0.7])
POINTS = [X, np.array([-0.3, 1.2, 2.1, -0.7]), np.array([1.1, 0.4, -0.9, 0.2])]


def check(f, points=POINTS, atol=1e-6):
    """Both modes and a tape recorded at the first point equal central differences at
    every point."""
    tape = ad.record(f, points[0])
    for x in points:
        with np.errstate(all="ignore"):
            expected = numerical_jacobian(f, (x,), 0)
        for mode in ("forward", "reverse"):
            np.testing.assert_allclose(ad.jacobian(f, mode=mode)(x), expected, atol=atol,
                                       err_msg=mode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            np.testing.assert_allclose(tape(x), f(x), rtol=1e-12)
            if np.ndim(f(x)) == 0:
                np.testing.assert_allclose(tape.grad(x), expected, atol=atol, err_msg="tape")


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x, initial=x[0]),
    lambda x: np.sum(x ** 2, axis=0, keepdims=True, initial=x[1] * 2.0),
    lambda x: np.prod(x, initial=x[0]),
    lambda x: np.prod(x.reshape(2, 2), axis=1, initial=x[3]),
    lambda x: np.max(x, initial=x[0] * 5.0),
    lambda x: np.min(x.reshape(2, 2), axis=0, initial=x[2] - 1.0),
    lambda x: np.nansum(x, initial=x[1] ** 2),
    lambda x: np.sum(x ** 2, where=x > 0, initial=x[0]),
], ids=["sum", "sum_axis", "prod", "prod_axis", "max", "min_axis", "nansum", "sum_where"])
def test_traced_initial(f):
    check(f)


def test_traced_replacement_values_of_nan_to_num():
    with np.errstate(all="ignore"):
        check(lambda x: np.sum(np.nan_to_num(np.log(x), nan=x[1])))
        check(lambda x: np.nan_to_num(np.log(x), nan=x[0] ** 2, neginf=x[1]) * x)
        check(lambda x: np.nan_to_num(x + np.array([np.inf, 0.0, -np.inf, np.nan]),
                                      posinf=x[2], neginf=-x[3]))
        check(lambda x: np.nan_to_num(np.log(x) - np.array([np.inf, 0.0, 0.0, 0.0]),
                                      nan=x[1], posinf=x[2] ** 2, neginf=-x[3]))


def test_np_gradient_spacing_is_differentiated():
    check(lambda x: np.gradient(x ** 2, x[0] + 2.0))
    check(lambda x: np.sum(np.gradient(x ** 2, x[0] + 2.0, edge_order=2)))
    check(lambda x: np.gradient(x.reshape(2, 2) ** 3, x[0] + 2.0, x[1] + 3.0)[1])


def test_np_interp_breakpoints_and_values_are_differentiated():
    fp = np.array([1.0, 2.0, 3.0, 5.0])
    check(lambda x: np.interp(0.5, np.sort(x), fp))
    check(lambda x: np.interp(np.array([-0.5, 0.5, 1.0]), np.sort(x), fp * x))
    check(lambda x: np.interp(x, np.array([-1.0, 0.0, 2.0]), np.array([0.0, 1.0, 0.5])))
    check(lambda x: np.interp(np.array([0.5, 0.1]), [0.0, 1.0], np.stack([x[0], x[1]])))


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x ** 2, where=x > 0),
    lambda x: np.prod(x ** 2, where=x > 0),
    lambda x: np.mean(x ** 2, where=x > 0),
    lambda x: np.max(x ** 2, where=x > 0, initial=0.0),
    lambda x: np.min(x, where=x < 1.0, initial=5.0),
    lambda x: np.nansum(x * x[0], where=np.abs(x) > 0.5),
], ids=["sum", "prod", "mean", "max", "min", "nansum"])
def test_where_masks_are_recomputed_by_tapes(f):
    check(f)


def test_astype_float32_gives_numpys_values_and_a_float32_derivative():
    def f(x):
        return x.astype(np.float32) * 3.1

    for mode in ("forward", "reverse"):
        j = ad.jacobian(f, mode=mode)(X)
        np.testing.assert_allclose(j, 3.1 * np.eye(4), rtol=1e-6)
    y, _ = ad.jvp(f, (X,), (np.ones(4),))
    assert y.dtype == np.float32 and np.array_equal(y, f(X))
    y, pullback = ad.vjp(f, X)
    assert y.dtype == np.float32 and np.array_equal(y, f(X))
    assert pullback(np.ones(4, np.float32))[0].dtype == np.float64  # the input's dtype
    tape = ad.record(lambda x: np.sum(f(x)), X)
    assert np.array_equal(tape(X + 1.0), np.sum(f(X + 1.0)))
    x32 = X.astype(np.float32)
    g = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    for grad in (ad.grad(g), ad.record(g, x32).grad):
        assert grad(x32).dtype == np.float32
    assert ad.hessian(g)(x32).dtype == np.float32


def test_astype_to_complex_and_back():
    def f(x):
        z = x.astype(np.complex128) * (1.0 + 2.0j)
        return np.sum(np.abs(z) ** 2)

    check(f)


def test_conversions_name_astype_in_their_message():
    for conversion in (lambda x: np.asarray(x, dtype=float), lambda x: np.float32(x[0])):
        for mode in ("forward", "reverse"):
            with pytest.raises(ad.DualadError, match=r"astype"):
                ad.jacobian(lambda x, c=conversion: c(x) * 2.0, mode=mode)(X)


def test_a_builtin_rule_that_ignores_a_traced_argument_is_refused():
    from dualad.reverse_mode.backward import no_gradient_error

    err = no_gradient_error(ad.Method[np.sum], 5, [X, None, None, None, None, 1.0], True)
    assert isinstance(err, ad.MissingRuleError)
    assert "sum" in str(err) and "'initial'" in str(err)
