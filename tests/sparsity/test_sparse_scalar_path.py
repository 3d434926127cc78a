"""Loop-style code takes the scalar fast path of the sparsity tracer: same patterns as the
dense Jacobian, on random loop programs and on the Brusselator and Lorenz-96 loops."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sparse_problems import lorenz96, lorenz96_loop

import dualad as ad
from dualad.sparse import hessian_sparsity, jacobian_sparsity

OPS = ("+", "-", "*", "/", "**", "r-", "r/", "neg", "sin")


def _program(n, steps, sliced=False):
    """out[i] = a chain of scalar operations on entries of x picked by ``steps``
    (``sliced``: entries read and written as one-entry slices, the general array path)."""
    def f(x):
        out = np.zeros_like(x)
        if sliced:
            x = _Entries(x)
        for i in range(n):
            acc = x[i]
            for op, offset, const in steps:
                other = x[(i + offset) % n] if offset >= 0 else const
                if op == "+":
                    acc = acc + other
                elif op == "-":
                    acc = acc - other
                elif op == "*":
                    acc = acc * other
                elif op == "/":
                    acc = acc / (other * other + 1.0)
                elif op == "**":
                    acc = (acc * acc + 1.0) ** 1.5
                elif op == "r-":
                    acc = const - acc
                elif op == "r/":
                    acc = const / (acc * acc + 1.0)
                elif op == "neg":
                    acc = -acc
                else:
                    acc = np.sin(acc) * other
            if sliced:
                out[i:i + 1] = acc
            else:
                out[i] = acc
        if n > 2:
            out[n - 1] = 2.0  # an overwritten entry loses its dependence
        return out

    return f


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 7),
       steps=st.lists(st.tuples(st.sampled_from(OPS), st.integers(-1, 6),
                                st.floats(0.5, 2.0)), max_size=5),
       seed=st.integers(0, 2**16))
def test_loop_program_pattern_matches_dense(n, steps, seed):
    f = _program(n, steps)
    x = np.random.default_rng(seed).uniform(0.5, 1.5, n)
    pattern = jacobian_sparsity(f)(x).toarray()
    dense = ad.jacobian(f)(x)
    nonzero = np.abs(dense) > 1e-12
    assert not nonzero[~pattern].any()
    # the scalar path gives the pattern the array path gives (slices of one entry)
    general = jacobian_sparsity(_program(n, steps, sliced=True))(x).toarray()
    np.testing.assert_array_equal(pattern, general)
    if n > 2:
        assert not pattern[n - 1].any()


class _Entries:
    """Reads x[i] as the one-entry array x[i:i + 1] (the general, array path)."""

    def __init__(self, x):
        self.x = x
        self.size = x.size

    def __getitem__(self, i):
        i = i % self.size
        return self.x[i:i + 1]


def test_lorenz96_loop_equals_roll_form():
    x = np.random.default_rng(3).normal(size=12) + 8.0
    loop = jacobian_sparsity(lorenz96_loop)(x)
    rolled = jacobian_sparsity(lorenz96)(x)
    assert (loop != rolled).nnz == 0 and loop.nnz == 48


def test_scalar_writes_then_whole_array_reads():
    def f(x):
        out = np.zeros_like(x)
        for i in range(1, x.size):
            out[i] = x[i] * x[i - 1]
        return np.cumsum(out) + out[::-1]

    x = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(jacobian_sparsity(f)(x).toarray(),
                                  ad.jacobian(f)(x) != 0)


def test_hessian_of_a_loop():
    def f(x):
        total = 0.0
        for i in range(x.size - 1):
            total = total + x[i] * x[i + 1] + x[i] ** 2
        return total

    x = np.arange(1.0, 6.0)
    h = hessian_sparsity(f)(x).toarray()
    np.testing.assert_array_equal(h, ad.hessian(f)(x) != 0)


def test_two_dimensional_entries():
    def f(x):
        a = x.reshape(3, 3)
        out = np.zeros_like(a)
        for i in range(3):
            for j in range(3):
                out[i, j] = a[i, (j + 1) % 3] * a[(i + 2) % 3, j]
        return out.ravel()

    x = np.arange(1.0, 10.0)
    np.testing.assert_array_equal(jacobian_sparsity(f)(x).toarray(), ad.jacobian(f)(x) != 0)


def test_loop_brusselator_of_the_benchmark():
    from sparse_problems import brusselator1d_loop

    y = np.random.default_rng(4).uniform(0.5, 3.0, 40)
    pattern = jacobian_sparsity(brusselator1d_loop)(y).toarray()
    dense = ad.jacobian(brusselator1d_loop)(y)
    np.testing.assert_array_equal(pattern, dense != 0)
    assert pattern.sum() == 2 * 20 * 4 - 4  # u: u, v, two neighbours; v likewise
    J = ad.sparse_jacobian(brusselator1d_loop)(y)
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-12)


def test_complex_entries_take_the_array_path():
    def f(x):
        z = np.fft.fft(x)
        return np.real(z[1] * z[2]) + x[::-1]

    x = np.arange(1.0, 5.0)
    pattern = jacobian_sparsity(f)(x).toarray()
    assert pattern.all()
    dense = ad.jacobian(f)(x)
    assert not (np.abs(dense) > 1e-12)[~pattern].any()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 6),
       steps=st.lists(st.tuples(st.sampled_from(OPS), st.integers(-1, 5),
                                st.floats(0.5, 2.0)), max_size=4),
       seed=st.integers(0, 2**16))
def test_loop_program_hessian_pattern_matches_the_array_path(n, steps, seed):
    def total(program):
        return lambda x: np.sum(program(x) * np.linspace(1.0, 2.0, n))

    x = np.random.default_rng(seed).uniform(0.5, 1.5, n)
    scalar = hessian_sparsity(total(_program(n, steps)))(x).toarray()
    general = hessian_sparsity(total(_program(n, steps, sliced=True)))(x).toarray()
    np.testing.assert_array_equal(scalar, general)
    dense = ad.hessian(total(_program(n, steps)))(x)
    assert not (np.abs(dense) > 1e-10)[~scalar].any()
