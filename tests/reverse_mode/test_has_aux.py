"""has_aux=True on every transform, with JAX's return conventions: grad -> (g, aux),
value_and_grad -> ((v, aux), g), jacobian -> (J, aux) in both modes, vjp -> (out, pullback,
aux), jvp -> (out, tangent, aux). aux comes back as plain numpy, undifferentiated."""

import numpy as np
import pytest

import dualad as ad
from dualad.core.tracing import Traced
from dualad.diagnostics.gradcheck import numerical_jacobian

X = np.array([0.3, -1.1, 0.8])


def loss_with_aux(x):
    y = np.sin(x) * x
    return np.sum(y ** 2), {"y": y, "norm": np.sqrt(np.sum(x ** 2)), "count": 3}


def vector_with_aux(x):
    y = np.tanh(x) * x[0]
    return y, (np.sum(y), "label")


def _plain(tree):
    leaves = [tree["y"], tree["norm"]] if isinstance(tree, dict) else [tree[0]]
    return all(not isinstance(v, Traced) and isinstance(v, np.ndarray) for v in leaves)


def test_grad_has_aux_returns_gradient_and_aux():
    g, aux = ad.grad(loss_with_aux, has_aux=True)(X)
    np.testing.assert_allclose(g, numerical_jacobian(lambda x: loss_with_aux(x)[0], (X,), 0),
                               rtol=1e-6)
    np.testing.assert_allclose(aux["y"], np.sin(X) * X)
    np.testing.assert_allclose(aux["norm"], np.linalg.norm(X))
    assert aux["count"] == 3 and _plain(aux)


def test_value_and_grad_has_aux():
    (v, aux), g = ad.value_and_grad(loss_with_aux, has_aux=True)(X)
    np.testing.assert_allclose(v, loss_with_aux(X)[0])
    np.testing.assert_allclose(g, ad.grad(lambda x: loss_with_aux(x)[0])(X))
    assert _plain(aux)


def test_grad_has_aux_with_argnums_tuple():
    f = lambda a, b: (np.sum(a * b ** 2), a + b)  # noqa: E731
    (ga, gb), aux = ad.grad(f, argnums=(0, 1), has_aux=True)(X, X + 1)
    np.testing.assert_allclose(ga, (X + 1) ** 2)
    np.testing.assert_allclose(gb, 2 * X * (X + 1))
    np.testing.assert_allclose(aux, 2 * X + 1)


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_has_aux_both_modes(mode):
    jac, aux = ad.jacobian(vector_with_aux, mode=mode, has_aux=True)(X)
    np.testing.assert_allclose(jac, numerical_jacobian(lambda x: vector_with_aux(x)[0], (X,), 0),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(aux[0], np.sum(np.tanh(X) * X[0]))
    assert aux[1] == "label" and _plain(aux)


def test_forward_jacobian_has_aux_across_several_chunks():
    x = np.linspace(-1, 1, 30)
    jac, aux = ad.jacobian(lambda v: (np.sin(v) * v[0], v[:2] * 2), mode="forward", chunk=7,
                           has_aux=True)(x)
    np.testing.assert_allclose(jac, ad.jacobian(lambda v: np.sin(v) * v[0], mode="reverse")(x))
    np.testing.assert_allclose(aux, x[:2] * 2)
    assert not isinstance(aux, Traced)


def test_vjp_has_aux():
    out, pullback, aux = ad.vjp(vector_with_aux, X, has_aux=True)
    np.testing.assert_allclose(out, vector_with_aux(X)[0])
    (g,) = pullback(np.array([1.0, 0.0, 2.0]))
    jac = numerical_jacobian(lambda x: vector_with_aux(x)[0], (X,), 0)
    np.testing.assert_allclose(g, np.array([1.0, 0.0, 2.0]) @ jac, rtol=1e-6)
    assert _plain(aux)


def test_jvp_has_aux():
    v = np.array([1.0, 0.5, -2.0])
    out, tangent, aux = ad.jvp(vector_with_aux, (X,), (v,), has_aux=True)
    jac = numerical_jacobian(lambda x: vector_with_aux(x)[0], (X,), 0)
    np.testing.assert_allclose(tangent, jac @ v, rtol=1e-6)
    np.testing.assert_allclose(out, vector_with_aux(X)[0])
    assert _plain(aux)


def test_forward_and_reverse_agree_with_aux():
    jf, _ = ad.jacobian(vector_with_aux, mode="forward", has_aux=True)(X)
    jr, _ = ad.jacobian(vector_with_aux, mode="reverse", has_aux=True)(X)
    np.testing.assert_allclose(jf, jr)


def test_aux_inside_an_outer_differentiation_stays_traced_by_the_outer_one():
    def outer(y):
        g, aux = ad.grad(lambda x: (x ** 2 * y, x * y), has_aux=True)(2.0)
        return g + aux  # d/dy (4y + 2y) = 6

    np.testing.assert_allclose(ad.grad(outer)(3.0), 6.0)
    np.testing.assert_allclose(ad.derivative(outer)(3.0), 6.0)


@pytest.mark.parametrize("call", [
    lambda f: ad.grad(f, has_aux=True)(X),
    lambda f: ad.value_and_grad(f, has_aux=True)(X),
    lambda f: ad.jacobian(f, mode="forward", has_aux=True)(X),
    lambda f: ad.jacobian(f, mode="reverse", has_aux=True)(X),
    lambda f: ad.vjp(f, X, has_aux=True),
    lambda f: ad.jvp(f, (X,), (X,), has_aux=True),
], ids=["grad", "value_and_grad", "jacobian-forward", "jacobian-reverse", "vjp", "jvp"])
def test_single_output_with_has_aux_is_a_value_error_mentioning_aux(call):
    with pytest.raises(ValueError, match="aux") as info:
        call(lambda x: np.sum(x ** 2))
    assert "(output, aux)" in str(info.value)
    assert "CachedNode" not in str(info.value) and "Dual" not in str(info.value)


def test_three_outputs_with_has_aux_is_a_value_error():
    with pytest.raises(ValueError, match="length 3"):
        ad.grad(lambda x: (np.sum(x), 1, 2), has_aux=True)(X)


def test_tuple_output_without_has_aux_suggests_it():
    with pytest.raises(ValueError, match="has_aux=True"):
        ad.grad(loss_with_aux)(X)
