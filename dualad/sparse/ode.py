"""Sparse Jacobians of ODE right-hand sides ``f(t, y, *args)`` for scipy's stiff solvers.

``sparse_ode_jacobian(f)`` is the ``jac(t, y, *args)`` of
``solve_ivp(method="BDF" | "Radau", jac=...)`` as a ``scipy.sparse.csr_array`` (pattern
and colouring found at the first call and reused); ``ode_sparsity(f)(t0, y0, *args)`` is
the boolean pattern to pass as ``jac_sparsity=``. ``ad.ode_jacobian(f, sparse=True)`` and
``ad.ode_jacobian(f).sparsity`` are these.

Example:
    >>> import numpy as np
    >>> def rhs(t, y):
    ...     return np.concatenate([y[1:] - y[:-1], -y[-1:]])
    >>> sparse_ode_jacobian(rhs)(0.0, np.ones(3)).toarray()
    array([[-1.,  1.,  0.],
           [ 0., -1.,  1.],
           [ 0.,  0., -1.]])
    >>> ode_sparsity(rhs)(0.0, np.ones(3)).nnz
    5
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.marks import mark_transform
from ..njit import is_njit
from ..sparsity.detection import jacobian_sparsity
from .coloring import color_columns
from .compressed import sparse_jacobian
from .seeding import pattern_csr

__all__ = ["ode_sparsity", "sparse_ode_jacobian"]


def _of_y(f: Callable[..., Any]) -> Callable[..., Any]:
    def rhs_of_y(y: Any, t: Any, *args: Any) -> Any:
        return f(t, y, *args)

    return rhs_of_y


def sparse_ode_jacobian(f: Callable[..., Any], *, mode: str = "auto",
                        sparsity: Any = None) -> Callable[..., Any]:
    """``jac(t, y, *args)``: ``df/dy`` as a ``scipy.sparse.csr_array`` of shape ``(n, n)``
    (for an ``@njit`` ``f``, from compiled compressed passes)."""
    if is_njit(f):
        jac_ty = sparse_jacobian(f, 1, sparsity=sparsity)

        @functools.wraps(f.py_func)  # type: ignore[attr-defined]
        def compiled_jac(t: Any, y: Any, *args: Any) -> Any:
            return jac_ty(float(t), np.ascontiguousarray(y, dtype=np.float64), *args)

        compiled_jac.sparsity = ode_sparsity(f)  # type: ignore[attr-defined]
        return compiled_jac
    jac_y = sparse_jacobian(_of_y(f), 0, sparsity=sparsity,
                            mode="auto" if mode not in ("forward", "reverse") else mode)

    @functools.wraps(f)
    def jac(t: Any, y: Any, *args: Any) -> Any:
        return jac_y(np.asarray(y, dtype=np.float64), t, *args)

    jac.sparsity = ode_sparsity(f)  # type: ignore[attr-defined]
    # ad.jit compiles it as the sparse Jacobian of f with respect to y (argument 1)
    given = None if sparsity is None else pattern_csr(sparsity, None, "ode_jacobian")
    return mark_transform(jac, "sparse_jacobian", f, 1,
                          lambda g, **o: sparse_ode_jacobian(g, **{
                              "mode": mode, "sparsity": sparsity, **o}),
                          sparsity=given, detect=jacobian_sparsity(f, 1),
                          color=color_columns)


def ode_sparsity(f: Callable[..., Any]) -> Callable[..., Any]:
    """``sparsity(t0, y0, *args)``: the boolean pattern of ``df/dy`` (``jac_sparsity=``)."""
    if is_njit(f):
        of_ty = jacobian_sparsity(f, 1)

        def compiled_sparsity(t0: Any, y0: Any, *args: Any) -> Any:
            return of_ty(t0, np.asarray(y0, dtype=np.float64), *args)

        return compiled_sparsity
    pattern = jacobian_sparsity(_of_y(f), 0)

    def sparsity(t0: Any, y0: Any, *args: Any) -> Any:
        return pattern(np.asarray(y0, dtype=np.float64), t0, *args)

    return sparsity
