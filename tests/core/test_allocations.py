"""Plain-float buffers inside differentiated code (dualad.core.allocations): np.zeros /
np.empty / np.ones / np.full filled with traced values, in both modes, sparsity detection
and tapes, in helpers and imported modules; numpy itself untouched; allocations="strict"."""

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import dualad as ad
from dualad.core.errors import ConversionError
from dualad.diagnostics.gradcheck import numerical_jacobian

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import allocation_models as models  # noqa: E402

from benchmarks.stiff_problems import PROBLEMS  # noqa: E402

NUMPY_ZEROS = np.zeros


def entry_by_entry(x):
    out = np.zeros(3)
    out[0] = x[0] * x[1]
    out[1] = np.sin(x[2])
    out[2] = 2.0  # a constant entry
    return out


def strided(x):
    out = np.empty(2 * x.shape[0])
    out[::2] = x ** 2
    out[1::2] = np.cos(x)
    out[1:3] += x[0]
    return out


def with_views(x):
    out = np.zeros(4)
    head, tail = out[:2], out[2:]
    head[:] = x[:2] * x[2]
    tail[0] = x[0]
    tail[1] = head[0] + 1.0            # reads a view after a write
    return out


def full_and_ones(x):
    a = np.full((2, 2), 0.5)
    a[0, 0] = x[0]
    b = np.ones(2)
    b *= x[1]                           # in-place on the buffer
    return (a @ b).ravel()


def scalar_input(x):                    # 0-d input, broadcast into a buffer
    out = np.zeros(3)
    out[:] = x
    out[1] = x ** 2
    return out


def two_d(x):
    out = np.zeros((2, 3))
    out[0] = x
    out[1, 1:] = x[:2] * x[2]
    return out


def through_helper(x):
    return models.package_rhs(0.5, x)   # an imported module's function and its helper


FUNCTIONS = [entry_by_entry, strided, with_views, full_and_ones, two_d, through_helper,
             models.imports_inside, models.module_attribute]
POINTS = [np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.4, -0.7])]


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_buffers_give_exact_jacobians(f, mode):
    for x in POINTS:
        expected = numerical_jacobian(f, (x,), 0)
        got = ad.jacobian(f, mode=mode)(x)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_forward_and_reverse_agree_and_gradcheck(f):
    x = POINTS[0]
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x),
                               ad.jacobian(f, mode="reverse")(x), rtol=1e-12, atol=1e-14)
    assert ad.gradcheck(lambda y: np.sum(f(y) ** 2), x)


# Views of a buffer (with_views) included: sparsity detection follows writes through views.
@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_sparsity_detection_and_tapes(f):
    x = POINTS[0]
    dense = ad.jacobian(f)(x).reshape(-1, x.size)
    pattern = ad.jacobian_sparsity(f)(x).toarray()
    assert np.all(pattern[dense != 0]), "an entry outside the detected pattern"
    np.testing.assert_allclose(ad.sparse_jacobian(f)(x).toarray(), dense, rtol=1e-12)
    w = np.linspace(1.0, 2.0, dense.shape[0])
    tape = ad.record(lambda y: np.sum(np.ravel(f(y)) * w), x)
    for y in POINTS:
        np.testing.assert_allclose(tape.grad(y), ad.jacobian(f)(y).reshape(-1, x.size).T @ w,
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_zero_dimensional_input(mode):
    for x in (0.7, np.float64(-1.3)):
        np.testing.assert_allclose(ad.jacobian(scalar_input, mode=mode)(x),
                                   [1.0, 2 * x, 1.0])
    assert ad.derivative(lambda x: scalar_input(x)[1])(3.0) == 6.0


def test_grad_hessian_jvp_vjp_and_nesting():
    def energy(x):
        e = np.zeros(2)
        e[0] = np.sum(x ** 2)
        e[1] = x[0] * x[1]
        return e[0] + 3.0 * e[1]

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ad.grad(energy)(x), [2 + 6.0, 4 + 3.0])
    np.testing.assert_allclose(ad.hessian(energy)(x), [[2.0, 3.0], [3.0, 2.0]])
    _, tangent = ad.jvp(entry_by_entry, (POINTS[0],), (np.ones(3),))
    np.testing.assert_allclose(tangent, ad.jacobian(entry_by_entry)(POINTS[0]) @ np.ones(3))
    _, pullback = ad.vjp(entry_by_entry, POINTS[0])
    np.testing.assert_allclose(pullback(np.ones(3))[0],
                               np.ones(3) @ ad.jacobian(entry_by_entry)(POINTS[0]))
    np.testing.assert_allclose(ad.jacobian(ad.grad(energy))(x), ad.hessian(energy)(x))


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name.split(" (")[0])
def test_stiff_set_models_written_as_packages_write_them(problem):
    rng = np.random.default_rng(3)
    y = problem.y0 * (1.0 + 0.1 * rng.random(problem.n)) + 0.01 * rng.random(problem.n)
    hand = problem.jac(0.0, y)
    hand = hand.toarray() if hasattr(hand, "toarray") else hand
    scale = max(1.0, float(np.max(np.abs(hand))))
    rhs = problem.rhs
    for jac in (ad.ode_jacobian(rhs, mode="forward"), ad.ode_jacobian(rhs, mode="reverse")):
        np.testing.assert_allclose(jac(0.0, y), hand, rtol=1e-12, atol=1e-12 * scale)
    sparse = ad.ode_jacobian(rhs, sparse=True)(0.0, y).toarray()
    np.testing.assert_allclose(sparse, hand, rtol=1e-12, atol=1e-12 * scale)
    assert np.all(ad.ode_jacobian(rhs).sparsity(0.0, y).toarray()[hand != 0])
    if problem.n <= 20:
        fd = numerical_jacobian(lambda v: rhs(0.0, v), (y,), 0)
        assert np.max(np.abs(fd - hand)) <= 1e-4 * scale


