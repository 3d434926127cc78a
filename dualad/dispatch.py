"""The three multiple-dispatch functions every rule extends: ``forward``, ``gradient``, ``backward``.

They belong to a private :class:`plum.Dispatcher`, so rules registered here never merge with
same-named functions of other libraries. Extend them with ``@gradient.dispatch`` and
``@forward.dispatch``; dispatch happens on the operator type (``Method[f]`` /
``Broadcasted[f]``) and on the argument types.

Example:
    >>> import numpy as np, dualad as ad
    >>> def cube(x):
    ...     return x ** 3
    >>> cube = ad.primitive(cube)
    >>> @ad.gradient.dispatch
    ... def gradient(op: ad.Method[cube], grad, output, x):
    ...     return (grad * 3 * x ** 2,)
    >>> float(ad.grad(cube)(2.0))
    12.0
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import plum

from .errors import MissingRuleError
from .operators import Broadcasted, Operator

__all__ = [
    "backward",
    "call_rule",
    "forward",
    "gradient",
    "missing_rule_message",
    "rules_dispatcher",
]

rules_dispatcher = plum.Dispatcher()

# Per type: does every operation on it need a tangent rule (a class attribute
# ``_needs_tangent_rule``, set by forward mode's ``Dual``)? The default ``forward`` refuses
# such values instead of calling the function on them, which would recurse.
_NEEDS_TANGENT_RULE: dict[type, bool] = {}


def call_rule(function: plum.Function, *args: Any, **kwargs: Any) -> Any:
    """Call a plum ``function`` through its type cache, without plum's per-call extras.

    Equivalent to ``function(*args, **kwargs)`` for dualad's rule functions, whose methods
    declare no return-type conversion; it is the hot path of recording and backward passes.
    """
    method, _ = function._resolve_method_with_cache(types=tuple(map(type, args)))
    return method(*args, **kwargs)


def _type_names(args: tuple[Any, ...]) -> str:
    return ", ".join(type(a).__name__ for a in args)


def _function_label(op: Operator) -> str:
    f = getattr(op, "f", None)
    if f is None:
        return type(op).__name__
    owner = getattr(f, "__self__", None)
    name = getattr(f, "__name__", repr(f))
    if owner is not None and hasattr(owner, "nin"):
        return f"np.{owner.__name__}.{name}"
    module = getattr(f, "__module__", None)
    special = sys.modules.get("scipy.special")
    if hasattr(f, "nin") and getattr(np, name, None) is not f and special is not None \
            and getattr(special, name, None) is f:
        return f"scipy.special.{name}"
    if module in (None, "numpy") or hasattr(f, "nin"):
        return f"np.{name}"
    if module in ("numpy.fft", "numpy.linalg"):  # np.fft.fft, np.linalg.eig
        return f"np.{module.removeprefix('numpy.')}.{name}"
    return name


def missing_rule_message(op: Operator, args: tuple[Any, ...], mode: str) -> str:
    """The error text for a call with no rule, including the one method that would add it."""
    kind = "Broadcasted" if isinstance(op, Broadcasted) else "Method"
    label = _function_label(op)
    names = [f"x{i}" if len(args) > 1 else "x" for i in range(len(args))]
    params = ", ".join(names)
    if mode == "reverse":
        short = label.removeprefix("np.")
        grads = ", ".join(f"grad * <d {short}/d {n}>" for n in names)
        method = (
            f"    @ad.gradient.dispatch\n"
            f"    def gradient(op: ad.{kind}[{label}], grad, output, {params}):\n"
            f"        return ({grads},)"
        )
        what = "reverse-mode (gradient)"
    else:
        method = (
            f"    @ad.forward.dispatch\n"
            f"    def forward(op: ad.{kind}[{label}], {params}):  # arguments may be ad.Dual\n"
            f"        return ad.Dual(value, partials, tag)"
        )
        what = "forward-mode (tangent)"
    message = (
        f"dualad has no {what} rule for {label} called with ({_type_names(args)}). "
        f"Add one with a dispatch method, e.g.\n\n{method}\n"
    )
    if kind == "Broadcasted":
        message += (
            f"\nor, for an elementwise function, one line: ad.define_rule({label}, "
            f"args=({', '.join(repr(n) for n in names)},), derivatives=(...))."
        )
    return message


@rules_dispatcher
def gradient(op: Operator, grad: Any, output: Any, *args: Any, **kwargs: Any):
    """Gradients of ``op(*args)`` for the reverse pass: one entry per positional argument."""
    raise MissingRuleError(missing_rule_message(op, args, "reverse"))


@rules_dispatcher
def forward(op: Operator, *args: Any, **kwargs: Any):
    """Evaluate ``op(*args, **kwargs)``; tangent rules are methods of this for ``Dual`` arguments."""
    for a in args:
        t = type(a)
        needs = _NEEDS_TANGENT_RULE.get(t)
        if needs is None:
            needs = _NEEDS_TANGENT_RULE[t] = bool(getattr(t, "_needs_tangent_rule", False))
        if needs:
            # the Dual decides: a result without derivative (np.shape, np.argmax) is fine
            return type(a)._without_tangent_rule(op, args, kwargs)
    # Method[f] / Broadcasted[f] call f directly; a custom Operator subclass is called.
    return getattr(op, "f", op)(*args, **kwargs)


@rules_dispatcher
def backward(node: Any, seed: Any = None):
    """Run the reverse pass from ``node``; leaves' ``.grad`` accumulate."""
    raise TypeError(
        f"dualad.backward expects a graph node (ad.Variable or ad.CachedNode), got "
        f"{type(node).__name__}; differentiate functions with ad.grad(f) instead."
    )
