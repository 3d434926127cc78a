"""Recording: ``f`` run once on graph nodes, its value-dependent reads noted as guards,
and the graph linearised into a :class:`~dualad.tape.program.Program`.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> tape = record(lambda x: np.sum(x) if x[0] > 0 else -np.sum(x), np.ones(2))
    >>> tape.recordings
    1
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import plum

from ..core.arguments import value as plain_value
from ..core.array_protocol import lift_object_array, shape_of, value_observer
from ..core.dispatch import forward as forward_rules
from ..core.dispatch import gradient as gradient_rules
from ..core.operators import Broadcasted, Method, Operator
from ..core.tracing import Traced
from ..core.trees import tree_flatten
from ..derivatives.registry import get_rule, operator_type
from ..reverse_mode.backward import topological_order
from ..reverse_mode.elementwise import register_rule_gradient
from ..reverse_mode.graph import AliasedNode, CachedNode, MutableNode, Variable
from .program import Operation, Program

__all__ = ["MAX_RECORDINGS", "TapeRetraceWarning", "ValueNode", "Recorder", "ArgumentVariable",
           "is_float_leaf", "constant_key", "build_program"]

_TABLE_MODULE = register_rule_gradient.__module__

#: How many recordings a tape keeps per input signature (different branches).
MAX_RECORDINGS = 8


class TapeRetraceWarning(UserWarning):
    """A tape recorded its function again: a guard failed or the input shapes changed."""


# -- recording ------------------------------------------------------------------------------


class ValueNode(CachedNode):
    """A result without derivative (a comparison, an index) computed from traced values.

    Made only while a tape records, so that the program recomputes it on replay; reading
    its value in Python (``bool``, ``int``, ``float``, an index, plain numpy) is a guard.
    """

    __slots__ = ()
    without_derivative = True  # as its result: see core.arguments.is_differentiable_output

    def __bool__(self) -> bool:
        return _read(self, "bool", bool(self.output))

    def __int__(self) -> int:
        return _read(self, "int", int(self.output))

    def __float__(self) -> float:
        return _read(self, "float", float(self.output))

    def __index__(self) -> int:
        return _read(self, "index", operator.index(self.output))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.array(self.output, copy=True)
        _read(self, "value", out)
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> Any:
        if np.dtype(dtype).kind == "f":
            return super().astype(dtype, copy, **kwargs)
        return np.asarray(self.__array__()).astype(dtype, **kwargs)

    def item(self, *args: Any) -> Any:
        return self.__array__().item(*args)

    # ``~``, ``&``, ``|``, ``^`` of masks: numpy's bitwise ufuncs on booleans are the
    # logical ones (which compiled programs know as predicates)
    def __invert__(self) -> Any:
        return (np.logical_not if _is_mask(self) else np.invert)(self)

    def __and__(self, other: Any) -> Any:
        return _logical(np.logical_and, np.bitwise_and, self, other)

    def __rand__(self, other: Any) -> Any:
        return _logical(np.logical_and, np.bitwise_and, other, self)

    def __or__(self, other: Any) -> Any:
        return _logical(np.logical_or, np.bitwise_or, self, other)

    def __ror__(self, other: Any) -> Any:
        return _logical(np.logical_or, np.bitwise_or, other, self)

    def __xor__(self, other: Any) -> Any:
        return _logical(np.logical_xor, np.bitwise_xor, self, other)

    def __rxor__(self, other: Any) -> Any:
        return _logical(np.logical_xor, np.bitwise_xor, other, self)

    def tolist(self) -> Any:
        return self.__array__().tolist()

    def __repr__(self) -> str:
        return f"ValueNode({self.op!r}, output={self.output!r})"


def _is_mask(x: Any) -> bool:
    """A boolean value: a recorded comparison's result, or a plain boolean."""
    if isinstance(x, ValueNode):
        x = x.output
    elif isinstance(x, Traced):
        return False
    return isinstance(x, (bool, np.bool_)) or getattr(x, "dtype", None) == np.bool_


def _logical(logical: Any, bitwise: Any, a: Any, b: Any) -> Any:
    return (logical if _is_mask(a) and _is_mask(b) else bitwise)(a, b)


