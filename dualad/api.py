"""Transforms that combine the modes: the Jacobian (forward, reverse or automatic), the
Hessian and Hessian-vector products (forward over reverse).

Example:
    >>> import numpy as np, dualad as ad
    >>> ad.jacobian(lambda x: x ** 2, mode="reverse")(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    >>> ad.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import njit as _njit
from .core.arguments import Argnums, AuxOutput, guard_opaque_calls, normalize_argnums
from .core.array_protocol import shape_of
from .core.errors import ShapeError
from .core.tracing import Traced, pause_recording
from .core.trees import tree_flatten
from .forward_mode.transforms import jacobian_forward, jvp
from .reverse_mode.transforms import check_complex_inputs, grad, jacobian_reverse, named_grad

__all__ = ["hessian", "hvp", "jacobian"]

MODES = ("auto", "forward", "reverse")


def jacobian(f: Callable[..., Any], argnums: Argnums = 0, *, mode: str = "auto",
             chunk: int | None = None, has_aux: bool = False,
             holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f``, shaped ``out.shape + in.shape``.

    ``mode`` is ``"forward"`` (dual numbers, ``chunk`` directions per pass), ``"reverse"``,
    or ``"auto"`` (forward when the input is not larger than the output). With
    ``has_aux=True``, ``f`` returns ``(output, aux)`` and the function returns
    ``(jacobian, aux)``. Complex inputs need ``holomorphic=True`` (``f``
    complex-differentiable; the result is ``df/dz``, computed in reverse mode); complex
    outputs of real inputs are fine in both modes.

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.jacobian(lambda x: np.sin(x) * x[0], mode="forward")(np.array([1.0, 2.0]))
        array([[ 1.38177329,  0.        ],
               [ 0.90929743, -0.41614684]])
    """
    if _njit.is_njit(f) and not has_aux:  # a numba.njit function: compiled dual numbers
        return _njit.jacobian(f, argnums, chunk=chunk)
    if mode not in MODES:
        raise ValueError(f"jacobian: mode={mode!r}; use 'forward', 'reverse' or 'auto'.")
    if chunk is not None and (not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ValueError(f"jacobian: chunk={chunk!r}; give a positive int or None.")
    fname = f"jacobian({getattr(f, '__name__', 'f')})"
    guarded = guard_opaque_calls(f, fname)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums, single = normalize_argnums(argnums, len(args), fname)
        check_complex_inputs(args, nums, holomorphic, fname)
        call = AuxOutput(guarded, fname) if has_aux else guarded
        chosen = "reverse" if holomorphic else mode
        if chosen == "auto":
            chosen = _auto_mode(call, nums, args, kwargs)
        if chosen == "forward":
            results = jacobian_forward(call, nums, args, kwargs, chunk, fname)
        else:
            results = jacobian_reverse(call, nums, args, kwargs, fname, holomorphic)
        jac = results[0] if single else tuple(results)
        return (jac, call.aux()) if has_aux else jac

    return wrapped


def _auto_mode(f: Callable[..., Any], nums: tuple[int, ...], args: tuple, kwargs: dict) -> str:
    """Forward when the differentiated input is not larger than the output."""
    n_in = sum(int(np.size(leaf)) if not isinstance(leaf, Traced) else leaf.size
               for i in nums for leaf in tree_flatten(args[i])[0])
    with pause_recording():
        out = f(*args, **kwargs)
    n_out = sum(int(np.size(leaf)) if not isinstance(leaf, Traced) else leaf.size
                for leaf in tree_flatten(out)[0])
    return "forward" if n_in <= n_out else "reverse"


def hessian(f: Callable[..., Any], argnums: Argnums = 0) -> Callable[..., Any]:
    """The Hessian of a scalar-valued ``f``, shaped ``in.shape + in.shape``.

    Computed as forward over reverse (a forward-mode Jacobian of the gradient).

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.hessian(lambda x, y: x * y ** 2, argnums=1)(2.0, 3.0)
        array(4.)
    """
    fname = f"hessian({getattr(f, '__name__', 'f')})"
    return jacobian(named_grad(f, argnums, fname, "hessian"), argnums, mode="forward")


def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """The Hessian of the scalar-valued ``f`` at ``x`` applied to ``v``, shaped like ``x``.

    Forward over reverse: the gradient is computed in reverse mode on dual numbers that
    carry the one direction ``v``; the tangent of that gradient is ``H @ v``. The Hessian is
    never formed. ``x`` and ``v`` are arrays (or numbers) of one shape, or trees of the same
    structure.

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.hvp(lambda x: np.sum(x ** 3), np.array([1.0, 2.0]), np.array([1.0, 1.0]))
        array([ 6., 12.])
    """
    name = getattr(f, "__name__", "f")
    x_leaves, x_spec = tree_flatten(x)
    v_leaves, v_spec = tree_flatten(v)
    if repr(x_spec) != repr(v_spec) or len(x_leaves) != len(v_leaves):
        raise ShapeError(
            f"hvp({name}): v must have the structure of x; got {len(v_leaves)} leaves for "
            f"{len(x_leaves)}.")
    for a, b in zip(x_leaves, v_leaves):
        if shape_of(a) != shape_of(b):
            raise ShapeError(
                f"hvp({name}): v has shape {shape_of(b)} where x has shape {shape_of(a)}; "
                f"pass a direction shaped like x.")
    v = v if isinstance(v, Traced) or not isinstance(v, (int, float, np.ndarray, np.generic)) \
        else np.asarray(v, dtype=np.float64)
    _, tangent = jvp(grad(f), (x,), (v,))
    return tangent


def __dir__() -> list[str]:
    """This module's face: its transforms."""
    return sorted(__all__)
