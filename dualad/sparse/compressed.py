"""Sparse Jacobians and Hessians from compressed passes, returned as ``scipy.sparse``.

``sparse_jacobian(f)(x)`` detects the Jacobian's pattern once (:mod:`dualad.sparsity.detection`),
colours its columns (:mod:`dualad.sparse.coloring`) and then, on every call, runs ``f``
once in forward mode with one direction per colour: the sum of the unit vectors of one
colour's columns. Each nonzero ``J[i, j]`` is the partial of output ``i`` along ``j``'s
colour, so the result is written straight into the CSR arrays of the pattern. With
``mode="reverse"`` the rows are coloured instead and each colour is one pullback.

``sparse_hessian(f)(x)`` star-colours the Hessian's pattern and takes one forward-over-
reverse Hessian-vector product per colour (all in one pass: the gradient of ``f`` at a
dual-number ``x``), recovering every nonzero directly.

Every call also carries one extra direction, a random ``r``, and compares ``J @ r`` from
that direction with the decompressed matrix times ``r``: if they differ, the pattern
missed entries at this point (a Python branch went the other way, or a ``sparsity=``
given was wrong). Then the pattern is detected again at this point, colours are recomputed,
a warning is given (once per function) and the right matrix is returned; a wrong matrix is
never returned silently.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.sparse import sparse_jacobian
    >>> def f(x):
    ...     return x[1:] * x[:-1] + np.sin(x[1:])
    >>> J = sparse_jacobian(f)(np.arange(4.0))
    >>> J.shape, J.nnz
    ((3, 4), 6)
    >>> bool(np.allclose(J.toarray(), ad.jacobian(f)(np.arange(4.0))))
    True
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.allocations import allocation_policy, promoting
from ..core.array_protocol import lift_object_array, shape_of
from ..core.errors import DualadError, ShapeError
from ..core.marks import mark_transform
from ..forward_mode.dual import Dual, Tag
from ..njit import is_njit
from ..reverse_mode.transforms import grad, vjp
from ..sparsity.detection import hessian_sparsity, jacobian_sparsity
from ..sparsity.through_njit import python_version
from .bicoloring import REVERSE_COST, Bicoloring, color_bidirectional
from .coloring import color_columns, color_rows, color_symmetric, star_recovery
from .csr_results import CsrTemplate
from .seeding import SparsityChangedWarning, best_colors, pattern_csr, seed_matrix

__all__ = ["SparsityChangedWarning", "sparse_hessian", "sparse_jacobian"]

#: Relative tolerance of the pattern check (``J @ r`` two ways).
CHECK_RTOL = 1e-9

#: ``mode="auto"`` tries the bidirectional split when both one-sided colourings cost more
#: than this many forward directions (a colouring search of its own, worth it only then).
BIDIRECTIONAL_FROM = 16


def _check(direct: np.ndarray, data: np.ndarray, rows: np.ndarray, cols: np.ndarray,
           r: np.ndarray, size: int) -> bool:
    """Whether ``direct`` (``J @ r`` from the extra direction) equals the decompressed
    matrix (``data`` at ``rows``, ``cols``) times ``r``, up to rounding."""
    with np.errstate(invalid="ignore"):
        terms = data * r[cols]
    product = np.bincount(rows, terms, minlength=size)
    scale = np.bincount(rows, np.abs(terms), minlength=size)
    return not _mismatch(direct, product, scale)


def _mismatch(direct: np.ndarray, product: np.ndarray, scale: np.ndarray) -> bool:
    """Whether ``J @ r`` from the extra direction differs from the decompressed one."""
    with np.errstate(invalid="ignore"):
        ok = np.abs(direct - product) <= CHECK_RTOL * (scale + np.abs(direct)) + 1e-300
    if ok.all():
        return False
    # NaN or infinite entries: equal when both sides are the same non-finite value
    bad = ~ok & ~((np.isnan(direct) & np.isnan(product)) | (direct == product))
    return bool(bad.any())


def _pullbacks(pullback: Callable[..., Any], seeds: np.ndarray, oshape: tuple[int, ...],
               n: int) -> np.ndarray:
    """``(k, n)``: the pullbacks of the ``k`` columns of ``seeds`` (``m x k``).

    With more than two seeds they are taken in one reverse pass: the cotangent is a dual
    number carrying the seeds as its partials, and the pullback, linear in it, returns them
    pulled back as its partials. The last one is compared with a plain pullback of the same
    seed; a rule that cannot take a dual cotangent, or a mismatch, falls back to one pass
    per seed (never a silently wrong row)."""
    k = seeds.shape[1]

    def one(c: int) -> np.ndarray:
        return np.reshape(pullback(np.reshape(seeds[:, c], oshape))[0], -1)

    if k > 2:
        tag = Tag()
        cotangent = Dual._make(np.zeros(oshape), np.ascontiguousarray(seeds).reshape(
            oshape + (k,)), tag)
        try:
            g = pullback(cotangent)[0]
        except (TypeError, ValueError, DualadError):
            g = None
        if isinstance(g, Dual) and g.tag is tag:
            rows = np.asarray(g.partials).reshape(n, k).T
            last = one(k - 1)
            with np.errstate(invalid="ignore"):
                close = np.abs(rows[-1] - last) <= CHECK_RTOL * (np.abs(last) + 1.0) * 10
            if close.all():
                return rows
    return np.stack([one(c) for c in range(k)])


class _JacobianPlan:
    """A pattern, its colouring and where each nonzero sits in the compressed result.

    ``mode="auto"`` compares costs counted in forward directions: a forward colour costs
    one, a reverse colour (a whole pullback) :data:`~dualad.sparse.bicoloring.REVERSE_COST`;
    the bidirectional split is tried when both one-sided colourings need more than
    :data:`BIDIRECTIONAL_FROM` directions' worth.
    """

    __slots__ = ("pattern", "colors", "k", "seed", "take", "reverse", "given", "rows", "cols",
                 "weights", "scale_weights", "bidi", "rseed", "template", "kind")

    def __init__(self, pattern: Any, mode: str, given: bool) -> None:
        self.pattern = pattern
        self.given = given
        self.template = CsrTemplate(pattern)
        m, n = pattern.shape
        rng = np.random.default_rng(0x5EED)
        rows = np.repeat(np.arange(m, dtype=np.intp), np.diff(pattern.indptr))
        cols = pattern.indices.astype(np.intp)
        self.rows, self.cols = rows, cols
        self.bidi: Bicoloring | None = None
        column_colors: np.ndarray | None = None
        row_colors: np.ndarray | None = None
        if mode == "auto":
            # lower bounds first (a row's nonzeros need distinct column colours, a column's
            # distinct row colours): a colouring that cannot win is not computed, which
            # also avoids the dense intersection graph of a dense row or column
            low_f = int(np.diff(pattern.indptr).max(initial=0))
            low_r = REVERSE_COST * int(np.bincount(cols, minlength=1).max())
            costs: dict[str, int] = {}
            if min(low_f, low_r) > BIDIRECTIONAL_FROM:
                self.bidi = color_bidirectional(pattern)
                costs["bidirectional"] = self.bidi.cost
            if not costs or low_f <= min(costs.values()):
                column_colors = best_colors(color_columns, pattern) if n else \
                    np.zeros(0, np.int64)
                costs["forward"] = int(column_colors.max(initial=-1)) + 1
            if low_r < min(costs.values()):
                row_colors = best_colors(color_rows, pattern) if m else np.zeros(0, np.int64)
                costs["reverse"] = REVERSE_COST * (int(row_colors.max(initial=-1)) + 1)
            self.kind = min(costs, key=lambda k: (costs[k], k != "forward"))
        else:
            self.kind = mode
            if mode == "forward":
                column_colors = best_colors(color_columns, pattern) if n else \
                    np.zeros(0, np.int64)
            elif mode == "reverse":
                row_colors = best_colors(color_rows, pattern) if m else np.zeros(0, np.int64)
        if self.kind == "bidirectional":
            if self.bidi is None:
                self.bidi = color_bidirectional(pattern)
            self._bidirectional(m, n, rng)
            self.reverse = False
            return
        self.bidi = None
        self.reverse = self.kind == "reverse"
        if self.reverse:
            assert row_colors is not None  # coloured above for this kind
            self.colors = row_colors
            self.k = int(self.colors.max(initial=-1)) + 1
            self.seed = seed_matrix(m, self.colors, self.k, rng)
            # pullback of colour c gives, at input j, the sum over rows of colour c
            self.take = self.colors[rows] * n + cols
        else:
            assert column_colors is not None  # coloured above for this kind
            self.colors = column_colors
            self.k = int(self.colors.max(initial=-1)) + 1
            self.seed = seed_matrix(n, self.colors, self.k, rng)
            self.take = rows * (self.k + 1) + self.colors[cols]
            # (J @ r)[i] = sum over colours c of compressed[i, c] * weights[i, c], where
            # weights[i, c] is r at the one column of colour c in row i (or 0); the last
            # column, -1, subtracts the check direction's own J @ r
            self.weights = np.zeros((m, self.k + 1))
            self.weights[rows, self.colors[cols]] = self.seed[cols, self.k]
            self.weights[:, self.k] = -1.0
            self.scale_weights = np.full(self.k + 1, 1.5)
            self.scale_weights[self.k] = 1.0

    def _bidirectional(self, m: int, n: int, rng: np.random.Generator) -> None:
        split = self.bidi
        assert split is not None  # set before the bidirectional plan is built
        fc, rc = split.forward_colors, split.reverse_colors
        kf, kr = split.forward_count, split.reverse_count
        self.k = kf
        self.colors = fc
        seed = np.zeros((n, kf + 1))
        seeded = fc >= 0
        seed[np.flatnonzero(seeded), fc[seeded]] = 1.0
        seed[:, kf] = rng.uniform(0.5, 1.5, n)  # the check direction covers every column
        self.seed = seed
        rseed = np.zeros((m, kr))
        hit = rc >= 0
        rseed[np.flatnonzero(hit), rc[hit]] = 1.0
        self.rseed = rseed
        rows, cols = self.rows, self.cols
        fe = split.forward_entry
        # forward nonzeros from the (m, kf) compressed block, reverse ones from (kr, n) after it
        self.take = np.where(fe, rows * kf + np.maximum(fc[cols], 0),
                             m * kf + np.maximum(rc[rows], 0) * n + cols)


def sparse_jacobian(f: Callable[..., Any], argnums: int = 0, *, sparsity: Any = None,
                    mode: str = "auto", strict: bool = False,
                    allocations: str = "promote") -> Callable[..., Any]:
    """A function returning the Jacobian of ``f`` as a ``scipy.sparse.csr_array`` of shape
    ``(out.size, in.size)``.

    The pattern is ``sparsity`` when given (boolean array or scipy.sparse matrix), else it
    is detected at the first call; it and its colouring are reused by later calls (and
    re-detected, with a :class:`SparsityChangedWarning`, if a call shows they missed
    nonzeros). ``mode``: ``"forward"`` (column colouring, one pass), ``"reverse"`` (row
    colouring, one pullback per colour), ``"bidirectional"`` (dense rows from pullbacks,
    the rest from one forward pass: see :mod:`dualad.sparse.bicoloring`) or ``"auto"``
    (the cheapest of the three by colour counts, a pullback costing eight forward
    directions). Extra arguments pass through undifferentiated. An ``@njit`` ``f`` is
    differentiated by compiled compressed passes (:mod:`dualad.sparse.njit_compressed`).
    ``strict=True``: a call without a declared sparsity flow raises instead of taking the
    conservative flow.

    Example:
        >>> import numpy as np
        >>> jac = sparse_jacobian(lambda x: np.roll(x, 1) * x)
        >>> jac(np.array([1.0, 2.0, 3.0])).toarray()
        array([[3., 0., 1.],
               [2., 1., 0.],
               [0., 3., 2.]])
    """
    if is_njit(f):  # compiled compressed passes of the @njit function itself
        from .njit_compressed import njit_sparse_jacobian

        return njit_sparse_jacobian(f, argnums, sparsity=sparsity, mode=mode, strict=strict)
    f = allocation_policy(f, allocations, "sparse_jacobian")
    if mode not in ("auto", "forward", "reverse", "bidirectional"):
        raise ValueError(
            f"sparse_jacobian: mode must be 'auto', 'forward', 'reverse' or 'bidirectional', "
            f"got {mode!r}."
        )
    if not isinstance(argnums, (int, np.integer)) or isinstance(argnums, bool):
        raise TypeError(
            f"sparse_jacobian: argnums must be one int, got {argnums!r}; concatenate "
            f"several arguments into one array first."
        )
    argnum = int(argnums)
    given = None if sparsity is None else pattern_csr(sparsity, None, "sparse_jacobian")
    f = promoting(f)  # float buffers inside f can hold derivatives
    detect = jacobian_sparsity(f, argnum, strict=strict)

    def plan_for(pattern: Any, from_user: bool) -> _JacobianPlan:
        return _JacobianPlan(pattern, mode, from_user)

    def evaluate(plan: _JacobianPlan, x: np.ndarray, args: tuple, kwargs: dict
                 ) -> tuple[Any, bool]:

        m, n = plan.pattern.shape
        call = list(args)
        if plan.bidi is not None:
            return evaluate_bidirectional(plan, x, call, kwargs)
        if plan.reverse:
            def of_x(v: Any) -> Any:
                call[argnum] = v
                return f(*call, **kwargs)

            out, pullback = vjp(of_x, x)
            oshape = shape_of(out)
            if int(np.prod(oshape, dtype=np.int64)) != m:
                raise ShapeError(
                    f"sparse_jacobian: sparsity= has shape {plan.pattern.shape} but the "
                    f"Jacobian has shape {(int(np.prod(oshape, dtype=np.int64)), n)}."
                )
            comp = _pullbacks(pullback, plan.seed, oshape, n) if m else np.zeros((1, n))
            data = comp[:plan.k].reshape(-1)[plan.take] if plan.k else np.zeros(0)
            jac = plan.template.with_data(data)
            r = plan.seed[:, plan.k] if m else np.zeros(0)
            return jac, _check(comp[plan.k], data, plan.cols, plan.rows, r, n)
        p = forward_pass(plan, x, call, kwargs)
        data = p.reshape(-1)[plan.take]
        jac = plan.template.with_data(data)
        with np.errstate(invalid="ignore", over="ignore"):
            # J @ r from the decompressed nonzeros minus the check direction, in one pass
            # over the contiguous partials; its scale bounds the terms (weights < 1.5)
            residual = np.einsum("ij,ij->i", p, plan.weights)
            scale = np.abs(p) @ plan.scale_weights
            if (np.abs(residual) <= CHECK_RTOL * scale + 1e-300).all():
                return jac, True
        compressed = p[:, :plan.k]
        with np.errstate(invalid="ignore"):
            product = np.einsum("ij,ij->i", compressed, plan.weights[:, :plan.k])
            scale = np.abs(compressed) @ np.full(plan.k, 1.5)
        return jac, not _mismatch(p[:, plan.k], product, scale)

    def forward_pass(plan: _JacobianPlan, x: np.ndarray, call: list, kwargs: dict
                     ) -> np.ndarray:
        """``(m, k + 1)``: the outputs' partials along the plan's forward seeds."""
        m, n = plan.pattern.shape
        tag = Tag()
        call[argnum] = Dual._make(x.copy(), plan.seed.reshape(x.shape + (plan.k + 1,)), tag)
        out = lift_object_array(f(*call, **kwargs))
        if isinstance(out, Dual) and out.tag is tag:
            size = int(np.size(out.value))
            p = np.asarray(out.partials).reshape(size, plan.k + 1)
        elif isinstance(out, (tuple, list, dict)) or out is None:
            raise TypeError(
                f"sparse_jacobian: the function returned {type(out).__name__}; it must return "
                f"one array computed from its argument."
            )
        else:
            size = int(np.size(out))
            p = np.zeros((size, plan.k + 1))
        if size != m:
            raise ShapeError(
                f"sparse_jacobian: sparsity= has shape {plan.pattern.shape} but the Jacobian "
                f"has shape {(size, n)} (outputs x inputs); pass a pattern of shape "
                f"{(size, n)}, e.g. ad.jacobian_sparsity(f)(x)."
            )
        return p

    def evaluate_bidirectional(plan: _JacobianPlan, x: np.ndarray, call: list,
                               kwargs: dict) -> tuple[Any, bool]:
        m, n = plan.pattern.shape
        p = forward_pass(plan, x, call, kwargs)
        kr = plan.rseed.shape[1]
        if kr:
            def of_x(v: Any) -> Any:
                call[argnum] = v
                return f(*call, **kwargs)

            out, pullback = vjp(of_x, x)
            back = _pullbacks(pullback, plan.rseed, shape_of(out), n)
        else:
            back = np.zeros((0, n))
        flat = np.concatenate([p[:, :plan.k].reshape(-1), back.reshape(-1)])
        data = flat[plan.take]
        jac = plan.template.with_data(data)
        return jac, _check(p[:, plan.k], data, plan.rows, plan.cols, plan.seed[:, plan.k], m)

    jacobian = functools.wraps(f)(_checked_calls(
        "sparse_jacobian", "Jacobian", "jacobian", argnum, given, plan_for, detect, evaluate,
        input_size=lambda pattern: pattern.shape[1],
        shape_error=lambda given, x: (
            f"sparse_jacobian: sparsity= has shape {given.shape} but the input has "
            f"{x.size} entries (shape {x.shape}); the pattern must have shape "
            f"(out.size, {x.size})."),
    ))

    return mark_transform(jacobian, "sparse_jacobian", f, argnum,
                          lambda g, **o: sparse_jacobian(g, argnum, **{
                              "sparsity": sparsity, "mode": mode, **o}),
                          sparsity=given, detect=detect, color=color_columns)


class _HessianPlan:
    """A symmetric pattern, its star colouring and where each nonzero is read."""

    __slots__ = ("pattern", "colors", "k", "seed", "take", "indptr", "indices", "given", "rows")

    def __init__(self, pattern: Any, given: bool) -> None:
        n = pattern.shape[0]
        self.given = given
        self.colors = best_colors(color_symmetric, pattern) if n else np.zeros(0, np.int64)
        self.k = int(self.colors.max()) + 1 if n else 0
        ptr, idx, read_row, read_color, ok = star_recovery(pattern, self.colors)
        if not ok.all():  # pragma: no cover - the star colouring guarantees recovery
            raise DualadError("sparse_hessian: the colouring allows no direct recovery.")
        self.pattern = pattern
        self.indptr, self.indices = ptr, idx
        self.rows = np.repeat(np.arange(n, dtype=np.intp), np.diff(ptr))
        self.take = read_row * (self.k + 1) + read_color
        self.seed = seed_matrix(n, self.colors, self.k, np.random.default_rng(0x5EED))


def sparse_hessian(f: Callable[..., Any], argnums: int = 0, *,
                   sparsity: Any = None, strict: bool = False,
                   allocations: str = "promote") -> Callable[..., Any]:
    """A function returning the Hessian of a scalar ``f`` as a symmetric
    ``scipy.sparse.csr_array`` of shape ``(in.size, in.size)``.

    The pattern (``sparsity`` or detected at the first call) is star-coloured once; each
    call is one forward-over-reverse pass with one direction per colour, checked as in
    :func:`sparse_jacobian`. The diagonal is always stored.

    Example:
        >>> import numpy as np
        >>> hess = sparse_hessian(lambda x: np.sum(x[1:] * x[:-1] ** 2))
        >>> hess(np.array([1.0, 2.0, 3.0])).toarray()
        array([[4., 2., 0.],
               [2., 6., 4.],
               [0., 4., 0.]])
    """
    f = allocation_policy(f, allocations, "sparse_hessian")
    if not isinstance(argnums, (int, np.integer)) or isinstance(argnums, bool):
        raise TypeError(f"sparse_hessian: argnums must be one int, got {argnums!r}.")
    # an @njit function: its Python source runs on dual numbers over graph nodes (there is
    # no compiled second-order driver)
    f = python_version(f)
    argnum = int(argnums)
    given = None if sparsity is None else pattern_csr(sparsity, None, "sparse_hessian")
    if given is not None and given.shape[0] != given.shape[1]:
        raise ShapeError(f"sparse_hessian: sparsity= must be square, got shape {given.shape}.")
    detect = hessian_sparsity(f, argnum, strict=strict)
    gradient = grad(f, argnum)

    def evaluate(plan: _HessianPlan, x: np.ndarray, args: tuple, kwargs: dict
                 ) -> tuple[Any, bool]:
        import scipy.sparse as sp

        n = x.size
        call = list(args)
        tag = Tag()
        call[argnum] = Dual._make(x.copy(), plan.seed.reshape(x.shape + (plan.k + 1,)), tag)
        g = gradient(*call, **kwargs)
        if isinstance(g, Dual) and g.tag is tag:
            b = np.asarray(g.partials).reshape(n, plan.k + 1)
        else:
            b = np.zeros((n, plan.k + 1))
        data = b.reshape(-1)[plan.take]
        hess = sp.csr_array((data, plan.indices, plan.indptr), shape=(n, n))
        return hess, _check(b[:, plan.k], data, plan.rows, plan.indices, plan.seed[:, plan.k], n)

    hessian = functools.wraps(f)(_checked_calls(
        "sparse_hessian", "Hessian", "hessian", argnum, given, _HessianPlan, detect, evaluate,
        input_size=lambda pattern: pattern.shape[0],
        shape_error=lambda given, x: (
            f"sparse_hessian: sparsity= has shape {given.shape} but the input has "
            f"{x.size} entries; the Hessian has shape ({x.size}, {x.size})."),
    ))

    return hessian


def _checked_calls(name: str, what: str, dense: str, argnum: int, given: Any,
                   new_plan: Callable[[Any, bool], Any], detect: Callable[..., Any],
                   evaluate: Callable[..., tuple[Any, bool]], *,
                   input_size: Callable[[Any], int],
                   shape_error: Callable[[Any, np.ndarray], str]) -> Callable[..., Any]:
    """The calls of a sparse transform: a plan for the pattern given (or detected at the
    first call), each result checked along a random direction by ``evaluate``; a failed
    check warns once, detects again at this point and plans for the union of both
    patterns (so alternating branches settle after one re-detection each)."""
    lock = threading.Lock()
    state: dict[str, Any] = {"plan": None, "warned": False}

    def call(*args: Any, **kwargs: Any) -> Any:
        if not -len(args) <= argnum < len(args):
            raise TypeError(
                f"{name}: argnums={argnum} but the function was called with "
                f"{len(args)} positional argument(s)."
            )
        x = np.asarray(args[argnum], dtype=np.float64)
        plan = state["plan"]
        if plan is None or input_size(plan.pattern) != x.size:
            if given is not None:
                if input_size(given) != x.size:
                    raise ShapeError(shape_error(given, x))
                plan = new_plan(given, True)
            else:
                plan = new_plan(detect(*args, **kwargs), False)
        result, ok = evaluate(plan, x, args, kwargs)
        if not ok:
            source = "the sparsity= given" if plan.given else "the sparsity pattern detected earlier"
            with lock:
                if not state["warned"]:
                    state["warned"] = True
                    warnings.warn(
                        f"{name}: {source} misses nonzeros of the {what} at this point (a "
                        f"Python branch on a value, or a wrong pattern); detecting it again "
                        f"here. The result is correct; pass a global pattern with sparsity= "
                        f"(or use np.where instead of if) to avoid this.",
                        SparsityChangedWarning, stacklevel=2,
                    )
            fresh = (detect(*args, **kwargs) + plan.pattern).tocsr()
            plan = new_plan(pattern_csr(fresh, None, name), False)
            result, ok = evaluate(plan, x, args, kwargs)
            if not ok:
                raise DualadError(
                    f"{name}: the pattern detected at this point does not cover the {what}; a "
                    f"numpy function's flow declaration is wrong. Use ad.{dense}(f) and "
                    f"report the function."
                )
        state["plan"] = plan
        return result

    return call
