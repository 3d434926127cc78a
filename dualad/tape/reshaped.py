"""``_reshaped(a, shape)``: a C-contiguous array seen with another shape, in generated code.

Numba's ``a.reshape(shape)`` compiles a helper (the check of the new shape, with its
errors) once per process and per number of dimensions: about 60 ms measured (Numba 0.68),
paid by the first compile in a process whose result is a matrix (a gradient with respect to
a matrix, a Jacobian with shapes). Generated code knows its shapes, so this view is lowered
inline: the same data and owner, the new shape and its row-major strides, nothing compiled.
The sizes are not checked (the writer passes the recorded ones). Called from Python, it is
``np.reshape``. Imported only by generated modules, so ``import dualad`` does not import
Numba.

Example:
    >>> import numba
    >>> import numpy as np
    >>> from dualad.tape.reshaped import reshaped
    >>> numba.njit(lambda a: reshaped(a, (2, 3)))(np.arange(6.0)).tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    >>> reshaped(np.arange(4.0), (2, 2)).shape
    (2, 2)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import lower_builtin, type_callable
from numba.np.arrayobj import make_array, populate_array

__all__ = ["reshaped"]


def reshaped(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` (C-contiguous) with ``shape`` (every dimension given, none -1), sharing its
    data."""
    return np.reshape(a, shape)


def _dimensions(shape: Any) -> int | None:
    if isinstance(shape, types.Integer):
        return 1
    if isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer)
                                                  for t in shape.types):
        return len(shape.types)
    return None


@type_callable(reshaped)
def _type_reshaped(context: Any) -> Any:
    def typer(a: Any, shape: Any) -> Any:
        ndim = _dimensions(shape)
        if isinstance(a, types.Array) and a.layout == "C" and ndim is not None:
            return types.Array(a.dtype, ndim, "C", readonly=not a.mutable)
        return None

    return typer


@lower_builtin(reshaped, types.Array, types.Integer)
@lower_builtin(reshaped, types.Array, types.BaseTuple)
def _lower_reshaped(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    aryty, shapety = sig.args
    retty = sig.return_type
    ary = make_array(aryty)(context, builder, args[0])
    if isinstance(shapety, types.Integer):
        dims = [context.cast(builder, args[1], shapety, types.intp)]
    else:
        dims = [context.cast(builder, v, t, types.intp) for v, t in
                zip(cgutils.unpack_tuple(builder, args[1]), shapety.types)]
    strides = []
    stride = ary.itemsize
    for d in reversed(dims):  # row-major: the last axis moves by one item
        strides.append(stride)
        stride = builder.mul(stride, d)
    out = make_array(retty)(context, builder)
    populate_array(out, data=ary.data, shape=dims, strides=strides[::-1],
                   itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
    return impl_ret_borrowed(context, builder, retty, out._getvalue())
