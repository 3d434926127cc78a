"""Scalar Duals with a few directions: partials held as a list of Python floats (a *row*).

Small right-hand sides (a 3-state kinetics model, an 8-state network) are written with
scalars: ``y1, y2, y3 = y``, then a dozen products and sums, then ``np.array([...])`` or
``dydt[i] = ...``. Each of those scalars is a 0-d Dual carrying ``k`` = n directions, and
numpy costs about half a microsecond per call on a ``(k,)`` array whatever ``k``, while Python
arithmetic on a few floats costs tens of nanoseconds each. So, as ForwardDiff.jl keeps a
scalar dual's partials in a tuple, a 0-d float64 Dual with 2 to :data:`ROW_MAX` directions,
taken from a float64 array (``y[i]``, unpacking), keeps its partials as a list of floats
(``Dual._p`` is then a ``list``; ``.partials`` hands out the usual ``(k,)`` array). The
arithmetic here keeps such Duals as rows; anything else reads ``.partials`` and takes the
usual paths. Rows are never written to: a rule may hand one back unchanged.

Example:
    >>> import numpy as np, dualad as ad
    >>> y = ad.Dual(np.array([2.0, 3.0]), np.eye(2))
    >>> y1, y2 = y
    >>> z = 3.0 * y1 * y2 - y2
    >>> z._p, z.partials
    ([9.0, 5.0], array([9., 5.]))
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..derivatives.kinds import MaskedDerivatives, row_tangent_term, rule_kinds
from ..derivatives.language import OUTPUT_NAME
from .dual import ROW, ROW_MAX, Dual, new_dual

__all__ = ["ROW_MAX", "row_unary", "row_binary", "stack_rows"]

_F64 = np.float64
_CONSTANTS = frozenset((float, int, np.float64))
_isfinite = math.isfinite


def _unrolled(name: str, params: str, entry: str) -> list[Any]:
    """``name``'s function for each row length ``k`` (index ``k``; ``None`` below 2): the list
    of ``entry`` formatted with ``i`` for ``i < k``, written out (a comprehension over a few
    floats costs up to twice as much: measured 405 against 189 ns for ``x * da + z * db`` at
    k = 3, 654 against 388 at k = 8)."""
    source = "".join(
        f"def {name}{k}({params}):\n    return [{', '.join(entry.format(i=i) for i in range(k))}]\n"
        for k in range(2, ROW_MAX + 1))
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<dualad rows {name}>", "exec"), namespace)  # noqa: S102
    return [None, None] + [namespace[f"{name}{k}"] for k in range(2, ROW_MAX + 1)]


# row arithmetic written out per length: _AXPY[k](a, da, b, db) is a * da + b * db, ...
_AXPY = _unrolled("axpy", "a, da, b, db", "a[{i}] * da + b[{i}] * db")
_SCALE = _unrolled("scale", "a, d", "a[{i}] * d")
_ADD = _unrolled("add", "a, b", "a[{i}] + b[{i}]")
_SUB = _unrolled("sub", "a, b", "a[{i}] - b[{i}]")


def _value_index(rule: Any, i: int) -> int | None:
    """Where the derivative in argument ``i`` sits among ``(*args, y)`` when it is one of the
    call's values (``x2`` for ``x1 * x2``, ``y`` for ``exp``), else ``None``: such a
    derivative is read, not evaluated.

    Example:
        >>> from dualad.derivatives.registry import get_rule
        >>> _value_index(get_rule(np.multiply), 0), _value_index(get_rule(np.exp), 0)
        (1, 1)
    """
    tree = getattr(rule.expressions[i], "tree", None)
    names = (*rule.arg_names, OUTPUT_NAME)
    if isinstance(tree, ast.Name) and tree.id in names:
        return names.index(tree.id)
    return None


def row_unary(rule: Any) -> Callable[[Any], Dual | None]:
    """``impl(x)``: ``rule.function(x)`` for a row Dual ``x`` (see the module), or ``None``
    when the derivative is not a float (the caller's other paths decide)."""
    f = rule.function
    (kind,) = rule_kinds(rule)
    term = row_tangent_term(kind)
    derivatives = rule.derivatives
    need = kind == "expr"
    quiet = rule.may_warn
    calm = rule.quiet_when  # numbers on which nothing can warn: no np.errstate
    read = _value_index(rule, 0) if need else None

    def impl(x: Any) -> Dual | None:
        v = x.value
        row = x._p
        if quiet and (calm is None or not calm(v)):
            with np.errstate(divide="ignore", invalid="ignore"):
                y = f(v)
                d = derivatives(v, y)[0] if need else None
        else:
            y = f(v)
            if read is not None:
                d = v if read == 0 else y
            else:
                d = derivatives(v, y)[0] if need else None
        if type(y) is not _F64:
            return None
        if need and _isfinite(d):  # term inline, the commonest case
            return new_dual(y, _SCALE[len(row)](row, float(d)), x.tag, ROW)
        if term is None:
            return new_dual(y, [0.0] * len(row), x.tag, ROW)
        return new_dual(y, term(row, d), x.tag, ROW)

    impl.__name__ = f"row_{rule.name}"
    return impl


def _sum_rows(ra: list | None, rb: list | None, k: int) -> list:
    if ra is None:
        return [0.0] * k if rb is None else rb
    if rb is None:
        return ra
    return [x + y for x, y in zip(ra, rb)]


def row_binary(rule: Any) -> Callable[[Any, Any], Dual | None]:
    """``impl(a, b)``: ``rule.function(a, b)`` where one operand is a row Dual and the other
    a row Dual of the same tag and ``k`` or a plain number; ``None`` otherwise."""
    ka, kb = rule_kinds(rule)
    term_a, term_b = row_tangent_term(ka), row_tangent_term(kb)
    f = rule.function if rule.scalar_value is None else rule.scalar_value
    masked = MaskedDerivatives(rule)
    need_a, need_b = ka == "expr", kb == "expr"
    d_both = masked.get((need_a, need_b)) if need_a or need_b else None
    d_first = masked.get((True, False)) if need_a else None
    d_second = masked.get((False, True)) if need_b else None
    quiet = rule.may_warn
    calm = rule.quiet_when  # numbers on which nothing can warn: no np.errstate
    if quiet and rule.quiet_value is not None:  # exact wherever calm holds, used only there
        f = rule.quiet_value
    read_a = _value_index(rule, 0) if need_a else None
    read_b = _value_index(rule, 1) if need_b else None
    # the commonest pairs, told apart once here: sums, differences, products and quotients
    sum_pair = (ka, kb) == ("one", "one")
    difference_pair = (ka, kb) == ("one", "minus_one")
    expr_pair = need_a and need_b

    def both(av: Any, ar: list, bv: Any, br: list, tag: Any) -> Dual | None:
        if quiet and (calm is None or not calm(av, bv)):
            with np.errstate(divide="ignore", invalid="ignore"):
                y = rule.function(av, bv)
                da, db = (None, None) if d_both is None else d_both(av, bv, y)
        else:
            y = f(av, bv)
            da, db = (None, None) if d_both is None else d_both(av, bv, y)
        if type(y) is not _F64:
            return None
        if sum_pair:
            return new_dual(y, _ADD[len(ar)](ar, br), tag, ROW)
        if difference_pair:
            return new_dual(y, _SUB[len(ar)](ar, br), tag, ROW)
        if expr_pair and _isfinite(da) and _isfinite(db):
            da, db = float(da), float(db)
            return new_dual(y, [x * da + z * db for x, z in zip(ar, br)], tag, ROW)
        ta = None if term_a is None else term_a(ar, da)
        tb = None if term_b is None else term_b(br, db)
        return new_dual(y, _sum_rows(ta, tb, len(ar)), tag, ROW)

    def impl(a: Any, b: Any) -> Dual | None:
        if type(a) is Dual:
            ar = a._p
            if ar.__class__ is not list:
                return None
            tb = type(b)
            if tb is Dual:
                br = b._p
                if b.tag is not a.tag or br.__class__ is not list or len(br) != len(ar):
                    return None
                av, bv = a.value, b.value
                if quiet and (calm is None or not calm(av, bv)):
                    return both(av, ar, bv, br, a.tag)
                y = f(av, bv)  # the commonest cases inline: sums, differences, products
                if type(y) is not _F64:
                    return None
                if sum_pair:
                    return new_dual(y, _ADD[len(ar)](ar, br), a.tag, ROW)
                if difference_pair:
                    return new_dual(y, _SUB[len(ar)](ar, br), a.tag, ROW)
                if expr_pair:
                    if read_a is not None and read_b is not None:  # x1 * x2: read, not evaluated
                        da = av if read_a == 0 else (bv if read_a == 1 else y)
                        db = av if read_b == 0 else (bv if read_b == 1 else y)
                    else:
                        da, db = d_both(av, bv, y)
                    if _isfinite(da) and _isfinite(db):
                        return new_dual(y, _AXPY[len(ar)](ar, float(da), br, float(db)),
                                        a.tag, ROW)
                return both(av, ar, bv, br, a.tag)
            if tb not in _CONSTANTS:
                return None
            av = a.value
            if quiet and (calm is None or not calm(av, b)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    y = rule.function(av, b)
                    d = d_first(av, b, y)[0] if need_a else None
            else:
                y = f(av, b)
                if need_a:
                    if read_a is None:
                        d = d_first(av, b, y)[0]
                    else:
                        d = av if read_a == 0 else (b if read_a == 1 else y)
                    if _isfinite(d) and type(y) is _F64:  # term_a inline, the commonest case
                        return new_dual(y, _SCALE[len(ar)](ar, float(d)), a.tag, ROW)
                else:
                    d = None
            if type(y) is not _F64:
                return None
            return new_dual(y, [0.0] * len(ar) if term_a is None else term_a(ar, d), a.tag, ROW)
        if type(b) is Dual and type(a) in _CONSTANTS:
            br = b._p
            if br.__class__ is not list:
                return None
            bv = b.value
            if quiet and (calm is None or not calm(a, bv)):
                with np.errstate(divide="ignore", invalid="ignore"):
                    y = rule.function(a, bv)
                    d = d_second(a, bv, y)[1] if need_b else None
            else:
                y = f(a, bv)
                if need_b:
                    if read_b is None:
                        d = d_second(a, bv, y)[1]
                    else:
                        d = a if read_b == 0 else (bv if read_b == 1 else y)
                    if _isfinite(d) and type(y) is _F64:  # term_b inline, the commonest case
                        return new_dual(y, _SCALE[len(br)](br, float(d)), b.tag, ROW)
                else:
                    d = None
            if type(y) is not _F64:
                return None
            return new_dual(y, [0.0] * len(br) if term_b is None else term_b(br, d), b.tag, ROW)
        return None

    impl.__name__ = f"row_{rule.name}"
    return impl


def stack_rows(items: list, tag: Any) -> Dual | None:
    """One 1-D Dual from ``items`` (``np.array([...])`` of scalars): row Duals of ``tag`` and
    plain numbers (constants); ``None`` if anything else is among them or no row Dual is."""
    values: list[Any] = []
    flat: list[float] = []  # the rows, one after another
    k = -1
    constants = []
    i = -1
    for it in items:
        i += 1
        if type(it) is Dual:
            p = it._p
            if it.tag is not tag or p.__class__ is not list:
                return None
            if len(p) != k:
                if k != -1:
                    return None
                k = len(p)
            values.append(it.value)
            flat.extend(p)
        elif type(it) in _CONSTANTS:
            values.append(it)
            constants.append(i)
        else:
            return None
    if k == -1:
        return None
    for i in constants:
        flat[i * k:i * k] = [0.0] * k
    # (no dtype=: the values hold a float64 and the rows floats, so both come out float64)
    return new_dual(np.array(values), np.array(flat).reshape(len(values), k), tag)
