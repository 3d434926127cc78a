"""Scalar Duals with a few directions held as rows (lists of floats): every elementwise rule
gives the numbers of the array representation (NaN-safe included), Jacobians of models
written with scalars match finite differences and reverse mode, and rows turn into arrays
wherever anything else needs them."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode.dual import ROW_MAX, Dual, Tag
from dualad.forward_mode.rows import stack_rows

UNARY = [np.sin, np.cos, np.exp, np.log, np.sqrt, np.tanh, np.negative, np.square,
         np.reciprocal, np.log1p, np.absolute, np.floor, np.arctan, np.cbrt]
BINARY = [np.add, np.subtract, np.multiply, np.divide, np.power, np.maximum, np.minimum,
          np.arctan2, np.hypot, np.logaddexp]


def _rows(values, k=3, seed=0):
    """Row Duals (taken from a vector, as ``y[i]``) with random partials."""
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((len(values), k))
    y = Dual(np.array(values, dtype=float), p, Tag())
    items = [y[i] for i in range(len(values))]
    return items, p


def _as_array_dual(d):
    """The same number with its partials as an array (the usual representation), leaving
    ``d`` a row (reading ``d.partials`` would turn it into an array)."""
    return Dual._make(d.value, np.array(d._p, dtype=float), d.tag)


def test_indexing_and_unpacking_give_rows():
    y = Dual(np.array([1.0, 2.0, 3.0]), np.eye(3))
    a, b, c = y
    for d in (a, b, c, y[-3], y[1]):
        assert type(d._p) is list
        assert type(d.value) is np.float64
    np.testing.assert_array_equal(b.partials, [0.0, 1.0, 0.0])
    assert b.k == 3 and b.shape == ()
    assert type(b._p) is np.ndarray  # materialised once read


def test_rows_only_for_float64_vectors_with_few_directions():
    wide = Dual(np.ones(3), np.ones((3, ROW_MAX + 1)))
    assert type(wide[0]._p) is np.ndarray
    one = Dual(np.ones(3), np.ones((3, 1)))
    assert one[0]._p is None or type(one[0]._p) is np.ndarray
    f32 = Dual(np.ones(3, dtype=np.float32), np.ones((3, 2)))
    assert type(f32[0]._p) is not list
    matrix = Dual(np.ones((2, 2)), np.ones((2, 2, 3)))
    assert matrix[0].shape == (2,)
    with pytest.raises(IndexError):
        Dual(np.ones(3), np.eye(3))[3]


@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
def test_unary_rows_match_arrays(ufunc):
    items, _ = _rows([0.3, 1.7, 2.5], seed=1)
    for d in items:
        got = ufunc(d)
        want = ufunc(_as_array_dual(d))
        assert type(got._p) is list, "the row path was not taken"
        np.testing.assert_allclose(got.value, want.value, rtol=1e-14)
        np.testing.assert_allclose(got.partials, want.partials, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("ufunc", BINARY, ids=lambda u: u.__name__)
def test_binary_rows_match_arrays(ufunc):
    (a, b), _ = _rows([0.7, 1.9], seed=2)
    for x, y in [(a, b), (b, a), (a, 2.5), (3.0, b), (a, 2), (np.float64(0.5), a)]:
        got = ufunc(x, y)
        xx = _as_array_dual(x) if type(x) is Dual else x
        yy = _as_array_dual(y) if type(y) is Dual else y
        want = ufunc(xx, yy)
        assert type(got._p) is list, "the row path was not taken"
        np.testing.assert_allclose(got.value, want.value, rtol=1e-14)
        np.testing.assert_allclose(got.partials, want.partials, rtol=1e-13)


def test_rows_are_nan_safe():
    # sqrt'(0) is inf: a zero tangent entry stays zero, as for arrays (and ForwardDiff)
    y = Dual(np.array([0.0, 4.0]), np.eye(2))
    a, b = y
    s = np.sqrt(a) + b
    np.testing.assert_array_equal(s.partials, [np.inf, 1.0])
    t = np.sqrt(a) * b  # expr pair with an infinite derivative
    want = np.sqrt(_as_array_dual(a)) * _as_array_dual(b)
    np.testing.assert_array_equal(t.partials, want.partials)
    assert ad.jacobian(lambda v: np.sqrt(v[0]) + v[1] ** 2)(np.array([0.0, 3.0]))[1] == 6.0


def test_rows_never_alias():
    (a, b), _ = _rows([1.0, 2.0])
    c = a + 0.0  # kind "one": may hand the same row back
    c.partials[0] = 99.0  # materialises a fresh array
    assert a.partials[0] != 99.0


def _robertson_array(t, y):
    y1, y2, y3 = y
    return np.array([-0.04 * y1 + 1e4 * y2 * y3,
                     0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2,
                     3e7 * y2 * y2])


def _mixed_buffer(t, y):
    dy = np.zeros(4)
    dy[0] = y[0] * y[1] / (1.0 + y[2] ** 2) - np.exp(-y[3])
    dy[1] = np.sin(y[0]) * 2 - y[1] / 3.0
    dy[2] = -dy[1] + np.sqrt(y[2]) * y[3]
    dy[3] = 1.5  # a constant entry
    return dy


def _with_constants(t, y):
    a, b = y
    return np.array([a * b, 2.0, np.tanh(b)])


def _mixed_with_arrays(t, y):
    y0 = y[0]
    return y0 * y + np.sum(y) * y[1]  # rows meet whole vectors


@pytest.mark.parametrize("rhs, y0", [
    (_robertson_array, np.array([1.0, 2e-5, 3e-2])),
    (_mixed_buffer, np.array([0.4, 1.3, 0.8, 0.2])),
    (_with_constants, np.array([0.3, -0.7])),
    (_mixed_with_arrays, np.array([0.5, 1.5, -2.0])),
])
def test_jacobians_of_scalar_models(rhs, y0):
    rng = np.random.default_rng(3)
    for _ in range(3):
        y = y0 * (1 + 0.1 * rng.random(y0.size))
        fwd = ad.ode_jacobian(rhs)(0.0, y)
        rev = ad.ode_jacobian(rhs, mode="reverse")(0.0, y)
        num = numerical_jacobian(rhs, (0.0, y), 1)
        np.testing.assert_allclose(fwd, rev, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fwd, num.reshape(fwd.shape), rtol=1e-5, atol=1e-6)


def test_chunked_jacobian_with_rows():
    y = np.array([0.4, 1.3, 0.8, 0.2])
    full = ad.ode_jacobian(_mixed_buffer)(0.0, y)
    chunked = ad.ode_jacobian(_mixed_buffer, chunk=2)(0.0, y)
    np.testing.assert_allclose(chunked, full, rtol=1e-14)


def test_nested_differentiation_through_rows():
    def energy(v):
        a, b, c = v
        return a * a * b + np.sin(c) * a - b / c

    x = np.array([0.7, 1.1, 0.9])
    h = ad.hessian(energy)(x)
    hr = ad.jacobian(ad.grad(energy), mode="reverse")(x)
    np.testing.assert_allclose(h, hr, rtol=1e-12)
    fwd_fwd = ad.jacobian(ad.jacobian(energy, mode="forward"), mode="forward")(x)
    np.testing.assert_allclose(fwd_fwd, hr, rtol=1e-12)


def test_writing_into_a_scalar_row():
    (a, b), _ = _rows([1.0, 2.0])
    c = a * 1.0
    c[()] = b
    np.testing.assert_array_equal(c.partials, b.partials)
    assert c.value == b.value


def test_stack_rows():
    tag = Tag()
    y = Dual(np.array([1.0, 2.0]), np.eye(2), tag)
    a, b = y
    s = stack_rows([a * b, 3.0, b], tag)
    np.testing.assert_array_equal(s.value, [2.0, 3.0, 2.0])
    np.testing.assert_array_equal(s.partials, [[2.0, 1.0], [0.0, 0.0], [0.0, 1.0]])
    assert stack_rows([3.0, 4.0], tag) is None  # nothing traced
    assert stack_rows([a, "x"], tag) is None
    assert stack_rows([a, Dual(np.float64(1.0), np.ones(2), Tag())], tag) is None  # other tag
    # a 2-D object array of rows keeps its shape
    jac = ad.jacobian(lambda v: np.array([[v[0], v[1]], [v[0] * v[1], 1.0]]))(np.array([2.0, 3.0]))
    np.testing.assert_array_equal(jac, [[[1, 0], [0, 1]], [[3, 2], [0, 0]]])


def test_a_user_tangent_for_getitem_beats_rows():
    import operator

    from dualad.forward_mode import dual as dual_module

    x = np.array([0.5, 1.5, 2.5])

    def by_index(y):
        return np.array([y[0] * 1.0, y[2] * 1.0])

    def by_unpacking(y):
        a, b, c = y
        return np.array([a * 1.0, c * 1.0])

    before = [ad.jacobian(f, mode="forward")(x) for f in (by_index, by_unpacking)]
    original = [m for m in ad.forward.methods
                if getattr(m.signature.types[0], "f", None) is operator.getitem
                and len(m.signature.types) == 2]
    assert len(original) == 1

    def user(op, x, key):
        return Dual(x.value[key], x.partials[key] * 3.0, x.tag)

    ad.forward.register(user, original[0].signature)  # a user's method, same signature
    try:
        for f, b in zip((by_index, by_unpacking), before):
            np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), 3.0 * b)
    finally:
        ad.forward.register(original[0].implementation, original[0].signature, builtin=True)
    for f, b in zip((by_index, by_unpacking), before):
        np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), b)
    assert dual_module.active_fast_path(operator.getitem).general is not None


def test_rows_and_one_direction_of_one_tag_do_not_mix():
    from dualad.core.errors import ShapeError

    tag = Tag()
    a = Dual(np.array([1.0, 2.0]), np.eye(2), tag)[0]
    one = Dual._scalar(np.float64(3.0), np.float64(1.0), tag)  # k = 1, held as a number
    for x, y in [(a, one), (one, a)]:
        with pytest.raises(ShapeError, match="directions"):
            x * y
        with pytest.raises(ShapeError, match="directions"):
            x + y


def test_a_materialised_row_is_an_array_dual():
    a = Dual(np.array([1.0, 2.0]), np.eye(2))[1]
    p = a.partials
    p[0] = 5.0  # written in place: later arithmetic sees it
    np.testing.assert_array_equal((a * 2.0).partials, [10.0, 2.0])
    np.testing.assert_array_equal(np.sin(a).partials, np.cos(2.0) * np.array([5.0, 1.0]))


def test_iteration_sees_writes_made_during_the_loop_as_numpy_does():
    for _ in range(2):  # the first call refreshes the fast paths: both calls agree
        y = Dual(np.array([1.0, 2.0, 3.0]), np.eye(3))
        seen = []
        for i, a in enumerate(y):
            if i == 0:
                y[1] = a * 10.0
            seen.append((float(a.value), a.partials.tolist()))
        assert seen == [(1.0, [1.0, 0.0, 0.0]), (10.0, [10.0, 0.0, 0.0]),
                        (3.0, [0.0, 0.0, 1.0])]
    x = np.array([1.0, 2.0, 3.0])
    plain = []
    for i, a in enumerate(x):
        if i == 0:
            x[1] = a * 10.0
        plain.append(float(a))
    assert plain == [v for v, _ in seen]
