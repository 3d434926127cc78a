"""Nested differentiation: tags keep perturbations apart, and every combination of the
modes (reverse over reverse, forward over reverse, reverse over forward, forward over
forward, jvp inside vjp inside grad) gives the analytic higher derivatives."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode.dual import Dual, Tag

# -- perturbation confusion -------------------------------------------------------------------

# Scalar derivative operators, one per way of differentiating.
DERIVATIVES = {
    "grad": lambda f: ad.grad(f),
    "derivative": lambda f: ad.derivative(f),
    "jacobian_forward": lambda f: ad.jacobian(f, mode="forward"),
    "jacobian_reverse": lambda f: ad.jacobian(f, mode="reverse"),
    "jvp": lambda f: (lambda x: ad.jvp(f, (x,), (1.0,))[1]),  # scalar x here
    "vjp": lambda f: (lambda x: ad.vjp(f, x)[1](np.float64(1.0))[0]),
}
PAIRS = [(outer, inner) for outer in DERIVATIVES for inner in DERIVATIVES]


@pytest.mark.parametrize("outer, inner", PAIRS, ids=[f"{o}-over-{i}" for o, i in PAIRS])
def test_no_perturbation_confusion(outer, inner):
    """d/dx [x * d/dy (x + y)] = 1 (a confused implementation gives 2)."""
    D_out, D_in = DERIVATIVES[outer], DERIVATIVES[inner]

    def f(x):
        return x * D_in(lambda y: x + y)(1.0)

    assert float(D_out(f)(1.0)) == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("outer, inner", PAIRS, ids=[f"{o}-over-{i}" for o, i in PAIRS])
def test_inner_derivative_closing_over_the_outer_variable(outer, inner):
    """d/dx [x * d/dy (x * y)]|_{y=2} = d/dx x^2 = 2x, at x = 3."""
    D_out, D_in = DERIVATIVES[outer], DERIVATIVES[inner]

    def f(x):
        return x * D_in(lambda y: x * y)(2.0)

    assert float(D_out(f)(3.0)) == pytest.approx(6.0, abs=1e-13)


@pytest.mark.parametrize("outer, inner", PAIRS, ids=[f"{o}-over-{i}" for o, i in PAIRS])
def test_second_derivative_of_a_composite(outer, inner):
    """(exp(sin x))'' = exp(sin x) (cos^2 x - sin x)."""
    D_out, D_in = DERIVATIVES[outer], DERIVATIVES[inner]
    x = 0.7
    second = D_out(D_in(lambda t: np.exp(np.sin(t))))(x)
    expected = np.exp(np.sin(x)) * (np.cos(x) ** 2 - np.sin(x))
    assert float(second) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("a", ["grad", "derivative", "jvp"])
@pytest.mark.parametrize("b", ["grad", "derivative", "vjp"])
@pytest.mark.parametrize("c", ["grad", "jacobian_forward"])
def test_third_derivative_in_mixed_modes(a, b, c):
    """(x sin x)''' = -3 sin x - x cos x."""
    x = 1.3
    third = DERIVATIVES[a](DERIVATIVES[b](DERIVATIVES[c](lambda t: t * np.sin(t))))(x)
    assert float(third) == pytest.approx(-3 * np.sin(x) - x * np.cos(x), rel=1e-12)


def test_forwarddiff_issue_83():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (confusing the perturbations gives 2)
    assert float(ad.derivative(lambda x: x * ad.derivative(lambda y: x + y)(1.0))(1.0)) == 1.0


def test_inner_derivative_depends_on_outer_variable():
    # d/dx [d/dy (x * y)] = d/dx x = 1
    assert float(ad.derivative(lambda x: ad.derivative(lambda y: x * y)(2.0))(3.0)) == 1.0
    # d/dx [x * d/dy (x * y ** 2) at y=1] = d/dx 2 x^2 = 4x
    f = lambda x: x * ad.derivative(lambda y: x * y ** 2)(1.0)  # noqa: E731
    assert float(ad.derivative(f)(3.0)) == 12.0


def test_nested_derivatives_of_a_closure_in_arrays():
    def outer(a):
        inner = ad.jacobian(lambda b: np.sin(a * b) * np.sum(a), mode="forward")
        return np.sum(inner(np.array([0.5, 1.5])))

    a = np.array([0.3, 0.7])
    g = ad.jacobian(outer, mode="forward")(a)
    np.testing.assert_allclose(g, numerical_jacobian(outer, (a,), 0), rtol=1e-6)


def test_third_derivative_by_repeated_derivative():
    d3 = ad.derivative(ad.derivative(ad.derivative(lambda x: x ** 4 + np.sin(x))))
    np.testing.assert_allclose(d3(0.5), 24 * 0.5 - np.cos(0.5), rtol=1e-13)


def test_jacobian_of_jacobian_is_the_second_derivative_tensor():
    def f(x):
        return np.array([x[0] ** 2 * x[1], np.sin(x[1]) * x[0]])

    x = np.array([0.4, 1.3])
    t = ad.jacobian(ad.jacobian(f, mode="forward"), mode="forward")(x)
    expect = np.zeros((2, 2, 2))
    expect[0] = [[2 * x[1], 2 * x[0]], [2 * x[0], 0.0]]
    expect[1] = [[0.0, np.cos(x[1])], [np.cos(x[1]), -x[0] * np.sin(x[1])]]
    np.testing.assert_allclose(t, expect, rtol=1e-14, atol=1e-15)


def test_hand_made_duals_of_other_tags_are_constants_to_a_transform():
    stray = Dual(2.0, [1.0], Tag())  # not part of any running transform
    d = ad.derivative(lambda x: x * stray)(3.0)
    assert isinstance(d, Dual) and d.tag is stray.tag  # d/dx (x * stray) = stray itself
    assert float(d.value) == 2.0
    np.testing.assert_allclose(d.partials, stray.partials)


def test_escaped_dual_does_not_leak_into_a_later_transform():
    saved = []

    def f(x):
        saved.append(x)
        return x * x

    ad.derivative(f)(2.0)
    later = ad.derivative(lambda y: y * saved[0])(5.0)
    assert isinstance(later, Dual) and float(later.value) == 2.0


# -- forward over reverse ----------------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def test_hessian_is_forward_over_reverse_and_matches_reverse_over_reverse():
    x = np.array([0.3, -0.8, 1.4, 0.9])
    h = ad.hessian(rosenbrock)(x)
    np.testing.assert_allclose(h, ad.jacobian(ad.grad(rosenbrock), mode="forward")(x))
    np.testing.assert_allclose(h, ad.jacobian(ad.grad(rosenbrock), mode="reverse")(x),
                               rtol=1e-12)
    np.testing.assert_allclose(h, h.T)


def test_hessian_of_a_function_of_several_structured_ops():
    a = np.array([[2.0, 0.5], [0.5, 1.0]])

    def f(x):
        y = a @ x
        return np.sum(np.exp(y) * np.roll(x, 1)) + x @ a @ x + np.mean(np.tanh(x)) ** 2

    x = np.array([0.2, -0.4])
    h = ad.hessian(f)(x)
    num = numerical_jacobian(ad.grad(f), (x,), 0)
    np.testing.assert_allclose(h, num, rtol=1e-6, atol=1e-8)


def test_hessian_argnums_and_extra_arguments():
    def f(x, scale):
        return scale * np.sum(x ** 3)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ad.hessian(f)(x, 2.0), np.diag(12.0 * x))


# -- reverse over forward ---------------------------------------------------------------------


def test_grad_of_a_jvp_is_the_hessian_vector_product():
    v = np.array([1.0, -0.5, 2.0])

    def hvp_through_jvp(x):
        return ad.jvp(ad.grad(rosenbrock), (x,), (v,))[1]

    def directional(x):
        return ad.jvp(rosenbrock, (x,), (v,))[1]

    x = np.array([0.5, 1.2, -0.3])
    h = ad.hessian(rosenbrock)(x)
    np.testing.assert_allclose(ad.grad(directional)(x), h @ v, rtol=1e-12)
    np.testing.assert_allclose(hvp_through_jvp(x), h @ v, rtol=1e-12)


def test_reverse_over_forward_through_structured_ops_and_setitem():
    def f(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * x[i - 1]
        return np.sum(np.roll(out, 1) * np.sin(x))

    v = np.array([0.3, 1.0, -1.0])

    def directional(x):
        return ad.jvp(f, (x,), (v,))[1]

    x = np.array([0.4, 0.9, 1.7])
    grad = ad.grad(directional)(x)
    num = numerical_jacobian(directional, (x,), 0)
    np.testing.assert_allclose(grad, num, rtol=1e-6, atol=1e-8)


def test_jvp_inside_vjp():
    def f(x):
        return np.sin(x) * x[0]

    v = np.array([1.0, 2.0])

    def g(x):
        return ad.jvp(f, (x,), (v,))[1]

    x = np.array([0.3, 0.6])
    out, pullback = ad.vjp(g, x)
    (ct,) = pullback(np.array([1.0, -1.0]))
    jac_g = numerical_jacobian(g, (x,), 0)
    np.testing.assert_allclose(ct, np.array([1.0, -1.0]) @ jac_g, rtol=1e-6, atol=1e-8)


# -- forward over forward with allocation inside the inner function -------------------------------


def test_inner_function_allocates_and_writes_outer_dependent_values():
    def outer(a):
        def inner(x):
            out = np.zeros_like(x)
            out[0] = a[0] * x[0] ** 2
            out[1] = a[1] * x[1] * x[0]
            return out

        return np.sum(ad.jacobian(inner, mode="forward")(np.array([1.0, 2.0])))

    a = np.array([3.0, 5.0])
    g = ad.jacobian(outer, mode="forward")(a)
    # d/dx inner = [[2 a0 x0, 0], [a1 x1, a1 x0]] -> sum = 2 a0 + 2 a1 + a1 = 2 a0 + 3 a1
    np.testing.assert_allclose(g, [2.0, 3.0])


def test_writing_an_inner_dual_into_an_outer_array_is_refused():
    def outer(a):
        out = np.zeros_like(a)

        def inner(y):
            out[0] = y * a[0]
            return y

        ad.derivative(inner)(1.0)
        return out

    with pytest.raises(ad.TagMismatchError, match="inner"):
        ad.jacobian(outer, mode="forward")(np.array([1.0, 2.0]))


# -- Hessians and products of every pair of modes, and deeper nests -----------------------------


def _cubic(x):
    return np.sum(x * x * x) + x[0] * x[1] * x[2] + np.sum(np.sin(x))


def _cubic_hessian(x):
    h = np.diag(6 * x - np.sin(x))
    h[0, 1] += x[2]
    h[1, 0] += x[2]
    h[0, 2] += x[1]
    h[2, 0] += x[1]
    h[1, 2] += x[0]
    h[2, 1] += x[0]
    return h


X3 = np.array([0.5, -1.2, 2.0])


def test_hessian_forward_over_reverse():
    np.testing.assert_allclose(ad.jacobian(ad.grad(_cubic), mode="forward")(X3),
                               _cubic_hessian(X3), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ad.hessian(_cubic)(X3), _cubic_hessian(X3), rtol=1e-12,
                               atol=1e-12)


def test_hessian_reverse_over_reverse():
    np.testing.assert_allclose(ad.jacobian(ad.grad(_cubic), mode="reverse")(X3),
                               _cubic_hessian(X3), rtol=1e-12, atol=1e-12)


def test_hessian_vector_product_reverse_over_forward():
    v = np.array([1.0, 0.5, -2.0])

    def directional(x):
        return ad.jvp(_cubic, (x,), (v,))[1]

    np.testing.assert_allclose(ad.grad(directional)(X3), _cubic_hessian(X3) @ v, rtol=1e-12)


def test_hessian_vector_product_forward_over_reverse():
    v = np.array([1.0, 0.5, -2.0])
    _, hv = ad.jvp(ad.grad(_cubic), (X3,), (v,))
    np.testing.assert_allclose(hv, _cubic_hessian(X3) @ v, rtol=1e-12)


def test_hessian_forward_over_forward():
    hess = ad.jacobian(lambda x: ad.jacobian(_cubic, mode="forward")(x), mode="forward")(X3)
    np.testing.assert_allclose(hess, _cubic_hessian(X3), rtol=1e-12, atol=1e-12)


def _h(y):
    return np.sin(y) * y


def _h2(y):   # h''
    return -np.sin(y) * y + 2 * np.cos(y)


def _h3(y):   # h'''
    return -y * np.cos(y) - 3 * np.sin(y)


