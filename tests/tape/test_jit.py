"""ad.jit: compiled transforms against eager mode and central differences, guards, new
shapes, fallbacks, Tape.compile and the disk cache."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.jit import JitFallbackWarning

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from strategies import programs  # noqa: E402

from benchmarks.stiff_problems import PROBLEMS  # noqa: E402

# The dense problems of the stiff test set: (name, right-hand side, hand-written Jacobian, y0).
MODELS = [(p.name, p.rhs, p.jac, p.y0) for p in PROBLEMS if not p.sparse]


pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def compiled_only(fn):
    """``ad.jit(fn, fallback="error")``: the test fails if anything runs in Python."""
    return ad.jit(fn, fallback="error")


def lorenz96(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0


# -- forward-mode Jacobians ------------------------------------------------------------------

@pytest.mark.parametrize("name, f, hand, y0", MODELS, ids=[m[0] for m in MODELS])
def test_stiff_ode_jacobians(name, f, hand, y0):
    jac = compiled_only(ad.ode_jacobian(f))
    rng = np.random.default_rng(1)
    for y in [y0, y0 * (1 + 0.1 * rng.standard_normal(y0.shape))]:
        J = jac(0.0, y)
        assert isinstance(J, np.ndarray) and J.shape == (y.size, y.size)
        np.testing.assert_allclose(J, ad.ode_jacobian(f)(0.0, y), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(J, hand(0.0, y), rtol=1e-12, atol=1e-12)
        fd = numerical_jacobian(lambda v: f(0.0, v), (y,), 0).reshape(y.size, y.size)
        np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(J).max()))


def test_ode_jacobian_in_solve_ivp():
    from scipy.integrate import solve_ivp

    name, f, hand, y0 = MODELS[0]  # Robertson
    kwargs = dict(method="BDF", rtol=1e-6, atol=1e-10)
    ours = solve_ivp(f, (0.0, 1e3), y0, jac=ad.jit(ad.ode_jacobian(f)), **kwargs)
    theirs = solve_ivp(f, (0.0, 1e3), y0, jac=hand, **kwargs)
    assert ours.success and ours.njev == theirs.njev
    np.testing.assert_allclose(ours.y[:, -1], theirs.y[:, -1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_lorenz96_jacobian_every_mode(mode):
    jac = compiled_only(ad.jacobian(lorenz96, mode=mode))
    for x in [np.linspace(-1, 2, 7), np.cos(np.arange(7.0))]:
        np.testing.assert_allclose(jac(x), ad.jacobian(lorenz96)(x), rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(jac(x), numerical_jacobian(lorenz96, (x,), 0), atol=1e-6)


def test_ode_jacobian_seeds_compressed_when_sparse():
    jac = compiled_only(ad.ode_jacobian(lambda t, y: lorenz96(y) * (1.0 + t)))
    for n in (12, 30):
        y = np.cos(np.arange(float(n)))
        J = jac(0.5, y)
        np.testing.assert_allclose(J, 1.5 * ad.jacobian(lorenz96)(y), rtol=1e-14, atol=1e-14)
    def compressed(e):
        return "compressed" in getattr(e.kernel, "__name__", "") or \
            "compressed" in getattr(getattr(e.kernel, "func", None), "__name__", "")

    assert all(compressed(e) for e in jac._entries.values())
    small = compiled_only(ad.ode_jacobian(lambda t, y: lorenz96(y) * (1.0 + t)))
    y = np.cos(np.arange(5.0))  # fewer inputs than MIN_COMPRESSED: every direction run
    np.testing.assert_allclose(small(0.5, y), 1.5 * ad.jacobian(lorenz96)(y), rtol=1e-14,
                               atol=1e-14)
    assert not any(compressed(e) for e in small._entries.values())


def test_jacobian_of_broadcasting_and_matrices():
    a = np.array([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]])

    def f(x, y):  # x (2, 3), y (3,): broadcasting, a constant matrix, a reduction on axis
        z = np.tanh(x * y) + np.exp(-y) / (1.0 + x ** 2)
        return np.sum(z * a, axis=1) + np.mean(np.transpose(z), axis=0) * y[0]

    x, y = np.linspace(-1, 1, 6).reshape(2, 3), np.array([0.3, -0.7, 1.1])
    for argnum, shape in [(0, (2, 2, 3)), (1, (2, 3))]:
        jac = compiled_only(ad.jacobian(f, argnums=argnum))
        J = jac(x, y)
        assert J.shape == shape
        np.testing.assert_allclose(J, ad.jacobian(f, argnums=argnum)(x, y), rtol=1e-13,
                                   atol=1e-14)


def test_zero_d_and_scalar_inputs():
    f = lambda x: np.sin(x) * x  # noqa: E731
    np.testing.assert_allclose(compiled_only(ad.jacobian(f))(np.array(0.7)),
                               np.cos(0.7) * 0.7 + np.sin(0.7))
    assert np.isclose(compiled_only(ad.grad(f))(0.7), np.cos(0.7) * 0.7 + np.sin(0.7))
    assert np.isclose(compiled_only(f)(0.7), np.sin(0.7) * 0.7)


# -- reverse-mode gradients ------------------------------------------------------------------

def chain(x, n=100):
    for _ in range(n // 3):
        x = np.sin(x) * 1.0001 + 0.1
    return x


def loss(w, x):
    h = np.tanh(x * w[:3] + w[3])
    return np.sum(h ** 2) / 4.0 + np.sum(np.abs(w)) * 1e-3


@pytest.mark.parametrize("f, args", [
    (chain, (0.3,)),
    (loss, (np.array([0.5, -0.2, 0.8, 0.1]), np.array([1.0, 2.0, -1.0]))),
    (lambda x: np.sum(np.sin(x) * x ** 2) + np.mean(np.roll(x, 1) * x), (np.linspace(0.1, 1, 5),)),
    (lambda x: np.sum(np.maximum(x, 0.0) + np.hypot(x, 1.0)), (np.array([-1.0, 0.0, 2.0]),)),
])
def test_gradients_match_eager_and_differences(f, args):
    g = compiled_only(ad.grad(f))
    vg = compiled_only(ad.value_and_grad(f))
    value = compiled_only(f)
    for scale in (1.0, 0.9):
        point = tuple(np.asarray(a) * scale if i == 0 else a for i, a in enumerate(args))
        point = (float(point[0]),) + point[1:] if np.ndim(args[0]) == 0 else point
        expected = ad.grad(f)(*point)
        np.testing.assert_allclose(g(*point), expected, rtol=1e-12, atol=1e-14)
        v, gv = vg(*point)
        np.testing.assert_allclose(v, f(*point), rtol=1e-13)
        np.testing.assert_allclose(gv, expected, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(value(*point), f(*point), rtol=1e-13)
        fd = numerical_jacobian(f, point, 0)
        np.testing.assert_allclose(g(*point), np.reshape(fd, np.shape(point[0])), atol=1e-6)


def test_mlp_gradient_in_all_parameters():
    def loss(w1, b1, w2, x, onehot):  # matrix products of computed values, a row maximum
        logits = np.tanh(x @ w1 + b1) @ w2
        m = np.max(logits, axis=1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
        return -np.sum(onehot * (logits - lse)) / x.shape[0]

    rng = np.random.default_rng(4)
    args = (rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 2)),
            rng.standard_normal((5, 3)), np.eye(2)[[0, 1, 1, 0, 1]])
    g = compiled_only(ad.grad(loss, argnums=(0, 1, 2)))
    vg = compiled_only(ad.value_and_grad(loss, argnums=(0, 1, 2)))
    for scale in (1.0, 0.5):
        point = (args[0] * scale,) + args[1:]
        expected = ad.grad(loss, argnums=(0, 1, 2))(*point)
        for got, want in zip(g(*point), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        value, grads = vg(*point)
        np.testing.assert_allclose(value, loss(*point), rtol=1e-13)
        assert len(grads) == 3
        fd = numerical_jacobian(loss, point, 2)
        np.testing.assert_allclose(g(*point)[2], fd.reshape(4, 2), atol=1e-6)


def test_row_maxima_and_minima_split_ties():
    f = lambda a: np.sum(np.max(a, axis=0) * np.min(a, axis=1, keepdims=True))  # noqa: E731
    a = np.array([[1.0, 2.0, 2.0], [0.5, 2.0, -1.0]])
    np.testing.assert_allclose(compiled_only(ad.grad(f))(a), ad.grad(f)(a), rtol=1e-14)
    np.testing.assert_allclose(compiled_only(ad.jacobian(lambda a: np.max(a, axis=1)))(a),
                               ad.jacobian(lambda a: np.max(a, axis=1))(a), rtol=1e-14)


def test_maximum_ties_split_as_eager():
    f = lambda x: np.sum(np.maximum(x, 1.0))  # noqa: E731
    x = np.array([1.0, 2.0, 0.0])
    np.testing.assert_allclose(compiled_only(ad.grad(f))(x), [0.5, 1.0, 0.0])


# -- hypothesis: random programs -------------------------------------------------------------

@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_ops=5, max_inputs=1))
def test_random_programs_compiled_or_replayed_agree_with_eager(program):
    x = program.inputs[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            expected = ad.jacobian(program, mode="forward")(x)
            got = ad.jit(ad.jacobian(program))(x)
            value = ad.jit(program)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(value, program(x), rtol=1e-12, atol=1e-12)


# -- recording semantics ---------------------------------------------------------------------

def test_new_shapes_compile_again():
    jac = compiled_only(ad.jacobian(lorenz96))
    for n in (5, 9, 5):
        x = np.linspace(0.5, 1.5, n)
        np.testing.assert_allclose(jac(x), ad.jacobian(lorenz96)(x), rtol=1e-14)
    assert jac.tape.recordings == 2


def test_guards_compile_and_record_again_when_they_fail():
    def f(x):
        if x[0] > 0:
            return np.sin(x) * 2.0
        return np.cos(x)

    jac = compiled_only(ad.jacobian(f))  # the branch compiles: no fallback
    J1 = jac(np.array([0.5, 1.0]))
    np.testing.assert_allclose(J1, np.diag(2 * np.cos([0.5, 1.0])))
    with pytest.warns(ad.TapeRetraceWarning):
        J2 = jac(np.array([-0.5, 1.0]))
    np.testing.assert_allclose(J2, np.diag(-np.sin([-0.5, 1.0])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both recordings kept: no further recording
        for x0 in (0.3, -0.3, 0.9):
            x = np.array([x0, 2.0])
            np.testing.assert_allclose(jac(x), ad.jacobian(f)(x))
    assert jac.tape.recordings == 2
    assert all(e is not None and e.program.ops for e in jac._entries.values())


def test_values_not_from_the_arguments_are_frozen():
    state = {"c": 2.0}

    def f(x):
        return x * state["c"]

    fn = compiled_only(f)
    np.testing.assert_allclose(fn(np.ones(2)), [2.0, 2.0])
    state["c"] = 5.0
    np.testing.assert_allclose(fn(np.ones(2)), [2.0, 2.0])  # frozen, as with jax.jit


def test_unsupported_operations_fall_back_once_or_raise():
    f = lambda x: np.sum(np.linalg.eigh(np.outer(x, x))[0] * x)  # noqa: E731 - two results
    x = np.array([3.0, 1.0, 2.0])
    g = ad.jit(ad.grad(f))
    with pytest.warns(JitFallbackWarning):
        first = g(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        second = g(x[::-1].copy())
    np.testing.assert_allclose(first, ad.grad(f)(x))
    np.testing.assert_allclose(second, ad.grad(f)(x[::-1].copy()))
    with pytest.raises(ad.JitError, match="fallback"):
        ad.jit(ad.grad(f), fallback="error")(x)
    with pytest.raises(ValueError, match="fallback"):
        ad.jit(f, fallback="never")


def test_outer_transforms_trace_through_a_jitted_function():
    fn = ad.jit(lambda x: np.sin(x) * x)
    x = np.array([0.3, 0.8])
    np.testing.assert_allclose(ad.jacobian(fn)(x), np.diag(np.cos(x) * x + np.sin(x)))


def test_a_fresh_tape_under_jacobian_auto_mode():
    # mode="auto" first calls the function with recording paused: a tape must not record
    # then (it would keep a program without operations, and a zero Jacobian)
    tape = ad.Tape(lambda x: np.sin(x) * x)
    x = np.array([0.3, 0.8])
    np.testing.assert_allclose(ad.jacobian(tape)(x), np.diag(np.cos(x) * x + np.sin(x)))


def test_wrong_arguments_take_the_general_path():
    jac = compiled_only(ad.jacobian(lorenz96))
    x = np.linspace(0.5, 1.5, 6)
    jac(x)
    np.testing.assert_allclose(jac(x.astype(np.float32)), ad.jacobian(lorenz96)(x), rtol=1e-6)
    with pytest.raises(TypeError):
        jac(x, x)


def test_fast_calls_refuse_what_was_not_compiled():
    def f(x, scale=2.0):
        return np.sin(x) * scale * x[0]

    jac = compiled_only(ad.jacobian(f))
    x = np.linspace(0.1, 1.0, 4)
    np.testing.assert_allclose(jac(x, 3.0), ad.jacobian(f)(x, 3.0), rtol=1e-14)
    np.testing.assert_allclose(jac(x), ad.jacobian(f)(x), rtol=1e-14)  # the default
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_allclose(jac(frozen, 3.0), ad.jacobian(f)(x, 3.0), rtol=1e-14)
    before = jac.tape.recordings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        np.testing.assert_allclose(jac(x[:3].copy(), 3.0), ad.jacobian(f)(x[:3], 3.0),
                                   rtol=1e-14)
    assert jac.tape.recordings == before + 1  # another size: another recording
    np.testing.assert_allclose(jac(x, np.float64(3.0)), ad.jacobian(f)(x, 3.0), rtol=1e-14)
    g = compiled_only(ad.grad(lambda a: np.sum(np.sin(a) * a[0])))
    a = np.arange(6.0).reshape(2, 3) / 7
    np.testing.assert_allclose(g(a), ad.grad(lambda a: np.sum(np.sin(a) * a[0]))(a))
    b = a.reshape(3, 2).copy()  # the same size, another shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        np.testing.assert_allclose(g(b), ad.grad(lambda a: np.sum(np.sin(a) * a[0]))(b))


def test_tape_compile():
    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    x = np.array([0.5, -0.3, 1.2])
    tape = ad.record(rosen, x)
    compiled = tape.compile(fallback="error")
    np.testing.assert_allclose(compiled(x), rosen(x))
    np.testing.assert_allclose(compiled.grad(x), ad.grad(rosen)(x), rtol=1e-13)
    v, g = compiled.value_and_grad(x)
    np.testing.assert_allclose(g, ad.grad(rosen)(x), rtol=1e-13)
    v_ = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(compiled.hvp((x,), v_), ad.hessian(rosen)(x) @ v_, rtol=1e-12)
    assert tape.recordings == 1


def test_batch():
    jac = compiled_only(ad.jacobian(lorenz96))
    xs = np.random.default_rng(0).standard_normal((5, 6))
    J = jac.batch(xs)
    assert J.shape == (5, 6, 6)
    for x, j in zip(xs, J):
        np.testing.assert_allclose(j, ad.jacobian(lorenz96)(x), rtol=1e-14)
    vg = compiled_only(ad.value_and_grad(lambda x: np.sum(x ** 3)))
    values, grads = vg.batch(xs)
    np.testing.assert_allclose(values, np.sum(xs ** 3, axis=1))
    np.testing.assert_allclose(grads, 3 * xs ** 2)


@pytest.mark.parametrize("parallel", [False, True])
def test_batch_loops_fused_serial_and_parallel(parallel):
    from dualad.tape.numba_backend import batch_kernel

    xs = np.random.default_rng(1).standard_normal((7, 12)) + 2.0
    expected = np.stack([ad.jacobian(lorenz96)(x) for x in xs])
    dense = compiled_only(ad.jacobian(lorenz96))  # seeds compressed, scatters into zeros
    dense(xs[0])
    fixed = ad.jit(lambda x, c: np.sin(x) * c + x[0], fallback="error")
    fixed(xs[0], 0.5)
    for fn, args, want in [(dense, (), expected),
                           (fixed, (0.5,), np.sin(xs) * 0.5 + xs[:, :1])]:
        loop = batch_kernel(fn._fast_entry.kernel, 1 + len(args), parallel)
        assert loop.parallel == parallel
        out = (np.zeros if loop.zeroed else np.empty)((len(xs),) + want.shape[1:])
        loop(out, xs, *args)
        np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(fn.batch(xs, *args), want, rtol=1e-14, atol=1e-14)
    assert batch_kernel(dense._fast_entry.kernel, 1, parallel).zeroed


def test_batch_rows_on_both_sides_of_a_guard():
    def f(x):
        if x[0] > 0:
            return np.sin(x) * x[1]
        return np.cos(x)

    jac = compiled_only(ad.jacobian(f))
    xs = np.array([[0.5, 1.0, 2.0], [-0.5, 1.0, 2.0], [0.2, -1.0, 0.3]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        J = jac.batch(xs)
        again = jac.batch(xs[::-1])
    for x, j, k in zip(xs, J, again[::-1]):
        np.testing.assert_allclose(j, ad.jacobian(f)(x), rtol=1e-14)
        np.testing.assert_allclose(k, ad.jacobian(f)(x), rtol=1e-14)
    scalar = compiled_only(ad.grad(lambda t: np.sin(t) * t))
    ts = np.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(scalar.batch(ts), np.cos(ts) * ts + np.sin(ts), rtol=1e-14)


# -- the disk cache --------------------------------------------------------------------------

_SCRIPT = """
import time, numpy as np, dualad as ad
def f(t, y):
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 3e7 * y[1] ** 2, y[0] * 0.5])
jac = ad.jit(ad.ode_jacobian(f), fallback="error")
start = time.perf_counter()
J = jac(0.0, np.array([1.0, 2.0, 3.0]))
print(repr(J.tolist()), time.perf_counter() - start)
"""


def _run(cache: Path) -> tuple[str, float]:
    env = dict(os.environ, DUALAD_KERNEL_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_CACHE_DIR", None)  # Numba's index files beside the generated modules
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    values, seconds = done.stdout.strip().rsplit(" ", 1)
    return values, float(seconds)


def test_disk_cache_across_processes_and_corrupt_entries(tmp_path):
    expected = repr(ad.ode_jacobian(lambda t, y: np.array(
        [-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 3e7 * y[1] ** 2, y[0] * 0.5]))(
        0.0, np.array([1.0, 2.0, 3.0])).tolist())
    first, _ = _run(tmp_path)
    assert first == expected
    cached = list((tmp_path / "tapes").rglob("*.nbi"))
    assert cached, "Numba wrote no cache index beside the generated module"
    second, _ = _run(tmp_path)
    assert second == expected
    for path in (tmp_path / "tapes").rglob("*"):  # corrupt every entry
        if path.suffix in (".nbi", ".nbc", ".py"):
            path.write_bytes(b"\x00garbage")
    third, _ = _run(tmp_path)
    assert third == expected


def test_sparse_jacobian_compressed_inside_compiled_code():
    def brusselator(y, n=4):
        u, v = y[:n * n].reshape(n, n), y[n * n:].reshape(n, n)

        def lap(a):
            return (np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1)
                    + np.roll(a, -1, 1) - 4 * a) * n * n

        uuv = u * u * v
        return np.concatenate([(1.0 + uuv - 4.4 * u + 10.0 * lap(u)).ravel(),
                               (3.4 * u - uuv + 10.0 * lap(v)).ravel()])

    jac = compiled_only(ad.sparse_jacobian(brusselator))
    rng = np.random.default_rng(3)
    for _ in range(2):
        y = rng.uniform(0.5, 2.0, 32)
        J = jac(y)
        expected = ad.sparse_jacobian(brusselator)(y)
        assert J.format == "csr" and J.shape == (32, 32) and J.nnz == expected.nnz
        np.testing.assert_allclose(J.toarray(), expected.toarray(), rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(J.toarray(), ad.jacobian(brusselator)(y), rtol=1e-13,
                                   atol=1e-12)


def test_strided_inputs_and_pickling():
    cloudpickle = pytest.importorskip("cloudpickle")  # transforms pickle with it (dask)

    jac = compiled_only(ad.jacobian(lorenz96))
    big = np.linspace(0.5, 2.0, 16)
    expected = ad.jacobian(lorenz96)(big[::2])
    np.testing.assert_allclose(jac(big[::2].copy()), expected, rtol=1e-14)
    np.testing.assert_allclose(jac(big[::2]), expected, rtol=1e-14)  # a strided view
    again = cloudpickle.loads(cloudpickle.dumps(jac))
    assert again.fallback == "error"
    np.testing.assert_allclose(again(big[::2]), expected, rtol=1e-14)


def test_matrix_vector_products_of_computed_values():
    rng = np.random.default_rng(4)
    A, v = rng.standard_normal((4, 3)), rng.standard_normal(3)
    w, x = rng.standard_normal(4), rng.standard_normal(3)
    cases = [
        (lambda A, v: np.sum(np.tanh(A @ v)), (A, v), 0),
        (lambda A, v: np.sum(np.tanh(A @ v)), (A, v), 1),
        (lambda A, w: np.sum(np.sin(w @ A) ** 2), (A, w), 1),
        (lambda x: np.sum(np.sin(x[:, None] @ x[None, :])), (x,), 0),  # an outer product
    ]
    for f, args, argnum in cases:
        g = compiled_only(ad.grad(f, argnums=argnum))
        for scale in (1.0, 1.3):
            at = tuple(a * scale for a in args)
            np.testing.assert_allclose(g(*at), ad.grad(f, argnums=argnum)(*at), rtol=1e-12,
                                       atol=1e-14)
            np.testing.assert_allclose(g(*at), numerical_jacobian(f, at, argnum), rtol=1e-6,
                                       atol=1e-8)
    hv = compiled_only(lambda x, v: ad.hessian(lambda y: np.sum(np.sin(y) * y ** 3))(x) @ v)
    H = ad.hessian(lambda y: np.sum(np.sin(y) * y ** 3))(x)
    np.testing.assert_allclose(hv(x, v), H @ v, rtol=1e-12, atol=1e-14)
    J = compiled_only(ad.jacobian(lambda A, w: np.sin(w @ A), argnums=1))(A, w)
    np.testing.assert_allclose(J, ad.jacobian(lambda A, w: np.sin(w @ A), argnums=1)(A, w),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("f, x", [
    (lambda x: np.sum(np.sin(x) * x ** 2), np.linspace(-1.0, 2.0, 7)),  # () of (n,)
    (lambda x: np.sin(x[:1]) * np.sum(x), np.array([0.3, -1.2, 2.5])),  # (1,) of (n,)
    (lambda x: np.sum(np.exp(x) * x[0, 1]), np.arange(6.0).reshape(2, 3) / 4),  # () of (2, 3)
    (lambda x: np.sin(x) * x, np.float64(0.7)),  # () of ()
    (lambda x: np.sum(np.sqrt(x)), np.array([0.0, 1.0, 4.0])),  # an infinite partial
])
def test_jacobian_of_one_output_entry_is_one_reverse_pass(f, x):
    """Unless ``mode="forward"``, the Jacobian of one output entry runs the gradient's
    compiled code, as eager ``mode="auto"`` chooses reverse mode; shapes, dtypes and
    numbers as eager mode's, at several points."""
    for mode in ("auto", "reverse", "forward"):
        jac = compiled_only(ad.jacobian(f, mode=mode))
        for point in (x, x * 0.5 + 0.25):
            with np.errstate(all="ignore"):
                got = jac(point)
                want = ad.jacobian(f, mode=mode)(point)
            assert type(got) is np.ndarray and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
        name = jac._fast_entry.kernel.py_func.__name__
        assert name == ("tape_jacobian" if mode == "forward" else "tape_gradient")
    inner = np.abs(x) + 0.5  # inside every domain
    fd = numerical_jacobian(f, (inner,), 0)
    np.testing.assert_allclose(compiled_only(ad.jacobian(f))(inner).reshape(fd.shape), fd,
                               rtol=1e-6, atol=1e-8)
    x32 = np.asarray(x, dtype=np.float32)
    got32 = compiled_only(ad.jacobian(f))(x32)
    assert got32.dtype == ad.jacobian(f)(x32).dtype
    xs = np.stack([inner, inner * 0.5 + 0.1, inner + 1.0])  # one compiled loop over rows
    batched = compiled_only(ad.jacobian(f)).batch(xs)
    want = np.stack([ad.jacobian(f)(row) for row in xs])
    assert batched.shape == want.shape
    np.testing.assert_allclose(batched, want, rtol=1e-13, atol=1e-14)
