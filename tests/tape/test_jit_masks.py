"""ad.jit of programs that compute masks: comparisons read by np.where (written by the
user, or by a derivative rule such as power's or maximum's), so that hessians, hvps, jvps
and vjps of such functions compile."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py

POINTS = [np.array([0.5, 1.5, 2.0]), np.array([-1.2, 0.0, 0.7, 3.0]), np.array(0.8)]


def compiled(fn):
    return ad.jit(fn, fallback="error")  # fails if anything runs in Python


def cube_sum(x):
    return np.sum(x ** 3)


def kinked(x):
    return np.sum(np.maximum(x, 1.0) * x + np.abs(x) ** 2.5)


def branchy(x):
    return np.where(x > 1.0, np.sin(x) * x, x * x - 1.0)


def masked(x):
    m = np.logical_and(x > -1.0, ~np.isnan(x))
    return np.where(m, np.exp(x), 0.5 * x)


@pytest.mark.parametrize("x", POINTS, ids=["3", "4", "0d"])
@pytest.mark.parametrize("f", [cube_sum, kinked], ids=["cube", "kinked"])
def test_hessians_and_hvps_of_rules_that_branch(f, x):
    v = np.linspace(-1.0, 1.0, x.size).reshape(x.shape) + 0.3
    for call in (lambda: compiled(ad.hessian(f))(x),):
        np.testing.assert_allclose(call(), ad.hessian(f)(x), rtol=1e-12, atol=1e-12)
    hvp = compiled(lambda x, v: ad.hvp(f, x, v))
    np.testing.assert_allclose(hvp(x, v), ad.hvp(f, x, v), rtol=1e-12, atol=1e-12)
    fd = numerical_jacobian(ad.grad(f), (x + 0.01,), 0).reshape(x.size, x.size)
    np.testing.assert_allclose(compiled(ad.hessian(f))(x + 0.01).reshape(x.size, x.size), fd,
                               rtol=1e-5, atol=1e-5)


def log_sum_exp_rows(x):
    """A stable log-sum-exp over rows: its gradient divides by the count of each row's
    maxima (the max rule sums a mask), so its Hessian reads that count."""
    y = np.reshape(x, (2, -1))
    m = np.max(y, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(y - m), axis=1)) + m[:, 0]) + np.sum(x ** 3)


@pytest.mark.parametrize("x", [np.array([0.5, 1.5, 2.0, -0.3]),
                               np.array([1.0, 1.0, 0.2, 0.2, 0.2, 3.0])], ids=["4", "ties"])
def test_hessians_through_the_count_of_maxima(x):
    hvp = compiled(lambda x, v: ad.hvp(log_sum_exp_rows, x, v))
    H = compiled(ad.hessian(log_sum_exp_rows))
    for point in (x, x[::-1].copy()):
        v = np.linspace(-1.0, 1.0, point.size) + 0.3
        np.testing.assert_allclose(hvp(point, v), ad.hvp(log_sum_exp_rows, point, v),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(H(point), ad.hessian(log_sum_exp_rows)(point), rtol=1e-12,
                                   atol=1e-12)
    near = x + np.linspace(0.01, 0.02, x.size)  # no ties: the Hessian is a derivative
    fd = numerical_jacobian(ad.grad(log_sum_exp_rows), (near,), 0)
    np.testing.assert_allclose(H(near), fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x", POINTS, ids=["3", "4", "0d"])
@pytest.mark.parametrize("f", [branchy, masked], ids=["branchy", "masked"])
def test_where_on_computed_masks(f, x):
    x = x + 0.05  # off the kinks, for the differences
    jac = compiled(ad.jacobian(f))
    np.testing.assert_allclose(jac(x), ad.jacobian(f)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jac(x), numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)
    g = compiled(ad.grad(lambda x: np.sum(f(x) ** 2)))
    np.testing.assert_allclose(g(x), ad.grad(lambda x: np.sum(f(x) ** 2))(x), rtol=1e-12,
                               atol=1e-14)
    c = np.cos(np.arange(x.size)).reshape(x.shape)
    vjp = compiled(lambda x, c: ad.vjp(f, x)[1](c))
    jvp = compiled(lambda x, v: ad.jvp(f, (x,), (v,)))
    J = ad.jacobian(f)(x).reshape(x.size, x.size)
    np.testing.assert_allclose(np.ravel(vjp(x, c)[0]), J.T @ c.ravel(), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(np.ravel(jvp(x, c)[1]), J @ c.ravel(), rtol=1e-12, atol=1e-14)


def test_the_mask_follows_the_point_without_recording_again():
    jac = compiled(ad.jacobian(branchy))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one recording serves both sides of the kink
        for x in (np.array([0.5, 2.0]), np.array([2.0, 0.5]), np.array([3.0, 4.0])):
            np.testing.assert_allclose(jac(x), ad.jacobian(branchy)(x), rtol=1e-12)
    assert jac.tape.recordings == 1


def test_a_mask_also_read_by_a_branch():
    def f(x):
        m = x > 0.0
        if m[0]:
            return np.where(m, x ** 2, -x)
        return np.where(m, np.sin(x), x)

    jac = compiled(ad.jacobian(f))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for x in (np.array([0.5, -1.0]), np.array([-0.5, 1.0]), np.array([2.0, 3.0]),
                  np.array([-2.0, -3.0])):
            np.testing.assert_allclose(jac(x), ad.jacobian(f)(x), rtol=1e-12)
    assert jac.tape.recordings == 2


def test_broadcast_masks():
    def f(x, y):
        return np.sum(np.where(x[:, None] > y[None, :], x[:, None] * y, y ** 2))

    x, y = np.array([0.1, 0.9, 2.0]), np.array([0.5, 1.5])
    for argnum in (0, 1):
        g = compiled(ad.grad(f, argnums=argnum))
        np.testing.assert_allclose(g(x, y), ad.grad(f, argnums=argnum)(x, y), rtol=1e-12)
        fd = numerical_jacobian(f, (x, y), argnum)
        np.testing.assert_allclose(g(x, y), fd, rtol=1e-6, atol=1e-8)


def _masked(x):
    return np.sum(np.where(x > 0.45, x, x ** 3)) + np.sum(np.where(np.equal(x, 0.5), x, 0.0))


@pytest.mark.parametrize("transform", ["grad", "jvp", "hvp", "hessian", "vjp"])
def test_masks_that_change_after_the_recording(transform):
    """Compiled at one point, evaluated where every mask differs: right (the mask is
    computed in the compiled code) or recorded again, never the recorded mask."""
    x = np.linspace(0.1, 1.0, 4)
    v = np.array([1.0, -0.5, 0.25, 2.0])
    inner = {"grad": lambda x, v: ad.grad(_masked)(x),
             "jvp": lambda x, v: ad.jvp(_masked, (x,), (v,))[1],
             "hvp": lambda x, v: ad.hvp(_masked, x, v),
             "hessian": lambda x, v: np.sum(ad.hessian(_masked)(x) * v, axis=1),
             "vjp": lambda x, v: ad.vjp(lambda x: np.where(x > 0.45, x, x ** 3), x)[1](v)[0],
             }[transform]
    jitted = compiled(inner)
    np.testing.assert_allclose(jitted(x, v), inner(x, v), rtol=1e-12, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for point in (np.array([0.5, 0.0, -1.0, 2.0]), np.array([0.9, 0.5, 0.2, 0.0]), x):
            np.testing.assert_allclose(jitted(point, v), inner(point, v), rtol=1e-12,
                                       atol=1e-12)
