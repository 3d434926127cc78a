"""ad.jit returns what eager mode returns: no silently different number from compiled code.

Each test calls a compiled transform and the same transform eagerly (``ad.grad``,
``ad.jacobian``, ... called directly) at points and with argument kinds a recording may not
have seen (strided, read-only, float32, complex, empty, NaN, ties, ...), and compares the
results (values, dtypes, types and shapes), or checks that a refusal is the same. Where a
derivative is finite it is also checked against central differences.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualad as ad
import dualad.tape.numba_backend as backend
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.jit import JitFallbackWarning
from dualad.tape.tape import TapeRetraceWarning

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def quiet(fn, *args):
    """``fn(*args)``, its fallback and re-recording warnings silenced (the tests compare
    results; which path served them is not the point here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitFallbackWarning)
        warnings.simplefilter("ignore", TapeRetraceWarning)
        return fn(*args)


def assert_same(got, want, rtol=1e-12):
    """Equal up to reassociation, with the same types, dtypes and shapes (trees too)."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert_same(g, w, rtol)
        return
    if isinstance(want, dict):
        assert type(got) is dict and got.keys() == want.keys(), (got, want)
        for k in want:
            assert_same(got[k], want[k], rtol)
        return
    if hasattr(want, "toarray"):
        assert type(got) is type(want)
        assert_same(got.toarray(), want.toarray(), rtol)
        return
    assert type(got) is type(want), (type(got), type(want), got, want)
    if want is None or isinstance(want, (str, bytes)):
        assert got == want
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14, equal_nan=True)


def both(transform, *args):
    """``(ad.jit(transform)(*args), transform(*args))``."""
    return quiet(ad.jit(transform), *args), transform(*args)


def fd_gradient(f, x):
    return numerical_jacobian(f, (x,), 0).reshape(np.shape(x))


# -- arguments unlike the recorded ones ------------------------------------------------------

def objective(x):
    return np.sum(np.sin(x) * x ** 2 + np.roll(x, 1) * x)


def test_strided_readonly_reshaped_inputs():
    g = ad.jit(ad.grad(objective))
    base = np.linspace(-1.0, 2.0, 12)
    x = base[::2].copy()
    readonly = x.copy()
    readonly.flags.writeable = False
    for arg in [x, base[::2], base[::-2], readonly, x.reshape(2, 3),
                np.asfortranarray(x.reshape(2, 3)), x.reshape(3, 2).T, x]:
        got, want = quiet(g, arg), ad.grad(objective)(arg)
        assert_same(got, want)
        np.testing.assert_allclose(got, fd_gradient(objective, np.asarray(arg)), atol=1e-6)


LAYOUTS = {
    "contiguous": lambda a: a,
    "strided": lambda a: np.repeat(a, 2)[::2],
    "reversed": lambda a: a[::-1].copy()[::-1],
    "readonly": lambda a: _readonly(a),
    "2x3": lambda a: a.reshape(2, 3),
    "2x3 Fortran": lambda a: np.asfortranarray(a.reshape(2, 3)),
    "3x2 transposed": lambda a: a.reshape(2, 3).T,
}
DTYPES = [np.float64, np.float32, np.int64, np.bool_]
JITTED = {name: (ad.jit(t), t) for name, t in [
    ("grad", ad.grad(objective)), ("value_and_grad", ad.value_and_grad(objective)),
    ("jacobian", ad.jacobian(lambda x: np.sin(x) * x.ravel()[0]))]}


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from([0.0, -0.0, 0.5, -1.25, 2.0, 1e-300, 3.5e7]) |
                st.floats(-10.0, 10.0), min_size=6, max_size=6),
       st.sampled_from(sorted(LAYOUTS)), st.sampled_from(DTYPES),
       st.sampled_from(sorted(JITTED)))
def test_argument_forms_against_eager(values, layout, dtype, transform):
    """Any layout and dtype of the argument, in any order of calls, gives eager mode's
    result (the compiled code's own type, or converted first)."""
    x = LAYOUTS[layout](np.asarray(values).astype(dtype))
    jitted, eager = JITTED[transform]
    assert_same(quiet(jitted, x), eager(x), rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_integer_and_bool_inputs_promote_as_eager():
    for arg in [np.arange(6), np.arange(6) > 2, 3, True]:
        assert_same(*both(ad.grad(objective), arg))
    assert_same(*both(ad.grad(lambda s: np.sin(s) * s), 2))


def test_complex_input_is_not_cast_to_real():
    """A complex argument is not silently cast to float64 (its imaginary part dropped)."""
    f = ad.grad(lambda x: np.sum(np.sin(x) * x))
    g = ad.jit(f)
    g(np.linspace(0.0, 1.0, 4))
    with pytest.raises(TypeError, match="complex"):
        f(np.linspace(0.0, 1.0, 4) + 1j)
    with pytest.raises(TypeError, match="complex"):
        quiet(g, np.linspace(0.0, 1.0, 4) + 1j)
    v = ad.jit(lambda x: np.abs(np.sin(x)) ** 2)
    z = np.array([0.5 + 0.25j, -1.0 + 2.0j])
    assert_same(quiet(v, z.real), np.abs(np.sin(z.real)) ** 2)
    assert_same(quiet(v, z), np.abs(np.sin(z)) ** 2)
    assert_same(*both(ad.grad(lambda x: np.sum(np.real(x * np.conj(x)))), z))


@pytest.mark.parametrize("transform", [
    ad.grad, ad.value_and_grad, ad.hessian,
    lambda f: ad.jacobian(f, mode="forward"), lambda f: ad.jacobian(f, mode="reverse")],
    ids=["grad", "value_and_grad", "hessian", "jacobian-forward", "jacobian-reverse"])
def test_float32_derivatives_are_float32_as_eager(transform):
    x64 = np.array([0.3, -1.2, 2.0])
    x32 = x64.astype(np.float32)
    g = ad.jit(transform(objective))
    for arg in [x64, x32, x64, np.float32(0.5) * x32]:
        assert_same(quiet(g, arg), transform(objective)(arg), rtol=1e-6)
    s = ad.jit(transform(lambda s: np.sin(s) * s))
    for arg in [0.5, np.float32(0.5), np.float64(0.25)]:
        assert_same(quiet(s, arg), transform(lambda s: np.sin(s) * s)(arg), rtol=1e-6)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_hessian_blocks_in_eager_dtypes(argnums, engine):
    """ad.jit(ad.hessian(f)) hands the Hessian back in eager mode's dtypes (it was float64
    for float32 arguments): block [i][j] in argument argnums[i]'s dtype; compiled and
    interpreted, central differences agree."""
    def f(a, b):
        return np.sum(np.sin(a) * b ** 2) + np.sum(a) ** 2

    eager = ad.hessian(f, argnums=argnums)
    jitted = ad.jit(eager)
    a64, b64 = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.25, -0.5])
    for a, b in [(a64, b64), (a64.astype(np.float32), b64), (a64, b64.astype(np.float32)),
                 (a64.astype(np.float32), b64.astype(np.float32)), (a64, b64)]:
        assert_same(quiet(jitted, a, b), eager(a, b), rtol=1e-6)
    assert jitted.wait(timeout=600)
    H = quiet(jitted, a64, b64)
    for i, n in enumerate([argnums] if isinstance(argnums, int) else argnums):
        for j, m in enumerate([argnums] if isinstance(argnums, int) else argnums):
            block = H if isinstance(argnums, int) else H[i][j]
            fd = numerical_jacobian(ad.grad(f, argnums=n), (a64, b64), m)
            np.testing.assert_allclose(np.reshape(block, fd.shape), fd, atol=1e-5)
    s = ad.jit(ad.hessian(lambda s: np.sin(s) * s ** 3))
    for x in [np.float32(0.5), np.float64(0.5), 0.5, np.float32(-1.5), np.array(0.5, np.float32)]:
        assert_same(quiet(s, x), ad.hessian(lambda s: np.sin(s) * s ** 3)(x), rtol=1e-6)


