"""The reverse-mode graph: Variable, CachedNode, backward, forward, register, primitive, value,
run-time rules, second derivatives, and the dispatch tables' faithfulness."""

import gc
import operator
import weakref
from typing import Any

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

# -- graph objects -------------------------------------------------------------------------


def test_numpy_calls_on_a_variable_record_cached_nodes():
    x = ad.Variable(np.array([1.0, 2.0]))
    y = np.sin(x)
    assert isinstance(y, ad.CachedNode) and isinstance(y, ad.AbstractNode)
    assert isinstance(x, ad.LeafNode) and not isinstance(y, ad.LeafNode)
    assert y.op is ad.Broadcasted.instance(np.sin)
    assert isinstance(y.op, ad.Broadcasted[np.sin]) and isinstance(y.op, ad.Operator)
    assert y.args == (x,) and y.kwargs == {}
    np.testing.assert_array_equal(y.output, np.sin([1.0, 2.0]))
    s = np.sum(y, axis=0)
    assert isinstance(s.op, ad.Method[np.sum]) and s.kwargs == {"axis": 0}
    m = x @ x
    assert isinstance(m.op, ad.Method[np.matmul])
    g = x[0]
    assert isinstance(g.op, ad.Method[operator.getitem])
    assert isinstance(y.node, ad.Node) and y.node.op is y.op and y.node.args == y.args


def test_operator_types_are_one_class_per_function():
    assert ad.Method[np.sum] is ad.Method[np.sum]
    assert ad.Broadcasted[np.sin] is not ad.Broadcasted[np.cos]
    assert issubclass(ad.Method[np.sum], ad.Method) and issubclass(ad.Method, ad.Operator)
    assert ad.Method[np.add.reduce] is not ad.Method[np.add.accumulate]
    assert ad.Broadcasted.instance(np.sin).f is np.sin


def test_variable_promotes_integers_and_booleans_to_float64():
    assert ad.Variable(3).value.dtype == np.float64
    assert ad.Variable(np.array([True, False])).value.dtype == np.float64
    assert ad.Variable(np.arange(3, dtype=np.float32)).value.dtype == np.float64


def test_grad_accumulates_over_two_backward_calls_and_zero_grad_resets():
    x = ad.Variable(np.array([1.0, 2.0, 3.0]))
    assert x.grad is None
    y = np.sum(x * x)
    y.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])
    y.backward()
    np.testing.assert_array_equal(x.grad, [4.0, 8.0, 12.0])
    np.sum(np.sin(x)).backward()          # another graph on the same leaf
    np.testing.assert_allclose(x.grad, [4.0, 8.0, 12.0] + np.cos([1.0, 2.0, 3.0]))
    x.zero_grad()
    assert x.grad is None
    y.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])


def test_backward_with_seed_for_nonscalar_output_and_unreached_leaf():
    x, z = ad.Variable(np.array([1.0, 2.0])), ad.Variable(5.0)
    y = x * 3.0 + np.exp(x)
    y.backward(np.array([1.0, -2.0]))
    np.testing.assert_allclose(x.grad, np.array([1.0, -2.0]) * (3.0 + np.exp([1.0, 2.0])))
    assert z.grad is None


def test_backward_from_a_variable_seeds_itself():
    x = ad.Variable(2.0)
    x.backward()
    assert float(x.grad) == 1.0


def test_shared_subexpression_gradient_flows_once_per_use():
    x = ad.Variable(1.5)
    s = np.sin(x)
    y = s * s + s          # s used three times
    y.backward()
    np.testing.assert_allclose(x.grad, (2 * np.sin(1.5) + 1) * np.cos(1.5))


