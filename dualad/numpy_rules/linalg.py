"""Rules for ``np.linalg``: inv, solve, det, slogdet, cholesky, eigh, svd, qr, pinv, ...

Every function works on stacks of matrices (leading batch axes, broadcast as numpy
does). Multi-output functions (eigh, svd, qr, slogdet, lstsq) return numpy's result
objects; their gradient rules receive one gradient per output (zeros for unused ones).

Conventions and limits:

* ``cholesky`` and ``eigh`` read one triangle of the matrix (lower by default, like
  numpy). Their gradients are w.r.t. the entries actually read: the other triangle has
  zero gradient. Differentiate ``f(sym(A))`` with a symmetrising ``sym`` for the
  gradient w.r.t. a symmetric matrix.
* ``eigh`` needs distinct eigenvalues for eigenvector derivatives. Where two eigenvalues
  are exactly equal the coupling term between their eigenvectors is set to zero (instead
  of dividing by zero): functions of the eigenvalues alone (and of the invariant
  subspace) keep correct derivatives; derivatives of the individual eigenvectors of a
  repeated eigenvalue are not defined and are not meaningful there.
* ``svd`` needs distinct, non-zero singular values for ``U`` / ``Vh`` derivatives (the
  same zeroing applies); ``full_matrices=True`` is supported for square matrices only.
* ``qr`` supports ``mode="reduced"`` (tall and wide), ``"r"``, and ``"complete"`` when it
  equals ``"reduced"`` (``m <= n``).
* ``pinv`` and ``lstsq`` assume the rank is constant near the point (full rank in
  practice); ``det`` / ``slogdet`` / ``inv`` need a non-singular matrix.
* ``norm`` (and ``vector_norm`` / ``matrix_norm``) support ord ``None``, ``'fro'``,
  ``'nuc'``, ``inf``, ``-inf``, ``0``, ``1``, ``-1``, ``2``, ``-2`` and any other p for
  vectors; ties (in ``inf``, ``1``, ...) split the gradient equally; the 2-norm of a zero
  vector has gradient zero.
* Complex matrices follow JAX (see :mod:`dualad.numpy_rules.complex_parts`: cotangents
  pair as ``Re(sum(g * dz))``): every function here accepts them. ``eigh`` / ``eigvalsh`` /
  ``cholesky`` read the Hermitian matrix of one triangle (the imaginary part of its
  diagonal is ignored, as LAPACK does); eigenvectors and singular vectors are defined up
  to a phase per column, and their tangents use JAX's gauge (``Im(v^H dv) = 0``), so
  differentiate functions that do not see the phase (``U diag(f(s)) V^H``, ``abs(v)``,
  projectors); the diagonal of ``qr``'s ``R`` stays real. A complex ``norm`` is the same
  norm of ``abs(x)`` (of the singular values for the matrix orders 2, -2, ``'nuc'``).

Example:
    >>> import numpy as np, dualad as ad
    >>> a = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> ad.grad(lambda a: np.linalg.det(a))(a)
    array([[ 3., -1.],
           [-1.,  2.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_dense,
    declare_index_map,
    declare_reduction,
    innermost_tag,
    shape_of,
    unbroadcast,
    vjp,
)
from ._signatures import bind
from ._support import (
    dual_or_value,
    gradient_rule,
    kfirst,
    klast,
    ndim_of,
    normalize_axis,
    split_duals,
    tangent_rule,
)
from .complex_parts import is_complex
from .reductions import exclusive_products

__all__: list[str] = []


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _eye_like(x: Any) -> np.ndarray:
    return np.eye(shape_of(x)[-1])


def _diag_embed(v: Any) -> Any:
    """A stack of diagonal matrices with diagonals ``v`` (shape ``(..., n, n)``)."""
    return np.expand_dims(v, -1) * np.eye(shape_of(v)[-1])


def _diag_part(m: Any) -> Any:
    return np.diagonal(m, 0, -2, -1)


def _pair_inverse(d: Any) -> Any:
    """``1 / d`` with zeros where ``d == 0`` (``d`` holds pairwise differences)."""
    zero = np.asarray(d == 0)
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, d))


def _k(p: Any) -> int:
    return shape_of(p)[-1]


# -- inv, solve, det, slogdet -------------------------------------------------------------


@gradient_rule(np.linalg.inv)
def _inv(grad: Any, output: Any, a: Any) -> tuple:
    yt = _mT(output)
    return (-np.matmul(np.matmul(yt, grad), yt),)


@tangent_rule(np.linalg.inv)
def _inv_tangent(a: Any) -> Any:
    y = np.linalg.inv(a.value)
    return Dual._make(y, klast(-np.matmul(np.matmul(y, kfirst(a.partials)), y)), a.tag)


def _solve_is_vector(b: Any) -> bool:
    return ndim_of(b) == 1


@gradient_rule(np.linalg.solve)
def _solve(grad: Any, output: Any, a: Any, b: Any) -> tuple:
    if _solve_is_vector(b):
        gb = np.linalg.solve(_mT(a), np.expand_dims(grad, -1))
        ga = -gb * np.expand_dims(output, -2)
        gb = gb[..., 0]
    else:
        gb = np.linalg.solve(_mT(a), grad)
        ga = -np.matmul(gb, _mT(output))
    return unbroadcast(ga, shape_of(a)), unbroadcast(gb, shape_of(b))


@tangent_rule(np.linalg.solve, duals=(0, 1))
def _solve_tangent(a: Any, b: Any) -> Any:
    tag, ((av, ap), (bv, bp)) = tangent_parts_2(a, b)
    x = np.linalg.solve(av, bv)
    vector = _solve_is_vector(bv)
    xc = np.expand_dims(x, -1) if vector else x
    rhs = None
    target = 1 + ndim_of(xc)
    if bp is not None:
        rhs = kfirst(bp)
        if vector:
            rhs = np.expand_dims(rhs, -1)
        rhs = _kpad(rhs, target)
    if ap is not None:
        term = -np.matmul(_kpad(kfirst(ap), target), xc)
        rhs = term if rhs is None else rhs + term
    dx = np.linalg.solve(av, rhs)
    if vector:
        dx = dx[..., 0]
    k = _k(ap if ap is not None else bp)
    dx = np.broadcast_to(dx, (k,) + shape_of(x))
    return Dual._make(x, klast(dx), tag)


def _kpad(pk: Any, ndim: int) -> Any:
    """k-first partials with singleton batch axes after ``k`` up to ``ndim`` dimensions."""
    extra = ndim - ndim_of(pk)
    if extra <= 0:
        return pk
    shape = shape_of(pk)
    return np.reshape(pk, shape[:1] + (1,) * extra + shape[1:])


def tangent_parts_2(a: Any, b: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """``(tag, [(value, partials), (value, partials)])`` of two arguments."""
    tag = innermost_tag((a, b))
    values, partials = split_duals((a, b), tag)
    return tag, list(zip(values, partials))


def _cofactors(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix of a plain (stack of) square matrix: ``d det(a) / d a``.

    From the SVD ``a = U diag(s) Vh``: ``adj(a) = det(U) det(Vh) Vh.T diag(prod of the other
    s) U.T``, defined for singular matrices too (as JAX's det gradient is); the cofactors
    are its transpose.
    """
    u, s, vh = np.linalg.svd(a)
    others = exclusive_products(s, (s.ndim - 1,))
    sign = np.linalg.det(u) * np.linalg.det(vh)
    adjugate = (_mT(vh) * others[..., None, :]) @ _mT(u)
    return _mT(adjugate) * sign[..., None, None]


