"""np.linalg in both modes against finite differences (stacks of matrices included)."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand, spd, well_conditioned

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian


def sym(a):
    """The symmetric matrix built from the lower triangle (what eigh/cholesky read)."""
    return np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)


@pytest.mark.parametrize("batch", [(), (2,), (2, 1)])
def test_inv_det_slogdet(batch):
    a = well_conditioned(*batch)
    check(np.linalg.inv, a)
    check(np.linalg.det, a)
    check(lambda a: np.linalg.slogdet(a)[1], a)
    check(lambda a: np.linalg.slogdet(-a).logabsdet, a)


@pytest.mark.parametrize("sa,sb", [((), (3,)), ((), (3, 2)), ((2,), (3,)), ((2,), (2, 3, 1)),
                                   ((), (2, 3, 2)), ((2, 1), (3, 3, 2))])
def test_solve(sa, sb):
    check(np.linalg.solve, well_conditioned(*sa), rand(*sb))


@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky(batch):
    check(np.linalg.cholesky, spd(*batch))
    check(lambda a: np.linalg.cholesky(a, upper=True), spd(*batch))
    # through a symmetrisation: the gradient w.r.t. a symmetric matrix
    check(lambda a: np.linalg.cholesky(sym(a)), spd(*batch))


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(batch, uplo):
    a = spd(*batch)
    check(lambda a: np.linalg.eigh(a, uplo)[0], a)
    check(lambda a: np.linalg.eigh(a, UPLO=uplo).eigenvectors ** 2, a)  # sign-invariant
    check(lambda a: np.linalg.eigvalsh(a, uplo), a)

    def rebuilt(a):
        w, v = np.linalg.eigh(a, uplo)
        return (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)

    check(rebuilt, a)


def test_eigh_repeated_eigenvalues_keep_eigenvalue_gradients_finite():
    a = np.diag([1.0, 1.0, 2.0])
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lambda a: np.sum(np.linalg.eigh(a)[0] ** 2), mode=mode)(a)
        assert np.all(np.isfinite(jac))
        np.testing.assert_allclose(jac, np.diag([2.0, 2.0, 4.0]), atol=1e-12)


SVD_SHAPES = [(4, 3), (3, 5), (3, 3), (2, 4, 3), (1, 1)]


@pytest.mark.parametrize("shape", SVD_SHAPES)
def test_svd(shape):
    a = rand(*shape)
    check(lambda a: np.linalg.svd(a, full_matrices=False)[1], a)
    check(lambda a: np.linalg.svd(a, compute_uv=False), a)
    check(lambda a: np.abs(np.linalg.svd(a, full_matrices=False).U), a)
    check(lambda a: np.abs(np.linalg.svd(a, full_matrices=False).Vh), a)
    check(lambda a: np.linalg.svdvals(a), a)


def test_svd_full_matrices_square_and_refusal_for_rectangles():
    check(lambda a: np.abs(np.linalg.svd(a)[0]), rand(3, 3))
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        ad.grad(lambda a: np.sum(np.linalg.svd(a)[0]))(rand(4, 3))


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 2)])
def test_qr(shape):
    a = rand(*shape)
    check(lambda a: np.linalg.qr(a)[0], a)
    check(lambda a: np.linalg.qr(a).R, a)
    check(lambda a: np.linalg.qr(a, mode="r"), a)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5), (2, 3, 2)])
def test_pinv(shape):
    check(np.linalg.pinv, rand(*shape))


@pytest.mark.parametrize("n", [0, 1, 3, -1, -2])
def test_matrix_power(n):
    check(lambda a: np.linalg.matrix_power(a, n), well_conditioned())
    check(lambda a: np.linalg.matrix_power(a, n), well_conditioned(2))


@pytest.mark.parametrize("sa,sb", [((5, 3), (5,)), ((5, 3), (5, 2)), ((2, 4), (2,))])
def test_lstsq(sa, sb):
    a, b = rand(*sa), rand(*sb)
    check(lambda a, b: np.linalg.lstsq(a, b)[0], a, b)
    check(lambda a, b: np.linalg.lstsq(a, b)[3], a, b)
    if sa[0] > sa[1]:
        check(lambda a, b: np.linalg.lstsq(a, b)[1], a, b)


def test_multi_dot():
    check(lambda a, b, c: np.linalg.multi_dot([a, b, c]), rand(3), rand(3, 4), rand(4, 2))
    check(lambda a, b, c: np.linalg.multi_dot([a, b, c]), rand(2, 3), rand(3, 4), rand(4))


VECTOR_ORDS = [None, 1, 2, 3, 0.5, np.inf, -np.inf, -1]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norms(ord):
    x = rand(3, 4, low=0.1)
    check(lambda x: np.linalg.norm(x[0], ord), x)
    check(lambda x: np.linalg.norm(x, ord, axis=1, keepdims=True), x)
    check(lambda x: np.linalg.norm(x, ord, axis=0), x)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norms(ord):
    x = rand(3, 4, 2)
    check(lambda x: np.linalg.norm(x[:, :, 0], ord), x)
    check(lambda x: np.linalg.norm(x, ord, axis=(2, 0)), x)
    check(lambda x: np.linalg.norm(x, ord, axis=(0, 1), keepdims=True), x)


def test_norm_conventions():
    check(np.linalg.norm, rand(2, 3, 2))  # N-D, no axis: the 2-norm of all entries
    check(lambda x: np.linalg.vector_norm(x, axis=(0, 2), ord=3), rand(2, 3, 2))
    check(lambda x: np.linalg.matrix_norm(x, ord="nuc", keepdims=True), rand(2, 3, 2))
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(np.linalg.norm, mode=mode)(np.zeros(3))
        np.testing.assert_array_equal(jac, np.zeros(3))
        jac = ad.jacobian(lambda x: np.linalg.norm(x, np.inf), mode=mode)(
            np.array([1.0, -3.0, 3.0]))
        np.testing.assert_allclose(jac, [0.0, -0.5, 0.5])


def test_hessian_of_inv_einsum_norm():
    def f(a):
        return np.linalg.norm(np.einsum("ij,jk->ik", np.linalg.inv(a), a.T) + a) ** 2

    a = well_conditioned()
    check_second_order(f, a)
    h = ad.hessian(f)(a)
    numeric = numerical_jacobian(ad.grad(f), [a], 0)
    np.testing.assert_allclose(h, numeric, atol=1e-5, rtol=1e-4)


def test_second_order_linalg():
    check_second_order(lambda a: np.linalg.solve(a, np.ones(3)), well_conditioned())
    check_second_order(lambda a: np.linalg.slogdet(a)[1], well_conditioned())
    check_second_order(lambda a: np.linalg.eigvalsh(sym(a)), spd())
    check_second_order(lambda a: np.linalg.svd(a, compute_uv=False), rand(3, 2))
    check_second_order(lambda a: np.linalg.cholesky(sym(a)), spd())


def test_functions_without_rules_raise_missing_rule_error_when_called():
    a = well_conditioned()
    for f in (lambda a: np.linalg.tensorinv(a, ind=1),
              lambda a: np.linalg.tensorsolve(a, np.ones(a.shape[0]))):
        with pytest.raises(ad.MissingRuleError, match="np.linalg"):
            ad.vjp(f, a)  # raised while recording, before any backward pass


def test_result_objects_returned_whole():
    a = spd()
    jac = ad.jacobian(np.linalg.eigh, mode="forward")(a)
    assert type(jac).__name__ == "EighResult" and jac.eigenvalues.shape == (3, 3, 3)
    out, pullback = ad.vjp(np.linalg.eigh, a)
    assert type(out).__name__ == "EighResult"
    (g,) = pullback((np.ones(3), np.zeros((3, 3))))
    np.testing.assert_allclose(g, np.tril(np.eye(3)), atol=1e-10)  # d trace / d lower(A)
    out, tangent = ad.jvp(np.linalg.slogdet, (a,), (np.eye(3),))
    np.testing.assert_allclose(tangent.logabsdet, np.trace(np.linalg.inv(a)))
