"""A replayed tape gives what eager differentiation gives, at points other than the
recorded one: values, gradients (also against finite differences), vjp, jvp."""

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import Tape, record


def chain(x, n=30):
    for i in range(n):
        r = i % 3
        x = np.sin(x) if r == 0 else (x * 1.0001 if r == 1 else x + 0.1)
    return x


def mlp_loss(w1, b1, w2, b2, x, onehot):
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    m = np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
    return -np.sum(onehot * (logits - lse)) / x.shape[0]


def mlp_problem(seed, n=8, d=5, hidden=6, classes=3):
    rng = np.random.default_rng(seed)
    params = (rng.standard_normal((d, hidden)), rng.standard_normal(hidden),
              rng.standard_normal((hidden, classes)), rng.standard_normal(classes))
    return params, rng.standard_normal((n, d)), np.eye(classes)[rng.integers(0, classes, n)]


def assert_matches_eager_and_fd(tape, f, args, argnums):
    nums = (argnums,) if isinstance(argnums, int) else argnums
    got = tape.grad(*args, argnums=argnums)
    want = ad.grad(f, argnums=argnums)(*args)
    got_t = (got,) if isinstance(argnums, int) else got
    want_t = (want,) if isinstance(argnums, int) else want
    for i, g, w in zip(nums, got_t, want_t):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        fd = numerical_jacobian(f, args, i).reshape(np.shape(args[i]))
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tape(*args), f(*args), rtol=1e-14)


@pytest.mark.parametrize("x", [0.5, -1.3, 2.0, np.float64(0.1), np.array(0.7)])
def test_scalar_chain_replays_at_new_points(x):
    tape = record(chain, 0.3)
    assert isinstance(tape, Tape)
    assert_matches_eager_and_fd(tape, chain, (x,), 0)
    assert tape.recordings == 1


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_elementwise_chain_on_arrays(shape):
    rng = np.random.default_rng(1)
    tape = record(lambda x: np.sum(chain(x, 9)), rng.standard_normal(shape))
    x = rng.standard_normal(shape)
    assert_matches_eager_and_fd(tape, lambda x: np.sum(chain(x, 9)), (x,), 0)


def test_mlp_gradient_in_four_parameters():
    params, x, onehot = mlp_problem(0)
    tape = record(mlp_loss, *params, x, onehot)
    params, x, onehot = mlp_problem(1)
    assert_matches_eager_and_fd(tape, mlp_loss, (*params, x, onehot), (0, 1, 2, 3))
    # value_and_grad agrees too, and the data can change between calls
    v, g = tape.value_and_grad(*params, x, onehot, argnums=(0, 1, 2, 3))
    assert np.isclose(v, mlp_loss(*params, x, onehot))
    assert tape.recordings == 1


def test_trace_of_matmul_in_both_arguments():
    rng = np.random.default_rng(2)
    f = lambda a, b: np.trace(a @ b)  # noqa: E731
    tape = record(f, *rng.standard_normal((2, 4, 4)))
    a, b = rng.standard_normal((2, 4, 4))
    ga, gb = tape.grad(a, b, argnums=(0, 1))
    np.testing.assert_allclose(ga, b.T)
    np.testing.assert_allclose(gb, a.T)
    assert_matches_eager_and_fd(tape, f, (a, b), (0, 1))
    # only one argument: the other is not differentiated (and gets no work)
    np.testing.assert_allclose(tape.grad(a, b, argnums=1), a.T)


def test_indexing_and_slices():
    def f(x):
        return np.sum(x[1:] * x[:-1]) + x[0] ** 2 + np.sum(x[[0, 2, 2]])

    rng = np.random.default_rng(3)
    tape = record(f, rng.standard_normal(5))
    assert_matches_eager_and_fd(tape, f, (rng.standard_normal(5),), 0)


def test_in_place_writes_into_empty_like_buffers():
    def f(x):
        y = np.empty_like(x)
        y[0] = x[0]
        for i in range(1, len(x)):
            y[i] = y[i - 1] * 0.5 + np.sin(x[i])
        z = np.zeros_like(x)
        z[::2] = y[::2] ** 2
        return np.sum(y) + np.sum(z)

    rng = np.random.default_rng(4)
    tape = record(f, rng.standard_normal(6))
    for _ in range(3):
        assert_matches_eager_and_fd(tape, f, (rng.standard_normal(6),), 0)
    assert tape.recordings == 1


