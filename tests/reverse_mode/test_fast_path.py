"""Reverse mode's fast path: float64 calls of table rules record their scalar pullback,
which must give the same gradients as the general path, finite differences and forward
mode, and must step aside for users' rules, paused recording and other levels."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import gradcheck, numerical_jacobian
from dualad.reverse_mode.backward import gradients_needed, reverse_pass, topological_order
from dualad.reverse_mode.fast_path import RECORDS, fast_path

# Scalar functions mixing every kind of derivative (expr, one, minus_one) with constants
# of each plain type on either side, both arguments traced, and one node used twice.
FUNCTIONS = {
    "chain": lambda x: np.sin(np.sin(x) * 1.0001 + 0.1),
    "constants": lambda x: (2 - x) * np.float64(3.0) + 1.5 / (x + 4) - np.exp(-x) * 2,
    "both traced": lambda x: np.sin(x) * np.cos(x) + np.tanh(x) / (x * x + 1.0),
    "subtract": lambda x: (x - np.sin(x)) - (np.cos(x) - x) - (x - x),
    "power": lambda x: x ** 3 + 2.0 ** x + (x * x) ** 0.5 - np.hypot(x, 2.0),
    "negative": lambda x: -np.sin(-x) + np.maximum(x, 0.2) * np.arctan2(x, 1.5),
    "ints": lambda x: 3 * x - x * 2 + x ** 2 + 1 / (x + 3),
    "zero derivatives": lambda x: np.floor(x) * 0.5 + x * np.sign(x) - np.copysign(x, -1.0),
    "mixed kinds": lambda x: ((np.sin(x) - x * x) - np.fmod(x * x, 1.7) * (2.0 - np.cos(x))
                              + np.fmod(x * 3.0, x + 2.5)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("x0", [0.3, -1.2, 2.5])
def test_scalar_gradients_match_finite_differences_and_forward_mode(name, x0):
    f = FUNCTIONS[name]
    x = np.float64(x0)
    g = ad.grad(f)(x)
    fd = numerical_jacobian(f, [x], 0)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g, ad.derivative(f)(x), rtol=1e-12, atol=1e-14)
    gradcheck(f, x)


def test_every_scalar_node_keeps_a_pullback_and_the_graph_is_unchanged():
    x = ad.Variable(0.5)  # a 0-d array: its first call takes the array pullback
    s = x * 1.0
    assert s.pull is None and s.array_pull is not None and type(s.output) is np.float64
    y = np.sin(s) * 2.0 + s
    nodes = [y, y.args[0], y.args[0].args[0]]
    assert all(n.pull is not None for n in nodes)
    assert y.args[1] is s and y.kwargs == {} and y.node.op is y.op
    assert type(y.output) is np.float64
    y.backward()
    assert float(x.grad) == pytest.approx(2 * np.cos(0.5) + 1)


def test_pullbacks_agree_with_the_general_path():
    # the same graph pulled back twice: with its pullbacks, then with every node's pullback
    # removed (the general path: dispatch, the rule's gradient method, shape checks)
    v = ad.Variable(np.float64(0.7))
    x = v * 1.0
    y = np.tanh(x * x - 3.0 / x) * np.exp(x) - (2.0 - x) ** 2 / np.cosh(x)
    nodes = topological_order([y])
    assert sum(getattr(n, "pull", None) is not None for n in nodes) >= 10
    fast = reverse_pass({id(y): (y, np.float64(1.0))})[id(v)]
    for n in nodes:
        if isinstance(n, ad.CachedNode):
            n.pull = None
    general = reverse_pass({id(y): (y, np.float64(1.0))})[id(v)]
    np.testing.assert_allclose(fast, general, rtol=1e-14)
    np.testing.assert_allclose(fast, numerical_jacobian(
        lambda x: np.tanh(x * x - 3.0 / x) * np.exp(x) - (2.0 - x) ** 2 / np.cosh(x),
        [0.7], 0), rtol=1e-6)


def test_zero_d_and_array_arguments_keep_an_array_pullback():
    for x0 in (np.array(0.5), np.array([0.5, 1.0])):
        x = ad.Variable(x0)
        assert np.sin(x).array_pull is not None and (x * 2.0).array_pull is not None
        assert np.shape(ad.grad(lambda x: np.sum(np.sin(x) * 2.0))(x0)) == x0.shape


# Array functions: every kind of derivative, broadcasting both ways (a row, a column, a
# number, a 0-d array), constants of each plain type on either side, one node used twice.
ARRAY_FUNCTIONS = {
    "broadcast sum": lambda x, b: np.sum(np.tanh(x + b) * (x - b[..., :1])),
    "constants": lambda x, b: np.sum((2.0 - x) * np.float64(3.0) + 1.5 / (x + 4) - b * 2
                                     + np.exp(-x) * np.ones(x.shape[-1])),
    "both traced": lambda x, b: np.sum(np.sin(x) * np.cos(b) + np.tanh(x) / (b * b + 1.0)),
    "column": lambda x, b: np.sum(np.log(x * x + np.ravel(b)[:2, None] ** 2 + 1.0) - x),
    "zero kinds": lambda x, b: np.sum(np.floor(x) * b + x * np.sign(b) - np.fmod(x, 1.7)),
    "ints": lambda x, b: np.sum(3 * x - x * 2 + b ** 2 + 1 / (x + 3)),
}
ARRAY_POINTS = [
    (np.array([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]]), np.array([0.7, -0.2, 1.1])),
    (np.array([[0.9, 0.2], [-0.6, 1.3]]), np.array([[0.5, -1.4], [0.3, 0.8]])),
]


@pytest.mark.parametrize("name", sorted(ARRAY_FUNCTIONS))
@pytest.mark.parametrize("point", range(len(ARRAY_POINTS)))
def test_array_pullbacks_match_finite_differences_forward_mode_and_the_general_path(
        name, point):
    f = ARRAY_FUNCTIONS[name]
    x0, b0 = ARRAY_POINTS[point]
    for argnum in (0, 1):
        g = ad.grad(f, argnums=argnum)(x0, b0)
        fd = numerical_jacobian(f, [x0, b0], argnum)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
        fwd = ad.jacobian(f, argnums=argnum, mode="forward")(x0, b0)
        np.testing.assert_allclose(g, fwd, rtol=1e-12, atol=1e-14)
    # the same graph without its pullbacks: dispatch and the rules' gradient methods
    x, b = ad.Variable(x0), ad.Variable(b0)
    y = f(x, b)
    nodes = topological_order([y])
    assert any(getattr(n, "array_pull", None) is not None for n in nodes)
    fast = reverse_pass({id(y): (y, np.float64(1.0))})
    for n in nodes:
        if isinstance(n, ad.CachedNode):
            n.pull = n.array_pull = None
    general = reverse_pass({id(y): (y, np.float64(1.0))})
    for v in (x, b):
        assert fast[id(v)].shape == general[id(v)].shape == v.value.shape
        np.testing.assert_allclose(fast[id(v)], general[id(v)], rtol=1e-14, atol=1e-15)


def test_array_pullbacks_step_aside_for_complex_gradients_and_users_rules():
    # a complex gradient reaching a real node: the general path takes its real part
    f = lambda x: np.real(np.sum(np.exp(1j * np.sin(x)) * x))  # noqa: E731
    x0 = np.array([0.4, -1.1, 2.0])
    np.testing.assert_allclose(ad.grad(f)(x0), numerical_jacobian(f, [x0], 0), rtol=1e-6)

    def wiggle(x):
        return np.sin(x) * 2.0

    wiggle = ad.define_rule(wiggle, args=("x",), derivatives=("2 * cos(x)",))
    table_pull = wiggle(ad.Variable(x0)).array_pull
    assert table_pull is not None

    @ad.gradient.dispatch
    def gradient(op: ad.Broadcasted[wiggle], grad, output, x):  # noqa: F811
        return (grad * 100.0,)

    # the records were rebuilt: the node calls the user's method, not the table's pullback
    assert wiggle(ad.Variable(x0)).array_pull is not table_pull
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(wiggle(x)))(x0), [100.0] * 3)


def test_array_pullbacks_silence_only_what_may_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = ad.grad(lambda x: np.sum(np.sqrt(x * 1.0) + np.log(x + 1.0)))(np.array([0.0, 4.0]))
        # a zero gradient meeting an infinite derivative: nan, as the general path gives
        h = ad.grad(lambda x: np.sum(np.sqrt(x * 1.0) * np.array([0.0, 1.0])))(
            np.array([0.0, 4.0]))
    assert np.isinf(g[0]) and g[1] == pytest.approx(0.25 + 0.2)
    assert np.isnan(h[0]) and h[1] == pytest.approx(0.25)


def test_division_by_zero_gives_infinite_derivatives_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ad.Variable(np.float64(0.0))
        y = np.sqrt(x + 0.0) + 1.0 / (x + 1.0)  # the values are fine, one derivative infinite
        y.backward()
    assert np.isinf(x.grad) and x.grad > 0


def test_a_users_gradient_rule_wins_over_the_pullback():
    def wobble(x):
        return np.sin(x) + x

    wobble = ad.define_rule(wobble, args=("x",), derivatives=("cos(x) + 1",))
    x = ad.Variable(np.float64(0.25)) * 1.0
    assert wobble(x).pull is not None
    assert float(ad.grad(wobble)(np.float64(0.25))) == pytest.approx(np.cos(0.25) + 1)

    @ad.gradient.dispatch
    def gradient(op: ad.Broadcasted[wobble], grad, output, x):  # noqa: F811
        return (grad * 100.0,)

    y = wobble(ad.Variable(np.float64(0.25)) * 1.0)
    assert y.pull is None  # the records were rebuilt without it
    assert float(ad.grad(wobble)(np.float64(0.25))) == 100.0


def test_records_are_forgotten_when_rules_change():
    op = ad.Broadcasted.instance(np.sin)
    types = (type(op), np.float64)
    fast_path(op, types)
    assert types in RECORDS

    @ad.gradient.dispatch
    def gradient(op: ad.Method[test_records_are_forgotten_when_rules_change], grad,  # noqa: F811
                 output, x):
        return (grad,)

    assert types not in RECORDS


def test_paused_recording_gives_plain_numbers():
    x = ad.Variable(np.float64(0.5)) * 1.0
    with ad.pause_recording():
        y = np.sin(x) * 2.0 - x
    assert type(y) is np.float64 and y == np.sin(0.5) * 2.0 - 0.5


def test_nested_levels_take_the_right_derivative():
    # the inner grad's nodes are constants to the outer one and vice versa
    def f(x):
        return ad.grad(lambda y: np.sin(x * y) * y)(x * 1.0)

    x0 = np.float64(0.6)
    exact = ad.derivative(f)(x0)
    np.testing.assert_allclose(ad.grad(f)(x0), exact, rtol=1e-12)
    np.testing.assert_allclose(exact, numerical_jacobian(f, [x0], 0), rtol=1e-6)
    # second derivative of a scalar chain, reverse over reverse
    g2 = ad.grad(ad.grad(lambda x: np.sin(x) * x * x))(x0)
    want = -np.sin(x0) * x0 ** 2 + 4 * x0 * np.cos(x0) + 2 * np.sin(x0)
    np.testing.assert_allclose(g2, want, rtol=1e-12)


def test_forward_over_reverse_on_the_scalar_path():
    f = lambda x: np.exp(np.sin(x) * 0.5) * x  # noqa: E731
    x0 = np.float64(1.1)
    h = ad.derivative(ad.grad(f))(x0)
    np.testing.assert_allclose(h, numerical_jacobian(ad.grad(f), [x0], 0), rtol=1e-6)


def test_mixed_scalar_and_array_graphs():
    def f(v):
        s = np.sum(v * v)  # a float64 number computed from an array
        return np.sin(s) * 2.0 + s / 3.0

    v0 = np.array([0.3, -0.4, 0.5])
    np.testing.assert_allclose(ad.grad(f)(v0), numerical_jacobian(f, [v0], 0), rtol=1e-6)


def test_complex_values_take_the_general_path():
    f = lambda x: np.real(np.exp(1j * x) * x)  # noqa: E731
    x0 = np.float64(0.4)
    np.testing.assert_allclose(ad.grad(f)(x0), numerical_jacobian(f, [x0], 0), rtol=1e-6)


def test_deep_scalar_chains():
    n = 20000
    def f(x):
        for _ in range(n):
            x = x * 0.9999 + 0.0001
        return x
    np.testing.assert_allclose(ad.grad(f)(np.float64(1.0)), 0.9999 ** n, rtol=1e-9)


# -- array calls entering record_call directly ------------------------------------------


def test_functions_with_constant_keywords_are_recorded_directly():
    x = ad.Variable(np.arange(6.0).reshape(2, 3))
    y = np.sum(x * x, axis=1, keepdims=True)
    assert isinstance(y.op, ad.Method[np.sum]) and y.kwargs == {"axis": 1, "keepdims": True}
    m = x.max(axis=0)
    assert isinstance(m.op, ad.Method[np.max]) and m.kwargs == {"axis": 0}

    def f(x):
        return np.sum(np.sum(x * x, axis=1, keepdims=True) * np.max(x, axis=(0,))[0]
                      + np.trace(x[:, :2]))

    x0 = np.array([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]])
    np.testing.assert_allclose(ad.grad(f)(x0), numerical_jacobian(f, [x0], 0), rtol=1e-6)
    gradcheck(f, x0)


def test_traced_keywords_and_out_still_take_the_general_path():
    x0 = np.array([0.5, 1.5, -2.0])
    # a traced initial= (a hook rewrites the call), a traced keyword, out=
    f = lambda x: np.max(x, initial=x[1] * 2.0)  # noqa: E731
    np.testing.assert_allclose(ad.grad(f)(x0), [0.0, 2.0, 0.0])
    g = lambda x: np.sum(np.diff(x, prepend=x[0] * 3.0))  # noqa: E731
    np.testing.assert_allclose(ad.grad(g)(x0), numerical_jacobian(g, [x0], 0), atol=1e-8)
    with pytest.raises(TypeError, match="out="):
        ad.grad(lambda x: np.sum(np.sum(x, axis=0, out=np.zeros(()))))(x0)


def test_matrix_products_on_nodes():
    rng = np.random.default_rng(1)
    a0, b0 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    a, b = ad.Variable(a0), ad.Variable(b0)
    for y in (a @ b, a @ b0, a0 @ b, np.matmul(a, b)):
        assert isinstance(y.op, ad.Method[np.matmul])
        np.testing.assert_allclose(y.output, a0 @ b0)

    def f(a, b):
        return np.sum(np.tanh(a @ b) @ b.T * a)

    for i in (0, 1):
        np.testing.assert_allclose(ad.grad(f, argnums=i)(a0, b0),
                                   numerical_jacobian(f, [a0, b0], i), rtol=1e-6, atol=1e-9)
    gradcheck(f, a0, b0)


def test_recorded_tapes_of_scalar_chains_replay_exactly():
    from dualad.tape import record

    f = FUNCTIONS["both traced"]
    tape = record(f, np.float64(0.4))
    for x0 in (0.4, 1.3, -0.7):
        np.testing.assert_allclose(tape.grad(x0), ad.grad(f)(np.float64(x0)), rtol=1e-13)


# -- other calls: the resolved gradient method kept on the node ------------------------


def _mlp_loss(w1, b1, w2, x, onehot):
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2
    m = np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
    return -np.sum(onehot * (logits - lse)) / x.shape[0] + np.sum(np.mean(w1, axis=0) ** 2)


def test_resolved_pullbacks_match_finite_differences_and_the_general_path():
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 2)),
            rng.standard_normal((5, 3)), np.eye(2)[[0, 1, 1, 0, 1]]]
    for argnum in (0, 1, 2):
        g = ad.grad(_mlp_loss, argnums=argnum)(*args)
        np.testing.assert_allclose(g, numerical_jacobian(_mlp_loss, args, argnum),
                                   rtol=1e-6, atol=1e-8)
    vs = [ad.Variable(a) for a in args[:3]]
    y = _mlp_loss(*vs, *args[3:])
    nodes = topological_order([y])
    kept = [n for n in nodes if getattr(n, "array_pull", None) is not None]
    ops = {type(n.op) for n in kept}
    assert {ad.Method[np.matmul], ad.Method[np.sum], ad.Method[np.max],
            ad.Method[np.mean]} <= ops
    fast = reverse_pass({id(y): (y, np.float64(1.0))})
    for n in nodes:
        if isinstance(n, ad.CachedNode):
            n.pull = n.array_pull = None
    general = reverse_pass({id(y): (y, np.float64(1.0))})
    for v in vs:
        np.testing.assert_allclose(fast[id(v)], general[id(v)], rtol=1e-14, atol=1e-15)


def test_resolved_pullbacks_set_gradients_needed_and_leave_errors_to_the_general_path():
    seen = []

    @ad.primitive
    def scale(a, b):
        return a * b

    @ad.gradient.dispatch
    def gradient(op: ad.Method[scale], grad, output, a, b):  # noqa: F811
        seen.append(gradients_needed())
        return (grad * b, None if seen[-1] is not None and not seen[-1][1] else grad * a)

    x0, c = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(scale(x, c)))(x0), c)
    assert seen[-1] == [True, False]
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(scale(x, x)))(x0), 2 * x0)
    assert seen[-1] == [True, True]

    @ad.primitive
    def wrong(a):
        return a * 2.0

    @ad.gradient.dispatch
    def gradient(op: ad.Method[wrong], grad, output, a):  # noqa: F811
        return (np.sum(grad),)  # the wrong shape: the general path's check says so

    with pytest.raises(ad.ShapeError):
        ad.grad(lambda x: np.sum(wrong(x)))(x0)

    @ad.primitive
    def nothing(a):
        return a * 2.0

    @ad.gradient.dispatch
    def gradient(op: ad.Method[nothing], grad, output, a):  # noqa: F811
        return (None,)

    with pytest.raises(ad.RuleError):
        ad.grad(lambda x: np.sum(nothing(x)))(x0)
