"""Rules for ``np.linalg.eig`` and ``np.linalg.eigvals`` (general, non-symmetric matrices).

With ``A = V diag(w) V^-1`` and ``M = V^-1 dA V``: ``dw = diag(M)`` and
``dV = V (F * M)`` with ``F[i, j] = 1 / (w_j - w_i)`` off the diagonal, minus the change
of each column's norm (numpy returns unit-norm eigenvectors). Gradients are the transposes
(JAX's convention for complex values, see :mod:`dualad.numpy_rules.complex_parts`); a
real matrix gets the real part.

Conventions and limits (as JAX):

* Eigenvalues (and their gradients) are complex in general; numpy returns real arrays when
  every eigenvalue is real, and so do the derivatives.
* The matrix must be diagonalisable (``V`` invertible). Eigenvalue derivatives need simple
  eigenvalues; eigenvector derivatives need distinct eigenvalues. Where two eigenvalues are
  exactly equal the coupling term between their eigenvectors is set to zero instead of
  dividing by zero (as for ``eigh``): the result is then not the derivative of the
  individual eigenvectors, which is not defined there.
* An eigenvector is defined up to a phase (a sign for real ones): only the norm is fixed,
  so differentiate functions that do not depend on the phase (``abs(v)``, ``v v^H``, ...).

Example:
    >>> import numpy as np, dualad as ad
    >>> a = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> ad.jacobian(lambda a: np.linalg.eigvals(a))(a)[0]
    array([[ 1.,  0.],
           [-1.,  0.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_dense,
    shape_of,
)
from ._support import gradient_rule, kfirst, klast, tangent_rule
from .complex_parts import is_complex

__all__: list[str] = []


def _mT(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _diag_embed(v: Any) -> Any:
    return np.expand_dims(v, -1) * np.eye(shape_of(v)[-1])


def _diag_part(m: Any) -> Any:
    return np.diagonal(m, 0, -2, -1)


def _gaps(w: Any) -> Any:
    """``F[..., i, j] = 1 / (w_j - w_i)``, zero where equal (and on the diagonal)."""
    d = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    zero = np.asarray(np.equal(d, 0))
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, d))


def _eig_gradient(w: Any, v: Any, gw: Any, gv: Any) -> Any:
    """The gradient w.r.t. ``A`` from cotangents of ``w`` and ``v`` (either may be None)."""
    vinv = np.linalg.inv(v)
    inner = 0.0
    if gw is not None:
        inner = _diag_embed(gw)
    if gv is not None:
        c = np.real(np.sum(gv * v, axis=-2))  # the norm constraint on each column
        gv = gv - np.conjugate(v) * np.expand_dims(c, -2)
        inner = inner + _gaps(w) * np.matmul(_mT(v), gv)
    return np.matmul(np.matmul(_mT(vinv), inner), _mT(v))


@gradient_rule(np.linalg.eig)
def _eig(grad: Any, output: Any, a: Any) -> tuple:
    w, v = output
    return (_eig_gradient(w, v, grad[0], grad[1]),)


@gradient_rule(np.linalg.eigvals)
def _eigvals(grad: Any, output: Any, a: Any) -> tuple:
    w, v = np.linalg.eig(a)
    return (_eig_gradient(w, v, grad, None),)


def _eig_tangents(w: Any, v: Any, p: Any, vectors: bool) -> tuple[Any, Any]:
    """k-first tangents of ``(w, v)`` from k-first partials ``p`` of the matrix."""
    m = np.matmul(np.matmul(np.linalg.inv(v), p), v)
    dw = _diag_part(m)
    if not vectors:
        return dw, None
    dv = np.matmul(v, _gaps(w) * m)
    norm_change = np.real(np.sum(np.conjugate(v) * dv, axis=-2))
    return dw, dv - v * np.expand_dims(norm_change, -2)


def _real_like(value: Any, d: Any) -> Any:
    """Tangents of a real result are real (numpy's real eigenvalues of a real matrix)."""
    if is_complex(d) and not is_complex(value):
        return np.real(d)
    return d


@tangent_rule(np.linalg.eig)
def _eig_tangent(a: Any) -> Any:
    out = np.linalg.eig(a.value)
    w, v = out
    dw, dv = _eig_tangents(w, v, kfirst(a.partials), True)
    return out._make([Dual._make(w, klast(_real_like(w, dw)), a.tag),
                      Dual._make(v, klast(_real_like(v, dv)), a.tag)])


@tangent_rule(np.linalg.eigvals)
def _eigvals_tangent(a: Any) -> Any:
    w, v = np.linalg.eig(a.value)
    dw, _ = _eig_tangents(w, v, kfirst(a.partials), False)
    return Dual._make(w, klast(_real_like(w, dw)), a.tag)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_dense(np.linalg.eig, np.linalg.eigh, np.linalg.eigvals, np.linalg.eigvalsh, core=2)
