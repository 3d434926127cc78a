"""Forward-mode transforms: every elementwise rule, chunking, jvp, derivative, Jacobians."""

import numpy as np
import pytest

import dualad as ad
from dualad.derivatives.registry import define_table_rules, rules
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode import kernels as dual_kernels
from dualad.forward_mode.dual import Dual, Tag

pytest.importorskip("scipy.special")
define_table_rules(scipy=True)

# The tables' rules only: rules that other test modules define on purpose (some with a
# deliberately different derivative) are not this test's subject.
RULES = [r for r in rules() if r.source != "<user>"]
RULE_IDS = [f"{r.source.rsplit('/', 1)[-1]}:{r.name}" for r in RULES]
SHAPES = {1: [((),), ((7,),), ((2, 3),)], 2: [((), ()), ((7,), (7,)), ((3, 1), (4,)), ((), (5,))],
          3: [((), (), ()), ((4,), (4,), ())]}


def _sample(rule, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for name, shape in zip(rule.arg_names, shapes):
        dom = rule.domain[name] if rule.domain else None
        if dom is None:
            out.append(rng.uniform(0.2, 0.9, shape))
        elif dom.integer:
            out.append(np.asarray(dom.sample(rng, shape)))
        else:
            out.append(np.asarray(dom.sample(rng, shape), dtype=float))
    return out


def _diff_args(rule):
    return tuple(i for i, d in enumerate(rule.differentiable) if d)


@pytest.mark.parametrize("rule", RULES, ids=RULE_IDS)
def test_every_rule_forward_equals_reverse_and_finite_differences(rule):
    f = rule.function
    nums = _diff_args(rule)
    if not nums:
        pytest.skip("no differentiable argument")
    for seed, shapes in enumerate(SHAPES[len(rule.arg_names)]):
        args = _sample(rule, shapes, seed)
        fwd = ad.jacobian(f, nums, mode="forward", chunk=3)(*args)
        rev = ad.jacobian(f, nums, mode="reverse")(*args)
        for i, jf, jr in zip(nums, fwd, rev):
            np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12, err_msg=rule.name)
            num = numerical_jacobian(f, args, i)
            np.testing.assert_allclose(jf, num, rtol=1e-5, atol=1e-6, err_msg=rule.name)


@pytest.mark.parametrize("rule", RULES, ids=RULE_IDS)
def test_every_rule_second_order_forward_over_reverse(rule):
    """The derivative expressions themselves differentiate in forward mode (hessian path)."""
    nums = _diff_args(rule)
    if not nums:
        pytest.skip("no differentiable argument")
    args = _sample(rule, [(3,)] * len(rule.arg_names), 11)
    i = nums[0]

    def g(x):
        call = list(args)
        call[i] = x
        return np.sum(rule.function(*call))

    h_fwd = ad.jacobian(ad.grad(g), mode="forward")(args[i])
    h_rev = ad.jacobian(ad.grad(g), mode="reverse")(args[i])
    np.testing.assert_allclose(h_fwd, h_rev, rtol=1e-9, atol=1e-10, err_msg=rule.name)


KERNEL_RULES = [r for r in RULES if dual_kernels.RuleKernels(r).available
                and r.kernel_source is not None]


@pytest.fixture
def kernels_on():
    saved = (dual_kernels.ENABLED, dual_kernels.MIN_K)
    dual_kernels.set_enabled(True)
    dual_kernels.MIN_K = 1
    yield
    dual_kernels.set_enabled(saved[0])
    dual_kernels.MIN_K = saved[1]


@pytest.mark.parametrize("rule", KERNEL_RULES, ids=[r.name for r in KERNEL_RULES])
def test_every_fused_kernel_equals_the_numpy_path(rule, kernels_on):
    rk = dual_kernels.RuleKernels(rule)
    rk.threshold = 0
    n = len(rule.arg_names)
    values = _sample(rule, [(4, 3)] * n, 5)
    rng = np.random.default_rng(1)
    masks = [(True,) * n] + ([(True, False), (False, True)] if rule.name in
                             ("multiply", "true_divide", "power", "subtract") else [])
    for mask in masks:
        tag = Tag()
        parts = [(v, rng.standard_normal((4, 3, 2)) if m else None) for v, m in zip(values, mask)]
        fused = rk.try_fused(parts, tag)
        assert fused is not None, rule.name
        dual_kernels.set_enabled(False)
        plain = rule.function(*[Dual(v, p, tag) if p is not None else v for v, p in parts])
        dual_kernels.set_enabled(True)
        ok = np.isfinite(plain.value)
        np.testing.assert_allclose(fused.value[ok], plain.value[ok], rtol=1e-13, atol=1e-300)
        okp = np.isfinite(plain.partials)
        np.testing.assert_allclose(fused.partials[okp], plain.partials[okp], rtol=1e-11,
                                   atol=1e-13, err_msg=f"{rule.name} {mask}")


