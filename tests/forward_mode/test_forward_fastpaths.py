"""The fast paths of forward mode (lean elementwise impls, getitem, setitem, sum, roll) give
the numbers of the general path, of reverse mode and of central differences; nested Duals
go through them; a user's rule still wins over them."""

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dualad as ad
from dualad import extend
from dualad.core.operators import Broadcasted, Method
from dualad.derivatives.registry import define_elementwise_rule, get_rule
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode import dual as dual_module
from dualad.forward_mode import kernels as dual_kernels
from dualad.forward_mode.dual import Dual, Tag, _setitem
from dualad.forward_mode.lean import lean_binary, lean_unary

UNARY = [np.sin, np.cos, np.tan, np.exp, np.log, np.sqrt, np.tanh, np.arcsin, np.arctan,
         np.negative, np.positive, np.square, np.reciprocal, np.log1p, np.expm1, np.cbrt,
         np.absolute, np.floor, np.arccosh, np.sinh]
BINARY = [np.add, np.subtract, np.multiply, np.divide, np.power, np.maximum, np.minimum,
          np.arctan2, np.hypot, np.fmod, np.copysign, np.logaddexp]

SHAPES = [(), (1,), (4,), (2, 3)]


def _dual(rng, shape, k, tag, low=0.2, high=0.9):
    v = rng.uniform(low, high, shape)
    value = np.float64(v) if shape == () else v
    return Dual._make(value, rng.standard_normal(shape + (k,)), tag)


def _general(ufunc, args):
    """The general tangent of ``ufunc`` through dispatch (what a call takes without fast paths)."""
    op = Broadcasted.instance(ufunc)
    return ad.forward(op, *args)


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a.value), np.asarray(b.value), rtol=1e-13,
                               atol=1e-300, equal_nan=True, err_msg=f"{what}: values")
    np.testing.assert_allclose(a.partials, b.partials, rtol=1e-12, atol=1e-14, equal_nan=True,
                               err_msg=f"{what}: partials")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(UNARY), st.sampled_from(SHAPES), st.sampled_from([1, 2, 7]),
       st.integers(0, 2**31), st.booleans())
def test_lean_unary_matches_the_general_path(ufunc, shape, k, seed, kernels_on):
    rng = np.random.default_rng(seed)
    x = _dual(rng, shape, k, Tag())
    lean = lean_unary(get_rule(ufunc), dual_kernels.kernels_for(ufunc))
    dual_kernels.set_enabled(kernels_on)
    try:
        with np.errstate(all="ignore"):
            fast, slow = lean(x), _general(ufunc, (x,))
    finally:
        dual_kernels.set_enabled(True)
    assert fast is not None
    assert fast.partials is not x.partials and not np.shares_memory(fast.partials, x.partials)
    _close(fast, slow, ufunc.__name__)


_OPERANDS = ["dual, dual", "dual, number", "number, dual", "dual, array", "array, dual"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BINARY), st.sampled_from(SHAPES), st.sampled_from([1, 2, 7]),
       st.sampled_from(_OPERANDS), st.integers(0, 2**31), st.booleans())
def test_lean_binary_matches_the_general_path(ufunc, shape, k, operands, seed, kernels_on):
    rng = np.random.default_rng(seed)
    tag = Tag()
    a, b = _dual(rng, shape, k, tag), _dual(rng, shape, k, tag)
    if "number" in operands:
        c = float(rng.uniform(0.2, 0.9))
    else:
        c = rng.uniform(0.2, 0.9, shape)
    args = {"dual, dual": (a, b), "dual, number": (a, c), "number, dual": (c, b),
            "dual, array": (a, c), "array, dual": (c, b)}[operands]
    lean = lean_binary(get_rule(ufunc), dual_kernels.kernels_for(ufunc))
    dual_kernels.set_enabled(kernels_on)
    try:
        with np.errstate(all="ignore"):
            fast, slow = lean(*args), _general(ufunc, args)
    finally:
        dual_kernels.set_enabled(True)
    assert fast is not None, (ufunc, shape, operands)
    for x in args:
        if isinstance(x, Dual):
            assert not np.shares_memory(fast.partials, x.partials)
    _close(fast, slow, f"{ufunc.__name__}({operands})")