def test_integer_and_complex_buffers_stay_numpy():
    seen = {}

    def f(x):
        idx = np.zeros(2, dtype=int)
        idx[1] = 2
        flags = np.ones(3, dtype=bool)
        counts = np.full(2, 3)            # an int fill: an int array, as in numpy
        seen["types"] = (type(idx), type(flags), type(counts), counts.dtype.kind)
        out = np.zeros(2)
        out[0] = x[idx[1]]
        out[1] = x[0] * counts[0]
        return out

    np.testing.assert_allclose(ad.jacobian(f)(np.arange(3.0)), [[0, 0, 1], [3, 0, 0]])
    assert seen["types"] == (np.ndarray, np.ndarray, np.ndarray, "i")


def test_functions_that_need_no_buffer_keep_plain_constants():
    """np.full of a constant stays a numpy array where no traced value is written into
    a plain buffer (a no-closed-form argument of betainc must stay constant)."""
    import scipy.special

    def f(x):
        a = np.full(3, 1.5)
        assert type(a) is np.ndarray
        return scipy.special.betainc(a, 2.0, x)

    x = np.array([0.2, 0.5, 0.7])
    np.testing.assert_allclose(ad.jacobian(f)(x), numerical_jacobian(f, (x,), 0), rtol=1e-6)


def test_numpy_is_not_patched_for_other_code_or_threads():
    assert np.zeros is NUMPY_ZEROS
    types_seen = []
    started, release = threading.Event(), threading.Event()

    def other_thread():
        started.set()
        release.wait(10)
        types_seen.append(type(models._rates(np.ones(2))))  # the original function

    def f(x):
        release.set()
        out = np.zeros(1)
        out[0] = x[0]
        types_seen.append(type(np.zeros(1)))
        return out

    t = threading.Thread(target=other_thread)
    t.start()
    started.wait(10)
    ad.jacobian(f)(np.ones(1))
    t.join(10)
    assert np.zeros is NUMPY_ZEROS and np.ndarray in types_seen
    assert type(models._rates(np.ones(2))) is np.ndarray  # outside any transform
    assert type(np.zeros(2)) is np.ndarray


def test_strict_keeps_the_clear_error():
    for mode in ("forward", "reverse"):
        with pytest.raises((TypeError, ValueError)) as info:
            ad.jacobian(entry_by_entry, mode=mode, allocations="strict")(POINTS[0])
        message = str(info.value) + str(info.value.__cause__ or "")
        assert "np.zeros_like" in message or "np.empty_like" in message
    with pytest.raises((TypeError, ValueError)):
        ad.grad(lambda x: np.sum(entry_by_entry(x)), allocations="strict")(POINTS[0])
    with pytest.raises((TypeError, ValueError)):
        ad.jacobian_sparsity(entry_by_entry, allocations="strict")(POINTS[0])
    with pytest.raises((TypeError, ValueError)):
        ad.record(lambda x: np.sum(entry_by_entry(x)), POINTS[0], allocations="strict")
    with pytest.raises((TypeError, ValueError)):
        ad.ode_jacobian(models.package_rhs, allocations="strict")(0.0, POINTS[0])


def test_unknown_policy_is_a_value_error_naming_the_transform():
    with pytest.raises(ValueError, match="jacobian: allocations='lazy'.*'strict'"):
        ad.jacobian(entry_by_entry, allocations="lazy")
    with pytest.raises(ValueError, match="grad: allocations"):
        ad.grad(entry_by_entry, allocations=None)


def test_what_the_view_cannot_reach_stays_a_clear_error():
    """Methods looked up on objects are not rewritten; the write error stays."""
    model = models.Model()
    np.testing.assert_allclose(ad.jacobian(model.rhs)(np.ones(2)), [[0, 1], [-1, 0]])

    def calls_method(y):
        return model.rhs(y)              # reached through an object attribute

    with pytest.raises((TypeError, ValueError)) as info:
        ad.jacobian(calls_method)(np.ones(2))
    assert isinstance(info.value, ConversionError) or \
        isinstance(info.value.__cause__, ConversionError)


def test_global_writes_are_left_alone():
    """A function assigning a global is run as it is (a view could not write the global)."""
    before = models.CALLS
    with pytest.raises((TypeError, ValueError)):
        ad.jacobian(models.counts_calls)(np.ones(1))
    assert models.CALLS > before


def test_promotion_is_remembered_per_code():
    calls = []

    def f(x):
        calls.append(1)
        out = np.zeros(2)
        out[0] = x[0]
        out[1] = x[0] * x[1]
        return out

    ad.jacobian(f, mode="forward")(np.ones(2))
    first = len(calls)                   # a plain run that failed, then the view's run
    ad.jacobian(f, mode="forward")(np.ones(2))
    assert len(calls) - first == 1
