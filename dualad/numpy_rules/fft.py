"""Rules for ``np.fft``: fft, ifft, rfft, irfft, their 2-D and n-D forms, hfft, ihfft,
fftshift and ifftshift, with ``n`` / ``s``, ``axis`` / ``axes`` and ``norm``.

Every transform is linear, so its tangent is the transform of the partials and its
gradient the transpose (JAX's convention for complex values, see
:mod:`dualad.numpy_rules.complex_parts`): the DFT matrix is symmetric, so ``fft``'s
gradient is ``fft`` of the cotangent (same ``norm``), cropped or zero-padded back to the
input's length where ``n`` resized it. ``rfft``'s gradient is an ``irfft`` of the cotangent;
``irfft`` reads a Hermitian spectrum, so its gradient weighs each frequency by how often it
appears in the full spectrum (twice, except the zero and Nyquist frequencies) and ignores the
imaginary parts numpy ignores. The n-D real transforms, ``fft2`` / ``rfft2`` / ``irfft2``,
``hfft`` and ``ihfft`` are compositions of these, as in numpy itself.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = np.array([1.0, 2.0, 0.5, -1.0])
    >>> ad.grad(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2))(x)
    array([ 7., 10.,  5., -2.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..extend import (
    Dual,
    declare_dense,
    declare_index_map,
    shape_of,
)
from ._signatures import bind
from ._support import (
    composite_rules,
    gradient_rule,
    ndim_of,
    normalize_axis,
    tangent_rule,
)
from .shapes import index_map_rules

__all__: list[str] = []

_fft = np.fft


def _resize(a: Any, size: int, axis: int) -> Any:
    """``a`` cropped or zero-padded to ``size`` entries along ``axis`` (at the end)."""
    shape = shape_of(a)
    m = shape[axis]
    if m == size:
        return a
    if m > size:
        index = [slice(None)] * len(shape)
        index[axis] = slice(0, size)
        return a[tuple(index)]
    pad_shape = list(shape)
    pad_shape[axis] = size - m
    zeros = np.zeros(tuple(pad_shape), dtype=np.result_type(getattr(a, "dtype", float)))
    return np.concatenate([a, zeros], axis=axis)


def _resize_axes(a: Any, sizes: Any, axes: tuple[int, ...]) -> Any:
    for size, axis in zip(sizes, axes):
        a = _resize(a, size, axis)
    return a


def _swap_direction(norm: Any) -> Any:
    return {None: "forward", "backward": "forward", "ortho": "ortho",
            "forward": "backward"}[norm]


# -- one axis: fft, ifft, rfft, irfft ---------------------------------------------------------

_ONE_AXIS = ("n", "axis", "norm")


def _one_axis(a: Any, args: tuple, kwargs: dict, name: str) -> tuple[Any, int, Any]:
    p = bind(_ONE_AXIS, args, kwargs)
    axis = normalize_axis(p.get("axis", -1), ndim_of(a), f"np.fft.{name}")
    return p.get("n"), axis, p.get("norm")


def _complex_rules(func: Any) -> None:
    """``fft`` / ``ifft``: the DFT matrix is symmetric, so the transpose is ``func`` itself."""
    name = func.__name__

    def grad_impl(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
        _, axis, norm = _one_axis(a, args, kwargs, name)
        g = _resize(func(grad, None, axis, norm), shape_of(a)[axis], axis)
        return (g,) + (None,) * len(args)

    def tangent_impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        n, axis, norm = _one_axis(a.value, args, kwargs, name)
        return Dual._make(func(a.value, n, axis, norm), func(a.partials, n, axis, norm), a.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{name}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func)(tangent_impl)


_complex_rules(_fft.fft)
_complex_rules(_fft.ifft)


@gradient_rule(_fft.rfft)
def _rfft(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    n, axis, norm = _one_axis(a, args, kwargs, "rfft")
    m = shape_of(a)[axis]
    n = m if n is None else int(n)
    # Re(sum_k g_k w^-jk) over the half spectrum, as an irfft of conj(g) / c (c: the
    # Hermitian weights irfft applies), with the scaling of the opposite norm
    half = np.conjugate(grad) / _hermitian_weights(n, axis, ndim_of(a))
    g = _fft.irfft(half, n, axis, _swap_direction(norm))
    return (_resize(g, m, axis),) + (None,) * len(args)


@tangent_rule(_fft.rfft)
def _rfft_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    n, axis, norm = _one_axis(a.value, args, kwargs, "rfft")
    value = _fft.rfft(a.value, n, axis, norm)
    return Dual._make(value, _fft.rfft(np.real(a.partials), n, axis, norm), a.tag)


def _hermitian_weights(n: int, axis: int, ndim: int) -> np.ndarray:
    """How often each of the ``n // 2 + 1`` frequencies read by ``irfft`` appears in the
    full spectrum: 1 for the zero (and, for even ``n``, the Nyquist) frequency, else 2."""
    c = np.full(n // 2 + 1, 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return np.reshape(c, (-1,) + (1,) * (ndim - 1 - axis))


@gradient_rule(_fft.irfft)
def _irfft(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
    n, axis, norm = _one_axis(a, args, kwargs, "irfft")
    m = shape_of(a)[axis]
    n = 2 * (m - 1) if n is None else int(n)
    # ifft of the (real) cotangent, first n // 2 + 1 entries: sum_j g_j w^{jk} * scale
    half = np.conjugate(_fft.rfft(grad, n, axis, _swap_direction(norm)))
    g = half * _hermitian_weights(n, axis, ndim_of(a))
    return (_resize(g, m, axis),) + (None,) * len(args)


@tangent_rule(_fft.irfft)
def _irfft_tangent(a: Any, *args: Any, **kwargs: Any) -> Any:
    n, axis, norm = _one_axis(a.value, args, kwargs, "irfft")
    m = shape_of(a.value)[axis]
    n = 2 * (m - 1) if n is None else int(n)
    value = _fft.irfft(a.value, n, axis, norm)
    return Dual._make(value, _fft.irfft(a.partials, n, axis, norm), a.tag)


# -- several axes: fftn, ifftn, fft2, ifft2 ------------------------------------------------------


def _cook_axes(a: Any, s: Any, axes: Any, name: str, real_inverse: bool = False
               ) -> tuple[list[int], tuple[int, ...]]:
    """Sizes and non-negative axes of an n-D transform, as numpy reads ``s`` and ``axes``."""
    shape = shape_of(a)
    nd = len(shape)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(normalize_axis(ax, nd, f"np.fft.{name}") for ax in axes)
    if s is None:
        s = [shape[ax] for ax in axes]
        if real_inverse:
            s[-1] = 2 * (s[-1] - 1)
    s = [shape[ax] if size == -1 else int(size) for size, ax in zip(s, axes)]
    if len(s) != len(axes):
        raise ValueError(f"np.fft.{name}: shape s={s} and axes={axes} differ in length")
    return s, axes


def _nd_rules(func: Any, default_axes: Any) -> None:
    """``fftn`` / ``ifftn`` (``default_axes`` None) and ``fft2`` / ``ifft2`` (``(-2, -1)``)."""
    name = func.__name__

    def params(a: Any, args: tuple, kwargs: dict) -> tuple[list[int], tuple[int, ...], Any]:
        p = bind(("s", "axes", "norm"), args, kwargs)
        s, axes = _cook_axes(a, p.get("s"), p.get("axes", default_axes), name)
        return s, axes, p.get("norm")

    def grad_impl(grad: Any, output: Any, a: Any, *args: Any, **kwargs: Any) -> tuple:
        _, axes, norm = params(a, args, kwargs)
        g = func(grad, None, axes, norm)
        g = _resize_axes(g, [shape_of(a)[ax] for ax in axes], axes)
        return (g,) + (None,) * len(args)

    def tangent_impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        s, axes, norm = params(a.value, args, kwargs)
        return Dual._make(func(a.value, s, axes, norm), func(a.partials, s, axes, norm), a.tag)

    grad_impl.__name__ = tangent_impl.__name__ = f"_{name}"
    gradient_rule(func)(grad_impl)
    tangent_rule(func)(tangent_impl)


_nd_rules(_fft.fftn, None)
_nd_rules(_fft.ifftn, None)
_nd_rules(_fft.fft2, (-2, -1))
_nd_rules(_fft.ifft2, (-2, -1))


# -- compositions: rfftn, irfftn, rfft2, irfft2, hfft, ihfft --------------------------------------


def _rfftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, *,
           name: str = "rfftn") -> Any:
    s, axes = _cook_axes(a, s, axes, name)
    out = _fft.rfft(a, s[-1], axes[-1], norm)
    if len(axes) > 1:
        out = _fft.fftn(out, s[:-1], axes[:-1], norm)
    return out


def _irfftn(a: Any, s: Any = None, axes: Any = None, norm: Any = None, *,
            name: str = "irfftn") -> Any:
    s, axes = _cook_axes(a, s, axes, name, real_inverse=True)
    if len(axes) > 1:
        a = _fft.ifftn(a, s[:-1], axes[:-1], norm)
    return _fft.irfft(a, s[-1], axes[-1], norm)


def _rfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None) -> Any:
    return _rfftn(a, s, axes, norm, name="rfft2")


def _irfft2(a: Any, s: Any = None, axes: Any = (-2, -1), norm: Any = None) -> Any:
    return _irfftn(a, s, axes, norm, name="irfft2")


def _hfft(a: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Any:
    if n is None:
        n = 2 * (shape_of(a)[normalize_axis(axis, ndim_of(a), "np.fft.hfft")] - 1)
    return _fft.irfft(np.conjugate(a), n, axis, _swap_direction(norm))


def _ihfft(a: Any, n: Any = None, axis: Any = -1, norm: Any = None) -> Any:
    return np.conjugate(_fft.rfft(a, n, axis, _swap_direction(norm)))


def _first(args: tuple, kwargs: dict) -> list[int]:
    return [0]


composite_rules(_fft.rfftn, _rfftn, _first)
composite_rules(_fft.irfftn, _irfftn, _first)
composite_rules(_fft.rfft2, _rfft2, _first)
composite_rules(_fft.irfft2, _irfft2, _first)
composite_rules(_fft.hfft, _hfft, _first)
composite_rules(_fft.ihfft, _ihfft, _first)


# -- fftshift, ifftshift: permutations -------------------------------------------------------------


def _shift_map(func: Any) -> Any:
    def build(x: Any, axes: Any = None) -> np.ndarray:
        size = int(np.prod(shape_of(x), dtype=np.int64))
        return np.asarray(func(np.arange(size, dtype=np.intp).reshape(shape_of(x)), axes))

    return build


index_map_rules(_fft.fftshift, _shift_map(_fft.fftshift), permutation=True)
index_map_rules(_fft.ifftshift, _shift_map(_fft.ifftshift), permutation=True)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
# a transform mixes every entry of its lines (or planes); shifts only move entries
declare_dense(np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft, core=1)
declare_dense(np.fft.fft2, np.fft.ifft2, core=2)
declare_dense(np.fft.fftn, np.fft.ifftn)
declare_index_map(np.fft.fftshift, np.fft.ifftshift)