def test_lean_paths_leave_other_calls_to_the_general_path():
    mul = lean_binary(get_rule(np.multiply), dual_kernels.kernels_for(np.multiply))
    sin = lean_unary(get_rule(np.sin), dual_kernels.kernels_for(np.sin))
    t1, t2 = Tag(), Tag()
    x = Dual._make(np.ones(3), np.ones((3, 2)), t1)
    assert mul(x, Dual._make(np.ones(3), np.ones((3, 2)), t2)) is None  # two tags
    assert mul(x, Dual._make(np.ones(3), np.ones((3, 5)), t1)) is None  # two k: an error
    assert mul(x, np.ones((2, 3))) is None  # broadcasting
    assert mul(x, Dual._make(np.float64(1.0), np.ones(2), t1)) is None  # broadcasting
    assert mul(x, ad.Variable(np.ones(3))) is None  # another kind of traced value
    assert mul(x, np.array(["a", "b", "c"])) is None
    nested = Dual._make(Dual._make(np.ones(3), np.ones((3, 1)), t1), np.ones((3, 2)), t2)
    assert sin(nested) is None and mul(nested, 2.0) is None
    assert sin(Dual._scalar(np.float64(1.0), np.float64(1.0), t1)) is None
    # and the general path still raises its own errors for them
    with pytest.raises(ad.ShapeError):
        x * Dual._make(np.ones(3), np.ones((3, 5)), t1)


# -- random programs: fast paths on and off, reverse mode, central differences ------------

_STEPS = ["mul", "add_const", "sub", "div", "sin", "exp", "tanh", "square", "neg",
          "shift_slices", "reverse", "roll", "roll2d", "sum_keep", "write_slice", "write_const",
          "getitem_int", "reshape_sum", "fancy"]


def _program(steps):
    def f(x):
        y = x
        for s in steps:
            if s == "mul":
                y = y * x
            elif s == "add_const":
                y = 0.5 + y
            elif s == "sub":
                y = x - y
            elif s == "div":
                y = y / (1.5 + x * x)
            elif s == "sin":
                y = np.sin(y)
            elif s == "exp":
                y = np.exp(0.1 * y)
            elif s == "tanh":
                y = np.tanh(y)
            elif s == "square":
                y = np.square(y)
            elif s == "neg":
                y = -y
            elif s == "shift_slices":
                y = np.concatenate([y[1:] * y[:-1], y[:1]])
            elif s == "reverse":
                y = y[::-1] + y
            elif s == "roll":
                y = np.roll(y, 1) - np.roll(y, -2) * y
            elif s == "roll2d":
                y = np.reshape(np.roll(np.reshape(y, (2, 3)), 1, axis=1), (6,)) * y
            elif s == "sum_keep":
                y = y * np.sum(y, keepdims=True) + np.sum(y)
            elif s == "write_slice":
                out = np.zeros_like(y)
                out[1:] = y[:-1] * x[1:]
                out[0] = y[-1]
                y = out
            elif s == "write_const":
                out = np.copy(y)
                out[2] = 0.25
                out[3:5] = np.array([0.5, -0.5])
                y = out
            elif s == "getitem_int":
                y = y * y[2]
            elif s == "reshape_sum":
                y = y + np.repeat(np.sum(np.reshape(y, (2, 3)), axis=0), 2)
            elif s == "fancy":
                y = y[np.array([5, 0, 3, 1, 4, 2])] * y
        return y

    return f


def _forward_jacobians(f, x):
    return (ad.jacobian(f, mode="forward")(x), ad.jacobian(f, mode="forward", chunk=2)(x),
            ad.jvp(f, (x,), (np.ones(6),))[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_STEPS), min_size=1, max_size=6), st.integers(0, 2**31))