def test_jvp_inside_vjp_inside_grad():
    """F(x) = sum(vjp_y[ jvp_y(h, y; tangent x) ](cotangent x) at y = x) = sum(x^2 h''(x)),
    so grad F = 2 x h''(x) + x^2 h'''(x); the tangent and cotangent both depend on x."""

    def F(x):
        def directional(y):
            return ad.jvp(_h, (y,), (x,))[1]          # h'(y) * x, x a constant in y

        _, pullback = ad.vjp(directional, x)
        return np.sum(pullback(x)[0])                  # x * h''(y) * x at y = x

    x = np.array([0.3, -0.8, 1.7])
    np.testing.assert_allclose(ad.value_and_grad(F)(x)[0], np.sum(x ** 2 * _h2(x)), rtol=1e-12)
    np.testing.assert_allclose(ad.grad(F)(x), 2 * x * _h2(x) + x ** 2 * _h3(x), rtol=1e-12)
    np.testing.assert_allclose(ad.jacobian(F, mode="forward")(x),
                               2 * x * _h2(x) + x ** 2 * _h3(x), rtol=1e-12)


def test_vjp_inside_jvp_inside_grad():
    def F(x):
        def pulled(y):
            return ad.vjp(_h, y)[1](x)[0]               # x * h'(y)

        return np.sum(ad.jvp(pulled, (x,), (x,))[1])    # x * h''(x) * x

    x = np.array([0.3, -0.8, 1.7])
    np.testing.assert_allclose(ad.grad(F)(x), 2 * x * _h2(x) + x ** 2 * _h3(x), rtol=1e-12)


