"""The forward Jacobian's chunk: one pass up to the memory budget, then the fewest equal
chunks that fit; ``chunk=`` overrides; the Jacobian is the same whatever the chunk."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode import transforms
from dualad.forward_mode.transforms import CHUNK_BUDGET, choose_chunk


def test_budget_is_eight_mib_so_1024_inputs_go_in_one_pass():
    assert CHUNK_BUDGET == 8 * 2**20
    assert choose_chunk(1024) == 1024
    assert choose_chunk(1025) == 513  # two equal passes, not 1024 + 1
    assert choose_chunk(2000) == 500 and choose_chunk(4000) == 250


def test_small_inputs_and_overrides():
    assert [choose_chunk(n) for n in (0, 1, 2, 12, 13, 100, 400)] == [1, 1, 2, 12, 13, 100, 400]
    assert choose_chunk(100, 7) == 7 and choose_chunk(2, 12) == 2 and choose_chunk(5, 0) == 1
    assert choose_chunk(3000, 3000) == 3000  # an explicit chunk ignores the budget


@given(st.integers(1, 5000), st.integers(8, 1 << 26))
def test_chunk_fits_the_budget_in_the_fewest_equal_passes(n, budget):
    k = choose_chunk(n, budget=budget)
    widest = max(1, budget // (8 * n))
    assert 1 <= k <= n
    assert k <= widest  # the seed partials fit (or one direction per pass)
    passes = -(-n // k)
    assert passes == -(-n // widest)  # no fewer passes could fit
    assert k == -(-n // passes)  # evened out: no pass is more than one direction short
    if 8 * n * n <= budget:
        assert k == n


def test_the_budget_boundary_exactly():
    n = 50
    assert choose_chunk(n, budget=8 * n * n) == n
    assert choose_chunk(n, budget=8 * n * n - 1) == 25
    assert choose_chunk(n, budget=8 * n) == 1
    assert choose_chunk(n, budget=1) == 1


def _f(x):
    y = np.reshape(x, (-1,))
    return np.concatenate([np.sin(y) * y[0], np.cumsum(y) ** 2])


@pytest.mark.parametrize("budget", [8, 8 * 7 * 3, 8 * 7 * 7 - 1, CHUNK_BUDGET])
def test_jacobian_is_the_same_at_and_below_the_memory_cap(monkeypatch, budget):
    x = np.linspace(-1.0, 1.2, 7)
    monkeypatch.setattr(transforms, "CHUNK_BUDGET", budget)
    jac = ad.jacobian(_f, mode="forward")(x)
    np.testing.assert_allclose(jac, ad.jacobian(_f, mode="reverse")(x), rtol=1e-13)
    np.testing.assert_allclose(jac, numerical_jacobian(_f, (x,), 0), rtol=1e-6, atol=1e-8)
    # several argnums (the general path) follow the same rule
    g = lambda a, b: a * b[0] + np.sin(b[1:]).sum()  # noqa: E731
    ja, jb = ad.jacobian(g, argnums=(0, 1), mode="forward")(x, x[:4])
    ra, rb = ad.jacobian(g, argnums=(0, 1), mode="reverse")(x, x[:4])
    np.testing.assert_allclose(ja, ra, rtol=1e-13)
    np.testing.assert_allclose(jb, rb, rtol=1e-13)


def test_non_contiguous_and_0d_inputs(monkeypatch):
    base = np.linspace(-1.0, 1.0, 24).reshape(4, 6)
    x = base[:, ::2]  # non-contiguous, 2-d
    assert not x.flags.c_contiguous
    before = x.copy()
    for budget in (CHUNK_BUDGET, 8 * 12 * 5):
        monkeypatch.setattr(transforms, "CHUNK_BUDGET", budget)
        jac = ad.jacobian(_f, mode="forward")(x)
        assert jac.shape == (24,) + x.shape
        np.testing.assert_allclose(jac, ad.jacobian(_f, mode="reverse")(x), rtol=1e-13)
    np.testing.assert_array_equal(x, before)  # the input is untouched
    zero_d = np.array(0.7)
    j0 = ad.jacobian(lambda t: np.sin(t) * t, mode="forward")(zero_d)
    assert np.shape(j0) == ()
    np.testing.assert_allclose(j0, np.cos(0.7) * 0.7 + np.sin(0.7))
    j1 = ad.jacobian(lambda t: np.stack([t, t * t]), mode="forward")(1.5)
    np.testing.assert_allclose(j1, [1.0, 3.0])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.one_of(st.none(), st.integers(1, 45)))
def test_any_chunk_gives_the_reverse_jacobian(n, chunk):
    x = np.linspace(-0.7, 0.9, n)
    jac = ad.jacobian(_f, mode="forward", chunk=chunk)(x)
    np.testing.assert_allclose(jac, ad.jacobian(_f, mode="reverse")(x), rtol=1e-12,
                               atol=1e-14)
