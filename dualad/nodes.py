"""Graph objects of reverse mode: AbstractNode, LeafNode, Variable, Node, CachedNode.

``Variable`` is a leaf holding a value and accumulating ``.grad``; every numpy call on
nodes returns a ``CachedNode``: the recorded call (a ``Node``: operator, arguments,
keyword arguments) plus its cached ``output``. Nodes hold their inputs, never the reverse,
so a graph lives exactly as long as the caller keeps its output.

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.array([1.0, 2.0]))
    >>> y = np.sum(x * x)
    >>> y.backward()
    >>> x.grad
    array([2., 4.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dispatch import call_rule, forward
from .numpy_bridge import NumpyOverloads, value_observer
from .operators import Method, Operator
from .tracing import Traced, recording_paused

__all__ = [
    "AbstractNode",
    "LeafNode",
    "Variable",
    "Node",
    "CachedNode",
    "MutableNode",
    "register_function_hook",
    "value",
    "primal_at",
    "as_differentiable",
    "is_differentiable_output",
]


def as_differentiable(x: Any, what: str = "argument") -> Any:
    """``x`` as a float64 array (ints and bools promoted); traced values pass unchanged."""
    if isinstance(x, Traced):
        return x
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind in "fiub":
        return arr.astype(np.float64, copy=False) if kind != "f" or arr.dtype != np.float64 \
            else arr
    if kind == "c":
        raise TypeError(
            f"dualad: the {what} is complex ({arr.dtype}, shape {arr.shape}); complex "
            f"differentiation is not supported yet. Split it into real and imaginary parts "
            f"(x.real, x.imag) and differentiate with respect to those."
        )
    raise TypeError(
        f"dualad: cannot differentiate with respect to an {what} of dtype {arr.dtype} "
        f"(shape {arr.shape}, type {type(x).__name__}); pass float arrays or numbers."
    )


def is_differentiable_output(out: Any) -> bool:
    """Whether a call's result can carry a derivative (floats, or tuples holding floats)."""
    t = type(out)
    if t is np.float64 or t is float:
        return True
    if t is np.ndarray:
        return out.dtype.kind in "fc"
    if isinstance(out, (np.floating, Traced)):
        return True
    if isinstance(out, np.ndarray):
        return out.dtype.kind in "fc"
    if isinstance(out, (tuple, list)):
        return any(is_differentiable_output(o) for o in out)
    return False


class AbstractNode(Traced, NumpyOverloads):
    """Base of everything that lives in a reverse-mode graph."""

    __slots__ = ()

    @classmethod
    def _apply(cls, op: Operator, args: tuple, kwargs: dict, level: int) -> Any:
        values = tuple([
            a._primal() if isinstance(a, AbstractNode) and a.level == level
            else (primal_at(a, level) if type(a) in (list, tuple) else a)
            for a in args
        ])
        if kwargs:
            kw = {k: primal_at(v, level) for k, v in kwargs.items()}
            out = call_rule(forward, op, *values, **kw)
        else:
            out = call_rule(forward, op, *values)
        if not is_differentiable_output(out) or recording_paused():
            observer = value_observer.get()
            if observer is not None and not recording_paused():
                return observer.on_result(op, args, kwargs, out, level)
            return out
        if type(op) not in _HAS_GRADIENT:
            _require_gradient_rule(op, out, values)
        if _MUTABLE_MADE:
            args, kwargs = _current_states(args, kwargs)
        node = CachedNode.recorded(op, args, kwargs, out, level)
        if isinstance(out, (tuple, list)):
            items = [
                CachedNode.recorded(_OUTPUT_ITEM, (node, i), {}, o, level)
                if is_differentiable_output(o) else o
                for i, o in enumerate(out)
            ]
            return out._make(items) if hasattr(out, "_fields") else type(out)(items)
        return node

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if kwargs and any(isinstance(v, AbstractNode) for v in kwargs.values()):
            args, kwargs = _traced_keywords_positional(func, args, kwargs)
        hook = _FUNCTION_HOOKS.get(func)
        if hook is not None:
            result = hook(func, args, kwargs)
            if result is not None or func in _IN_PLACE:
                return result
        return NumpyOverloads.__array_function__(self, func, types, args, kwargs)

    def __setitem__(self, key: Any, item: Any) -> None:
        from .numpy_rules.writes import not_writable_message

        raise TypeError(not_writable_message(self, f"x[{key!r}] = ..."))

    def copy(self, order: str = "K") -> Any:
        """A writable copy (``np.copy``)."""
        return np.copy(self)

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> Any:
        """Float dtypes keep the derivative (a copy); other dtypes give the plain value."""
        if np.dtype(dtype).kind == "f":
            return np.copy(self) if copy else self
        return np.asarray(value(self)).astype(dtype, **kwargs)

    def backward(self, seed: Any = None) -> None:
        """Reverse pass from this node; every reached ``Variable.grad`` accumulates.

        ``seed`` defaults to 1 for a scalar output and is required otherwise.
        """
        from .dispatch import backward

        backward(self, seed)


