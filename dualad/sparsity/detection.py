"""Sparsity patterns of Jacobians and Hessians of plain numpy code.

``jacobian_sparsity(f)(x)`` runs ``f`` once on a :class:`~dualad.sparsity.flows.SparsityTracer`
and returns which outputs depend on which inputs; ``hessian_sparsity(f)(x)`` also records
which inputs meet in nonlinear operations. The patterns are global where the code is
(an ``np.where`` keeps both branches) and local where Python decides: a Python ``if`` on
a value takes the branch of the given point. A numpy function with no declared flow
raises :class:`~dualad.core.errors.MissingRuleError` naming it (no silent dense fallback).

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.sparse import jacobian_sparsity
    >>> def f(x):
    ...     return x[1:] ** 2 - x[:-1]
    >>> jacobian_sparsity(f)(np.ones(4)).toarray().astype(int)
    array([[1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.allocations import allocation_policy, promoting
from ..core.array_protocol import lift_object_array
from ..core.errors import ShapeError
from .flows import CURRENT_TRACE, STRICT, SparsityTracer, Trace, trace_inputs
from .through_njit import python_version

__all__ = ["hessian_sparsity", "jacobian_sparsity", "trace_call"]


def _argnum(argnums: Any, fname: str) -> int:
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return int(argnums)
    raise TypeError(
        f"{fname}: argnums must be one int (the array argument to differentiate), got "
        f"{argnums!r}; concatenate several arguments into one array first."
    )


def trace_call(f: Callable[..., Any], argnum: int, args: tuple, kwargs: dict,
               hessian: bool = False, fname: str = "jacobian_sparsity",
               strict: bool = False) -> tuple[Any, Trace, int]:
    """``(output, trace, n)``: ``f`` run on a tracer in place of ``args[argnum]``
    (``strict``: a call without a declared flow raises instead of taking the conservative
    flow)."""
    if not -len(args) <= argnum < len(args):
        raise TypeError(
            f"{fname}: argnums={argnum} but the function was called with {len(args)} "
            f"positional argument(s)."
        )
    x = np.asarray(args[argnum])
    if x.dtype.kind not in "fiub":
        raise TypeError(f"{fname}: the differentiated argument must be a real array, got "
                        f"dtype {x.dtype}.")
    tracer, trace = trace_inputs(x, hessian)
    f = python_version(f)  # an @njit function: its Python source, on index sets
    call = list(args)
    call[argnum] = tracer
    token = STRICT.set(bool(strict))
    current = CURRENT_TRACE.set(trace)
    try:
        out = lift_object_array(promoting(f)(*call, **kwargs))
    finally:
        CURRENT_TRACE.reset(current)
        STRICT.reset(token)
    return out, trace, x.size


def _rows_of(out: Any, n: int) -> Any:
    import scipy.sparse as sp

    if isinstance(out, SparsityTracer):
        rows = out.rows.to_scipy()
    elif isinstance(out, (tuple, list, dict)):
        raise TypeError(
            "jacobian_sparsity: the function returned a "
            f"{type(out).__name__}; it must return one array (concatenate the outputs)."
        )
    else:
        rows = sp.csr_array((int(np.size(out)), n), dtype=bool)
    rows.sum_duplicates()
    rows.sort_indices()
    return rows


def jacobian_sparsity(f: Callable[..., Any], argnums: int = 0, *,
                      strict: bool = False,
                      allocations: str = "promote") -> Callable[..., Any]:
    """A function returning the Jacobian's pattern: a boolean ``scipy.sparse.csr_array`` of
    shape ``(out.size, in.size)`` (``True`` where output ``i`` depends on input ``j``).

    A function with no declared flow takes the conservative one (every output entry of the
    call on every input entry) with a one-time warning; ``strict=True`` raises instead.

    Example:
        >>> import numpy as np
        >>> p = jacobian_sparsity(lambda x: x * x[0])(np.ones(3))
        >>> p.toarray().astype(int)
        array([[1, 0, 0],
               [1, 1, 0],
               [1, 0, 1]])
    """
    f = allocation_policy(f, allocations, "jacobian_sparsity")
    argnum = _argnum(argnums, "jacobian_sparsity")

    @functools.wraps(f)
    def pattern(*args: Any, **kwargs: Any) -> Any:
        out, _, n = trace_call(f, argnum, args, kwargs, strict=strict)
        return _rows_of(out, n)

    return pattern


def hessian_sparsity(f: Callable[..., Any], argnums: int = 0, *,
                     strict: bool = False) -> Callable[..., Any]:
    """A function returning the Hessian's pattern of a scalar ``f``: a symmetric boolean
    ``scipy.sparse.csr_array`` of shape ``(in.size, in.size)``.

    Example:
        >>> import numpy as np
        >>> h = hessian_sparsity(lambda x: np.sum(x[1:] * x[:-1]) + x[0] ** 3)(np.ones(3))
        >>> h.toarray().astype(int)
        array([[1, 1, 0],
               [1, 0, 1],
               [0, 1, 0]])
    """
    argnum = _argnum(argnums, "hessian_sparsity")

    @functools.wraps(f)
    def pattern(*args: Any, **kwargs: Any) -> Any:
        import scipy.sparse as sp

        out, trace, n = trace_call(f, argnum, args, kwargs, hessian=True,
                                   fname="hessian_sparsity", strict=strict)
        if int(np.size(out)) != 1:
            raise ShapeError(
                f"hessian_sparsity: the function must return a scalar, got shape "
                f"{np.shape(out)}; use jacobian_sparsity for vector outputs."
            )
        h = sp.csr_array(trace.hessian_pattern(), dtype=bool)
        h.sum_duplicates()
        h.sort_indices()
        return h

    return pattern
