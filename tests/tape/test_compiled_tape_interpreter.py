"""tape.compile() beyond the compile-cost cap: .jvp, .vjp and .hvp run by the compiled
interpreter (dualad/tape/interpreter.py), against eager mode and central differences, with
guards, the interpreter's first compile in the background, and the fallbacks."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.interpreter import InterpretedProgram, interpreter_opcodes
from dualad.tape.jit import JitFallbackWarning

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from strategies import programs  # noqa: E402

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def interpreted_entries(compiled):
    """The entries of ``compiled`` that the interpreter runs."""
    return {key[1] for key, kernel in compiled._kernels.items()
            if getattr(kernel, "__qualname__", "").startswith("InterpretedProgram.")}


def two_args(x, w):
    """Broadcasting, a gather, a matrix product, a guard-free branchless model."""
    h = np.tanh(w @ x) * np.exp(-x[0] ** 2)
    return np.concatenate([h, np.sin(x[1:]) * w[1, :2]]) + np.sum(x * x)


def scalar_model(x):
    return np.sum(np.log1p(x * x) * np.cos(x)) + (x[0] * x[1]) ** 2


def zero_d(t):
    return np.sin(t) * t ** 3


X = np.array([0.4, -0.9, 0.6])
W = np.array([[0.5, -1.0, 0.2], [1.5, 0.3, -0.4]])


def test_jvp_and_vjp_of_several_arguments(small_cap):
    compiled = ad.record(two_args, X, W).compile(fallback="error")
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        for _ in range(3):
            x, w = X + 0.2 * rng.standard_normal(3), W + 0.2 * rng.standard_normal(W.shape)
            tx, tw = rng.standard_normal(3), rng.standard_normal(W.shape)
            out, tangent = compiled.jvp((x, w), (tx, tw))
            eager = ad.jvp(two_args, (x, w), (tx, tw))
            np.testing.assert_allclose(out, eager[0], rtol=1e-14)
            np.testing.assert_allclose(tangent, eager[1], rtol=1e-13, atol=1e-15)
            Jx = numerical_jacobian(two_args, (x, w), 0)
            Jw = numerical_jacobian(two_args, (x, w), 1).reshape(Jx.shape[0], -1)
            np.testing.assert_allclose(tangent, Jx @ tx + Jw @ tw.ravel(), atol=1e-6)
            c = rng.standard_normal(out.shape)
            value, pullback = compiled.vjp(x, w)
            gx, gw = pullback(c)
            ex, ew = ad.vjp(two_args, x, w)[1](c)
            np.testing.assert_allclose(value, two_args(x, w), rtol=1e-14)
            np.testing.assert_allclose(gx, ex, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(gw, ew, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(gx, Jx.T @ c, atol=1e-6)
            np.testing.assert_allclose(gw.ravel(), Jw.T @ c, atol=1e-6)
    assert interpreted_entries(compiled) == {"jvp", "vjp", "split_vjp"}
    with pytest.raises(ad.ShapeError, match="tangent 1"):
        compiled.jvp((X, W), (X, X))
    with pytest.raises(ad.ShapeError, match="cotangent"):
        compiled.vjp(X, W)[1](np.ones(3))


def test_scalar_and_0d_outputs_and_inputs(small_cap):
    compiled = ad.record(scalar_model, X).compile(fallback="error")
    v = np.array([0.5, 1.0, -1.0])
    for x in (X, X[::-1].copy()):
        value, pullback = compiled.vjp(x)
        assert np.shape(value) == ()
        np.testing.assert_allclose(value, scalar_model(x), rtol=1e-14)
        np.testing.assert_allclose(pullback(2.0)[0], 2.0 * ad.grad(scalar_model)(x),
                                   rtol=1e-13)
        out, tangent = compiled.jvp((x,), (v,))
        assert np.shape(tangent) == ()
        np.testing.assert_allclose(tangent, ad.grad(scalar_model)(x) @ v, rtol=1e-13)
    assert interpreted_entries(compiled) == {"jvp", "vjp", "split_vjp"}
    scalar = ad.record(zero_d, 0.5).compile(fallback="error")
    for t in (0.8, -1.3):
        exact = np.cos(t) * t ** 3 + 3 * np.sin(t) * t ** 2
        out, tangent = scalar.jvp((t,), (1.5,))
        np.testing.assert_allclose(tangent, 1.5 * exact, rtol=1e-13)
        np.testing.assert_allclose(scalar.vjp(t)[1](-2.0)[0], -2.0 * exact, rtol=1e-13)
        fd = numerical_jacobian(zero_d, (t,), 0)
        np.testing.assert_allclose(tangent, 1.5 * np.reshape(fd, ()), rtol=1e-6)
    assert interpreted_entries(scalar) == {"jvp", "vjp", "split_vjp"}


def test_broadcast_output_of_a_number(small_cap):
    """A 0-d input read by a vector output: a tangent per output entry, one cotangent sum."""
    f = lambda t: np.sin(t * np.arange(1.0, 4.0)) + t  # noqa: E731
    compiled = ad.record(f, 0.3).compile(fallback="error")
    out, tangent = compiled.jvp((0.7,), (2.0,))
    J = numerical_jacobian(f, (0.7,), 0).reshape(3)
    np.testing.assert_allclose(tangent, ad.jvp(f, (0.7,), (2.0,))[1], rtol=1e-13)
    np.testing.assert_allclose(tangent, 2.0 * J, rtol=1e-6)
    c = np.array([1.0, -2.0, 0.5])
    (g,) = compiled.vjp(0.7)[1](c)
    assert np.shape(g) == ()
    np.testing.assert_allclose(g, c @ J, rtol=1e-6)
    np.testing.assert_allclose(g, ad.vjp(f, 0.7)[1](c)[0], rtol=1e-13)


def test_hvp_runs_the_recorded_forward_over_reverse_program(small_cap):
    compiled = ad.record(scalar_model, X).compile(fallback="error")
    v = np.array([0.5, 1.0, -1.0])
    for x in (X, 0.5 * X):
        hv = compiled.hvp((x,), v)
        np.testing.assert_allclose(hv, ad.hvp(scalar_model, x, v), rtol=1e-12)
        H = numerical_jacobian(ad.grad(scalar_model), (x,), 0)
        np.testing.assert_allclose(hv, H @ v, atol=1e-5)
    recorded = compiled._hvps[0, 1]
    assert recorded is not None
    assert recorded._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")


def test_hvp_says_why_the_reverse_kernel_on_duals_cannot_serve(small_cap):
    """Where the recorded hvp does not compile, the reverse kernel on dual numbers needs
    straight-line code, which a program beyond the cap has not: the replay, said once."""
    compiled = ad.record(scalar_model, X).compile()
    compiled._hvps[0, 1] = None
    v = np.array([0.5, 1.0, -1.0])
    with pytest.warns(JitFallbackWarning, match="MAX_COMPILE_COST.*nor interpret it"):
        first = compiled.hvp((X,), v)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        second = compiled.hvp((0.5 * X,), v)
    np.testing.assert_allclose(first, ad.hvp(scalar_model, X, v), rtol=1e-12)
    np.testing.assert_allclose(second, ad.hvp(scalar_model, 0.5 * X, v), rtol=1e-12)
    strict = ad.record(scalar_model, X).compile(fallback="error")
    strict._hvps[0, 1] = None
    with pytest.raises(ad.JitError, match="dual numbers needs straight-line"):
        strict.hvp((X,), v)


def test_guards_fail_over_to_new_recordings(small_cap):
    def f(x):
        return np.sin(x) * x[0] if np.sum(x) > 0 else np.cos(x) * x[-1]

    tape = ad.record(f, X)
    compiled = tape.compile(fallback="error")
    v = np.array([1.0, -0.5, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for x in (X, -X, X * 2, -X * 0.5):
            np.testing.assert_allclose(compiled.jvp((x,), (v,))[1], ad.jvp(f, (x,), (v,))[1],
                                       rtol=1e-13)
            np.testing.assert_allclose(compiled.vjp(x)[1](v)[0], ad.vjp(f, x)[1](v)[0],
                                       rtol=1e-13)
            J = numerical_jacobian(f, (x,), 0)
            np.testing.assert_allclose(compiled.jvp((x,), (v,))[1], J @ v, atol=1e-6)
    assert tape.recordings == 2
    assert interpreted_entries(compiled) == {"jvp", "vjp", "split_vjp"}


def test_the_pullback_uses_the_arguments_as_called(small_cap):
    compiled = ad.record(two_args, X, W).compile(fallback="error")
    x = X.copy()
    _, pullback = compiled.vjp(x, W)
    c = np.array([1.0, 0.5, -1.0, 2.0])
    x[:] = 7.0  # changed after the call: the pullback is the one at the call
    np.testing.assert_allclose(pullback(c)[0], ad.vjp(two_args, X, W)[1](c)[0], rtol=1e-13)


def test_the_interpreters_first_compile_runs_in_the_background(small_cap, monkeypatch):
    """Where the interpreter's passes have never compiled (seconds), the replay answers
    while a thread compiles them, silently; after wait(), the interpreter runs. With
    fallback="error" the call waits for the compile instead."""
    monkeypatch.setattr(InterpretedProgram, "compiled", lambda self, entries=None: False)
    x, v = X * 0.7, np.array([0.3, -1.0, 0.5])
    c = np.array([1.0, 0.5, -1.0, 2.0])
    compiled = ad.record(two_args, X, W).compile()  # fallback="warn"
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # nothing to report
        first = compiled.jvp((x, W), (v, np.zeros_like(W)))
        first_g = compiled.vjp(x, W)[1](c)
        assert interpreted_entries(compiled) == set()  # the replay answered
        assert compiled.wait()
        later = compiled.jvp((x, W), (v, np.zeros_like(W)))
        later_g = compiled.vjp(x, W)[1](c)
    assert interpreted_entries(compiled) == {"jvp", "vjp", "split_vjp"}
    expected = ad.jvp(two_args, (x, W), (v, np.zeros_like(W)))
    expected_g = ad.vjp(two_args, x, W)[1](c)
    for got, got_g in ((first, first_g), (later, later_g)):
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-13)
        np.testing.assert_allclose(got_g[0], expected_g[0], rtol=1e-13)
        np.testing.assert_allclose(got_g[1], expected_g[1], rtol=1e-13)
    hvp = ad.record(scalar_model, X).compile()
    first_h = hvp.hvp((x,), v)  # the recorded program's replay, while it compiles
    assert hvp.wait()
    later_h = hvp.hvp((x,), v)
    for h in (first_h, later_h):
        np.testing.assert_allclose(h, ad.hvp(scalar_model, x, v), rtol=1e-12)
    assert hvp._hvps[0, 1]._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")
    strict = ad.record(two_args, X, W).compile(fallback="error")
    strict.jvp((x, W), (v, np.zeros_like(W)))
    assert interpreted_entries(strict) == {"jvp"}


@pytest.fixture
def no_sin_opcode(monkeypatch):
    """An interpreter without an opcode for np.sin (as for a function it cannot run)."""
    import dualad.tape.interpreter as interpreter

    ops = interpreter_opcodes()
    fewer = {k: v for k, v in ops.items() if not (k[0] == "map" and k[1] == "sin")}
    monkeypatch.setattr(interpreter, "interpreter_opcodes", lambda: fewer)


def test_a_program_neither_compiled_nor_interpreted_replays(small_cap, no_sin_opcode):
    compiled = ad.record(two_args, X, W).compile()
    v = np.array([0.3, -1.0, 0.5])
    with pytest.warns(JitFallbackWarning, match="jvp: .*MAX_COMPILE_COST.*nor interpret "
                                                "it.*np.sin"):
        got = compiled.jvp((X, W), (v, W))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # said once
        again = compiled.jvp((X * 2, W), (v, W))
    np.testing.assert_allclose(got[1], ad.jvp(two_args, (X, W), (v, W))[1], rtol=1e-13)
    np.testing.assert_allclose(again[1], ad.jvp(two_args, (X * 2, W), (v, W))[1],
                               rtol=1e-13)
    strict = ad.record(two_args, X, W).compile(fallback="error")
    with pytest.raises(ad.JitError, match="vjp: .*nor interpret it.*np.sin"):
        strict.vjp(X, W)


@settings(max_examples=int(os.environ.get("DUALAD_INTERPRETER_EXAMPLES", "8")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(max_ops=8, max_inputs=1))
def test_random_programs_agree_with_eager(small_cap, program):
    """The tape differential guard through tape.compile()'s jvp and vjp, interpreted
    (programs that do not lower have nothing to compare)."""
    x = program.inputs[0]
    rng = np.random.default_rng(0)
    t = rng.standard_normal(np.shape(x))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        compiled = ad.record(program, x).compile(fallback="error")  # nothing replays
        try:
            out, tangent = compiled.jvp((x,), (t,))
            value, pullback = compiled.vjp(x)
        except ad.JitError:
            return
        eager_out, eager_tangent = ad.jvp(program, (x,), (t,))
        c = rng.standard_normal(np.shape(eager_out))
        (g,) = pullback(c)
        (eg,) = ad.vjp(program, x)[1](c)
    assert interpreted_entries(compiled) == {"jvp", "vjp", "split_vjp"}
    np.testing.assert_allclose(out, eager_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tangent, eager_tangent, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(value, eager_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, eg, rtol=1e-10, atol=1e-10)
    assert np.shape(g) == np.shape(eg) and np.shape(tangent) == np.shape(eager_tangent)
