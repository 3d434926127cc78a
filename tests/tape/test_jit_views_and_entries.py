"""Two shortcuts of the compiler, checked against what they replace: results of matrix shape
handed back as views lowered inline (dualad/tape/reshaped.py) instead of Numba's reshape,
and reads of one entry (``y[3]``) lowered without passes over arrays. Generated sources
and lowered instructions inspected; derivatives against eager mode, forward mode and
central differences, on several points and shapes."""

from __future__ import annotations

import gc
import inspect
from types import SimpleNamespace

import numba
import numpy as np
import pytest

import dualad as ad
import dualad.tape.lowering as lowering
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import record
from dualad.tape.lowering import Gather, lower
from dualad.tape.numba_backend import NumbaProgram
from dualad.tape.reshaped import reshaped

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


# the view ---------------------------------------------------------------------------------
@numba.njit(cache=False)
def _views(a):
    b = a * 2.0
    return reshaped(b, (2, 3)), reshaped(b, 6), reshaped(b, (1, 3, 2)), reshaped(b, (6, 1))


def test_the_view_has_the_shape_the_strides_and_the_data():
    a = np.arange(6.0)
    for got, shape in zip(_views(a), [(2, 3), (6,), (1, 3, 2), (6, 1)]):
        want = (2.0 * a).reshape(shape)
        assert got.shape == shape and got.strides == want.strides
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


@numba.njit(cache=False)
def _written_through(a):
    reshaped(a, (3, 2))[1, 0] = -1.0  # a view: the write reaches a
    return a


def test_the_view_shares_its_data_and_keeps_it_alive():
    a = _written_through(np.arange(6.0))
    assert a.tolist() == [0.0, 1.0, -1.0, 3.0, 4.0, 5.0]
    first = _views(np.arange(6.0))[0]  # the only reference to the product
    others = [_views(np.full(6, 9.0)) for _ in range(3)]  # memory freed and reused
    del others
    gc.collect()
    assert first.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def test_the_view_of_a_read_only_array_is_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    view = numba.njit(lambda a: reshaped(a, (2, 2)))(a)
    assert not view.flags.writeable
    assert view.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_an_array_that_is_not_c_contiguous_is_refused_at_compile_time():
    with pytest.raises(numba.core.errors.TypingError):
        numba.njit(lambda a: reshaped(a[::2], (3,)))(np.arange(6.0))
    with pytest.raises(numba.core.errors.TypingError):
        numba.njit(lambda a: reshaped(a, 2.5))(np.arange(6.0))


def test_called_from_python_it_is_numpy_reshape():
    a = np.arange(6.0)
    assert reshaped(a, (3, 2)).shape == (3, 2)
    assert np.shares_memory(reshaped(a, (3, 2)), a)


def mlp_like(w, b, x):
    h = np.tanh(x @ w + b)
    return np.sum(h * h) + 0.5 * np.sum(w * w)