@gradient_rule(np.linalg.det)
def _det(grad: Any, output: Any, a: Any) -> tuple:
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return (np.expand_dims(np.expand_dims(grad, -1), -1) * _cofactors(a),)
    scale = np.expand_dims(np.expand_dims(grad * output, -1), -1)
    return (scale * _mT(np.linalg.inv(a)),)


@tangent_rule(np.linalg.det)
def _det_tangent(a: Any) -> Any:
    d = np.linalg.det(a.value)
    if isinstance(a.value, np.ndarray) and a.value.dtype.kind == "f":
        inner = np.einsum("...ij,...ijk->...k", _cofactors(a.value), a.partials)
        return Dual._make(d, inner, a.tag)
    inner = np.einsum("...ij,...jik->...k", np.linalg.inv(a.value), a.partials)
    return Dual._make(d, inner * np.expand_dims(d, -1), a.tag)


@gradient_rule(np.linalg.slogdet)
def _slogdet(grad: Any, output: Any, a: Any) -> tuple:
    """With ``t = tr(A^-1 dA)``: ``d logabsdet = Re(t)``, ``d sign = sign * i Im(t)``; the
    gradient is ``A^-T (g_logabsdet + i Im(g_sign * sign))`` (the sign term is zero for real
    matrices)."""
    g = grad[1]
    if is_complex(a):
        g = g + 1j * np.imag(grad[0] * output[0])
    g = np.expand_dims(np.expand_dims(g, -1), -1)
    return (g * _mT(np.linalg.inv(a)),)


@tangent_rule(np.linalg.slogdet)
def _slogdet_tangent(a: Any) -> Any:
    out = np.linalg.slogdet(a.value)
    inner = np.einsum("...ij,...jik->...k", np.linalg.inv(a.value), a.partials)
    if is_complex(inner):
        dsign = np.expand_dims(out[0], -1) * 1j * np.imag(inner)
        return out._make([Dual._make(out[0], dsign, a.tag),
                          Dual._make(out[1], np.real(inner), a.tag)])
    zeros = np.zeros(shape_of(out[0]) + (_k(a.partials),))
    return out._make([Dual._make(out[0], zeros, a.tag), Dual._make(out[1], inner, a.tag)])


# -- cholesky ---------------------------------------------------------------------------------


def _phi(x: Any) -> Any:
    """The lower triangle of ``x`` with its diagonal halved."""
    return np.tril(x) - 0.5 * _diag_embed(_diag_part(x))


def _sym_lower(x: Any) -> Any:
    """The symmetric matrix read from the lower triangle of ``x``."""
    return np.tril(x) + _mT(np.tril(x, -1))


def _lower_gradient(s: Any) -> Any:
    """Gradient w.r.t. the lower-triangle entries read, from a symmetric-input gradient."""
    return np.tril(s) + np.tril(_mT(s), -1)


def _cholesky_upper(args: tuple, kwargs: dict) -> bool:
    return bool(bind(("upper",), args, kwargs).get("upper", False))