class LeafNode(AbstractNode):
    """Base of leaves: nodes with no inputs."""

    __slots__ = ()


class Variable(LeafNode):
    """A leaf holding ``value``; ``grad`` is ``None`` until a backward pass reaches it.

    Example:
        >>> import numpy as np, dualad as ad
        >>> x = ad.Variable(3.0)
        >>> (x * x).backward(); (x * x).backward()
        >>> float(x.grad)  # accumulates across passes
        12.0
    """

    __slots__ = ("value", "grad", "level", "__weakref__")

    def __init__(self, value: Any, level: int = 0) -> None:
        self.value = as_differentiable(value, "Variable value")
        self.grad: Any = None
        self.level = level

    def _primal(self) -> Any:
        return self.value

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (``grad`` becomes ``None``)."""
        self.grad = None

    def __repr__(self) -> str:
        return f"Variable({self.value!r})"


class Node:
    """A recorded call: ``op`` (an :class:`~dualad.Operator`), ``args`` and ``kwargs``."""

    __slots__ = ("op", "args", "kwargs")

    def __init__(self, op: Operator, args: tuple, kwargs: dict | None = None) -> None:
        self.op = op
        self.args = args
        self.kwargs = kwargs or {}

    def __repr__(self) -> str:
        return f"Node({self.op!r}, {len(self.args)} args)"


class CachedNode(AbstractNode):
    """A :class:`Node` plus its cached ``output``.

    The call's parts are stored flat (``op``, ``args``, ``kwargs``) to keep a recorded
    operation small; ``.node`` gives them as a :class:`Node`.
    """

    __slots__ = ("__weakref__", "args", "kwargs", "level", "op", "output")

    def __init__(self, node: Node, output: Any, level: int = 0) -> None:
        self.op = node.op
        self.args = node.args
        self.kwargs = node.kwargs
        self.output = output
        self.level = level

    @classmethod
    def recorded(cls, op: Operator, args: tuple, kwargs: dict, output: Any,
                 level: int) -> CachedNode:
        """Build a node from a call's parts without an intermediate :class:`Node`."""
        self = cls.__new__(cls)
        self.op = op
        self.args = args
        self.kwargs = kwargs
        self.output = output
        self.level = level
        return self

    @property
    def node(self) -> Node:
        return Node(self.op, self.args, self.kwargs)

    def _primal(self) -> Any:
        return self.output

    def __repr__(self) -> str:
        return f"CachedNode({self.op!r}, output={self.output!r})"


class MutableNode(CachedNode):
    """A graph node that numpy code may write into: ``y[key] = value``.

    Made by ``np.empty_like`` / ``zeros_like`` / ``ones_like`` / ``full_like`` / ``np.copy``
    of a node (see :mod:`dualad.numpy_rules.writes`). ``_state`` is the recorded node of
    its current contents; a write records ``assign(_state, key, value)`` and rebinds this
    node (and ``_state``) to it. Calls that use this node record ``_state`` instead, so they
    keep the contents they saw when later writes happen.
    """

    __slots__ = ("_state",)

    @classmethod
    def from_state(cls, state: CachedNode) -> MutableNode:
        """A writable node whose current contents are ``state``."""
        global _MUTABLE_MADE
        _MUTABLE_MADE = True
        self = cls.recorded(state.op, state.args, state.kwargs, state.output, state.level)
        self._state = state
        return self

    def _rebind(self, state: CachedNode) -> None:
        self.op, self.args, self.kwargs = state.op, state.args, state.kwargs
        self.output, self.level = state.output, state.level
        self._state = state

    def __setitem__(self, key: Any, item: Any) -> None:
        from .numpy_rules.writes import write

        write(self, key, item)


_MUTABLE_MADE = False


