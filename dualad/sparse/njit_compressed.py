"""Sparse Jacobians of ``@numba.njit`` functions as they are.

``sparse_jacobian(f_njit)`` detects the pattern through the function's Python source on
index sets (:mod:`dualad.sparsity.through_njit`), colours its columns, and then computes
each Jacobian in one compiled call (:mod:`dualad.njit.compressed_drivers`): one dual
direction per colour plus a random check direction, decompressed into the CSR data and
checked inside the compiled driver. If the check fails (a branch on a value went another
way than at detection), the pattern is detected again at this point, with a warning.

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def f(x):
    ...     out = np.empty_like(x)
    ...     for i in range(x.shape[0]):
    ...         out[i] = x[i] * x[i - 1]
    ...     return out
    >>> njit_sparse_jacobian(f)(np.array([1.0, 2.0, 3.0])).toarray()
    array([[3., 0., 1.],
           [2., 1., 0.],
           [0., 3., 2.]])
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import DualadError, ShapeError
from ..sparsity.detection import jacobian_sparsity
from .coloring import color_columns
from .csr_results import CsrTemplate
from .seeding import SparsityChangedWarning, best_colors, pattern_csr, seed_matrix

__all__ = ["MAX_WIDTH", "njit_sparse_jacobian"]

#: Most directions carried per compiled pass (wider tuples compile more slowly).
MAX_WIDTH = 16


def _width(k: int) -> int:
    """Directions per pass for ``k`` (colours and the check): all of them up to
    :data:`MAX_WIDTH` (no rounding up: the dual arithmetic grows with the width)."""
    return max(1, min(k, MAX_WIDTH))


class _NjitPlan:
    __slots__ = ("pattern", "k", "seed", "take", "rows", "r_cols", "width", "template",
                 "given", "runs")

    def __init__(self, pattern: Any, given: bool) -> None:
        m, n = pattern.shape
        self.pattern = pattern
        self.given = given
        colors = best_colors(color_columns, pattern) if n else np.zeros(0, np.int64)
        self.k = int(colors.max(initial=-1)) + 1
        seed = seed_matrix(n, colors, self.k, np.random.default_rng(0x5EED))
        self.seed = np.ascontiguousarray(seed)
        rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(pattern.indptr))
        cols = pattern.indices.astype(np.int64)
        self.rows = rows
        self.take = rows * (self.k + 1) + colors[cols]
        self.r_cols = np.ascontiguousarray(self.seed[cols, self.k])
        self.width = _width(self.k + 1)
        self.template = CsrTemplate(pattern)
        self.runs: dict[tuple, Any] = {}  # the compiled driver per (nargs, lifted)


def njit_sparse_jacobian(f: Any, argnums: int = 0, *, sparsity: Any = None,
                         mode: str = "auto", strict: bool = False) -> Callable[..., Any]:
    """The Jacobian of the ``@njit`` function ``f`` as a ``scipy.sparse.csr_array`` of shape
    ``(out.size, in.size)``, from compiled compressed passes (see ``ad.sparse_jacobian``)."""
    from ..njit.compressed_drivers import compressed_driver
    from ..njit.transforms import _call, _check_args, _lift, _name, _run
    from ..njit.transforms import _seed as _arg_kind

    fname = _name(f, "sparse_jacobian")
    if mode not in ("auto", "forward"):
        raise ValueError(
            f"{fname}: mode={mode!r} is not available for @njit functions, whose compressed "
            f"Jacobian is computed by compiled forward passes; use mode='forward' (or "
            f"'auto'), or pass the plain numpy function for reverse or bidirectional modes."
        )
    if not isinstance(argnums, (int, np.integer)) or isinstance(argnums, bool):
        raise TypeError(f"{fname}: argnums must be one int, got {argnums!r}.")
    argnum = int(argnums)
    given = None if sparsity is None else pattern_csr(sparsity, None, "sparse_jacobian")
    detect = jacobian_sparsity(f, argnum, strict=strict)
    lock = threading.Lock()
    state: dict[str, Any] = {"plan": None, "warned": False}

    def evaluate(plan: _NjitPlan, args: tuple) -> tuple[Any, bool]:
        x = args[argnum]
        width = plan.width
        if len(args) == 1 and type(x) is np.ndarray and x.dtype == np.float64 \
                and x.flags.c_contiguous and x.ndim:
            # the common case, one array argument: no argument analysis
            n = x.size
            run = plan.runs.get((1, ()))
            if run is None:
                run = plan.runs[(1, ())] = compressed_driver(f, nargs=1, index=0, width=width)
            partials = np.zeros(x.shape + (width,))
            call = [x, partials, partials.reshape(n, width)]
        else:
            kind, x, _ = _arg_kind(x, f"argument {argnum} of {fname}")
            if kind != "array":
                raise TypeError(f"{fname}: the differentiated argument must be an array.")
            values = list(args)
            values[argnum] = x
            lifted = _lift(values, (argnum,))
            n = x.size
            run = plan.runs.get((len(args), lifted))
            if run is None:
                run = plan.runs[(len(args), lifted)] = compressed_driver(
                    f, nargs=len(args), index=argnum, width=width, lifted=lifted)
            partials = np.zeros(x.shape + (width,))
            call = _call(values, {argnum: [partials, partials.reshape(n, width)]}, lifted,
                         width)
        data = np.empty(plan.take.size)
        res, ok = _run(run, call + [plan.seed, plan.take, plan.rows, plan.r_cols, data], fname)
        big_k = plan.k + 1
        m = (res.size - 1 - int(res[0])) // (big_k + 1)
        if m != plan.pattern.shape[0]:
            raise ShapeError(
                f"{fname}: the pattern has shape {plan.pattern.shape} but the Jacobian has "
                f"shape {(m, n)} (outputs x inputs); pass a pattern of shape {(m, n)}."
            )
        return plan.template.with_data(data), bool(ok)

    @functools.wraps(f.py_func)
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != 1 or type(args[0]) is not np.ndarray:
            _check_args(args, kwargs, fname)
        if not -len(args) <= argnum < len(args):
            raise TypeError(
                f"{fname}: argnums={argnum} but the function was called with {len(args)} "
                f"positional argument(s)."
            )
        plan = state["plan"]
        x = args[argnum]
        size = x.size if type(x) is np.ndarray else int(np.size(x))
        if plan is None or plan.pattern.shape[1] != size:
            if given is not None:
                if given.shape[1] != size:
                    raise ShapeError(
                        f"{fname}: sparsity= has shape {given.shape} but the input has "
                        f"{size} entries; the pattern must have shape (out.size, {size})."
                    )
                plan = _NjitPlan(given, True)
            else:
                plan = _NjitPlan(detect(*args), False)
        jac, ok = evaluate(plan, args)
        if not ok:
            with lock:
                if not state["warned"]:
                    state["warned"] = True
                    warnings.warn(
                        f"{fname}: the sparsity pattern in use misses nonzeros of the "
                        f"Jacobian at this point (a branch on a value, or a wrong sparsity=); "
                        f"detecting it again here. The result is correct; pass a global "
                        f"pattern with sparsity= to avoid this.",
                        SparsityChangedWarning, stacklevel=2,
                    )
            fresh = (detect(*args) + plan.pattern).tocsr()
            plan = _NjitPlan(pattern_csr(fresh, None, "sparse_jacobian"), False)
            jac, ok = evaluate(plan, args)
            if not ok:
                raise DualadError(
                    f"{fname}: the pattern detected at this point does not cover the "
                    f"Jacobian; use ad.jacobian(f) and report the function."
                )
        state["plan"] = plan
        return jac

    return jacobian
