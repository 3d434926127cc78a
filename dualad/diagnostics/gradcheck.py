"""Checking derivatives against central finite differences (and the modes against each other).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.gradcheck(lambda x: np.sin(x) * x, np.array([0.5, 1.5]))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..api import jacobian
from ..core.arguments import as_differentiable
from ..core.errors import GradcheckError

__all__ = ["gradcheck", "numerical_jacobian"]


def numerical_jacobian(f: Callable[..., Any], args: Sequence[Any], argnum: int,
                       eps: float | None = None) -> np.ndarray:
    """Central finite-difference Jacobian of ``f`` w.r.t. ``args[argnum]``: ``out.shape + in.shape``."""
    args = list(args)
    x = np.array(as_differentiable(args[argnum]), dtype=np.float64)
    flat = x.reshape(-1)
    columns = []
    out_shape: tuple[int, ...] = ()
    for i in range(flat.size):
        h = eps if eps is not None else 6e-6 * max(1.0, abs(flat[i]))
        plus, minus = flat.copy(), flat.copy()
        plus[i] += h
        minus[i] -= h
        args[argnum] = plus.reshape(x.shape)
        f_plus = np.asarray(f(*args), dtype=np.float64)
        args[argnum] = minus.reshape(x.shape)
        f_minus = np.asarray(f(*args), dtype=np.float64)
        out_shape = f_plus.shape
        columns.append(((f_plus - f_minus) / (2 * h)).reshape(-1))
    if not columns:
        out_shape = np.shape(f(*args))
        return np.zeros(out_shape + x.shape)
    return np.stack(columns, axis=-1).reshape(out_shape + x.shape)


def _compare(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray, argnum: int,
             atol: float, rtol: float) -> None:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise GradcheckError(
            f"gradcheck: the {name_a} Jacobian w.r.t. argument {argnum} has shape {a.shape} "
            f"but the {name_b} one has shape {b.shape}."
        )
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    err = np.where(both_nan | same_inf, 0.0, np.abs(a - b) - (atol + rtol * np.abs(b)))
    err = np.where(np.isnan(err), np.inf, err)
    if err.size and np.max(err) > 0:
        where = np.unravel_index(int(np.argmax(err)), err.shape)
        raise GradcheckError(
            f"gradcheck: {name_a} and {name_b} Jacobians w.r.t. argument {argnum} differ; "
            f"largest discrepancy {float(np.abs(a - b)[where]):.3e} at index {where}: "
            f"{name_a} = {a[where]!r}, {name_b} = {b[where]!r} "
            f"(atol={atol}, rtol={rtol})."
        )


def gradcheck(f: Callable[..., Any], *args: Any, modes: Sequence[str] = ("forward", "reverse"),
              eps: float | None = None, atol: float = 1e-6, rtol: float = 1e-5) -> bool:
    """Check ``f``'s Jacobians w.r.t. every positional argument in each mode.

    Each mode's Jacobian is compared with central finite differences and with the other
    modes. Returns ``True`` or raises :class:`~dualad.GradcheckError` naming the largest
    discrepancy, where it is, and both Jacobians' entries there.
    """
    for mode in modes:
        if mode not in ("forward", "reverse"):
            raise ValueError(f"gradcheck: unknown mode {mode!r}; use 'forward' and/or 'reverse'.")
    for argnum in range(len(args)):
        numeric = numerical_jacobian(f, args, argnum, eps)
        previous: tuple[str, np.ndarray] | None = None
        for mode in modes:
            exact = np.asarray(jacobian(f, argnum, mode=mode)(*args))
            _compare(mode, exact, "finite-difference", numeric, argnum, atol, rtol)
            if previous is not None:
                _compare(mode, exact, previous[0], previous[1], argnum, atol, rtol)
            previous = (mode, exact)
    return True