def test_random_programs_agree_with_and_without_fast_paths(steps, seed):
    f = _program(steps)
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, 6)
    with np.errstate(all="ignore"):
        # programs that overflow compare infinities, and differences are meaningless there
        assume(np.all(np.abs(f(x)) < 1e3))
    fast = _forward_jacobians(f, x)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dual_module, "_REGISTERED", {})
        dual_module._mark_stale()
        slow = _forward_jacobians(f, x)
    dual_module._mark_stale()
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12, err_msg=str(steps))
    rev = ad.jacobian(f, mode="reverse")(x)
    np.testing.assert_allclose(fast[0], rev, rtol=1e-10, atol=1e-10, err_msg=str(steps))
    np.testing.assert_allclose(fast[1], rev, rtol=1e-10, atol=1e-10, err_msg=str(steps))
    np.testing.assert_allclose(fast[2], rev @ np.ones(6), rtol=1e-10, atol=1e-10)
    num = numerical_jacobian(f, (x,), 0)
    np.testing.assert_allclose(fast[0], num, rtol=1e-5, atol=1e-6, err_msg=str(steps))


def _active_tiers():
    return [(f, rec) for f, rec in dual_module._ACTIVE.items() if repr(rec) != "FastPath(empty)"]


def test_general_only_fixture_really_takes_the_general_path(general_only):
    dual_module._refresh_fast_paths()
    assert not _active_tiers()
    x = np.linspace(0.1, 0.9, 6)
    f = _program(["mul", "sin", "shift_slices", "write_slice", "sum_keep", "roll"])
    assert not _active_tiers()  # the records stay empty through a whole Jacobian
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x),
                               ad.jacobian(f, mode="reverse")(x), rtol=1e-12, atol=1e-12)


# -- nesting: Duals of Duals through every fast path ---------------------------------------


@pytest.mark.parametrize("steps", [["mul", "div", "sin"], ["shift_slices", "mul"],
                                   ["write_slice", "square"], ["roll", "sum_keep"],
                                   ["getitem_int", "write_const", "exp"],
                                   ["reverse", "roll2d", "tanh"], ["reshape_sum", "fancy"]])
def test_nested_forward_over_forward(steps):
    f = _program(steps)
    x = np.linspace(-0.8, 0.9, 6)
    v = np.linspace(1.0, -1.0, 6)
    # d/dx of (J(x) @ v), forward over forward, against reverse over reverse
    ff = ad.jacobian(lambda y: ad.jacobian(f, mode="forward")(y) @ v, mode="forward")(x)
    rr = ad.jacobian(lambda y: ad.jacobian(f, mode="reverse")(y) @ v, mode="reverse")(x)
    np.testing.assert_allclose(ff, rr, rtol=1e-9, atol=1e-10, err_msg=str(steps))
    num = numerical_jacobian(lambda y: ad.jacobian(f, mode="forward")(y) @ v, (x,), 0)
    np.testing.assert_allclose(ff, num, rtol=1e-5, atol=1e-6, err_msg=str(steps))


def test_nested_scalar_loop_like_a_simulation():
    def rhs(y):
        n = y.shape[0]
        out = np.empty_like(y)
        for i in range(n):
            left = y[i - 1] if i else 1.0
            out[i] = y[i] * y[i] * left - 2.0 * y[i] + 0.5
        return out

    x = np.array([0.3, 0.8, -0.4, 1.2])
    jac = ad.jacobian(rhs, mode="forward")(x)
    np.testing.assert_allclose(jac, ad.jacobian(rhs, mode="reverse")(x), rtol=1e-13)
    w = np.array([1.0, -2.0, 0.5, 3.0])
    hv = ad.jacobian(lambda y: ad.jacobian(rhs, mode="forward")(y) @ w, mode="forward")(x)
    num = numerical_jacobian(lambda y: ad.jacobian(rhs, mode="forward")(y) @ w, (x,), 0)
    np.testing.assert_allclose(hv, num, rtol=1e-6, atol=1e-7)


# -- setitem's fast path against the general writer ------------------------------------------


@pytest.mark.parametrize("key", [slice(1, None), 0, -1, (Ellipsis,), Ellipsis,
                                 np.array([True, False, True, False]), np.array([3, 0]),
                                 slice(None, None, 2)])
