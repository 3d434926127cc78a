"""Nested differentiation: tags keep perturbations apart; forward and reverse compose."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode.dual import Dual, Tag

# -- perturbation confusion -------------------------------------------------------------------


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
