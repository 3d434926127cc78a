"""Lean tangent paths of elementwise rules: one impl per rule, specialised at registration.

The general tangent of an elementwise rule (:func:`dualad.forward_mode.elementwise.elementwise_tangent`)
accepts anything: Duals of several tags, broadcasting operands, traced values, keywords. Most
calls in a simulation are simpler: one or two operands of one shape, plain numpy values and
partials, one tag. For those, :func:`lean_unary` and :func:`lean_binary` build, from the
rule's arity and derivative kinds (``one``, ``minus_one``, ``expr``, ``zero``), a function
that goes straight to the numbers: the fused kernel for float64 arrays when it pays, else
numpy calls in the same order as the general path, with derivatives compiled for the
operands that carry partials only. Anything else makes them return ``None`` and the caller
takes the general path, so they never decide a result the general path would not give.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.derivatives.registry import get_rule
    >>> mul = lean_binary(get_rule(np.multiply))
    >>> x = ad.Dual(np.array([2.0]), np.array([[1.0, 0.0]]))
    >>> mul(x, 3.0).partials
    array([[3., 0.]])
    >>> mul(x, "text") is None   # not a case it handles: the general path decides
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..derivatives.kinds import (
    FRESH_KINDS,
    MaskedDerivatives,
    fresh_tangent_term,
    rule_kinds,
    scale_tangent,
    tangent_term,
)
from . import kernels as dual_kernels
from .dual import Dual
from .dual import new_dual as _make

__all__ = ["lean_unary", "lean_binary", "CONSTANT_TYPES"]

#: Operand types a lean binary path treats as constants (plain numbers).
CONSTANT_TYPES = frozenset((float, int, np.float64))

_ND = np.ndarray
_F64 = np.dtype(np.float64)
_F64_SCALAR = np.float64


_BOTH = (True, True)
_FIRST = (True, False)
_SECOND = (False, True)


def _is_linear_combination(rule: Any, ka: str, kb: str) -> bool:
    """Whether ``rule.function(a, b)`` is ``a + b`` (kinds one, one) or ``a - b`` (one,
    minus_one / minus_one, one: ``b - a``, checked on numbers), so it may act on partials."""
    f = rule.function
    try:
        with np.errstate(all="ignore"):
            got = f(np.float64(0.75), np.float64(2.5))
    except Exception:
        return False
    want = {("one", "one"): 3.25, ("one", "minus_one"): -1.75, ("minus_one", "one"): 1.75}
    return type(got) is np.float64 and float(got) == want[(ka, kb)]


def lean_unary(rule: Any, rk: Any = None) -> Callable[[Any], Dual | None]:
    """``impl(x)``: ``rule.function(x)`` for a Dual ``x`` with plain numpy value and
    partials, or ``None`` for any other argument (the general path then decides)."""
    f = rule.function
    (kind,) = rule_kinds(rule)
    if rk is None:
        rk = dual_kernels.RuleKernels(rule)
    derivatives = rule.derivatives
    quiet = rule.may_warn
    calm = rule.quiet_when  # numbers on which nothing can warn: no np.errstate
    run_kernel = rk.run_unary

    def impl(x: Any) -> Dual | None:
        p = x._p
        if type(p) is not _ND:
            return None
        v = x.value
        tv = type(v)
        if tv is _ND:
            if v.dtype.kind not in "fiub":
                return None
            # the compiled kernel for float64 arrays, where it pays
            if dual_kernels.ENABLED and rk.available and v.dtype is _F64 and p.dtype is _F64:
                k = p.shape[-1]
                work = v.size * k
                if k >= dual_kernels.MIN_K and work >= rk.threshold:
                    out = run_kernel(v, p, k, work, x.tag)
                    if out is not None:
                        return out
        elif tv is not _F64_SCALAR:
            return None
        if quiet and (calm is None or tv is _ND or not calm(v)):
            with np.errstate(divide="ignore", invalid="ignore"):
                y = f(v)
                if kind == "expr":
                    return _make(y, scale_tangent(p, derivatives(v, y)[0]), x.tag)
        else:
            y = f(v)
            if kind == "expr":
                return _make(y, scale_tangent(p, derivatives(v, y)[0]), x.tag)
        if kind == "one":
            dp = p.copy()
        elif kind == "minus_one":
            dp = -p
        else:
            dp = np.zeros(np.shape(y) + (p.shape[-1],))
        return _make(y, dp, x.tag)

    impl.__name__ = f"lean_{rule.name}"
    return impl


def lean_binary(rule: Any, rk: Any = None) -> Callable[[Any, Any], Dual | None]:
    """``impl(a, b)``: ``rule.function(a, b)`` when both are Duals of one tag with plain
    numpy values and partials of one shape, or one is such a Dual and the other a number or
    a plain array of the Dual's shape; ``None`` otherwise (the general path then decides)."""
    f = rule.function
    ka, kb = rule_kinds(rule)
    term_a, term_b = tangent_term(ka), tangent_term(kb)
    single_a, single_b = fresh_tangent_term(ka), fresh_tangent_term(kb)
    if rk is None:
        rk = dual_kernels.RuleKernels(rule)
    derivs = MaskedDerivatives(rule)
    quiet = rule.may_warn
    need = "expr" in (ka, kb)
    const_types = CONSTANT_TYPES
    # f's partials of two Duals are f of their partials ("one, one": add; "one, minus_one":
    # subtract) or their difference the other way round ("minus_one, one")
    linear_pair = (ka, kb) in (("one", "one"), ("one", "minus_one"), ("minus_one", "one")) \
        and _is_linear_combination(rule, ka, kb)
    same_sign = ka == "one"
    threshold = rk.threshold  # least partials entries for the fused kernel
    scalar = rule.scalar_value
    calm = rule.quiet_when  # numbers on which nothing can warn: no np.errstate
    calm_value = rule.quiet_value  # exact wherever calm holds

    def fused(av: Any, ap: Any, bv: Any, bp: Any, tag: Any, mask: tuple) -> Dual | None:
        # operands: float64 arrays of one shape (or a number), partials float64 arrays
        if not dual_kernels.ENABLED or not rk.available:
            return None
        p = ap if ap is not None else bp
        if p.dtype is not _F64:
            return None
        k = p.shape[-1]
        work = p.size
        if k < dual_kernels.MIN_K or work < rk.threshold:
            return None
        if type(av) is not _ND:
            av = np.full(bv.shape, float(av))
        elif type(bv) is not _ND:
            bv = np.full(av.shape, float(bv))
        if av.dtype is not _F64 or bv.dtype is not _F64:
            return None
        kern = rk._get(mask, work)
        if kern is None:
            return None
        shape = av.shape
        size = work // k
        out = np.empty(shape)
        outp = np.empty(shape + (k,))
        if len(shape) == 1:
            o, op = out, outp
            if not av.flags.c_contiguous:
                av = np.ascontiguousarray(av)
            if not bv.flags.c_contiguous:
                bv = np.ascontiguousarray(bv)
            if ap is not None and not ap.flags.c_contiguous:
                ap = np.ascontiguousarray(ap)
            if bp is not None and not bp.flags.c_contiguous:
                bp = np.ascontiguousarray(bp)
        else:
            av, bv = av.reshape(size), bv.reshape(size)
            ap = None if ap is None else ap.reshape(size, k)
            bp = None if bp is None else bp.reshape(size, k)
            o, op = out.reshape(size), outp.reshape(size, k)
        if bp is None:
            kern(av, ap, bv, o, op)
        elif ap is None:
            kern(av, bv, bp, o, op)
        else:
            kern(av, ap, bv, bp, o, op)
        return _make(out, outp, tag)

    def partials(av: Any, ap: Any, bv: Any, bp: Any, y: Any, mask: tuple) -> Any:
        da = db = None
        if need:
            da, db = derivs.get(mask)(av, bv, y)
        if bp is None:
            return single_a(ap, da)
        if ap is None:
            return single_b(bp, db)
        # both operands carry partials of one shape: the general path's sum of terms
        ta = None if term_a is None else term_a(ap, da)
        tb = None if term_b is None else term_b(bp, db)
        if ta is None:
            return np.zeros(ap.shape) if tb is None else \
                tb if kb in FRESH_KINDS else tb.copy()
        if tb is None:
            return ta if ka in FRESH_KINDS else ta.copy()
        return ta + tb

    def impl(a: Any, b: Any) -> Dual | None:
        # operands: Duals with plain partials and values (arrays or float64 scalars), of one
        # tag and shape, or one such Dual and a number / a plain array of its shape
        if type(a) is Dual:
            ap, av = a._p, a.value
            if type(ap) is not _ND or (type(av) is not _ND and type(av) is not _F64_SCALAR):
                return None
            tag = a.tag
            if type(b) is Dual:
                bp, bv = b._p, b.value
                if b.tag is not tag or type(bp) is not _ND or bp.shape != ap.shape or (
                        type(bv) is not _ND and type(bv) is not _F64_SCALAR):
                    return None
                if threshold <= ap.size and type(av) is _ND:
                    out = fused(av, ap, bv, bp, tag, _BOTH)
                    if out is not None:
                        return out
                if linear_pair:  # add / subtract: one numpy call on the partials
                    return _make(f(av, bv), f(ap, bp) if same_sign else bp - ap, tag)
                mask = _BOTH
            else:
                tb = type(b)
                if tb not in const_types and (tb is not _ND or b.shape != ap.shape[:-1]
                                              or b.dtype.kind not in "fiub"):
                    return None
                bp, bv = None, b
                mask = _FIRST
                if threshold <= ap.size and (type(av) is _ND or tb is _ND):
                    out = fused(av, ap, bv, bp, tag, mask)
                    if out is not None:
                        return out
        elif type(b) is Dual:
            bp, bv = b._p, b.value
            if type(bp) is not _ND or (type(bv) is not _ND and type(bv) is not _F64_SCALAR):
                return None
            ta = type(a)
            if ta not in const_types and (ta is not _ND or a.shape != bp.shape[:-1]
                                          or a.dtype.kind not in "fiub"):
                return None
            ap, av = None, a
            tag = b.tag
            mask = _SECOND
            if threshold <= bp.size and (type(bv) is _ND or ta is _ND):
                out = fused(av, ap, bv, bp, tag, mask)
                if out is not None:
                    return out
        else:
            return None
        if quiet:
            if calm is None or not calm(av, bv):  # (False for arrays)
                with np.errstate(divide="ignore", invalid="ignore"):
                    y = f(av, bv)
                    return _make(y, partials(av, ap, bv, bp, y, mask), tag)
            y = f(av, bv) if calm_value is None else calm_value(av, bv)
            if type(y) is float:  # two Python numbers: numpy's type
                y = _F64_SCALAR(y)
            return _make(y, partials(av, ap, bv, bp, y, mask), tag)
        # two numbers: the table's Python operator where it gives numpy's IEEE result
        y = f(av, bv) if scalar is None or type(av) is _ND or type(bv) is _ND \
            else scalar(av, bv)
        return _make(y, partials(av, ap, bv, bp, y, mask), tag)

    impl.__name__ = f"lean_{rule.name}"
    return impl
