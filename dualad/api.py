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
from .core.allocations import allocation_policy
from .core.arguments import Argnums, AuxOutput, guard_opaque_calls, normalize_argnums
from .core.array_protocol import shape_of
from .core.errors import ShapeError
from .core.marks import mark_transform
from .core.tracing import Traced, pause_recording
from .core.trees import tree_flatten, tree_unflatten
from .forward_mode.transforms import jacobian_forward, jvp
from .reverse_mode.transforms import check_complex_inputs, grad, jacobian_reverse, named_grad

__all__ = ["hessian", "hvp", "jacobian"]

MODES = ("auto", "forward", "reverse")


def jacobian(f: Callable[..., Any], argnums: Argnums = 0, *, mode: str = "auto",
             chunk: int | None = None, has_aux: bool = False,
             holomorphic: bool = False,
             allocations: str = "promote") -> Callable[..., Any]:
    """The Jacobian of ``f``, shaped ``out.shape + in.shape``.

    ``mode`` is ``"forward"`` (dual numbers, ``chunk`` directions per pass), ``"reverse"``,
    or ``"auto"`` (forward when the input is not larger than the output; the output's size
    is found by one plain call of ``f`` the first time the function sees arguments of a
    given signature, and the choice is remembered for it, see :func:`_signature`). With
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
    f = allocation_policy(f, allocations, "jacobian")
    if _njit.is_njit(f) and not has_aux:  # a numba.njit function: compiled dual numbers
        return _njit.jacobian(f, argnums, chunk=chunk)
    if mode not in MODES:
        raise ValueError(f"jacobian: mode={mode!r}; use 'forward', 'reverse' or 'auto'.")
    if chunk is not None and (not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ValueError(f"jacobian: chunk={chunk!r}; give a positive int or None.")
    fname = f"jacobian({getattr(f, '__name__', 'f')})"
    guarded = guard_opaque_calls(f, fname)
    chosen_modes: dict[Any, str] = {}  # mode="auto": argument signature -> mode

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums, single = normalize_argnums(argnums, len(args), fname)
        if holomorphic or not _plain_real(args, nums):  # trees, complex or traced inputs
            if not holomorphic and _complex_leaves(args, nums):
                options = {"mode": mode, "chunk": chunk, "has_aux": has_aux}
                return _jacobian_of_complex_inputs(f, argnums, args, kwargs, nums, single,
                                                   options, fname)
            check_complex_inputs(args, nums, holomorphic, fname)
        call = AuxOutput(guarded, fname) if has_aux else guarded
        chosen = "reverse" if holomorphic else mode
        if chosen == "auto":
            key = _signature(nums, args, kwargs)
            chosen = chosen_modes.get(key)  # type: ignore[assignment]
            if chosen is None:
                chosen = _auto_mode(call, nums, args, kwargs)
                if len(chosen_modes) >= _REMEMBERED_SIGNATURES:
                    chosen_modes.clear()
                chosen_modes[key] = chosen
        if chosen == "forward":
            results = jacobian_forward(call, nums, args, kwargs, chunk, fname)
        else:
            results = jacobian_reverse(call, nums, args, kwargs, fname, holomorphic)
        jac = results[0] if single else tuple(results)
        return (jac, call.aux()) if has_aux else jac

    return mark_transform(wrapped, "jacobian", f, argnums,
                          lambda g, **o: jacobian(g, argnums, **{
                              "mode": mode, "chunk": chunk, "has_aux": has_aux,
                              "holomorphic": holomorphic, **o}),
                          mode=mode, chunk=chunk, has_aux=has_aux, holomorphic=holomorphic)


def _plain_real(args: tuple, nums: tuple[int, ...]) -> bool:
    """Whether every differentiated argument is one float64 array or a float (the common
    case: no tree to flatten, nothing complex)."""
    for i in nums:
        x = args[i]
        t = type(x)
        if not (t is np.ndarray and x.dtype == np.float64 or t is float or t is np.float64):
            return False
    return True


def _complex_leaves(args: tuple, nums: tuple[int, ...]) -> bool:
    return any(not isinstance(leaf, Traced) and np.iscomplexobj(leaf)
               for i in nums for leaf in tree_flatten(args[i])[0])


def _jacobian_of_complex_inputs(f: Callable[..., Any], argnums: Argnums, args: tuple,
                                kwargs: dict, nums: tuple[int, ...], single: bool,
                                options: dict, fname: str) -> Any:
    """The Jacobian of a real-valued ``f`` w.r.t. complex inputs, in JAX's convention for
    gradients (``jax.jacrev``): ``df/dx - i df/dy`` for ``z = x + i y``, each row the
    ``ad.grad`` of that output. Each complex leaf enters as the real pair ``(x, y)`` (a
    leading axis of 2), so both modes apply; the pairs are folded back afterwards."""
    new_args = list(args)
    layout: dict[int, tuple[Any, list[bool], list[int]]] = {}
    for i in nums:
        leaves, spec = tree_flatten(args[i])
        is_c = [bool(np.iscomplexobj(leaf)) for leaf in leaves]
        layout[i] = (spec, is_c, [np.ndim(leaf) for leaf in leaves])
        new_args[i] = tree_unflatten(spec, [np.stack([np.real(leaf), np.imag(leaf)]) if c
                                            else leaf for leaf, c in zip(leaves, is_c)])

    def on_pairs(*real_args: Any, **kw: Any) -> Any:
        full = list(real_args)
        for i, (spec, is_c, _) in layout.items():
            leaves, _ = tree_flatten(real_args[i])
            full[i] = tree_unflatten(spec, [leaf[0] + 1j * leaf[1] if c else leaf
                                            for leaf, c in zip(leaves, is_c)])
        return f(*full, **kw)

    on_pairs.__name__ = getattr(f, "__name__", "f")
    result = jacobian(on_pairs, argnums, **options)(*new_args, **kwargs)
    jac, aux = result if options.get("has_aux") else (result, None)
    blocks = (jac,) if single else tuple(jac)
    folded = []
    for i, block in zip(nums, blocks):
        _, is_c, in_ndims = layout[i]
        leaves, out_spec = tree_flatten(block)
        new_leaves = []
        for index, leaf in enumerate(leaves):
            k = index % len(is_c)
            if is_c[k]:
                if np.iscomplexobj(leaf):
                    raise TypeError(
                        f"{fname}: the input and the output are complex; pass "
                        f"holomorphic=True for a complex-differentiable f (the result is "
                        f"df/dz), or differentiate the real and imaginary parts of the "
                        f"output separately (ad.vjp / ad.jvp take complex values directly)."
                    )
                pair_axis = np.ndim(leaf) - 1 - in_ndims[k]  # output axes, then (2,) + input
                leaf = np.take(leaf, 0, axis=pair_axis) - 1j * np.take(leaf, 1, axis=pair_axis)
            new_leaves.append(leaf)
        folded.append(tree_unflatten(out_spec, new_leaves))
    jac = folded[0] if single else tuple(folded)
    return (jac, aux) if options.get("has_aux") else jac


#: How many argument signatures one ``jacobian(f, mode="auto")`` remembers its choice for.
_REMEMBERED_SIGNATURES = 64
_NUMBER_TYPES = frozenset((float, complex, np.float64, np.complex128))


def _signature(nums: tuple[int, ...], args: tuple, kwargs: dict) -> Any:
    """What ``mode="auto"`` remembers its choice for: the differentiated argument numbers,
    the shape and dtype of each array among the arguments (and keyword arguments, and the
    leaves of trees), the type of each float, and anything else itself when hashable (an
    int may set a size), else its type.

    Example:
        >>> _signature((0,), (np.ones(3), 2.5, 4), {})
        ((0,), ((3,), 'd'), <class 'float'>, 4)
    """
    parts: list[Any] = [nums]
    for a in (*args, *kwargs.items()) if kwargs else args:
        t = type(a)
        if t is np.ndarray:
            parts.append((a.shape, a.dtype.char))
        elif t in _NUMBER_TYPES:
            parts.append(t)
        else:
            leaves, spec = tree_flatten(a)
            if len(leaves) == 1 and leaves[0] is a:
                parts.append(_leaf_signature(a))
            else:
                parts.append((repr(spec), tuple(_leaf_signature(leaf) for leaf in leaves)))
    return tuple(parts)


def _leaf_signature(a: Any) -> Any:
    if isinstance(a, Traced) or isinstance(a, np.ndarray):
        return (shape_of(a), str(getattr(a, "dtype", "")), type(a))
    t = type(a)
    if t in _NUMBER_TYPES:
        return t
    try:
        hash(a)
    except TypeError:
        return t
    return a


def _auto_mode(f: Callable[..., Any], nums: tuple[int, ...], args: tuple, kwargs: dict) -> str:
    """Forward when the differentiated input is not larger than the output."""
    n_in = sum(int(np.size(leaf)) if not isinstance(leaf, Traced) else leaf.size
               for i in nums for leaf in tree_flatten(args[i])[0])
    with pause_recording():
        out = f(*args, **kwargs)
    n_out = sum(int(np.size(leaf)) if not isinstance(leaf, Traced) else leaf.size
                for leaf in tree_flatten(out)[0])
    return "forward" if n_in <= n_out else "reverse"


def hessian(f: Callable[..., Any], argnums: Argnums = 0, *,
            holomorphic: bool = False,
            allocations: str = "promote") -> Callable[..., Any]:
    """The Hessian of a scalar-valued ``f``, shaped ``in.shape + in.shape``.

    Computed as forward over reverse (a forward-mode Jacobian of the gradient). With
    ``holomorphic=True`` (complex inputs, ``f`` complex-differentiable) it is ``f''(z)``,
    reverse over reverse. A real-valued ``f`` of complex inputs has no single complex
    Hessian (it takes the four real blocks): differentiate ``f(x + 1j * y)`` with respect
    to the real and imaginary parts instead (a clear ``TypeError`` says so).

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.hessian(lambda x, y: x * y ** 2, argnums=1)(2.0, 3.0)
        array(4.)
        >>> ad.hessian(lambda z: z ** 3, holomorphic=True)(1.0 + 1.0j)
        array(6.+6.j)
    """
    f = allocation_policy(f, allocations, "hessian")
    fname = f"hessian({getattr(f, '__name__', 'f')})"
    if holomorphic:
        inner = grad(f, argnums, holomorphic=True)
        return jacobian(inner, argnums, mode="reverse", holomorphic=True)
    inner_grad = named_grad(f, argnums, fname, "hessian")
    outer = jacobian(inner_grad, argnums, mode="forward")

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums, _ = normalize_argnums(argnums, len(args), fname)
        if _complex_leaves(args, nums):
            raise TypeError(
                f"{fname}: the input is complex. A real-valued f of complex z has no single "
                f"complex Hessian (it takes the four real blocks d2f/dx2, d2f/dxdy, ...): "
                f"differentiate with respect to the real and imaginary parts, "
                f"ad.hessian(lambda v: f(v[0] + 1j * v[1]))(np.stack([z.real, z.imag])); for "
                f"a complex-differentiable f pass holomorphic=True."
            )
        return outer(*args, **kwargs)

    # ad.jit compiles the whole (recorded forward over reverse) and hands the blocks back
    # in the dtypes eager mode gives them (a float32 argument's rows: float32)
    return mark_transform(wrapped, "hessian", f, argnums,
                          lambda g, **o: hessian(g, argnums, **{"allocations": allocations,
                                                                **o}))


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
