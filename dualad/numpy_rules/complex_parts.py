"""Rules for the parts of complex numbers: real, imag, conj, angle, abs.

dualad follows JAX's convention for complex values. A cotangent ``g`` of a complex
quantity ``z`` pairs with a tangent ``dz`` as ``Re(g * dz)`` (no conjugation), so the
gradient rules of holomorphic functions are the real ones (``grad * f'(z)``, transposes
rather than adjoints), and ``grad`` of a real-valued function of a complex input is the
conjugate of the steepest-ascent direction. A real quantity always gets a real gradient
or tangent (the real part of the complex one).

The non-holomorphic parts are here:

* ``real(z)``: gradient ``g``; tangent ``Re(dz)``.
* ``imag(z)``: gradient ``-1j * g``; tangent ``Im(dz)``.
* ``conj(z)``: gradient ``conj(g)``; tangent ``conj(dz)``.
* ``abs(z)``: gradient ``g * conj(z) / |z|``; tangent ``Re(conj(z) dz) / |z|``; zero at
  ``z == 0`` (as ``abs'(0) = 0`` for reals).
* ``angle(z)``: gradient ``g * (-1j / z)``; tangent ``Im(dz / z)``; zero at ``z == 0``.

Real inputs keep the rules of the tables (``abs' = sign``, ``angle' = 0``).

Example:
    >>> import numpy as np, dualad as ad
    >>> f = lambda t: np.abs(np.exp(1j * t) * t)   # |t|
    >>> float(ad.grad(f)(-2.0))
    -1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plum

from ..extend import (
    Broadcasted,
    Dual,
    declare_elementwise,
    declare_index_map,
    get_rule,
    gradient,
    shape_of,
)
from ..forward_mode.dual import dual_signatures, register_fast_ufunc, register_forward
from ..forward_mode.elementwise import elementwise_tangent
from . import elementwise as _elementwise  # noqa: F401  (registered first, replaced here)
from . import functions as _functions  # noqa: F401
from . import selection as _selection  # noqa: F401
from ._support import gradient_rule, tangent_rule

__all__ = ["is_complex"]


def is_complex(x: Any) -> bool:
    """Whether ``x`` (array, number or traced value) holds complex numbers."""
    if type(x) is complex:
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype.kind == "c"


def _safe_inverse(z: Any) -> Any:
    """``1 / z`` with zeros where ``z == 0``."""
    zero = np.asarray(np.equal(z, 0))
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, z))


def _column(d: Any) -> Any:
    shape = shape_of(d)
    return d if not shape else np.reshape(d, shape + (1,))


# -- real, imag, angle (numpy functions) -----------------------------------------------------


@gradient_rule(np.real, np.real_if_close)
def _real(grad: Any, output: Any, x: Any, *args: Any, **kwargs: Any) -> tuple:
    return (grad,) + (None,) * len(args)


@tangent_rule(np.real, np.real_if_close)
def _real_tangent(x: Any, *args: Any, **kwargs: Any) -> Any:
    if not is_complex(x.value):
        return x
    value = np.real(x.value)
    if shape_of(value) != shape_of(x.value):  # real_if_close kept the complex values
        return x
    return Dual._make(value, np.real(x.partials), x.tag)


@gradient_rule(np.imag)
def _imag(grad: Any, output: Any, x: Any) -> tuple:
    if not is_complex(x):
        return (np.zeros(shape_of(x)),)
    return (grad * -1j,)


@tangent_rule(np.imag)
def _imag_tangent(x: Any) -> Any:
    if not is_complex(x.value):
        return Dual._make(np.imag(x.value), np.zeros(shape_of(x.partials)), x.tag)
    return Dual._make(np.imag(x.value), np.imag(x.partials), x.tag)


def _angle_scale(args: tuple, kwargs: dict) -> float:
    deg = args[0] if args else kwargs.get("deg", False)
    return 180.0 / np.pi if deg else 1.0


@gradient_rule(np.angle)
def _angle(grad: Any, output: Any, z: Any, *args: Any, **kwargs: Any) -> tuple:
    if not is_complex(z):
        return (np.zeros(shape_of(z)),) + (None,) * len(args)
    scale = _angle_scale(args, kwargs)
    return (grad * (-1j * scale) * _safe_inverse(z),) + (None,) * len(args)


@tangent_rule(np.angle)
def _angle_tangent(z: Any, *args: Any, **kwargs: Any) -> Any:
    value = np.angle(z.value, *args, **kwargs)
    if not is_complex(z.value):
        return Dual._make(value, np.zeros(shape_of(z.partials)), z.tag)
    scale = _angle_scale(args, kwargs)
    dp = np.imag(z.partials * _column(_safe_inverse(z.value))) * scale
    return Dual._make(value, dp, z.tag)


# -- conj and abs (ufuncs with table rules for real inputs) -----------------------------------


def _ufunc_rules(ufunc: Any, complex_gradient: Any, complex_tangent: Any) -> None:
    """Replace the table rules of a unary ufunc by ones that handle complex inputs too
    (real inputs keep the table's gradient expression and tangent kernel)."""
    rule = get_rule(ufunc)
    real_tangent = elementwise_tangent(rule)
    derivative = rule.derivatives

    def grad_method(op: Any, grad: Any, output: Any, x: Any, **kwargs: Any):
        if is_complex(x):
            return (complex_gradient(grad, output, x),)
        return (grad * derivative(x, output)[0],)

    def impl(args: tuple, kwargs: dict) -> Any:
        x = args[0] if len(args) == 1 else None
        if isinstance(x, Dual) and not kwargs and is_complex(x.value):
            return complex_tangent(x)
        return real_tangent(args, kwargs)

    def method(op, *args, **kwargs):  # plum: no annotations here
        return impl(args, kwargs)

    grad_method.__name__ = f"gradient_{ufunc.__name__}"
    method.__name__ = f"forward_{ufunc.__name__}"
    gradient.register(grad_method, plum.Signature(Broadcasted[ufunc], Any, Any, Any),
                      builtin=True)
    for types in dual_signatures(1):
        register_forward(Broadcasted[ufunc], types, method)
    register_fast_ufunc(ufunc, impl)


def _conj_gradient(grad: Any, output: Any, z: Any) -> Any:
    return np.conjugate(grad)


def _conj_tangent(z: Dual) -> Any:
    return Dual._make(np.conjugate(z.value), np.conjugate(z.partials), z.tag)


def _abs_gradient(grad: Any, output: Any, z: Any) -> Any:
    return grad * np.conjugate(z) * _safe_inverse(output)


def _abs_tangent(z: Dual) -> Any:
    y = np.abs(z.value)
    unit = np.conjugate(z.value) * _safe_inverse(y)
    return Dual._make(y, np.real(z.partials * _column(unit)), z.tag)


_ufunc_rules(np.conjugate, _conj_gradient, _conj_tangent)
_ufunc_rules(np.absolute, _abs_gradient, _abs_tangent)

# -- sparsity detection: how entries flow (see dualad.sparsity.flows) ------------------------
declare_index_map(np.real, np.real_if_close)
declare_elementwise(np.imag, np.angle)  # zero for real entries, not for complex ones
