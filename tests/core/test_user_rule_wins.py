"""A user's rule for a function dualad already covers, registered after warm-up, wins in
every path: reverse and forward Jacobians, grad, jvp, derivative, hessian, the scalar and
array fast paths and the fused kernels."""

import numpy as np
import pytest

import dualad as ad
from dualad import extend
from dualad.derivatives.registry import define_elementwise_rule, get_rule

X = np.array([0.3, 0.7, 1.1])


def f(x):
    return np.sum(np.sin(x) * 1.5)


def paths():
    """Derivatives of np.sin through every transform, as d/dx sin at X (and at 0.3)."""
    return {
        "grad": ad.grad(f)(X) / 1.5,
        "jacobian reverse": np.diag(ad.jacobian(np.sin, mode="reverse")(X)),
        "jacobian forward": np.diag(ad.jacobian(np.sin, mode="forward")(X)),
        "jacobian forward, chunked": np.diag(ad.jacobian(np.sin, mode="forward", chunk=2)(X)),
        "jacobian forward of scalars (rows)": np.diag(ad.jacobian(
            lambda v: np.array([np.sin(v[0]), np.sin(v[1]), np.sin(v[2])]), mode="forward")(X)),
        "jvp": ad.jvp(np.sin, (X,), (np.ones(3),))[1],
        "derivative (scalar)": np.array([ad.derivative(np.sin)(0.3)]),
        "derivative of a method call": np.array([ad.derivative(lambda t: np.sin(t) + 0.0)(0.3)]),
        "vjp": ad.vjp(np.sin, X)[1](np.ones(3))[0],
    }


def _restore_sin():
    rule = get_rule(np.sin)
    define_elementwise_rule(np.sin, rule.arg_names, rule.expressions, domain=rule.domain,
                              notes=rule.notes, source=rule.source, name=rule.name)


@pytest.fixture
def user_sin_rule():
    before = paths()  # warm-up: caches, fast paths, kernels
    for name, d in before.items():
        expected = np.cos(X) if d.size == 3 else np.cos([0.3])
        np.testing.assert_allclose(d, expected, err_msg=name)
    calls = []

    @extend.gradient.dispatch
    def _(op: extend.Broadcasted[np.sin], grad, output, x):
        calls.append("gradient")
        return (grad * 2.0,)

    @extend.forward.dispatch
    def _(op: extend.Broadcasted[np.sin], x: extend.Dual):  # noqa: F811
        calls.append("tangent")
        tag, [(v, p)] = extend.tangent_parts((x,))
        return extend.Dual(np.sin(v), p * 2.0, tag)

    try:
        yield calls
    finally:
        _restore_sin()


def test_a_user_rule_for_sin_wins_in_every_path(user_sin_rule):
    after = paths()
    for name, d in after.items():
        np.testing.assert_allclose(d, np.full(d.shape, 2.0), err_msg=name)
    assert {"gradient", "tangent"} <= set(user_sin_rule)


def test_the_hessian_uses_the_user_rules(user_sin_rule):
    # forward over reverse: the user's gradient, differentiated by the user's tangent
    h = ad.hessian(lambda x: np.sum(np.sin(x) * x))(X)
    # d/dx [sum(sin(x) * x)] with sin' := 2 is 2 * x + sin(x); its derivative: 2 + 2 = 4
    np.testing.assert_allclose(np.diag(h), np.full(3, 4.0))


def test_the_built_in_rule_is_back_after_restoring():
    _restore_sin()
    for name, d in paths().items():
        expected = np.cos(X) if d.size == 3 else np.cos([0.3])
        np.testing.assert_allclose(d, expected, err_msg=name)
