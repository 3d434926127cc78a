"""Containers as arguments and results: dataclasses (frozen or not), NamedTuples and classes
registered with ad.register_tree, in both modes; gradients come back as the same class and
agree with central finite differences."""

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import dualad as ad
from dualad.core.trees import is_container, tree_flatten, tree_unflatten
from dualad.diagnostics.gradcheck import numerical_jacobian


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray
    scale: np.ndarray
    name: str = dataclasses.field(default="layer", metadata={"static": True})


@dataclasses.dataclass
class Validating:
    w: np.ndarray

    def __post_init__(self):  # converts: must not run on traced values or gradients
        self.w = np.asarray(self.w, dtype=float)


class Pair(NamedTuple):
    a: np.ndarray
    b: np.ndarray


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


ad.register_tree(Point, lambda p: ((p.x, p.y), None), lambda aux, ch: Point(*ch))


def _loss(p, x):
    return np.sum(np.tanh(p.w * x + p.b) ** 2)


X = np.array([0.3, -1.2, 0.7])


def _fd_leaves(f, tree):
    """Finite-difference gradient of scalar f w.r.t. every leaf of tree."""
    leaves, spec = tree_flatten(tree)
    out = []
    for i, leaf in enumerate(leaves):
        def g(v, i=i):
            ls = list(leaves)
            ls[i] = v
            return f(tree_unflatten(spec, ls))
        out.append(numerical_jacobian(g, (np.asarray(leaf, dtype=float),), 0))
    return out


@pytest.mark.parametrize("p", [Params(np.array([0.5, -0.2, 1.1]), 0.3),
                               Params(np.array([[0.5], [1.5]]), np.array(0.1))],
                         ids=["vector", "broadcast"])
