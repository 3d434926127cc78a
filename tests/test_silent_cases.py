"""No silent wrong numbers: each case that once gave a wrong derivative without a word is
now right (checked in both modes against central finite differences) or raises a clear
error."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

MODES = ("forward", "reverse")


def check(f, x, atol=1e-6, rtol=1e-5):
    """The Jacobian of ``f`` at ``x`` in both modes equals central differences."""
    expected = numerical_jacobian(f, (x,), 0)
    for mode in MODES:
        got = ad.jacobian(f, mode=mode)(x)
        assert np.shape(got) == expected.shape, mode
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg=mode)


X = np.array([0.3, -1.2, 2.1, 0.7])
M = np.array([[0.3, -1.2, 2.1], [0.7, 1.1, -0.4]])


# -- foreign array types -------------------------------------------------------------------


@pytest.mark.parametrize("order", ["traced_first", "foreign_first"])
def test_xarray_dataarray_times_traced(order):
    xr = pytest.importorskip("xarray")
    da = xr.DataArray(np.array([2.0, 3.0, -1.0, 0.5]), dims=("i",))
    if order == "traced_first":
        check(lambda x: x * da, X)
        check(lambda x: np.sin(x) + da, X)
    else:
        check(lambda x: da * x, X)
        check(lambda x: da - np.sin(x), X)
    g = ad.grad(lambda x: np.sum(x * da))(X)
    np.testing.assert_allclose(g, da.values)


@pytest.mark.parametrize("order", ["traced_first", "foreign_first"])
def test_pandas_series_and_frame_with_traced(order):
    pd = pytest.importorskip("pandas")
    s = pd.Series([2.0, 3.0, -1.0, 0.5])
    df = pd.DataFrame(M * 2.0)
    if order == "traced_first":
        check(lambda x: x * s, X)
        check(lambda m: m * df + m ** 2, M)
    else:
        check(lambda x: s * x, X)
        check(lambda m: df * m, M)


def test_foreign_object_numpy_cannot_convert_is_a_clear_error():
    class Opaque:
        __array_priority__ = 10.0

        def __array__(self, dtype=None, copy=None):
            raise TypeError("no conversion")

    for mode in MODES:
        with pytest.raises(TypeError, match="Opaque together with traced values"):
            ad.jacobian(lambda x: x * Opaque(), mode=mode)(X)


# -- object arrays of traced values ----------------------------------------------------------


def test_object_array_of_traced_values_combined_with_traced():
    check(lambda x: np.array([x[0], x[1], x[2], x[3]]) * x, X)
    check(lambda x: x * np.array([x[1], x[0], x[3], x[2]]), X)
    check(lambda x: np.concatenate([np.array([x[0] ** 2, x[1]]), x[2:]]) * x, X)


# -- None derivatives ------------------------------------------------------------------------


def test_define_rule_none_derivative_raises_when_differentiated():
    def scaled_sin(x, s):
        return np.sin(x) * s

    f = ad.define_rule(scaled_sin, args=("x", "s"), derivatives=(None, "sin(x)"))
    for mode in MODES:
        with pytest.raises(TypeError, match=r"declares no derivative \(None\) .* 'x'"):
            ad.jacobian(lambda x: f(x, 2.0), mode=mode)(X)
    with pytest.raises(TypeError, match="declares no derivative"):
        ad.grad(lambda x: f(x, 2.0))(0.5)
    with pytest.raises(TypeError, match="declares no derivative"):
        ad.derivative(lambda x: f(x, 2.0))(0.5)
    check(lambda s: f(0.5, s), np.array([2.0, -1.0]))  # the other argument still works


def test_user_gradient_method_returning_none_for_a_differentiated_argument_raises():
    def times(x, s):
        return x * s

    times = ad.primitive(times)

    @ad.gradient.dispatch
    def gradient(op: ad.Method[times], grad, output, x, s):
        return (None, grad * x)

    with pytest.raises(ad.DualadError, match="returned None for argument 0"):
        ad.grad(lambda x: times(x, 3.0))(2.0)
    assert float(ad.grad(lambda s: times(2.0, s))(3.0)) == 2.0


# -- outputs grad cannot differentiate, size-1 outputs -------------------------------------


@pytest.mark.parametrize("f, what", [
    (lambda x: np.allclose(x, 1.0), "bool"),
    (lambda x: np.sum(x > 0), "integer"),
    (lambda x: np.sum(x).astype(int), "integer"),
    (lambda x: np.sum(x) * 1j, "complex"),
])
def test_grad_refuses_non_float_outputs(f, what):
    with pytest.raises(TypeError, match=what):
        ad.grad(f)(X)
    with pytest.raises(TypeError, match=what):
        ad.value_and_grad(f)(X)


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_grad_accepts_size_one_outputs(shape):
    def f(x):
        return np.reshape(np.sum(np.sin(x) * x), shape)

    expected = numerical_jacobian(lambda x: np.sum(f(x)), (X,), 0)
    np.testing.assert_allclose(ad.grad(f)(X), expected, atol=1e-6)
    value, g = ad.value_and_grad(f)(X)
    assert np.shape(value) == shape
    np.testing.assert_allclose(g, expected, atol=1e-6)
    with pytest.raises(ValueError, match="scalar output"):
        ad.grad(lambda x: x[:2])(X)


# -- sqrt'(0) = inf in both modes ------------------------------------------------------------


@pytest.mark.parametrize("f", [np.sqrt, lambda x: x ** 0.5, lambda x: np.power(x, 0.5)],
                         ids=["sqrt", "pow_operator", "power"])
def test_sqrt_derivative_at_zero_is_inf_in_every_path(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        results = [
            ad.grad(f)(0.0), ad.derivative(f)(0.0),
            ad.jacobian(f, mode="forward")(0.0), ad.jacobian(f, mode="reverse")(0.0),
            np.diagonal(ad.jacobian(f, mode="forward")(np.zeros(3))),
            np.diagonal(ad.jacobian(f, mode="reverse")(np.zeros(3))),
            ad.jvp(f, (0.0,), (1.0,))[1], ad.vjp(f, 0.0)[1](1.0)[0],
        ]
    for r in results:
        assert np.all(np.isposinf(r)), results


# -- ufunc methods ----------------------------------------------------------------------------


def _at(ufunc, shape, index, start=0.0, with_values=True, value=lambda x: x):
    def f(x):
        buf = np.zeros_like(x, shape=shape) + start if start else np.zeros_like(x, shape=shape)
        if start:
            buf = np.copy(buf)
        if with_values:
            ufunc.at(buf, index, value(x))
        else:
            ufunc.at(buf, index)
        return buf
    return f


@pytest.mark.parametrize("f", [
    _at(np.add, (3,), np.array([0, 1, 1, 2])),
    _at(np.subtract, (3,), [2, 2, 0, 1], start=1.5),
    _at(np.multiply, (3,), [0, 1, 1, 1], start=1.5),
    _at(np.maximum, (2,), [0, 1, 0, 1]),
    _at(np.power, (2,), [0, 0, 1, 1], start=1.5),
    _at(np.add, (2, 3), (np.array([0, 0, 1, 1]), np.array([1, 1, 2, 0]))),
    _at(np.add, (5,), slice(1, 5), value=lambda x: x ** 2),
    _at(np.add, (3,), np.array([1, 1, 1, 1]), value=lambda x: x[0] * x),
], ids=["add", "subtract", "multiply", "maximum", "power", "add_2d", "slice", "scalar_repeat"])
def test_ufunc_at(f):
    check(f, X)


def test_ufunc_at_unary_and_into_a_copy():
    def f(x):
        buf = np.copy(x)
        np.negative.at(buf, [0, 0, 3])
        np.add.at(buf, [1, 2], x[:2] * x[2:])
        return buf

    check(f, X)


def test_ufunc_at_into_a_plain_array_raises():
    def f(x):
        buf = np.zeros(3)
        np.add.at(buf, [0, 1, 1, 2], x)
        return buf

    for mode in MODES:
        with pytest.raises(TypeError, match=r"np.add.at\(a, indices, b\) updates the plain"):
            ad.jacobian(f, mode=mode)(X)


@pytest.mark.parametrize("f", [
    lambda m: np.logaddexp.reduce(m, axis=1),
    lambda m: np.logaddexp.reduce(m, axis=None, keepdims=True),
    lambda m: np.hypot.reduce(m, axis=0),
    lambda m: np.multiply.reduce(m, axis=1, initial=2.0),
    lambda m: np.add.reduce(m, axis=(0, 1)),
    lambda m: np.logaddexp.accumulate(m, axis=1),
    lambda m: np.subtract.accumulate(m, axis=0),
    lambda m: np.multiply.accumulate(m, axis=1),
    lambda m: np.add.reduceat(m, [0, 2, 1], axis=1),
    lambda m: np.multiply.reduceat(m, [0, 2], axis=1),
    lambda m: np.logaddexp.reduceat(m.ravel(), [0, 3, 3, 5]),
    lambda m: np.multiply.outer(m[0], m[1] ** 2),
    lambda m: np.subtract.outer(m, m[0]),
    lambda m: np.power.outer(np.abs(m[0]) + 1.0, m[1]),
    lambda m: np.logaddexp.outer(m[0], m[1]),
], ids=["reduce_lae", "reduce_all_keepdims", "reduce_hypot", "reduce_initial",
        "reduce_axes", "accumulate_lae", "accumulate_sub", "accumulate_mul", "reduceat_add",
        "reduceat_mul", "reduceat_lae", "outer_mul", "outer_sub_2d", "outer_pow", "outer_lae"])
def test_ufunc_reduce_accumulate_reduceat_outer(f):
    check(f, M)


@pytest.mark.parametrize("f", [
    lambda x: np.prod(x, initial=2.0),
    lambda x: np.nanprod(x, initial=-3.0),
    lambda m: np.prod(m, axis=1, initial=2.0, where=np.array([True, False, True])),
])
def test_products_with_initial(f):
    check(f, M)


# -- views and writes follow numpy's aliasing -------------------------------------------------


def _view_then_write(x):
    buf = np.zeros_like(x)
    view = buf[1:]
    buf[2] = x[0] * 3.0
    return view * 1.0


def _write_through_view(x):
    buf = np.zeros_like(x)
    view = buf[1:]
    view[0] = x[1] ** 2
    return buf * 1.0


def _transpose_then_write(x):
    buf = np.zeros_like(x).reshape(2, 2)
    t = buf.T
    buf[0, 1] = x[0] * 2.0
    return t * 1.0


def _write_through_transpose(x):
    buf = np.zeros_like(x).reshape(2, 2)
    t = buf.T
    t[0, 1] = x[0] * 2.0
    return buf * 1.0


def _reshape_view(x):
    buf = np.copy(x).reshape(2, 2)
    flat = buf.reshape(-1)
    buf[1] = x[2:] * x[:2]
    return flat * 1.0


def _view_of_view(x):
    buf = np.copy(x)
    v = buf[::2]
    w = v[1:]
    w[0] = x[3]
    return buf * v[0]


def _in_place_operator_on_view(x):
    buf = np.ones_like(x)
    v = buf[:2]
    v += x[2:]
    v *= x[:2]
    return buf


def _row_view(x):
    buf = np.zeros_like(x).reshape(2, 2)
    row = buf[0]
    buf[0, 1] = x[0]
    tail = row[1:]
    buf[0, 1] = buf[0, 1] * x[3]
    return tail + row[0]


@pytest.mark.parametrize("f", [_view_then_write, _write_through_view, _transpose_then_write,
                               _write_through_transpose, _reshape_view, _view_of_view,
                               _in_place_operator_on_view, _row_view])
def test_views_follow_writes(f):
    check(f, X)


# -- the bug list -----------------------------------------------------------------------------


def test_append_of_a_list_and_a_traced_value():
    check(lambda b: np.append([1.0, 2.0], b), X)
    check(lambda b: np.append(b, [1.0, 2.0]), X)
    check(lambda b: np.append(b[:2], b[1:] ** 2), X)


@pytest.mark.parametrize("stack", ["hstack", "vstack", "column_stack", "row_stack"])
def test_stacks_of_0d_traced_values(stack):
    if not hasattr(np, stack):
        pytest.skip(f"np.{stack} is not in this numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check(lambda x: getattr(np, stack)([x[0], x[1] * x[2], x[3]]), X)
        check(lambda x: getattr(np, stack)((x[0], 2.0)), X)


@pytest.mark.parametrize("f", [
    lambda m: np.moveaxis(m, 0, -1),
    lambda m: np.moveaxis(m[None], [0, 1], [2, 0]),
    lambda m: np.moveaxis(m, source=0, destination=1),
    lambda m: np.swapaxes(m, 0, 1),
    lambda m: np.swapaxes(m, axis1=-1, axis2=-2),
    lambda m: m.swapaxes(0, 1),
    lambda m: np.rollaxis(m, 1),
    lambda m: np.rollaxis(m[None], 2, 1),
    lambda m: np.rollaxis(m, axis=1, start=0),
    lambda m: np.rollaxis(m, -1, 2),
], ids=["moveaxis", "moveaxis_lists", "moveaxis_kw", "swapaxes", "swapaxes_kw",
        "swapaxes_method", "rollaxis", "rollaxis_start", "rollaxis_kw", "rollaxis_end"])
def test_axis_moves(f):
    check(f, M)


@pytest.mark.parametrize("name", ["mean", "std", "var", "average"])
def test_reductions_of_a_list_of_traced_scalars(name):
    func = getattr(np, name)
    for mode in MODES:
        with pytest.raises(TypeError, match=r"np.stack\(\[a, b\]\)"):
            ad.jacobian(lambda x: func([x[0], x[1] * 2.0, x[2]]), mode=mode)(X)
    check(lambda x: func(np.stack([x[0], x[1] * 2.0, x[2]])), X)


def test_float32_arguments_get_float32_derivatives():
    x32 = X.astype(np.float32)

    def f(x):
        return np.sin(x) * x

    expected = numerical_jacobian(f, (X,), 0)
    for mode in MODES:
        j = ad.jacobian(f, mode=mode)(x32)
        assert j.dtype == np.float32, mode
        np.testing.assert_allclose(j, expected, rtol=1e-5, atol=1e-6)
    g = ad.grad(lambda x: np.sum(f(x)))(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.diagonal(expected), rtol=1e-5)
    g64, g32 = ad.grad(lambda a, b: np.sum(a * b), argnums=(0, 1))(X, x32)
    assert g64.dtype == np.float64 and g32.dtype == np.float32


@pytest.mark.parametrize("f", [
    lambda x: x[0].astype(np.float32) * 3.1,
    lambda x: np.sin(x[1].astype(np.float32)),
    lambda x: np.sum(x.astype(np.float32)) * 2.0,
    lambda x: x[0].astype(np.float32) * np.float32(3.1) + 1.0,
    lambda x: x.astype(np.float32) * 3.1,
], ids=["item", "sin", "sum", "float32_constant", "array"])
def test_float32_results_keep_numpys_dtype_and_values(f):
    """A float32 result (0-d ones included: numpy's scalars once came back float64) has
    numpy's dtype and values from jvp and vjp, and jvp's tangent is float32 too."""
    expected = f(X)
    assert np.asarray(expected).dtype == np.float32
    value, tangent = ad.jvp(f, (X,), (np.ones(4),))
    assert np.asarray(value).dtype == np.float32 and np.asarray(tangent).dtype == np.float32
    np.testing.assert_array_equal(value, expected)
    value, pullback = ad.vjp(f, X)
    assert np.asarray(value).dtype == np.float32
    np.testing.assert_array_equal(value, expected)
    jac = ad.jacobian(f, mode="reverse")(X)
    np.testing.assert_allclose(jac, ad.jacobian(f, mode="forward")(X), rtol=1e-6)
    np.testing.assert_allclose(np.reshape(tangent, -1), jac @ np.ones(4), rtol=1e-5)


def test_astype_int_is_a_constant_in_both_modes():
    check(lambda x: x * x.astype(int), X)
    check(lambda x: x * x.astype(np.int32) + x.astype(bool), X)


@pytest.mark.parametrize("f", [
    lambda m: m.std(), lambda m: m.var(axis=0), lambda m: np.ptp(m, axis=1),
    lambda m: m.cumsum(axis=1), lambda m: m.cumprod(),
    lambda m: m.diagonal(), lambda m: m.repeat(2, axis=0), lambda m: m.round(1) + m,
    lambda m: m.take([0, 2], axis=1), lambda m: m.trace(),
    lambda m: m.compress([True, False, True], axis=1), lambda m: m.conj() * m,
    lambda m: m.view() * 2.0, lambda m: m.real * m, lambda m: m.flat[3] * m,
    lambda m: m.mT, lambda m: m[0][m[0].argsort()], lambda m: m.max(axis=0),
], ids=["std", "var", "np_ptp", "cumsum", "cumprod", "diagonal", "repeat", "round",
        "take", "trace", "compress", "conj", "view", "real", "flat", "mT",
        "argsort", "max"])
def test_ndarray_methods(f):
    check(f, M)


def test_ptp_method_on_traced_values():
    # ndarray.ptp left numpy 2; traced values keep it, as np.ptp
    for mode in MODES:
        np.testing.assert_allclose(
            ad.jacobian(lambda m: m.ptp(axis=1), mode=mode)(M),
            numerical_jacobian(lambda m: np.ptp(m, axis=1), (M,), 0), atol=1e-6)


def test_in_place_ndarray_methods_on_writable_arrays():
    def sort_rows(m):
        y = np.copy(m)
        y.sort(axis=1)
        return y

    def partition(m):
        y = np.copy(m)
        y.partition(1, axis=1)
        return y

    def fill(m):
        y = np.zeros_like(m)
        y.fill(m[0, 0])
        return y * m

    for f in (sort_rows, partition, fill):
        check(f, M)
    with pytest.raises(TypeError, match="writes in place"):
        ad.grad(lambda m: np.sum(m.sort()))(M)
    with pytest.raises(TypeError, match="drop its derivative"):
        ad.grad(lambda m: m.tobytes())(M)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", 1, -1, np.inf])
def test_linalg_cond(p):
    check(lambda m: np.linalg.cond(m[:, :2] + np.eye(2) * 2.0, p), M, atol=1e-5)


@pytest.mark.parametrize("a", [
    np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 2.0]),  # rank 1
    np.array([[1.0, 2.0], [2.0, 4.0]]),  # rank 1
    np.diag([2.0, 0.0, 3.0]),  # rank 2
    np.zeros((2, 2)),
    np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.5], [0.0, 2.0]]]),  # a stack
], ids=["rank1_3x3", "rank1_2x2", "rank2_3x3", "zeros", "stack"])
def test_det_of_singular_matrices(a):
    check(np.linalg.det, a)


def test_round_with_decimals_has_derivative_zero():
    check(lambda x: np.round(x, 1) * x, X)
    check(lambda x: np.around(x, decimals=2) + x, X)


def test_jvp_of_a_python_loop_simulation_gives_float_arrays():
    def simulate(p):
        y = np.array([1.0, 0.0])
        trajectory = [y]
        for _ in range(4):
            y = np.array([y[0] + 0.1 * y[1], y[1] - 0.1 * p * y[0]])
            trajectory.append(y)
        return np.array(trajectory)

    value, tangent = ad.jvp(simulate, (0.5,), (1.0,))
    assert value.dtype == np.float64 and tangent.dtype == np.float64
    np.testing.assert_allclose(tangent, numerical_jacobian(simulate, (0.5,), 0), atol=1e-6)
    check(simulate, np.float64(0.5))


def test_every_ndarray_method_exists_on_traced_values():
    # raw memory (ctypes, data) has no derivative: those stay AttributeErrors
    names = [n for n in dir(np.ndarray) if not n.startswith("_") and n not in ("ctypes", "data")]
    seen = {}

    def f(x):
        seen[type(x).__name__] = [n for n in names if not hasattr(type(x), n)]
        return x * 1.0

    ad.jacobian(f, mode="forward")(X)
    ad.jacobian(f, mode="reverse")(X)
    assert seen == {"Dual": [], "Variable": []}


@pytest.mark.parametrize("f", [
    lambda x: np.bincount(np.array([0, 2, 2, 1]), weights=x * x, minlength=4),
    lambda x: np.bincount(np.array([0, 2, 2, 1]), x * x),
    lambda x: np.bincount(np.array([3, 0, 0, 1]), x, 5) * x[0],
], ids=["keyword_weights", "positional_weights", "minlength"])
def test_bincount_with_traced_weights(f):
    check(f, X)


def test_add_at_with_many_repeats_is_one_scatter():
    index = np.arange(400) % 3

    def deposit(x):
        grid = np.zeros_like(x, shape=(3,))
        np.add.at(grid, index, np.tile(x, 100) ** 2)
        return grid

    check(deposit, X)


def _view_of_computed_then_in_place(x):
    y = x * 1.0
    view = y[1:]
    y += x * x
    return view * 1.0


def _alias_of_computed_then_in_place(x):
    y = x * 2.0
    alias = y
    y += 1.0
    return alias * x


@pytest.mark.parametrize("f", [_view_of_computed_then_in_place,
                               _alias_of_computed_then_in_place])
def test_in_place_operator_on_a_computed_value_with_aliases(f):
    check(f, X)


def test_in_place_operator_with_aliases_on_a_writable_copy():
    # the same programs with the value allocated writable (np.copy) follow numpy
    def view(x):
        y = np.copy(x * 1.0)
        v = y[1:]
        y += x * x
        return v * 1.0

    def alias(x):
        y = np.copy(x * 2.0)
        a = y
        y += 1.0
        return a * x

    check(view, X)
    check(alias, X)
