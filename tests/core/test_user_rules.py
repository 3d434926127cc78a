"""The reverse-mode starter rules against central finite differences.

Every rule is checked on several shapes: 0-d, vectors, matrices, broadcasting pairs and
non-contiguous (strided, transposed) inputs. Elementwise inputs are drawn from the domain
the rules table gives for each argument.
"""

import operator

import numpy as np
import pytest

import dualad as ad
from dualad.derivatives.registry import get_rule
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(20240611)


def reverse_jacobian_matches(f, *args, atol=1e-6, rtol=1e-5):
    """Assert the reverse-mode Jacobian w.r.t. every argument equals finite differences."""
    for i in range(len(args)):
        exact = ad.jacobian(f, i, mode="reverse")(*args)
        numeric = numerical_jacobian(f, args, i)
        assert isinstance(exact, np.ndarray)
        assert exact.shape == np.shape(f(*args)) + np.shape(args[i])
        np.testing.assert_allclose(exact, numeric, atol=atol, rtol=rtol,
                                   err_msg=f"argument {i}")


def noncontiguous(a: np.ndarray) -> np.ndarray:
    """The same values as ``a`` in a strided, non-contiguous view."""
    big = np.empty(tuple(2 * n for n in a.shape) + (2,))
    view = big[(slice(None, None, 2),) * a.ndim + (0,)]
    view[...] = a
    assert a.ndim == 0 or not view.flags.c_contiguous or a.size <= 1
    return view


def sample(rule, arg, shape):
    return rule.domain[arg].sample(RNG, shape).astype(np.float64)


# -- elementwise rules from the tables ------------------------------------------------

UNARY = ["negative", "sin", "cos", "exp", "log", "sqrt", "tanh"]
BINARY = ["add", "subtract", "multiply", "true_divide", "power"]
UNARY_SHAPES = [(), (1,), (4,), (2, 3), "noncontiguous", "transposed"]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2)),
                 ((3, 2), ()), ((2, 1, 3), (4, 1)), "noncontiguous"]


def _unary_input(rule, shape):
    if shape == "noncontiguous":
        return noncontiguous(sample(rule, rule.arg_names[0], (2, 3)))
    if shape == "transposed":
        return sample(rule, rule.arg_names[0], (3, 2)).T
    return sample(rule, rule.arg_names[0], shape)


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_starter_rule_matches_finite_differences(name, shape):
    f = getattr(np, name)
    rule = get_rule(f)
    assert rule is not None, f"no rule registered for np.{name}"
    reverse_jacobian_matches(f, _unary_input(rule, shape))


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY)
def test_binary_starter_rule_matches_finite_differences(name, shapes):
    f = getattr(np, name)
    rule = get_rule(f)
    assert rule is not None, f"no rule registered for np.{name}"
    a1, a2 = rule.arg_names
    if shapes == "noncontiguous":
        x1 = noncontiguous(sample(rule, a1, (2, 3)))
        x2 = sample(rule, a2, (3, 2)).T
    else:
        x1, x2 = sample(rule, a1, shapes[0]), sample(rule, a2, shapes[1])
    reverse_jacobian_matches(f, x1, x2)


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_starter_rule_second_derivative_matches_finite_differences(name):
    """Rules are written in numpy calls, so reverse over reverse gives second derivatives."""
    f = getattr(np, name)
    rule = get_rule(f)
    xs = [sample(rule, a, (3,)) for a in rule.arg_names]
    for i in range(len(xs)):
        def g(*args, i=i):
            return ad.grad(lambda *a: np.sum(f(*a)), argnums=i)(*args)
        exact = ad.jacobian(g, i, mode="reverse")(*xs)
        np.testing.assert_allclose(exact, numerical_jacobian(g, xs, i), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op, name", [(operator.add, "add"), (operator.sub, "subtract"),
                                      (operator.mul, "multiply"), (operator.truediv, "true_divide"),
                                      (operator.pow, "power")])
