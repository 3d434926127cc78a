"""Results built from a CSR template behave as scipy's own csr_array."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dualad.sparse.csr_results import CsrTemplate


def test_template_results_equal_constructed_ones():
    rng = np.random.default_rng(0)
    pattern = sp.csr_array(rng.random((7, 5)) < 0.4)
    template = CsrTemplate(pattern)
    data = rng.normal(size=pattern.nnz)
    fast = template.with_data(data)
    slow = sp.csr_array((data, pattern.indices, pattern.indptr), shape=pattern.shape)
    assert type(fast) is type(slow) and fast.shape == slow.shape and fast.nnz == slow.nnz
    np.testing.assert_array_equal(fast.toarray(), slow.toarray())
    v = rng.normal(size=5)
    np.testing.assert_allclose(fast @ v, slow @ v)
    np.testing.assert_allclose((fast.T @ fast).toarray(), (slow.T @ slow).toarray())
    assert abs(fast - slow).max() == 0
    # results do not share data: a second result leaves the first alone
    other = template.with_data(np.zeros(pattern.nnz))
    np.testing.assert_array_equal(fast.toarray(), slow.toarray())
    assert other.count_nonzero() == 0
    fast.data *= 2  # writing into a result's data leaves the template alone
    assert not template.matrix.data.any()
    np.testing.assert_array_equal(other.toarray(), np.zeros((7, 5)))
