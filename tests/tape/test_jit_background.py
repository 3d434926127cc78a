"""ad.jit(..., background=True): the tape's replay serves while Numba compiles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.jit import JitFallbackWarning, _Entry

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def lorenz96(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0


def lorenz_sum(x):
    return np.sum(lorenz96(x) ** 2)


def compiled_entries(jitted):
    return [e for e in jitted._entries.values() if isinstance(e, _Entry)]


@pytest.mark.parametrize("n", [5, 12])
def test_results_before_and_after_the_background_compile(n):
    x = np.linspace(0.5, 1.5, n)
    jac = ad.jit(ad.jacobian(lorenz96), fallback="error", background=True)
    first = jac(x)  # the replay (or the compiled code, if Numba was quicker)
    assert jac.wait()
    later = [jac(x + k) for k in (0.0, 0.25)]
    assert compiled_entries(jac), "the compiled code serves after wait()"
    expected = ad.jacobian(lorenz96)(x)
    np.testing.assert_allclose(first, expected, rtol=1e-14)
    np.testing.assert_allclose(later[0], expected, rtol=1e-14)
    np.testing.assert_allclose(later[1], numerical_jacobian(lorenz96, (x + 0.25,), 0),
                               rtol=1e-6, atol=1e-8)


def test_gradient_of_a_number():
    f = lambda x: np.sin(x) ** 2 * x  # noqa: E731
    g = ad.jit(ad.grad(f), background=True)
    values = [g(0.7)]
    g.wait()
    values += [g(0.7), g(np.float64(0.7))]
    for v in values:
        np.testing.assert_allclose(v, ad.grad(f)(0.7), rtol=1e-14)
        assert np.shape(v) == ()


def test_pickling_keeps_background():
    cloudpickle = pytest.importorskip("cloudpickle")  # transforms pickle with it (dask)
    copy = cloudpickle.loads(cloudpickle.dumps(ad.jit(ad.grad(lorenz_sum), background=True)))
    assert copy.background
    x = np.linspace(0.5, 1.5, 6)
    np.testing.assert_allclose(copy(x), ad.grad(lorenz_sum)(x))
    copy.wait()


def test_what_cannot_compile_is_reported_after_the_build():
    f = lambda x: np.sum(np.linalg.eigh(np.outer(x, x))[0] * x)  # noqa: E731 - two results
    x = np.array([3.0, 1.0, 2.0])
    g = ad.jit(ad.grad(f), fallback="error", background=True)
    try:  # the replay, unless the build has failed already
        np.testing.assert_allclose(g(x), ad.grad(f)(x))
    except ad.JitError:
        pass
    g.wait()
    for _ in range(2):  # at every call, as without background
        with pytest.raises(ad.JitError, match="fallback"):
            g(x)
    w = ad.jit(ad.grad(f), background=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        first = w(x)  # said here if the build has failed already, else at the next call
        w.wait()
        second = w(x)
        third = w(x[::-1].copy())
    assert [type(m.message) for m in said] == [JitFallbackWarning]  # said once
    for got, at in ((first, x), (second, x), (third, x[::-1].copy())):
        np.testing.assert_allclose(got, ad.grad(f)(at))


def test_guards_with_background_builds():
    def f(x):
        if x[0] > 0:
            return np.sin(x) * 2.0
        return np.cos(x)

    jac = ad.jit(ad.jacobian(f), fallback="error", background=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ad.TapeRetraceWarning)
        for x0 in (0.5, -0.5, 0.3, -0.3):
            x = np.array([x0, 2.0])
            np.testing.assert_allclose(jac(x), ad.jacobian(f)(x))
        for _ in range(3):  # a build started by the last call is picked up by the next
            jac.wait()
            for x0 in (0.9, -0.9):
                x = np.array([x0, 2.0])
                np.testing.assert_allclose(jac(x), ad.jacobian(f)(x))
    assert jac.wait() and len(compiled_entries(jac)) == 2


def test_sparse_jacobian_detects_its_pattern_in_the_background():
    f = lambda x: np.concatenate([x[:1] ** 2, x[1:] * x[:-1]])  # noqa: E731
    x = np.linspace(1.0, 2.0, 6)
    sj = ad.jit(ad.sparse_jacobian(f), fallback="error", background=True)
    first = sj(x)
    sj.wait()
    second = sj(x * 1.5)
    np.testing.assert_allclose(first.toarray(), ad.jacobian(f)(x))
    np.testing.assert_allclose(second.toarray(), ad.jacobian(f)(x * 1.5))
    assert compiled_entries(sj)
