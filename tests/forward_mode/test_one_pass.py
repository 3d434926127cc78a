"""The one-pass forward Jacobian of small vectors (n <= 64, one pass seeded by a cached
identity) gives what reverse mode and the chunked path give, for every kind of output."""

import numpy as np
import pytest

import dualad as ad
from dualad.forward_mode import transforms


def outputs(x, c=2.0):
    return {
        "vector": np.sin(x) * c,
        "scalar": np.sum(x ** 2),
        "matrix": np.outer(x, x),
        "constant": np.ones(3),
        "identity": x,
        "scalars": np.array([x[0] * x[-1], c]),
    }


@pytest.mark.parametrize("kind", list(outputs(np.ones(2))))
@pytest.mark.parametrize("n", [1, 2, 5, transforms._SMALL, transforms._SMALL + 1])
def test_one_pass_matches_reverse_and_chunks(kind, n):
    x = np.linspace(0.3, 1.4, n)

    def f(v):
        return outputs(v)[kind]

    fwd = ad.jacobian(f, mode="forward")(x)
    rev = ad.jacobian(f, mode="reverse")(x)
    chunked = ad.jacobian(f, mode="forward", chunk=max(1, n // 2))(x)
    assert fwd.shape == np.shape(f(x)) + (n,)
    np.testing.assert_allclose(fwd, rev, rtol=1e-13, atol=0)
    np.testing.assert_allclose(chunked, rev, rtol=1e-13, atol=0)


def test_one_pass_results_are_fresh_arrays():
    x = np.array([1.0, 2.0])
    jac = ad.jacobian(lambda v: v, mode="forward")
    first = jac(x)
    first[0, 0] = 99.0  # writing into one result changes no later one
    np.testing.assert_array_equal(jac(x), np.eye(2))
    np.testing.assert_array_equal(x, [1.0, 2.0])


def test_one_pass_other_argument_and_trees():
    x = np.array([0.5, 1.5, 2.5])
    jac = ad.jacobian(lambda a, v: (a * v, {"s": np.sum(v)}), argnums=1, mode="forward")(2.0, x)
    np.testing.assert_allclose(jac[0], 2.0 * np.eye(3))
    np.testing.assert_allclose(jac[1]["s"], np.ones(3))


def test_one_pass_input_written_by_f():
    def f(v):
        v[0] = v[1] * 3.0  # writes into its argument: the caller's array stays
        return v * 1.0

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x), [[0.0, 3.0], [0.0, 1.0]])
    np.testing.assert_array_equal(x, [1.0, 2.0])
