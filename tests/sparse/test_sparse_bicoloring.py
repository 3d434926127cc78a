"""Bidirectional (forward + reverse) compressed Jacobians: colourings and results."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import dualad as ad
from dualad.sparse.bicoloring import color_bidirectional, is_bicoloring
from dualad.sparse.coloring import color_columns, color_rows


def arrowhead(x):
    """Dense first row and column, diagonal elsewhere (a bordered system)."""
    out = x ** 2 + x[0] * x
    return np.concatenate([np.sum(np.sin(x))[None], out[1:]])


def arrowhead_pattern(n):
    a = sp.lil_array((n, n), dtype=bool)
    a.setdiag(True)
    a[0, :] = True
    a[:, 0] = True
    return sp.csr_array(a)


@pytest.mark.parametrize("n", [20, 300])
def test_arrowhead_needs_three_colours(n):
    pattern = arrowhead_pattern(n)
    split = color_bidirectional(pattern)
    assert is_bicoloring(pattern, split)
    assert split.total <= 3 and split.reverse_count == 1
    assert color_columns(pattern).max() + 1 == n and color_rows(pattern).max() + 1 == n


@pytest.mark.parametrize("mode", ["bidirectional", "auto"])
def test_arrowhead_jacobian(mode):
    x = np.random.default_rng(0).uniform(0.5, 1.5, 200)
    jac = ad.sparse_jacobian(arrowhead, mode=mode)
    for _ in range(2):
        J = jac(x)
        np.testing.assert_allclose(J.toarray(), ad.jacobian(arrowhead)(x), rtol=1e-12,
                                   atol=1e-14)


def _bordered(n, dense_rows, dense_cols, band, seed):
    """A random pattern: a band, a few dense rows and columns."""
    rng = np.random.default_rng(seed)
    a = np.zeros((n, n), dtype=bool)
    for k in range(-band, band + 1):
        a |= np.eye(n, k=k, dtype=bool) & (rng.random((n, n)) < 0.8)
    a[rng.choice(n, dense_rows, replace=False)] = True
    a[:, rng.choice(n, dense_cols, replace=False)] = True
    return a


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 60), rows=st.integers(0, 3), cols=st.integers(0, 3),
       band=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_random_bordered_patterns_are_recovered(n, rows, cols, band, seed):
    a = _bordered(n, min(rows, n), min(cols, n), band, seed)
    split = color_bidirectional(a)
    assert is_bicoloring(a, split)
    assert split.cost <= color_columns(a).max() + 1  # never worse than one-sided forward
    rng = np.random.default_rng(seed + 1)
    weights = np.where(a, rng.uniform(0.5, 1.5, a.shape), 0.0)

    def f(x):  # a nonlinear function with exactly this pattern
        return weights @ np.sin(x) + x ** 2 * np.diag(weights)

    x = rng.uniform(0.5, 1.5, n)
    J = ad.sparse_jacobian(f, mode="bidirectional", sparsity=a)(x)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(f)(x), rtol=1e-10, atol=1e-12)


def test_bidirectional_checks_a_wrong_pattern():
    x = np.random.default_rng(2).uniform(0.5, 1.5, 40)
    wrong = arrowhead_pattern(40).toarray()
    wrong[5, 5] = False
    with pytest.warns(ad.sparse.compressed.SparsityChangedWarning):
        J = ad.sparse_jacobian(arrowhead, mode="bidirectional", sparsity=wrong)(x)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(arrowhead)(x), rtol=1e-12,
                               atol=1e-14)


def test_mode_is_checked():
    with pytest.raises(ValueError, match="'bidirectional'"):
        ad.sparse_jacobian(arrowhead, mode="both")