def _current_states(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with each MutableNode (also in lists) replaced by its state."""
    found = False
    for a in args:
        t = type(a)
        if t is MutableNode or ((t is list or t is tuple)
                                and any(type(b) is MutableNode for b in a)):
            found = True
            break
    if not found and not any(type(v) is MutableNode for v in kwargs.values()):
        return args, kwargs

    def state(a: Any) -> Any:
        t = type(a)
        if t is MutableNode:
            return a._state
        if t is list or t is tuple:
            return t(b._state if type(b) is MutableNode else b for b in a)
        return a

    return tuple(state(a) for a in args), {k: state(v) for k, v in kwargs.items()}


# numpy function -> handler(func, args, kwargs) run for calls on graph nodes before
# recording; a handler returns None to fall back to recording the call (except for the
# in-place functions in _IN_PLACE, which return None).
_FUNCTION_HOOKS: dict[Any, Any] = {}
_IN_PLACE = {np.copyto, np.put, np.put_along_axis, np.fill_diagonal}


def register_function_hook(func: Any, handler: Any) -> None:
    """Run ``handler(func, args, kwargs)`` for ``func`` called on graph nodes."""
    _FUNCTION_HOOKS[func] = handler


# Keyword-only parameters that stand for positional ones (np.clip's min= is a_min).
_KEYWORD_ALIASES: dict[Any, dict[str, str]] = {np.clip: {"min": "a_min", "max": "a_max"}}
_SIGNATURES: dict[Any, Any] = {}


def _traced_keywords_positional(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Move graph nodes passed by keyword to their positional slots.

    Gradient rules return one gradient per *positional* argument, so a node passed by
    keyword (``np.diff(x, prepend=y)``) would get none; it is passed positionally instead
    (missing earlier parameters take their defaults), or refused with a clear error.
    """
    import inspect

    params = _SIGNATURES.get(func)
    if params is None:
        try:
            params = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            params = []
        _SIGNATURES[func] = params
    aliases = _KEYWORD_ALIASES.get(func, {})
    kwargs = {aliases.get(k, k): v for k, v in kwargs.items()}
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in positional]
    args = list(args)
    for name, v in list(kwargs.items()):
        if not isinstance(v, AbstractNode):
            continue
        if name not in names:
            if any(p.kind == p.VAR_POSITIONAL for p in params) or not params:
                continue  # e.g. np.einsum(..., out=): not a differentiable input
            raise TypeError(
                f"dualad: np.{getattr(func, '__name__', func)}(..., {name}=<traced value>): "
                f"a traced value passed by this keyword would get no gradient; pass it "
                f"positionally."
            )
        index = names.index(name)
        while len(args) < index:  # fill earlier slots: given keywords, else defaults
            slot = names[len(args)]
            if slot in kwargs:
                args.append(kwargs.pop(slot))
                continue
            default = positional[len(args)].default
            if default is inspect.Parameter.empty:
                break
            args.append(default)
        if len(args) == index and name in kwargs:
            args.append(kwargs.pop(name))
    while len(args) < len(names) and names[len(args)] in kwargs:  # following keywords
        args.append(kwargs.pop(names[len(args)]))
    if func is np.clip:  # numpy wants both bounds once one is positional
        args = [None if a is np._NoValue else a for a in args] + [None] * (3 - len(args))
    return tuple(args), kwargs


# Operator types known to have a gradient rule (checked once per type when recording).
_HAS_GRADIENT: set[type] = set()


def _require_gradient_rule(op: Operator, out: Any, values: tuple) -> None:
    """Raise MissingRuleError now (not at backward time) when ``op`` has no gradient rule."""
    import plum

    from .dispatch import gradient, missing_rule_message
    from .errors import MissingRuleError

    types = (type(op), type(out), type(out)) + tuple(map(type, values))
    try:
        method, _ = gradient._resolve_method_with_cache(types=types)
    except plum.NotFoundLookupError:
        method = gradient._f
    except plum.AmbiguousLookupError:
        method = None
    if method is not None and _is_fallback(gradient, method):
        from .rule_generator import load_deferred_tables

        if load_deferred_tables():  # e.g. scipy.special's table, imported after dualad
            _require_gradient_rule(op, out, values)
            return
        method = gradient._f
    if method is gradient._f:
        raise MissingRuleError(missing_rule_message(op, values, "reverse"))
    _HAS_GRADIENT.add(type(op))


def _is_fallback(function: Any, method: Any) -> bool:
    """Whether ``method`` is one of dualad's catch-all methods for a whole operator family
    (such a method only raises, after trying to load deferred rules tables)."""
    if getattr(method, "__module__", None) != "dualad.rule_generator":
        return False
    from .operators import Broadcasted

    for m in function.methods:
        if m.implementation is method:
            return m.signature.types[0] in (Operator, Broadcasted, Method)
    return False


def primal_at(x: Any, level: int) -> Any:
    """The value ``x`` stands for at ``level``: a node's own value, else ``x`` itself."""
    if isinstance(x, AbstractNode):
        if x.level == level:
            return x._primal()
        return x
    if type(x) in (list, tuple):
        return type(x)([primal_at(a, level) for a in x])
    return x


def value(x: Any) -> Any:
    """The numpy value of a node or ``Dual`` (innermost first), or ``x`` itself.

    Example:
        >>> import numpy as np, dualad as ad
        >>> ad.value(ad.Variable(2.0) * 3)
        array(6.)
    """
    while isinstance(x, Traced):
        x = x._primal()
    return x


def _output_item(outputs: tuple, index: int) -> Any:
    """Item ``index`` of a multi-output call's result (its own recorded operator)."""
    return outputs[index]


_OUTPUT_ITEM = Method.instance(_output_item)
