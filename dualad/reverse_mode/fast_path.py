"""Reverse mode's fast path: how a recorded call is evaluated, and its scalar pullbacks.

One :class:`FastPath` record per tuple ``(operator type, *argument value types)``, read
when a call on graph nodes is recorded (one dispatch lookup per types, cached):

- ``evaluate(*values)``: the call's value (the resolved ``forward`` method, or the
  function itself);
- ``pulls``: for an elementwise rule of the tables called on float64 numbers, one pullback
  per set of arguments that are graph nodes (indexed by that bit mask). A node recorded
  with one keeps it (``node.pull``); the reverse pass then calls ``pull(grad, node)``, which
  reads the values from the node and returns one gradient per argument (``None`` for a
  constant), with no dispatch, no shape checks and no unbroadcasting: every value is a
  float64 number.
- ``array_pulls``: the same for such a rule called on arrays (and numbers), kept as
  ``node.array_pull``: the gradients are summed down to the arguments' shapes
  (:func:`fit_shape`); the reverse pass uses it for a real gradient shaped like the
  node's value.
- ``general_pulls``: for any other call with a ``gradient`` method (``matmul``, ``np.sum``
  with ``axis=``), its resolved method, called with the values read from the node, the
  node's keywords and :func:`gradients_needed` set (also kept as ``node.array_pull``).

A pullback is only made while the table's own ``gradient`` method is the one dispatch
picks for those types: the records are emptied whenever a ``forward`` or ``gradient``
method is registered, so a user's rule always wins.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.float64(0.5))
    >>> y = np.sin(x * 2.0)   # two nodes, each with the pullback of its table rule
    >>> y.backward()
    >>> round(float(x.grad), 6)   # 2 cos(1)
    1.080605
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import plum

from ..core.array_protocol import shape_of
from ..core.dispatch import forward, gradient
from ..core.unbroadcast import unbroadcast
from ..derivatives.kinds import MaskedDerivatives, cotangent_term, rule_kinds

__all__ = ["FastPath", "NEEDS", "PLAIN_VALUES", "RECORDS", "SCALAR_TYPES", "cotangent_side",
           "fast_path", "fit_shape", "general_pull", "register_table_gradient"]

_F64 = np.float64
_ND = np.ndarray
_ZERO = np.float64(0.0)

#: Value types a scalar pullback takes (a node's value must be a float64 number).
SCALAR_TYPES = frozenset((float, int, np.float64))

# The kinds of derivative a scalar pullback computes (the others go the general way).
_PULLED = frozenset(("expr", "one", "minus_one", "zero"))


class FastPath:
    """How calls of one operator on values of given types are recorded.

    ``evaluate(*values)`` gives the value; ``pulls`` is ``None`` or a tuple indexed by
    the bit mask of the arguments that are graph nodes (bit ``i`` for argument ``i``),
    holding each mask's scalar pullback ``pull(grad, node) -> tuple`` or ``None``;
    ``array_pulls`` the same for calls on arrays (a node keeps it as ``array_pull``);
    ``general_pulls`` the pullbacks of other calls, per output type and node mask (see
    :func:`general_pull`).
    """

    __slots__ = ("evaluate", "pulls", "array_pulls", "general_pulls")

    def __init__(self, evaluate: Callable[..., Any], pulls: tuple | None,
                 array_pulls: tuple | None = None) -> None:
        self.evaluate = evaluate
        self.pulls = pulls
        self.array_pulls = array_pulls
        self.general_pulls: dict[tuple[type, int], Any] = {}

    def __repr__(self) -> str:
        masks = [m for m, p in enumerate(self.pulls or ()) if p is not None]
        return f"FastPath(evaluate={getattr(self.evaluate, '__name__', '?')}, pulls={masks})"


# operator type -> (its table rule, the gradient method made from it)
_TABLE_GRADIENTS: dict[type, tuple[Any, Any]] = {}
#: (operator type, *value types) -> its FastPath, or None (the general path); read directly
#: on the hot path (a miss calls :func:`fast_path`).
RECORDS: dict[tuple, FastPath | None] = {}


def _forget() -> None:
    RECORDS.clear()


forward.on_change(_forget)
gradient.on_change(_forget)


def register_table_gradient(op_type: type, rule: Any, method: Callable[..., Any]) -> None:
    """Note that ``method`` is the ``gradient`` method made from the table rule ``rule``
    for ``op_type`` (scalar pullbacks are made from the rule while dispatch picks it)."""
    _TABLE_GRADIENTS[op_type] = (rule, method)
    _forget()


def fast_path(op: Any, types: tuple) -> FastPath | None:
    """The record of ``op`` called on values of ``types`` (``types[0]`` is ``type(op)``),
    or ``None`` when such calls take the general path."""
    try:
        return RECORDS[types]
    except KeyError:
        pass
    record = RECORDS[types] = _build(op, types)
    return record


#: Inside a gradient method run by the reverse pass: ``NEEDS.value`` says which positional
#: arguments need a gradient (see :func:`~dualad.reverse_mode.backward.gradients_needed`).
NEEDS = threading.local()


def general_pull(record: FastPath, op: Any, types: tuple, out_type: type,
                 mask: int) -> Callable[[Any, Any], Any] | None:
    """The pullback of a call recorded with ``record`` (``types``: operator and value
    types) whose value has type ``out_type`` and whose arguments in ``mask`` are graph
    nodes: ``pull(grad, node)`` returns the gradients of the resolved ``gradient`` method,
    checked, or ``None`` when the reverse pass must take its general path instead (a
    gradient of another type, or anything the general path's checks must see)."""
    key = (out_type, mask)
    try:
        return record.general_pulls[key]
    except KeyError:
        pass
    pull = None
    n = len(types) - 1
    if 1 <= n <= 3:
        try:
            impl = gradient.resolve((types[0], out_type, out_type, *types[1:]))
        except Exception:  # noqa: BLE001 - no method: recording says so
            impl = None
        if impl is not None and not getattr(impl, "__dualad_catch_all__", False):
            pull = _general_pull(impl, out_type, tuple(bool(mask >> i & 1) for i in range(n)))
    record.general_pulls[key] = pull
    return pull


def _general_pull(impl: Callable[..., Any], out_type: type,
                  needed: tuple[bool, ...]) -> Callable[[Any, Any], Any]:
    n = len(needed)
    needs = list(needed)
    m0 = needed[0]
    m1 = n > 1 and needed[1]
    rule = getattr(impl, "__dualad_rule__", None)  # a gradient_rule's function: no operator

    def pull(g: Any, node: Any) -> Any:
        if type(g) is not out_type:
            return None
        args = node.args
        if n == 1:
            values: Any = (args[0].output,)
        elif n == 2:
            a, b = args
            values = (a.output if m0 else a, b.output if m1 else b)
        else:
            values = tuple([a.output if m else a for a, m in zip(args, needed)])
        NEEDS.value = needs
        kwargs = node.kwargs
        if rule is not None:
            result = rule(g, node.output, *values, **kwargs) if kwargs else \
                rule(g, node.output, *values)
        else:
            result = impl(node.op, g, node.output, *values, **kwargs) if kwargs else \
                impl(node.op, g, node.output, *values)
        if type(result) is not tuple or len(result) != n:
            return None
        for i in range(n):
            r = result[i]
            if needed[i]:
                v = values[i]
                tr = type(r)
                if tr is _ND:
                    if type(v) is not _ND or r.shape != v.shape or r.dtype.kind != "f":
                        return None
                elif tr is not _F64 or not (type(v) is _F64 or type(v) is float):
                    return None
            elif r is not None:
                result = result[:i] + (None,) + result[i + 1:]  # a constant's: dropped
        return result

    return pull


#: Value types a record is made for (the resolved method is called on them directly).
PLAIN_VALUES = frozenset((float, int, bool, np.float64, np.ndarray, complex, np.complex128))


def _build(op: Any, types: tuple) -> FastPath | None:
    if not all(t in PLAIN_VALUES for t in types[1:]):
        return None
    try:
        impl = forward.resolve(types)
    except Exception:  # noqa: BLE001 - no method, ambiguous: the general path says so
        return None
    if getattr(impl, "__dualad_catch_all__", False):  # no rule for these types: a plain call
        evaluate = getattr(op, "f", None)
        if evaluate is None:
            return None
        # a numpy function on plain values: its implementation, without numpy's dispatch
        evaluate = getattr(evaluate, "_implementation", evaluate)
    else:
        evaluate = functools.partial(impl, op)
    pulls = _scalar_pulls(types)
    if pulls is not None:
        return FastPath(_calm_evaluate(types[0], evaluate), pulls)
    return FastPath(evaluate, None, _array_pulls(types))


def _calm_evaluate(op_type: type, evaluate: Callable[..., Any]) -> Callable[..., Any]:
    """``evaluate``, or, for a table rule with a Python operator exact where its
    ``quiet_when`` holds (``/``), that operator there and ``evaluate`` elsewhere."""
    rule = _TABLE_GRADIENTS[op_type][0]
    calm, exact = rule.quiet_when, rule.quiet_value
    if calm is None or exact is None:
        return evaluate

    def calm_evaluate(a: Any, b: Any) -> Any:
        return exact(a, b) if calm(a, b) else evaluate(a, b)

    calm_evaluate.__name__ = f"calm_{rule.name}"
    return calm_evaluate


def _table_rule(types: tuple, value_types: frozenset, grad_type: type) -> Any:
    """The table rule of ``types`` (operator type, value types) when every value type is in
    ``value_types`` and the table's gradient method is the one a call with gradients of
    ``grad_type`` dispatches to (not a user's), else None."""
    op_type, values = types[0], types[1:]
    entry = _TABLE_GRADIENTS.get(op_type)
    n = len(values)
    if entry is None or not 1 <= n <= 2 or not all(t in value_types for t in values):
        return None
    rule, method = entry
    if len(rule.arg_names) != n:
        return None
    try:
        if gradient.resolve((op_type, grad_type, grad_type, *values)) is not method:
            return None
    except (plum.NotFoundLookupError, plum.AmbiguousLookupError):
        return None
    return rule


def _pulls_per_mask(rule: Any, make: Callable[..., Any]) -> tuple:
    """``make(kinds, needed, masked, rule)`` for each node mask whose needed derivatives
    are all of a pulled kind (index: the mask; None elsewhere)."""
    kinds = rule_kinds(rule)
    masked = MaskedDerivatives(rule)
    n = len(kinds)
    pulls: list[Any] = [None]
    for mask in range(1, 1 << n):
        needed = tuple(bool(mask >> i & 1) for i in range(n))
        if all(kinds[i] in _PULLED for i in range(n) if needed[i]):
            pulls.append(make(kinds, needed, masked, rule))
        else:
            pulls.append(None)
    return tuple(pulls)


def _scalar_pulls(types: tuple) -> tuple | None:
    """The pullbacks of a table rule's call on float64 numbers, per node mask."""
    rule = _table_rule(types, SCALAR_TYPES, _F64)
    if rule is None:
        return None
    return _pulls_per_mask(rule, lambda kinds, needed, masked, rule: _pull(
        kinds, needed, masked, rule.may_warn, rule.quiet_when))


#: Value types an array pullback takes (arrays, and numbers broadcast against them).
ARRAY_TYPES = frozenset((float, int, np.float64, np.ndarray))


def _array_pulls(types: tuple) -> tuple | None:
    """The pullbacks of a table rule's call on arrays (and numbers), per node mask."""
    if _ND not in types[1:]:
        return None
    rule = _table_rule(types, ARRAY_TYPES, _ND)
    if rule is None:
        return None
    return _pulls_per_mask(rule, _array_pull)


def fit_shape(r: Any, a: Any) -> Any:
    """``r`` summed down to the shape of the value ``a`` (numbers and same shapes pass
    unchanged)."""
    ta = type(a)
    if ta is _ND:
        shape = a.shape
    elif ta is _F64 or ta is float or ta is int:
        if type(r) is _F64:
            return r
        shape = ()
    else:
        shape = shape_of(a)
    return r if (r.shape if type(r) is _ND else shape_of(r)) == shape else \
        unbroadcast(r, shape)


def cotangent_side(kind: str) -> Callable[[Any, Any, Any], Any]:
    """``side(grad, d, a)``: the gradient of an argument with value ``a`` for a derivative
    of ``kind`` (``d``: its value, read for ``expr``), summed down to ``a``'s shape; the
    kind switch is :func:`~dualad.derivatives.kinds.cotangent_term`'s."""
    term = cotangent_term(kind)
    if term is None:  # zero
        return lambda grad, d, a: np.zeros(shape_of(a))
    if kind == "expr":
        def side(grad: Any, d: Any, a: Any) -> Any:
            r = grad * d
            if type(r) is _F64 and (type(a) is _F64 or type(a) is float):
                return r
            return fit_shape(r, a)
        return side
    # one / minus_one: the term is linear in grad, so it is summed down first (fewer
    # entries to negate)
    if kind == "one":
        return lambda grad, d, a: fit_shape(grad, a)
    return lambda grad, d, a: term(fit_shape(grad, a), d)


def _array_pull(kinds: tuple, needed: tuple, masked: MaskedDerivatives,
                rule: Any) -> Callable[[Any, Any], tuple]:
    """The pullback of one node mask on arrays: ``pull(grad, node) -> tuple``; a rule whose
    derivatives may divide by zero runs it silenced, as its gradient method does."""
    d = masked.get(needed) if any(k == "expr" for k, m in zip(kinds, needed) if m) else None
    pull = _array_pull_of(kinds, needed, d)
    if not rule.may_warn or d is None:
        return pull
    plain = pull

    def silenced(g: Any, node: Any) -> tuple:
        with np.errstate(divide="ignore", invalid="ignore"):
            return plain(g, node)
    return silenced


def _array_pull_of(kinds: tuple, needed: tuple, d: Any) -> Callable[[Any, Any], tuple]:
    if len(kinds) == 1:
        side = cotangent_side(kinds[0])
        if d is None:
            return lambda g, node: (side(g, None, node.args[0].output),)
        if kinds[0] == "expr":  # elementwise: the gradient has the argument's shape
            return lambda g, node: (g * d(node.args[0].output, node.output)[0],)

        def unary(g: Any, node: Any) -> tuple:
            x = node.args[0].output
            return (side(g, d(x, node.output)[0], x),)
        return unary
    side_a, side_b = cotangent_side(kinds[0]), cotangent_side(kinds[1])
    if needed == (True, True):
        def both(g: Any, node: Any) -> tuple:
            a, b = node.args
            av, bv = a.output, b.output
            if d is None:
                return (side_a(g, None, av), side_b(g, None, bv))
            da, db = d(av, bv, node.output)
            return (side_a(g, da, av), side_b(g, db, bv))
        return both
    if needed == (True, False):
        def first(g: Any, node: Any) -> tuple:
            a, b = node.args
            av = a.output
            return (side_a(g, None if d is None else d(av, b, node.output)[0], av), None)
        return first

    def second(g: Any, node: Any) -> tuple:
        a, b = node.args
        bv = b.output
        return (None, side_b(g, None if d is None else d(a, bv, node.output)[1], bv))
    return second


def _term(kind: str, i: int) -> Callable[[Any, Any], Any]:
    """``term(grad, ds)``: the gradient of argument ``i`` for a derivative of ``kind``
    (``ds``: the derivatives, or None when none is an expression); the kind switch is
    :func:`~dualad.derivatives.kinds.cotangent_term`'s."""
    term = cotangent_term(kind)
    if term is None:  # zero
        return lambda g, ds: _ZERO
    return lambda g, ds: term(g, None if ds is None else ds[i])


def _pull(kinds: tuple, needed: tuple, masked: MaskedDerivatives, quiet: bool,
          calm: Callable[..., bool] | None = None) -> Callable[[Any, Any], tuple]:
    """The scalar pullback of one node mask: ``pull(grad, node) -> tuple``; ``calm``: the
    rule's ``quiet_when`` (arguments on which nothing can warn: no ``np.errstate``)."""
    derivatives = masked.get(needed) if any(
        k == "expr" for k, m in zip(kinds, needed) if m) else None
    if quiet and derivatives is not None:  # derivatives that may divide by zero: silenced
        plain = derivatives
        if calm is None:
            def derivatives(*args: Any) -> Any:
                with np.errstate(divide="ignore", invalid="ignore"):
                    return plain(*args)
        elif len(kinds) == 1:
            def derivatives(x: Any, y: Any) -> Any:
                if calm(x):
                    return plain(x, y)
                with np.errstate(divide="ignore", invalid="ignore"):
                    return plain(x, y)
        else:
            def derivatives(a: Any, b: Any, y: Any) -> Any:
                if calm(a, b):
                    return plain(a, b, y)
                with np.errstate(divide="ignore", invalid="ignore"):
                    return plain(a, b, y)

    if len(kinds) == 1:
        kind = kinds[0]
        if kind == "expr":
            d = derivatives
            return lambda g, node: (g * d(node.args[0].output, node.output)[0],)
        term = _term(kind, 0)
        return lambda g, node: (term(g, None),)
    ka, kb = kinds
    if needed == (True, True):
        if derivatives is None:
            if (ka, kb) == ("one", "one"):
                return lambda g, node: (g, g)
            if (ka, kb) == ("one", "minus_one"):
                return lambda g, node: (g, -g)
            ta, tb = _term(ka, 0), _term(kb, 1)
            return lambda g, node: (ta(g, None), tb(g, None))
        d = derivatives
        if (ka, kb) == ("expr", "expr"):
            def both(g: Any, node: Any) -> tuple:
                a, b = node.args
                da, db = d(a.output, b.output, node.output)
                return (g * da, g * db)
            return both
        ta, tb = _term(ka, 0), _term(kb, 1)

        def mixed(g: Any, node: Any) -> tuple:
            a, b = node.args
            ds = d(a.output, b.output, node.output)
            return (ta(g, ds), tb(g, ds))
        return mixed
    if needed == (True, False):
        if ka == "expr":
            d = derivatives
            return lambda g, node: (g * d(node.args[0].output, node.args[1],
                                          node.output)[0], None)
        if ka == "one":
            return lambda g, node: (g, None)
        ta = _term(ka, 0)
        return lambda g, node: (ta(g, None), None)
    if kb == "expr":
        d = derivatives
        return lambda g, node: (None, g * d(node.args[0], node.args[1].output,
                                            node.output)[1])
    if kb == "one":
        return lambda g, node: (None, g)
    tb = _term(kb, 1)
    return lambda g, node: (None, tb(g, None))