def test_python_operators_use_the_same_rules(op, name):
    rule = get_rule(getattr(np, name))
    x1, x2 = sample(rule, rule.arg_names[0], (2, 3)), sample(rule, rule.arg_names[1], (3,))
    reverse_jacobian_matches(op, x1, x2)
    reverse_jacobian_matches(lambda a: op(a, 1.5), x1)
    reverse_jacobian_matches(lambda b: op(1.5, b), np.abs(x2) + 0.5)
    reverse_jacobian_matches(lambda a: -a, x1)


def test_elementwise_rule_values_against_closed_forms():
    x = np.array([0.3, 0.7, 1.9])
    for f, d in [(np.sin, np.cos(x)), (np.cos, -np.sin(x)), (np.exp, np.exp(x)),
                 (np.log, 1 / x), (np.sqrt, 0.5 / np.sqrt(x)), (np.tanh, 1 - np.tanh(x) ** 2),
                 (np.negative, -np.ones(3))]:
        np.testing.assert_allclose(ad.grad(lambda a, f=f: np.sum(f(a)))(x), d, rtol=1e-13)
    y = np.array([1.5, -0.5, 2.0])
    gx, gy = ad.grad(lambda a, b: np.sum(a ** b), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, y * x ** (y - 1), rtol=1e-13)
    np.testing.assert_allclose(gy, np.log(x) * x ** y, rtol=1e-13)
    gx, gy = ad.grad(lambda a, b: np.sum(a / b), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 1 / y, rtol=1e-13)
    np.testing.assert_allclose(gy, -x / y ** 2, rtol=1e-13)


# -- reductions ------------------------------------------------------------------------

REDUCTION_CASES = [
    ((), {}), ((5,), {}), ((5,), {"axis": 0}), ((2, 3), {"axis": 1}),
    ((2, 3), {"axis": -1, "keepdims": True}), ((2, 3, 4), {"axis": (0, 2)}),
    ((2, 3, 4), {"axis": (0, -1), "keepdims": True}), ((2, 3), {"keepdims": True}),
    ((2, 3, 4), {"axis": None}),
]


@pytest.mark.parametrize("shape, kwargs", REDUCTION_CASES, ids=str)
@pytest.mark.parametrize("reduce", [np.sum, np.mean], ids=["sum", "mean"])
def test_reduction_matches_finite_differences(reduce, shape, kwargs):
    x = RNG.normal(size=shape)
    reverse_jacobian_matches(lambda a: reduce(a, **kwargs), x)


def test_reduction_methods_and_positional_axis():
    x = RNG.normal(size=(3, 4))
    reverse_jacobian_matches(lambda a: a.sum(0), x)
    reverse_jacobian_matches(lambda a: a.mean(1, keepdims=True), x)
    reverse_jacobian_matches(lambda a: np.sum(a, 1), x.T)
    reverse_jacobian_matches(lambda a: np.add.reduce(a, axis=1), x)
    np.testing.assert_allclose(ad.grad(lambda a: np.mean(a))(x), np.full((3, 4), 1 / 12))


# -- products ----------------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (3, 3, 4)),
                 ((3,), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES, ids=str)
def test_matmul_matches_finite_differences(sa, sb):
    a, b = RNG.normal(size=sa), RNG.normal(size=sb)
    reverse_jacobian_matches(np.matmul, a, b)
    reverse_jacobian_matches(operator.matmul, a, b)


def test_matmul_noncontiguous_and_mixed_constant_operands():
    a = noncontiguous(RNG.normal(size=(3, 4)))
    b = RNG.normal(size=(5, 4)).T
    reverse_jacobian_matches(np.matmul, a, b)
    reverse_jacobian_matches(lambda x: x @ b, a)      # traced @ constant
    reverse_jacobian_matches(lambda y: a @ y, b)      # constant @ traced (__rmatmul__)
    reverse_jacobian_matches(lambda x: x @ x.T, a)    # same node in both operands


DOT_SHAPES = [((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)),
              ((3,), (3, 4)), ((2, 2, 3), (3, 4)), ((), ())]


