"""Errors in the user's words, and rules from ad.define_rule inside @njit code."""

import math

import numpy as np
import pytest

import dualad as ad

numba = pytest.importorskip("numba")


TEMPLATE = np.zeros(3)


@numba.njit
def writes_into_plain_array(x):
    out = TEMPLATE.copy()  # a copy of a global float array: plain floats
    for i in range(x.shape[0]):
        out[i] = x[i] * 2.0
    return out


def test_dual_into_a_plain_array_says_to_use_empty_like():
    """np.empty(n) buffers hold dual numbers (test_njit_idioms); other float arrays not."""
    with pytest.raises(ad.DualadError) as info:
        ad.jacobian(writes_into_plain_array)(np.ones(3))
    message = str(info.value)
    assert "np.empty_like(x)" in message and "np.zeros_like(x)" in message
    assert "writes_into_plain_array" in message
    assert "test_njit_errors.py" in message and "line" in message
    assert "No implementation of function" not in message  # not Numba's typing dump
    assert isinstance(info.value, TypeError)


@numba.njit
def uses_heaviside(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = np.heaviside(x[i], 0.5)
    return out


def test_function_numba_cannot_compile_is_named():
    with pytest.raises(ad.DualadError) as info:
        ad.jacobian(uses_heaviside)(np.ones(2))
    message = str(info.value)
    assert "heaviside" in message and "test_njit_errors.py" in message


def _plain_python(v):
    return v + 1.0


@numba.njit
def calls_plain_python(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = _plain_python(x[i])
    return out


def test_plain_python_function_without_rule_is_named_with_the_fix():
    with pytest.raises(ad.DualadError) as info:
        ad.jacobian(calls_plain_python)(np.ones(2))
    message = str(info.value)
    assert "'_plain_python'" in message and "define_rule" in message
    assert "out[i] = _plain_python(x[i])" in message


@numba.njit
def uses_gamma(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = math.gamma(x[i])
    return out


def test_rule_whose_derivative_numba_cannot_compile_names_the_rule():
    with pytest.raises(ad.MissingRuleError) as info:
        ad.jacobian(uses_gamma)(np.ones(2) * 1.5)
    message = str(info.value)
    assert "gamma" in message and "digamma" in message


@numba.njit
def sums_whole_array(x):
    return np.sum(x * x)


def test_unsupported_construct_names_the_line_and_construct():
    with pytest.raises(ad.DualadError) as info:
        ad.jacobian(sums_whole_array)(np.ones(2))
    message = str(info.value)
    assert "test_njit_errors.py" in message and "return np.sum(x * x)" in message
    assert "dual array" in message
    assert "DualArray(" not in message and "DualNumber(" not in message


def test_keyword_arguments_and_bad_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="positionally"):
        ad.jacobian(writes_into_plain_array)(x=np.ones(3))
    with pytest.raises(TypeError, match="dtype"):
        ad.jacobian(writes_into_plain_array)(np.array(["a"]))
    with pytest.raises(ValueError, match="scalar"):
        ad.derivative(writes_into_plain_array)(np.ones(3))
    with pytest.raises(ad.ShapeError, match="tangent"):
        ad.jvp(writes_into_plain_array, (np.ones(3),), (np.ones(2),))


def test_nesting_under_a_numpy_mode_transform_says_what_to_do():
    @numba.njit
    def square(x):
        return x * x

    with pytest.raises(TypeError, match="do not nest"):
        ad.grad(lambda x: ad.derivative(square)(x))(1.0)


def test_plain_python_calling_njit_on_traced_values_says_to_pass_the_njit_function():
    @numba.njit
    def square_all(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * x[i]
        return out

    for transform in (ad.jacobian, lambda g: ad.jacobian(g, mode="reverse")):
        with pytest.raises(ad.DualadError, match="Differentiate the @njit function itself"):
            transform(lambda x: square_all(x) + 1.0)(np.ones(2))
    # ... and passing the @njit function itself works
    np.testing.assert_allclose(ad.jacobian(square_all)(np.array([1.0, 3.0])),
                               np.diag([2.0, 6.0]))


def _softplus(x):
    return np.log1p(np.exp(x))


# A numba-compilable function given a rule: the rule (not the body) gives its derivative.
# The deliberately different derivative "2 * y" shows which one is used.
softplus_rule = ad.define_rule(_softplus, args=("x",), derivatives=("2 * y",))


@numba.njit
def calls_a_user_rule(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = softplus_rule(x[i]) * x[0]
    return out


def test_define_rule_function_called_inside_njit_code_uses_its_rule():
    x = np.array([0.3, -0.7, 1.1])
    jac = ad.jacobian(calls_a_user_rule)(x)
    y = np.log1p(np.exp(x))
    expected = np.diag(2.0 * y * x[0])
    expected[:, 0] += y
    np.testing.assert_allclose(jac, expected, rtol=1e-13)
    # the same rule in numpy mode (one table, three modes)
    numpy_mode = ad.jacobian(lambda v: softplus_rule(v) * v[0], mode="reverse")(x)
    np.testing.assert_allclose(jac, numpy_mode, rtol=1e-13)
    np.testing.assert_allclose(ad.jvp(calls_a_user_rule, (x,), (np.ones(3),))[1],
                               expected.sum(axis=1), rtol=1e-13)


@numba.njit
def writes_into_its_argument(x):
    for i in range(x.shape[0]):
        x[i] = x[i] * 2.0
    return x


def test_writing_into_the_differentiated_argument_says_to_copy_it():
    with pytest.raises(ad.DualadError) as info:
        ad.jacobian(writes_into_its_argument)(np.ones(3))
    message = str(info.value)
    assert "x.copy()" in message and "x[i] = x[i] * 2.0" in message
