"""The Dual number type: construction, numpy protocols, arithmetic, writes, structured rules."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode import kernels as dual_kernels
from dualad.forward_mode.dual import DEFAULT_TAG, Dual, Tag, tangent_parts

RNG = np.random.default_rng(0)


def seeded(x, tag=None):
    """A Dual of ``x`` with one direction per entry (its Jacobian is the identity)."""
    x = np.asarray(x, dtype=float)
    return Dual(x, np.eye(x.size).reshape(x.shape + (x.size,)), tag)


def fwd_jac(f, x, **kw):
    return ad.jacobian(f, mode="forward", **kw)(x)


# -- construction and attributes ----------------------------------------------------------------


def test_attributes_and_default_tag():
    d = Dual(np.arange(3.0), np.ones((3, 2)))
    assert d.shape == (3,) and d.ndim == 1 and d.size == 3 and len(d) == 3
    assert d.dtype == np.float64 and d.k == 2
    assert d.tag is DEFAULT_TAG and d.level == DEFAULT_TAG.level
    assert isinstance(ad.Dual, type) and ad.Dual is Dual


def test_scalars_are_kept_as_numpy_scalars():
    d = Dual(2, [1.0])
    assert type(d.value) is np.float64 and d.partials.shape == (1,)
    d0 = Dual(np.array(2.0), np.ones(1))
    assert type(d0.value) is np.float64


@pytest.mark.parametrize("value, partials", [(np.ones(2), np.ones((3, 1))), (1.0, 2.0),
                                             (np.ones((2, 2)), np.ones((2, 1)))])
def test_partials_must_be_value_shape_plus_k(value, partials):
    with pytest.raises(ad.ShapeError, match=r"value.shape \+ \(k,\)"):
        Dual(value, partials)


def test_tag_must_be_a_tag():
    with pytest.raises(TypeError, match="Tag"):
        Dual(1.0, [1.0], tag=3)


def test_tags_order_by_creation():
    a, b = Tag(), Tag()
    assert a.level < b.level


def test_repr_names_value_partials_and_tag():
    r = repr(Dual(1.0, [2.0], Tag(name="t")))
    assert "Dual(" in r and "2." in r and "'t'" in r


def test_conversion_to_plain_array_or_float_is_refused():
    d = Dual(np.ones(2), np.ones((2, 1)))
    with pytest.raises(TypeError, match="drop"):
        np.asarray(d, dtype=float)
    with pytest.raises(TypeError, match="drop its derivative"):
        float(Dual(1.0, [1.0]))


def test_copy_is_independent():
    d = Dual(np.ones(2), np.ones((2, 1)))
    c = d.copy()
    c[0] = 5.0
    assert d.value[0] == 1.0 and d.partials[0, 0] == 1.0


# -- tangent_parts --------------------------------------------------------------------------------


def test_tangent_parts_picks_innermost_tag_and_treats_others_as_constants():
    outer, inner = Tag(), Tag()
    a = Dual(1.0, [1.0], outer)
    b = Dual(2.0, [3.0, 4.0], inner)
    tag, parts = tangent_parts((a, b, 5.0))
    assert tag is inner
    assert parts[0] == (a, None) and parts[2] == (5.0, None)
    np.testing.assert_array_equal(parts[1][1], [3.0, 4.0])


def test_tangent_parts_refuses_different_k_in_one_tag():
    t = Tag()
    with pytest.raises(ad.ShapeError, match="directions"):
        tangent_parts((Dual(1.0, [1.0], t), Dual(1.0, [1.0, 2.0], t)))


def test_different_k_in_arithmetic_is_refused():
    with pytest.raises(ad.ShapeError, match="same k"):
        Dual(np.ones(2), np.ones((2, 1))) + Dual(np.ones(2), np.ones((2, 3)))


# -- arithmetic against the chain rule ------------------------------------------------------------

BINARY = [
    (lambda a, b: a + b), (lambda a, b: a - b), (lambda a, b: a * b), (lambda a, b: a / b),
    (lambda a, b: a ** b), (lambda a, b: np.maximum(a, b) * np.hypot(a, b)),
]
SHAPE_PAIRS = [((), ()), ((3,), (3,)), ((3, 1), (4,)), ((), (3,)), ((2, 3), ())]


@pytest.mark.parametrize("f", BINARY)
@pytest.mark.parametrize("sa, sb", SHAPE_PAIRS)
def test_binary_arithmetic_matches_finite_differences(f, sa, sb):
    a = RNG.uniform(0.5, 2.0, sa)
    b = RNG.uniform(0.5, 2.0, sb)
    for argnum in (0, 1):
        fwd = ad.jacobian(f, argnum, mode="forward")(a, b)
        num = numerical_jacobian(f, (a, b), argnum)
        np.testing.assert_allclose(fwd, num, rtol=1e-6, atol=1e-8)
    ja, jb = ad.jacobian(f, (0, 1), mode="forward")(a, b)
    np.testing.assert_allclose(ja, numerical_jacobian(f, (a, b), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jb, numerical_jacobian(f, (a, b), 1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("const", [2.0, 3, np.float64(1.5), np.array([1.0, 2.0, 4.0]),
                                   np.array([[1.0], [2.0]])])
def test_arithmetic_with_constants_both_sides(const):
    x = np.array([0.5, 1.5, 2.5])

    def f(x):
        return (x + const) * (const - x) / (const / x) + x * const - x / const

    np.testing.assert_allclose(fwd_jac(f, x), numerical_jacobian(f, (x,), 0), rtol=1e-6,
                               atol=1e-8)


def test_unary_and_power_operators():
    x = np.array([0.3, 1.7])
    f = lambda x: -x + (+x) ** 2 + abs(x) + 2.0 ** x  # noqa: E731
    np.testing.assert_allclose(fwd_jac(f, x), numerical_jacobian(f, (x,), 0), rtol=1e-6)


def test_results_never_alias_their_inputs():
    x = Dual(np.ones(3), np.ones((3, 1)))
    for y in (x + 1.0, 1.0 + x, x - np.zeros(3), x * 1.0, +x):
        y[0] = 7.0
        assert x.value[0] == 1.0 and x.partials[0, 0] == 1.0
    y = x + 0.0
    x[1] = Dual(9.0, [9.0])
    assert y.value[1] == 1.0 and y.partials[1, 0] == 1.0


def test_comparisons_act_on_values():
    x = Dual(np.array([1.0, 2.0, 3.0]), np.ones((3, 1)))
    for r in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, np.isfinite(x), 2 < x,
              np.logical_and(x > 1, x < 3)):
        assert isinstance(r, np.ndarray) and r.dtype == bool
    np.testing.assert_array_equal(x > 1.5, [False, True, True])
    assert bool(Dual(1.0, [1.0]) > 0.5)
    assert (x < x).sum() == 0


def test_functions_with_constant_results_evaluate_on_values():
    x = Dual(np.array([3.0, 1.0, 2.0]), np.eye(3))
    assert np.shape(x) == (3,) and np.ndim(x) == 1 and np.size(x) == 3
    assert np.argmax(x) == 0
    np.testing.assert_array_equal(np.argsort(x), [1, 2, 0])


def test_missing_rule_is_a_clear_error():
    def opaque(x):
        return x * 2.0

    opaque = ad.primitive(opaque)
    with pytest.raises(ad.MissingRuleError, match="forward-mode"):
        opaque(Dual(np.ones(2), np.ones((2, 1))))


def test_hand_made_duals_of_one_tag_mix_partials():
    a = Dual(2.0, [1.0, 0.0])
    b = Dual(3.0, [0.0, 1.0])
    c = a * b + np.sin(a)
    np.testing.assert_allclose(c.partials, [3.0 + np.cos(2.0), 2.0])


def test_duals_of_different_tags_nest_instead_of_mixing():
    a = Dual(2.0, [1.0], Tag())
    b = Dual(3.0, [1.0], Tag())
    c = a * b  # b is inner: a is a constant to it
    assert c.tag is b.tag and isinstance(c.value, Dual) and c.value.tag is a.tag
    assert isinstance(c.partials, Dual)
    np.testing.assert_allclose(ad.value(c.partials), [2.0])  # d/db (a*b) = a
    np.testing.assert_allclose(c.value.partials, [3.0])  # d/da (a*b) = b


# -- writing into preallocated arrays -----------------------------------------------------------


def test_setitem_into_empty_like_in_a_python_loop():
    def f(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] ** 2 * x[i - 1]
        return out

    x = np.array([0.5, 1.5, 2.0, -1.0])
    np.testing.assert_allclose(fwd_jac(f, x), numerical_jacobian(f, (x,), 0), rtol=1e-6,
                               atol=1e-9)


@pytest.mark.parametrize("alloc", [np.empty_like, np.zeros_like, np.ones_like,
                                   lambda x: np.full_like(x, 2.0)])
def test_allocators_give_duals_with_zero_partials(alloc):
    x = Dual(np.ones((2, 3)), np.ones((2, 3, 4)))
    out = alloc(x)
    assert isinstance(out, Dual) and out.shape == (2, 3) and out.k == 4 and out.tag is x.tag
    np.testing.assert_array_equal(out.partials, 0.0)


def test_allocators_with_integer_dtype_give_plain_arrays():
    x = Dual(np.ones(3), np.ones((3, 1)))
    z = np.zeros_like(x, dtype=int)
    assert isinstance(z, np.ndarray) and z.dtype.kind == "i"


def test_full_like_with_a_dual_fill_value():
    x = np.array([1.0, 2.0])
    f = lambda x: np.full_like(x, x[0] * 3.0) * x  # noqa: E731
    np.testing.assert_allclose(fwd_jac(f, x), numerical_jacobian(f, (x,), 0), rtol=1e-6)


@pytest.mark.parametrize("key", [0, -1, slice(1, 3), (Ellipsis, 1), (1, Ellipsis),
                                 (slice(None), 0), np.array([1, 0]),
                                 (np.array([0, 1]), np.array([2, 0]))])
def test_setitem_keys(key):
    def f(x):
        out = np.zeros_like(x)
        out[key] = np.sin(x[key]) * 2.0
        out[...] = out + x * x[0, 0]
        return out

    x = RNG.uniform(0.5, 1.5, (2, 3))
    np.testing.assert_allclose(fwd_jac(f, x), numerical_jacobian(f, (x,), 0), rtol=1e-6,
                               atol=1e-9)


def test_setitem_with_constants_clears_partials():
    x = Dual(np.ones(3), np.ones((3, 2)))
    out = x * 2.0
    out[1] = 5.0
    np.testing.assert_array_equal(out.value, [2.0, 5.0, 2.0])
    np.testing.assert_array_equal(out.partials[1], [0.0, 0.0])


def test_setitem_through_a_view_writes_into_the_base_like_numpy():
    x = Dual(np.ones((2, 2)), np.ones((2, 2, 1)))
    out = np.zeros_like(x)
    row = out[0]
    row[:] = x[1] * 3.0
    np.testing.assert_array_equal(out.value, [[3.0, 3.0], [0.0, 0.0]])
    np.testing.assert_array_equal(out.partials[0, :, 0], [3.0, 3.0])


def test_setitem_into_0d_dual():
    x = Dual(1.0, [1.0])
    y = x * 2.0
    y[()] = x * 5.0
    assert float(ad.value(y)) == 5.0 and y.partials[0] == 5.0


def test_in_place_operators_update_the_array_like_numpy():
    def f(x):
        out = np.zeros_like(x)
        alias = out
        out += x ** 2
        out *= x
        out -= 1.0
        out /= 2.0
        return alias

    x = np.array([0.5, 2.0, 3.0])
    np.testing.assert_allclose(fwd_jac(f, x), np.diag(1.5 * x ** 2), rtol=1e-12)


def test_in_place_operator_on_a_scalar_rebinds():
    def f(x):
        s = x[0]
        s += x[1] * 2.0
        s **= 2
        return s

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(fwd_jac(f, x), [10.0, 20.0])


# -- structured functions -------------------------------------------------------------------------

STRUCTURED = [
    ("sum", lambda x: np.sum(x)),
    ("sum axis", lambda x: np.sum(x, axis=1)),
    ("sum neg axes keepdims", lambda x: np.sum(x, axis=(-1, 0), keepdims=True)),
    ("method sum", lambda x: x.sum(0)),
    ("mean", lambda x: np.mean(x, axis=-1)),
    ("mean all", lambda x: x.mean()),
    ("reshape", lambda x: np.reshape(x, (3, 2)) * np.arange(3.0)[:, None]),
    ("reshape F", lambda x: np.reshape(x, (3, 2), order="F") * np.arange(3.0)[:, None]),
    ("reshape -1", lambda x: x.reshape(-1)),
    ("ravel", lambda x: np.ravel(x) ** 2),
    ("ravel F", lambda x: np.ravel(x, order="F") * np.arange(6.0)),
    ("transpose", lambda x: np.transpose(x) * np.arange(3.0)[:, None]),
    ("T", lambda x: x.T @ x),
    ("swapaxes", lambda x: np.swapaxes(x, 0, -1) ** 2),
    ("broadcast_to", lambda x: np.broadcast_to(x[0], (4, 3)) * np.arange(4.0)[:, None]),
    ("getitem", lambda x: x[1, ::-1] * x[:, 0][:, None]),
    ("getitem fancy", lambda x: x[np.array([1, 0, 1]), np.array([2, 2, 0])]),
    ("getitem mask", lambda x: x[x > 0.7]),
    ("getitem ellipsis newaxis", lambda x: x[..., None, 1] * x[None, ..., 0]),
    ("roll", lambda x: np.roll(x, 1)),
    ("roll axis", lambda x: np.roll(x, -1, axis=1) * x),
    ("roll tuple", lambda x: np.roll(x, (1, 2), axis=(0, 1))),
    ("roll big", lambda x: np.roll(np.tile(x, (30, 30)), 7, axis=0).sum(axis=0)),
    ("concatenate", lambda x: np.concatenate([x, x ** 2, np.ones((1, 3))])),
    ("concatenate axis", lambda x: np.concatenate((x, np.zeros((2, 1)), x), axis=-1)),
    ("concatenate None", lambda x: np.concatenate([x, x[:1]], axis=None)),
    ("stack", lambda x: np.stack([x, 2 * x, np.ones((2, 3))], axis=1)),
    ("stack last", lambda x: np.stack([x[0], x[1]], axis=-1)),
    ("matmul", lambda x: x @ x.T),
    ("matmul const", lambda x: np.ones((4, 2)) @ x),
    ("matmul vec", lambda x: x @ np.arange(3.0)),
    ("matmul vec left", lambda x: np.arange(2.0) @ x),
    ("matmul vec vec", lambda x: x[0] @ x[1]),
    ("matmul batched", lambda x: np.stack([x, 2 * x]) @ x.T),
    ("matmul batched right", lambda x: x.T @ np.stack([x, x ** 2])),
    ("matmul vec batched", lambda x: x[:, 0] @ np.stack([x, x ** 2])),
    ("dot", lambda x: np.dot(x, x.T)),
    ("dot vec", lambda x: np.dot(x[0], x[1])),
    ("dot scalar", lambda x: np.dot(x, 2.0)),
    ("dot nd md", lambda x: np.dot(np.stack([x, x ** 2]), np.stack([x.T, 2 * x.T]))),
    ("method dot", lambda x: x.dot(np.ones(3))),
]


@pytest.mark.parametrize("name, f", STRUCTURED, ids=[s[0] for s in STRUCTURED])
def test_structured_functions_match_finite_differences(name, f):
    x = RNG.uniform(0.1, 1.5, (2, 3))
    for chunk in (None, 4):
        np.testing.assert_allclose(fwd_jac(f, x, chunk=chunk), numerical_jacobian(f, (x,), 0),
                                   rtol=1e-6, atol=1e-8)


def test_structured_functions_on_0d_and_1d_values():
    x = np.array(0.7)
    f = lambda x: np.sum(np.stack([x, x * 2])) + np.reshape(x, (1,)).sum()  # noqa: E731
    np.testing.assert_allclose(fwd_jac(f, x), 4.0)
    y = np.array([0.5, 1.0, 2.0])
    g = lambda y: np.roll(y, 1) * np.concatenate([y[1:], y[:1]])  # noqa: E731
    np.testing.assert_allclose(fwd_jac(g, y), numerical_jacobian(g, (y,), 0), rtol=1e-6)


# -- fused kernels agree with the numpy path ------------------------------------------------------


@pytest.fixture
def kernels_forced():
    """Kernels on at every size (restored afterwards)."""
    saved = (dual_kernels.ENABLED, dual_kernels.MIN_K, dict(dual_kernels.THRESHOLDS))
    dual_kernels.set_enabled(True)
    dual_kernels.MIN_K = 1
    touched = []

    def force(ufunc):
        rk = dual_kernels.kernels_for(ufunc)
        touched.append((rk, rk.threshold))
        rk.threshold = 0
        return rk

    yield force
    dual_kernels.set_enabled(saved[0])
    dual_kernels.MIN_K = saved[1]
    for rk, th in touched:
        rk.threshold = th


@pytest.mark.parametrize("expr", ["a * b", "a / b", "a + b", "a - b", "a * 3.0", "2.0 / a",
                                  "np.sin(a)", "np.exp(b)", "np.multiply(a, c)"])
def test_kernel_path_equals_numpy_path(kernels_forced, expr):
    for uf in (np.multiply, np.true_divide, np.add, np.subtract, np.sin, np.exp):
        kernels_forced(uf)
    t = Tag()
    v = RNG.uniform(0.5, 2.0, (4, 5))
    a = Dual(v, RNG.standard_normal((4, 5, 3)), t)
    b = Dual(v[::-1].copy(), RNG.standard_normal((4, 5, 3)), t)
    c = RNG.uniform(0.5, 2.0, (4, 5))
    env = {"np": np, "a": a, "b": b, "c": c}
    with_kernel = eval(expr, env)
    dual_kernels.set_enabled(False)
    without = eval(expr, env)
    np.testing.assert_allclose(with_kernel.value, without.value, rtol=1e-14)
    np.testing.assert_allclose(with_kernel.partials, without.partials, rtol=1e-13, atol=1e-15)