@pytest.mark.parametrize("shape", [(3, 4), (2, 5), (1, 3)])
def test_gradients_of_matrices_are_handed_back_as_views(shape):
    rng = np.random.default_rng(sum(shape))
    w = rng.standard_normal(shape)
    b = rng.standard_normal(shape[1])
    x = rng.standard_normal((4, shape[0]))
    compiled = ad.jit(ad.grad(mlp_like, argnums=(0, 1)), fallback="error")
    for scale in (1.0, -0.5, 2.0):
        gw, gb = compiled(scale * w, b, x)
        ew, eb = ad.grad(mlp_like, argnums=(0, 1))(scale * w, b, x)
        assert gw.shape == shape and gb.shape == b.shape
        np.testing.assert_allclose(gw, ew, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gb, eb, rtol=1e-12, atol=1e-14)
        fd = numerical_jacobian(lambda w: mlp_like(w, b, x), (scale * w,), 0)
        np.testing.assert_allclose(gw, fd.reshape(shape), atol=1e-6)
    args = [w, b, x]
    code = NumbaProgram(lower(record(mlp_like, *args).program, args))
    kernel = code.gradient((0, 1), value=False)
    source = inspect.getsource(getattr(kernel, "func", kernel).py_func)
    assert "_reshaped(" in source and ".reshape(" not in source  # the matrix: a view


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_jacobian_with_shapes_is_a_view_and_agrees(n):
    f = lambda x: np.outer(np.sin(x), x[:2])  # noqa: E731 - (n, 2) from (n,)
    x = np.linspace(0.2, 1.1, n)
    code = NumbaProgram(lower(record(f, x).program, [x]))
    kernel = code.jacobian((0,))
    source = inspect.getsource(inspect.getmodule(getattr(kernel, "func", kernel)))
    assert "_reshaped(" in source and ".reshape(" not in source
    compiled = ad.jit(ad.jacobian(f), fallback="error")
    for point in (x, -x, 0.5 * x):
        got = compiled(point)
        assert got.shape == (n, 2, n)
        np.testing.assert_allclose(got, ad.jacobian(f)(point), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got, ad.jacobian(f, mode="reverse")(point), rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_allclose(got, numerical_jacobian(f, (point,), 0), atol=1e-6)


def test_a_batch_of_dense_jacobians_written_at_fixed_entries():
    def rhs(y):
        dy = np.zeros(4)
        dy[0] = -y[0] * y[1]
        dy[1] = y[0] * y[1] - y[1]
        dy[2] = y[1] - y[2] * y[3]
        dy[3] = np.sin(y[2])
        return dy.reshape(2, 2)  # a Jacobian of shape (2, 2, 4)

    compiled = ad.jit(ad.jacobian(rhs), fallback="error")
    ys = np.linspace(0.1, 1.0, 12).reshape(3, 4)
    stacked = compiled.batch(ys)
    assert stacked.shape == (3, 2, 2, 4)
    for y, got in zip(ys, stacked):
        np.testing.assert_allclose(got, ad.jacobian(rhs)(y), rtol=1e-13)
        np.testing.assert_allclose(got, compiled(y), rtol=1e-15)
        np.testing.assert_allclose(got, numerical_jacobian(rhs, (y,), 0), atol=1e-6)


# one entry read -------------------------------------------------------------------------
def gathers_of(f, *args):
    args = [np.asarray(a, dtype=float) for a in args]
    low = lower(record(f, *args).program, args)
    return [ins for ins in low.instructions if isinstance(ins, Gather)], low


def test_one_entry_lowers_to_one_source_entry():
    x = np.array([0.5, -1.0, 2.0, 4.0])
    found, low = gathers_of(lambda x: x[2] * x[-1] + np.sin(x[0]), x)
    assert len(found) == 3
    reads = sorted(int(src[0][2][0]) for src in (g.sources for g in found))
    assert reads == [0, 2, 3]
    for g in found:
        assert g.constant.tolist() == [0.0] and len(g.sources) == 1
        assert g.sources[0][1].tolist() == [0] and g.sources[0][1].dtype == np.intp
        assert g.sources[0][2].dtype == np.intp


def test_the_one_entry_instruction_directly():
    """The probe's number: 0 is a constant of the output, others count the owners'
    entries from 1 (here slot 4 owns 1..3, slot 7 owns 4..5)."""
    slots = [None] * 8
    slots[4], slots[7] = np.array([1.0, np.nan, 3.0]), np.array([[5.0, 6.0]])
    sizes = [1] * 8
    sizes[4], sizes[7] = 3, 2
    owners = [(-1, 0), (4, 1), (7, 4)]
    e = SimpleNamespace(out=9, op="x[k]")  # what the instruction reads of the operation
    at = lowering._gather_one(e, 0.0, 2.5, owners, slots, sizes)
    assert at.constant.tolist() == [2.5] and at.sources == []
    at = lowering._gather_one(e, 5.0, 6.0, owners, slots, sizes)
    assert at.constant.tolist() == [0.0]
    (slot, positions, local), = at.sources
    assert slot == 7 and positions.tolist() == [0] and local.tolist() == [1]
    at = lowering._gather_one(e, 2.0, np.nan, owners, slots, sizes)  # NaN is NaN
    assert at.sources[0][0] == 4 and at.sources[0][2].tolist() == [1]
    for k, value in ((2.5, 1.0), (np.nan, 1.0), (np.inf, 1.0), (3.0, 4.0), (2.0, 1.0)):
        with pytest.raises(lowering.LoweringError, match="does not move entries"):
            lowering._gather_one(e, k, value, owners, slots, sizes)


def test_one_entry_lowers_as_the_general_path_does(monkeypatch):
    """The same instructions with the shortcut and without it (the general path forced)."""
    def f(x, y):
        z = np.stack([x[1], 3.0 * y[0, 1], x[-1]])
        return z[0] * z[2] + np.cos(y[1, 0]) * z[1] + np.stack([x[0], 7.0])[1]

    x, y = np.array([0.3, np.nan, 1.5]), np.arange(6.0).reshape(2, 3)
    fast, _ = gathers_of(f, x, y)
    source = inspect.getsource(lowering._lower_gather).replace(
        "if index.size == 1 and out.size == 1:", "if False:")
    assert "if False:" in source  # the shortcut is what this test turns off
    namespace = dict(vars(lowering))
    exec(compile(source, "general", "exec"), namespace)  # noqa: S102 - the same function
    monkeypatch.setattr(lowering, "_lower_gather", namespace["_lower_gather"])
    slow, _ = gathers_of(f, x, y)
    assert len(fast) == len(slow) > 0
    for a, b in zip(fast, slow):
        assert a.out == b.out
        np.testing.assert_array_equal(a.constant, b.constant)
        assert a.constant.dtype == b.constant.dtype
        assert len(a.sources) == len(b.sources)
        for (sa, pa, ia), (sb, pb, ib) in zip(a.sources, b.sources):
            assert sa == sb and pa.dtype == pb.dtype and ia.dtype == ib.dtype
            np.testing.assert_array_equal(pa, pb)
            np.testing.assert_array_equal(ia, ib)


def stiff_like(t, y):
    dy = np.zeros(4)
    dy[0] = -0.04 * y[0] + 1e4 * y[1] * y[2]
    dy[1] = 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2
    dy[2] = 3e7 * y[1] ** 2 - np.exp(-y[3])
    dy[3] = dy[0] - y[3]  # an entry read back
    return dy


@pytest.mark.parametrize("point", [np.array([1.0, 1e-4, 2e-2, 0.3]), np.zeros(4),
                                   np.array([-0.5, 2.0, 1.0, -1.0])])
def test_entry_by_entry_right_hand_sides_agree(point):
    jac = ad.jit(ad.ode_jacobian(stiff_like), fallback="error")(0.0, point)
    f = lambda y: stiff_like(0.0, y)  # noqa: E731
    np.testing.assert_allclose(jac, ad.jacobian(f)(point), rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(jac, ad.jacobian(f, mode="reverse")(point), rtol=1e-13,
                               atol=1e-12)
    np.testing.assert_allclose(jac, numerical_jacobian(f, (point,), 0), rtol=1e-6,
                               atol=1e-3)
    g = ad.jit(ad.grad(lambda y: np.sum(stiff_like(0.0, y) ** 2)), fallback="error")(point)
    np.testing.assert_allclose(g, 2.0 * jac.T @ f(point), rtol=1e-12, atol=1e-9)


def test_a_scalar_input_read_as_its_only_entry():
    f = lambda x: np.sin(x[()]) * x[()] + x.reshape(1)[0]  # noqa: E731
    for v in (0.0, 0.7, -2.0):
        x = np.array(v)
        got = ad.jit(ad.grad(f), fallback="error")(x)
        np.testing.assert_allclose(got, np.cos(v) * v + np.sin(v) + 1.0, rtol=1e-14)
        np.testing.assert_allclose(got, ad.grad(f)(x), rtol=1e-14)
