"""Guards: a replay never runs a program recorded for another branch, loop count or shape."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.tape import TapeRetraceWarning, record


def branch(x):
    if x > 0:
        return x ** 3
    return np.sin(x) * 2.0


def test_branch_recorded_at_positive_replayed_at_negative():
    tape = record(branch, 1.5)
    assert float(tape.grad(2.0)) == pytest.approx(12.0)
    with pytest.warns(TapeRetraceWarning, match="records again"):
        g = tape.grad(-1.0)
    assert float(g) == pytest.approx(2 * np.cos(-1.0))
    assert float(tape(-1.0)) == pytest.approx(2 * np.sin(-1.0))
    assert tape.recordings == 2
    # both recordings are kept: alternating branches record nothing more, warn no more
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (3.0, -2.0, 0.5, -0.1):
            np.testing.assert_allclose(tape.grad(x), ad.grad(branch)(x))
    assert tape.recordings == 2


def test_retrace_warning_is_a_user_warning_given_once():
    assert issubclass(TapeRetraceWarning, UserWarning)
    tape = record(branch, 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tape(-1.0)
        tape(np.ones(2) * 0.0 + 5.0) if False else tape(-3.0)
        record_shape = tape(np.float64(-2.0))
    assert record_shape == pytest.approx(2 * np.sin(-2.0))
    assert sum(issubclass(w.category, TapeRetraceWarning) for w in caught) == 1


def newton_sqrt(a):
    """A value-dependent loop count: iterate until converged."""
    x = a
    while np.abs(x * x - a) > 1e-10 * a:
        x = 0.5 * (x + a / x)
    return x


@pytest.mark.parametrize("a", [4.0, 1e6, 1.0001])
def test_value_dependent_loop_count(a):
    tape = record(newton_sqrt, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TapeRetraceWarning)
        g = tape.grad(a)
        v = tape(a)
    assert float(v) == pytest.approx(np.sqrt(a), rel=1e-9)
    np.testing.assert_allclose(g, ad.grad(newton_sqrt)(a), rtol=1e-10)
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-6)


def test_where_is_data_and_replays_without_recording_again():
    def leaky(x):
        return np.sum(np.where(x > 0, x ** 2, 0.1 * x))

    tape = record(leaky, np.ones(4))
    x = np.array([1.0, -2.0, 3.0, -0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = tape.grad(x)
        v = tape(x)
    np.testing.assert_allclose(g, ad.grad(leaky)(x))
    np.testing.assert_allclose(g, np.where(x > 0, 2 * x, 0.1))
    assert v == pytest.approx(leaky(x))
    assert tape.recordings == 1


def test_argmax_index_is_data():
    def pick(x):
        return x[np.argmax(x)] ** 2 + np.sum(x)

    tape = record(pick, np.array([3.0, 1.0, 2.0]))
    x = np.array([0.5, 4.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(tape.grad(x), ad.grad(pick)(x))
    assert tape.recordings == 1


def test_index_read_in_python_is_a_guard():
    def first_positive(x):
        i = int(np.argmax(x > 0))
        return x[i] * 3.0 + np.sum(x)

    tape = record(first_positive, np.array([1.0, -1.0, -1.0]))
    x = np.array([-1.0, -2.0, 5.0])
    with pytest.warns(TapeRetraceWarning):
        g = tape.grad(x)
    np.testing.assert_allclose(g, [1.0, 1.0, 4.0])


def test_shape_change_records_again_and_strict_refuses():
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    tape = record(f, np.ones(3))
    with pytest.warns(TapeRetraceWarning, match="arguments changed"):
        g = tape.grad(np.arange(5.0))
    np.testing.assert_allclose(g, ad.grad(f)(np.arange(5.0)))
    assert tape.recordings == 2

    strict = record(f, np.ones(3), strict=True)
    np.testing.assert_allclose(strict.grad(np.arange(3.0)), ad.grad(f)(np.arange(3.0)))
    with pytest.raises(ad.ShapeError, match=r"strict=True.*\(5,\).*\(3,\)"):
        strict.grad(np.arange(5.0))
    assert strict.recordings == 1


def test_strict_tape_still_follows_branches():
    tape = record(branch, 1.0, strict=True)
    with pytest.warns(TapeRetraceWarning):
        assert float(tape.grad(-1.0)) == pytest.approx(2 * np.cos(-1.0))


def test_bool_of_a_traced_value_is_a_guard():
    def f(x):
        y = np.sin(x)
        if y:  # truthiness of a traced scalar
            return y * 2.0
        return y * 3.0

    tape = record(f, 1.0)
    with pytest.warns(TapeRetraceWarning):
        assert float(tape.grad(0.0)) == pytest.approx(3.0)
    assert float(tape.grad(1.0)) == pytest.approx(2 * np.cos(1.0))


def test_plain_numpy_use_of_a_comparison_is_a_guard():
    def f(x):
        mask = np.asarray(x > 0)  # the mask leaves the tape: a guard on its value
        return np.sum(x[mask] ** 2)

    tape = record(f, np.array([1.0, -1.0, 2.0]))
    x = np.array([-1.0, 3.0, 2.0])
    with pytest.warns(TapeRetraceWarning):
        np.testing.assert_allclose(tape.grad(x), [0.0, 6.0, 4.0])


def test_values_read_by_item_tolist_astype_are_guards():
    def f(x):
        n_pos = (x > 0).astype(int).sum()  # an integer array: its sum is read below
        k = int((x > 1).sum().item())
        signs = (x > 0).tolist()
        return np.sum(x ** 2) * (1.0 + k) + float(n_pos) * signs.count(True) * np.sum(x)

    tape = record(f, np.array([2.0, 0.5, -1.0]))
    for x in (np.array([3.0, 0.5, -2.0]), np.array([3.0, 2.0, 1.5]), np.array([-1.0] * 3)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TapeRetraceWarning)
            got = tape.grad(x)
        np.testing.assert_allclose(got, ad.grad(f)(x))
        assert tape(x) == pytest.approx(f(x))


def test_boolean_mask_indexing_follows_the_mask():
    def f(x):
        y = x[x > 0]  # its length depends on the values
        return np.sum(y * y[:1]) + np.sum(x)

    tape = record(f, np.array([1.0, -1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same number of positive entries: no recording
        np.testing.assert_allclose(tape.grad(np.array([-1.0, 3.0, 2.0])),
                                   ad.grad(f)(np.array([-1.0, 3.0, 2.0])))
    for x in (np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, 3.0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TapeRetraceWarning)
            got = tape.grad(x)
        np.testing.assert_allclose(got, ad.grad(f)(x))
    assert tape.recordings == 3


def test_guards_hold_in_compiled_replays():
    def f(x):
        s = np.sum(x)
        if s > 0:
            return np.sum(x ** 3) * s
        return np.sum(np.sin(x))

    tape = record(f, np.ones(2))
    rng = np.random.default_rng(9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TapeRetraceWarning)
        for i in range(40):
            x = rng.standard_normal(2) + (1.5 if i % 3 else -1.5)
            np.testing.assert_allclose(tape.grad(x), ad.grad(f)(x), rtol=1e-12)
            assert tape(x) == pytest.approx(f(x), rel=1e-14)
    assert tape.recordings == 2
    assert any(p.compiled for ps in tape._programs.values() for p in ps)