@pytest.mark.parametrize("sa, sb", DOT_SHAPES, ids=str)
def test_dot_matches_finite_differences(sa, sb):
    a, b = RNG.normal(size=sa), RNG.normal(size=sb)
    reverse_jacobian_matches(np.dot, a, b)


def test_dot_method():
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3,))
    reverse_jacobian_matches(lambda x: x.dot(b), a)
    reverse_jacobian_matches(lambda x, y: x.dot(y), a, b)  # both traced: x is a node


@pytest.mark.parametrize("shape, kwargs", [
    ((3, 3), {}), ((3, 4), {}), ((4, 3), {"offset": 1}), ((3, 4), {"offset": -1}),
    ((3, 2, 4), {"axis1": 2, "axis2": 0}), ((3, 2, 4), {"offset": 1, "axis1": 1, "axis2": 2}),
    ((1, 1), {}),
], ids=str)
def test_trace_matches_finite_differences(shape, kwargs):
    reverse_jacobian_matches(lambda a: np.trace(a, **kwargs), RNG.normal(size=shape))


def test_trace_positional_offset_and_noncontiguous_input():
    x = noncontiguous(RNG.normal(size=(4, 4)))
    reverse_jacobian_matches(lambda a: np.trace(a, 1), x)
    reverse_jacobian_matches(np.trace, x.T)


def test_trace_of_product_against_analytic_gradient():
    """d tr(X1 X2) / d X1 = X2^T and d / d X2 = X1^T."""
    x1, x2 = RNG.normal(size=(3, 5)), RNG.normal(size=(5, 3))
    g1, g2 = ad.grad(lambda a, b: np.trace(a @ b), argnums=(0, 1))(x1, x2)
    np.testing.assert_allclose(g1, x2.T, rtol=1e-14)
    np.testing.assert_allclose(g2, x1.T, rtol=1e-14)
    # the same through the graph objects, as in the YAAD.jl example
    v1, v2 = ad.Variable(x1), ad.Variable(x2)
    out = np.trace(v1 @ v2)
    assert isinstance(out, ad.CachedNode)
    np.testing.assert_allclose(ad.value(out), np.trace(x1 @ x2))
    out.backward()
    np.testing.assert_allclose(v1.grad, x2.T, rtol=1e-14)
    np.testing.assert_allclose(v2.grad, x1.T, rtol=1e-14)


# -- moving entries: transpose, reshape, getitem ------------------------------------------

SHAPE_CASES = [
    ("T 2-D", lambda a: a.T, (2, 3)),
    ("T 3-D", lambda a: a.T, (2, 3, 4)),
    ("T 0-D", lambda a: a.T, ()),
    ("np.transpose", np.transpose, (2, 3)),
    ("transpose axes", lambda a: np.transpose(a, (1, 2, 0)), (2, 3, 4)),
    ("transpose negative axes", lambda a: a.transpose(-1, 0, 1), (2, 3, 4)),
    ("transpose method tuple", lambda a: a.transpose((2, 0, 1)), (2, 3, 4)),
    ("reshape", lambda a: np.reshape(a, (4, -1)), (2, 3, 4)),
    ("reshape method", lambda a: a.reshape(6, 4), (2, 3, 4)),
    ("reshape to 0-d", lambda a: a.reshape(()), (1, 1)),
    ("reshape from 0-d", lambda a: np.reshape(a, (1, 1, 1)), ()),
    ("reshape order F", lambda a: np.reshape(a, (4, 6), order="F"), (2, 3, 4)),
    ("reshape then transpose", lambda a: a.reshape(3, 8).T, (2, 3, 4)),
]


