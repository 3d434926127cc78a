"""ad.jit of calls linear in their one computed argument (np.trace, np.convolve and
np.correlate with a constant operand, np.cumsum, np.diff, np.kron / np.outer / np.tensordot /
np.einsum with a constant, ...) and of large reductions (np.max / np.sum over axes of
thousands of entries): compiled against eager mode and central differences, in the
straight-line code and in the interpreter; two computed operands run as a call in the
glue (numpy's own, between the compiled parts), which says why."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import dualad as ad
import dualad.tape.linear_probes as probes
from dualad.diagnostics.gradcheck import gradcheck, numerical_jacobian
from dualad.tape import record
from dualad.tape.lowering import Call, lower

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import mlp  # noqa: E402

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py

RNG = np.random.default_rng(7)
C = RNG.standard_normal((4, 3))
K = np.linspace(-1.0, 1.0, 5) ** 2 + 0.1
KERNEL = np.linspace(-1.0, 1.0, 9) ** 2  # benchmarks/coverage.py's


def compiled(fn):
    return ad.jit(fn, fallback="error")  # fails if anything runs in Python


def interpreted(fn):
    """``ad.jit(fn, fallback="error")`` whose calls must reach the interpreter."""
    jitted = ad.jit(fn, fallback="error")

    def call(*args):
        result = jitted(*args)
        kernel = jitted._fast_entry.kernel if jitted._fast_entry is not None else None
        assert kernel is not None and kernel.__qualname__.startswith("InterpretedProgram."), \
            "the call did not run in the interpreter"
        return result

    return call


# (name, function of x returning an array, shapes of x)
LINEAR = [
    ("trace", lambda x: np.trace(x) * np.sin(x), [(3, 3), (4, 2)]),
    ("trace offset", lambda x: np.trace(np.cos(x), -1) + x, [(4, 4), (3, 5)]),
    ("trace 3-d", lambda x: np.trace(x * x, axis1=0, axis2=2), [(3, 2, 3)]),
    ("convolve same", lambda x: np.convolve(np.sin(x), K, "same"), [(7,), (12,), ()]),
    ("convolve full", lambda x: np.convolve(K, x * x), [(3,), (8,)]),
    ("convolve valid", lambda x: np.convolve(x, K, "valid"), [(6,), (11,)]),
    ("correlate", lambda x: np.correlate(np.tanh(x), K, "full"), [(7,), (1,)]),
    ("correlate kernel", lambda x: np.correlate(KERNEL, np.exp(x)), [(4,)]),
    ("cumsum", lambda x: np.cumsum(x * x), [(5,), (2, 3), ()]),
    ("cumsum axis", lambda x: np.cumsum(np.sin(x), axis=1) * x, [(3, 4)]),
    ("diff", lambda x: np.diff(np.sin(x)) * 2.0, [(6,)]),
    ("diff n=2 axis 0", lambda x: np.diff(x ** 3, n=2, axis=0), [(5, 2)]),
    ("diff prepend", lambda x: np.diff(x * x, prepend=1.5), [(4,)]),
    ("kron", lambda x: np.kron(C[:2, :2], np.sin(x)), [(2, 3)]),
    ("kron right", lambda x: np.kron(x * x, C), [(2,)]),
    ("outer", lambda x: np.outer(np.sin(x), K), [(3,), ()]),
    ("outer left", lambda x: np.outer(K, x ** 2), [(2, 2)]),
    ("tensordot", lambda x: np.tensordot(C, np.sin(x), axes=1), [(3, 2), (3,)]),
    ("tensordot all", lambda x: np.tensordot(C, x * x, axes=2) * x, [(4, 3)]),
    ("einsum", lambda x: np.einsum("ij,jk->ik", C, np.sin(x)), [(3, 5)]),
    ("einsum broadcast", lambda x: np.einsum("ij,j->i", C, x) + np.sum(x), [(3,)]),
    ("einsum trace", lambda x: np.einsum("ii", np.exp(x)) * x, [(3, 3)]),
    ("vdot", lambda x: np.vdot(C, np.sin(x)) * x, [(4, 3)]),
    ("cross", lambda x: np.cross(C[0, :3], np.sin(x)), [(3,), (2, 3)]),
    ("linalg.trace", lambda x: np.linalg.trace(x * x)[..., None, None] * x, [(3, 3), (2, 3, 3)]),
    ("polyval", lambda x: np.polyval(np.sin(x), np.linspace(0.0, 1.0, 4)), [(3,)]),
    ("average", lambda x: np.average(x * x, axis=0, weights=[0.2, 0.5, 1.5]) * x, [(3, 2)]),
    ("trapezoid", lambda x: np.trapezoid(x ** 2, dx=0.5) * x, [(5,)]),
]
CASES = [pytest.param(f, shape, id=f"{name}-{shape}") for name, f, shapes in LINEAR
         for shape in shapes]


def point(shape, shift=0.0):
    n = int(np.prod(shape, dtype=np.int64))
    return (np.linspace(-0.8, 0.9, n) + 0.13 * np.arange(n) % 0.3 + shift).reshape(shape)


def loss(f):
    return lambda x: np.sum(f(x) ** 2)


@pytest.mark.parametrize("f, shape", CASES)
def test_values_gradients_and_jacobians_compile(f, shape):
    value, grad = compiled(f), compiled(ad.grad(loss(f)))
    jac = compiled(ad.jacobian(f))
    for shift in (0.0, 0.37):  # the recorded point and another one
        x = point(shape, shift)
        np.testing.assert_allclose(value(x), f(x), rtol=1e-12, atol=1e-13)
        g = grad(x)
        assert np.shape(g) == np.shape(x)
        np.testing.assert_allclose(g, ad.grad(loss(f))(x), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(g, numerical_jacobian(loss(f), (x,), 0), rtol=1e-6,
                                   atol=1e-7)
        J = jac(x)
        np.testing.assert_allclose(J, ad.jacobian(f, mode="reverse")(x), rtol=1e-12,
                                   atol=1e-13)
        np.testing.assert_allclose(J, numerical_jacobian(f, (x,), 0).reshape(J.shape),
                                   rtol=1e-6, atol=1e-7)
    gradcheck(loss(f), point(shape, 0.11))  # eager forward and reverse mode agree too


@pytest.mark.parametrize("f, shape", [CASES[0], CASES[4], CASES[8], CASES[14], CASES[19]])
def test_the_interpreter_runs_them_too(small_cap, f, shape):
    grad = interpreted(ad.grad(loss(f)))
    for shift in (0.0, -0.21):
        x = point(shape, shift)
        np.testing.assert_allclose(grad(x), ad.grad(loss(f))(x), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(grad(x), numerical_jacobian(loss(f), (x,), 0), rtol=1e-6,
                                   atol=1e-7)
    x = point(shape, 0.3)
    np.testing.assert_allclose(interpreted(f)(x), f(x), rtol=1e-12, atol=1e-13)


SECOND_ORDER = [
    lambda x: np.sum(np.convolve(np.sin(x), K, "same") ** 2),
    lambda x: np.sum(np.cumsum(np.sin(x)) ** 3),
    lambda x: np.sum(np.tanh(np.diff(x))) + np.trace(np.sin(x).reshape(3, 4)) ** 2,
    lambda x: np.sum(np.max(np.sin(x).reshape(3, -1), axis=1) ** 3),
]


@pytest.mark.parametrize("f", SECOND_ORDER, ids=["convolve", "cumsum", "diff-trace", "max"])
def test_hessians_and_hvps_compile(f):
    """Their recordings hold the calls' gradient rules: linear calls of a computed
    cotangent (np.convolve of the adjoint with the reversed kernel, ...)."""
    H, hvp = compiled(ad.hessian(f)), compiled(lambda x, v: ad.hvp(f, x, v))
    for shift in (0.0, 0.2):
        x = np.linspace(-1.0, 1.0, 12) + shift
        v = np.cos(3.0 * x)
        np.testing.assert_allclose(H(x), ad.hessian(f)(x), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(hvp(x, v), ad.hvp(f, x, v), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(H(x), numerical_jacobian(ad.grad(f), (x,), 0), rtol=1e-6,
                                   atol=1e-6)


# -- the benchmark programs ------------------------------------------------------------------

def trace_of_product(a, b):
    return np.trace(a @ b)


@pytest.mark.parametrize("n", [1, 30, 300])
def test_the_gradient_of_a_trace_of_a_product(n):
    g = compiled(ad.grad(trace_of_product, argnums=(0, 1)))
    for seed in (0, 1):
        r = np.random.default_rng(seed)
        a, b = r.standard_normal((n, n)), r.standard_normal((n, n))
        ga, gb = g(a, b)
        np.testing.assert_allclose(ga, b.T, rtol=1e-14)  # the exact gradients
        np.testing.assert_allclose(gb, a.T, rtol=1e-14)
        value, grads = compiled(ad.value_and_grad(trace_of_product, argnums=(0, 1)))(a, b)
        np.testing.assert_allclose(value, np.trace(a @ b), rtol=1e-12)
        np.testing.assert_allclose(grads[0], ga, rtol=1e-14)
        np.testing.assert_allclose(grads[1], gb, rtol=1e-14)
    if n == 1:
        return
    small = tuple(np.random.default_rng(3).standard_normal((2, n, n))[:, :3, :3])
    g3 = compiled(ad.grad(trace_of_product, argnums=(0, 1)))
    for k in (0, 1):
        np.testing.assert_allclose(g3(*small)[k], numerical_jacobian(trace_of_product, small, k),
                                   rtol=1e-7, atol=1e-8)


def smooth_energy(x):
    return np.sum(np.convolve(x, KERNEL, "same") ** 2)


@pytest.mark.parametrize("n", [100, 1000, 10000])
def test_the_gradient_of_a_convolution_with_a_constant_kernel(n):
    g = compiled(ad.grad(smooth_energy))
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal(n)
        np.testing.assert_allclose(g(x), ad.grad(smooth_energy)(x), rtol=1e-11, atol=1e-12)
    x = np.random.default_rng(5).standard_normal(12)
    np.testing.assert_allclose(compiled(ad.grad(smooth_energy))(x),
                               numerical_jacobian(smooth_energy, (x,), 0), rtol=1e-6,
                               atol=1e-7)


@pytest.mark.parametrize("n, d", [(64, 32), (512, 256)])
def test_the_mlp_gradient_with_large_reductions(n, d):
    """np.max and np.sum over rows of 5120 entries at 512 x 256 (beyond the size cap that
    probing columns had)."""
    params, x, onehot = mlp.problem(n, d)
    argnums = (0, 1, 2, 3)
    g = compiled(ad.grad(mlp.loss, argnums=argnums))
    for shift in (0.0, 0.05):
        ps = tuple(p + shift for p in params)
        got = g(*ps, x, onehot)
        by_hand = mlp.by_hand(*ps, x, onehot)
        eager = ad.grad(mlp.loss, argnums=argnums)(*ps, x, onehot)
        for a, b, c in zip(got, eager, by_hand):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("shape, axis", [((512, 10), 1), ((10, 600), 0), ((5000,), None)])
def test_large_maxima_and_sums_over_axes(shape, axis):
    def f(x):
        return np.sum(np.max(x, axis=axis) ** 2) + np.sum(np.mean(x * x, axis=axis))

    g = compiled(ad.grad(f))
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal(shape)
        np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-12, atol=1e-14)
    tied = np.ones(shape)  # ties share the derivative, as in eager mode
    np.testing.assert_allclose(g(tied), ad.grad(f)(tied), rtol=1e-12, atol=1e-14)


# -- what has no compiled form: a call in the glue, which says why --------------------------

REFUSED = [
    (lambda x: np.sum(np.convolve(x, np.sin(x))), r"Method\[convolve\]\(\) of two computed "
                                                  r"values .* declared linear in each"),
    (lambda x: np.sum(np.correlate(x, x * 2.0, "same")), r"Method\[correlate\]\(\) of two"),
    (lambda x: np.sum(np.kron(x, np.cos(x))), r"Method\[kron\]\(\) of two computed values"),
    (lambda x: np.linalg.norm(x), r"Method\[norm\]\(\) has no compiled form"),
    (lambda x: np.sum(np.ptp(np.sin(x).reshape(2, 2), axis=0)),  # max - min: piecewise
     r"Method\[ptp\]\(\) is not linear in its computed argument"),
]


def calls_in(f, x):
    low = lower(record(f, x).program, [x])
    return [ins.why for ins in low.instructions if isinstance(ins, Call)]


@pytest.mark.parametrize("f, reason", REFUSED)
def test_what_is_not_linear_in_one_value_runs_as_a_call_that_says_why(f, reason):
    x = np.array([0.3, -0.2, 1.1, 0.5])
    whys = calls_in(f, x)
    assert len(whys) == 1 and re.search(reason, whys[0]), whys
    for point in (x, x[::-1] * 1.5):  # the call's numbers are eager mode's
        np.testing.assert_allclose(compiled(f)(point), f(point), rtol=1e-14)
        g = compiled(ad.grad(f))(point)
        np.testing.assert_allclose(g, ad.grad(f)(point), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, numerical_jacobian(f, (point,), 0), rtol=1e-6,
                                   atol=1e-8)


def test_beyond_the_cap_such_calls_fall_back_and_say_why(small_cap):
    f, reason = REFUSED[0]
    x = np.array([0.3, -0.2, 1.1, 0.5])
    with pytest.raises(ad.JitError, match=reason):
        interpreted(ad.grad(f))(x)


def test_a_matrix_too_large_to_hold_runs_as_a_call(monkeypatch):
    monkeypatch.setattr(probes, "MAX_MATRIX_ENTRIES", 1000)
    f = lambda x: np.sum(np.cumsum(x) ** 2)  # noqa: E731 - 50 x 50, lower triangle
    x = np.linspace(0.0, 1.0, 50)
    whys = calls_in(f, x)
    assert len(whys) == 1 and re.search(r"Method\[cumsum\]\(\) on 50 entries is a 50 x 50 "
                                        r"matrix of 1275 entries, too many to hold", whys[0])
    np.testing.assert_allclose(compiled(ad.grad(f))(x), ad.grad(f)(x), rtol=1e-12)