def test_gradient_of_a_function_that_uses_a_gradient_of_itself():
    """Gradient descent step unrolled: d/dw L(w - lr * grad L(w))."""
    a = np.array([1.0, 3.0])

    def loss(w):
        return np.sum(a * w * w) / 2            # grad = a w, Hessian = diag(a)

    lr = 0.1

    def after_step(w):
        return loss(w - lr * ad.grad(loss)(w))  # = sum(a (1 - lr a)^2 w^2) / 2

    w = np.array([0.4, -0.9])
    np.testing.assert_allclose(ad.grad(after_step)(w), a * (1 - lr * a) ** 2 * w, rtol=1e-12)
    np.testing.assert_allclose(ad.jacobian(after_step, mode="forward")(w),
                               a * (1 - lr * a) ** 2 * w, rtol=1e-12)


def test_nested_graph_objects_by_hand():
    """Variables of two levels: the inner backward pass sees the outer value as a constant."""
    x = 2.0

    def inner_grad(xv):
        return ad.grad(lambda y: xv * y * y)(3.0)   # 2 * x * y at y = 3 -> 6x

    assert float(ad.grad(inner_grad)(x)) == pytest.approx(6.0)
    assert float(ad.derivative(inner_grad)(x)) == pytest.approx(6.0)


def test_grad_of_grad_of_power():
    """x**3 goes through np.power, whose rule uses np.where; both need higher derivatives."""
    for x in (-1.5, 0.7, 2.0):
        assert float(ad.grad(ad.grad(lambda t: t ** 3))(x)) == pytest.approx(6 * x)
        assert float(ad.derivative(ad.grad(lambda t: t ** 3))(x)) == pytest.approx(6 * x)
        assert float(ad.grad(ad.derivative(lambda t: t ** 3))(x)) == pytest.approx(6 * x)