@pytest.mark.parametrize("label, f, shape", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_functions_match_finite_differences(label, f, shape):
    x = RNG.normal(size=shape)
    reverse_jacobian_matches(f, x)
    if x.ndim >= 2:
        reverse_jacobian_matches(f, noncontiguous(x))


GETITEM_CASES = [
    ("int", lambda a: a[1], (3, 2)),
    ("negative int", lambda a: a[-1], (3, 2)),
    ("slice", lambda a: a[1:], (4,)),
    ("step slice", lambda a: a[::2], (5,)),
    ("negative step", lambda a: a[::-2], (5,)),
    ("multi-axis slices", lambda a: a[1:, ::2], (3, 4)),
    ("newaxis and ellipsis", lambda a: a[None, ..., 1], (2, 3)),
    ("empty tuple on 0-d", lambda a: a[()], ()),
    ("ellipsis on 0-d", lambda a: a[...], ()),
    ("integer array", lambda a: a[np.array([2, 0])], (3,)),
    ("repeated integer array", lambda a: a[np.array([0, 2, 0, 0])], (3,)),
    ("integer list repeated", lambda a: a[[1, 1]], (3, 2)),
    ("2-D integer array", lambda a: a[np.array([[0, 1], [1, 1]])], (3, 2)),
    ("two integer arrays", lambda a: a[np.array([0, 0, 1]), np.array([1, 1, 0])], (2, 2)),
    ("slice and integer array", lambda a: a[1:, np.array([0, 0, 1])], (3, 2)),
    ("separated integer arrays", lambda a: a[np.array([0, 0]), :, np.array([1, 3])], (3, 2, 4)),
    ("boolean mask", lambda a: a[np.array([True, False, True])], (3,)),
]


@pytest.mark.parametrize("label, f, shape", GETITEM_CASES, ids=[c[0] for c in GETITEM_CASES])
def test_getitem_matches_finite_differences(label, f, shape):
    x = RNG.normal(size=shape)
    reverse_jacobian_matches(f, x)
    if x.ndim >= 1:
        reverse_jacobian_matches(f, noncontiguous(x))


def test_getitem_repeated_indices_accumulate():
    x = np.array([1.0, 2.0, 3.0])
    g = ad.grad(lambda a: np.sum(a[np.array([0, 0, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0])))(x)
    np.testing.assert_array_equal(g, [7.0, 0.0, 3.0])


def test_getitem_iteration_and_unpacking():
    x = RNG.normal(size=(3, 2))
    reverse_jacobian_matches(lambda a: sum(row[0] * row[1] for row in a), x)
    reverse_jacobian_matches(lambda a: (lambda p, q, r: p * q - r)(*a), x)


def test_composite_program_matches_finite_differences():
    """Several structured operations and rules in one program, two inputs."""
    w, x = RNG.normal(size=(4, 3)), RNG.normal(size=(5, 4))

    def f(w, x):
        h = np.tanh(x @ w)                     # (5, 3)
        z = np.sum(h * h, axis=0) / 2 + np.mean(np.exp(h[:, ::2]), axis=0).sum()
        return np.sum(np.sqrt(z + 1.0) - np.log(1 + h.T[:, 0] ** 2)) + np.trace(w.T @ w)

    reverse_jacobian_matches(f, w, x)


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_reshape_and_ravel_gradient_ignored_order_regression(order, layout):
    """The reshape/ravel rules once reshaped the gradient in C order whatever ``order`` was."""
    base = np.arange(24.0).reshape(2, 3, 4) + 1.0
    x = {"C": base, "F": np.asfortranarray(base),
         "strided": noncontiguous(base[:, :, ::2]).transpose(2, 0, 1)}[layout]
    functions = [lambda a: np.ravel(a, order), lambda a: a.ravel(order)]
    if order != "K":  # reshape does not take order="K"
        functions += [lambda a: a.reshape(-1, order=order),
                      lambda a: np.reshape(a, (2, -1), order=order)]
    for f in functions:
        jac = ad.jacobian(f, mode="reverse")(x).reshape(x.size, x.size)
        # the exact Jacobian is the permutation that f applies to x's entries: apply f to
        # an array of the same layout holding each entry's flat index
        where = np.empty_like(x, dtype=np.intp)
        where[...] = np.arange(x.size).reshape(x.shape)
        expected = np.zeros((x.size, x.size))
        expected[np.arange(x.size), np.ravel(f(where))] = 1.0
        np.testing.assert_array_equal(jac, expected)
