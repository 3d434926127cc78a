"""NaN-safe tangents: a tangent entry that is exactly zero contributes exactly zero in every
forward path (scalar, lean, general, fused kernels, njit drivers, compressed sparse passes,
tape replay), as ForwardDiff.jl's NaN-safe mode; reverse mode gives the same numbers."""

import numpy as np
import pytest

import dualad as ad
from dualad.derivatives.kinds import scale_scalar_tangent, scale_tangent
from dualad.derivatives.language import kernel_module_source
from dualad.derivatives.registry import get_rule
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.forward_mode import kernels as dual_kernels
from dualad.forward_mode.dual import Dual, Tag

X = np.array([0.0, 1.0, 4.0])
WANT = np.array([np.inf, 0.5, 0.25])


def _sum_sqrt(x):
    return np.sum(np.sqrt(x))


def test_issue_example_both_modes():
    fwd = ad.jacobian(_sum_sqrt, mode="forward")(X)
    rev = ad.jacobian(_sum_sqrt, mode="reverse")(X)
    np.testing.assert_array_equal(fwd, WANT)
    np.testing.assert_array_equal(rev, WANT)


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_every_chunk_size(chunk):
    np.testing.assert_array_equal(ad.jacobian(_sum_sqrt, mode="forward", chunk=chunk)(X), WANT)


def test_general_path(general_only):
    np.testing.assert_array_equal(ad.jacobian(_sum_sqrt, mode="forward")(X), WANT)
    # broadcasting against a constant of another shape takes the general path too
    f = lambda x: np.sum(np.sqrt(x * np.ones((2, 1))), axis=0)  # noqa: E731
    np.testing.assert_array_equal(ad.jacobian(f, mode="forward")(X), 2 * np.diag(WANT))