@pytest.mark.parametrize("item_kind", ["dual", "scalar dual", "number", "array"])
def test_setitem_fast_path_matches_the_general_writer(key, item_kind):
    rng = np.random.default_rng(3)
    tag = Tag()
    target = Dual._make(rng.standard_normal(4), rng.standard_normal((4, 3)), tag)
    size = np.empty(4)[key].size
    if item_kind == "dual":
        item = Dual._make(rng.standard_normal(size), rng.standard_normal((size, 3)), tag)
        if isinstance(key, int):
            item = item[0]
    elif item_kind == "scalar dual":
        item = Dual._make(np.float64(0.7), rng.standard_normal(3), tag)
    elif item_kind == "number":
        item = 0.25
    else:
        item = rng.standard_normal(size) if not isinstance(key, int) else np.float64(1.5)
    fast, slow = target.copy(), target.copy()
    fast[key] = item
    _setitem(slow, key, item)
    np.testing.assert_array_equal(fast.value, slow.value)
    np.testing.assert_array_equal(fast.partials, slow.partials)


def test_setitem_into_a_read_only_view_copies_first():
    tag = Tag()
    v, p = np.zeros(3), np.zeros((3, 2))
    v.flags.writeable = False
    target = Dual._make(v, p, tag)
    target[1] = Dual._make(np.float64(2.0), np.ones(2), tag)
    assert target.value[1] == 2.0 and v[1] == 0.0
    np.testing.assert_array_equal(target.partials[1], [1.0, 1.0])
    with pytest.raises(ad.ShapeError):
        target[0] = Dual._make(np.float64(2.0), np.ones(5), tag)


# -- a user's rule beats the fast paths ------------------------------------------------------


def _restore(ufunc):
    rule = get_rule(ufunc)
    define_elementwise_rule(ufunc, rule.arg_names, rule.expressions, domain=rule.domain,
                              notes=rule.notes, source=rule.source, name=rule.name)


def test_a_user_tangent_for_multiply_beats_the_lean_path():
    x = np.array([0.5, 1.5])
    f = lambda y: y * y  # noqa: E731
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), np.diag(2 * x))
    calls = []

    @extend.forward.dispatch
    def _(op: extend.Broadcasted[np.multiply], a: extend.Dual, b: extend.Dual):
        calls.append("mul")
        tag, [(av, ap), (bv, bp)] = extend.tangent_parts((a, b))
        return extend.Dual(av * bv, ap * 0.0 + 7.0, tag)

    try:
        np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), np.full((2, 2), 7.0))
        assert calls
    finally:
        _restore(np.multiply)
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), np.diag(2 * x))
    assert dual_module.active_fast_path(np.multiply).lean is not None


def test_a_user_tangent_for_getitem_beats_the_fast_path():
    x = np.array([0.5, 1.5, 2.5])
    f = lambda y: y[1:] * 1.0  # noqa: E731
    before = ad.jacobian(f, mode="forward")(x)
    original = [m for m in ad.forward.methods
                if getattr(m.signature.types[0], "f", None) is operator.getitem
                and len(m.signature.types) == 2]
    assert len(original) == 1

    def user(op, x, key):
        return extend.Dual(x.value[key], x.partials[key] * 3.0, x.tag)

    ad.forward.register(user, original[0].signature)  # a user's method, same signature
    try:
        np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), 3.0 * before)
    finally:
        ad.forward.register(original[0].implementation, original[0].signature, builtin=True)
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), before)
    assert dual_module.active_fast_path(operator.getitem).general is not None


def test_method_keys_use_the_rule_and_not_plum_each_time():
    # the getitem fast path is taken for plain keys: a Dual result of the rule's shape
    x = Dual._make(np.arange(4.0), np.eye(4), Tag())
    for key in (1, slice(1, 3), (Ellipsis,), None, np.array([0, 2])):
        r = x[key]
        assert isinstance(r, Dual)
        np.testing.assert_array_equal(r.value, np.arange(4.0)[key])
        np.testing.assert_array_equal(r.partials, np.eye(4)[key if key is not Ellipsis
                                                             else (Ellipsis, slice(None))])
    assert Method.instance(operator.getitem) is not None