def test_empty_and_zero_d_inputs():
    for arg in [np.zeros(0), np.zeros((0, 3)), np.array(0.7), np.float64(0.7), 0.7,
                np.array([0.7])]:
        assert_same(*both(ad.grad(objective), arg))
        assert_same(*both(ad.value_and_grad(objective), arg))
        assert_same(*both(lambda x: np.sin(x) * x, arg))
    assert_same(*both(ad.jacobian(lambda x: np.sin(x) * x), np.zeros(0)))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_float32_derivatives_tuple_argnums_and_aux(argnums):
    def f(a, b):
        return np.sum(np.tanh(a) * b), {"m": a * b}

    # a float32 argument that is not differentiated is a float input of the recording,
    # computed in float64, where eager mode passes it through and numpy computes in float32
    a, b = np.array([0.5, -1.0, 2.0], np.float32), np.array([1.5, 0.25, -0.5])
    for transform in [ad.grad, ad.value_and_grad, ad.jacobian]:
        assert_same(*both(transform(f, argnums=argnums, has_aux=True), a, b), rtol=1e-5)
        assert_same(*both(transform(lambda a, b: f(a, b)[0], argnums=argnums), a, b),
                    rtol=1e-5)


# -- NaN where a recorded selection or mask decides ------------------------------------------

SELECTIONS = {
    "max": lambda x: np.max(x) * 2.0 + np.min(x),
    "max-axis": lambda x: np.sum(np.max(x.reshape(2, 3), axis=1, keepdims=True) *
                                 x.reshape(2, 3)),
    "min-axis0": lambda x: np.sum(np.min(x.reshape(2, 3), axis=0) ** 2),
    "nanmax": lambda x: np.nanmax(x) + np.nanmin(x.reshape(2, 3), axis=1)[1],
    "nanmax-all-nan": lambda x: np.sum(np.nanmax(x.reshape(2, 3), axis=1)),
}
NAN_POINTS = [np.array([-2.0, 3.0, np.nan, 1.0, np.inf, -1.0]),
              np.array([np.nan, np.nan, np.nan, 1.0, 2.0, 2.0]),
              np.array([0.5, -0.5, 1.5, 1.5, -np.inf, 0.25])]


@pytest.fixture(params=["compiled", "interpreted"])
def engine(request, monkeypatch):
    """Straight-line compiled code, or (a compile-cost cap every program exceeds) the
    compiled interpreter."""
    if request.param == "interpreted":
        monkeypatch.setattr(backend, "MAX_COMPILE_COST", 1)
    return request.param


