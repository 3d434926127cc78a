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
from collections.abc import Callable
from typing import Any

import numpy as np
import plum

from ..core.dispatch import forward, gradient
from ..derivatives.kinds import MaskedDerivatives, cotangent_term, rule_kinds

__all__ = ["FastPath", "PLAIN_VALUES", "RECORDS", "SCALAR_TYPES", "fast_path", "register_table_gradient"]

_F64 = np.float64
_ZERO = np.float64(0.0)

#: Value types a scalar pullback takes (a node's value must be a float64 number).
SCALAR_TYPES = frozenset((float, int, np.float64))

# The kinds of derivative a scalar pullback computes (the others go the general way).
_PULLED = frozenset(("expr", "one", "minus_one", "zero"))


class FastPath:
    """How calls of one operator on values of given types are recorded.

    ``evaluate(*values)`` gives the value; ``pulls`` is ``None`` or a tuple indexed by
    the bit mask of the arguments that are graph nodes (bit ``i`` for argument ``i``),
    holding each mask's scalar pullback ``pull(grad, node) -> tuple`` or ``None``.
    """

    __slots__ = ("evaluate", "pulls")

    def __init__(self, evaluate: Callable[..., Any], pulls: tuple | None) -> None:
        self.evaluate = evaluate
        self.pulls = pulls

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
    else:
        evaluate = functools.partial(impl, op)
    pulls = _scalar_pulls(types)
    if pulls is not None:
        evaluate = _calm_evaluate(types[0], evaluate)
    return FastPath(evaluate, pulls)


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


def _scalar_pulls(types: tuple) -> tuple | None:
    """The pullbacks of a table rule's call on float64 numbers, per node mask."""
    op_type, value_types = types[0], types[1:]
    entry = _TABLE_GRADIENTS.get(op_type)
    n = len(value_types)
    if entry is None or not 1 <= n <= 2 or not all(t in SCALAR_TYPES for t in value_types):
        return None
    rule, method = entry
    if len(rule.arg_names) != n:
        return None
    try:  # the table's method must be the one a float64 call dispatches to
        if gradient.resolve((op_type, _F64, _F64, *value_types)) is not method:
            return None
    except (plum.NotFoundLookupError, plum.AmbiguousLookupError):
        return None
    kinds = rule_kinds(rule)
    masked = MaskedDerivatives(rule)
    pulls: list[Any] = [None]
    for mask in range(1, 1 << n):
        needed = tuple(bool(mask >> i & 1) for i in range(n))
        if all(kinds[i] in _PULLED for i in range(n) if needed[i]):
            pulls.append(_pull(kinds, needed, masked, rule.may_warn, rule.quiet_when))
        else:
            pulls.append(None)
    return tuple(pulls)


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
