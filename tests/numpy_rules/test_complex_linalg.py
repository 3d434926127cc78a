"""Complex linear algebra: norm, svd, eigh / eigvalsh and pinv of complex matrices, checked
against central differences (both modes, and second order) and against JAX; and clear
refusals where a complex rule is not written (never a silently wrong number)."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

RNG = np.random.default_rng(28)


def _complex(x, shape):
    n = int(np.prod(shape))
    return (x[:n] + 1j * x[n:2 * n]).reshape(shape)


def _mH(z):
    return np.conj(np.swapaxes(z, -1, -2))


def _hermitian(z):
    return z + _mH(z)


def _real_imag(f):
    """A real function of a real vector from a (possibly complex) function."""
    def g(x):
        y = f(x)
        return np.concatenate([np.ravel(np.real(y)), np.ravel(np.imag(y))])
    return g


def _check(f, size, second_order=True, atol=1e-6):
    """Forward and reverse Jacobians of ``f`` (real vector -> complex array) against central
    differences; the Hessian of a random projection against differences of its gradient."""
    g = _real_imag(f)
    x = RNG.standard_normal(size)
    expected = numerical_jacobian(g, (x,), 0)
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(g, mode=mode)(x)
        assert jac.dtype == np.float64
        np.testing.assert_allclose(jac, expected, atol=atol, rtol=1e-5, err_msg=mode)
    if second_order:
        w = RNG.standard_normal(expected.shape[0])
        scalar = lambda y: np.sum(w * g(y))  # noqa: E731
        hess = ad.hessian(scalar)(x)
        np.testing.assert_allclose(hess, numerical_jacobian(ad.grad(scalar), (x,), 0),
                                   atol=1e-5, rtol=1e-4)


# -- norm ------------------------------------------------------------------------------------

VECTOR_ORDS = [None, 1, 2, 3, 0.5, np.inf, -np.inf, -1]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
def test_norm_of_complex_vectors(ord):
    _check(lambda x: np.linalg.norm(_complex(x, (5,)), ord), 10)


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
def test_norm_of_complex_matrices(ord):
    _check(lambda x: np.linalg.norm(_complex(x, (3, 4)), ord), 24)


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
def test_norm_of_complex_matrices_over_axes(ord):
    _check(lambda x: np.linalg.norm(_complex(x, (2, 3, 4)), ord, axis=(2, 0),
                                    keepdims=True), 48, second_order=ord in (None, "fro"))


@pytest.mark.parametrize("kw", [dict(axis=1), dict(), dict(ord=3, axis=-1, keepdims=True)],
                         ids=str)
def test_vector_norms_of_complex_arrays(kw):
    _check(lambda x: np.linalg.norm(_complex(x, (2, 3, 4)), **kw), 48)


@pytest.mark.skipif(not hasattr(np.linalg, "vector_norm"), reason="numpy >= 2")
def test_array_api_norms_of_complex_arrays():
    _check(lambda x: np.linalg.vector_norm(_complex(x, (3, 4)), ord=3, axis=0), 24)
    _check(lambda x: np.linalg.matrix_norm(_complex(x, (2, 3, 3)), ord="nuc"), 36)


def test_norm_of_zero_complex_vector_has_zero_gradient():
    assert np.all(ad.grad(np.linalg.norm)(np.zeros(3, complex)) == 0)


# -- svd -------------------------------------------------------------------------------------

SVD_SHAPES = [(3, 3), (4, 2), (2, 4), (2, 3, 2), (2, 2, 3)]


@pytest.mark.parametrize("shape", SVD_SHAPES, ids=str)
def test_complex_singular_values(shape):
    size = 2 * int(np.prod(shape))
    _check(lambda x: np.linalg.svd(_complex(x, shape), compute_uv=False), size)
    if hasattr(np.linalg, "svdvals"):
        _check(lambda x: np.linalg.svdvals(_complex(x, shape)), size, second_order=False)


@pytest.mark.parametrize("shape", SVD_SHAPES, ids=str)
def test_complex_singular_vectors(shape):
    """U and Vh are defined up to a phase per column: differentiate what does not see it."""
    size = 2 * int(np.prod(shape))

    def projector_and_polar(x):
        u, s, vh = np.linalg.svd(_complex(x, shape), full_matrices=False)
        return np.concatenate([np.ravel(u @ _mH(u)), np.ravel(_mH(vh) @ vh),
                               np.ravel((u * np.sqrt(s)[..., None, :]) @ vh),
                               np.ravel(np.abs(u))])

    _check(projector_and_polar, size)


def test_square_complex_svd_full_matrices():
    _check(lambda x: (lambda o: o[0] @ o[2])(np.linalg.svd(_complex(x, (3, 3)))), 18)


# -- eigh / eigvalsh -----------------------------------------------------------------------------


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
def test_complex_eigvalsh(uplo, shape):
    size = 2 * int(np.prod(shape))
    _check(lambda x: np.linalg.eigvalsh(_hermitian(_complex(x, shape)), uplo), size)
    _check(lambda x: np.linalg.eigh(_hermitian(_complex(x, shape)), uplo)[0], size,
           second_order=False)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_complex_eigvalsh_reads_one_triangle(uplo):
    """Only the triangle numpy reads matters (not the imaginary part of the diagonal)."""
    _check(lambda x: np.linalg.eigvalsh(_complex(x, (3, 3)), uplo), 18)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_complex_eigenvectors(uplo):
    def phase_free(x):
        w, v = np.linalg.eigh(_hermitian(_complex(x, (3, 3))), uplo)
        return np.concatenate([np.ravel((v * np.exp(w)[..., None, :]) @ _mH(v)),
                               np.ravel(np.abs(v))])

    _check(phase_free, 18)


# -- pinv ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2), (3, 2, 4)], ids=str)
def test_complex_pinv(shape):
    _check(lambda x: np.linalg.pinv(_complex(x, shape)), 2 * int(np.prod(shape)))


def test_real_pinv_of_tall_and_batched_matrices():
    _check(lambda x: np.linalg.pinv(x[:24].reshape(2, 4, 3)), 24)


# -- dtypes: complex64 inputs --------------------------------------------------------------------


@pytest.mark.parametrize("f", [lambda z: np.linalg.norm(z, "nuc"),
                               lambda z: np.sum(np.linalg.svd(z, compute_uv=False) ** 2),
                               lambda z: np.sum(np.abs(np.linalg.pinv(z)) ** 2),
                               lambda z: np.sum(np.linalg.eigvalsh(z @ _mH(z)) ** 3)])
def test_complex64_matches_complex128(f):
    z = _complex(RNG.standard_normal(24), (3, 4))
    g128 = ad.grad(f)(z)
    g64 = ad.grad(f)(z.astype(np.complex64))
    np.testing.assert_allclose(g64, g128, rtol=2e-3, atol=2e-3)


# -- JAX as the oracle ---------------------------------------------------------------------------

jax = pytest.importorskip("jax", reason="JAX is the oracle for these tests")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


def _jmH(m, z):
    return m.conj(m.swapaxes(z, -1, -2))


ORACLE = {
    "norm2": lambda m: lambda z: m.linalg.norm(z[0]),
    "norm-inf-vector": lambda m: lambda z: m.linalg.norm(z[0], m.inf),
    "fro": lambda m: lambda z: m.linalg.norm(z, "fro"),
    "nuc": lambda m: lambda z: m.linalg.norm(z, "nuc"),
    "matrix-2": lambda m: lambda z: m.linalg.norm(z, 2),
    "matrix-1": lambda m: lambda z: m.linalg.norm(z, 1),
    "svals": lambda m: lambda z: m.sum(m.linalg.svd(z, compute_uv=False) ** 3),
    "svd-uv": lambda m: lambda z: m.sum(m.abs(
        (lambda o: (o[0] * m.sqrt(o[1])[None, :]) @ o[2])(m.linalg.svd(z, full_matrices=False)))
        ** 2),
    "eigvalsh": lambda m: lambda z: m.sum(m.sin(m.linalg.eigvalsh(z[:, :3] @ _jmH(m, z[:, :3])))),
    "eigh-projector": lambda m: lambda z: m.sum(m.abs(
        (lambda o: (o[1] * o[0][None, :]) @ _jmH(m, o[1]))(m.linalg.eigh(z[:, :3] + _jmH(m, z[:, :3]))))),
    "pinv": lambda m: lambda z: m.sum(m.abs(m.linalg.pinv(z)) ** 2),
}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_grad_matches_jax(name):
    make = ORACLE[name]
    z = _complex(RNG.standard_normal(24), (3, 4))
    ours = ad.grad(make(np))(z)
    theirs = np.asarray(jax.grad(make(jnp))(jnp.asarray(z)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)


# -- the other factorizations and products of complex matrices ------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)], ids=str)
def test_complex_slogdet(shape):
    size = 2 * int(np.prod(shape))
    _check(lambda x: np.linalg.slogdet(_complex(x, shape))[1], size)
    _check(lambda x: np.linalg.slogdet(_complex(x, shape))[0], size)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("hermitian", [True, False])
def test_complex_cholesky(upper, hermitian):
    def f(x):
        z = _complex(x, (2, 3, 3))
        z = _hermitian(z) if hermitian else z
        return np.linalg.cholesky(z + 9 * np.eye(3), upper=upper)

    _check(f, 36, second_order=hermitian and not upper)


@pytest.mark.parametrize("mode", ["reduced", "r", "complete"])
@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 5), (2, 4, 3), (2, 2, 4)], ids=str)
def test_complex_qr(shape, mode):
    if mode == "complete" and shape[-2] > shape[-1]:
        pytest.skip("complete Q of a tall matrix has no derivative (refused)")

    def f(x):
        out = np.linalg.qr(_complex(x, shape), mode=mode)
        return out if mode == "r" else np.concatenate([out[0].ravel(), out[1].ravel()])

    _check(f, 2 * int(np.prod(shape)), second_order=shape == (3, 3))


@pytest.mark.parametrize("complex_a", [True, False])
@pytest.mark.parametrize("b_shape", [(5,), (5, 2)], ids=str)
def test_complex_lstsq(complex_a, b_shape):
    def f(x):
        a = _complex(x, (5, 3)) if complex_a else x[:15].reshape(5, 3)
        x, residuals, _, s = np.linalg.lstsq(a, _complex(x[30:], b_shape), rcond=None)
        return np.concatenate([x.ravel(), residuals.ravel(), s.ravel()])

    _check(f, 60, second_order=False)


PRODUCTS = {
    "vdot": lambda x: np.vdot(_complex(x, (2, 3)), _complex(x[5:], (3, 2))),
    "vdot-complex-real": lambda x: np.vdot(_complex(x[5:], (3, 2)), x[:6]),
    "linalg.vecdot": lambda x: np.linalg.vecdot(_complex(x, (2, 3)), _complex(x[5:], (2, 3))),
}
if hasattr(np, "vecmat"):
    PRODUCTS["vecdot"] = lambda x: np.vecdot(_complex(x, (2, 3)), _complex(x[5:], (3,)))
    PRODUCTS["vecmat"] = lambda x: np.vecmat(_complex(x, (3,)), _complex(x[5:], (3, 2)))


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_that_conjugate_their_first_argument(name):
    _check(PRODUCTS[name], 40)


BATCHED_ORACLE = {
    "norm-fro-axes": lambda m: lambda z: m.sum(m.linalg.norm(z, "fro", axis=(-2, -1))),
    "norm-nuc-axes": lambda m: lambda z: m.sum(m.linalg.norm(z, "nuc", axis=(-2, -1))),
    "norm-2-axes": lambda m: lambda z: m.sum(m.linalg.norm(z, 2, axis=(-1, -2))),
    "norm-vector-axis": lambda m: lambda z: m.sum(m.linalg.norm(z, 3, axis=1)),
    "svals": lambda m: lambda z: m.sum(m.linalg.svd(z, compute_uv=False) ** 3),
    "eigvalsh-upper": lambda m: lambda z: m.sum(m.sin(m.linalg.eigvalsh(
        z[..., :3] @ _jmH(m, z[..., :3]), UPLO="U"))),
    "pinv": lambda m: lambda z: m.sum(m.abs(m.linalg.pinv(z)) ** 2),
}


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 4, 3)], ids=str)
@pytest.mark.parametrize("name", sorted(BATCHED_ORACLE))
def test_batched_grad_matches_jax(name, shape, dtype):
    make = BATCHED_ORACLE[name]
    z = _complex(RNG.standard_normal(48), shape).astype(dtype)
    ours = ad.grad(make(np))(z)
    theirs = np.asarray(jax.grad(make(jnp))(jnp.asarray(z)))
    tol = 1e-7 if dtype == np.complex128 else 2e-3
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)