def _three_arguments(x, s, m):
    return np.sum(np.sin(x) * s) + s * s * np.sum(m * m)


@pytest.mark.parametrize("argnums", [(0,), (1,), (2,), (1, 0)])
@pytest.mark.parametrize("scalar", [0.7, np.array(0.7), np.array(-1.5)])
def test_a_tuple_of_one_argnum_gives_a_tuple_of_one_gradient(argnums, scalar, engine):
    """``grad(f, argnums=(i,))`` returns ``(df/dx_i,)``, as eager mode: not the gradient
    alone, nor (before the fix) a tuple of its entries, or an error for a number."""
    args = (np.array([0.3, -0.5, 1.25]), scalar, np.array([[1.0, 2.0], [-0.5, 0.25]]))
    for transform in (ad.grad, ad.value_and_grad):
        assert_same(*both(transform(_three_arguments, argnums=argnums), *args))
    grads = quiet(ad.jit(ad.grad(_three_arguments, argnums=argnums)), *args)
    assert type(grads) is tuple and len(grads) == len(argnums)
    for i, g in zip(argnums, grads):
        fd = numerical_jacobian(_three_arguments, args, i).reshape(np.shape(args[i]))
        np.testing.assert_allclose(g, fd, atol=1e-6)
    again = quiet(ad.jit(ad.grad(_three_arguments, argnums=argnums)), *args)  # the entry
    assert_same(again, grads)  # made at the first call serves the second


@pytest.mark.parametrize("a, b", [(np.array(0.0), np.array(0.0)),
                                  (np.array(0.3), np.array(1.5)),
                                  (np.array(-0.5), np.array([1.5, -2.0, 0.25]))])
def test_a_call_run_as_itself_on_an_argument_not_differentiated(a, b):
    """The call's every use is pruned from the derivative w.r.t. ``a``: the entry is one
    Numba function that must not take the call object (it did, and failed to type)."""
    def f(a, b):
        return np.cumprod(b, axis=None) * 2.0 + np.sin(a)

    def loss(a, b):
        return np.sum(f(a, b))

    for argnums in (0, 1):
        assert_same(*both(ad.jacobian(f, argnums=argnums), a, b))
        assert_same(*both(ad.grad(loss, argnums=argnums), a, b))
        fd = numerical_jacobian(loss, (a, b), argnums).reshape(np.shape((a, b)[argnums]))
        np.testing.assert_allclose(quiet(ad.jit(ad.grad(loss, argnums=argnums)), a, b), fd,
                                   atol=1e-6)
    assert_same(*both(ad.jacobian(lambda a, b: np.cumprod(b, axis=None)), a, b))


@pytest.mark.parametrize("name", list(SELECTIONS))
def test_max_and_min_propagate_nan_as_numpy(name, engine):
    """np.max of values with a NaN is NaN (np.nanmax: the largest of the others), compiled
    as in numpy; the gradient as eager mode's (no entry equals NaN; an infinite or NaN
    adjoint times the weight 0 of the other entries is NaN)."""
    f = SELECTIONS[name]
    x = np.array([0.3, -1.2, 2.0, 0.7, -0.1, 1.1])
    for transform in [lambda f: f, ad.grad, ad.value_and_grad]:
        jitted = ad.jit(transform(f))
        for point in [x] + NAN_POINTS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # numpy's all-NaN slice
                assert_same(quiet(jitted, point), transform(f)(point))


def test_max_ties_share_beside_a_slice_without_hits():
    """Eager mode: ties share the derivative even when another slice's maximum is NaN or
    ``initial=`` (no entry of that slice hits it); it gave each tied entry the whole."""
    x = np.array([np.nan, np.nan, np.nan, 1.0, 2.0, 2.0])
    want = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 0.5])
    f = lambda x: np.sum(np.max(x.reshape(2, 3), axis=1))  # noqa: E731
    np.testing.assert_array_equal(ad.grad(f)(x), want)
    np.testing.assert_array_equal(ad.jacobian(f, mode="forward")(x), want)
    g = lambda x: np.sum(np.max(x.reshape(2, 3), axis=1, initial=5.0))  # noqa: E731
    np.testing.assert_array_equal(ad.grad(g)(np.array([1.0, 2, 3, 6, 6, 1])),
                                  [0.0, 0.0, 0.0, 0.5, 0.5, 0.0])
    assert_same(quiet(ad.jit(ad.grad(f)), x), want)


# -- forward mode is NaN-safe in compiled code as in eager mode ------------------------------

NAN_SAFE = {
    # sqrt'(0) = inf times a tangent that is exactly 0: 0 in eager forward mode
    "sqrt-of-square": lambda x: np.sqrt(x * x) + x[::-1],
    # the branch not taken has an infinite or NaN derivative
    "where-nan-branch": lambda x: np.where(x > 0, x ** 2, -x) * np.roll(x, 1),
    "pow-at-zero": lambda x: x ** 2.5 + np.abs(x) ** 0.5,
    # a sum over an axis of entries with NaN partials, read by other directions
    "mean-axis": lambda x: np.mean(x.reshape(2, 3), axis=0) ** 3,
    "keepdims": lambda x: (x.reshape(2, 3) / np.sum(x.reshape(2, 3) ** 2, axis=1,
                                                    keepdims=True)).ravel(),
}
NAN_SAFE_POINTS = [np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5]), np.zeros(6),
                   np.array([-2.0, 3.0, np.nan, 1.0, np.inf, -1.0]),
                   np.array([0.3, -1.2, 2.0, 0.7, -0.1, 1.1])]


