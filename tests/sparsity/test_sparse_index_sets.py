"""IndexSets (the tracer's rows) against dense boolean matrices."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dualad.sparsity.index_sets import IndexSets, combine, union, vstack


def sets_of(dense):
    csr = sp.csr_array(dense)
    csr.sort_indices()
    return IndexSets(csr.indptr.astype(np.int64), csr.indices.astype(np.int64), dense.shape[1])


@st.composite
def dense_sets(draw, m=None, n=None):
    m = draw(st.integers(1, 9)) if m is None else m
    n = draw(st.integers(1, 9)) if n is None else n
    seed = draw(st.integers(0, 2**31 - 1))
    return np.random.default_rng(seed).random((m, n)) < draw(st.floats(0.0, 0.7))


@settings(max_examples=60)
@given(dense_sets(), st.integers(0, 2**31 - 1))
def test_operations_match_dense(dense, seed):
    rng = np.random.default_rng(seed)
    m, n = dense.shape
    other = rng.random((m, n)) < 0.4
    a, b = sets_of(dense), sets_of(other)
    rows = rng.integers(-1, m, 7)
    want = np.where(rows[:, None] >= 0, dense[np.maximum(rows, 0)], False)
    np.testing.assert_array_equal(a.take(rows).toarray(), want)
    np.testing.assert_array_equal(union([a, b], m, n).toarray(), dense | other)
    np.testing.assert_array_equal(vstack([a, b], n).toarray(), np.vstack([dense, other]))
    source, target = rng.integers(0, m, 10), rng.integers(0, 4, 10)
    want = np.zeros((4, n), dtype=bool)
    for s, t in zip(source, target):
        want[t] |= dense[s]
    np.testing.assert_array_equal(combine(a, source, target, 4).toarray(), want)
    np.testing.assert_array_equal(a.to_scipy().toarray(), dense)


def test_rows_stay_sorted_and_distinct():
    a = IndexSets.identity(4)
    u = union([a.take(np.array([3, 2, 1, 0])), a, a.take(np.array([1, 1, 1, 1]))], 4, 4)
    for i in range(4):
        row = u.indices[u.indptr[i]:u.indptr[i + 1]]
        assert list(row) == sorted(set(row.tolist()))
