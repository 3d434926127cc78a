"""``scipy.linalg`` for traced values: solve_triangular, cho_factor / cho_solve,
lu_factor / lu_solve, expm, logm, sqrtm, solve_sylvester, schur, and cholesky / solve /
inv / det.

``solve_triangular``, ``lu_factor``, ``expm``, ``logm``, ``sqrtm`` and ``solve_sylvester``
are primitives of scipy's functions with gradient and tangent rules here; ``cho_factor``,
``cho_solve``, ``lu_solve`` and the rest are compositions of those and of ``np.linalg``.
Plain arrays go to scipy unchanged.

Conventions and limits:

* ``solve_triangular`` reads one triangle of ``a`` (and not its diagonal with
  ``unit_diagonal=True``): the entries it does not read get zero gradient. Real matrices;
  ``trans`` 0 / 1 (``'N'`` / ``'T'``), and ``'C'`` for real matrices.
* ``cho_factor`` returns scipy's ``(c, lower)``: the factor in one triangle of ``c`` and,
  as scipy leaves it, the entries of ``a`` in the other (their derivative is the identity).
  The factor is differentiated as ``np.linalg.cholesky`` is: w.r.t. the triangle read.
* ``lu_factor`` needs a square, non-singular matrix; the pivots are constants (they change
  only where two candidate pivots tie).
* ``expm`` and ``logm`` differentiate through the Fréchet derivative (the upper-right block of
  ``f([[A, E], [0, A]])``); ``sqrtm`` through a Sylvester equation. ``logm`` and ``sqrtm``
  need real results (no eigenvalues on the closed negative real axis).
* ``schur(a, output)``: ``T`` and ``Z`` of ``A = Z T Z^H``, from the triangular Sylvester
  equation that keeps ``dT`` upper triangular; needs distinct eigenvalues (the coupling of
  equal ones is set to zero, as for ``eigh``). ``Z`` is defined up to a sign (a phase for
  ``output='complex'``) per column, and so are the entries of ``T`` above the diagonal;
  the tangents use the gauge ``diag(Z^H dZ) = 0``, so differentiate what does not see it
  (``diag(T)``, ``abs(T)``, ``Z f(T) Z^H``). ``output='real'`` needs real eigenvalues
  (triangular ``T``; otherwise pass ``output='complex'``). The gradient comes from the
  Jacobian (one vectorised tangent pass over the n² entries).

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules import linalg
    >>> a = np.array([[0.0, 1.0], [0.0, 0.0]])
    >>> ad.jvp(linalg.expm, (a,), (np.eye(2),))[1]
    array([[1., 1.],
           [0., 1.]])
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.linalg as _sl

from ..extend import (
    Dual,
    MissingRuleError,
    declare_dense,
    gradient_rule,
    innermost_tag,
    primitive,
    shape_of,
    tangent_rule,
)
from ..numpy_rules._support import kfirst, klast, ndim_of, split_duals
from ._dropin import constant, dropin

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "lu_factor", "lu_solve", "expm",
           "logm", "sqrtm", "solve_sylvester", "cholesky", "solve", "inv", "det", "schur"]


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _k(p: Any) -> int:
    return shape_of(p)[-1]


# -- solve_triangular -------------------------------------------------------------------------


def _trans_code(trans: Any, a: Any) -> int:
    code = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}.get(trans)
    if code is None:
        raise ValueError(f"scipy.linalg.solve_triangular: invalid trans {trans!r}")
    if code == 2:
        if getattr(getattr(constant(a), "dtype", None), "kind", "f") == "c":
            raise NotImplementedError(
                "dualad: scipy.linalg.solve_triangular(trans='C') of a complex matrix is not "
                "differentiable yet; pass the conjugate transpose with trans=0."
            )
        code = 1
    return code


def _triangle(x: Any, lower: bool, unit: bool) -> Any:
    """The entries of ``x`` that a triangular solve reads (others zero)."""
    off = -1 if unit else 0
    return np.tril(x, off) if lower else np.triu(x, -off)


def _matrix(a: Any, lower: bool, unit: bool) -> Any:
    t = _triangle(a, lower, unit)
    return t + np.eye(shape_of(a)[-1]) if unit else t


_solve_triangular_op = primitive(_sl.solve_triangular)


@functools.wraps(_sl.solve_triangular)
def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     check_finite: bool = True) -> Any:
    return _solve_triangular_op(a, b, trans, bool(lower), bool(unit_diagonal))


def _st_params(a: Any, args: tuple, kwargs: dict) -> tuple[int, bool, bool]:
    names = ("trans", "lower", "unit_diagonal")
    p = dict(zip(names, args))
    p.update({k: v for k, v in kwargs.items() if k in names})
    return (_trans_code(p.get("trans", 0), a), bool(p.get("lower", False)),
            bool(p.get("unit_diagonal", False)))


@gradient_rule(_solve_triangular_op)
def _solve_triangular(grad: Any, output: Any, a: Any, b: Any, *args: Any, **kwargs: Any
                      ) -> tuple:
    trans, lower, unit = _st_params(a, args, kwargs)
    gb = solve_triangular(a, grad, 1 - trans, lower, unit)
    if ndim_of(b) == 1:
        gm = -np.expand_dims(gb, -1) * np.expand_dims(output, -2)
    else:
        gm = -np.matmul(gb, _mT(output))
    ga = _triangle(gm if trans == 0 else _mT(gm), lower, unit)
    return (ga, gb) + (None,) * len(args)


@tangent_rule(_solve_triangular_op, duals=(0, 1))
def _solve_triangular_tangent(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
    tag = innermost_tag((a, b))
    assert tag is not None  # a tangent rule runs on dual numbers
    (av, bv), (ap, bp) = split_duals((a, b), tag)
    trans, lower, unit = _st_params(av, args, kwargs)
    x = solve_triangular(av, bv, trans, lower, unit)
    k = _k(ap if ap is not None else bp)
    rhs = np.zeros(shape_of(x) + (k,)) if bp is None else bp
    if ap is not None:
        dm = _triangle(kfirst(ap), lower, unit)  # (k, n, n)
        if trans:
            dm = _mT(dm)
        rhs = rhs - klast(np.matmul(dm, x))
    n = shape_of(x)[0]
    flat = np.reshape(rhs, (n, -1))
    dx = np.reshape(solve_triangular(av, flat, trans, lower, unit), shape_of(x) + (k,))
    return Dual._make(x, dx, tag)


# -- Cholesky -------------------------------------------------------------------------------------


def _cholesky_factor(a: Any, lower: bool) -> Any:
    """The Cholesky factor read from one triangle of ``a`` (lower: ``L``, else ``U``)."""
    if lower:
        return np.linalg.cholesky(a)
    return _mT(np.linalg.cholesky(_mT(a)))


@dropin(_sl.cholesky)
def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:
    """The Cholesky factor (upper by default, as scipy)."""
    return _cholesky_factor(a, bool(lower))


@dropin(_sl.cho_factor)
def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)``: the factor in one triangle of ``c``, ``a``'s entries in the other."""
    lower = bool(lower)
    factor = _cholesky_factor(a, lower)
    rest = np.triu(a, 1) if lower else np.tril(a, -1)
    return factor + rest, lower