def _ode(f):
    return lambda t, y: f(y) * t


@pytest.mark.parametrize("name", list(NAN_SAFE))
def test_compiled_jacobians_are_nan_safe_as_eager(name, engine):
    """A tangent that is exactly zero contributes zero, even times an infinite or NaN
    partial (eager forward mode's rule): compiled Jacobians, forward mode whatever their
    ``mode``, give eager forward mode's numbers; eager reverse mode's where it has no NaN
    (its NaN from 0 times an infinite partial is forward mode's number compiled)."""
    f = NAN_SAFE[name]
    transforms = {  # (transform, eager forward mode, eager as called)
        "forward": (ad.jacobian(f, mode="forward"),) * 3,
        "reverse": (ad.jacobian(f, mode="reverse"), ad.jacobian(f, mode="forward"),
                    ad.jacobian(f, mode="reverse")),
        "auto": (ad.jacobian(f), ad.jacobian(f, mode="forward"), ad.jacobian(f)),
        "ode": (ad.ode_jacobian(_ode(f)), ad.ode_jacobian(_ode(f), mode="forward"),
                ad.ode_jacobian(_ode(f))),
        "sparse": (ad.sparse_jacobian(f), ad.sparse_jacobian(f, mode="forward"),
                   ad.sparse_jacobian(f)),
        "grad": (ad.grad(lambda x: np.sum(f(x))),) * 3}
    for kind, (transform, forward, eager) in transforms.items():
        jitted = ad.jit(transform)
        warm = np.linspace(0.5, 1.5, 6)  # compiled here (the replay serves meanwhile)
        quiet(jitted, *((2.0, warm) if kind == "ode" else (warm,)))
        assert jitted.wait(timeout=600)
        for point in NAN_SAFE_POINTS:
            args = (2.0, point) if kind == "ode" else (point,)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = quiet(jitted, *args)
                assert_same(got, forward(*args))
                want = eager(*args)
            got, want = (a.toarray() if hasattr(a, "toarray") else a for a in (got, want))
            known = ~np.isnan(want)
            np.testing.assert_allclose(got[known], want[known], rtol=1e-12, atol=1e-14)


def test_where_gradient_with_infinite_adjoint(engine):
    """np.where's gradient picks the adjoint (eager mode's rule): an infinite adjoint
    gives 0 to the branch not taken; compiled, it was multiplied by 0.0 (NaN)."""
    f = NAN_SAFE["where-nan-branch"]
    g = ad.grad(lambda x: np.sum(f(x)))
    jitted = ad.jit(g)
    quiet(jitted, np.linspace(0.5, 1.5, 6))
    assert jitted.wait(timeout=600)
    for x in NAN_SAFE_POINTS + [np.array([-2.0, 3.0, 0.5, 1.0, np.inf, -1.0])]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_same(quiet(jitted, x), g(x))


@pytest.mark.parametrize("parallel", [False, True])
def test_batch_rows_with_nan_tangents(parallel, monkeypatch):
    """A batch (serial or over threads) answers the rows whose compiled tangents hold a
    NaN as eager mode does, and the others from the loop."""
    import numba

    f = NAN_SAFE["sqrt-of-square"]
    jac = ad.jit(ad.jacobian(f, mode="forward"))
    xs = np.random.default_rng(2).standard_normal((9, 6))
    xs[3, 1] = 0.0
    xs[7, :] = 0.0
    jac(xs[0])
    if parallel:
        if numba.config.NUMBA_NUM_THREADS < 2:
            pytest.skip("one Numba thread")
        monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    got = jac.batch(xs)
    want = np.stack([ad.jacobian(f, mode="forward")(x) for x in xs])
    assert_same(got, want)
    assert np.isfinite(got).all()


# -- results are the caller's ------------------------------------------------------------------

def test_results_are_fresh_arrays():
    """A later call neither overwrites an array returned earlier nor sees a write into it
    (constant outputs included), compiled and as a tape."""
    def f(x):
        return np.sin(x) * x, np.ones(3), {"c": np.arange(2.0)}

    x = np.linspace(0.0, 1.0, 4)
    for fn in [ad.jit(f), ad.record(f, x), ad.record(f, x).compile()]:
        for _ in range(10):  # a tape's replay turns into Python code after a few calls
            first = quiet(fn, x)
        kept = [first[0].copy(), first[1].copy(), first[2]["c"].copy()]
        first[1][:] = 7.0
        first[2]["c"][:] = -1.0
        second = quiet(fn, x + 1.0)
        np.testing.assert_array_equal(second[1], np.ones(3))
        np.testing.assert_array_equal(second[2]["c"], np.arange(2.0))
        np.testing.assert_array_equal(first[0], kept[0])
        assert not np.shares_memory(first[0], second[0])
    for transform in [ad.grad(lambda x: np.sum(x ** 2)), ad.jacobian(lambda x: x ** 2),
                      ad.value_and_grad(lambda x: np.sum(x ** 2))]:
        g = ad.jit(transform)
        a = g(x)
        kept = np.copy(a[1] if isinstance(a, tuple) else a)
        b = g(x + 1.0)
        np.testing.assert_array_equal(a[1] if isinstance(a, tuple) else a, kept)
        assert not np.shares_memory(a[1] if isinstance(a, tuple) else a,
                                    b[1] if isinstance(b, tuple) else b)