def test_multiple_outputs_and_vjp():
    def f(x, y):
        q, r = np.linalg.qr(x)
        return {"a": np.sin(x) * y, "b": np.sum(r)}

    rng = np.random.default_rng(5)
    tape = record(f, rng.standard_normal((3, 3)), 1.5)
    x, y = rng.standard_normal((3, 3)), -0.7
    out, pullback = tape.vjp(x, y)
    want_out, want_pullback = ad.vjp(f, x, y)
    np.testing.assert_allclose(out["a"], want_out["a"])
    cot = {"a": rng.standard_normal((3, 3)), "b": 2.0}
    for g, w in zip(pullback(cot), want_pullback(cot)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_tree_arguments_and_constants():
    def f(p, scale, n):
        return np.sum(p["w"] ** 2) * scale + p["b"][0] * n

    p = {"w": np.ones(3), "b": [2.0]}
    tape = record(f, p, 2.0, 3)
    q = {"w": np.array([1.0, -2.0, 0.5]), "b": [0.25]}
    g = tape.grad(q, 1.5, 3)
    want = ad.grad(f)(q, 1.5, 3)
    np.testing.assert_allclose(g["w"], want["w"])
    np.testing.assert_allclose(g["b"][0], want["b"][0])
    assert tape.recordings == 1
    with pytest.warns(UserWarning, match="records again"):
        assert np.isclose(tape(q, 1.5, 4), f(q, 1.5, 4))  # a new integer constant
    with pytest.raises(TypeError, match="constant"):
        tape.grad(q, 1.5, 3, argnums=2)


def test_jvp_of_tape_matches_forward_mode():
    f = lambda x: np.sin(x) * np.sum(x ** 2)  # noqa: E731
    rng = np.random.default_rng(6)
    tape = record(f, rng.standard_normal(4))
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    out, tangent = tape.jvp((x,), (v,))
    want_out, want_tangent = ad.jvp(f, (x,), (v,))
    np.testing.assert_allclose(out, want_out)
    np.testing.assert_allclose(tangent, want_tangent)
    np.testing.assert_allclose(tangent, ad.jacobian(f, mode="reverse")(x) @ v)


def test_non_scalar_output_to_grad_is_a_value_error():
    tape = record(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(ValueError, match="scalar"):
        tape.grad(np.ones(3))


def test_result_not_computed_from_the_inputs():
    tape = record(lambda x: np.float64(3.0), 1.0)
    v, g = tape.value_and_grad(2.0)
    assert float(v) == 3.0 and float(g) == 0.0


def test_tape_in_scipy_minimize():
    from scipy.optimize import minimize

    def rosen(x):
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    x0 = np.zeros(5)
    tape = record(rosen, x0)
    res = minimize(tape.value_and_grad, x0, jac=True, method="BFGS")
    assert res.success
    np.testing.assert_allclose(res.x, np.ones(5), atol=1e-4)
    res_h = minimize(tape, x0, jac=tape.grad, hessp=lambda x, p: tape.hvp((x,), p),
                     method="trust-ncg")
    np.testing.assert_allclose(res_h.x, np.ones(5), atol=1e-4)
    assert tape.recordings == 1


@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((), (2, 3)), ((2, 3), (1, 3))])
def test_broadcasting_arguments(shapes):
    def f(x, y):
        return np.sum(np.sin(x) * y + x / (2.0 + y ** 2) - np.exp(-x * y))

    rng = np.random.default_rng(7)
    tape = record(f, *(rng.standard_normal(s) for s in shapes))
    for _ in range(2):
        args = tuple(np.asarray(rng.standard_normal(s)) for s in shapes)
        assert_matches_eager_and_fd(tape, f, args, (0, 1))
        assert_matches_eager_and_fd(tape, f, args, 1)
    assert tape.recordings == 1


def test_compiled_replay_matches_eager():
    """After a few replays the program runs as generated straight-line code: the same
    answers (values, gradients, guards) as the first, looped replays."""
    def f(x, w):
        y = np.where(x > 0, x, 0.1 * x) @ w
        z = np.empty_like(y)
        z[0] = y[0] ** 2
        z[1:] = np.sin(y[1:])
        return np.sum(z) + np.max(y)

    rng = np.random.default_rng(8)
    tape = record(f, rng.standard_normal(3), rng.standard_normal((3, 2)))
    for _ in range(3 * 8):
        x, w = rng.standard_normal(3), rng.standard_normal((3, 2))
        got = tape.value_and_grad(x, w, argnums=(0, 1))
        want = ad.value_and_grad(f, argnums=(0, 1))(x, w)
        assert got[0] == pytest.approx(want[0], rel=1e-14)
        for g, w_ in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w_, rtol=1e-12, atol=1e-14)
        assert tape(x, w) == pytest.approx(f(x, w), rel=1e-14)
    assert tape.program.compiled, "the replays were compiled"
    assert tape.recordings == 1
