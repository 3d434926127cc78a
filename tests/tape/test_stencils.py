"""Banded constant matrices written as stencils (dualad/tape/stencils.py): the diagonals
hold the matrix exactly; compiled gradients and values through them match eager mode and
central differences (an infinite entry too, where a diagonal with a gap would give NaN)."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
import dualad.tape.numba_backend as numba_backend
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.stencils import stencil, transposed

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py

K = np.array([0.3, -1.0, 2.0, 0.5, 0.25])


def csr(a):
    rows, cols = np.nonzero(a)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=a.shape[0]))])
    return ptr.astype(np.intp), cols.astype(np.intp), a[rows, cols]


def rebuilt(s, m, n):
    """The matrix from the stencil's diagonals."""
    out = np.zeros((m, n))
    for k, d in enumerate(s.offsets):
        i = np.arange(s.lo[k], s.hi[k])
        assert np.all(out[i, i + d] == 0.0)
        out[i, i + d] = s.coefficients[k * m + i]
    return out


@pytest.mark.parametrize("a", [
    np.column_stack([np.convolve(e, K, "same") for e in np.eye(100)]),
    np.column_stack([np.convolve(e, K, "full") for e in np.eye(90)]),
    np.column_stack([np.convolve(e, K, "valid") for e in np.eye(120)]),
    np.diff(np.eye(80), n=2, axis=0),
    np.eye(70, 75, 3) * np.linspace(1.0, 2.0, 75) + np.eye(70, 75, -2),
], ids=["same", "full", "valid", "diff", "shifted"])
def test_a_stencil_and_its_edges_hold_the_matrix(a):
    ptr, ind, dat = csr(a)
    s = stencil(ptr, ind, dat, a.shape[1])
    np.testing.assert_array_equal(rebuilt(s, *a.shape), a)
    tptr, tind, tdat = transposed(ptr, ind, dat, a.shape[1])
    np.testing.assert_array_equal(rebuilt(stencil(tptr, tind, tdat, a.shape[0]), *a.shape[::-1]),
                                  a.T)


def test_what_is_not_banded_keeps_its_csr_form():
    r = np.random.default_rng(0)
    scattered = (r.random((100, 100)) < 0.05) * 1.0
    assert stencil(*csr(scattered), 100) is None  # many diagonals, few entries on each
    assert stencil(*csr(np.eye(10)), 10) is None  # small: CSR
    assert stencil(*csr(np.ones((100, 3))), 3) is None  # 102 diagonals
    blocks = np.kron(np.eye(25), np.tril(np.ones((4, 4))))  # cumsum along rows of 4
    assert stencil(*csr(blocks), 100) is None  # diagonals with gaps: a zero would read
    gap = np.eye(100) + np.eye(100, k=1)
    gap[50, 51] = 0.0
    assert stencil(*csr(gap), 100) is None


CASES = [
    lambda x: np.convolve(np.sin(x), K, "same"),
    lambda x: np.convolve(K, x * x),
    lambda x: np.correlate(np.tanh(x), K, "valid"),
    lambda x: np.diff(np.sin(x), n=2) * x[1:-1],
    lambda x: np.cumsum(np.sin(x).reshape(-1, 4), axis=1).ravel() * x,
]


@pytest.mark.parametrize("n", [64, 300])
@pytest.mark.parametrize("f", CASES, ids=["same", "full", "valid", "diff", "cumsum"])
def test_compiled_through_stencils(f, n, monkeypatch):
    found = []

    def spy(*args, **kwargs):
        s = stencil(*args, **kwargs)
        found.append(s is not None)
        return s

    monkeypatch.setattr(numba_backend, "stencil", spy)
    loss = lambda x: np.sum(f(x) ** 2)  # noqa: E731
    value, grad = ad.jit(f, fallback="error"), ad.jit(ad.grad(loss), fallback="error")
    vg = ad.jit(ad.value_and_grad(loss), fallback="error")
    for shift in (0.0, 0.3):
        x = np.linspace(-1.0, 1.2, n) + shift
        np.testing.assert_allclose(value(x), f(x), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(grad(x), ad.grad(loss)(x), rtol=1e-12, atol=1e-12)
        v, g = vg(x)
        np.testing.assert_allclose(v, loss(x), rtol=1e-12)
        np.testing.assert_allclose(g, ad.grad(loss)(x), rtol=1e-12, atol=1e-12)
    x = np.linspace(-1.0, 1.2, n)
    np.testing.assert_allclose(grad(x), numerical_jacobian(loss, (x,), 0), rtol=1e-6, atol=1e-6)
    J = ad.jit(ad.jacobian(f), fallback="error")(x)  # forward mode: CSR tangents
    np.testing.assert_allclose(J, ad.jacobian(f)(x), rtol=1e-12, atol=1e-13)
    assert any(found) == (f is not CASES[-1])  # cumsum along rows of 4: gaps, so CSR


def test_an_infinite_entry_reaches_only_its_diagonals():
    f = lambda x: np.convolve(x, K, "valid")  # noqa: E731
    x = np.linspace(0.0, 1.0, 100)
    x[50] = np.inf
    got = ad.jit(f, fallback="error")(x)
    np.testing.assert_array_equal(got, f(x))  # inf where x[50] reaches, numbers elsewhere


def test_batches_run_through_stencils():
    f = lambda x: np.convolve(np.sin(x), K, "same") * x  # noqa: E731
    loss = lambda x: np.sum(f(x) ** 2)  # noqa: E731
    xs = np.random.default_rng(0).standard_normal((5, 100))
    for fn in (f, ad.grad(loss)):
        got = ad.jit(fn, fallback="error").batch(xs)
        np.testing.assert_allclose(got, np.stack([fn(x) for x in xs]), rtol=1e-12, atol=1e-12)
