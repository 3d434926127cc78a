"""sparse_jacobian / sparse_hessian: equal to dense and finite-difference results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sparse_problems import (
    brusselator1d,
    brusselator2d,
    lorenz96,
    lorenz96_loop,
    rosenbrock,
    rosenbrock_hessian,
    rosenbrock_residuals,
)

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.sparse import jacobian_sparsity as ad_sparsity
from dualad.sparse import sparse_hessian, sparse_jacobian
from dualad.sparse.compressed import SparsityChangedWarning

RNG = np.random.default_rng(41)

JAC_CASES = {
    "brusselator2d N=5": (brusselator2d(5), 50),
    "brusselator1d": (brusselator1d(7), 14),
    "lorenz96": (lorenz96, 10),
    "lorenz96 loop": (lorenz96_loop, 6),
    "rosenbrock residuals": (rosenbrock_residuals, 9),
    "broadcast outer": (lambda x: (x[:3, None] * np.exp(x[None, 3:])).ravel(), 6),
    "2-d input": (lambda x: np.sum(x ** 2, axis=1) * x[:, 0], (4, 3)),
    "2-d output": (lambda x: x[:, None] * np.cos(x[None, :2]), 4),
}


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
@pytest.mark.parametrize("name", list(JAC_CASES))
def test_sparse_jacobian_equals_dense(name, mode):
    f, shape = JAC_CASES[name]
    jac = sparse_jacobian(f, mode=mode)
    for _ in range(2):  # the second call reuses the pattern and colouring
        x = RNG.uniform(0.5, 1.5, shape)
        got = jac(x)
        assert isinstance(got, sp.csr_array)
        dense = np.asarray(ad.jacobian(f)(x)).reshape(got.shape)
        fd = numerical_jacobian(f, (x,), 0).reshape(got.shape)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got.toarray(), fd, rtol=1e-5, atol=1e-5)


def test_pattern_is_detected_once():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return lorenz96(x)

    jac = sparse_jacobian(f)
    for _ in range(3):
        jac(RNG.uniform(size=8))
    assert calls.count("SparsityTracer") == 1
    assert calls.count("Dual") == 3


def test_branch_change_redetects_and_warns_once():
    traced = []

    def f(x):
        traced.append(type(x).__name__)
        if x[0] > 0:
            return x * x[1]
        return x * x[2]

    jac = sparse_jacobian(f)
    a = np.array([1.0, 2.0, 3.0, 4.0])
    b = np.array([-1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(jac(a).toarray(), ad.jacobian(f)(a))
    with pytest.warns(SparsityChangedWarning, match="misses nonzeros"):
        got = jac(b)
    np.testing.assert_allclose(got.toarray(), ad.jacobian(f)(b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(jac(a).toarray(), ad.jacobian(f)(a))  # no second warning
        np.testing.assert_allclose(jac(b).toarray(), ad.jacobian(f)(b))
    # detected twice: the joined pattern covers both branches afterwards
    assert traced.count("SparsityTracer") == 2


def test_given_sparsity_is_used_and_checked():
    f = lorenz96
    x = RNG.uniform(size=7)
    full = ad.jacobian(f)(x) != 0
    jac = sparse_jacobian(f, sparsity=sp.csr_array(full))
    np.testing.assert_allclose(jac(x).toarray(), ad.jacobian(f)(x))
    wrong = np.eye(7, dtype=bool)
    jac = sparse_jacobian(f, sparsity=wrong)
    with pytest.warns(SparsityChangedWarning, match="sparsity= given"):
        got = jac(x)
    np.testing.assert_allclose(got.toarray(), ad.jacobian(f)(x))


def test_wrong_sparsity_shape_names_both_shapes():
    jac = sparse_jacobian(lorenz96, sparsity=np.ones((5, 5)))
    with pytest.raises(ad.ShapeError, match=r"\(5, 5\).*7 entries"):
        jac(np.ones(7))
    jac = sparse_jacobian(lambda x: x[:3] * 2.0, sparsity=np.ones((5, 7)))
    with pytest.raises(ad.ShapeError, match=r"\(5, 7\).*\(3, 7\)"):
        jac(np.ones(7))


def test_arguments_and_errors():
    def f(a, x, scale):
        return scale * x * a[0]

    jac = sparse_jacobian(f, argnums=1)
    got = jac(np.array([2.0]), np.array([1.0, 2.0]), 3.0)
    np.testing.assert_allclose(got.toarray(), np.diag([6.0, 6.0]))
    with pytest.raises(ValueError, match="mode must be"):
        sparse_jacobian(f, mode="sideways")
    with pytest.raises(TypeError, match="argnums must be one int"):
        sparse_jacobian(f, argnums=(0, 1))
    with pytest.raises(TypeError, match="argnums=1"):
        jac(np.ones(2))


def test_constant_function_gives_empty_matrix():
    got = sparse_jacobian(lambda x: np.ones(4))(np.ones(3))
    assert got.shape == (4, 3) and got.nnz == 0


HESS_CASES = {
    "rosenbrock": (rosenbrock, 9),
    "sum of products": (lambda x: np.sum(x[1:] * x[:-1] ** 2) + np.exp(x[0]), 6),
    "quadratic form": (lambda x: x @ (np.diag(np.arange(1.0, 6.0)) @ x), 5),
    "prod": (lambda x: np.prod(x[:3]) + np.sum(np.sin(x[3:])), 6),
}


@pytest.mark.parametrize("name", list(HESS_CASES))
def test_sparse_hessian_equals_dense(name):
    f, n = HESS_CASES[name]
    hess = sparse_hessian(f)
    for _ in range(2):
        x = RNG.uniform(0.5, 1.5, n)
        got = hess(x)
        assert isinstance(got, sp.csr_array)
        dense = ad.hessian(f)(x)
        fd = numerical_jacobian(ad.grad(f), (x,), 0)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(got.toarray(), fd, rtol=1e-4, atol=1e-4)
        assert abs(got - got.T).max() == 0.0


def test_rosenbrock_hessian_large_is_exact():
    x = RNG.uniform(-1.0, 1.0, 2000)
    got = sparse_hessian(rosenbrock)(x)
    np.testing.assert_allclose(got.toarray(), rosenbrock_hessian(x), rtol=1e-13, atol=1e-10)
    assert got.nnz == 3 * 2000 - 2


def test_hessian_branch_change_and_bad_sparsity():
    def f(x):
        return x[0] * x[1] if x[2] > 0 else x[0] * x[2] + x[2] ** 2

    hess = sparse_hessian(f)
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(hess(a).toarray(), ad.hessian(f)(a))
    with pytest.warns(SparsityChangedWarning):
        np.testing.assert_allclose(hess(b).toarray(), ad.hessian(f)(b))
    with pytest.raises(ad.ShapeError, match="square"):
        sparse_hessian(f, sparsity=np.ones((2, 3)))
    with pytest.raises(ad.ShapeError, match=r"\(2, 2\).*3 entries"):
        sparse_hessian(f, sparsity=np.ones((2, 2)))(a)


def test_scalar_and_empty_inputs():
    got = sparse_jacobian(lambda x: np.stack([x ** 2, np.sin(x)]))(0.5)
    np.testing.assert_allclose(got.toarray(), [[1.0], [np.cos(0.5)]])
    got = sparse_jacobian(lambda x: x * 2.0)(np.zeros(0))
    assert got.shape == (0, 0)
    got = sparse_hessian(lambda x: x ** 3)(2.0)
    np.testing.assert_allclose(got.toarray(), [[12.0]])


def test_reverse_and_forward_agree_on_wide_outputs():
    # few outputs, many inputs: row colouring needs far fewer colours than columns
    def f(x):
        return np.stack([np.sum(x ** 2), np.sum(np.sin(x))])

    x = RNG.uniform(size=40)
    fwd = sparse_jacobian(f, mode="forward")(x)
    rev = sparse_jacobian(f, mode="reverse")(x)
    auto = sparse_jacobian(f)(x)
    np.testing.assert_allclose(fwd.toarray(), rev.toarray(), rtol=1e-13)
    np.testing.assert_allclose(auto.toarray(), ad.jacobian(f, mode="reverse")(x), rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.floats(0.05, 0.6), st.integers(0, 2**31 - 1))
def test_random_sparse_functions(m, n, density, seed):
    rng = np.random.default_rng(seed)
    a = np.where(rng.random((m, n)) < density, rng.uniform(0.5, 2.0, (m, n)), 0.0)
    perm = rng.integers(0, n, m)

    def f(x):
        return a @ np.sin(x) + x[perm] ** 2 * (1.0 + a[:, 0])

    x = rng.uniform(0.2, 1.2, n)
    dense = ad.jacobian(f)(x)
    pattern = ad_sparsity(f)(x).toarray()
    np.testing.assert_array_equal(pattern, dense != 0)
    for mode in ("forward", "reverse"):
        got = sparse_jacobian(f, mode=mode)(x)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-13, atol=1e-13)


def test_pullbacks_in_one_pass_match_one_pass_per_seed_or_fall_back():
    from dualad.forward_mode.dual import Dual
    from dualad.sparse.compressed import _pullbacks

    rng = np.random.default_rng(5)
    jac = rng.normal(size=(6, 4))
    seeds = rng.normal(size=(6, 5))

    def pullback(cotangent):
        return (np.asarray(cotangent) @ jac if not isinstance(cotangent, Dual)
                else cotangent @ jac,)

    np.testing.assert_allclose(_pullbacks(pullback, seeds, (6,), 4), seeds.T @ jac)

    def dropping(cotangent):  # a rule that loses the dual partials: zeros, not an error
        if isinstance(cotangent, Dual):
            return (np.zeros(4),)
        return (cotangent @ jac,)

    np.testing.assert_allclose(_pullbacks(dropping, seeds, (6,), 4), seeds.T @ jac)