def _read(node: ValueNode, kind: str, outcome: Any) -> Any:
    observer = value_observer.get()
    if isinstance(observer, Recorder):
        observer.guard(node, kind, outcome)
    return outcome


_WRAPPED_RESULTS = (np.ndarray, np.generic, bool)


def item_of(outputs: tuple, index: int) -> Any:
    """Item ``index`` of a recorded tuple of index arrays."""
    return outputs[index]


_ITEM = Method.instance(item_of)


def _state(a: Any) -> Any:
    """A writable node's current contents (later writes must not change what was read)."""
    if type(a) is MutableNode or type(a) is AliasedNode:
        return a._state
    if type(a) in (list, tuple):
        return type(a)(b._state if type(b) in (MutableNode, AliasedNode) else b for b in a)
    return a


class Recorder:
    """The value observer of one recording: collects guards, wraps derivative-less results."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.guards: list[tuple[Any, str, Any]] = []

    def guard(self, node: Any, kind: str, outcome: Any) -> None:
        if getattr(node, "level", None) == self.level:
            self.guards.append((node, kind, outcome))

    def on_bool(self, node: Any, outcome: bool) -> None:
        self.guard(node, "bool", outcome)

    def on_result(self, op: Operator, args: tuple, kwargs: dict, out: Any, level: int) -> Any:
        if level != self.level:
            return out
        if type(out) is tuple and out and all(isinstance(o, (np.ndarray, np.generic))
                                              for o in out):
            return self.on_results(op, args, kwargs, out, level)
        if not isinstance(out, _WRAPPED_RESULTS):
            return out
        args = tuple(_state(a) for a in args)
        kwargs = {k: _state(v) for k, v in kwargs.items()}
        return ValueNode.recorded(op, args, kwargs, out, level)

    def on_results(self, op: Operator, args: tuple, kwargs: dict, out: tuple, level: int
                   ) -> tuple:
        """A tuple of index arrays or numbers (``np.nonzero``, ``np.where(cond)``,
        ``np.unravel_index``): each item a value of the program, recomputed on replay, not
        a constant of the recording."""
        args = tuple(_state(a) for a in args)
        kwargs = {k: _state(v) for k, v in kwargs.items()}
        node = ValueNode.recorded(op, args, kwargs, out, level)
        return tuple(ValueNode.recorded(_ITEM, (node, i), {}, o, level)
                     for i, o in enumerate(out))


class ArgumentVariable(Variable):
    """An array argument of a function recorded for its values (``ad.jit(f)``): an
    in-place operator (``x += v``) or an item assignment (``x[i] = v``) would change the
    caller's array in numpy, which the compiled code (computing on copies) would not, so
    they are refused with what to write instead. Differentiating transforms (``ad.grad``,
    ...) do not change the caller's array eagerly either: their arguments are plain
    :class:`~dualad.reverse_mode.graph.Variable`s, and ``x += v`` rebinds ``x``.

    Example:
        >>> import numpy as np, dualad as ad
        >>> def f(x):
        ...     x += 1.0
        ...     return x * x
        >>> ad.jit(f)(np.ones(2))
        Traceback (most recent call last):
        ...
        TypeError: ad.jit(f): the function writes into its argument (x += ...); numpy ...
    """

    __slots__ = ("owner",)

    def _refuse(self, what: str) -> TypeError:
        return TypeError(
            f"{self.owner}: the function writes into its argument ({what}); numpy would "
            f"change the caller's array, which compiled code does not (it computes on "
            f"copies), so the results would differ from the next call on. Make a new array "
            f"(x = x + ..., np.where(...)), or copy the argument first (x = np.copy(x)); "
            f"call the function without ad.jit to change the caller's array.")

    def __iadd__(self, other: Any) -> Any:
        raise self._refuse("x += ...")

    def __isub__(self, other: Any) -> Any:
        raise self._refuse("x -= ...")

    def __imul__(self, other: Any) -> Any:
        raise self._refuse("x *= ...")

    def __itruediv__(self, other: Any) -> Any:
        raise self._refuse("x /= ...")

    def __ifloordiv__(self, other: Any) -> Any:
        raise self._refuse("x //= ...")

    def __imod__(self, other: Any) -> Any:
        raise self._refuse("x %= ...")

    def __ipow__(self, other: Any) -> Any:
        raise self._refuse("x **= ...")

    def __imatmul__(self, other: Any) -> Any:
        raise self._refuse("x @= ...")

    def __setitem__(self, key: Any, item: Any) -> None:
        raise self._refuse("x[...] = ...")


def is_float_leaf(x: Any) -> bool:
    if isinstance(x, Traced):
        return True
    if isinstance(x, float):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in "fc"
    return False


def constant_key(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    try:
        hash(x)
    except TypeError:
        return ("object", id(x))
    return (type(x), x)


def _resolved(function: Any, types: tuple[type, ...]) -> Any:
    """The method of the rule function ``function`` for ``types`` (its public, cached
    ``resolve``), or None when none (or several) match."""
    try:
        return function.resolve(types)
    except (plum.NotFoundLookupError, plum.AmbiguousLookupError):
        return None


def _resolve_forward(op: Operator, values: Sequence[Any]) -> Callable[..., Any]:
    method = _resolved(forward_rules, (type(op),) + tuple(map(type, values)))
    if method is None:
        return functools.partial(forward_rules, op)
    if method is _resolved(forward_rules, (Operator,)):  # the catch-all: a plain call
        return getattr(op, "f", op)
    return functools.partial(method, op)


def _resolve_gradient(op: Operator, output: Any, values: Sequence[Any]) -> Callable[..., Any]:
    types = (type(op), type(output), type(output)) + tuple(map(type, values))
    method = _resolved(gradient_rules, types)
    if method is None:
        return functools.partial(gradient_rules, op)
    return functools.partial(method, op)




def _table_rule(op: Operator, gfn: Any) -> Any:
    """The rules-table entry whose gradient method ``gfn`` calls, if it is one."""
    f = getattr(op, "f", None)
    method = getattr(gfn, "func", None)
    if f is None or method is None:
        return None
    rule = get_rule(f)
    if rule is None or operator_type(rule.function) is not type(op):
        return None
    if getattr(method, "__module__", None) != _TABLE_MODULE or \
            getattr(method, "__name__", None) != f"gradient_{rule.name}":
        return None  # a user's own method for this function replaced the table's
    return rule



def _encode(a: Any, slot_of: dict[int, int]) -> tuple[bool, Any]:
    """``(True, slot)`` for a recorded node, else ``(False, constant)``."""
    if isinstance(a, CachedNode) or isinstance(a, Variable):
        s = slot_of.get(id(a))
        if s is not None:
            return True, s
    return False, a


def _is_complex(v: Any) -> bool:
    """Whether ``v`` (a value, or a list / tuple of values) holds complex numbers."""
    if type(v) in (list, tuple):
        return any(_is_complex(item) for item in v)
    v = plain_value(v)
    dtype = getattr(v, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype.kind == "c"
    return isinstance(v, complex)


def _real_args(e: Operation, values: list[Any], output: Any) -> tuple:
    """The recorded arguments of ``e`` that are real where the call involves complex
    values (its output or another argument): their gradients are real parts."""
    outs = output if isinstance(output, (tuple, list)) else (output,)
    items: list[tuple[int, Any]] = []
    involved = any(_is_complex(o) for o in outs)
    refs = {pos for pos, _ in e.refs}
    seqs = {pos: [j for j, _ in its] for pos, _, its in e.seqs}
    for pos, v in enumerate(values):
        if pos in refs:
            if _is_complex(v):
                involved = True
            else:
                items.append((pos, None))
        elif pos in seqs:
            real = [j for j in seqs[pos] if not _is_complex(v[j])]
            involved = involved or len(real) < len(seqs[pos])
            if real:
                items.append((pos, tuple(real)))
        elif _is_complex(v):
            involved = True
    return tuple(items) if involved else ()


# (operator type, output type, *argument value types) -> (fn, gfn, rule) of an operation
# of Method / Broadcasted (stateless operators): resolved once per signature, not per
# recorded operation; emptied whenever a rule is registered.
_SIGNATURES: dict[tuple, tuple[Any, Any, Any]] = {}


def _forget_signatures() -> None:
    _SIGNATURES.clear()


forward_rules.on_change(_forget_signatures)
gradient_rules.on_change(_forget_signatures)

_REAL_SCALARS = frozenset((float, int, bool, np.float64))
_F64 = np.float64
_ND = np.ndarray


def _resolve(op: Operator, output: Any, values: list[Any], differentiable: bool
             ) -> tuple[Any, Any, Any]:
    """``(fn, gfn, rule)`` of one recorded operation (cached per signature)."""
    cacheable = isinstance(op, (Method, Broadcasted))
    if cacheable:
        key = (type(op), type(output), differentiable, *map(type, values))
        found = _SIGNATURES.get(key)
        if found is not None:
            return found
    fn = _resolve_forward(op, values)
    gfn = _resolve_gradient(op, output, values) if differentiable else None
    rule = _table_rule(op, gfn) if differentiable else None
    if cacheable:
        _SIGNATURES[key] = (fn, gfn, rule)
    return fn, gfn, rule


def _all_real(output: Any, values: list[Any]) -> bool:
    """Whether the output and every argument value are real (a quick check; False means
    "look closer", see :func:`_real_args`)."""
    to = type(output)
    if not (to is _F64 or to is _ND and output.dtype.kind != "c"):
        return False
    for v in values:
        t = type(v)
        if t in _REAL_SCALARS or t is _ND and v.dtype.kind != "c":
            continue
        return False
    return True


# scalar pullback -> (fn, gfn, rule) of its calls (a pullback stands for one operator,
# its value types and which arguments are nodes)
_PULLED: dict[Any, tuple[Any, Any, Any]] = {}
gradient_rules.on_change(_PULLED.clear)
forward_rules.on_change(_PULLED.clear)
_SCALAR_SHAPES = ([()], [(), ()])


def _scalar_operation(node: CachedNode, pull: Any, slot_of: dict[int, int]) -> Operation:
    """The operation of a node recorded with a scalar pullback: every value a float64
    number, no keywords, its arguments nodes (of this recording) or numbers."""
    e = Operation()
    e.op = node.op
    args = node.args
    sa = sb = None
    if len(args) == 2:
        a, b = args
        sa, sb = slot_of.get(id(a)), slot_of.get(id(b))
    if sa is not None or sb is not None:
        if sa is None:
            e.template, e.refs = [a, None], ((1, sb),)
        elif sb is None:
            e.template, e.refs = [None, b], ((0, sa),)
        else:
            e.template, e.refs = [None, None], ((0, sa), (1, sb))
    else:
        template = list(args)
        refs = []
        for pos, a in enumerate(args):
            s = slot_of.get(id(a))
            if s is not None:
                template[pos] = None
                refs.append((pos, s))
        e.template = template
        e.refs = tuple(refs)
    e.seqs = ()
    e.kw = {}
    e.kw_refs = ()
    e.differentiable = True
    e.multi = False
    found = _PULLED.get(pull)
    if found is None:
        values = [a._primal() if isinstance(a, (CachedNode, Variable)) else a for a in args]
        found = _PULLED[pull] = _resolve(node.op, node.output, values, True)
    e.fn, e.gfn, e.rule = found
    e.shape = ()
    e.guards = ()
    e.arg_shapes = list(_SCALAR_SHAPES[len(args) - 1])
    e.real_args = ()
    return e


def build_program(key: Any, level: int, variables: list[Variable], input_leaves: list[int],
                   out: Any, recorder: Recorder) -> Program:
    out_leaves, out_spec = tree_flatten(out)
    out_leaves = [lift_object_array(o) for o in out_leaves]
    # a value written into after the call that made it: its contents now
    out_leaves = [o.target if type(o) is AliasedNode else o for o in out_leaves]
    roots = [o for o in out_leaves if isinstance(o, (CachedNode, Variable))
             and o.level == level]
    roots += [node for node, _, _ in recorder.guards]
    order = topological_order(roots)
    slot_of = {id(v): i for i, v in enumerate(variables)}
    guards_of: dict[int, list[tuple[str, Any]]] = {}
    for node, kind, outcome in recorder.guards:
        guards_of.setdefault(id(node), []).append((kind, outcome))
    input_guards = [(s, kind, outcome) for s, v in enumerate(variables)
                    for kind, outcome in guards_of.get(id(v), ())]
    ops: list[Operation] = []
    value_only: set[int] = set()  # slots of value-only results (comparisons, indices)
    n = len(variables)
    slot = slot_of.get
    for node in order:
        if not isinstance(node, CachedNode) or id(node) in slot_of:
            continue
        pull = node.pull
        if pull is not None and id(node) not in guards_of:  # a table rule on float64 numbers
            e = _scalar_operation(node, pull, slot_of)
            e.out = n
            slot_of[id(node)] = n
            n += 1
            ops.append(e)
            continue
        e = Operation()
        e.op = node.op
        template: list[Any] = []
        refs: list[tuple[int, int]] = []
        seqs: list[Any] = []
        values: list[Any] = []
        used: list[int] = []
        for pos, a in enumerate(node.args):
            t = type(a)
            s = slot(id(a)) if (t is CachedNode or t is Variable
                                or isinstance(a, (CachedNode, Variable))) else None
            if s is not None:
                template.append(None)
                refs.append((pos, s))
                used.append(s)
                values.append(a._primal())
            elif t is list or t is tuple:
                items = [(j, slot_of[id(b)]) for j, b in enumerate(a)
                         if isinstance(b, (CachedNode, Variable)) and id(b) in slot_of]
                plain = [b._primal() if isinstance(b, (CachedNode, Variable))
                         and id(b) in slot_of else b for b in a]
                template.append(t(plain))
                if items:
                    seqs.append((pos, t, items))
                    used.extend(s for _, s in items)
                values.append(t(plain))
            else:
                template.append(a)
                values.append(a)
        e.template = template
        kw: dict[str, Any] = {}
        kw_refs: list[tuple[str, int]] = []
        for k, v in node.kwargs.items():
            s = slot(id(v)) if isinstance(v, (CachedNode, Variable)) else None
            if s is not None:
                kw_refs.append((k, s))
                used.append(s)
            else:
                kw[k] = v
        e.kw = kw
        e.refs, e.seqs, e.kw_refs = tuple(refs), tuple(seqs), tuple(kw_refs)
        output = node.output
        differentiable = e.differentiable = not isinstance(node, ValueNode)
        multi = e.multi = isinstance(output, (tuple, list))
        e.fn, e.gfn, e.rule = _resolve(node.op, output, values, differentiable)
        e.shape = shape_of(output) if not multi else None
        guards = guards_of.get(id(node))
        guards = list(guards) if guards else []
        if differentiable and not multi and value_only and any(s in value_only for s in used):
            # indexed by a value (a mask, np.nonzero): the shape may change with it
            guards.append(("shape", e.shape))
        e.guards = tuple(guards)
        e.arg_shapes = [shape_of(v) if not isinstance(v, (list, tuple)) else None
                        for v in values]
        e.real_args = () if not differentiable or _all_real(output, values) else \
            _real_args(e, values, output)
        e.out = n
        if not differentiable:
            value_only.add(n)
        slot_of[id(node)] = n
        n += 1
        ops.append(e)
    outputs = []
    for o in out_leaves:
        is_slot, payload = _encode(o, slot_of)
        outputs.append((is_slot, payload if is_slot else plain_value(o)))
    program = Program(key, n, len(variables), input_leaves, ops, out_spec, outputs,
                      [shape_of(v.value) for v in variables])
    program.input_guards = input_guards
    program.scalar_output = (out_spec is None and len(out_leaves) == 1
                             and shape_of(plain_value(out_leaves[0])) == ())
    if out_leaves:  # grad refuses an integer, boolean or complex output, as eager mode
        program.out_dtype = np.asarray(plain_value(out_leaves[0])).dtype
    return program