# -- chunking ---------------------------------------------------------------------------------


def _messy(x):
    return np.concatenate([np.sin(x) * x[0], x ** 2 - x[-1], np.sum(x * x[::-1])[None]])


@pytest.mark.parametrize("n", [7, 13, 25])
@pytest.mark.parametrize("chunk", [1, 3, 12, None, "n"])
def test_chunk_sizes_that_do_not_divide_n(n, chunk):
    x = np.linspace(-1.0, 2.0, n)
    c = n if chunk == "n" else chunk
    jac = ad.jacobian(_messy, mode="forward", chunk=c)(x)
    np.testing.assert_allclose(jac, ad.jacobian(_messy, mode="reverse")(x), rtol=1e-13)
    np.testing.assert_allclose(jac, numerical_jacobian(_messy, (x,), 0), rtol=1e-6, atol=1e-8)


def test_concatenate_lists_holding_duals():
    def f(x):
        return np.concatenate([x, [np.sum(x), 2.0], (x[0] * x[1],)])

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), numerical_jacobian(f, (x,), 0),
                               rtol=1e-6, atol=1e-8)


def test_chunks_span_several_arguments_and_tree_leaves():
    def f(a, tree, c):
        return a * np.sum(tree["u"]) + tree["v"][0] * c + tree["v"][1] ** 2

    a = np.array([1.0, 2.0])
    tree = {"u": np.array([0.5, 0.25, 2.0]), "v": (np.array(3.0), np.array([1.0, -1.0]))}
    c = np.array([4.0, 5.0])
    for chunk in (1, 2, 4, None):
        ja, jt, jc = ad.jacobian(f, (0, 1, 2), mode="forward", chunk=chunk)(a, tree, c)
        ra, rt, rc = ad.jacobian(f, (0, 1, 2), mode="reverse")(a, tree, c)
        np.testing.assert_allclose(ja, ra)
        np.testing.assert_allclose(jc, rc)
        np.testing.assert_allclose(jt["u"], rt["u"])
        np.testing.assert_allclose(jt["v"][0], rt["v"][0])
        np.testing.assert_allclose(jt["v"][1], rt["v"][1])
        assert jt["v"][0].shape == (2,) and jt["u"].shape == (2, 3)


def test_jacobian_shapes_for_scalars_and_matrices():
    assert ad.jacobian(lambda x: x * 2.0, mode="forward")(3.0).shape == ()
    m = np.arange(6.0).reshape(2, 3)
    j = ad.jacobian(lambda m: m.T * 2.0, mode="forward")(m)
    assert j.shape == (3, 2, 2, 3)
    np.testing.assert_allclose(j, ad.jacobian(lambda m: m.T * 2.0, mode="reverse")(m))
    j = ad.jacobian(lambda x: np.sum(x ** 2), mode="forward", chunk=5)(m)
    np.testing.assert_allclose(j, 2 * m)


def test_integer_inputs_are_promoted():
    j = ad.jacobian(lambda x: x ** 2, mode="forward")(np.array([1, 2, 3]))
    np.testing.assert_allclose(j, np.diag([2.0, 4.0, 6.0]))
    assert float(ad.derivative(lambda x: x ** 3)(2)) == 12.0


def test_output_independent_of_input_gives_zeros():
    for chunk in (None, 2):
        j = ad.jacobian(lambda x: np.ones(4), mode="forward", chunk=chunk)(np.ones(3))
        assert j.shape == (4, 3) and not j.any()
    j = ad.jacobian(lambda x: np.sum(x), mode="forward")(np.ones(0))
    assert j.shape == (0,)


def test_output_tree_gives_output_structure():
    def f(x):
        return {"a": x * 2.0, "b": (np.sum(x), x[0])}

    x = np.array([1.0, 2.0])
    j = ad.jacobian(f, mode="forward")(x)
    np.testing.assert_allclose(j["a"], 2 * np.eye(2))
    np.testing.assert_allclose(j["b"][0], [1.0, 1.0])
    np.testing.assert_allclose(j["b"][1], [1.0, 0.0])


