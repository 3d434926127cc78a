"""ad.jit of every transform: has_aux, tuple argnums, several outputs, the JAX-style jvp /
vjp / hvp functions, tape.compile()'s jvp / vjp / hvp, and guards compiled as checks.
Every result is compared with eager mode and with central differences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.jit import JitFallbackWarning

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def compiled_only(fn):
    """``ad.jit(fn, fallback="error")``: the test fails if anything runs in Python."""
    return ad.jit(fn, fallback="error")


def assert_tree_close(got, want, **tolerances):
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            assert_tree_close(got[k], want[k], **tolerances)
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for a, b in zip(got, want):
            assert_tree_close(a, b, **tolerances)
    else:
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, **tolerances)


def stats(x, y):  # a scalar loss and an auxiliary tree (computed and constant leaves)
    loss = np.sum(np.sin(x) * y) + np.sum(np.tanh(x * x) * np.roll(y, 1))
    return loss, {"scaled": x * 2.0, "peak": np.max(y), "tag": 3.0}


X = np.array([0.3, -0.8, 1.1])
Y = np.array([0.5, 2.0, -1.5])


# -- has_aux, tuple argnums, several outputs --------------------------------------------------

@pytest.mark.parametrize("transform", [
    lambda f: ad.grad(f, has_aux=True),
    lambda f: ad.value_and_grad(f, has_aux=True),
    lambda f: ad.grad(f, argnums=(0, 1), has_aux=True),
])
def test_gradients_with_aux(transform):
    fast = compiled_only(transform(stats))
    for scale in (1.0, -0.7):
        x, y = X * scale, Y + scale
        assert_tree_close(fast(x, y), transform(stats)(x, y), rtol=1e-13, atol=1e-14)
    g, aux = compiled_only(ad.grad(stats, has_aux=True))(X, Y)
    fd = numerical_jacobian(lambda x: stats(x, Y)[0], (X,), 0)
    np.testing.assert_allclose(g, fd.reshape(X.shape), atol=1e-6)
    assert aux["tag"] == 3.0


def test_jacobian_with_aux():
    def f(x):
        return np.sin(x) * x[0], {"norm": np.sum(x * x), "x": x}

    fast = compiled_only(ad.jacobian(f, has_aux=True))
    J, aux = fast(X)
    J_eager, aux_eager = ad.jacobian(f, has_aux=True)(X)
    np.testing.assert_allclose(J, J_eager, rtol=1e-14, atol=1e-15)
    assert_tree_close(aux, aux_eager, rtol=1e-14)
    np.testing.assert_allclose(J, numerical_jacobian(lambda x: f(x)[0], (X,), 0), atol=1e-6)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_tuple_argnums(mode):
    def f(x, a, y):  # a 2-D argument, a 0-d one and an undifferentiated middle one
        return np.sum(np.tanh(x[:, None] * a), axis=0) * y + np.exp(-y) * np.sum(a)

    x, a, y = np.array([0.3, -0.2]), np.arange(6.0).reshape(2, 3) / 5, np.array(0.7)
    fast = compiled_only(ad.jacobian(f, argnums=(1, 0, 2), mode=mode))
    got = fast(x, a, y)
    want = ad.jacobian(f, argnums=(1, 0, 2), mode=mode)(x, a, y)
    assert [g.shape for g in got] == [(3, 2, 3), (3, 2), (3,)]
    assert_tree_close(got, want, rtol=1e-13, atol=1e-15)
    for k, argnum in enumerate((1, 0, 2)):
        fd = numerical_jacobian(f, (x, a, y), argnum)
        np.testing.assert_allclose(got[k], fd.reshape(got[k].shape), atol=1e-6)


def test_several_outputs_compile():
    def f(x, y):
        return np.sin(x) * y, 2.5, {"sum": np.sum(x), "prod": x * y}

    fast = compiled_only(f)
    assert_tree_close(fast(X, Y), f(X, Y), rtol=1e-14)
    assert_tree_close(fast(Y, X), f(Y, X), rtol=1e-14)


# -- jvp, vjp and hvp as JAX writes them under jit ---------------------------------------------

def model(x):
    return np.sin(x) * np.roll(x, 1) + np.exp(x) / (1.0 + x * x)


def scalar_model(x):
    return np.sum(np.sin(x) * np.tanh(x)) + np.sum(np.roll(x, 1) * x * x)


def test_jax_style_jvp_vjp_and_hvp():
    v = np.array([1.0, -0.5, 2.0])
    jvp = compiled_only(lambda x, v: ad.jvp(model, (x,), (v,)))
    vjp = compiled_only(lambda x, c: ad.vjp(model, x)[1](c))
    hvp = compiled_only(lambda x, v: ad.hvp(scalar_model, x, v))
    for x in (X, -0.5 * X):
        J = numerical_jacobian(model, (x,), 0)
        out, tangent = jvp(x, v)
        np.testing.assert_allclose(out, model(x), rtol=1e-14)
        np.testing.assert_allclose(tangent, ad.jvp(model, (x,), (v,))[1], rtol=1e-13)
        np.testing.assert_allclose(tangent, J @ v, atol=1e-6)
        (cot,) = vjp(x, v)
        np.testing.assert_allclose(cot, ad.vjp(model, x)[1](v)[0], rtol=1e-13)
        np.testing.assert_allclose(cot, J.T @ v, atol=1e-6)
        H = numerical_jacobian(ad.grad(scalar_model), (x,), 0)
        np.testing.assert_allclose(hvp(x, v), ad.hvp(scalar_model, x, v), rtol=1e-12)
        np.testing.assert_allclose(hvp(x, v), H @ v, atol=1e-5)


# -- tape.compile(): jvp, vjp, hvp -------------------------------------------------------------

def two_args(x, w):  # 1-d and 2-d arguments, broadcasting, reductions on an axis
    return np.tanh(np.sum(w * x, axis=1)) * np.sum(w * w, axis=0)[:2] + (np.sin(x) * x[0])[1:]


W = np.array([[0.5, -1.0, 0.2], [1.5, 0.3, -0.4]])
XW = np.array([0.4, -0.9, 0.6])


def test_compiled_tape_jvp_and_vjp():
    compiled = ad.record(two_args, XW, W).compile(fallback="error")
    rng = np.random.default_rng(5)
    for _ in range(2):
        x, w = XW + 0.1 * rng.standard_normal(3), W + 0.1 * rng.standard_normal(W.shape)
        tx, tw = rng.standard_normal(3), rng.standard_normal(W.shape)
        out, tangent = compiled.jvp((x, w), (tx, tw))
        eager = ad.jvp(two_args, (x, w), (tx, tw))
        np.testing.assert_allclose(out, eager[0], rtol=1e-14)
        np.testing.assert_allclose(tangent, eager[1], rtol=1e-13, atol=1e-15)
        Jx = numerical_jacobian(two_args, (x, w), 0)
        Jw = numerical_jacobian(two_args, (x, w), 1).reshape(2, -1)
        np.testing.assert_allclose(tangent, Jx @ tx + Jw @ tw.ravel(), atol=1e-6)
        c = rng.standard_normal(2)
        out, pullback = compiled.vjp(x, w)
        gx, gw = pullback(c)
        ex, ew = ad.vjp(two_args, x, w)[1](c)
        np.testing.assert_allclose(gx, ex, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(gw, ew, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(gw.ravel(), Jw.T @ c, atol=1e-6)
    with pytest.raises(ad.ShapeError, match="tangent 1"):
        compiled.jvp((XW, W), (XW, XW))
    with pytest.raises(ad.ShapeError, match="cotangent"):
        compiled.vjp(XW, W)[1](np.ones(3))


def test_compiled_tape_scalar_vjp_and_hvp():
    compiled = ad.record(scalar_model, X).compile(fallback="error")
    v = np.array([0.5, 1.0, -1.0])
    for x in (X, X[::-1].copy()):
        value, pullback = compiled.vjp(x)
        np.testing.assert_allclose(value, scalar_model(x), rtol=1e-14)
        np.testing.assert_allclose(pullback(2.0)[0], 2.0 * ad.grad(scalar_model)(x),
                                   rtol=1e-13)
        hv = compiled.hvp((x,), v)
        np.testing.assert_allclose(hv, ad.hvp(scalar_model, x, v), rtol=1e-12)
        H = numerical_jacobian(ad.grad(scalar_model), (x,), 0)
        np.testing.assert_allclose(hv, H @ v, atol=1e-5)
    assert compiled._hvps[0, 1] is not None  # forward over reverse, recorded and compiled
    # 0-d input (power's derivative reads a mask): its recorded hvp compiles
    zero_d = ad.record(lambda t: np.sin(t) * t ** 3, 0.5).compile(fallback="error")
    t = 0.8
    exact = -np.sin(t) * t ** 3 + 6 * np.cos(t) * t ** 2 + 6 * np.sin(t) * t
    np.testing.assert_allclose(zero_d.hvp((t,), 1.5), 1.5 * exact, rtol=1e-12)
    assert zero_d._hvps[0, 1] is not None
    # where a recorded hvp does not compile: the reverse kernel on dual numbers
    zero_d._hvps[0, 1] = None
    np.testing.assert_allclose(zero_d.hvp((t,), 1.5), 1.5 * exact, rtol=1e-12)


def test_compiled_tape_falls_back_once_per_method():
    compiled = ad.record(lambda x, y: np.sum(x * y), X, Y).compile()
    with pytest.warns(JitFallbackWarning, match="tuple of argnums"):
        first = compiled.hvp((X, Y), (Y, X), argnums=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = compiled.hvp((X, Y), (Y, X), argnums=(0, 1))
    assert_tree_close(first, (X, Y), rtol=1e-14)
    assert_tree_close(second, (X, Y), rtol=1e-14)
    strict = ad.record(lambda x, y: np.sum(x * y), X, Y).compile(fallback="error")
    with pytest.raises(ad.JitError, match="tuple of argnums"):
        strict.hvp((X, Y), (Y, X), argnums=(0, 1))


# -- guards compiled as checks -----------------------------------------------------------------

def halve_until_small(x):
    y = x
    while np.sum(y) > 1.0:  # a loop count that depends on the values
        y = y * 0.5
    return np.sum(y * y * np.roll(y, 1))


def test_loop_guards_fail_over_to_new_recordings():
    g = compiled_only(ad.grad(halve_until_small))
    base = np.array([0.5, 0.25, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for scale in (1.0, 3.0, 1.0, 0.5, 3.0, 7.0):
            x = base * scale
            np.testing.assert_allclose(g(x), ad.grad(halve_until_small)(x), rtol=1e-13)
            fd = numerical_jacobian(halve_until_small, (x,), 0)
            np.testing.assert_allclose(g(x), fd.reshape(3), atol=1e-6)
    assert g.tape.recordings == 3  # one per loop count (0, 1, 2 and 3 halvings: 1.0 ~ 0.5)
    assert all(e is not None and e.guarded for e in g._entries.values())


def test_guards_on_inputs_and_on_values_read():
    def f(x, t):
        if t:  # a guard on an input
            x = x * t
        if np.tanh(x[0]) > 0.1:  # a guard on a comparison of a computed value
            return np.sin(x)
        return np.cos(x) * x

    jac = compiled_only(ad.jacobian(f))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for x0, t in [(0.5, 2.0), (0.5, 0.0), (-0.5, 2.0), (0.5, 2.0), (-0.5, 0.0)]:
            x = np.array([x0, 1.0])
            np.testing.assert_allclose(jac(x, t), ad.jacobian(f)(x, t), rtol=1e-14)
            np.testing.assert_allclose(jac(x, t), numerical_jacobian(f, (x, t), 0),
                                       atol=1e-6)
    assert jac.tape.recordings == 4


def test_compiled_tape_guards_and_strict_shapes():
    def f(x):
        return np.sum(x ** 3) if np.sum(x) > 0 else np.sum(np.sin(x))

    tape = ad.record(f, X, strict=True)
    compiled = tape.compile(fallback="error")
    v = np.ones(3)
    for x in (X, -X, X):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            np.testing.assert_allclose(compiled.jvp((x,), (v,))[1], ad.jvp(f, (x,), (v,))[1],
                                       rtol=1e-13)
            np.testing.assert_allclose(compiled.grad(x), ad.grad(f)(x), rtol=1e-13)
    assert tape.recordings == 2
    with pytest.raises(ad.ShapeError, match="strict"):
        compiled.grad(np.ones(4))


def test_the_tape_guard_functions_compiled():
    from tests.tape.test_tape_guards import branch, newton_sqrt

    for f, points in [(branch, (1.5, -1.0, 3.0, -0.1)), (newton_sqrt, (4.0, 1e6, 1.0001, 4.0))]:
        g = compiled_only(ad.grad(f))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            for x in points:
                np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-12)
                fd = numerical_jacobian(f, (x,), 0)
                np.testing.assert_allclose(g(x), np.reshape(fd, ()), rtol=1e-6)
        assert all(e is not None and e.guarded for e in g._entries.values())


@pytest.mark.parametrize("transform, args", [
    (lambda f: ad.grad(f), (0.7,)),
    (lambda f: ad.value_and_grad(f), (X,)),
    (lambda f: f, (X,)),
    (lambda f: ad.jacobian(lambda x: np.sin(x) * x), (0.7,)),
    (lambda f: ad.value_and_grad(lambda x, y: np.sum(x * y), argnums=(0, 1)), (X, 2.0)),
    (lambda f: ad.grad(lambda x, y: np.sum(np.sin(x) * y), argnums=(1, 0)), (X, 2.0)),
])
def test_results_have_eager_types(transform, args):
    def same_types(got, want):
        if isinstance(want, tuple):
            assert isinstance(got, tuple) and len(got) == len(want)
            for g, w in zip(got, want):
                same_types(g, w)
        else:
            assert type(got) is type(want) and np.shape(got) == np.shape(want)

    fn = transform(lambda x: np.sum(np.sin(x) * x))
    want = fn(*args)
    jitted = compiled_only(fn)
    for got in (jitted(*args), jitted(*args)):  # the general call, then the fast one
        same_types(got, want)
        assert_tree_close(got, want, rtol=1e-14)


def test_compiled_tape_and_batch_take_strided_and_read_only_arrays():
    compiled = ad.record(model, X).compile(fallback="error")
    jitted = compiled_only(model)
    jitted(X)
    compiled.jvp((X,), (Y,))
    frozen = np.linspace(-1.0, 1.0, 6)
    frozen.flags.writeable = False
    for x in (frozen[::2], frozen[:3]):
        np.testing.assert_allclose(compiled.jvp((x,), (Y,))[1], ad.jvp(model, (x,), (Y,))[1],
                                   rtol=1e-13)
        np.testing.assert_allclose(compiled.vjp(x)[1](Y)[0], ad.vjp(model, x)[1](Y)[0],
                                   rtol=1e-13)
        np.testing.assert_allclose(jitted(x), model(x), rtol=1e-14)
    rows = np.stack([X, Y, -X])
    rows.flags.writeable = False
    np.testing.assert_allclose(jitted.batch(rows), np.stack([model(r) for r in rows]),
                               rtol=1e-14)


def test_guards_that_compiled_code_reads_otherwise_than_numpy_end_in_the_replay():
    import math

    # a point where numpy's tanh and the C library's differ in the last bit
    xs = np.random.default_rng(0).uniform(0.1, 3.0, 4000)
    x0 = next(x for x, t in zip(xs, np.tanh(xs)) if t > math.tanh(x))
    c = math.tanh(x0)  # numpy reads tanh(x0) > c; the compiled code (libm) reads it equal

    def f(x):
        if np.tanh(x[0]) > c:
            return x * 2.0
        return x * 3.0

    jac = ad.jit(ad.jacobian(f), fallback="error")
    x = np.array([x0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        np.testing.assert_allclose(jac(x), ad.jacobian(f)(x))  # ends; eager's branch
        recordings = jac.tape.recordings
        for _ in range(3):  # that recording replays from now on: nothing records again
            np.testing.assert_allclose(jac(x), 2.0 * np.eye(2))
        np.testing.assert_allclose(jac(-x), 3.0 * np.eye(2))  # the other branch compiles
        assert jac.tape.recordings == recordings + 1
        compiled = ad.record(lambda x: np.sum(f(x)), x).compile(fallback="error")
        for _ in range(3):
            np.testing.assert_allclose(compiled.grad(x), [2.0, 2.0])
            np.testing.assert_allclose(compiled.jvp((x,), (x,))[1], 2.0 * np.sum(x))
        assert compiled.tape.recordings <= 3


def test_jit_of_hessian_compiles():
    def f(x):
        return np.sum(np.sin(x) * np.exp(x) * 3.0) + np.sum(np.tanh(x * x))

    hess = compiled_only(ad.hessian(f))
    for x in (np.linspace(0.1, 1.0, 4), np.array([-0.7, 0.2, 1.3, 0.05])):
        got = hess(x)
        np.testing.assert_allclose(got, ad.hessian(f)(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got, numerical_jacobian(ad.grad(f), (x,), 0),
                                   rtol=1e-6, atol=1e-6)


def test_hvp_through_power_compiles():
    # power's derivative branches on x == 0 (a mask read by np.where): it compiles
    def f(x):
        return np.sum(x ** 2 * np.sin(x))

    v = np.array([1.0, -0.5, 0.25])
    hvp = ad.jit(lambda x, v: ad.hvp(f, x, v), fallback="error")
    for x in (X, Y, np.zeros(3)):
        np.testing.assert_allclose(hvp(x, v), ad.hvp(f, x, v), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hvp(Y, v), numerical_jacobian(ad.grad(f), (Y,), 0) @ v,
                               rtol=1e-6, atol=1e-6)


def test_a_function_no_tape_can_record_runs_eagerly_with_one_warning():
    def f(x):
        return np.sum(x ** 2 * np.sin(x))

    def refuse(*args, **kwargs):  # as a recording that meets an operation without a rule
        raise ad.MissingRuleError("dualad has no rule for np.example. Add one ...")

    v = np.array([1.0, -0.5, 0.25])
    hvp = ad.jit(lambda x, v: ad.hvp(f, x, v))
    hvp.tape._programs_for = refuse
    with pytest.warns(JitFallbackWarning, match="runs eagerly"):
        first = hvp(X, v)
    np.testing.assert_allclose(first, ad.hvp(f, X, v), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # said once
        np.testing.assert_allclose(hvp(Y, v), ad.hvp(f, Y, v), rtol=1e-12)
    strict = ad.jit(lambda x, v: ad.hvp(f, x, v), fallback="error")
    strict.tape._programs_for = refuse
    with pytest.raises(ad.JitError, match="np.example"):
        strict(X, v)
