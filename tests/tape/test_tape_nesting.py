"""Tapes inside the transforms, and Hessian-vector products through tapes (``ad.hvp`` of
plain functions is tested in ``tests/api/test_hvp.py``)."""

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.api import hvp
from dualad.tape import record


def f(x):
    return np.sum(np.sin(x) * x ** 2) + np.prod(x[:2]) * x[-1]


POINTS = [np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -0.25, 2.0])]


@pytest.mark.parametrize("x", POINTS)
def test_grad_of_a_function_that_calls_a_tape(x):
    tape = record(f, np.ones_like(x))
    g = ad.grad(lambda y: tape(y) * 2.0 + np.sum(y))(x)
    np.testing.assert_allclose(g, 2 * ad.grad(f)(x) + 1.0)


@pytest.mark.parametrize("x", POINTS)
def test_jvp_and_jacobian_of_a_tape(x):
    tape = record(f, np.ones_like(x))
    v = np.linspace(-1.0, 1.0, x.size)
    np.testing.assert_allclose(ad.jvp(tape, (x,), (v,))[1], ad.grad(f)(x) @ v)
    np.testing.assert_allclose(ad.jacobian(tape.grad, mode="forward")(x), ad.hessian(f)(x),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("x", POINTS)
def test_tape_hvp_equals_hessian_times_v(x):
    rng = np.random.default_rng(x.size)
    v = rng.standard_normal(x.shape)
    want = ad.hessian(f)(x) @ v
    tape = record(f, np.ones_like(x))
    np.testing.assert_allclose(tape.hvp((x,), v), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hvp(tape, x, v), want, rtol=1e-10, atol=1e-12)


def test_tape_hvp_in_two_arguments():
    def q(x, y):
        return np.sum(x ** 2 * y) + np.sum(np.sin(y))

    tape = record(q, np.ones(2), np.ones(2))
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    vx, vy = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    hx, hy = tape.hvp((x, y), (vx, vy), argnums=(0, 1))
    # H = [[2 diag(y), 2 diag(x)], [2 diag(x), -diag(sin y)]]
    np.testing.assert_allclose(hx, 2 * y * vx + 2 * x * vy)
    np.testing.assert_allclose(hy, 2 * x * vx - np.sin(y) * vy)


def test_second_derivatives_through_a_tape():
    x = POINTS[0]
    tape = record(f, x)
    np.testing.assert_allclose(ad.hessian(tape)(x), ad.hessian(f)(x), rtol=1e-10, atol=1e-12)
    # reverse over reverse: the gradient sweep itself is recorded by the outer grad
    outer = ad.grad(lambda y: np.sum(tape.grad(y) ** 2))(x)
    want = ad.grad(lambda y: np.sum(ad.grad(f)(y) ** 2))(x)
    np.testing.assert_allclose(outer, want, rtol=1e-10, atol=1e-12)


def test_recording_a_function_that_differentiates():
    g = lambda x: np.sum(ad.grad(f)(x) * x)  # noqa: E731
    tape = record(g, POINTS[0])
    x = np.array([1.0, 2.0, -0.5])
    np.testing.assert_allclose(tape.grad(x), ad.grad(g)(x), rtol=1e-10)
    assert tape.recordings == 1


def test_tape_inside_a_recording_keeps_its_guards():
    def inner(x):
        return np.sum(x ** 3) if np.sum(x) > 0 else np.sum(np.sin(x))

    inner_tape = record(inner, np.ones(2))
    outer = record(lambda y: inner_tape(y) * 2.0 + np.sum(y), np.ones(2))
    y = np.array([-1.0, -2.0])
    with pytest.warns(UserWarning, match="records again"):
        g = outer.grad(y)
    np.testing.assert_allclose(g, 2 * np.cos(y) + 1.0)
    np.testing.assert_allclose(outer.grad(np.ones(2)), 2 * 3 * np.ones(2) + 1.0)


def _masked(x):
    return np.sum(np.where(x > 0.45, x, x ** 3)) + np.sum(np.where(np.equal(x, 0.5), x, 0.0))


@pytest.mark.parametrize("transform", ["grad", "jvp", "hvp"])
def test_recorded_transforms_through_masks_are_right_or_refused(transform):
    """A tape of a transform whose function branches elementwise on its input must not
    replay the recorded mask: at a point where the mask changes it is right or it raises."""
    x = np.linspace(0.1, 1.0, 4)
    v = np.array([1.0, -0.5, 0.25, 2.0])
    point = np.array([0.5, 0.0, -1.0, 2.0])  # the masks differ from the recording's
    inner = {"grad": lambda x, v: ad.grad(_masked)(x),
             "jvp": lambda x, v: ad.jvp(_masked, (x,), (v,))[1],
             "hvp": lambda x, v: ad.hvp(_masked, x, v)}[transform]
    try:
        tape = ad.record(inner, x, v)
    except ad.DualadError as refused:  # no number at all, and the message names the call
        assert "np.greater" in str(refused) or "np.equal" in str(refused)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        np.testing.assert_allclose(tape(point, v), inner(point, v), rtol=1e-12, atol=1e-12)


DECIDING = {  # functions whose rules decide from values: masks, orders, finite entries
    "clip": lambda x: np.sum(np.clip(x, 0.2, 0.8) * x),
    "clip_traced_bound": lambda x: np.sum(np.clip(x, x[0] * 0.5, 0.8) * x),
    "sort": lambda x: np.sum(np.sort(x) * np.arange(4.0)),
    "nan_to_num": lambda x: np.sum(np.nan_to_num(np.log(x - 0.3))),
    "take_along_argsort": lambda x: np.sum(np.take_along_axis(x, np.argsort(x), 0) ** 2
                                           * np.arange(4.0)),
    "select": lambda x: np.sum(np.select([x < 0.3, x > 0.7], [x ** 2, x ** 3], x)),
    "maximum_abs": lambda x: np.sum(np.maximum(x, 0.5) * x + np.abs(x - 0.5) ** 3),
}


@pytest.mark.parametrize("name", sorted(DECIDING))
@pytest.mark.parametrize("transform", ["grad", "jvp", "hvp"])
def test_recorded_transforms_recompute_what_rules_decide(name, transform):
    """A tape (and ad.jit) of a transform whose rules decide from values (a mask, a sort
    order, which entries are finite), replayed where every decision differs: the numbers
    of eager mode, never the recorded decisions."""
    f = DECIDING[name]
    v = np.array([1.0, -0.5, 0.25, 2.0])
    inner = {"grad": lambda x: ad.grad(f)(x),
             "jvp": lambda x: ad.jvp(f, (x,), (v,))[1],
             "hvp": lambda x: ad.hvp(f, x, v)}[transform]
    x = np.linspace(0.1, 1.0, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        warnings.simplefilter("ignore", ad.JitFallbackWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # log of negatives: nan_to_num
        tape = ad.record(inner, x)
        jitted = ad.jit(inner)
        for point in (x, np.array([0.9, 0.05, 0.6, 0.35]), np.array([0.5, 0.2, 0.8, 1.5])):
            expected = inner(point)
            np.testing.assert_allclose(tape(point), expected, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(jitted(point), expected, rtol=1e-12, atol=1e-12)
