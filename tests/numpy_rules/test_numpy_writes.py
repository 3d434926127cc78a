"""Writing into arrays: buffers from np.empty_like & co. filled by user code, both modes."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad


def recurrence(x):
    """A simulation-style loop that fills a preallocated array and reads it back."""
    y = np.empty_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = 0.5 * y[i - 1] + np.sin(x[i]) * y[i - 1]
    return y


def test_filling_empty_like_differentiates_in_both_modes():
    check(recurrence, rand(5))
    check(lambda x: np.sum(recurrence(x) ** 2), rand(4))
    check_second_order(recurrence, rand(4))


def test_known_gradient_of_a_filled_buffer():
    def cumulative(x):
        y = np.zeros_like(x)
        y[0] = x[0]
        for i in range(1, len(x)):
            y[i] = y[i - 1] * 0.5 + x[i]
        return np.sum(y)

    np.testing.assert_allclose(ad.grad(cumulative)(np.ones(3)), [1.75, 1.5, 1.0])


@pytest.mark.parametrize("make", [np.zeros_like, np.ones_like,
                                  lambda x: np.full_like(x, 2.0), np.copy,
                                  lambda x: x.copy()])
def test_buffers_keep_unwritten_entries(make):
    def f(x):
        y = make(x)
        y[1:, 0] = x[:-1, 1] ** 2
        return y * (1.0 + 0.0 * np.sum(x))

    check(f, rand(3, 2))


def test_writes_of_every_key_kind():
    def f(x):
        y = np.zeros_like(x)
        y[0] = x[1]                       # integer row
        y[1:, ::2] = x[:-1, 1::2] * 2.0   # slices
        y[..., -1] = x[..., 0]            # ellipsis
        y[[2, 2], [0, 1]] = x[0, :2]      # integer arrays
        y[x < -0.5] = 0.0                 # boolean mask
        y[None, 1, 1] = np.sum(x)         # newaxis, a broadcast scalar
        return y

    check(f, rand(3, 3))


def test_repeated_fancy_writes_keep_the_last_value():
    def f(x):
        y = np.zeros_like(x)
        y[[0, 0, 1]] = x                  # numpy keeps x[1] at index 0
        return y

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ad.jacobian(f, mode="reverse")(x),
                               [[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    check(f, x)


def test_earlier_reads_keep_the_state_they_saw():
    def f(x):
        y = np.copy(x)
        before = y * 1.0     # uses the state before the writes
        y[0] = 10.0 * x[1]
        y[1] = y[0] * x[2]   # reads the written entry
        return np.concatenate([before, y])

    check(f, rand(3))


def test_full_like_with_a_traced_fill_value():
    check(lambda x: np.full_like(x, x[0] * 2.0) + x, rand(3))


def test_inplace_numpy_functions_on_buffers():
    def f(x):
        y = np.zeros_like(x)
        np.copyto(y, x ** 2)
        np.put(y, [0, 3], x[:, 0])
        np.fill_diagonal(y, x[1, 1])
        z = np.zeros_like(x)
        np.put_along_axis(z, np.array([[1], [0]]), x[:, :1], axis=1)
        np.copyto(z, 3 * x, where=x > 0)
        return y + z

    check(f, rand(2, 2))


def test_augmented_item_assignment():
    def f(x):
        y = np.copy(x)
        y[1:] += x[:-1]
        y[0] *= 3.0
        return y

    check(f, rand(4))


def test_writes_under_nested_differentiation():
    def f(x):
        y = np.zeros_like(x)
        for i in range(x.shape[0]):
            y[i] = x[i] ** 3 * np.sum(x)
        return np.sum(y)

    x = rand(3)
    check(ad.grad(f), x)
    h = ad.hessian(f)(x)
    np.testing.assert_allclose(h, h.T, atol=1e-10)


def test_writing_into_an_argument_says_to_allocate_a_buffer():
    def f(x):
        x[0] = 0.0
        return np.sum(x)

    with pytest.raises(TypeError, match="empty_like"):
        ad.grad(f)(np.ones(3))

    def g(x):
        y = x * 2.0
        y[0] = 0.0  # a computed value is written as numpy writes it
        return np.sum(y)

    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(g, mode=mode)(np.ones(3)), [0.0, 2.0, 2.0])


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_writing_a_traced_value_into_a_plain_array_says_empty_like(mode):
    def f(x):
        out = np.empty(3)
        for i in range(3):
            out[i] = x[i] * 2.0
        return out

    with pytest.raises((TypeError, ValueError)) as info:  # the default promotes np.empty
        ad.jacobian(f, mode=mode, allocations="strict")(np.ones(3))
    # numpy re-raises as "setting an array element with a sequence" from dualad's error
    messages = str(info.value) + str(info.value.__cause__) + str(info.value.__context__)
    assert "np.empty_like(x)" in messages


def test_inplace_function_into_a_plain_array_is_refused():
    def f(x):
        out = np.zeros(3)
        np.copyto(out, x)
        return out

    with pytest.raises(TypeError, match="empty_like"):  # the default promotes np.zeros
        ad.jacobian(f, mode="reverse", allocations="strict")(np.ones(3))


def test_buffers_without_recording_are_plain_arrays():
    x = ad.Variable(np.ones(3))
    with ad.pause_recording():
        y = np.zeros_like(x)
    assert type(y) is np.ndarray