def test_np_array_of_duals_as_output():
    def f(x):
        return np.array([x[0] * x[1], x[1] ** 2, 3.0])

    x = np.array([2.0, 3.0])
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x),
                               [[3.0, 2.0], [0.0, 6.0], [0.0, 0.0]])
    np.testing.assert_allclose(ad.derivative(lambda t: np.array([t, t * t]))(3.0), [1.0, 6.0])


def test_extra_arguments_pass_through():
    def f(x, a, *, b):
        return x * a + b

    j = ad.jacobian(f, mode="forward")(np.ones(2), np.array([2.0, 3.0]), b=1.0)
    np.testing.assert_allclose(j, np.diag([2.0, 3.0]))


def test_results_are_plain_numpy():
    j = ad.jacobian(lambda x: np.sin(x), mode="forward")(np.ones(3))
    assert type(j) is np.ndarray
    out, tan = ad.jvp(np.sin, (np.ones(2),), (np.ones(2),))
    assert type(out) is np.ndarray and type(tan) is np.ndarray


# -- Lorenz-96 and other simulation-style right-hand sides ---------------------------------------


def lorenz96_roll(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0


def lorenz96_loop(x):
    n = x.shape[0]
    out = np.empty_like(x)
    for i in range(n):
        out[i] = (x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + 8
    return out


def lorenz96_jacobian(x):
    n = x.shape[0]
    i = np.arange(n)
    jac = np.zeros((n, n))
    jac[i, (i + 1) % n] = x[i - 1]
    jac[i, (i - 2) % n] = -x[i - 1]
    jac[i, (i - 1) % n] = x[(i + 1) % n] - x[i - 2]
    jac[i, i] = -1.0
    return jac


@pytest.mark.parametrize("rhs", [lorenz96_roll, lorenz96_loop])
@pytest.mark.parametrize("n", [5, 10, 40])
def test_lorenz96_jacobian_is_exact(rhs, n):
    x = np.random.default_rng(n).standard_normal(n) + 8.0
    for chunk in (None, 3):
        np.testing.assert_array_equal(ad.jacobian(rhs, mode="forward", chunk=chunk)(x),
                                      lorenz96_jacobian(x))


def test_lorenz96_large_uses_kernels_and_is_exact():
    x = np.random.default_rng(3).standard_normal(600) + 8.0
    np.testing.assert_array_equal(ad.jacobian(lorenz96_roll, mode="forward")(x),
                                  lorenz96_jacobian(x))


def test_ode_style_rhs_with_time_and_parameters():
    def rhs(t, y, k):
        dy = np.zeros_like(y)
        dy[0] = -k[0] * y[0] + k[1] * y[1] * y[2]
        dy[1] = k[0] * y[0] - k[1] * y[1] * y[2] - k[2] * y[1] ** 2
        dy[2] = k[2] * y[1] ** 2
        return dy

    y = np.array([0.9, 0.05, 0.05])
    k = np.array([0.04, 1e4, 3e7])
    jac = ad.jacobian(rhs, 1, mode="forward")(0.0, y, k)
    expect = np.array([
        [-k[0], k[1] * y[2], k[1] * y[1]],
        [k[0], -k[1] * y[2] - 2 * k[2] * y[1], -k[1] * y[1]],
        [0.0, 2 * k[2] * y[1], 0.0],
    ])
    np.testing.assert_allclose(jac, expect, rtol=1e-14)


# -- Hessians ----------------------------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    n = x.size
    h = np.zeros((n, n))
    i = np.arange(n - 1)
    h[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    h[i + 1, i + 1] += 200.0
    h[i, i + 1] = h[i + 1, i] = -400.0 * x[:-1]
    return h


@pytest.mark.parametrize("n", [2, 5, 17])
def test_hessian_of_rosenbrock_is_analytic(n):
    x = np.random.default_rng(n).uniform(-1.5, 1.5, n)
    np.testing.assert_allclose(ad.hessian(rosenbrock)(x), rosenbrock_hessian(x), rtol=1e-12,
                               atol=1e-12)


# -- jvp and derivative --------------------------------------------------------------------------


def test_jvp_is_jacobian_times_tangent():
    x = np.array([0.3, -1.2, 2.0, 0.7, 1.1])
    v = np.array([1.0, 0.5, -2.0, 0.25, 3.0])
    out, tan = ad.jvp(lorenz96_roll, (x,), (v,))
    np.testing.assert_allclose(out, lorenz96_roll(x))
    np.testing.assert_allclose(tan, lorenz96_jacobian(x) @ v, rtol=1e-14)


def test_jvp_several_primals_trees_and_outputs():
    def f(p, q):
        return {"s": p["a"] * q, "t": (np.sum(p["b"]) * q, 1.0)}

    p = {"a": 2.0, "b": np.array([1.0, 2.0])}
    q = 3.0
    out, tan = ad.jvp(f, (p, q), ({"a": 1.0, "b": np.array([1.0, 1.0])}, 0.5))
    assert float(out["s"]) == 6.0
    assert float(tan["s"]) == 1.0 * 3.0 + 2.0 * 0.5
    assert float(tan["t"][0]) == 2.0 * 3.0 + 3.0 * 0.5
    assert float(tan["t"][1]) == 0.0


def test_jvp_errors():
    with pytest.raises(TypeError, match="tuples"):
        ad.jvp(np.sin, 1.0, 1.0)
    with pytest.raises(ValueError, match="tangent per primal"):
        ad.jvp(np.sin, (1.0,), ())
    with pytest.raises(ad.ShapeError, match="shaped like primals"):
        ad.jvp(np.sin, (np.ones(2),), (np.ones(3),))


def test_derivative_scalar_and_array_outputs():
    d = ad.derivative(lambda x: 1.0 / (1.0 + np.exp(-x)))(0.5)
    s = 1.0 / (1.0 + np.exp(-0.5))
    np.testing.assert_allclose(d, s * (1 - s), rtol=1e-15)
    np.testing.assert_allclose(ad.derivative(lambda x: np.sin(x * np.arange(3.0)))(0.2),
                               np.arange(3.0) * np.cos(0.2 * np.arange(3.0)))
    np.testing.assert_allclose(ad.derivative(lambda x, a: a * x ** 2)(3.0, 2.0), 12.0)


def test_derivative_of_constant_and_tree_outputs():
    assert float(ad.derivative(lambda x: 5.0)(1.0)) == 0.0
    r = ad.derivative(lambda x: (x * 2.0, [x ** 2]))(3.0)
    assert float(r[0]) == 2.0 and float(r[1][0]) == 6.0


def test_derivative_of_an_array_needs_an_elementwise_function():
    x = np.array([[0.5, -1.0, 2.0]])
    np.testing.assert_allclose(ad.derivative(np.sin)(x), np.cos(x))
    np.testing.assert_allclose(ad.derivative(lambda x, a: a * x ** 3)(x, 2.0), 6.0 * x ** 2)
    np.testing.assert_allclose(ad.derivative(ad.derivative(np.sin))(x), -np.sin(x))
    np.testing.assert_allclose(ad.derivative(lambda x: x * 0.0 + 1.0)(x), np.zeros_like(x))
    with pytest.raises(ValueError, match="elementwise"):
        ad.derivative(np.sum)(np.ones(2))
    with pytest.raises(ValueError, match="elementwise"):
        ad.derivative(lambda x: (x, x))(np.ones(2))


def test_sigmoid_chain_scalar_fast_path_is_exact():
    def sig3(x):
        for _ in range(3):
            x = 1 / (1 + np.exp(-x))
        return x

    d = ad.derivative(sig3)(0.5)
    x, expect = 0.5, 1.0
    for _ in range(3):
        s = 1.0 / (1.0 + np.exp(-x))
        expect *= s * (1.0 - s)
        x = s
    np.testing.assert_allclose(d, expect, rtol=1e-15)


def test_gradcheck_checks_forward_mode():
    assert ad.gradcheck(lambda x: np.sin(x) * np.roll(x, 1), np.array([0.1, 0.2, 0.7]),
                        modes=("forward",))

    def wrong(x):
        return bad(x)

    def bad_impl(x):
        return np.sin(x)

    bad = ad.primitive(bad_impl)

    @ad.forward.dispatch
    def _bad_forward(op: ad.Method[bad], x: Dual):
        return Dual(np.sin(x.value), x.partials * 2.0, x.tag)

    with pytest.raises(ad.GradcheckError, match="forward"):
        ad.gradcheck(wrong, np.array([0.3, 0.4]), modes=("forward",))


def test_user_defined_rule_works_in_forward_mode():
    def softplus(x):
        return np.log1p(np.exp(x))

    sp = ad.define_rule(softplus, args=("x",), derivatives=("1 / (1 + exp(-x))",))
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(ad.jacobian(sp, mode="forward")(x),
                               np.diag(1 / (1 + np.exp(-x))), rtol=1e-14)
    np.testing.assert_allclose(ad.derivative(sp)(0.0), 0.5)
