"""Differentiating ``@numba.njit`` functions as they are: dual numbers in nopython mode.

``ad.jacobian``, ``ad.jvp``, ``ad.derivative``, ``ad.ode_jacobian``, ``ad.grad`` and
``ad.value_and_grad`` route a Numba dispatcher here. ``grad`` is the Jacobian of a scalar
output, computed in forward mode by the same compiled driver (all input directions in one
call, chunked as ``ad.jacobian``): there is no compiled reverse mode, so its cost grows
with the number of inputs. The user's Python function (and the ``@njit`` helpers it calls) is
compiled again with a dual-number type whose arithmetic and ``math``/``np`` functions are
generated from the rules tables; the whole Jacobian is computed by one compiled driver,
cached on disk. This package imports Numba only when such a function is differentiated.

Inside the function (and the ``@njit`` helpers it calls), values that depend on the
differentiated input are dual numbers. They support arithmetic, comparisons (branches
follow the values), ``abs``/``min``/``max``, the ``math`` and ``np`` scalar functions that
have derivative rules (and functions given one with ``ad.define_rule``), element indexing
``x[i]`` / ``x[i, j]``, ``len``/``.shape``/``.size``, and ``np.empty_like`` /
``np.zeros_like`` / ``np.ones_like`` / ``np.copy`` / ``.copy()`` of such arrays. Arguments
are read-only (copy one before writing into it); a dual written into a plain float array
(``np.empty(n)``) is an error that says to allocate with ``np.empty_like(x)``. Other float
array arguments enter with zero derivatives, so arrays allocated from them may hold
duals. Whole-array expressions on dual arrays (``x * 2``, ``np.sum(x)``) are not
supported: write the loop.

Example:
    >>> import numba, numpy as np, dualad as ad
    >>> @numba.njit
    ... def f(x):
    ...     out = np.empty_like(x)
    ...     for i in range(x.shape[0]):
    ...         out[i] = np.sin(x[i]) * x[0]
    ...     return out
    >>> ad.jacobian(f)(np.array([0.0, 1.0]))
    array([[0.        , 0.        ],
           [0.84147098, 0.        ]])
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["derivative", "grad", "is_njit", "jacobian", "jvp", "ode_jacobian", "value_and_grad"]


def is_njit(f: Any) -> bool:
    """Whether ``f`` is a ``numba.njit`` dispatcher (without importing Numba).

    Example:
        >>> is_njit(len)
        False
    """
    if "numba" not in sys.modules:
        return False
    if "dualad.njit.traced_arguments" not in sys.modules:
        # Numba is in use: make @njit calls on dualad's traced values a clear error.
        importlib.import_module("dualad.njit.traced_arguments")
    registry = sys.modules.get("numba.core.registry")
    return registry is not None and isinstance(f, registry.CPUDispatcher)


def _transforms() -> Any:
    # Imported on first use: it imports Numba, which `import dualad` must not.
    return importlib.import_module("dualad.njit.transforms")


def jacobian(f: Any, argnums: int | Sequence[int] = 0, *,
             chunk: int | None = None) -> Callable[..., Any]:
    """The Jacobian of the ``@njit`` function ``f`` (see ``ad.jacobian``)."""
    return _transforms().njit_jacobian(f, argnums, chunk=chunk)


def value_and_grad(f: Any, argnums: int | Sequence[int] = 0, *,
                   fname: str = "value_and_grad") -> Callable[..., Any]:
    """``(f(*args), gradient)`` of the scalar-valued ``@njit`` function ``f``: its Jacobian
    in compiled forward mode, shaped like the arguments (see ``ad.value_and_grad``)."""
    jac = jacobian(f, argnums)
    single = isinstance(argnums, int)

    def wrapped(*args: Any) -> tuple[Any, Any]:
        value = f(*args)
        if np.size(value) != 1:
            raise ValueError(
                f"{fname}: the @njit function returned shape {np.shape(value)}, but a "
                f"gradient needs a scalar output; use ad.jacobian(f) (compiled too) for "
                f"the whole Jacobian, or reduce the output to a number."
            )
        nums = (argnums,) if single else tuple(argnums)
        blocks = (jac(*args),) if single else jac(*args)
        grads = tuple(np.reshape(b, np.shape(args[i])) for i, b in zip(nums, blocks))
        return value, (grads[0] if single else grads)

    return wrapped


def grad(f: Any, argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The gradient of the scalar-valued ``@njit`` function ``f`` (see ``ad.grad``).

    Example:
        >>> import numba, numpy as np, dualad as ad
        >>> @numba.njit
        ... def energy(x):
        ...     s = 0.0
        ...     for i in range(x.shape[0]):
        ...         s += x[i] ** 2
        ...     return s
        >>> ad.grad(energy)(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    vg = value_and_grad(f, argnums, fname="grad")

    def wrapped(*args: Any) -> Any:
        return vg(*args)[1]

    return wrapped


def jvp(f: Any, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(f(*primals), J @ tangents)`` of the ``@njit`` function ``f`` (see ``ad.jvp``)."""
    return _transforms().njit_jvp(f, primals, tangents)


def derivative(f: Any) -> Callable[..., Any]:
    """``df/dx`` of the ``@njit`` function ``f`` of a scalar (see ``ad.derivative``)."""
    return _transforms().njit_derivative(f)


def ode_jacobian(f: Any, *, chunk: int | None = None) -> Callable[..., Any]:
    """``jac(t, y, *args)`` of the ``@njit`` right-hand side ``f`` (see ``ad.ode_jacobian``)."""
    return _transforms().njit_ode_jacobian(f, chunk=chunk)