def test_grad_of_a_dataclass_is_the_same_dataclass_and_matches_fd(p):
    g = ad.grad(_loss)(p, X)
    assert type(g) is Params
    expected = _fd_leaves(lambda q: _loss(q, X), p)
    np.testing.assert_allclose(g.w, expected[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g.b, expected[1], rtol=1e-6, atol=1e-8)
    assert np.shape(g.b) == np.shape(p.b)


def test_frozen_dataclass_keeps_static_fields_and_matches_fd():
    p = Frozen(np.array([1.0, 2.0]), np.array(0.5), name="first")
    f = lambda q: np.sum(np.sin(q.w) * q.scale ** 2)  # noqa: E731
    g = ad.grad(f)(p)
    assert type(g) is Frozen and g.name == "first"
    fd = _fd_leaves(f, p)
    np.testing.assert_allclose(g.w, fd[0], rtol=1e-6)
    np.testing.assert_allclose(g.scale, fd[1], rtol=1e-6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.w = 0.0  # still frozen


def test_post_init_does_not_run_on_traced_values():
    g = ad.grad(lambda q: np.sum(q.w ** 3))(Validating(np.array([1.0, 2.0])))
    assert type(g) is Validating
    np.testing.assert_allclose(g.w, [3.0, 12.0])


def test_namedtuple_argument_and_result():
    f = lambda q: np.sum(q.a * np.exp(q.b))  # noqa: E731
    q = Pair(np.array([1.0, 2.0]), np.array([0.1, -0.3]))
    g = ad.grad(f)(q)
    assert type(g) is Pair
    fd = _fd_leaves(f, q)
    np.testing.assert_allclose(g.a, fd[0], rtol=1e-6)
    np.testing.assert_allclose(g.b, fd[1], rtol=1e-6)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_with_dataclass_input_and_output(mode):
    p = Params(np.array([0.5, -0.2]), 0.3)
    f = lambda q: Pair(np.sin(q.w) * q.b, q.w[0] * q.w)  # noqa: E731
    jac = ad.jacobian(f, mode=mode)(p)
    assert type(jac) is Pair and type(jac.a) is Params
    for field, fn in (("a", lambda q: np.sin(q.w) * q.b), ("b", lambda q: q.w[0] * q.w)):
        fd = _fd_leaves(fn, p)
        got = getattr(jac, field)
        np.testing.assert_allclose(got.w, fd[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(got.b, fd[1], rtol=1e-6, atol=1e-9)


def test_forward_and_reverse_agree_on_a_dataclass_output():
    x = np.array([0.4, 1.3, -0.5])
    f = lambda v: Params(np.cos(v) * v, np.sum(v ** 2))  # noqa: E731
    jf = ad.jacobian(f, mode="forward")(x)
    jr = ad.jacobian(f, mode="reverse")(x)
    assert type(jf) is Params and type(jr) is Params
    np.testing.assert_allclose(jf.w, jr.w)
    np.testing.assert_allclose(jf.b, jr.b)
    np.testing.assert_allclose(jf.w, numerical_jacobian(lambda v: f(v).w, (x,), 0), rtol=1e-6)


def test_jvp_and_vjp_with_dataclasses():
    p = Params(np.array([0.5, -0.2]), 0.3)
    t = Params(np.array([1.0, 0.0]), 1.0)
    out, tan = ad.jvp(lambda q: q.w * q.b, (p,), (t,))
    np.testing.assert_allclose(tan, [1.0 * 0.3 + 0.5, -0.2])
    out, pullback = ad.vjp(lambda q: q.w * q.b, p)
    (g,) = pullback(np.ones(2))
    assert type(g) is Params
    np.testing.assert_allclose(g.w, [0.3, 0.3])
    np.testing.assert_allclose(g.b, 0.3)


def test_register_tree_follows_jax_convention():
    f = lambda p: p.x * np.sin(p.y)  # noqa: E731
    g = ad.grad(f)(Point(2.0, 0.5))
    assert type(g) is Point
    np.testing.assert_allclose([g.x, g.y], [np.sin(0.5), 2.0 * np.cos(0.5)])
    jac = ad.jacobian(lambda v: Point(v * 2, v[0]), mode="forward")(np.ones(2))
    assert type(jac) is Point
    np.testing.assert_allclose(jac.x, 2 * np.eye(2))
    np.testing.assert_allclose(jac.y, [1.0, 0.0])


def test_register_tree_aux_is_not_differentiated():
    class Scaled:
        def __init__(self, v, unit):
            self.v, self.unit = v, unit

    ad.register_tree(Scaled, lambda s: ((s.v,), s.unit), lambda unit, ch: Scaled(ch[0], unit))
    g = ad.grad(lambda s: np.sum(s.v ** 2))(Scaled(np.array([1.0, 3.0]), "m"))
    assert g.unit == "m"
    np.testing.assert_allclose(g.v, [2.0, 6.0])


def test_nested_containers_and_hessian():
    tree = {"layer": Params(np.array([1.0, 2.0]), 0.5), "extra": [Pair(1.0, 2.0)]}
    f = lambda t: np.sum(t["layer"].w ** 2) * t["extra"][0].b  # noqa: E731
    g = ad.grad(f)(tree)
    assert type(g["layer"]) is Params and type(g["extra"][0]) is Pair
    np.testing.assert_allclose(g["layer"].w, [4.0, 8.0])
    np.testing.assert_allclose(g["extra"][0].b, 5.0)
    np.testing.assert_allclose(g["extra"][0].a, 0.0)


def test_unregistered_class_is_a_type_error_naming_it_and_register_tree():
    class Opaque:
        pass

    with pytest.raises(TypeError) as info:
        ad.grad(lambda o: 1.0)(Opaque())
    message = str(info.value)
    assert "Opaque" in message and "register_tree" in message and "grad(" in message
    with pytest.raises(TypeError, match="register_tree"):
        ad.jacobian(lambda o: np.ones(2), mode="forward")(Opaque())


def test_register_tree_checks_its_arguments():
    with pytest.raises(TypeError, match="class"):
        ad.register_tree(Point(1, 2), lambda p: ((), None), lambda a, c: None)
    with pytest.raises(TypeError, match="flatten"):
        ad.register_tree(Point, None, lambda a, c: None)


def test_is_container():
    assert is_container(Params(1.0, 2.0)) and is_container(Pair(1.0, 2.0))
    assert is_container(Point(1.0, 2.0)) and is_container({})
    assert not is_container(Params) and not is_container(np.ones(2)) and not is_container(1.0)