def test_forward_re_evaluates_after_a_leaf_value_changes():
    x = ad.Variable(np.array([0.5, 1.0]))
    w = ad.Variable(2.0)
    y = np.sum(np.sin(x) * w) + w
    np.testing.assert_allclose(ad.value(y), np.sum(np.sin([0.5, 1.0])) * 2 + 2)
    x.value = np.array([1.5, -1.0])
    w.value = np.asarray(3.0)
    out = ad.forward(y)
    expected = np.sum(np.sin([1.5, -1.0])) * 3 + 3
    np.testing.assert_allclose(out, expected)
    np.testing.assert_allclose(y.output, expected)
    # the backward pass then uses the refreshed values
    y.backward()
    np.testing.assert_allclose(x.grad, np.cos([1.5, -1.0]) * 3)
    np.testing.assert_allclose(w.grad, np.sum(np.sin([1.5, -1.0])) + 1)


def test_register_records_a_call_with_a_user_rule():
    def scale_sum(a, k):
        return np.sum(a) * k

    @ad.gradient.dispatch
    def gradient(op: ad.Method[scale_sum], grad, output, a, k):
        return (np.ones_like(a) * grad * k, None)

    x = ad.Variable(np.array([1.0, 2.0]))
    y = ad.register(scale_sum, x, 3.0)
    assert isinstance(y, ad.CachedNode) and isinstance(y.op, ad.Method[scale_sum])
    assert y.args == (x, 3.0)
    np.testing.assert_allclose(ad.value(y), 9.0)
    y.backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_register_with_keyword_arguments_and_on_plain_values():
    x = ad.Variable(np.ones((2, 3)))
    y = ad.register(np.sum, x, axis=1)
    assert y.kwargs == {"axis": 1}
    y.backward(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(x.grad, [[1.0] * 3, [2.0] * 3])
    const = ad.register(np.sum, np.ones(3))
    assert isinstance(const, ad.CachedNode)
    assert float(ad.value(const)) == 3.0


def test_primitive_records_one_operation_and_uses_its_rule():
    calls = []

    def softplus(x):
        calls.append(type(x))
        return np.log1p(np.exp(x))

    softplus = ad.primitive(softplus)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[softplus], grad, output, x):
        return (grad / (1.0 + np.exp(-x)),)

    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(softplus(x), np.log1p(np.exp(x)))   # plain call: plain result
    v = ad.Variable(x)
    y = softplus(v)
    assert isinstance(y, ad.CachedNode) and isinstance(y.op, ad.Method[softplus])
    assert calls[-1] is np.ndarray            # the body ran on the value, not traced
    np.testing.assert_allclose(ad.grad(lambda a: np.sum(softplus(a)))(x), 1 / (1 + np.exp(-x)))
    # its rule is written in numpy calls, so a second derivative works too
    h = ad.jacobian(ad.grad(lambda a: np.sum(softplus(a))), mode="reverse")(x)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(h, np.diag(s * (1 - s)), atol=1e-12)


def test_value_of_nodes_and_plain_values():
    x = ad.Variable(np.array([1.0, 2.0]))
    assert ad.value(x) is x.value
    np.testing.assert_array_equal(ad.value(x * 2.0), [2.0, 4.0])
    plain = np.ones(2)
    assert ad.value(plain) is plain
    assert ad.value(3.5) == 3.5
    assert ad.value("text") == "text"


def test_pause_recording_computes_values_without_nodes():
    x = ad.Variable(np.array([1.0, 2.0]))
    with ad.pause_recording():
        y = np.sin(x) * 2.0
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, 2 * np.sin([1.0, 2.0]))
    assert isinstance(np.sin(x), ad.CachedNode)


def test_results_handed_to_users_are_plain_numpy():
    f = lambda x: np.sum(x ** 2)  # noqa: E731
    g = ad.grad(f)(np.array([1.0, 2.0]))
    assert type(g) is np.ndarray
    v, g = ad.value_and_grad(f)(np.array([1.0, 2.0]))
    assert type(g) is np.ndarray and not isinstance(v, ad.AbstractNode)
    out, pullback = ad.vjp(lambda x: x * 2.0, np.ones(2))
    assert type(out) is np.ndarray and type(pullback(np.ones(2))[0]) is np.ndarray
    assert type(ad.jacobian(lambda x: x * 2.0, mode="reverse")(np.ones(2))) is np.ndarray


