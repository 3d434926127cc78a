"""Sparsity detection: detected patterns equal the nonzeros of dense Jacobians/Hessians."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sparse_problems import (
    brusselator1d,
    brusselator2d,
    lorenz96,
    lorenz96_loop,
    rosenbrock,
    rosenbrock_residuals,
)

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.sparse import hessian_sparsity, jacobian_sparsity

RNG = np.random.default_rng(14)
LAPLACE = sp.diags([np.ones(5), -2 * np.ones(6), np.ones(5)], [-1, 0, 1]).toarray()


def dense_nonzeros(f, x):
    jac = np.asarray(ad.jacobian(f)(x)).reshape(np.size(f(x)), x.size)
    fd = numerical_jacobian(f, (x,), 0).reshape(jac.shape)
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-5)
    return jac != 0


CASES = {
    "brusselator2d N=4": (brusselator2d(4), 32),
    "brusselator1d": (brusselator1d(6), 12),
    "lorenz96": (lorenz96, 9),
    "lorenz96 written into empty_like": (lorenz96_loop, 7),
    "rosenbrock residuals": (rosenbrock_residuals, 8),
    "matmul by a constant tridiagonal": (lambda x: LAPLACE @ x + x ** 3, 6),
    "dot, transposed": (lambda x: np.dot(x.reshape(2, 3).T, np.array([1.0, 0.0])), 6),
    "sum over an axis": (lambda x: np.sum(np.reshape(x, (3, 4)) ** 2, axis=0), 12),
    "mean, keepdims": (lambda x: np.ravel(np.mean(x.reshape(3, 2), axis=1, keepdims=True)), 6),
    "where keeps both branches": (lambda x: np.where(x > 0, x[::-1], 2 * np.roll(x, 1)), 5),
    "fancy index and stack": (lambda x: np.stack([x[[0, 3, 3]], x[1:4] * x[0]]).ravel(), 5),
    "transpose and flip": (lambda x: np.flip(x.reshape(2, 3).T, 0).ravel() * x[2], 6),
    "broadcast outer": (lambda x: (x[:3, None] * x[None, 3:]).ravel(), 5),
    "clip, maximum, abs": (lambda x: np.clip(x, -0.5, 0.5) + np.maximum(x, x[0]) + abs(x), 4),
    "tile and repeat": (lambda x: np.tile(x[:2], 2) * np.repeat(x[2:], 2), 4),
    "setitem a slice": (lambda x: _slice_write(x), 6),
    "in-place += and -= on a buffer": (lambda x: _in_place(x), 5),
    "np.array of traced entries": (lambda x: np.sin(np.array([x[0] * x[1], x[2]])), 3),
    "prod and 0-d output": (lambda x: np.prod(x[1:]) + x[0] ** 2, 4),
    "diff (a composite rule)": (lambda x: np.diff(x, n=2, prepend=0.0), 6),
    "gradient and polyval (composites)": (lambda x: np.gradient(x) * np.polyval(x[:2], x), 5),
    "average with weights": (lambda x: np.atleast_1d(np.average(x[:3], weights=x[3:])), 6),
    "outer, trace, vdot": (lambda x: np.concatenate([
        np.outer(x[:2], x[2:4]).ravel(), np.atleast_1d(np.trace(x[:4].reshape(2, 2))),
        np.atleast_1d(np.vdot(x[:2], x[4:]))]), 6),
    "cumsum over an axis and flattened": (lambda x: np.concatenate([
        np.cumsum(x.reshape(2, 3), axis=1).ravel(), np.cumsum(x[::-1])]), 6),
    "cumprod": (lambda x: np.cumprod(x.reshape(3, 2), axis=0).ravel(), 6),
    "norm over an axis": (lambda x: np.linalg.norm(x.reshape(2, 3), axis=1), 6),
    "matmul of two traced matrices": (lambda x: (x[:4].reshape(2, 2) @ x[4:].reshape(2, 2)).ravel(),
                                      8),
}


def _in_place(x):
    out = np.zeros_like(x)
    out[1:] += x[:-1] ** 2
    out[0] -= x[-1]
    out *= x[2]
    return out


def _slice_write(x):
    y = np.zeros_like(x)
    y[1:] = x[:-1] * x[1:]
    y[0] = 2.0
    y[2] = x[5]
    return y


# value-dependent selections: the pattern is global (both sides), so it equals the union
# of the dense nonzeros over points on either side, and covers each point's
GLOBAL = {"where keeps both branches", "clip, maximum, abs"}


@pytest.mark.parametrize("name", list(CASES))
def test_pattern_equals_dense_nonzeros(name):
    f, n = CASES[name]
    seen = None
    for sign in (1.0, -1.0, None):
        x = RNG.uniform(0.3, 1.5, n)
        x = x * (RNG.choice([-1.0, 1.0], n) if sign is None else sign)
        if name == "clip, maximum, abs":
            x = x * 0.4 if sign == 1.0 else x + (3.0 if sign is None else 0.0)
        pattern = jacobian_sparsity(f)(x)
        assert isinstance(pattern, sp.csr_array) and pattern.dtype == bool
        assert pattern.shape == (np.size(f(x)), n)
        dense = dense_nonzeros(f, x)
        if name in GLOBAL:
            assert not dense[~pattern.toarray()].any(), "a nonzero outside the pattern"
            seen = dense if seen is None else seen | dense
        else:
            np.testing.assert_array_equal(pattern.toarray(), dense)
    if name == "where keeps both branches":
        np.testing.assert_array_equal(pattern.toarray(), seen)


def test_object_array_times_traced_value():
    # an object array of traced entries combined with another traced value (checked
    # against finite differences only)
    def f(x):
        return np.sin(np.array([x[0] * x[1], x[2]])) * x[3]

    x = np.array([1.0, 2.0, 3.0, 4.0])
    fd = numerical_jacobian(f, (x,), 0) != 0
    np.testing.assert_array_equal(jacobian_sparsity(f)(x).toarray(), fd)


def test_brusselator_n8_has_six_per_row():
    n = 8
    f = brusselator2d(n)
    x = RNG.uniform(0.5, 2.0, 2 * n * n)
    pattern = jacobian_sparsity(f)(x)
    np.testing.assert_array_equal(np.diff(pattern.indptr), 6)
    np.testing.assert_array_equal(pattern.toarray(), dense_nonzeros(f, x))


def test_where_is_global_and_python_branch_is_local():
    def f(x):
        return np.where(x[0] > 0, x[1] * 1.0, x[2] * 1.0) + 0 * x[3]

    p = jacobian_sparsity(f)(np.array([1.0, 2.0, 3.0, 4.0])).toarray()
    assert p.tolist() == [[False, True, True, True]]

    def g(x):
        return x[1] * 1.0 if x[0] > 0 else x[2] * 1.0

    assert jacobian_sparsity(g)(np.array([1.0, 2.0, 3.0])).toarray().tolist() == [
        [False, True, False]]
    assert jacobian_sparsity(g)(np.array([-1.0, 2.0, 3.0])).toarray().tolist() == [
        [False, False, True]]


def test_zero_derivative_arguments_do_not_flow():
    # floor has derivative 0; comparisons are constants; argnums and extra arguments
    def f(c, x):
        return np.floor(x) + x * c + (x > 0) + np.argmax(x)

    p = jacobian_sparsity(f, argnums=1)(2.0, np.array([0.5, 1.5]))
    assert p.toarray().tolist() == [[True, False], [False, True]]


def test_scalar_and_constant_outputs():
    assert jacobian_sparsity(lambda x: x * 3.0)(2.0).toarray().tolist() == [[True]]
    p = jacobian_sparsity(lambda x: np.ones(3))(np.ones(2))
    assert p.shape == (3, 2) and p.nnz == 0


def test_unknown_function_is_conservative_or_a_clear_error():
    from dualad.sparsity.flows import ConservativeFlowWarning

    with pytest.warns(ConservativeFlowWarning, match=r"np\.ediff1d.*extend\.declare_index_map"):
        p = jacobian_sparsity(lambda x: np.ediff1d(x))(np.ones(3))
    assert p.toarray().all()  # every entry on every entry: a superset of the truth
    with pytest.raises(ad.MissingRuleError, match=r"np\.ediff1d.*extend\.declare_index_map"):
        jacobian_sparsity(lambda x: np.ediff1d(x), strict=True)(np.ones(3))
    with pytest.raises(TypeError, match="argnums must be one int"):
        jacobian_sparsity(lambda x: x, argnums=(0,))


def test_user_rule_flows_from_its_table_entry():
    def shifted_square(x, s):
        return (x - s) ** 2

    shifted_square = ad.define_rule(shifted_square, args=("x", "s"),
                                    derivatives=("2 * (x - s)", "not differentiable"))
    p = jacobian_sparsity(lambda x: shifted_square(x[:2], x[2:]))(np.ones(4))
    assert p.toarray().astype(int).tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]


HESSIAN_CASES = {
    "rosenbrock": (rosenbrock, 7),
    "sum of products": (lambda x: np.sum(x[1:] * x[:-1]) + x[0] ** 3, 5),
    "exp of a sum": (lambda x: np.exp(np.sum(x[:3])) + np.sum(x[3:]), 5),
    "linear": (lambda x: np.sum(2.0 * x) + x[0], 4),
    "quadratic form": (lambda x: x @ (LAPLACE @ x), 6),
    "sin and division": (lambda x: np.sum(np.sin(x[:2]) / x[2:4]) + x[4] * 2.0, 5),
}


@pytest.mark.parametrize("name", list(HESSIAN_CASES))
def test_hessian_pattern_covers_dense_nonzeros(name):
    f, n = HESSIAN_CASES[name]
    x = RNG.uniform(0.3, 1.5, n)
    pattern = hessian_sparsity(f)(x).toarray()
    dense = ad.hessian(f)(x)
    fd = numerical_jacobian(ad.grad(f), (x,), 0)
    np.testing.assert_allclose(dense, fd, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(pattern, pattern.T)
    assert not (dense != 0)[~pattern].any(), "a Hessian nonzero is outside the pattern"
    np.testing.assert_array_equal(pattern, dense != 0)  # and exact on these problems


def test_hessian_needs_scalar_output():
    with pytest.raises(ad.ShapeError, match="scalar"):
        hessian_sparsity(lambda x: x * x)(np.ones(3))
