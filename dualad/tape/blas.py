"""Matrix products for generated Numba code: one call into BLAS ``dgemm`` on flat,
row-major float64 buffers, transposes as flags (and ``ddot`` for two vectors).

Numba's ``@`` compiles its generic matrix-product code once per combination of operand
layouts (C-contiguous, Fortran from ``.T``): about 0.5 s for the first in a process and
0.27 s for each further one. :func:`gemm` is an intrinsic that lowers to a single call of
the BLAS wrapper Numba ships (``numba_xxgemm``, which calls scipy's ``dgemm``): nothing is
compiled per layout, and a cached kernel refers to it by name, so it loads in a new
process.

Example:
    >>> import numba
    >>> import numpy as np
    >>> from dualad.tape.blas import gemm
    >>> @numba.njit
    ... def product(a, b):  # (2, 3) @ (3, 2)
    ...     c = np.empty(4)
    ...     gemm(False, False, 2, 2, 3, a, b, c, 0.0)
    ...     return c.reshape((2, 2))
    >>> a, b = np.arange(6.0), np.arange(6.0) + 1.0
    >>> bool(np.array_equal(product(a, b), a.reshape(2, 3) @ b.reshape(3, 2)))
    True
    >>> from dualad.tape.blas import dot
    >>> float(numba.njit(lambda a, b: dot(6, a, b))(a, b)) == float(a @ b)
    True
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import check_blas_return, ensure_blas

__all__ = ["dot", "gemm"]

_char = ir.IntType(8)
_void_p = ir.IntType(8).as_pointer()


def _is_flat_float_array(t: Any) -> bool:
    return isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and \
        t.dtype == types.float64


@intrinsic
def gemm(typingctx: Any, trans_a: Any, trans_b: Any, m: Any, n: Any, k: Any, a: Any, b: Any,
         c: Any, beta: Any) -> Any:
    """``c = op(a) @ op(b) + beta * c`` on flat C-contiguous float64 buffers read as
    row-major matrices: ``op(a)`` is ``(m, k)`` (``a`` holds it, or with ``trans_a`` its
    transpose ``(k, m)``), ``op(b)`` is ``(k, n)`` likewise, ``c`` is ``(m, n)``. Sizes
    are not checked: the generated code passes the recorded ones. ``beta`` 0.0 ignores
    what ``c`` holds (BLAS does not read it)."""
    if not all(_is_flat_float_array(t) for t in (a, b, c)):
        return None
    if not all(isinstance(t, (types.Boolean, types.Integer)) for t in (trans_a, trans_b)) or \
            not all(isinstance(t, types.Integer) for t in (m, n, k)) or \
            not isinstance(beta, (types.Float, types.Integer)):
        return None
    ensure_blas()
    sig = types.void(trans_a, trans_b, m, n, k, a, b, c, beta)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        ta, tb, vm, vn, vk, va, vb, vc, vbeta = args
        tys = signature.args
        intp = context.get_value_type(types.intp)
        double = context.get_value_type(types.float64)

        def integer(v: Any, t: Any) -> Any:
            return context.cast(builder, v, t, types.intp)

        def flag(v: Any, t: Any) -> Any:
            on = builder.icmp_unsigned("!=", context.cast(builder, v, t, types.intp),
                                       ir.Constant(intp, 0))
            return builder.select(on, ir.Constant(_char, ord("t")), ir.Constant(_char, ord("n")))

        def data(v: Any, t: Any) -> Any:
            return builder.bitcast(context.make_array(t)(context, builder, v).data, _void_p)

        M, N, K = integer(vm, tys[2]), integer(vn, tys[3]), integer(vk, tys[4])
        fa, fb = flag(ta, tys[0]), flag(tb, tys[1])
        alpha = cgutils.alloca_once_value(builder, ir.Constant(double, 1.0))
        beta_slot = cgutils.alloca_once(builder, double)
        builder.store(context.cast(builder, vbeta, tys[8], types.float64), beta_slot)
        # row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's buffer first
        ta_on = builder.icmp_unsigned("==", fa, ir.Constant(_char, ord("t")))
        tb_on = builder.icmp_unsigned("==", fb, ir.Constant(_char, ord("t")))
        one = ir.Constant(intp, 1)

        def at_least_one(v: Any) -> Any:  # BLAS wants leading dimensions >= 1
            return builder.select(builder.icmp_signed("<", v, one), one, v)

        lda = at_least_one(builder.select(tb_on, K, N))  # the row length of b as stored
        ldb = at_least_one(builder.select(ta_on, M, K))  # the row length of a as stored
        fnty = ir.FunctionType(ir.IntType(32), [
            _char, _char, _char, intp, intp, intp, _void_p, _void_p, intp, _void_p, intp,
            _void_p, _void_p, intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        res = builder.call(fn, (ir.Constant(_char, ord("d")), fb, fa, N, M, K,
                                builder.bitcast(alpha, _void_p), data(vb, tys[6]), lda,
                                data(va, tys[5]), ldb, builder.bitcast(beta_slot, _void_p),
                                data(vc, tys[7]), at_least_one(N)))
        check_blas_return(context, builder, res)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def dot(typingctx: Any, n: Any, a: Any, b: Any) -> Any:
    """``a[:n] @ b[:n]`` of flat C-contiguous float64 buffers, one BLAS ``ddot`` call
    (vectorised: a scalar loop adds one product at a time, in order)."""
    if not (_is_flat_float_array(a) and _is_flat_float_array(b) and
            isinstance(n, types.Integer)):
        return None
    ensure_blas()
    sig = types.float64(n, a, b)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        vn, va, vb = args
        tys = signature.args
        intp = context.get_value_type(types.intp)
        double = context.get_value_type(types.float64)
        result = cgutils.alloca_once_value(builder, ir.Constant(double, 0.0))
        fnty = ir.FunctionType(ir.IntType(32), [_char, _char, intp, _void_p, _void_p, _void_p])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxdot")

        def data(v: Any, t: Any) -> Any:
            return builder.bitcast(context.make_array(t)(context, builder, v).data, _void_p)

        res = builder.call(fn, (ir.Constant(_char, ord("d")), ir.Constant(_char, 0),
                                context.cast(builder, vn, tys[0], types.intp),
                                data(va, tys[1]), data(vb, tys[2]),
                                builder.bitcast(result, _void_p)))
        check_blas_return(context, builder, res)
        return builder.load(result)

    return sig, codegen
