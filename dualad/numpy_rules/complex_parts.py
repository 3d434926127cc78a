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

from ..extend import Dual, declare_elementwise, get_rule, shape_of, table_tangent
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


declare_elementwise(np.real, np.real_if_close, flowing=(0,))  # sparsity: entry by entry


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


# sparsity: entry by entry (a superset where the values are real, as the zero tangent above)
declare_elementwise(np.imag, flowing=(0,))


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


declare_elementwise(np.angle, flowing=(0,))  # sparsity: entry by entry (deg is a constant)


# -- conj and abs (ufuncs with table rules for real inputs) -----------------------------------
# The rules of Broadcasted[ufunc] take the place of the table's: complex inputs here, real
# inputs by the table's gradient expression and tangent rule.


def _table_rules_of(ufunc: Any) -> tuple[Any, Any]:
    """The table's gradient expression and tangent rule of ``ufunc``, for real inputs."""
    tangent = table_tangent(ufunc)  # a ValueError naming ufunc if the tables lack it
    rule = get_rule(ufunc)
    assert rule is not None
    return rule.derivatives, tangent


_conj_derivative, _conj_table_tangent = _table_rules_of(np.conjugate)
_abs_derivative, _abs_table_tangent = _table_rules_of(np.absolute)


@gradient_rule(np.conjugate, broadcasted=True)
def _conj(grad: Any, output: Any, z: Any, **kwargs: Any) -> tuple:
    if is_complex(z):
        return (np.conjugate(grad),)
    return (grad * _conj_derivative(z, output)[0],)


@tangent_rule(np.conjugate, broadcasted=True)
def _conj_tangent(z: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(z, Dual) and not args and not kwargs and is_complex(z.value):
        return Dual._make(np.conjugate(z.value), np.conjugate(z.partials), z.tag)
    return _conj_table_tangent(z, *args, **kwargs)


@gradient_rule(np.absolute, broadcasted=True)
def _abs(grad: Any, output: Any, z: Any, **kwargs: Any) -> tuple:
    if is_complex(z):
        return (grad * np.conjugate(z) * _safe_inverse(output),)
    return (grad * _abs_derivative(z, output)[0],)


@tangent_rule(np.absolute, broadcasted=True)
def _abs_tangent(z: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(z, Dual) and not args and not kwargs and is_complex(z.value):
        y = np.abs(z.value)
        unit = np.conjugate(z.value) * _safe_inverse(y)
        return Dual._make(y, np.real(z.partials * _column(unit)), z.tag)
    return _abs_table_tangent(z, *args, **kwargs)