def test_numbers_in_results_as_eager():
    """Numbers among a function's results come back as eager mode's: ``np.float64`` in a
    value's tree, 0-d arrays as ``has_aux`` values."""
    x = np.array([0.3, -0.8, 1.1, 0.5])
    assert_same(*both(lambda a: {"a": a ** 2, "b": (a[0], 2.0, np.sum(a))}, x))
    assert_same(*both(lambda a: (a[1] * a[0], np.sum(a)), x))
    aux = lambda a: (np.sum(a ** 2), (a[0], np.ones(2), {"s": np.sum(a)}))  # noqa: E731
    for transform in [ad.grad, ad.value_and_grad, ad.jacobian]:
        assert_same(*both(transform(aux, has_aux=True), x))
    assert_same(*both(ad.jacobian(lambda a: (a ** 2, a.sum()), has_aux=True), x))


# -- refusals are eager mode's ---------------------------------------------------------------

def same_refusal(transform, *args):
    """Eager mode raises; the compiled transform raises the same type, saying the same."""
    with pytest.raises((TypeError, ValueError)) as eager:
        transform(*args)
    with pytest.raises(type(eager.value)) as compiled:
        quiet(ad.jit(transform), *args)
    assert str(compiled.value).split(":")[1:2] == str(eager.value).split(":")[1:2]


@pytest.mark.parametrize("output", [
    lambda a: a[0] > 0, lambda a: np.sum(a > 0), lambda a: np.sum(a) * 1j,
    lambda a: a * 2.0], ids=["bool", "int", "complex", "vector"])
def test_grad_refuses_what_eager_refuses(output):
    """A bool output's gradient was zeros from ad.jit and from a tape (eager: TypeError)."""
    x = np.array([0.3, -0.8, 1.1, 0.5])
    for transform in [ad.grad, ad.value_and_grad]:
        same_refusal(transform(output), x)
    tape = ad.record(output, x)
    for _ in range(10):  # also once the tape's replay is Python code
        with pytest.raises((TypeError, ValueError)):
            quiet(tape.grad, x)


@pytest.mark.parametrize("argnums", [2, 3, -3, (0, 2)])
def test_argnums_out_of_range(argnums):
    """argnums past the arguments: eager's ValueError (it was an IndexError)."""
    f = lambda a, b: np.sum(a * b ** 2)  # noqa: E731
    x = np.array([0.3, -0.8, 1.1])
    for transform in [ad.grad, ad.value_and_grad, ad.jacobian]:
        same_refusal(transform(f, argnums=argnums), x, 2.0 * x)


