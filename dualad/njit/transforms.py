"""``jacobian``, ``jvp``, ``derivative`` and ``ode_jacobian`` of ``@numba.njit`` functions.

The public transforms route a Numba dispatcher here. Differentiated arguments become dual
numbers inside a compiled driver (:mod:`dualad.njit.drivers`), which calls a dual copy of
the user's function; other arguments pass through unchanged. Results are plain numpy
arrays, shaped as the numpy-mode transforms shape them.

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def cube(x):
    ...     out = np.empty_like(x)
    ...     for i in range(x.shape[0]):
    ...         out[i] = x[i] ** 3
    ...     return out
    >>> njit_jacobian(cube)(np.array([1.0, 2.0]))
    array([[ 3.,  0.],
           [ 0., 12.]])
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba.core.errors import NumbaError

from ..core.errors import ShapeError
from ..core.tracing import Traced
from .drivers import driver, translate_error
from .outputs import decode_layout
from .rule_overloads import rule_fingerprint

__all__ = ["MAX_WIDTH", "choose_width", "njit_derivative", "njit_jacobian", "njit_jvp",
           "njit_ode_jacobian"]

#: Directions carried per pass of the compiled Jacobian. Wider tuples of partials take
#: longer to compile (about 0.8 s at 16, 14 s at 100) for little gain in speed.
MAX_WIDTH = 8


def choose_width(n: int, chunk: int | None = None) -> int:
    """Directions per pass: ``chunk`` if given, else the power of two ``>= n`` up to
    :data:`MAX_WIDTH` (few distinct widths, so few compilations).

    Example:
        >>> choose_width(3), choose_width(5), choose_width(1000), choose_width(1000, 4)
        (4, 8, 8, 4)
    """
    if chunk is not None:
        return max(1, min(int(chunk), max(n, 1)))
    width = 1
    while width < min(n, MAX_WIDTH):
        width *= 2
    return width


def _name(f: Any, transform: str) -> str:
    return f"{transform}({getattr(getattr(f, 'py_func', f), '__name__', 'f')})"


def _check_args(args: Sequence[Any], kwargs: dict, fname: str) -> None:
    if kwargs:
        raise TypeError(
            f"{fname}: keyword arguments {sorted(kwargs)} are not supported for @njit "
            f"functions; pass them positionally."
        )
    for a in args:
        if isinstance(a, Traced):
            raise TypeError(
                f"{fname}: an argument is a dualad {type(a).__name__} (a traced value from "
                f"an outer transform); transforms of @njit functions do not nest. Apply "
                f"the transform to the @njit function directly."
            )


def _seed(x: Any, what: str) -> tuple[str, Any, tuple[int, ...]]:
    """``(kind, value, shape)`` of a differentiated argument: a float or a C array."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.ndim and x.flags.c_contiguous:
        return "array", x, x.shape
    if isinstance(x, (bool, int, float, np.number)) and not isinstance(x, complex):
        if isinstance(x, np.complexfloating):
            raise TypeError(f"{what} is complex; @njit functions are differentiated for "
                            f"real inputs only.")
        return "scalar", float(x), ()
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{what} has dtype {arr.dtype}; differentiate float (or integer) numbers and "
            f"arrays."
        )
    if arr.ndim == 0:
        return "scalar", float(arr), ()
    return "array", np.ascontiguousarray(arr, dtype=np.float64), arr.shape


def _lift(args: list[Any], seeded: Sequence[int]) -> tuple[int, ...]:
    """Make the other float arrays C-contiguous float64 (in place in ``args``); their
    indices: they enter as dual arrays with zero partials (so ``np.zeros_like(p)`` of a
    parameter array can hold values that depend on the differentiated input)."""
    lifted = []
    for k, a in enumerate(args):
        if k not in seeded and isinstance(a, np.ndarray) and a.ndim >= 1 \
                and a.dtype.kind == "f":
            args[k] = np.ascontiguousarray(a, dtype=np.float64)
            lifted.append(k)
    return tuple(lifted)


_LAYOUTS: dict[bytes, Any] = {}