@gradient_rule(np.linalg.cholesky)
def _cholesky(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    """The adjoint of the tangent below: ``S = L^-T Phi(L^T gL) conj(L^-1)``, then the
    gradient w.r.t. the triangle read."""
    upper = _cholesky_upper(args, kwargs)
    low = _mH(output) if upper else output
    gl = _mH(grad) if upper else grad
    linv = np.linalg.inv(low)
    s = np.matmul(np.matmul(_mT(linv), _phi(np.matmul(_mT(low), gl))), _conj(linv))
    return (_triangle_gradient(s, "U" if upper else "L"),) + (None,) * len(args)


@tangent_rule(np.linalg.cholesky)
def _cholesky_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``dL = L Phi(L^-1 dA L^-H)``, ``Phi`` the lower triangle with its diagonal halved."""
    upper = _cholesky_upper(args, kwargs)
    out = np.linalg.cholesky(a.value, *args, **kwargs)
    low = _mH(out) if upper else out
    da = _read_triangle(kfirst(a.partials), "U" if upper else "L")
    linv = np.linalg.inv(low)
    dl = np.matmul(low, _phi(np.matmul(np.matmul(linv, da), _mH(linv))))
    return Dual._make(out, klast(_mH(dl) if upper else dl), a.tag)


# -- eigh --------------------------------------------------------------------------------------


def _uplo(args: tuple, kwargs: dict) -> str:
    return str(bind(("UPLO",), args, kwargs).get("UPLO", "L")).upper()


def _mH(x: Any) -> Any:
    """The conjugate transpose of a (stack of) matrix; the transpose for real ones."""
    return _mT(np.conj(x)) if is_complex(x) else _mT(x)


def _conj(x: Any) -> Any:
    return np.conj(x) if is_complex(x) else x


def _real(x: Any) -> Any:
    return np.real(x) if is_complex(x) else x


def _hermitian_lower(x: Any) -> Any:
    """The Hermitian matrix LAPACK reads from the lower triangle of ``x`` (the imaginary
    part of the diagonal is ignored)."""
    if not is_complex(x):
        return _sym_lower(x)
    low = np.tril(x, -1)
    return low + _mH(low) + _diag_embed(np.real(_diag_part(x)))


def _hermitian_lower_gradient(g: Any) -> Any:
    """The adjoint of :func:`_hermitian_lower` (pairing ``Re(sum(g * dx))``)."""
    if not is_complex(g):
        return _lower_gradient(g)
    return np.tril(g, -1) + np.tril(np.conj(_mT(g)), -1) + _diag_embed(np.real(_diag_part(g)))


def _read_triangle(x: Any, uplo: str) -> Any:
    return _hermitian_lower(x) if uplo == "L" else _mH(_hermitian_lower(_mH(x)))


def _triangle_gradient(s: Any, uplo: str) -> Any:
    if uplo == "L":
        return _hermitian_lower_gradient(s)
    return _mH(_hermitian_lower_gradient(_mH(s)))


def _eig_gaps(w: Any) -> Any:
    """``F[..., i, j] = 1 / (w_j - w_i)``, zero where equal (and on the diagonal)."""
    return _pair_inverse(np.expand_dims(w, -2) - np.expand_dims(w, -1))


def _eigh_symmetric_gradient(w: Any, v: Any, gw: Any, gv: Any) -> Any:
    """The gradient w.r.t. the Hermitian matrix read: ``conj(V) (diag(gw) + F * V^T gV) V^T``
    (``V (...) V^T`` for real matrices)."""
    inner = _diag_embed(gw)
    if gv is not None:
        inner = inner + _eig_gaps(w) * np.matmul(_mT(v), gv)
    return np.matmul(np.matmul(_conj(v), inner), _mT(v))


@gradient_rule(np.linalg.eigh)
def _eigh(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    w, v = output
    s = _eigh_symmetric_gradient(w, v, grad[0], grad[1])
    return (_triangle_gradient(s, _uplo(args, kwargs)),) + (None,) * len(args)


@gradient_rule(np.linalg.eigvalsh)
def _eigvalsh(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    uplo = _uplo(args, kwargs)
    w, v = np.linalg.eigh(a, uplo)
    s = _eigh_symmetric_gradient(w, v, grad, None)
    return (_triangle_gradient(s, uplo),) + (None,) * len(args)


def _eigh_tangents(w: Any, v: Any, p: Any, uplo: str) -> tuple[Any, Any]:
    """k-first tangents of ``(w, v)`` from k-first partials ``p`` of the matrix."""
    m = np.matmul(np.matmul(_mH(v), _read_triangle(p, uplo)), v)
    dw = _real(_diag_part(m))
    dv = np.matmul(v, _eig_gaps(w) * m)
    return dw, dv


@tangent_rule(np.linalg.eigh)
def _eigh_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    out = np.linalg.eigh(a.value, *args, **kwargs)
    w, v = out
    dw, dv = _eigh_tangents(w, v, kfirst(a.partials), _uplo(args, kwargs))
    return out._make([Dual._make(w, klast(dw), a.tag), Dual._make(v, klast(dv), a.tag)])


@tangent_rule(np.linalg.eigvalsh)
def _eigvalsh_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    uplo = _uplo(args, kwargs)
    w, v = np.linalg.eigh(a.value, uplo)
    dw, _ = _eigh_tangents(w, v, kfirst(a.partials), uplo)
    return Dual._make(w, klast(dw), a.tag)


# -- svd -----------------------------------------------------------------------------------------


def _svd_params(a: Any, args: tuple, kwargs: dict) -> tuple[bool, bool]:
    p = bind(("full_matrices", "compute_uv", "hermitian"), args, kwargs)
    full, uv = bool(p.get("full_matrices", True)), bool(p.get("compute_uv", True))
    m, n = shape_of(a)[-2:]
    if uv and full and m != n:
        raise NotImplementedError(
            f"dualad: np.linalg.svd(a, full_matrices=True) of a non-square matrix (shape "
            f"{shape_of(a)}) has no defined derivative for the extra columns; pass "
            f"full_matrices=False."
        )
    return full, uv


def _svd_gaps(s: Any) -> Any:
    """``F[..., i, j] = 1 / (s_j^2 - s_i^2)``, zero where equal."""
    s2 = s * s
    return _pair_inverse(np.expand_dims(s2, -2) - np.expand_dims(s2, -1))


def _svd_gradient(u: Any, s: Any, vh: Any, gu: Any, gs: Any, gvh: Any) -> Any:
    """The adjoint of :func:`_svd_tangents` (real or complex; pairing ``Re(sum(g * d))``).

    With ``X = U^T gU``, ``W = V^T gV``: ``gA = conj(U) G Vh^*`` where ``G = diag(gs) +
    (F * (X - X^H)) S + S (F * (W - W^H)) + diag(i Im(diag X) / s)``, plus the parts of
    ``gU`` / ``gV`` outside the span of ``U`` / ``V`` (tall / wide matrices).
    """
    v = _mH(vh)
    inner = _diag_embed(gs)
    extra = None
    if gu is not None or gvh is not None:
        f = _svd_gaps(s)
        s_row = np.expand_dims(s, -2)  # multiplies columns: X @ S
        s_col = np.expand_dims(s, -1)  # multiplies rows: S @ X
        inv_s = 1.0 / s
        if gu is not None:
            ut_gu = np.matmul(_mT(u), gu)
            inner = inner + (f * (ut_gu - _mH(ut_gu))) * s_row
            if is_complex(ut_gu):
                inner = inner + _diag_embed(1j * np.imag(_diag_part(ut_gu)) * inv_s)
            proj = gu - np.matmul(_conj(u), ut_gu)
            extra = np.matmul(proj * np.expand_dims(inv_s, -2), _mT(v))
        if gvh is not None:
            gv = _mH(gvh)
            vt_gv = np.matmul(_mT(v), gv)
            inner = inner + s_col * (f * (vt_gv - _mH(vt_gv)))
            proj = gv - np.matmul(_conj(v), vt_gv)
            term = np.matmul(_conj(u) * np.expand_dims(inv_s, -2), _mH(proj))
            extra = term if extra is None else extra + term
    g = np.matmul(np.matmul(_conj(u), inner), _mT(v))
    return g if extra is None else g + extra


@gradient_rule(np.linalg.svd)
def _svd(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    _, uv = _svd_params(a, args, kwargs)
    if not uv:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return (_svd_gradient(u, s, vh, None, grad, None),) + (None,) * len(args)
    u, s, vh = output
    return (_svd_gradient(u, s, vh, grad[0], grad[1], grad[2]),) + (None,) * len(args)


if hasattr(np.linalg, "svdvals"):

    @gradient_rule(np.linalg.svdvals)
    def _svdvals(grad: Any, output: Any, a: Any) -> tuple:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return (_svd_gradient(u, s, vh, None, grad, None),)

    @tangent_rule(np.linalg.svdvals)
    def _svdvals_tangent(a: Any) -> Any:
        return np.linalg.svd(a, compute_uv=False)


def _svd_tangents(u: Any, s: Any, vh: Any, p: Any) -> tuple[Any, Any, Any]:
    """k-first tangents of ``(u, s, vh)`` from k-first partials ``p`` of the matrix.

    ``dP = U^H dA V``, ``ds = Re(diag(dP))``; ``dU = U (F * (dP S + S dP^H) + D)`` with
    ``F[i, j] = 1 / (s_j^2 - s_i^2)`` and, for complex matrices, the phase term
    ``D = diag(i Im(diag(dP)) / s)`` (JAX's gauge); ``dV = V (F * (S dP + dP^H S))``; tall
    and wide matrices add the parts of ``dA`` outside the span of ``U`` / ``V``.
    """
    v = _mH(vh)
    dp = np.matmul(np.matmul(_mH(u), p), v)
    ds = _real(_diag_part(dp))
    f = _svd_gaps(s)
    s_row = np.expand_dims(s, -2)
    s_col = np.expand_dims(s, -1)
    inv_row = np.expand_dims(1.0 / s, -2)
    du_inner = f * (dp * s_row + s_col * _mH(dp))
    if is_complex(dp):
        du_inner = du_inner + _diag_embed(1j * np.imag(_diag_part(dp)) / s)
    du = np.matmul(u, du_inner)
    du = du + np.matmul(p - np.matmul(u, np.matmul(_mH(u), p)), v) * inv_row
    dv = np.matmul(v, f * (s_col * dp + _mH(dp) * s_row))
    pt = _mH(p)
    dv = dv + np.matmul(pt - np.matmul(v, np.matmul(vh, pt)), u) * inv_row
    return du, ds, _mH(dv)


@tangent_rule(np.linalg.svd)
def _svd_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    _, uv = _svd_params(a.value, args, kwargs)
    u, s, vh = np.linalg.svd(a.value, full_matrices=False)
    du, ds, dvh = _svd_tangents(u, s, vh, kfirst(a.partials))
    if not uv:
        return Dual._make(s, klast(ds), a.tag)
    out = np.linalg.svd(a.value, *args, **kwargs)
    return out._make([Dual._make(out[0], klast(du), a.tag), Dual._make(out[1], klast(ds), a.tag),
                      Dual._make(out[2], klast(dvh), a.tag)])


# -- qr ------------------------------------------------------------------------------------------


def _qr_mode(a: Any, args: tuple, kwargs: dict) -> str:
    mode = bind(("mode",), args, kwargs).get("mode", "reduced")
    m, n = shape_of(a)[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "dualad: np.linalg.qr(a, mode='complete') of a tall matrix has no defined "
            "derivative for the extra columns of Q; use mode='reduced'."
        )
    if mode not in ("reduced", "complete", "r"):
        raise NotImplementedError(f"dualad: np.linalg.qr(mode={mode!r}) is not differentiable.")
    return mode


def _qr_square_gradient(q: Any, r: Any, gq: Any, gr: Any) -> Any:
    """Gradient for ``A = QR`` with ``A`` tall or square (``R`` square, invertible): with
    ``K = gR R^T - Q^T gQ`` and ``E = triu(K, 1) + Re(diag(K)) + tril(K^H, -1)``,
    ``gA = (gQ + conj(Q) E) R^-T`` (the adjoint of the tangent below)."""
    k = np.matmul(gr, _mT(r)) - np.matmul(_mT(q), gq)
    diag = _diag_embed(_real(_diag_part(k)))
    e = np.triu(k, 1) + diag + np.tril(_mH(k), -1)
    b = gq + np.matmul(_conj(q), e)
    return _mT(np.linalg.solve(r, _mT(b)))


def _qr_gradient(a: Any, q: Any, r: Any, gq: Any, gr: Any) -> Any:
    m, n = shape_of(a)[-2:]
    if m >= n:
        return _qr_square_gradient(q, r, gq, gr)
    x_r = r[..., :, :m]
    y = a[..., :, m:]
    gy_r = gr[..., :, m:]
    gx = _qr_square_gradient(q, x_r, gq + np.matmul(_conj(y), _mH(gy_r)), gr[..., :, :m])
    gy = np.matmul(_conj(q), gy_r)
    return np.concatenate([gx, gy], axis=-1)


@gradient_rule(np.linalg.qr)
def _qr(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    mode = _qr_mode(a, args, kwargs)
    if mode == "r":
        q, r = np.linalg.qr(a)
        return (_qr_gradient(a, q, r, np.zeros(shape_of(q)), grad),) + (None,) * len(args)
    q, r = output
    return (_qr_gradient(a, q, r, grad[0], grad[1]),) + (None,) * len(args)


def _qr_square_tangent(q: Any, r: Any, p: Any) -> tuple[Any, Any]:
    """``C = Q^H dA R^-1``, ``Omega = tril(C, -1) - tril(C, -1)^H (+ i Im(diag(C)))`` (the
    diagonal of R stays real, as LAPACK's), ``dR = (C - Omega) R``,
    ``dQ = Q Omega + (dA - Q Q^H dA) R^-1``."""
    rinv = np.linalg.inv(r)
    c = np.matmul(np.matmul(_mH(q), p), rinv)
    low = np.tril(c, -1)
    omega = low - _mH(low)
    if is_complex(c):
        omega = omega + _diag_embed(1j * np.imag(_diag_part(c)))
    dr = np.matmul(c - omega, r)
    dq = np.matmul(q, omega) + np.matmul(p - np.matmul(q, np.matmul(_mH(q), p)), rinv)
    return dq, dr


def _qr_tangents(a: Any, q: Any, r: Any, p: Any) -> tuple[Any, Any]:
    m, n = shape_of(a)[-2:]
    if m >= n:
        return _qr_square_tangent(q, r, p)
    dq, dx_r = _qr_square_tangent(q, r[..., :, :m], p[..., :, :m])
    y = a[..., :, m:]
    dy_r = np.matmul(_mH(dq), y) + np.matmul(_mH(q), p[..., :, m:])
    return dq, np.concatenate([dx_r, dy_r], axis=-1)


@tangent_rule(np.linalg.qr)
def _qr_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    mode = _qr_mode(a.value, args, kwargs)
    q, r = np.linalg.qr(a.value)
    dq, dr = _qr_tangents(a.value, q, r, kfirst(a.partials))
    if mode == "r":
        return Dual._make(r, klast(dr), a.tag)
    out = np.linalg.qr(a.value, *args, **kwargs)
    return out._make([Dual._make(out[0], klast(dq), a.tag),
                      Dual._make(out[1], klast(dr), a.tag)])


# -- pinv, matrix_power, lstsq, multi_dot --------------------------------------------------------


def _pinv_adjoint(a: Any, p: Any, g: Any) -> Any:
    """The gradient w.r.t. ``a`` of ``Re(sum(g * pinv(a)))`` (constant rank): ``-P^T g P^T
    + conj(L g^T P P^H) + conj(P^H P g^T R)`` with ``L = I - A P``, ``R = I - P A``."""
    pt = _mT(p)
    gt = _mT(g)
    left = np.eye(shape_of(a)[-2]) - np.matmul(a, p)
    right = np.eye(shape_of(a)[-1]) - np.matmul(p, a)
    out = -np.matmul(np.matmul(pt, g), pt)
    out = out + _conj(np.matmul(np.matmul(left, gt), np.matmul(p, _mH(p))))
    return out + _conj(np.matmul(np.matmul(_mH(p), p), np.matmul(gt, right)))


def _pinv_tangent_k(a: Any, p: Any, da: Any) -> Any:
    """k-first tangent of ``pinv(a)`` from k-first ``da``: ``-P dA P + P P^H dA^H L
    + R dA^H P^H P``."""
    ph = _mH(p)
    dah = _mH(da)
    left = np.eye(shape_of(a)[-2]) - np.matmul(a, p)
    right = np.eye(shape_of(a)[-1]) - np.matmul(p, a)
    out = -np.matmul(np.matmul(p, da), p)
    out = out + np.matmul(np.matmul(np.matmul(p, ph), dah), left)
    return out + np.matmul(np.matmul(right, dah), np.matmul(ph, p))


@gradient_rule(np.linalg.pinv)
def _pinv(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    return (_pinv_adjoint(a, output, grad),) + (None,) * len(args)


@tangent_rule(np.linalg.pinv)
def _pinv_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    p = np.linalg.pinv(a.value, *args, **kwargs)
    return Dual._make(p, klast(_pinv_tangent_k(a.value, p, kfirst(a.partials))), a.tag)


def _powers(a: Any, n: int) -> list[Any]:
    out = [np.broadcast_to(np.eye(shape_of(a)[-1]), shape_of(a))]
    for _ in range(n - 1):
        out.append(np.matmul(out[-1], a))
    return out


@gradient_rule(np.linalg.matrix_power)
def _matrix_power(grad: Any, output: Any, a: Any, n: Any) -> tuple:
    n = int(n)
    if n == 0:
        return (np.zeros(shape_of(a)), None)
    base = a if n > 0 else np.linalg.inv(a)
    powers = _powers(base, abs(n))
    g = None
    for i in range(abs(n)):
        term = np.matmul(np.matmul(_mT(powers[i]), grad), _mT(powers[abs(n) - 1 - i]))
        g = term if g is None else g + term
    if n < 0:
        bt = _mT(base)
        g = -np.matmul(np.matmul(bt, g), bt)
    return (g, None)


@tangent_rule(np.linalg.matrix_power)
def _matrix_power_tangent(a: Any, n: Any) -> Any:
    n = int(n)
    out = np.linalg.matrix_power(a.value, n)
    p = kfirst(a.partials)
    if n == 0:
        return Dual._make(out, np.zeros(shape_of(a.partials)), a.tag)
    base = a.value if n > 0 else np.linalg.inv(a.value)
    if n < 0:
        p = -np.matmul(np.matmul(base, p), base)
    powers = _powers(base, abs(n))
    d = None
    for i in range(abs(n)):
        term = np.matmul(np.matmul(powers[i], p), powers[abs(n) - 1 - i])
        d = term if d is None else d + term
    return Dual._make(out, klast(d), a.tag)


@gradient_rule(np.linalg.lstsq)
def _lstsq(grad: Any, output: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> tuple:
    x, residuals = output[0], output[1]
    gx, gres, gs = grad[0], grad[1], grad[3]
    p = np.linalg.pinv(a)
    vector = ndim_of(b) == 1
    bm = np.expand_dims(b, -1) if vector else b
    gxm = np.expand_dims(gx, -1) if vector else gx
    gb = np.matmul(_mT(p), gxm)
    ga = _pinv_adjoint(a, p, np.matmul(gxm, _mT(bm)))
    if shape_of(residuals)[0] and np.any(gres != 0):
        xm = np.expand_dims(x, -1) if vector else x
        r = bm - np.matmul(a, xm)
        weighted = _conj(r) * gres
        ga = ga - 2.0 * np.matmul(weighted, _mT(xm))
        gb = gb + 2.0 * weighted
    if np.any(gs != 0):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        ga = ga + _svd_gradient(u, s, vh, None, gs, None)
    return (ga, gb[..., 0] if vector else gb) + (None,) * len(args)


@tangent_rule(np.linalg.lstsq, duals=(0, 1))
def _lstsq_tangent(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
    tag, ((av, ap), (bv, bp)) = tangent_parts_2(a, b)
    x, residuals, rank, s = np.linalg.lstsq(av, bv, *args, **kwargs)
    k = _k(ap if ap is not None else bp)
    vector = ndim_of(bv) == 1
    bm = np.expand_dims(bv, -1) if vector else bv
    xm = np.expand_dims(x, -1) if vector else x
    p = np.linalg.pinv(av)
    r = bm - np.matmul(av, xm)
    dx = np.zeros((k,) + shape_of(xm))
    dres = np.zeros((k,) + shape_of(residuals))
    ds = np.zeros((k,) + shape_of(s))
    has_res = shape_of(residuals)[0] > 0
    if bp is not None:
        dbk = kfirst(bp)
        dbk = np.expand_dims(dbk, -1) if vector else dbk
        dx = dx + np.matmul(p, dbk)
        if has_res:
            dres = dres + 2.0 * _real(np.sum(_conj(r) * dbk, axis=-2))
    if ap is not None:
        dak = kfirst(ap)
        dx = dx + np.matmul(_pinv_tangent_k(av, p, dak), bm)
        if has_res:
            dres = dres - 2.0 * _real(np.sum(_conj(r) * np.matmul(dak, xm), axis=-2))
        u, sv, vh = np.linalg.svd(av, full_matrices=False)
        _, ds, _ = _svd_tangents(u, sv, vh, dak)
    if vector:
        dx = dx[..., 0]
    return (Dual._make(x, klast(dx), tag), Dual._make(residuals, klast(dres), tag), rank,
            Dual._make(s, klast(ds), tag))


def _chain_parts(arrays: Any) -> tuple[list[Any], bool, bool]:
    mats = list(arrays)
    first_vec = ndim_of(mats[0]) == 1
    last_vec = ndim_of(mats[-1]) == 1
    if first_vec:
        mats[0] = np.expand_dims(mats[0], 0)
    if last_vec:
        mats[-1] = np.expand_dims(mats[-1], -1)
    return mats, first_vec, last_vec


def _prefix_suffix(mats: list[Any]) -> tuple[list[Any], list[Any]]:
    n = len(mats)
    prefix: list[Any] = [None] * n
    suffix: list[Any] = [None] * n
    for i in range(1, n):
        prefix[i] = mats[0] if i == 1 else np.matmul(prefix[i - 1], mats[i - 1])
    for i in range(n - 2, -1, -1):
        suffix[i] = mats[-1] if i == n - 2 else np.matmul(mats[i + 1], suffix[i + 1])
    return prefix, suffix


def _unchain(out: Any, first_vec: bool, last_vec: bool) -> Any:
    if last_vec:
        out = out[..., 0]
    if first_vec:
        out = out[..., 0, :] if not last_vec else out[..., 0]
    return out


@gradient_rule(np.linalg.multi_dot)
def _multi_dot(grad: Any, output: Any, arrays: Any, *args: Any, **kwargs: Any) -> tuple:
    mats, first_vec, last_vec = _chain_parts(arrays)
    g = grad
    if first_vec:
        g = np.expand_dims(g, 0)
    if last_vec:
        g = np.expand_dims(g, -1)
    prefix, suffix = _prefix_suffix(mats)
    grads = []
    for i, x in enumerate(arrays):
        gi = g
        if prefix[i] is not None:
            gi = np.matmul(_mT(prefix[i]), gi)
        if suffix[i] is not None:
            gi = np.matmul(gi, _mT(suffix[i]))
        grads.append(np.reshape(gi, shape_of(x)))
    return (tuple(grads),) + (None,) * len(args)


@tangent_rule(np.linalg.multi_dot, duals="any")
def _multi_dot_tangent(arrays: Any, *args: Any, **kwargs: Any) -> Any:
    tag = innermost_tag(list(arrays))
    if tag is None:
        return np.linalg.multi_dot(arrays, *args, **kwargs)
    values, partials = split_duals(arrays, tag)
    mats, first_vec, last_vec = _chain_parts(values)
    out = np.linalg.multi_dot(values)
    prefix, suffix = _prefix_suffix(mats)
    acc = None
    for i, p in enumerate(partials):
        if p is None:
            continue
        pk = kfirst(p)
        if i == 0 and first_vec:
            pk = np.expand_dims(pk, -2)
        if i == len(values) - 1 and last_vec:
            pk = np.expand_dims(pk, -1)
        term = pk
        if prefix[i] is not None:
            term = np.matmul(prefix[i], term)
        if suffix[i] is not None:
            term = np.matmul(term, suffix[i])
        acc = term if acc is None else acc + term
    return Dual._make(out, klast(_unchain(acc, first_vec, last_vec)), tag)


# -- norms ----------------------------------------------------------------------------------------


def _abs_sign(x: Any) -> Any:
    return np.sign(x)


def _tie_weights(values: Any, target: Any, axes: tuple[int, ...]) -> Any:
    hit = np.asarray(values == target, dtype=np.float64)
    return hit / np.maximum(np.sum(hit, axis=axes, keepdims=True), 1.0)


def _vector_weights(x: Any, out: Any, ord: Any, axes: tuple[int, ...]) -> Any:
    """``d norm / d x`` for a vector norm over ``axes`` (``out`` has keepdims)."""
    if ord is None or ord == 2:
        return x * _pair_inverse_scalar(out)
    if ord == np.inf or ord == -np.inf:
        ax = np.abs(x)
        return _abs_sign(x) * _tie_weights(ax, out, axes)
    if ord == 0:
        return np.zeros(shape_of(x))
    if ord == 1:
        return _abs_sign(x)
    ordf = float(ord)
    ax = np.abs(x)
    return _abs_sign(x) * ax ** (ordf - 1.0) * _pair_inverse_scalar(out) ** (ordf - 1.0)


def _pair_inverse_scalar(v: Any) -> Any:
    zero = np.asarray(v == 0)
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, v))


def _matrix_weights(x: Any, out: Any, ord: Any, rows: int, cols: int) -> Any:
    """``d norm / d x`` for a matrix norm over axes ``(rows, cols)`` of ``x``."""
    if ord is None or ord == "fro":
        return x * _pair_inverse_scalar(out)
    if ord in ("nuc", 2, -2):
        xm = np.moveaxis(x, (rows, cols), (-2, -1))
        u, s, vh = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            w = np.matmul(u, vh)
        else:
            i = 0 if ord == 2 else -1
            w = np.expand_dims(u[..., :, i], -1) * np.expand_dims(vh[..., i, :], -2)
        return np.moveaxis(w, (-2, -1), (rows, cols))
    if ord in (1, -1, np.inf, -np.inf):
        sum_axis, other = (rows, cols) if ord in (1, -1) else (cols, rows)
        sums = np.sum(np.abs(x), axis=sum_axis, keepdims=True)
        return _abs_sign(x) * _tie_weights(sums, out, (other,))
    raise ValueError(f"dualad: invalid norm order {ord!r} for matrices")


def _norm_setup(x: Any, ord: Any, axis: Any, kind: str | None = None
                ) -> tuple[str, tuple[int, ...]]:
    nd = ndim_of(x)
    if kind == "vector":
        return "vector", normalize_axes_all(axis, nd)
    if axis is None:
        if ord is None:
            return "vector", tuple(range(nd))
        if nd == 1:
            return "vector", (0,)
        if nd == 2:
            return "matrix", (0, 1)
        raise ValueError("np.linalg.norm: improper number of dimensions to norm")
    if isinstance(axis, (int, np.integer)):
        return "vector", (normalize_axis(axis, nd, "norm"),)
    axes = tuple(normalize_axis(a, nd, "norm") for a in axis)
    return ("vector" if len(axes) == 1 else "matrix"), axes


def normalize_axes_all(axis: Any, nd: int) -> tuple[int, ...]:
    """``axis`` (None = all, int or tuple) as a tuple of non-negative axes."""
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(normalize_axis(a, nd, "vector_norm") for a in axis)


def _norm_weights(x: Any, out: Any, ord: Any, axis: Any, keepdims: bool,
                  kind: str | None = None) -> tuple[Any, tuple]:
    kind, axes = _norm_setup(x, ord, axis, kind)
    shape = shape_of(x)
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    out_k = np.reshape(out, kept)
    if kind == "vector":
        return _vector_weights(x, out_k, ord, axes), tuple(sorted(axes))
    return _matrix_weights(x, out_k, ord, axes[0], axes[1]), tuple(sorted(axes))


def _norm_args(args: tuple, kwargs: dict) -> tuple[Any, Any, bool]:
    p = bind(("ord", "axis", "keepdims"), args, kwargs)
    return p.get("ord"), p.get("axis"), bool(p.get("keepdims", False))


def _complex_norm(func: Any, x: Any, args: tuple, kwargs: dict, ord: Any, axis: Any,
                  keepdims: bool, kind: str | None) -> Any:
    """A norm of complex ``x`` written with calls that have complex rules: the same norm of
    ``abs(x)``, or, for the matrix orders 2, -2 and 'nuc', of the singular values."""
    kind, axes = _norm_setup(x, ord, axis, kind)
    if kind == "vector" or ord not in (2, -2, "nuc"):
        return func(np.abs(x), *args, **kwargs)
    rows, cols = axes
    s = np.linalg.svd(np.moveaxis(x, (rows, cols), (-2, -1)), compute_uv=False)
    out = np.sum(s, axis=-1) if ord == "nuc" else s[..., 0 if ord == 2 else -1]
    if keepdims:
        out = np.expand_dims(out, tuple(sorted(axes)))
    return out


def _norm_rules(func: Any, params: Any, kind: str | None = None) -> None:
    def grad_impl(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
        ord, axis, keepdims = params(x, args, kwargs)
        if is_complex(x):
            def norm_of(z: Any) -> Any:
                return _complex_norm(func, z, args, kwargs, ord, axis, keepdims, kind)
            return (vjp(norm_of, x)[1](grad)[0],) + (None,) * len(args)
        w, axes = _norm_weights(x, output, ord, axis, keepdims, kind)
        shape = shape_of(x)
        kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
        return (np.reshape(grad, kept) * w,) + (None,) * len(args)

    def tangent_impl(x: Any, *args: Any, **kwargs: Any) -> Any:
        ord, axis, keepdims = params(x.value, args, kwargs)
        if is_complex(x.value):
            return _complex_norm(func, x, args, kwargs, ord, axis, keepdims, kind)
        value = func(x.value, *args, **kwargs)
        w, axes = _norm_weights(x.value, value, ord, axis, keepdims, kind)
        dp = np.sum(np.expand_dims(w, -1) * x.partials, axis=axes, keepdims=keepdims)
        return dual_or_value(value, dp, x.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{func.__name__}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func)(tangent_impl)


def _norm_params(x: Any, args: tuple, kwargs: dict) -> tuple[Any, Any, bool]:
    return _norm_args(args, kwargs)


def _vector_norm_params(x: Any, args: tuple, kwargs: dict) -> tuple[Any, Any, bool]:
    return kwargs.get("ord", 2), kwargs.get("axis"), bool(kwargs.get("keepdims", False))


def _matrix_norm_params(x: Any, args: tuple, kwargs: dict) -> tuple[Any, Any, bool]:
    return kwargs.get("ord", "fro"), (-2, -1), bool(kwargs.get("keepdims", False))


_norm_rules(np.linalg.norm, _norm_params)
if hasattr(np.linalg, "vector_norm"):
    _norm_rules(np.linalg.vector_norm, _vector_norm_params, "vector")
    _norm_rules(np.linalg.matrix_norm, _matrix_norm_params)


# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# A norm reduces its axes (all of them by default); the entries meet nonlinearly.

declare_reduction(np.linalg.norm, second_order=True, axis_at=2)

declare_dense(np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.slogdet,
              np.linalg.cholesky, np.linalg.qr, np.linalg.svd, np.linalg.svdvals, np.linalg.pinv,
              np.linalg.lstsq, np.linalg.matrix_power, np.linalg.matrix_norm, core=2)
declare_reduction(np.linalg.vector_norm, second_order=True)
declare_index_map(np.linalg.diagonal)