def test_compiled_tape_jvp_is_nan_safe_as_eager(engine):
    """Tape.compile().jvp: the forward kernel seeded with the tangents, NaN-safe as the
    tape's jvp and eager ad.jvp are."""
    f = NAN_SAFE["sqrt-of-square"]
    x, v = np.array([0.3, -1.2, 2.0, 0.7, -0.1, 1.1]), np.array([0.0, 1.0, 0.0, 2, 0, 1])
    compiled = ad.record(f, x).compile()
    quiet(compiled.jvp, (x,), (v,))
    assert compiled.wait(timeout=600)
    for point in NAN_SAFE_POINTS[:2] + [x]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = ad.jvp(f, (point,), (v,))
            got = quiet(compiled.jvp, (point,), (v,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def _scalar(f):
    return lambda x: np.sum(f(x))


def _number(s):
    """A function of a number with the same hazards: |s| as sqrt(s * s), s ** 2.5 at 0."""
    return np.sqrt(s * s) * 2.0 + np.abs(s) ** 2.5 + np.sin(s) * s


#: (name, function, transform inside the jitted function, points, direction or None)
INSIDE = {
    "jvp": lambda f: lambda x, v: ad.jvp(f, (x,), (v,)),
    "jvp-constant-tangent": lambda f: lambda x: ad.jvp(f, (x,), (np.ones(np.shape(x)),)),
    "hvp": lambda f: lambda x, v: ad.hvp(_scalar(f), x, v),
    "hessian": lambda f: ad.hessian(_scalar(f)),
    "grad-of-jvp": lambda f: ad.grad(lambda x: np.sum(
        ad.jvp(f, (x,), (np.linspace(-1.0, 1.0, np.size(x)).reshape(np.shape(x)),))[1] ** 2)),
}


def _inside_points(name):
    """Points with zeros (exactly zero tangents meet infinite partials there), with NaN and
    inf, a smooth one; (2, 3) arrays; 0-d for the number's function."""
    if name == "number":
        return [np.array(0.0), 0.0, -0.0, np.array(-1.5), 2.25]
    return NAN_SAFE_POINTS + [NAN_SAFE_POINTS[0].reshape(2, 3),
                              NAN_SAFE_POINTS[3].reshape(2, 3)]


def _zero_d(tree):
    """Numbers as 0-d arrays (tuples kept)."""
    if isinstance(tree, tuple):
        return tuple(_zero_d(t) for t in tree)
    return np.asarray(tree) if isinstance(tree, np.float64) else tree


def _direction(x):
    v = np.array([0.0, 1.0, 0.0, 2.0, 0.0, 1.0])
    return v.reshape(np.shape(x)) if np.size(x) == 6 else np.float64(1.0)


@pytest.mark.parametrize("inside", list(INSIDE))
@pytest.mark.parametrize("name", ["sqrt-of-square", "pow-at-zero", "where-nan-branch",
                                  "keepdims", "number"])
def test_forward_mode_inside_a_jitted_function_is_nan_safe(name, inside, engine):
    """ad.jvp / ad.hvp / ad.hessian inside a recorded function: forward mode's tangent
    products are recorded NaN-safe (an exactly zero tangent times an infinite partial is 0,
    as eagerly; it was NaN in the replay and the compiled code), compiled or interpreted;
    gradients through them (reverse over forward) as eager mode's; central differences
    where the function is smooth."""
    f = _number if name == "number" else NAN_SAFE[name]
    transform = INSIDE[inside](f)
    takes_v = inside in ("jvp", "hvp")
    if inside == "grad-of-jvp" and name == "number":
        pytest.skip("np.linspace of a number's size: covered by the arrays")
    jitted = ad.jit(transform, fallback="error")
    points = _inside_points(name)
    for x in points:
        args = (x, _direction(x)) if takes_v else (x,)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = transform(*args)
            got = quiet(jitted, *args)
        if name == "number":  # a computed number is np.float64 in a recording's results
            got, want = _zero_d(got), _zero_d(want)  # (eager transforms: a 0-d array)
        assert_same(got, want)
    assert jitted.wait(timeout=600) and any(type(e).__name__ == "_Entry"
                                            for e in jitted._entries.values())
    # where eager forward mode's NaN-safety decides, the numbers are finite: not NaN
    zero = points[1] if name != "number" else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = quiet(jitted, *((zero, _direction(zero)) if takes_v else (zero,)))
    if inside.startswith("jvp") and name in ("sqrt-of-square", "pow-at-zero", "number"):
        assert np.isfinite(got[1]).all(), got
    # a smooth point: central differences
    x = NAN_SAFE_POINTS[3] if name != "number" else np.float64(0.7)
    if name == "pow-at-zero":
        x = np.abs(x) + 0.1
    if inside == "jvp":
        v = _direction(x)
        fd = numerical_jacobian(f, (x,), 0).reshape(np.size(f(x)), -1) @ np.ravel(v)
        np.testing.assert_allclose(np.ravel(quiet(jitted, x, v)[1]), fd, atol=1e-6)
    if inside == "hessian":
        fd = numerical_jacobian(ad.grad(_scalar(f)), (x,), 0).reshape(np.size(x), -1)
        np.testing.assert_allclose(np.reshape(quiet(jitted, x), fd.shape), fd, atol=1e-5)
    if inside == "grad-of-jvp":
        inner = lambda x: np.sum(ad.jvp(f, (x,), (np.linspace(  # noqa: E731
            -1.0, 1.0, np.size(x)).reshape(np.shape(x)),))[1] ** 2)
        np.testing.assert_allclose(quiet(jitted, x), fd_gradient(inner, x), atol=1e-5)


def test_tangent_product_rules():
    """The recorded NaN-safe product: zero where the tangent is exactly zero (whatever the
    derivative), the product elsewhere, with the product's gradient and tangent, in every
    mode and against central differences."""
    from dualad.derivatives.tangent_product import tangent_product

    p = np.array([[0.0, 1.5], [-2.0, 0.0]])
    d = np.array([[np.inf], [np.nan]])
    np.testing.assert_array_equal(tangent_product(p, d),
                                  [[0.0, np.inf], [np.nan, 0.0]])
    assert tangent_product(0.0, np.inf) == 0.0 and type(tangent_product(2.0, 3.0)) is np.float64
    rng = np.random.default_rng(5)
    for ps, ds in [((3, 2), (3, 1)), ((), ()), ((4,), ()), ((2, 3), (2, 3))]:
        a, b = rng.standard_normal(ps), rng.standard_normal(ds)
        assert ad.gradcheck(lambda a, b: tangent_product(a, b), a, b)
        for argnum, x in [(0, a), (1, b)]:
            f = (lambda t, b=b: tangent_product(t, b)) if argnum == 0 else \
                (lambda t, a=a: tangent_product(a, t))
            fd = numerical_jacobian(f, (x,), 0)
            for mode in ["forward", "reverse"]:
                J = ad.jacobian(f, mode=mode)(x)
                np.testing.assert_allclose(np.reshape(J, fd.shape), fd, atol=1e-7)
            square = lambda t, f=f: np.sum(f(t) ** 2)  # noqa: E731
            H = ad.hessian(square)(x)
            fdh = numerical_jacobian(ad.grad(square), (x,), 0)
            np.testing.assert_allclose(np.reshape(H, fdh.shape), fdh, atol=1e-5)
    # a zero tangent of p adds nothing even where d is infinite (forward over forward)
    _, t = ad.jvp(lambda p: tangent_product(p, np.array([np.inf, 2.0])),
                  (np.array([1.0, 1.0]),), (np.array([0.0, 1.0]),))
    np.testing.assert_array_equal(t, [0.0, 2.0])


def test_sparse_ode_jacobian_compiles():
    """ad.jit(ad.ode_jacobian(f, sparse=True)) raised a ConversionError (it was recorded
    as a plain function); it compiles as the sparse Jacobian with respect to y."""
    from scipy.integrate import solve_ivp

    def rhs(t, y):
        return np.concatenate([y[1:] - y[:-1] * y[:-1], -y[-1:]]) * (1.0 + t)

    eager = ad.ode_jacobian(rhs, sparse=True)
    jac = ad.jit(eager, fallback="error")
    y0 = np.linspace(1.0, 2.0, 8)
    for t, y in [(0.0, y0), (0.5, np.cos(np.arange(8.0))), (0.25, np.zeros(8))]:
        J = jac(t, y)
        assert_same(J, eager(t, y))
        fd = numerical_jacobian(lambda v, t=t: rhs(t, v), (y,), 0)
        np.testing.assert_allclose(J.toarray(), fd, atol=1e-6)
    ours = solve_ivp(rhs, (0.0, 1.0), y0, method="BDF", jac=jac)
    theirs = solve_ivp(rhs, (0.0, 1.0), y0, method="BDF", jac=eager)
    assert ours.success and ours.njev == theirs.njev
    np.testing.assert_allclose(ours.y[:, -1], theirs.y[:, -1], rtol=1e-12)


@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_ode_jacobian_of_other_state_shapes(shape):
    """A state that is a number or a matrix: (f.size, y.size), as eager mode (a 2x3 state
    gave a 12x3 matrix, a number an IndexError)."""
    def rhs(t, y):
        return -y * t + np.sin(y)

    y = np.cos(np.arange(float(np.prod(shape)))).reshape(shape) + 0.5
    for point in [y, y * 2.0]:
        J = quiet(ad.jit(ad.ode_jacobian(rhs)), 0.5, point)
        assert_same(J, ad.ode_jacobian(rhs)(0.5, point))
        fd = numerical_jacobian(lambda v: rhs(0.5, v), (point,), 0)
        np.testing.assert_allclose(J, fd.reshape(J.shape), atol=1e-6)
    g = ad.jit(ad.ode_jacobian(lambda t, y: np.sum(y, axis=0) * t))
    assert_same(g(0.5, np.ones((2, 3))), ad.ode_jacobian(lambda t, y: np.sum(y, axis=0) * t)(
        0.5, np.ones((2, 3))))


# -- keyword arguments, in-place writes into arguments, results that are not arrays ----------

def _scaled(x, scale=1.0, power=2, offset=None):
    out = np.sum(np.sin(x) * np.abs(x) ** power) * scale
    return out if offset is None else out + np.sum(offset * x)


@pytest.mark.parametrize("transform", [
    lambda f: f, ad.grad, ad.value_and_grad, ad.hessian,
    lambda f: ad.jacobian(f, mode="forward"), lambda f: ad.jacobian(f, mode="reverse"),
    lambda f: ad.grad(f, argnums=-1)],
    ids=["value", "grad", "value_and_grad", "hessian", "jacobian-forward",
         "jacobian-reverse", "grad-argnums-negative"])
def test_keyword_arguments_as_eager(transform, engine):
    """ad.jit(f)(x, scale=2.0) and ad.jit(ad.grad(f))(x, scale=2.0) do what eager mode
    does (it was Python's TypeError): keywords are passed to f, not differentiated; float
    values are inputs of the compiled code (a new value does not record again), other
    values constants of the recording (a new value records again), arrays among them
    traced like positional ones; shapes from 0-d to 2-D."""
    eager = transform(_scaled)
    jitted = ad.jit(eager)
    for x in [np.array([0.3, -1.2, 2.0]), np.linspace(0.5, 1.5, 6).reshape(2, 3),
              np.float64(0.7), np.array(-0.4)]:
        for kwargs in [{}, {"scale": 2.0}, {"scale": -0.5}, {"scale": 2.0, "power": 3},
                       {"power": 3, "scale": np.float32(1.5)},
                       {"offset": np.full(np.shape(x), 0.25)},
                       {"offset": np.full(np.shape(x), -1.0), "scale": 0.5}, {}]:
            got = quiet(lambda x=x, kw=kwargs: jitted(x, **kw))
            assert_same(_zero_d(got), _zero_d(eager(x, **kwargs)))
    assert jitted.wait(timeout=600)
    # the derivative with the keywords given: central differences
    if transform is ad.grad:
        x = np.array([0.3, -1.2, 2.0])
        kw = {"scale": 2.0, "offset": np.array([1.0, -2.0, 0.5])}
        np.testing.assert_allclose(jitted(x, **kw), fd_gradient(
            lambda v: _scaled(v, **kw), x), atol=1e-6)


def test_keyword_floats_are_inputs_and_other_values_constants():
    """A new float keyword value runs the same compiled code; a new int value records
    again, as a positional one does; eager mode's refusal of argnums beyond the positional
    arguments is kept."""
    g = ad.jit(ad.grad(_scaled), fallback="error")
    x = np.array([0.3, -1.2, 2.0])
    g(x, scale=2.0)
    recordings = g.tape.recordings + sum(j.tape.recordings for j in g._keywords.values())
    for s in [3.0, -1.0, 0.5]:
        assert_same(g(x, scale=s), ad.grad(_scaled)(x, scale=s))
    assert g.tape.recordings + sum(j.tape.recordings for j in g._keywords.values()) \
        == recordings
    assert_same(g(x, scale=2.0, power=3), ad.grad(_scaled)(x, scale=2.0, power=3))
    with pytest.warns(TapeRetraceWarning):
        assert_same(g(x, power=4, scale=2.0), ad.grad(_scaled)(x, scale=2.0, power=4))
    with pytest.raises(ValueError, match="argnums"):
        ad.grad(_scaled)(x=x)
    with pytest.raises(ValueError, match="argnums"):
        g(x=x)
    assert_same(quiet(lambda: ad.jit(_scaled)(x=x, scale=2.0)), _scaled(x=x, scale=2.0))


def _plus(x):
    x += 1.0
    return x


def _times(x):
    x *= 2.0
    return x


def _minus_array(x):
    x -= np.ones(np.shape(x))
    return x


def _power(x):
    x **= 2.0
    return x


def _setitem(x):
    x[...] = 0.5
    return x


def _out(x):
    np.add(x, 1.0, out=x)
    return x


IN_PLACE = {"+=": _plus, "*=": _times, "-= array": _minus_array, "**=": _power,
            "setitem": _setitem, "out=": _out}


@pytest.mark.parametrize("write", list(IN_PLACE))
def test_in_place_writes_into_arguments_are_refused_clearly(write):
    """Eager f changes the caller's array (x += 1); compiled code computes on copies, so
    ad.jit(f) refuses such a write at the recording with what to write instead (it
    returned eager's first result, then another one from the second call on the same
    array, whose values eager mode had changed). Transforms do not change the caller's
    array eagerly, and under ad.jit they give eager mode's numbers, on every call."""
    def f(x):
        x = IN_PLACE[write](x)
        return np.sum(x * x)

    for x in [np.array([0.5, -1.0, 2.0]), np.linspace(1.5, 3.0, 6).reshape(2, 3),
              np.array(1.5)]:
        caller = x.copy()
        with pytest.raises(TypeError, match=r"ad\.jit\(f\): the function writes into its "
                                            r"argument .*np\.copy"):
            ad.jit(f)(caller)
        np.testing.assert_array_equal(caller, x)
        once = x.copy()
        f(once)  # eager mode: the caller's array changes
        assert not np.array_equal(once, x)
        if write in ("setitem", "out="):  # reverse mode cannot record these (eagerly too)
            continue
        for transform in [ad.grad, ad.value_and_grad, ad.hessian]:
            g, a, b = ad.jit(transform(f)), x.copy(), x.copy()
            for _ in range(3):  # the same array each time: unchanged by either
                assert_same(_zero_d(quiet(g, a)), _zero_d(transform(f)(b)))
            np.testing.assert_array_equal(a, x)
            np.testing.assert_array_equal(b, x)
        if write == "+=" and x.ndim == 1:
            np.testing.assert_allclose(ad.jit(ad.grad(f))(x), fd_gradient(f, x), atol=1e-6)


def test_writes_that_numpy_makes_on_copies_compile():
    """What does not write into the caller's array compiles as eagerly: a copy written in
    place, and x += 1 on a number (Python rebinds the name)."""
    def copied(x):
        x = np.copy(x)
        x += 1.0
        x[0] = 2.0 * x[1]
        return x * x

    def number(s):
        s += 1.0
        s *= s
        return s

    a = np.array([0.5, -1.0, 2.0])
    for point in [a, a * 2.0]:
        assert_same(ad.jit(copied, fallback="error")(point), copied(point))
        np.testing.assert_array_equal(a, [0.5, -1.0, 2.0])
    for s in [0.5, np.float64(-2.0), 3.0]:
        # (a computed number is np.float64 from a recording; Python's float eagerly)
        assert_same(quiet(ad.jit(number), s), np.float64(number(s)))
        assert_same(quiet(ad.jit(ad.grad(number)), s), ad.grad(number)(s))


RESULTS = {
    "string": lambda x: "done",
    "None": lambda x: None,
    "branch string": lambda x: "up" if x.ravel()[0] > 0 else "down",
    "bytes and number": lambda x: (b"b", 3, np.sum(x)),
    "constant array": lambda x: np.ones(3),
    "dict with a string": lambda x: {"name": "n", "value": x * 2.0},
}


@pytest.mark.parametrize("name", list(RESULTS))
def test_results_that_are_not_computed_arrays_as_eager(name, engine):
    """A function returning a string (None, a constant) is returned as eager mode returns
    it, a constant of the recording (it raised a TypeError; constant results warned that
    they cannot be compiled, or raised with fallback="error": nothing needs compiling);
    a branch choosing among strings records again where it changes; tapes and
    derivatives still refuse a string as eager mode does."""
    f = RESULTS[name]
    jitted = ad.jit(f, fallback="error")
    for x in [np.array([0.5, -1.0, 2.0]), np.array([-0.5, 1.0, 2.0]), np.ones((2, 3)),
              np.array(-2.0), np.array([0.5, -1.0, 2.0])]:
        assert_same(quiet(jitted, x), f(x))
    if name in ("string", "None"):
        with pytest.raises(TypeError, match="returned"):
            ad.grad(f)(np.ones(2))
        with pytest.raises(TypeError, match="returned"):
            quiet(ad.jit(ad.grad(f)), np.ones(2))
        with pytest.raises(TypeError, match="returned"):
            ad.record(f, np.ones(2))
