"""Second order (and forward mode) of user primitives that have only a reverse-mode rule:
the tangent comes from differentiating the gradient rule (reverse over reverse)."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


@ad.primitive
def softplus(x):
    return np.log1p(np.exp(x))


@ad.gradient.dispatch
def _softplus_gradient(op: ad.Method[softplus], grad, output, x):
    return (grad / (1.0 + np.exp(-x)),)


@ad.primitive
def matvec(a, x):
    return a @ x


@ad.gradient.dispatch
def _matvec_gradient(op: ad.Method[matvec], grad, output, a, x):
    return (np.outer(grad, x), a.T @ grad)


@ad.primitive
def scaled(x, scale):
    return scale * np.sin(x)


@ad.gradient.dispatch
def _scaled_gradient(op: ad.Method[scaled], grad, output, x, scale):
    return (grad * scale * np.cos(x), None)  # scale is not differentiated


X = np.array([0.3, -1.2, 2.0])
A = np.arange(6.0).reshape(2, 3) / 5


def test_hessian_of_a_reverse_only_primitive():
    f = lambda x: np.sum(softplus(x) ** 2)  # noqa: E731
    np.testing.assert_allclose(ad.hessian(f)(X), numerical_jacobian(ad.grad(f), (X,), 0),
                               atol=1e-8)


@pytest.mark.parametrize("argnums", [0, 1])
def test_hessian_of_a_two_argument_primitive(argnums):
    g = lambda a, x: np.sum(np.tanh(matvec(a, x)))  # noqa: E731
    np.testing.assert_allclose(ad.hessian(g, argnums=argnums)(A, X),
                               numerical_jacobian(ad.grad(g, argnums=argnums), (A, X), argnums),
                               atol=1e-7)


def test_forward_mode_jvp_and_third_derivatives():
    np.testing.assert_allclose(ad.jacobian(softplus, mode="forward")(X),
                               np.diag(1 / (1 + np.exp(-X))))
    out, tangent = ad.jvp(lambda x: matvec(A, x), (X,), (np.ones(3),))
    np.testing.assert_allclose(tangent, A @ np.ones(3))
    s = 1 / (1 + np.exp(-0.3))
    third = ad.derivative(ad.derivative(ad.derivative(softplus)))(0.3)
    np.testing.assert_allclose(third, s * (1 - s) * (1 - 2 * s))


def test_non_differentiable_arguments_get_no_tangent():
    f = lambda x: np.sum(scaled(x, 2.0) ** 2)  # noqa: E731
    np.testing.assert_allclose(ad.hessian(f)(X), numerical_jacobian(ad.grad(f), (X,), 0),
                               atol=1e-8)


def test_a_written_tangent_rule_wins():
    calls = []

    @ad.primitive
    def double(x):
        return 2 * x

    @ad.gradient.dispatch
    def _(op: ad.Method[double], grad, output, x):
        return (2 * grad,)

    @ad.forward.dispatch
    def _(op: ad.Method[double], x: ad.Dual):
        calls.append(1)
        return ad.Dual(2 * x.value, 2 * x.partials, x.tag)

    np.testing.assert_allclose(ad.jacobian(double, mode="forward")(X), 2 * np.eye(3))
    assert calls


def test_without_any_rule_the_error_stays():
    @ad.primitive
    def unknown(x):
        return x * 2

    with pytest.raises(ad.MissingRuleError, match="unknown"):
        ad.hessian(lambda x: np.sum(unknown(x)))(X)
