"""Matrix products of computed values under ``ad.jit``: dot products of two computed
vectors, products with one-entry operands, and the BLAS calls of matrix products, both in
the straight-line compiled code and in the compiled interpreter (programs beyond the
compile-cost cap), against eager mode and central differences."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dualad as ad
import dualad.tape.numba_backend as backend
from dualad.diagnostics.gradcheck import numerical_jacobian

pytestmark = [pytest.mark.usefixtures("kernel_cache"),  # see conftest.py
              pytest.mark.filterwarnings("ignore::dualad.tape.tape.TapeRetraceWarning")]


@pytest.fixture(params=["straight-line", "interpreter"])
def compiled(request, monkeypatch):
    """``ad.jit(fn, fallback="error")`` whose calls must run in the straight-line compiled
    code, or (with a compile-cost cap every program exceeds) in the interpreter."""
    interpreted = request.param == "interpreter"
    if interpreted:
        monkeypatch.setattr(backend, "MAX_COMPILE_COST", 1)

    def make(fn):
        jitted = ad.jit(fn, fallback="error")

        def call(*args):
            result = jitted(*args)
            kernel = jitted._fast_entry.kernel if jitted._fast_entry is not None else None
            assert kernel is not None
            assert kernel.__qualname__.startswith("InterpretedProgram.") == interpreted
            return result

        return call

    return make


def dot_sin_cos(x):
    return np.sin(x) @ np.cos(x)


def dot_function(x):
    return np.dot(x * x, np.exp(-x))


def dot_with_itself(x):
    return x @ x


def dot_in_a_vector(x):  # a 0-d product broadcast into further elementwise code
    return np.tanh(np.sin(x) @ x) * x + np.cos(x)


def dot_of_one_entry(x):  # vectors of one entry: the product of two numbers
    return np.sin(x[:1]) @ np.exp(x[1:2])


def number_times_row(x):  # (1,) @ (1, n - 1) and (n - 1, 1) @ (1,)
    return np.sin(x[:1]) @ np.cos(x[None, 1:]) + np.exp(x[1:, None]) @ x[:1]


def dot_of_dots(x):  # a dot product read by another one
    return (x @ np.sin(x)) * (np.cos(x) @ np.cos(x)) + np.tanh(x) @ (x * (x @ x))


def inner_vdot_vecdot(x):  # other functions that are a dot product of two real vectors
    return (np.inner(np.sin(x), x) + np.vdot(np.cos(x), x * x) + np.vecdot(x, np.exp(x))
            + np.inner(x, x) + np.einsum("i,i", np.tanh(x), x))


SCALARS = [dot_sin_cos, dot_function, dot_with_itself, dot_of_one_entry, dot_of_dots,
           inner_vdot_vecdot]
VECTORS = [dot_in_a_vector, number_times_row]
POINTS = [np.linspace(0.1, 0.9, 5), np.array([-0.4, 1.3]), np.linspace(-1.0, 2.0, 12)]


@pytest.mark.parametrize("f", SCALARS, ids=lambda f: f.__name__)
def test_dot_products_gradients(compiled, f):
    value, grad = compiled(f), compiled(ad.grad(f))
    for x in POINTS:
        for at in (x, 1.7 * x):  # the second point reuses the compiled code
            np.testing.assert_allclose(value(at), f(at), rtol=1e-13)
            g = grad(at)
            np.testing.assert_allclose(g, ad.grad(f)(at), rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(g, numerical_jacobian(f, (at,), 0), rtol=1e-6,
                                       atol=1e-8)


@pytest.mark.parametrize("f", SCALARS + VECTORS, ids=lambda f: f.__name__)
def test_dot_products_jacobians_both_modes(compiled, f):
    forward = compiled(ad.jacobian(f, mode="forward"))
    reverse = compiled(ad.jacobian(f, mode="reverse"))
    for x in POINTS:
        expected = numerical_jacobian(f, (x,), 0)
        eager = ad.jacobian(f)(x)
        for J in (forward(x), reverse(x)):
            assert np.shape(J) == np.shape(eager)
            np.testing.assert_allclose(J, eager, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(np.reshape(J, expected.shape), expected, rtol=1e-6,
                                       atol=1e-8)


def test_dot_product_hessian_and_two_arguments(compiled):
    def f(u, v):
        return np.sin(u) @ (v * v) + (u @ v) ** 2

    u, v = np.linspace(-0.5, 0.7, 4), np.linspace(0.3, 1.1, 4)
    g = compiled(ad.grad(f, argnums=(0, 1)))(u, v)
    for k in (0, 1):
        np.testing.assert_allclose(g[k], ad.grad(f, argnums=k)(u, v), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g[k], numerical_jacobian(f, (u, v), k), rtol=1e-6,
                                   atol=1e-8)
    H = compiled(ad.hessian(lambda u: f(u, v)))(u)
    np.testing.assert_allclose(H, ad.hessian(lambda u: f(u, v))(u), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((5, 2), (2, 3)), ((1, 3), (3, 4)),
                                    ((4, 3), (3, 1)), ((4, 1), (1, 3)), ((2, 6), (6,)),
                                    ((6,), (6, 2))])
def test_matrix_products_every_transpose(compiled, shapes):
    """The BLAS calls of values (``a @ b``) and adjoints (``g @ b.T``, ``a.T @ g``),
    operands read through transposes too."""
    sa, sb = shapes
    a = np.cos(np.arange(np.prod(sa), dtype=float)).reshape(sa)
    b = np.sin(1.0 + np.arange(np.prod(sb), dtype=float)).reshape(sb)

    def f(a, b):
        return np.sum(np.tanh(np.sin(a) @ (b * b)) ** 2)

    def g(a, b):  # transposed operands and a product read by another product
        left = (np.exp(a) if a.ndim == 1 else np.exp(a.T).T)
        p = left @ b
        return np.sum(np.sin(p) * p)

    for fn in (f, g):
        grad = compiled(ad.grad(fn, argnums=(0, 1)))(a, b)
        for k in (0, 1):
            np.testing.assert_allclose(grad[k], ad.grad(fn, argnums=k)(a, b), rtol=1e-12,
                                       atol=1e-14)
            np.testing.assert_allclose(grad[k], numerical_jacobian(fn, (a, b), k), rtol=1e-6,
                                       atol=1e-8)


def test_a_scalar_of_two_vectors_that_is_no_dot_product_runs_as_itself():
    """The dot-product form is probed: ``np.trapezoid(y, x)`` (two computed vectors, a 0-d
    result) is not one: it runs as a numpy call between the compiled parts."""
    def f(x):
        return np.trapezoid(np.sin(x), x * x)

    x = np.linspace(0.1, 0.9, 5)
    g = ad.jit(ad.grad(f), fallback="error")
    np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-14)
    np.testing.assert_allclose(g(x), numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)


def test_products_in_the_batch_loop():
    """``.batch`` fuses the kernel into a loop over rows (buffers allocated once per
    chunk, rows over threads): the BLAS calls and dot products write every entry again."""
    def f(x):
        a, b = np.sin(x[:6]).reshape(2, 3), np.cos(x[6:]).reshape(3, 2)
        return np.tanh(a @ b).ravel() * (x[:3] @ x[3:6])

    def loss(x):
        return np.sum(f(x) ** 2)

    xs = np.random.default_rng(5).standard_normal((20, 12))
    for transform in (ad.jacobian(f), ad.grad(loss)):
        got = ad.jit(transform, fallback="error").batch(xs)
        np.testing.assert_allclose(got, np.stack([transform(x) for x in xs]), rtol=1e-12,
                                   atol=1e-14)


_SCRIPT = """
import numpy as np, dualad as ad
def loss(w, x):
    h = np.tanh(x @ w)
    return np.sum(h.T @ h) + np.sin(x[0]) @ np.cos(x[1])
