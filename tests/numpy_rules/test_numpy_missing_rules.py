"""A numpy function without a rule raises MissingRuleError when it is called, in both modes."""

import numpy as np
import pytest

import dualad as ad


@pytest.mark.parametrize("f", [
    lambda x: np.linalg.tensorinv(x, ind=1),
    lambda x: np.linalg.tensorsolve(x, x[0]),
    lambda x: np.frexp(x)[0],
])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_functions_without_rules_raise_at_call_time(f, mode):
    x = np.eye(2) + 0.5
    with pytest.raises(ad.MissingRuleError) as info:
        if mode == "reverse":
            ad.vjp(f, x)  # recording only: no backward pass is run
        else:
            ad.jvp(f, (x,), (np.ones_like(x),))
    # the message shows the method to write (a tangent_rule for several arguments)
    assert "@ad." in str(info.value) or "@extend.tangent_rule(" in str(info.value)


def test_a_primitive_gets_its_rule_after_the_error():
    def cube(x):
        return x ** 3

    cube = ad.primitive(cube)
    with pytest.raises(ad.MissingRuleError, match="cube"):
        ad.vjp(cube, np.ones(2))

    @ad.gradient.dispatch
    def gradient(op: ad.Method[cube], grad, output, x):
        return (3 * grad * x ** 2,)

    np.testing.assert_allclose(ad.grad(lambda x: np.sum(cube(x)))(np.ones(2)), [3.0, 3.0])


def test_non_differentiable_results_need_no_rule():
    def f(x):
        order = np.argsort(x)
        assert np.shape(x) == (3,) and np.all(np.isfinite(x))
        return x[order] * np.count_nonzero(x > 0)

    for mode in ("forward", "reverse"):
        jac = ad.jacobian(f, mode=mode)(np.array([3.0, -1.0, 2.0]))
        np.testing.assert_allclose(jac, [[0, 2, 0], [0, 0, 2], [2, 0, 0]])