def test_gradient_is_zero_for_an_output_independent_of_the_input():
    g = ad.grad(lambda x: 3.0)(np.ones((2, 2)))
    np.testing.assert_array_equal(g, np.zeros((2, 2)))
    g = ad.grad(lambda x, y: np.sum(y * 2.0), argnums=(0, 1))(np.ones(2), np.ones(3))
    np.testing.assert_array_equal(g[0], np.zeros(2))
    np.testing.assert_array_equal(g[1], np.full(3, 2.0))


def test_grad_over_trees_of_arguments():
    params = {"w": np.array([1.0, 2.0]), "b": (np.array(0.5), [np.array([3.0])])}

    def f(p):
        return np.sum(p["w"] ** 2) * p["b"][0] + np.sum(p["b"][1][0])

    g = ad.grad(f)(params)
    assert set(g) == {"w", "b"} and isinstance(g["b"], tuple) and isinstance(g["b"][1], list)
    np.testing.assert_allclose(g["w"], 2 * params["w"] * 0.5)
    np.testing.assert_allclose(g["b"][0], 5.0)
    np.testing.assert_allclose(g["b"][1][0], [1.0])


def test_non_differentiated_arguments_pass_through_untouched():
    marker = object()
    seen = []

    def f(x, tag, scale):
        seen.append((tag, scale))
        return np.sum(x) * scale

    g = ad.grad(f)(np.ones(3), marker, 2.0)
    np.testing.assert_array_equal(g, np.full(3, 2.0))
    assert seen[-1][0] is marker and seen[-1][1] == 2.0


# -- the graph is freed ---------------------------------------------------------------------


def test_graph_is_freed_when_the_output_is_dropped():
    x = ad.Variable(np.ones(3))
    h = np.sin(x) * 2.0
    y = np.sum(h * h)
    refs = [weakref.ref(h), weakref.ref(y)]
    y.backward()
    del h, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert x.grad is not None           # the leaf keeps its gradient


def test_graph_made_inside_grad_does_not_outlive_the_call():
    made = []

    def f(x):
        y = np.sin(x) * x
        made.append(weakref.ref(y))
        return np.sum(y)

    ad.grad(f)(np.ones(4))
    gc.collect()
    assert made and made[0]() is None


# -- rules added at run time; dispatch stays faithful ---------------------------------------


def test_rule_added_at_run_time_is_used():
    def cube(x):
        return x ** 3

    cube = ad.primitive(cube)
    with pytest.raises(ad.MissingRuleError):
        ad.grad(cube)(2.0)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[cube], grad, output, x):
        return (grad * 3 * x ** 2,)

    assert float(ad.grad(cube)(2.0)) == 12.0


def test_rule_replaced_at_run_time_is_used():
    def twice(x):
        return 2 * x

    twice = ad.primitive(twice)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[twice], grad, output, x):
        return (grad * 5.0,)          # deliberately wrong

    assert float(ad.grad(twice)(1.0)) == 5.0

    @ad.gradient.dispatch
    def gradient(op: ad.Method[twice], grad, output, x):  # noqa: F811
        return (grad * 2.0,)

    assert float(ad.grad(twice)(1.0)) == 2.0


def test_custom_operator_subclass_without_f_is_called_regression():
    """forward() once called ``op.f``, which a custom ``ad.Operator`` subclass need not have."""

    class Halve(ad.Operator):
        def __call__(self, x):
            return x / 2

    @ad.gradient.dispatch
    def gradient(op: Halve, grad, output, x):
        return (grad / 2,)

    x = ad.Variable(np.array([2.0, 4.0]))
    y = ad.register(Halve(), x)
    np.testing.assert_array_equal(ad.value(y), [1.0, 2.0])
    y.backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [0.5, 0.5])