def test_binary_rules_lean_and_general(general_only):
    # d/dy x**y at x = 0 is log(0) * 0**y: -inf times zero; the x-direction is not touched
    f = lambda v: np.power(v[0], v[1]) + v[2]  # noqa: E731
    v = np.array([0.0, 2.0, 1.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        slow = ad.jacobian(f, mode="forward")(v)
    np.testing.assert_array_equal(slow, [0.0, 0.0, 1.0])


def test_binary_rules_fast_paths():
    f = lambda v: np.power(v[0], v[1]) + v[2]  # noqa: E731
    v = np.array([0.0, 2.0, 1.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        fwd = ad.jacobian(f, mode="forward")(v)
    np.testing.assert_array_equal(fwd, [0.0, 0.0, 1.0])
    # arrays: the lean binary path with both operands carrying partials
    g = lambda x: np.arctan2(np.sqrt(x), x + 1.0)  # noqa: E731
    x = np.array([0.0, 2.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        jf = ad.jacobian(g, mode="forward")(x)
        jr = ad.jacobian(g, mode="reverse")(x)
    assert np.isnan(jf).sum() == 0
    np.testing.assert_array_equal(jf[0, 1], 0.0)
    np.testing.assert_array_equal(jf[1, 0], 0.0)
    np.testing.assert_allclose(jf[1, 1], jr[1, 1], rtol=1e-14)


def test_scalar_paths():
    # ad.derivative: scalar Duals with one direction, the scalar fast path
    assert ad.derivative(lambda t: np.sqrt(t * 0.0) + t)(1.0) == 1.0
    assert ad.derivative(lambda t: np.sqrt(0.0 * t) + 2 * t)(1.0) == 2.0
    assert ad.derivative(np.sqrt)(0.0) == np.inf
    with np.errstate(divide="ignore", invalid="ignore"):  # the values are log(0) * 0
        assert ad.derivative(lambda t: np.log(t - t) * 0 + t)(2.0) == 1.0
    assert scale_scalar_tangent(np.inf, 0.0) == 0.0
    assert scale_scalar_tangent(None, 1.0) == 0.0
    assert np.isnan(scale_scalar_tangent(np.nan, 1.0))


def test_zero_dim_and_shapes():
    for shape in [(), (1,), (2, 3)]:
        x = np.zeros(shape)
        j = ad.jacobian(lambda y: np.sqrt(y) * 2.0, mode="forward")(x)
        assert j.shape == shape + shape
        diag = np.eye(max(x.size, 1), dtype=bool).reshape(j.shape)
        assert np.all(j[diag] == np.inf) and np.all(j[~diag] == 0.0)
        # reverse mode's rows pull back one cotangent at a time: the same diagonal
        r = ad.jacobian(lambda y: np.sqrt(y) * 2.0, mode="reverse")(x)
        np.testing.assert_array_equal(j[diag], r[diag])


def test_scale_tangent_cases():
    p = np.array([[0.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(scale_tangent(p, np.array([np.inf, np.nan])),
                                  [[0.0, np.inf], [np.nan, 0.0]])
    np.testing.assert_array_equal(scale_tangent(p, np.array([2.0, 3.0])), p * [[2.0], [3.0]])
    np.testing.assert_array_equal(scale_tangent(p, np.float64(np.inf)), [[0, np.inf], [np.inf, 0]])
    np.testing.assert_array_equal(scale_tangent(p, np.array(-np.inf)),
                                  [[0, -np.inf], [-np.inf, 0]])
    with np.errstate(invalid="ignore"):  # (inf + 0j) * (1 + 0j): numpy's complex product
        c = scale_tangent(p.astype(complex), np.array([np.inf + 0j, 1j]))
    assert c[0, 0] == 0 and c[1, 1] == 0 and c[1, 0] == 2j
    # huge finite derivatives overflow the finiteness test: the exact path gives the product
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(scale_tangent(p, np.array([1e300, 1.0])),
                                      p * [[1e300], [1.0]])


def test_fused_kernel_source_and_numbers():
    rule = get_rule(np.sqrt)
    src = kernel_module_source(rule.numpy_name, rule.arg_names, rule.expressions)
    assert "!= 0.0 else 0.0" in src
    kern = rule.kernel((True,))
    if kern is None:
        pytest.skip("numba kernels unavailable")
    v = np.array([0.0, 1.0, 4.0])
    p = np.eye(3)
    out, outp = np.empty(3), np.empty((3, 3))
    kern(v, p, out, outp)
    np.testing.assert_array_equal(outp, np.diag(WANT))
    # through the forward path, with the kernel forced on for small arrays
    rk = dual_kernels.kernels_for(np.sqrt)
    old = (rk.threshold, dual_kernels.ENABLED)
    rk.threshold = 0
    dual_kernels.set_enabled(True)
    try:
        rk._serial[(True,)] = kern
        d = np.sqrt(Dual._make(v, p, Tag()))
        np.testing.assert_array_equal(d.partials, np.diag(WANT))
    finally:
        rk.threshold = old[0]
        dual_kernels.set_enabled(old[1])


def test_njit_driver():
    numba = pytest.importorskip("numba")

    @numba.njit
    def f(x):
        out = np.empty_like(x)
        s = 0.0
        for i in range(x.shape[0]):
            s += np.sqrt(x[i])
        for i in range(x.shape[0]):
            out[i] = s
        return out

    np.testing.assert_array_equal(ad.jacobian(f, mode="forward")(X), np.tile(WANT, (3, 1)))


def test_sparse_compressed_pass():
    f = lambda x: np.sqrt(x) + np.roll(x, 1)  # noqa: E731
    j = ad.sparse_jacobian(f, mode="forward")(X).toarray()
    want = np.diag(WANT) + np.roll(np.eye(3), 1, axis=0)
    np.testing.assert_array_equal(j, want)
    np.testing.assert_array_equal(ad.jacobian(f, mode="forward")(X), want)


def test_tape_forward_replay():
    tape = ad.record(_sum_sqrt, np.ones(3))
    np.testing.assert_array_equal(ad.jacobian(tape, mode="forward")(X), WANT)
    out, tangent = ad.jvp(tape, (X,), (np.array([0.0, 1.0, 1.0]),))
    assert tangent == 0.75


def test_finite_points_agree_with_differences():
    x = np.array([0.3, 1.0, 4.0])
    f = lambda y: np.sqrt(y) * np.log(y) + np.arctan2(y, 1.0 + y)  # noqa: E731
    np.testing.assert_allclose(ad.jacobian(f, mode="forward")(x),
                               numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)