@dropin(_sl.cho_solve)
def cho_solve(c_and_lower: Any, b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
    """Solve ``A x = b`` from ``cho_factor(A)``."""
    c, lower = c_and_lower
    lower = bool(lower)
    y = solve_triangular(c, b, 0 if lower else 1, lower)
    return solve_triangular(c, y, 1 if lower else 0, lower)


# -- LU ----------------------------------------------------------------------------------------------


def _permutation(piv: np.ndarray) -> np.ndarray:
    """``perm`` with ``A[perm] = L @ U`` from LAPACK's sequential row interchanges."""
    perm = np.arange(len(piv))
    for i, p in enumerate(np.asarray(piv)):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


def _check_square(a: Any, name: str) -> None:
    shape = shape_of(a)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(
            f"dualad: scipy.linalg.{name} is differentiable for square 2-D matrices; got "
            f"shape {shape}."
        )


_lu_factor_op = primitive(_sl.lu_factor)


@functools.wraps(_sl.lu_factor)
def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return _lu_factor_op(a)


def _lu_parts(lu: Any) -> tuple[Any, Any]:
    return np.tril(lu, -1) + np.eye(shape_of(lu)[-1]), np.triu(lu)


@gradient_rule(_lu_factor_op)
def _lu_factor(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    _check_square(a, "lu_factor")
    lu, piv = output
    low, up = _lu_parts(lu)
    g = grad[0]
    m = np.tril(np.matmul(_mT(low), np.tril(g, -1)), -1) + np.triu(np.matmul(np.triu(g), _mT(up)))
    # X = L^-T M U^-T, then A's rows back in place
    x = solve_triangular(low, m, 1, True, True)
    x = _mT(solve_triangular(up, _mT(x), 0, False))
    inverse = np.argsort(_permutation(constant(piv)))
    return (x[inverse],) + (None,) * len(args)


@tangent_rule(_lu_factor_op)
def _lu_factor_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    _check_square(a.value, "lu_factor")
    lu, piv = lu_factor(a.value)
    low, up = _lu_parts(lu)
    n = shape_of(lu)[-1]
    pa = a.partials[_permutation(constant(piv))]  # (n, n, k), rows permuted
    k = _k(pa)
    # F_j = L^-1 dA_j U^-1 for every direction j at once: Y = L^-1 dA, then F^T = U^-T Y^T
    y = np.reshape(solve_triangular(low, np.reshape(pa, (n, n * k)), 0, True, True), (n, n, k))
    w = solve_triangular(up, np.reshape(np.transpose(y, (1, 0, 2)), (n, n * k)), 1, False)
    f = np.moveaxis(np.transpose(np.reshape(w, (n, n, k)), (1, 0, 2)), -1, 0)  # (k, n, n)
    dlu = np.matmul(low, np.tril(f, -1)) + np.matmul(np.triu(f), up)
    return (Dual._make(lu, klast(dlu), a.tag), piv)


@dropin(_sl.lu_solve)
def lu_solve(lu_and_piv: Any, b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``A x = b`` (``trans=1``: ``A^T x = b``) from ``lu_factor(A)``."""
    lu, piv = lu_and_piv
    perm = _permutation(constant(piv))
    if trans == 0:
        y = solve_triangular(lu, b[perm], 0, True, True)
        return solve_triangular(lu, y, 0, False)
    if trans in (1, 2):
        z = solve_triangular(lu, b, 1, False)
        w = solve_triangular(lu, z, 1, True, True)
        return w[np.argsort(perm)]
    raise ValueError(f"scipy.linalg.lu_solve: invalid trans {trans!r}")


# -- matrix functions: expm, logm (Fréchet derivatives), sqrtm (Sylvester) -------------------------


def _frechet(f: Any, a: Any, e: Any) -> Any:
    """The Fréchet derivative of the matrix function ``f`` at ``a`` in direction ``e``: the
    upper-right block of ``f([[a, t e], [0, a]]) / t`` (``t`` balances the two blocks)."""
    n = shape_of(a)[-1]
    na = float(np.max(np.abs(constant(a)))) or 1.0
    ne = float(np.max(np.abs(constant(e)))) or 1.0
    t = na / ne
    zeros = np.zeros(shape_of(a))
    top = np.concatenate([a, e * t], axis=-1)
    bottom = np.concatenate([zeros, a], axis=-1)
    block = f(np.concatenate([top, bottom], axis=-2))
    return block[..., :n, n:] / t


def _matrix_function_rules(op: Any, public: Any, name: str) -> None:
    def grad_impl(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
        _check_square(a, name)
        return (_frechet(public, _mT(a), grad),) + (None,) * len(args)

    def tangent_impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        _check_square(a.value, name)
        value = public(a.value)
        p = kfirst(a.partials)
        d = np.stack([_frechet(public, a.value, p[j]) for j in range(shape_of(p)[0])])
        return Dual._make(value, klast(d), a.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{name}"
    gradient_rule(op)(grad_impl)
    tangent_rule(op)(tangent_impl)


_expm_op = primitive(_sl.expm)
_logm_op = primitive(_sl.logm)
_sqrtm_op = primitive(_sl.sqrtm)


@functools.wraps(_sl.expm)
def expm(A: Any) -> Any:
    return _expm_op(A)


@functools.wraps(_sl.logm)
def logm(A: Any, disp: bool = True) -> Any:
    out = _logm_op(A)
    return _real_if_real(A, out, "logm")


@functools.wraps(_sl.sqrtm)
def sqrtm(A: Any, disp: bool = True, blocksize: int = 64) -> Any:
    out = _sqrtm_op(A)
    return _real_if_real(A, out, "sqrtm")


def _real_if_real(a: Any, out: Any, name: str) -> Any:
    v = constant(out)
    if np.iscomplexobj(v) and not np.iscomplexobj(constant(a)):
        if np.max(np.abs(np.imag(v)), initial=0.0) > 1e-12 * max(1.0, np.max(np.abs(v))):
            raise ValueError(
                f"dualad: scipy.linalg.{name} of this real matrix is complex (an eigenvalue "
                f"on the negative real axis); its derivative is supported for real results."
            )
        return np.real(out)
    return out


_matrix_function_rules(_expm_op, expm, "expm")
_matrix_function_rules(_logm_op, lambda x: _logm_op(x), "logm")


@gradient_rule(_sqrtm_op)
def _sqrtm(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    _check_square(a, "sqrtm")
    x = np.real(output) if not np.iscomplexobj(constant(a)) else output
    return (solve_sylvester(_mT(x), _mT(x), grad),) + (None,) * len(args)


@tangent_rule(_sqrtm_op)
def _sqrtm_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    _check_square(a.value, "sqrtm")
    x = sqrtm(a.value)
    p = kfirst(a.partials)
    d = np.stack([solve_sylvester(x, x, p[j]) for j in range(shape_of(p)[0])])
    return Dual._make(x, klast(d), a.tag)


# -- solve_sylvester ---------------------------------------------------------------------------------

_solve_sylvester_op = primitive(_sl.solve_sylvester)


@functools.wraps(_sl.solve_sylvester)
def solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    return _solve_sylvester_op(a, b, q)


@gradient_rule(_solve_sylvester_op)
def _solve_sylvester(grad: Any, output: Any, a: Any, b: Any, q: Any) -> tuple:
    y = solve_sylvester(_mT(a), _mT(b), grad)
    return (-np.matmul(y, _mT(output)), -np.matmul(_mT(output), y), y)


@tangent_rule(_solve_sylvester_op, duals=(0, 1, 2))
def _solve_sylvester_tangent(a: Any, b: Any, q: Any) -> Any:
    tag = innermost_tag((a, b, q))
    assert tag is not None  # a tangent rule runs on dual numbers
    (av, bv, qv), (ap, bp, qp) = split_duals((a, b, q), tag)
    x = solve_sylvester(av, bv, qv)
    k = _k(next(p for p in (ap, bp, qp) if p is not None))
    rhs = np.zeros((k,) + shape_of(x)) if qp is None else kfirst(qp)
    if ap is not None:
        rhs = rhs - np.matmul(kfirst(ap), x)
    if bp is not None:
        rhs = rhs - np.matmul(x, kfirst(bp))
    d = np.stack([solve_sylvester(av, bv, rhs[j]) for j in range(k)])
    return Dual._make(x, klast(d), tag)


# -- solve, inv, det: the np.linalg rules -------------------------------------------------------------


@dropin(_sl.solve)
def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, check_finite: bool = True, assume_a: Any = None,
          transposed: bool = False) -> Any:
    """``a^-1 b`` (``transposed``: ``a^-T b``); every ``assume_a`` reads the whole matrix
    except ``'sym'`` / ``'pos'`` (one triangle, as scipy)."""
    if assume_a in ("sym", "symmetric", "her", "hermitian", "pos", "positive definite"):
        t = np.tril(a) if lower else np.triu(a)
        a = t + _mT(t) - _diag_matrix(a)
    if transposed:
        a = _mT(a)
    return np.linalg.solve(a, b)


def _diag_matrix(a: Any) -> Any:
    return np.diagonal(a, 0, -2, -1)[..., None] * np.eye(shape_of(a)[-1])


@dropin(_sl.inv)
def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True, **kwargs: Any) -> Any:
    """The inverse (np.linalg.inv's rules)."""
    return np.linalg.inv(a)


@dropin(_sl.det)
def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant (np.linalg.det's rules)."""
    return np.linalg.det(a)


# -- schur ------------------------------------------------------------------------------------


def _schur_call(a: Any, output: str = "real", sort: Any = None) -> Any:
    return _sl.schur(a, output=output, sort=sort)


_schur_op = primitive(_schur_call)


@functools.wraps(_sl.schur)
def schur(a: Any, output: str = "real", lwork: Any = None, overwrite_a: bool = False,
          sort: Any = None, check_finite: bool = True) -> Any:
    """``(T, Z)`` (and ``sdim`` with ``sort``) as scipy, differentiable in ``a``."""
    return _schur_op(a, output, sort)


def _gap_inverse(d: Any) -> Any:
    """``1 / d``, zero where ``d == 0`` (repeated eigenvalues: see the module notes)."""
    zero = np.asarray(constant(d) == 0)
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, d))


def _schur_tangents(t: Any, z: Any, p: Any) -> tuple[Any, Any]:
    """k-first tangents ``(dT, dZ)`` of ``A = Z T Z^H`` from k-first partials ``p``.

    With ``B = Z^H dA Z`` and ``Omega = Z^H dZ = L - L^H`` (``L`` strictly lower; zero
    diagonal, the gauge of the phases): ``dT = B - Omega T + T Omega`` must stay upper
    triangular, i.e. ``(T_ii - T_jj) L_ij = -B_ij - sum_{k>i} T_ik L_kj + sum_{k<j} L_ik T_kj``
    for ``i > j``, solved column by column.
    """
    n = shape_of(t)[-1]
    zh = np.conj(_mT(z)) if np.iscomplexobj(constant(z)) else _mT(z)
    b = np.matmul(np.matmul(zh, p), z)
    lower: dict[tuple[int, int], Any] = {}
    for j in range(n):
        for i in range(n - 1, j, -1):
            rhs = -b[:, i, j]
            for k in range(i + 1, n):
                rhs = rhs - t[i, k] * lower[(k, j)]
            for k in range(j):
                rhs = rhs + lower[(i, k)] * t[k, j]
            lower[(i, j)] = rhs * _gap_inverse(t[i, i] - t[j, j])
    zeros = np.zeros(shape_of(b)[:1], dtype=np.result_type(constant(b)))
    rows = [np.stack([lower.get((i, j), zeros) for j in range(n)], axis=-1) for i in range(n)]
    low = np.stack(rows, axis=-2)
    omega = low - (np.conj(_mT(low)) if np.iscomplexobj(constant(low)) else _mT(low))
    dt = np.triu(b - np.matmul(omega, t) + np.matmul(t, omega))
    return dt, np.matmul(z, omega)


def _require_triangular(t: Any) -> None:
    if np.any(np.tril(constant(t), -1) != 0):
        raise MissingRuleError(
            "dualad: scipy.linalg.schur(a, output='real') of a matrix with complex "
            "eigenvalues (2x2 blocks on the diagonal of T) is not differentiable yet; pass "
            "output='complex'."
        )


@tangent_rule(_schur_op)
def _schur_tangent(a: Any, output: str = "real", sort: Any = None) -> Any:
    out = _schur_op(a.value, output, sort)
    t, z = out[0], out[1]
    _require_triangular(t)
    dt, dz = _schur_tangents(t, z, kfirst(a.partials))
    result = (Dual._make(t, klast(dt), a.tag), Dual._make(z, klast(dz), a.tag))
    return result + tuple(out[2:])


@gradient_rule(_schur_op)
def _schur(grad: Any, output: Any, a: Any, *args: Any) -> tuple:
    """The gradient from the Jacobian: one tangent per entry of ``a`` (and per imaginary
    part for a complex ``a``), all in one vectorised pass of the tangent above."""
    t, z = output[0], output[1]
    gt, gz = grad[0], grad[1]
    n = shape_of(t)[-1]
    basis = np.reshape(np.eye(n * n), (n * n, n, n))
    complex_a = np.iscomplexobj(constant(a))
    directions = np.concatenate([basis, 1j * basis]) if complex_a else basis
    _require_triangular(t)
    dt, dz = _schur_tangents(t, z, directions)
    pairing = np.real(np.sum(gt * dt, axis=(-2, -1)) + np.sum(gz * dz, axis=(-2, -1)))
    g = pairing[:n * n] - 1j * pairing[n * n:] if complex_a else pairing
    return (np.reshape(g, (n, n)),) + (None,) * len(args)


# -- sparsity detection: every entry of a matrix function depends on the whole matrix --------

declare_dense(_solve_triangular_op, _lu_factor_op, _expm_op, _logm_op, _sqrtm_op,
              _solve_sylvester_op, _schur_op)


def __dir__() -> list[str]:
    """This module's face: scipy.linalg's names, nothing else."""
    return sorted(__all__)