def test_dispatch_tables_stay_faithful_after_every_rule_is_registered():
    import dualad.derivatives.registry as rg

    try:
        import scipy.special  # noqa: F401
    except ImportError:
        pass
    else:
        rg.load_deferred_tables()       # the scipy.special table too
        assert {"erf", "gammaln"} <= {r.name for r in rg.rules()}
    assert {"sin", "tanh", "power"} <= {r.name for r in rg.rules()}
    import plum

    for function in (ad.gradient, ad.forward, ad.backward):
        for method in function.methods:
            assert all(plum.is_faithful(t) for t in method.signature.types), method


# -- second derivatives ------------------------------------------------------------------------


@pytest.mark.parametrize("x", [-1.5, 0.0, 0.7, 2.0])
def test_grad_of_grad_of_cube(x):
    assert float(ad.grad(lambda t: t ** 3)(x)) == pytest.approx(3 * x ** 2, rel=1e-14, abs=1e-14)
    assert float(ad.grad(ad.grad(lambda t: t ** 3))(x)) == pytest.approx(6 * x, abs=1e-13)
    assert float(ad.grad(ad.grad(ad.grad(lambda t: t ** 3)))(x)) == pytest.approx(6.0)


@pytest.mark.parametrize("x", [-2.0, 0.0, 0.3, 1.0])
def test_grad_of_grad_of_sin(x):
    assert float(ad.grad(np.sin)(x)) == pytest.approx(np.cos(x), rel=1e-14)
    assert float(ad.grad(ad.grad(np.sin))(x)) == pytest.approx(-np.sin(x), abs=1e-14)
    assert float(ad.grad(ad.grad(ad.grad(np.sin)))(x)) == pytest.approx(-np.cos(x), abs=1e-14)


def test_hessian_by_reverse_over_reverse_matches_finite_differences():
    x = np.array([0.3, -0.7, 1.1])

    def f(a):
        return np.sum(np.exp(a[:2] * a[1:])) + np.sum(np.tanh(a) ** 2) + (a @ a) * a[0]

    h = ad.jacobian(ad.grad(f), mode="reverse")(x)
    np.testing.assert_allclose(h, numerical_jacobian(ad.grad(f), [x], 0), atol=1e-6)
    np.testing.assert_allclose(h, h.T, atol=1e-12)


def test_value_and_grad_and_vjp():
    x = np.array([0.5, 1.5])
    v, g = ad.value_and_grad(lambda a: np.sum(np.sin(a) * a))(x)
    np.testing.assert_allclose(v, np.sum(np.sin(x) * x))
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x))
    out, pullback = ad.vjp(lambda a, b: a * b + np.exp(a), x, np.array([2.0, -1.0]))
    np.testing.assert_allclose(out, x * [2.0, -1.0] + np.exp(x))
    ga, gb = pullback(np.array([1.0, 3.0]))
    np.testing.assert_allclose(ga, np.array([1.0, 3.0]) * ([2.0, -1.0] + np.exp(x)))
    np.testing.assert_allclose(gb, np.array([1.0, 3.0]) * x)


def test_asarray_of_a_traced_vector_kept_shape_0d_regression():
    """np.asarray(x) of a traced (3,) value once gave a 0-d object array, so np.sum of it
    returned x itself: the Jacobian came out as the identity instead of a row of ones."""
    x = ad.Variable(np.arange(3.0))
    held = np.asarray(x)
    assert held.shape == (3,) and held.dtype == object
    np.testing.assert_allclose(ad.value(np.sum(held)), 3.0)
    g = ad.grad(lambda a: np.sum(np.asarray(a)))(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, np.ones(3))
    jac = ad.jacobian(lambda a: np.sum(np.asarray(a)), mode="reverse")(np.ones(3))
    np.testing.assert_array_equal(jac, np.ones(3))


