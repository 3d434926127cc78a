"""The reverse pass: iterative topological order, one ``gradient`` call per recorded node.

Nothing here recurses, so graphs of any depth work. Each node's gradient is complete
before it is propagated (reverse topological order), inputs that need no gradient are
skipped, and what each rule returns is checked (count and shapes).

Example:
    >>> import numpy as np, dualad as ad
    >>> x = ad.Variable(np.array([1.0, 2.0, 3.0]))
    >>> y = x * 2.0
    >>> y.backward(np.ones(3))
    >>> x.grad
    array([2., 2., 2.])
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Iterable
from heapq import heappop, heappush
from typing import Any

import numpy as np

from ..core.array_protocol import shape_of
from ..core.dispatch import backward, forward, gradient
from ..core.errors import DualadError, MissingRuleError, RuleError, ShapeError
from ..core.operators import Method
from .fast_path import NEEDS
from .graph import (
    _OUTPUT_ITEM,
    AbstractNode,
    AliasedNode,
    CachedNode,
    LeafNode,
    Variable,
    _output_item,
    primal_at,
)

__all__ = ["topological_order", "reverse_pass", "default_seed"]

_SEQUENCES = (list, tuple)
_SEQ = operator.attrgetter("seq")
_F64 = np.float64
_ND = np.ndarray


def _parents(node: AbstractNode, level: int) -> list[AbstractNode]:
    if not isinstance(node, CachedNode):
        return []
    found = []
    for a in node.args:
        if isinstance(a, AbstractNode):
            if a.level == level:
                found.append(a)
        elif type(a) in (list, tuple):
            found.extend(b for b in a if isinstance(b, AbstractNode) and b.level == level)
    for a in node.kwargs.values():
        if isinstance(a, AbstractNode) and a.level == level:
            found.append(a)
    return found


def topological_order(roots: Iterable[AbstractNode]) -> list[AbstractNode]:
    """Nodes reachable from ``roots`` (same level), inputs before the calls that use them.

    Leaves come first; then the calls by recording number (``seq``: every node's inputs
    were recorded before it), found by an iterative walk and one sort.
    """
    leaves: list[AbstractNode] = []
    calls: list[CachedNode] = []
    visited: set[int] = set()
    for root in roots:
        if id(root) in visited:
            continue
        level = root.level
        visited.add(id(root))
        stack = [root]
        while stack:
            node = stack.pop()
            if not isinstance(node, CachedNode):
                leaves.append(node)
                continue
            calls.append(node)
            # a node with a scalar pullback: its node arguments are its parents
            parents = node.args if node.pull is not None else _parents(node, level)
            for p in parents:
                if id(p) not in visited and isinstance(p, AbstractNode):
                    visited.add(id(p))
                    stack.append(p)
    calls.sort(key=_SEQ)
    return leaves + calls  # type: ignore[operator]


def default_seed(output: Any) -> Any:
    """The seed of a reverse pass started without one: 1 for a scalar output."""
    shape = shape_of(output)
    if shape != ():
        raise ShapeError(
            f"backward() needs a seed for a non-scalar output of shape {shape}: pass "
            f"node.backward(seed) with seed.shape == {shape} (e.g. np.ones({shape})), "
            f"or reduce the output to a scalar first."
        )
    return np.float64(1.0)


def _check_seed(output: Any, seed: Any) -> Any:
    out_shape, seed_shape = shape_of(output), shape_of(seed)
    if out_shape != seed_shape:
        raise ShapeError(
            f"the seed has shape {seed_shape} but the output it seeds has shape {out_shape}; "
            f"pass a seed shaped like the output."
        )
    return seed


def _accumulate(old: Any, new: Any) -> Any:
    if old is None:
        return new
    if new is None:
        return old
    if isinstance(old, tuple):
        return tuple(_accumulate(a, b) for a, b in zip(old, new))
    return old + new


def _with_zeros(grad: Any, output: Any) -> Any:
    """Fill missing entries of a multi-output gradient with zeros shaped like the outputs."""
    if isinstance(output, (tuple, list)):
        if grad is None:
            grad = (None,) * len(output)
        items = [np.zeros_like(o) if g is None else g for g, o in zip(grad, output)]
        return type(output)(items) if type(output) in (tuple, list) else tuple(items)
    return grad


def _check_rule_result(node: CachedNode, result: Any, values: Any):
    op = node.op
    if not isinstance(result, tuple):
        raise RuleError(
            f"the gradient rule for {op!r} returned {type(result).__name__}; it must return "
            f"a tuple with one gradient per positional argument ({len(values)}), "
            f"e.g. return (grad * dx,)."
        )
    if len(result) != len(values):
        raise RuleError(
            f"the gradient rule for {op!r} returned {len(result)} gradient(s) for "
            f"{len(values)} positional argument(s); return one per argument "
            f"(None for an argument that is not differentiable)."
        )
    return result


def _check_shape(op: Any, index: int, g: Any, arg_value: Any) -> None:
    gs, vs = shape_of(g), shape_of(arg_value)
    if gs != vs:
        raise ShapeError(
            f"the gradient rule for {op!r} returned a gradient of shape {gs} for argument "
            f"{index}, whose shape is {vs}; the rule must return gradients shaped like its "
            f"arguments (sum over broadcast axes with ad.unbroadcast)."
        )


def _complex_for_real(g: Any, v: Any) -> bool:
    """Whether ``g`` is a complex gradient for the real value ``v`` (then its real part
    is the gradient: complex intermediates in a function of real inputs)."""
    if type(g) is np.float64:
        return False
    dtype = getattr(g, "dtype", None)
    if dtype is None:
        return type(g) is complex and not isinstance(v, complex)
    if dtype.kind != "c":
        return False
    vtype = getattr(v, "dtype", None)
    return not (isinstance(v, complex) or (vtype is not None and vtype.kind == "c"))


def _builtin_rule(op: Any, g: Any, output: Any, values: list, kwargs: dict) -> bool:
    """Whether the gradient rule that ran is dualad's own rather than a user's (the error
    for its ``None`` for a traced argument says what is not differentiated)."""
    types = (type(op), type(g), type(output)) + tuple(map(type, values))
    return gradient.is_builtin_implementation(gradient.resolve(types))


def _argument_name(op: Any, index: int) -> str:
    """``'name'`` of positional argument ``index`` of ``op``'s function, when known."""
    try:
        params = [p for p in inspect.signature(getattr(op, "f", op)).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return f"'{params[index].name}' (argument {index})" if index < len(params) else \
        f"argument {index}"


def no_gradient_error(op: Any, index: int, values: list, builtin: bool) -> DualadError:
    """The error for a rule's ``None`` gradient for an argument that depends on the
    differentiated variables: the derivative is undefined there, never a silent zero."""
    if builtin:
        name = getattr(getattr(op, "f", None), "__name__", None) or repr(op)
        return MissingRuleError(
            f"dualad: {name} is not differentiated with respect to its "
            f"{_argument_name(op, index)}, but a value that depends on the variables being "
            f"differentiated was passed there; its derivative would be silently dropped. "
            f"Pass a constant there (ad.value(...) drops the derivative deliberately), or "
            f"write the computation with functions that differentiate it."
        )
    return _no_gradient_error(op, index, values)


def _no_gradient_error(op: Any, index: int, values: list) -> RuleError:
    """A user's rule returned ``None`` for an argument that depends on the differentiated
    variables: the derivative is undefined there, never a silent zero."""
    kinds = ", ".join(type(v).__name__ for v in values)
    return RuleError(
        f"the gradient rule for {op!r} (called with {kinds}) returned None for argument "
        f"{index}, which depends on the variables being differentiated: the rule gives "
        f"no derivative for it. Return its gradient from the rule (zeros if it is truly "
        f"constant), or pass that argument as a constant (ad.value(...))."
    )


_NEEDS = NEEDS


def gradients_needed() -> list[bool] | None:
    """Inside a gradient rule run by the reverse pass: which positional arguments need a
    gradient (the others are constants, and the rule may return None for them without
    computing anything); None when the rule is called some other way.

    Read it first thing in the rule (a rule that runs a reverse pass of its own resets it).
    """
    return getattr(_NEEDS, "value", None)


def reverse_pass(seeds: dict[int, tuple[AbstractNode, Any]],
                 leaves: dict[int, AbstractNode] | None = None) -> dict[int, Any]:
    """Propagate ``{id(node): (node, seed)}`` back; returns ``{id(leaf): gradient}``.

    All seeded nodes must share one level. Leaves are Variables of that level; when
    ``leaves`` is given, the leaves reached are added to it as ``{id(leaf): leaf}``.

    Nodes are visited by decreasing recording number (``seq``: a node's inputs were
    recorded before it), from a heap of the nodes a gradient has reached: each node's
    gradient is complete when it is visited, and no topological sort runs first.
    """
    grads: dict[int, Any] = {}
    reached: dict[int, AbstractNode] = {}  # leaves (and other non-call nodes) reached
    heap: list[tuple[int, int, CachedNode]] = []
    for key, (node, seed) in seeds.items():
        if type(node) is AliasedNode:  # written into after the call that made it
            node = node.target
            key = id(node)
        prev = grads.get(key)
        grads[key] = _accumulate(prev, seed)
        if prev is None:
            if isinstance(node, CachedNode):
                heappush(heap, (-node.seq, key, node))
            else:
                reached[key] = node
    pop = grads.pop
    get = grads.get
    resolved = gradient._resolved
    try:
        while heap:
            _, key, node = heappop(heap)
            g = pop(key, None)
            if g is None:
                continue
            pull = node.pull
            if pull is None:
                pull = node.array_pull  # a table rule on arrays: for a real gradient
                if pull is not None and type(g) is not _F64 and not (
                        type(g) is _ND and g.dtype.kind == "f"
                        and g.shape == node.output.shape):
                    pull = None
            elif type(g) is not _F64:
                pull = None
            results = pull(g, node) if pull is not None else None
            if results is not None:  # no dispatch; gradients shaped like the arguments
                args = node.args
                i = 0
                for r in results:
                    if r is not None:
                        arg = args[i]
                        key = id(arg)
                        prev = get(key)
                        if prev is None:
                            grads[key] = r
                            # (an argument may have become an AliasedNode since: written
                            # into after this call, it still passes the gradient on)
                            if type(arg) is CachedNode or isinstance(arg, CachedNode):
                                heappush(heap, (-arg.seq, key, arg))
                            else:
                                reached[key] = arg
                        else:
                            grads[key] = prev + r
                    i += 1
                continue
            level = node.level
            args = node.args
            values = []
            needs = []
            needed = False
            for a in args:
                if isinstance(a, AbstractNode) and a.level == level:
                    values.append(a.output if type(a) is CachedNode or type(a) is AliasedNode
                                  else a._primal())
                    needs.append(True)
                    needed = True
                elif type(a) in _SEQUENCES:
                    values.append(_recorded_at(a, level))
                    some = any(isinstance(b, AbstractNode) and b.level == level for b in a)
                    needs.append(some)
                    needed = needed or some
                else:
                    values.append(a)
                    needs.append(False)
            kwargs = node.kwargs
            if not needed and not (kwargs and any(
                    isinstance(v, AbstractNode) and v.level == level for v in kwargs.values())):
                continue
            op = node.op
            output = node.output
            to = type(output)
            if to is not _F64 and to is not _ND and (to in _SEQUENCES
                                                     or isinstance(output, tuple)):
                g = _with_zeros(g, output)
            _NEEDS.value = needs
            if kwargs:
                kw = {k: _recorded_at(v, level) for k, v in kwargs.items()}
                result = gradient(op, g, output, *values, **kw)
            else:
                impl = resolved.get((type(op), type(g), type(output), *map(type, values)))
                result = impl(op, g, output, *values) if impl is not None \
                    else gradient(op, g, output, *values)
            if type(result) is not tuple or len(result) != len(values):
                _check_rule_result(node, result, values)
            for i, r in enumerate(result):
                if r is None:
                    if needs[i]:
                        raise no_gradient_error(op, i, values,
                                                _builtin_rule(op, g, output, values, kwargs))
                    continue
                if not needs[i]:
                    continue
                arg = args[i]
                if isinstance(arg, AbstractNode):
                    v = values[i]
                    tr = type(r)
                    if tr is _F64 and type(v) is _F64:
                        pass  # two numpy scalars always agree
                    elif tr is _ND and type(v) is _ND and r.dtype.kind != "c":
                        if r.shape != v.shape and op is not _OUTPUT_ITEM:
                            _check_shape(op, i, r, v)
                    else:
                        if op is not _OUTPUT_ITEM:
                            _check_shape(op, i, r, v)
                        if _complex_for_real(r, v):
                            r = np.real(r)  # a real input gets the real part (complex values)
                    key = id(arg)
                    prev = get(key)
                    if prev is None:
                        grads[key] = r
                        if isinstance(arg, CachedNode):
                            heappush(heap, (-arg.seq, key, arg))
                        else:
                            reached[key] = arg
                    else:
                        grads[key] = _accumulate(prev, r)
                else:  # a list or tuple holding nodes
                    _send_to_items(op, i, arg, r, values[i], level, grads, heap, reached)
    finally:
        _NEEDS.value = None
    leaf_grads: dict[int, Any] = {}
    for key, node in reached.items():
        g = grads.get(key)
        if g is not None and isinstance(node, LeafNode):
            leaf_grads[key] = g
            if leaves is not None:
                leaves[key] = node
    return leaf_grads


def _recorded_at(x: Any, level: int) -> Any:
    """The value ``x`` had when the call that uses it was recorded: :func:`primal_at`, but
    an aliased node (written into later) gives its recorded output."""
    if type(x) is AliasedNode:
        return x.output if x.level == level else x
    if type(x) in _SEQUENCES and any(type(a) is AliasedNode for a in x):
        return type(x)([_recorded_at(a, level) for a in x])
    return primal_at(x, level)


def _send_to_items(op: Any, i: int, arg: Any, r: Any, values: Any, level: int, grads: dict,
                   heap: list, reached: dict) -> None:
    """Pass the gradients ``r`` of a list or tuple argument ``arg`` on to its nodes."""
    for j, (a, rj) in enumerate(zip(arg, r)):
        if isinstance(a, AbstractNode) and a.level == level and rj is not None:
            _check_shape(op, i, rj, values[j])
            if _complex_for_real(rj, values[j]):
                rj = np.real(rj)
            key = id(a)
            prev = grads.get(key)
            if prev is not None:
                grads[key] = _accumulate(prev, rj)
                continue
            grads[key] = rj
            if isinstance(a, CachedNode):
                heappush(heap, (-a.seq, key, a))
            else:
                reached[key] = a


@backward.dispatch(builtin=True)
def backward(node: AbstractNode, seed: Any = None):  # noqa: F811
    """Reverse pass from ``node``; every reached ``Variable.grad`` accumulates."""
    seed = default_seed(node._primal()) if seed is None else _check_seed(node._primal(), seed)
    leaves: dict[int, AbstractNode] = {}
    for key, g in reverse_pass({id(node): (node, seed)}, leaves).items():
        leaf = leaves[key]
        if isinstance(leaf, Variable):
            leaf.grad = _accumulate(leaf.grad, g)


@gradient.dispatch(builtin=True)
def gradient(op: Method[_output_item], grad: Any, output: Any, outputs: Any,  # noqa: F811
             index: Any):
    """The gradient of picking item ``index`` of a multi-output call."""
    return (tuple(grad if j == index else None for j in range(len(outputs))), None)


@forward.dispatch(builtin=True)
def forward(node: CachedNode):  # noqa: F811
    """Re-evaluate ``node``'s graph from its leaves' current values; returns the new output."""
    for n in topological_order([node]):
        if isinstance(n, CachedNode):
            values = tuple([_recorded_at(a, n.level) for a in n.args])
            kw = {k: _recorded_at(v, n.level) for k, v in n.kwargs.items()}
            n.output = forward(n.op, *values, **kw)
    return node.output