g = ad.jit(ad.grad(loss, argnums=(0, 1)), fallback="error")
w, x = np.linspace(-1.0, 1.0, 12).reshape(4, 3), np.linspace(0.5, 2.0, 20).reshape(5, 4)
print(repr([a.tolist() for a in g(w, x)]))
print(repr([a.tolist() for a in ad.grad(loss, argnums=(0, 1))(w, x)]))
"""


def test_blas_calls_load_from_the_disk_cache_in_a_new_process(tmp_path):
    """Compiled code refers to the BLAS wrappers by name: a new process loads it from the
    disk cache (the second run writes no cache file again) and gets the same numbers."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, DUALAD_KERNEL_CACHE=str(tmp_path), PYTHONPATH=str(root))
    env.pop("NUMBA_CACHE_DIR", None)
    outputs, files = [], []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                              text=True, cwd=root)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.splitlines())
        files.append({p: p.stat().st_mtime_ns for p in (tmp_path / "tapes").rglob("*.nb*")})
    assert files[0], "no Numba cache was written"
    assert files[1] == files[0], "the second process compiled again"
    assert outputs[0] == outputs[1]
    compiled, eager = (ast.literal_eval(line) for line in outputs[0])
    for c, e in zip(compiled, eager):
        np.testing.assert_allclose(c, e, rtol=1e-12, atol=1e-14)