def _reregister_table_rule(f):
    import dualad.derivatives.registry as rg

    rule = rg.get_rule(f)
    rg.define_elementwise_rule(f, rule.arg_names, rule.expressions, domain=rule.domain,
                                 notes=rule.notes, source=rule.source, name=rule.name)


def test_user_gradient_rule_replaces_a_built_in_one_regression():
    """Built-in rules were registered with ``object`` parameters, which plum ranks more
    specific than the ``Any`` it reads for a user's unannotated ones: a user's
    ``@ad.gradient.dispatch`` for np.sin or np.sum was silently ignored."""
    import plum

    calls = []
    x = np.array([0.5, 1.5])
    sum_type = (ad.Method[np.sum], np.float64, np.float64, np.ndarray)
    original_sum = ad.gradient.resolve(sum_type)
    try:
        @ad.gradient.dispatch
        def gradient(op: ad.Broadcasted[np.sin], grad, output, x):
            calls.append("sin")
            return (grad * np.cos(x),)

        @ad.gradient.dispatch
        def gradient(op: ad.Method[np.sum], grad, output, x):  # noqa: F811
            calls.append("sum")
            return (np.broadcast_to(grad, np.shape(x)),)

        g = ad.grad(lambda a: np.sum(np.sin(a)))(x)
        np.testing.assert_allclose(g, np.cos(x))
        assert calls == ["sum", "sin"]
    finally:
        _reregister_table_rule(np.sin)
        ad.gradient.register(original_sum,
                             plum.Signature(ad.Method[np.sum], Any, Any, Any))
    calls.clear()
    ad.grad(lambda a: np.sum(np.sin(a)))(x)
    assert calls == []


def test_user_tangent_rule_replaces_a_built_in_one():
    calls = []
    x = np.array([0.5, 1.5])
    try:
        @ad.forward.dispatch
        def forward(op: ad.Broadcasted[np.cos], x: ad.Dual):
            calls.append("cos")
            return ad.Dual(np.cos(x.value), -np.sin(x.value)[..., None] * x.partials, x.tag)

        np.testing.assert_allclose(ad.jacobian(np.cos, mode="forward")(x), np.diag(-np.sin(x)))
        assert calls == ["cos"]
        calls.clear()
        assert float(ad.derivative(np.cos)(0.5)) == pytest.approx(-np.sin(0.5))
        assert calls == ["cos"]
    finally:
        _reregister_table_rule(np.cos)


def test_reverse_jacobian_of_a_tree_output_failed_regression():
    """jacobian(mode="reverse") of a function returning a tuple failed inside np.stack
    ("inhomogeneous shape") while forward mode returned the output's structure."""
    x = np.array([[1.0, 2.0], [3.0, 4.0]])

    def f(a, b):
        return {"p": a * b, "q": [np.sum(np.sin(a)), b * b]}

    rev = ad.jacobian(f, argnums=(0, 1), mode="reverse")(x, 2.0)
    fwd = ad.jacobian(f, argnums=(0, 1), mode="forward")(x, 2.0)
    for r, w in zip(rev, fwd):
        assert set(r) == {"p", "q"} and isinstance(r["q"], list)
        np.testing.assert_allclose(r["p"], w["p"])
        np.testing.assert_allclose(r["q"][0], w["q"][0])
        np.testing.assert_allclose(r["q"][1], w["q"][1])
    np.testing.assert_allclose(rev[0]["p"], 2.0 * np.eye(4).reshape(2, 2, 2, 2))
    np.testing.assert_allclose(rev[0]["q"][0], np.cos(x))
    assert float(rev[1]["q"][1]) == 4.0
    pair = ad.jacobian(lambda a: (a * 2.0, np.sum(a)), mode="reverse")(x)
    assert isinstance(pair, tuple) and pair[0].shape == (2, 2, 2, 2) and pair[1].shape == (2, 2)