def test_shape_queries_and_constant_arrays_inside_nested_transforms():
    """np.shape / np.ones_like of a traced value are constants in both modes and nest."""

    def f(x):
        return np.sum(x * np.ones_like(x) * np.shape(x)[0] + np.zeros_like(x))

    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(ad.grad(f)(x), [2.0, 2.0])
    np.testing.assert_array_equal(ad.jacobian(f, mode="forward")(x), [2.0, 2.0])
    np.testing.assert_array_equal(ad.jacobian(ad.grad(f), mode="forward")(x), np.zeros((2, 2)))
    np.testing.assert_array_equal(
        ad.grad(lambda t: ad.jvp(f, (t,), (np.ones(np.shape(t)),))[1])(x), [0.0, 0.0])


@pytest.mark.parametrize("power", [np.power, np.float_power], ids=["power", "float_power"])
def test_second_derivative_of_power_at_zero_exponent_regression(power):
    """The rule d/dx x**p = where(p == 0, 0, p x**(p-1)) was constant on the p == 0 branch,
    so the mixed derivative d2/dxdp = 1/x was lost: (x + a)**x had f''(0) = log(a)**2
    instead of log(a)**2 + 2/a (found by the random-program Hessian property test)."""
    a = 0.65
    expected = np.log(a) ** 2 + 2 / a

    def f(x):
        return power(x + a, x)

    assert float(ad.grad(ad.grad(f))(0.0)) == pytest.approx(expected, rel=1e-12)
    assert float(ad.derivative(ad.derivative(f))(0.0)) == pytest.approx(expected, rel=1e-12)
    assert float(ad.jacobian(ad.grad(f), mode="forward")(0.0)) == pytest.approx(expected,
                                                                               rel=1e-12)
    # the conventions at p == 0 and x == 0 are unchanged
    assert float(ad.grad(lambda x: power(x, 0.0))(0.0)) == 0.0
    assert float(ad.grad(lambda x: power(x, 0.5))(0.0)) == np.inf
    assert float(ad.grad(lambda x: power(x, 3.0))(-2.0)) == 12.0


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_second_derivative_of_xlogy_at_zero_regression(name):
    """d/dx2 xlogy = where(x1 == 0, 0, x1 / x2) was constant on the x1 == 0 branch, so the
    mixed derivative 1/x2 was lost at x1 = 0: x * log(x + a) had f''(0) = 1/a, not 2/a
    (found by the random-program Hessian property test)."""
    special = pytest.importorskip("scipy.special")
    import dualad.derivatives.registry as rg

    rg.load_deferred_tables()
    fn = getattr(special, name)
    a = 0.75
    shift = 0.0 if name == "xlogy" else 1.0

    def f(x):
        return fn(x, x + a)

    expected = 2.0 / (a + shift)
    assert float(ad.grad(ad.grad(f))(0.0)) == pytest.approx(expected, rel=1e-12)
    assert float(ad.derivative(ad.derivative(f))(0.0)) == pytest.approx(expected, rel=1e-12)
    # the convention stays: at x1 = 0 the x2-derivative is 0, also where x2 is singular
    assert float(ad.grad(lambda y: fn(0.0, y))(0.0 - shift)) == 0.0
