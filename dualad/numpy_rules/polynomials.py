"""Rules for polynomials: ``np.vander``, ``np.polyfit``, ``np.roots``, ``np.poly``.

Each is numpy's own algorithm written with calls that have rules (composite rules: both
modes, every order, complex coefficients):

* ``vander(x, N, increasing)``: the powers by repeated products (so ``x = 0`` has finite
  derivatives).
* ``polyfit(x, y, deg, rcond, full, w)``: numpy's scaled least squares (``lstsq`` of the
  column-scaled Vandermonde matrix), differentiable in ``x``, ``y`` and ``w``; with
  ``full=True`` the residuals and singular values too. ``cov=True`` is not supported.
* ``roots(p)``: the eigenvalues of the companion matrix, as numpy (leading and trailing
  zeros stripped first; the zero roots from trailing zeros have derivative 0). Roots are
  the eigenvalues' derivatives: they need simple roots, as in JAX.
* ``poly(zeros)``: the product of the factors ``(x - z)`` (``np.convolve``), of the
  eigenvalues for a square matrix; real for conjugate pairs, as numpy.

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.jacobian(np.roots)(np.array([1.0, -3.0, 2.0]))   # roots 2 and 1
    array([[-4., -2., -1.],
           [ 1.,  1.,  1.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import MissingRuleError, shape_of, value
from ._support import composite_rules

__all__: list[str] = []


def _vander(x: Any, N: Any = None, increasing: bool = False) -> Any:
    if len(shape_of(x)) != 1:
        raise ValueError(f"np.vander: x must be a one-dimensional array or sequence "
                         f"(got shape {shape_of(x)})")
    n = shape_of(x)[0] if N is None else int(N)
    columns: list[Any] = []
    for k in range(n):
        columns.append(np.ones_like(x) if k == 0 else columns[-1] * x)
    if not columns:
        return np.zeros(shape_of(x) + (0,))
    if not increasing:
        columns = columns[::-1]
    return np.stack(columns, axis=1)


def _polyfit(x: Any, y: Any, deg: Any, rcond: Any = None, full: bool = False, w: Any = None,
             cov: Any = False) -> Any:
    if cov:
        raise MissingRuleError("dualad: np.polyfit(..., cov=True) is not differentiable yet; "
                               "compute the covariance from the returned fit.")
    order = int(deg) + 1
    if deg < 0:
        raise ValueError("np.polyfit: expected deg >= 0")
    if len(shape_of(x)) != 1:
        raise TypeError("np.polyfit: expected 1D vector for x")
    if len(shape_of(y)) not in (1, 2):
        raise TypeError("np.polyfit: expected 1D or 2D array for y")
    if shape_of(x)[0] != shape_of(y)[0]:
        raise TypeError("np.polyfit: expected x and y to have same length")
    lhs = _vander(x * 1.0, order)
    rhs = y
    if w is not None:
        if len(shape_of(w)) != 1 or shape_of(w)[0] != shape_of(y)[0]:
            raise TypeError("np.polyfit: expected a 1-d weight w with the length of y")
        lhs = lhs * np.expand_dims(w, 1)
        rhs = rhs * (np.expand_dims(w, 1) if len(shape_of(y)) == 2 else w)
    if rcond is None:
        rcond = shape_of(x)[0] * np.finfo(np.asarray(value(x)).dtype if np.issubdtype(
            np.asarray(value(x)).dtype, np.inexact) else np.float64).eps
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = np.linalg.lstsq(lhs, rhs, rcond)
    c = c / (scale if len(shape_of(c)) == 1 else np.expand_dims(scale, 1))
    if full:
        return c, resids, rank, s, rcond
    return c


def _roots(p: Any) -> Any:
    if len(shape_of(p)) == 0:
        p = np.reshape(p, (1,))
    if len(shape_of(p)) != 1:
        raise ValueError("np.roots: input must be a rank-1 array.")
    non_zero = np.nonzero(np.ravel(np.asarray(value(p))))[0]
    if len(non_zero) == 0:
        return np.array([])
    trailing_zeros = shape_of(p)[0] - int(non_zero[-1]) - 1
    p = p[int(non_zero[0]):int(non_zero[-1]) + 1]
    n = shape_of(p)[0]
    if n > 1:
        first_row = np.expand_dims(-p[1:] / p[0], 0)
        companion = np.concatenate([first_row, np.eye(n - 2, n - 1)], axis=0)
        roots = np.linalg.eigvals(companion)
    else:
        roots = np.array([])
    if trailing_zeros:
        dtype = np.asarray(value(roots)).dtype
        roots = np.concatenate([roots, np.zeros(trailing_zeros, dtype)])
    return roots


def _poly(seq_of_zeros: Any) -> Any:
    zeros = seq_of_zeros
    if isinstance(zeros, (list, tuple)):
        zeros = np.asarray(zeros)
    shape = shape_of(zeros)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        zeros = np.linalg.eigvals(zeros)
    elif len(shape) == 1:
        pass
    elif len(shape) == 0:
        zeros = np.reshape(zeros, (1,))
    else:
        raise ValueError("np.poly: input must be 1d or non-empty square 2d array.")
    coefficients: Any = np.ones(1)
    for k in range(shape_of(zeros)[0]):
        coefficients = np.convolve(coefficients, np.stack([np.ones_like(zeros[k]), -zeros[k]]))
    plain = np.asarray(value(zeros))
    if np.iscomplexobj(plain):  # numpy returns real coefficients for conjugate pairs
        roots = np.asarray(plain, complex)
        pos_roots = np.compress(roots.imag > 0, roots)
        neg_roots = np.conjugate(np.compress(roots.imag < 0, roots))
        if len(pos_roots) == len(neg_roots) and np.all(np.sort_complex(neg_roots)
                                                       == np.sort_complex(pos_roots)):
            coefficients = np.real(coefficients)
    return coefficients


def _positions(*names: str) -> Any:
    def positions(args: tuple, kwargs: dict) -> list[int]:
        return [i for i, name in enumerate(names)
                if name and i < len(args) and not isinstance(args[i], (list, tuple))]
    return positions


composite_rules(np.vander, _vander, _positions("x"))
composite_rules(np.polyfit, _polyfit, _positions("x", "y", "", "", "", "w"))
composite_rules(np.roots, _roots, _positions("p"))
composite_rules(np.poly, _poly, _positions("seq_of_zeros"))