def _tree(code: np.ndarray) -> Any:
    key = code.tobytes()
    tree = _LAYOUTS.get(key)
    if tree is None:
        tree = _LAYOUTS[key] = decode_layout(code)
    return tree


def _unpack(res: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(layout code, values, Jacobian (m, n))`` from a driver's result."""
    length = int(res[0])
    m = (res.size - 1 - length) // (n + 1)
    start = 1 + length
    return res[1:start], res[start:start + m], res[start + m:].reshape(m, n)


def _split(code: np.ndarray, vals: np.ndarray, jac: np.ndarray, in_shape: tuple[int, ...]
           ) -> tuple[Any, Any]:
    """Values and Jacobian blocks, rebuilt into the output's tuple structure."""
    tree = _tree(code)
    if tree[0] == "leaf":
        shape = tree[1]
        return vals.reshape(shape), jac.reshape(shape + in_shape)
    row = 0

    def build(node: Any) -> tuple[Any, Any]:
        nonlocal row
        if node[0] == "leaf":
            shape = node[1]
            size = math.prod(shape)
            v = vals[row: row + size].reshape(shape)
            j = jac[row: row + size].reshape(shape + in_shape)
            row += size
            return v, j
        pairs = [build(child) for child in node[1]]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)

    return build(tree)


def _run(run: Callable[..., Any], call: Sequence[Any], fname: str) -> tuple:
    try:
        return run(*call)
    except NumbaError as exc:
        error = translate_error(exc, fname)
        error.numba_message = str(exc)  # Numba's own report, for debugging
        raise error from None


def _call(args: Sequence[Any], extra: dict[int, list[Any]], lifted: Sequence[int],
          width: int) -> list[Any]:
    """The driver's arguments: each argument, then its ``extra`` buffers, then (for a
    lifted float array) its zero partials."""
    call: list[Any] = []
    for k, a in enumerate(args):
        call.append(a)
        call += extra.get(k, [])
        if k in lifted:
            call.append(np.zeros(a.shape + (width,)))
    return call


def _jacobian_of(f: Any, i: int, args: Sequence[Any], chunk: int | None, fname: str,
                 plans: dict) -> Any:
    kind, x, in_shape = _seed(args[i], f"argument {i} of {fname}")
    values = list(args)
    values[i] = x
    lifted = _lift(values, (i,))
    n = x.size if kind == "array" else 1
    key = (kind, i, n, len(args), lifted, rule_fingerprint())
    plan = plans.get(key)
    if plan is None:
        width = 1 if kind == "scalar" else choose_width(n, chunk)
        run = driver(f, "jacobian", nargs=len(args), seeded=((kind, i),), width=width,
                     lifted=lifted)
        plan = plans[key] = (run, width)
    run, width = plan[0], plan[1]
    if kind == "array":
        seed = np.zeros(x.shape + (width,))
        if lifted:
            call = _call(values, {i: [seed, seed.reshape(n, width)]}, lifted, width)
        else:
            values[i + 1:i + 1] = [seed, seed.reshape(n, width)]
            call = values
    else:
        call = _call(values, {}, lifted, width)
    res = _run(run, call, fname)
    # The common case, one output array of the same size as last time: no decoding.
    last = plan[2] if len(plan) > 2 else None
    if last is not None and res.size == last[0] and res[1:last[1]].tobytes() == last[2]:
        return res[last[3]:].reshape(last[4] + in_shape)
    code, vals, jac = _unpack(res, n)
    tree = _tree(code)
    if tree[0] == "leaf":
        plans[key] = (run, width, (res.size, 1 + code.size, code.tobytes(),
                                   1 + code.size + vals.size, tree[1]))
    return _split(code, vals, jac, in_shape)[1]


