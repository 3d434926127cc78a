"""ad.jit of gradients through indexing: the getitem gradient's scatter-add compiles (slices,
reversed slices, integers, fancy indices with duplicates, masks, 2-D keys), for vjp, hvp and hessian,
against eager mode and central differences, with ``fallback="error"``."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.numpy_rules.indexing import index_add
from dualad.tape import record
from dualad.tape.lowering import Linear, lower

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


IDX = np.array([0, 2, 2, 1, 4, 0])  # duplicates: their gradients must add up
MASK = np.array([True, False, True, True, False, True])


def sliced(x):
    return np.sum(np.sin(x[1:]) * x[:-1]) + np.sin(x[0]) * x[-1]


def reversed_slice(x):
    return np.sum(x[::-1] * np.cos(x)) + np.sum(x[-2::-2] * x[-2::-2])


def fancy(x):
    return (np.sum(np.exp(x[IDX]) * x[IDX[::-1]]) + np.sum(np.tanh(x[[3, 3, 3]]))
            + np.sum(np.sin(x[MASK]) * x[MASK][::-1]))


def matrix_keys(x):  # 2-D keys: rows, reversed columns, a single entry, fancy rows
    m = x.reshape(2, 3)
    return (np.sum(m[:, 1:] * m[:, :-1]) + np.sum(np.sin(m[1, ::-1]) * m[0])
            + m[1, 2] * m[0, 0] + np.sum(np.cosh(m[[1, 1, 0]])))


FUNCTIONS = [sliced, reversed_slice, fancy, matrix_keys]
RNG = np.random.default_rng(7)
POINTS = [RNG.standard_normal(6) for _ in range(3)]


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_vjp_compiles(f):
    pull = ad.jit(lambda x, c: ad.vjp(f, x)[1](c), fallback="error")
    for x in POINTS:
        for c in (1.0, -2.5):
            got = pull(x, c)
            got = got[0] if isinstance(got, tuple) else got
            want = ad.vjp(f, x)[1](c)
            want = want[0] if isinstance(want, tuple) else want
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            fd = numerical_jacobian(f, (x,), 0).reshape(-1)
            np.testing.assert_allclose(got, c * fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_hvp_compiles(f):
    hvp = ad.jit(lambda x, v: ad.hvp(f, x, v), fallback="error")
    for x in POINTS:
        H = numerical_jacobian(ad.grad(f), (x,), 0)
        for v in (np.ones(6), RNG.standard_normal(6)):
            got = hvp(x, v)
            np.testing.assert_allclose(got, ad.hvp(f, x, v), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got, H @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_hessian_compiles(f):
    hess = ad.jit(ad.hessian(f), fallback="error")
    for x in POINTS:
        got = hess(x)
        np.testing.assert_allclose(got, ad.hessian(f)(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got, numerical_jacobian(ad.grad(f), (x,), 0),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, got.T, rtol=1e-12, atol=1e-12)


def test_jacobian_of_a_vector_function_with_a_gradient_inside():
    def g(x):  # the gradient of a fancy-indexed function, a vector function of x
        return ad.grad(fancy)(x) * x[::-1]

    jac = ad.jit(ad.jacobian(g), fallback="error")
    for x in POINTS:
        np.testing.assert_allclose(jac(x), ad.jacobian(g)(x), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jac(x), numerical_jacobian(g, (x,), 0), rtol=1e-5,
                                   atol=1e-5)


def test_scatter_lowers_to_a_matrix_whose_duplicates_add_up():
    key = np.array([1, 1, 3, 1])
    tape = record(lambda v: index_add(v * 1.0, key, (5,)), np.ones(4))
    low = lower(tape.program, [np.ones(4)])
    scatter = [i for i in low.instructions if isinstance(i, Linear)]
    assert len(scatter) == 1
    ins = scatter[0]
    dense = np.zeros((5, 4))
    for row in range(5):
        for k in range(ins.indptr[row], ins.indptr[row + 1]):
            dense[row, ins.indices[k]] += ins.data[k]
    want = np.zeros((5, 4))
    np.add.at(want, (key, np.arange(4)), 1.0)
    np.testing.assert_array_equal(dense, want)
    v = np.array([0.5, -1.0, 2.0, 4.0])
    out = np.zeros(5)
    np.add.at(out, key, v)
    compiled = ad.jit(lambda v: index_add(v * 1.0, key, (5,)), fallback="error")
    np.testing.assert_array_equal(compiled(v), out)


def test_scatter_of_broadcast_values():
    # a scalar added into a slice and into repeated positions: each target gets it
    f = ad.jit(lambda s: index_add(s * 2.0, (np.array([0, 0, 2]),), (4,)), fallback="error")
    np.testing.assert_array_equal(f(np.float64(1.5)), [6.0, 0.0, 3.0, 0.0])
    g = ad.jit(lambda s: index_add(s * 1.0, slice(1, 3), (4,)), fallback="error")
    np.testing.assert_array_equal(g(np.float64(2.0)), [0.0, 2.0, 2.0, 0.0])


def test_derivatives_of_a_scatter_of_one_number():
    key = (np.array([0, 0, 2]),)
    weights = np.array([1.0, -2.0, 3.0, 0.5])

    def spread(s):
        return index_add(np.sin(s), key, (4,)) * weights

    def loss(s):
        return np.sum(spread(s) * spread(s))

    for s in (np.float64(0.4), np.float64(-1.3)):
        jac = ad.jit(ad.jacobian(spread), fallback="error")(s)
        np.testing.assert_allclose(jac, ad.jacobian(spread)(s), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jac, numerical_jacobian(spread, (s,), 0).reshape(jac.shape),
                                   rtol=1e-6, atol=1e-6)
        g = ad.jit(ad.grad(loss), fallback="error")(s)
        np.testing.assert_allclose(g, ad.grad(loss)(s), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, numerical_jacobian(loss, (s,), 0).reshape(()),
                                   rtol=1e-6, atol=1e-6)
