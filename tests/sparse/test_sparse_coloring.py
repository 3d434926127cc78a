"""Colourings: validity on random patterns (checked from the definitions), colour counts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dualad.sparse.coloring import (
    ORDERS,
    color_columns,
    color_rows,
    color_symmetric,
    column_intersection_graph,
    is_column_coloring,
    is_star_coloring,
)


@st.composite
def patterns(draw, square=False):
    m = draw(st.integers(1, 14))
    n = m if square else draw(st.integers(1, 14))
    density = draw(st.floats(0.0, 0.6))
    seed = draw(st.integers(0, 2**31 - 1))
    return np.random.default_rng(seed).random((m, n)) < density


def columns_ok(pattern, colors):
    """Definition: no row has two nonzero columns of one colour."""
    for row in pattern:
        cs = [colors[j] for j in np.flatnonzero(row)]
        if len(cs) != len(set(cs)):
            return False
    return True


def star_ok(sym, colors):
    """Definition: proper colouring, and every path on 4 vertices uses at least 3 colours."""
    n = sym.shape[0]
    adj = [set(np.flatnonzero(sym[i])) - {i} for i in range(n)]
    for i in range(n):
        if any(colors[i] == colors[j] for j in adj[i]):
            return False
    for a in range(n):
        for b in adj[a]:
            for c in adj[b] - {a}:
                for d in adj[c] - {a, b}:
                    if len({colors[a], colors[b], colors[c], colors[d]}) < 3:
                        return False
    return True


@settings(max_examples=150)
@given(patterns(), st.sampled_from(ORDERS))
def test_column_coloring_is_valid(pattern, order):
    colors = color_columns(pattern, order=order)
    assert colors.shape == (pattern.shape[1],)
    assert colors.min() >= 0
    assert columns_ok(pattern, colors)
    assert is_column_coloring(pattern, colors)
    # colours are 0..k-1, no gaps
    assert set(colors.tolist()) == set(range(colors.max() + 1))


@settings(max_examples=150)
@given(patterns(), st.sampled_from(ORDERS))
def test_row_coloring_is_valid(pattern, order):
    colors = color_rows(sp.csr_array(pattern), order=order)
    assert columns_ok(pattern.T, colors)


@settings(max_examples=150)
@given(patterns(square=True), st.sampled_from(ORDERS))
def test_star_coloring_is_valid(pattern, order):
    sym = pattern | pattern.T
    colors = color_symmetric(sym, order=order)
    assert star_ok(sym, colors)
    assert is_star_coloring(sym, colors)


def test_checkers_reject_bad_colorings():
    path = np.eye(4, dtype=bool) | np.eye(4, k=1, dtype=bool) | np.eye(4, k=-1, dtype=bool)
    assert not is_column_coloring(path, [0, 1, 0, 1])  # rows 1, 2 hold two columns of a colour
    assert not is_star_coloring(path, [0, 1, 0, 1])  # a two-coloured path on 4 vertices
    assert not star_ok(path, [0, 1, 0, 1])
    assert is_star_coloring(path, [0, 1, 2, 0]) and star_ok(path, [0, 1, 2, 0])
    assert not is_column_coloring(path, [0, 1, 2])  # wrong length


@pytest.mark.parametrize("order", ORDERS)
def test_tridiagonal_takes_three_colors(order):
    n = 50
    tri = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr")
    colors = color_columns(tri, order=order)
    assert colors.max() + 1 <= 3
    assert is_column_coloring(tri, colors)


def test_dense_and_diagonal_patterns():
    assert color_columns(np.ones((3, 5))).tolist() == [0, 1, 2, 3, 4]
    assert color_columns(np.eye(6)).tolist() == [0] * 6
    assert color_columns(np.zeros((2, 3))).tolist() == [0, 0, 0]


def test_star_beats_distance2_on_arrow():
    n = 20
    arrow = np.eye(n, dtype=bool)
    arrow[0] = arrow[:, 0] = True
    assert color_columns(arrow).max() + 1 == n
    colors = color_symmetric(arrow)
    assert colors.max() + 1 == 2
    assert star_ok(arrow, colors)


def test_intersection_graph_matches_definition():
    rng = np.random.default_rng(3)
    p = rng.random((9, 7)) < 0.3
    ptr, adj = column_intersection_graph(p)
    for j, k in itertools.product(range(7), range(7)):
        linked = j != k and bool((p[:, j] & p[:, k]).any())
        assert (k in adj[ptr[j]:ptr[j + 1]]) == linked


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown order 'random'.*largest_first"):
        color_columns(np.eye(3), order="random")
    with pytest.raises(ValueError, match="2-D"):
        color_columns(np.ones(3))
    with pytest.raises(ValueError, match="square"):
        color_symmetric(np.ones((2, 3)))


def test_pattern_argument_is_not_modified():
    # explicit zeros and duplicates: canonicalised on a copy only
    p = sp.csr_array((np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 1, 1, 1]),
                      np.array([0, 2, 4])), shape=(2, 2))
    before = (p.data.copy(), p.indices.copy(), p.indptr.copy())
    colors = color_columns(p)
    assert is_column_coloring(p, colors)
    for a, b in zip(before, (p.data, p.indices, p.indptr)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=60)
@given(patterns(square=True), st.sampled_from(ORDERS))
def test_python_and_numba_kernels_colour_alike(pattern, order):
    """Small patterns are coloured by the Python kernels (no Numba compile on first use);
    the Numba kernels give the same colours."""
    import dualad.sparse.coloring as coloring

    saved = coloring.SMALL_PATTERN, dict(coloring._COMPILED)
    try:
        coloring._COMPILED.clear()  # none loaded: the Python kernels
        python = [f(pattern, order) for f in (color_columns, color_rows, color_symmetric)]
        assert not coloring._COMPILED
        coloring.SMALL_PATTERN = -1  # the Numba kernels
        compiled = [f(pattern, order) for f in (color_columns, color_rows, color_symmetric)]
        assert set(coloring._COMPILED) >= {"graph", "greedy", "star"}
    finally:
        coloring.SMALL_PATTERN = saved[0]
        coloring._COMPILED.update(saved[1])
    for a, b in zip(python, compiled):
        np.testing.assert_array_equal(a, b)