def njit_jacobian(f: Any, argnums: int | Sequence[int] = 0, *,
                  chunk: int | None = None) -> Callable[..., Any]:
    """The Jacobian of an ``@njit`` function, shaped ``out.shape + in.shape``.

    ``chunk`` directions are carried per pass (default: up to :data:`MAX_WIDTH`); a tuple
    ``argnums`` gives a tuple of Jacobians, a tuple output a tuple of blocks.
    """
    fname = _name(f, "jacobian")
    if chunk is not None and (not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ValueError(f"{fname}: chunk={chunk!r}; give a positive int or None.")
    plans: dict[tuple, Any] = {}  # the compiled driver and width per kind of call

    @functools.wraps(f.py_func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _check_args(args, kwargs, fname)
        nums = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
        for a in nums:
            if not isinstance(a, (int, np.integer)) or not -len(args) <= a < len(args):
                raise ValueError(
                    f"{fname}: argnums={argnums!r} does not name one of the "
                    f"{len(args)} positional argument(s)."
                )
        results = [_jacobian_of(f, int(a) % len(args), args, chunk, fname, plans)
                   for a in nums]
        return results[0] if isinstance(argnums, (int, np.integer)) else tuple(results)

    return wrapped


def njit_jvp(f: Any, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(f(*primals), J @ tangents)`` of an ``@njit`` function, in one compiled pass."""
    fname = _name(f, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            f"{fname}: primals and tangents must be tuples, e.g. jvp(f, (x,), (v,)); got "
            f"{type(primals).__name__} and {type(tangents).__name__}."
        )
    if len(primals) != len(tangents):
        raise ValueError(
            f"{fname}: {len(primals)} primal(s) but {len(tangents)} tangent(s); pass one "
            f"tangent per primal."
        )
    _check_args(primals, {}, fname)
    seeded, call = [], []
    for k, (p, t) in enumerate(zip(primals, tangents)):
        kind, x, shape = _seed(p, f"primal {k} of {fname}")
        _, tv, tshape = _seed(t, f"tangent {k} of {fname}")
        if tshape != shape:
            raise ShapeError(
                f"{fname}: tangent {k} has shape {tshape} but its primal has shape {shape}; "
                f"tangents are shaped like primals."
            )
        seeded.append((kind, k))
        call += [x, tv if kind == "scalar" else tv.reshape(shape + (1,))]
    run = driver(f, "jvp", nargs=len(primals), seeded=tuple(seeded), width=1)
    code, vals, jac = _unpack(_run(run, call, fname), 1)
    return _split(code, vals, jac[:, 0], ())


def njit_derivative(f: Any) -> Callable[..., Any]:
    """``df/dx`` of an ``@njit`` function of a scalar ``x`` (further arguments pass through)."""
    fname = _name(f, "derivative")

    @functools.wraps(f.py_func)
    def wrapped(x: Any, *args: Any, **kwargs: Any) -> Any:
        _check_args((x, *args), kwargs, fname)
        kind, value, shape = _seed(x, f"the argument of {fname}")
        if shape != ():
            raise ValueError(
                f"{fname}: the input has shape {shape}; derivative needs a scalar. Use "
                f"ad.jacobian(f) for array inputs or ad.jvp for a directional derivative."
            )
        rest = list(args)
        lifted = tuple(k + 1 for k in _lift(rest, ()))
        run = driver(f, "jvp", nargs=1 + len(args), seeded=(("scalar", 0),), width=1,
                     lifted=lifted)
        call = [value, 1.0, *_call(rest, {}, tuple(k - 1 for k in lifted), 1)]
        code, vals, jac = _unpack(_run(run, call, fname), 1)
        return _split(code, vals, jac[:, 0], ())[1]

    return wrapped


def njit_ode_jacobian(f: Any, *, chunk: int | None = None) -> Callable[..., np.ndarray]:
    """``jac(t, y, *args)`` for ``solve_ivp``: the ``(n, n)`` Jacobian of ``f(t, y, *args)``."""
    jac_y = njit_jacobian(f, 1, chunk=chunk)

    @functools.wraps(f.py_func)
    def jac(t: Any, y: Any, *args: Any) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        result = np.asarray(jac_y(float(t), y, *args))
        n = y.size
        return result.reshape(result.size // max(n, 1), n) if result.ndim != 2 else result

    return jac
