"""Record once, replay fast: ``ad.record(f, *example_args)`` gives a :class:`Tape`.

Recording runs ``f`` once on graph nodes and keeps the operations it called as a flat,
linearised program: per operation its function, its gradient rule (both resolved once,
at record time, so a replay does no dispatch), its constant arguments and which of its
arguments are results of earlier operations. A replay evaluates that program at new
inputs with plain numpy values (no graph objects are made) and, for a gradient, sweeps it
backwards calling the resolved rules.

Guards keep a replay from running the wrong program. While recording, every place where
``f`` depended on a value is noted with its outcome: a Python ``if`` / ``while`` on a
traced value (``bool()``), ``int()`` / ``float()`` / an index taken from a value computed
from the inputs (a comparison, ``np.argmax``, ...), or such a value handed to plain numpy.
A replay recomputes those values as it goes; when one differs, the tape records ``f``
again at the new point (a :class:`TapeRetraceWarning`, once per tape) and answers from
the new recording. Values used as data, e.g. ``np.where``'s condition or an index from
``np.argmax``, are part of the program and need no guard; an operation indexed by such a
value (``x[x > 0]``) is guarded on the shape of its result. New input shapes (or new
values of non-float arguments) record again too, unless ``strict=True``, where they raise
:class:`~dualad.ShapeError`. Every recording is kept (a few per input signature), so a
function that alternates between branches does not record on every call.

Tapes nest with the transforms: called with traced values (``ad.grad`` of a function
that calls a tape, ``ad.jvp`` of a tape, ``tape.hvp``), the program is replayed through
the ordinary dispatch, so the outer differentiation sees every operation.

What a tape cannot see: plain numpy values that ``f`` computes from anything but its
arguments (they are constants of the recording, as with ``jax.jit``), and values read
with ``ad.value`` (compare traced values instead, ``if x > 0:``, which is guarded).
Integer arguments are constants (a new value records again); differentiate floats.

One tape may be used from several threads: a replay keeps its values in per-call lists,
and recording (the only change to a tape) holds the tape's lock.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> tape = record(lambda x: np.sum(np.sin(x) * x), np.zeros(2))
    >>> tape.grad(np.array([1.0, 2.0])).round(4)
    array([1.3818, 0.077 ])
    >>> round(float(tape(np.array([1.0, 2.0]))), 4)
    2.6601
"""

from __future__ import annotations

import functools
import operator
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import plum

from .core.arguments import as_differentiable, normalize_argnums, to_user
from .core.arguments import value as plain_value
from .core.array_protocol import lift_object_array, shape_of, value_observer
from .core.dispatch import forward as forward_rules
from .core.dispatch import gradient as gradient_rules
from .core.errors import RuleError, ShapeError
from .core.operators import Operator
from .core.tracing import Traced, apply_operator, new_level
from .core.trees import tree_flatten, tree_unflatten
from .core.unbroadcast import unbroadcast
from .derivatives.registry import derivative_kind, get_rule, operator_type
from .forward.transforms import jvp as forward_jvp
from .reverse.backward import _NEEDS, topological_order
from .reverse.elementwise import register_rule_gradient
from .reverse.graph import CachedNode, MutableNode, Variable

__all__ = ["Tape", "TapeRetraceWarning", "ValueNode", "record"]

# where the rules tables' gradient methods are made
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

    def tolist(self) -> Any:
        return self.__array__().tolist()

    def __repr__(self) -> str:
        return f"ValueNode({self.op!r}, output={self.output!r})"


def _read(node: ValueNode, kind: str, outcome: Any) -> Any:
    observer = value_observer.get()
    if isinstance(observer, _Recorder):
        observer.guard(node, kind, outcome)
    return outcome


_WRAPPED_RESULTS = (np.ndarray, np.generic, bool)


def _state(a: Any) -> Any:
    """A writable node's current contents (later writes must not change what was read)."""
    if type(a) is MutableNode:
        return a._state
    if type(a) in (list, tuple):
        return type(a)(b._state if type(b) is MutableNode else b for b in a)
    return a


class _Recorder:
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
        if level != self.level or not isinstance(out, _WRAPPED_RESULTS):
            return out
        args = tuple(_state(a) for a in args)
        kwargs = {k: _state(v) for k, v in kwargs.items()}
        return ValueNode.recorded(op, args, kwargs, out, level)


def _is_float_leaf(x: Any) -> bool:
    if isinstance(x, Traced):
        return True
    if isinstance(x, float):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in "fc"
    return False


def _constant_key(x: Any) -> Any:
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


class _Op:
    """One recorded operation of a program."""

    __slots__ = ("op", "fn", "gfn", "rule", "template", "refs", "seqs", "kw", "kw_refs", "out",
                 "differentiable", "guards", "multi", "shape", "arg_shapes")

    def args(self, slots: list[Any]) -> list[Any]:
        args = self.template.copy()
        for pos, s in self.refs:
            args[pos] = slots[s]
        if self.seqs:
            for pos, kind, items in self.seqs:
                seq = list(args[pos])
                for j, s in items:
                    seq[j] = slots[s]
                args[pos] = kind(seq)
        return args

    def kwargs(self, slots: list[Any]) -> dict:
        if not self.kw_refs:
            return self.kw
        kw = dict(self.kw)
        for k, s in self.kw_refs:
            kw[k] = slots[s]
        return kw


class _GuardFailed(Exception):
    """A replayed value differs from the recorded one where the recording depended on it."""


_READERS: dict[str, Callable[[Any], Any]] = {
    "shape": shape_of, "bool": bool, "int": int, "float": float, "index": operator.index,
    "value": lambda v: np.array(plain_value(v), copy=True),
}


def _guard_holds(kind: str, recorded: Any, v: Any) -> bool:
    """Whether the value ``v`` reads (as ``kind``) as it did when recorded (NaN as NaN)."""
    now = _READERS[kind](v)
    if kind == "value":
        if np.shape(now) != np.shape(recorded):
            return False
        try:
            return bool(np.array_equal(now, recorded, equal_nan=True))
        except TypeError:  # a dtype without NaN
            return bool(np.array_equal(now, recorded))
    return bool(now == recorded) or (kind == "float" and now != now and recorded != recorded)


class Program:
    """One recording: the flat list of operations, its inputs and outputs, its guards."""

    def __init__(self, key: Any, n_slots: int, n_inputs: int, input_leaves: list[int],
                 ops: list[_Op], out_spec: Any, outputs: list[tuple[bool, Any]],
                 input_shapes: list[tuple[int, ...]]) -> None:
        self.key = key
        self.n_slots = n_slots
        self.n_inputs = n_inputs
        self.input_leaves = input_leaves  # leaf index of each input slot
        self.ops = ops
        self.out_spec = out_spec
        self.outputs = outputs  # (is_slot, slot or constant) per output leaf
        self.input_shapes = input_shapes
        self.slot_of_leaf = {leaf: s for s, leaf in enumerate(input_leaves)}
        self.scalar_output = False  # a single output of shape (): set when built
        self.wanted: dict[Any, tuple[int, ...]] = {}  # input slots per argnums
        self.checked = False
        self.compiled: dict[Any, Any] = {}  # replay functions, None where not compiled
        self.uses: dict[Any, int] = {}  # replays so far, per kind, until compiled
        self._plans: dict[tuple[int, ...], list[tuple[int, _Op, list[bool], list, list]]] = {}

    # forward -----------------------------------------------------------------------------
    def run(self, inputs: list[Any], keep_args: bool) -> tuple[list[Any], list[Any] | None]:
        """Plain numpy replay; returns the slot values (and each operation's arguments)."""
        slots: list[Any] = [None] * self.n_slots
        slots[: self.n_inputs] = inputs
        kept: list[Any] | None = [] if keep_args else None
        for e in self.ops:
            args = e.template.copy()
            for pos, s in e.refs:
                args[pos] = slots[s]
            if e.seqs:
                args = e.args(slots)
            if e.kw or e.kw_refs:
                out = e.fn(*args, **e.kwargs(slots))
            else:
                out = e.fn(*args)
            slots[e.out] = out
            if e.guards:
                for kind, recorded in e.guards:
                    if not _guard_holds(kind, recorded, out):
                        raise _GuardFailed
            if kept is not None:
                kept.append(args)
        return slots, kept

    def run_traced(self, inputs: list[Any]) -> tuple[list[Any], list[Any]]:
        """Replay through the ordinary dispatch, for inputs traced by an outer transform."""
        slots: list[Any] = [None] * self.n_slots
        slots[: self.n_inputs] = inputs
        kept = []
        for e in self.ops:
            args = e.args(slots)
            kw = e.kwargs(slots)
            out = apply_operator(e.op, tuple(args), kw)
            if e.multi and isinstance(out, list):
                out = tuple(out)
            slots[e.out] = out
            for kind, recorded in e.guards:
                if not _guard_holds(kind, recorded, out):
                    raise _GuardFailed
            kept.append(args)
        return slots, kept

    def output_values(self, slots: list[Any]) -> list[Any]:
        return [slots[v] if is_slot else v for is_slot, v in self.outputs]

    # backward ----------------------------------------------------------------------------
    def plan(self, wanted: tuple[int, ...]) -> list[tuple[Any, ...]]:
        """The reverse sweep for the input slots ``wanted``: active operations, last first."""
        plan = self._plans.get(wanted)
        if plan is not None:
            return plan
        active = [False] * self.n_slots
        for s in wanted:
            active[s] = True
        steps = []
        for index, e in enumerate(self.ops):
            if not e.differentiable:
                continue
            needs = [False] * len(e.template)
            targets = [(pos, s) for pos, s in e.refs if active[s]]
            seq_targets = []
            for pos, _s in targets:
                needs[pos] = True
            for pos, _kind, items in e.seqs:
                live = [(j, s) for j, s in items if active[s]]
                if live:
                    needs[pos] = True
                    seq_targets.append((pos, live))
            if targets or seq_targets or any(active[s] for _, s in e.kw_refs):
                active[e.out] = True
                special = None
                if e.rule is not None and not e.kw_refs and not e.seqs:
                    special = _elementwise_gradient(e.rule, needs, e.arg_shapes, e.shape)
                steps.append((index, e, needs, targets, seq_targets,
                              special or e.gfn, special is None))
        steps.reverse()
        self._plans[wanted] = steps
        return steps

    def sweep(self, seeds: list[tuple[int, Any]], slots: list[Any], kept: list[Any],
              wanted: tuple[int, ...], traced: bool) -> list[Any]:
        """Gradients of the input slots ``wanted`` (None where nothing reached)."""
        grads: list[Any] = [None] * self.n_slots
        for s, seed in seeds:
            grads[s] = seed if grads[s] is None else _accumulate(grads[s], seed)
        check = traced or not self.checked
        try:
            for index, e, needs, targets, seq_targets, gfn, tell_needs in self.plan(wanted):
                g = grads[e.out]
                if g is None:
                    continue
                out = slots[e.out]
                if e.multi:
                    g = _with_zeros(g, out)
                args = kept[index]
                if traced:
                    _NEEDS.value = needs
                    result = gradient_rules(e.op, g, out, *args, **e.kwargs(slots))
                else:
                    if tell_needs:
                        _NEEDS.value = needs
                    if e.kw or e.kw_refs:
                        result = gfn(g, out, *args, **e.kwargs(slots))
                    else:
                        result = gfn(g, out, *args)
                if check:
                    _check_result(e, result, args, targets, traced)
                for pos, s in targets:
                    r = result[pos]
                    if r is not None:
                        prev = grads[s]
                        grads[s] = r if prev is None else _accumulate(prev, r)
                for pos, live in seq_targets:
                    for j, s in live:
                        r = result[pos][j]
                        if r is not None:
                            prev = grads[s]
                            grads[s] = r if prev is None else _accumulate(prev, r)
        finally:
            _NEEDS.value = None
        if not traced:
            self.checked = True
        return [grads[s] for s in wanted]


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


def _elementwise_gradient(rule: Any, needs: list[bool], arg_shapes: list[Any],
                          out_shape: Any) -> Callable[..., tuple] | None:
    """A rules-table gradient specialised to the arguments needed and the recorded shapes:
    the same partials, without the generic rule's per-call work (shapes, unbroadcasting
    and partials of constant arguments)."""
    kinds = [derivative_kind(d) for d in rule.expressions]
    n = len(kinds)
    if len(arg_shapes) != n or out_shape is None:
        return None
    derivatives = rule.derivatives
    items = tuple((i, kinds[i], arg_shapes[i] == out_shape, arg_shapes[i])
                  for i in range(n) if needs[i])
    if rule.may_warn:
        return None  # the generic rule silences floating-point warnings: keep it
    if len(items) == 1:
        i, kind, same, _shape = items[0]
        if same and kind == "expr":
            if n == 1:
                return lambda g, out, x: (g * derivatives(x, out)[0],)
            if n == 2 and i == 0:
                return lambda g, out, x, y: (g * derivatives(x, y, out)[0], None)
            if n == 2:
                return lambda g, out, x, y: (None, g * derivatives(x, y, out)[1])
        if same and kind == "one" and n == 2:
            return (lambda g, out, x, y: (g, None)) if i == 0 else \
                (lambda g, out, x, y: (None, g))
    expr = any(kind == "expr" for _, kind, _, _ in items)

    def gradient(g: Any, out: Any, *args: Any) -> tuple:
        ds = derivatives(*args, out) if expr else None
        result: list[Any] = [None] * n
        for i, kind, same, shape in items:
            if kind == "expr":
                r = g * ds[i]
            elif kind == "one":
                r = g
            elif kind == "minus_one":
                r = -g
            elif kind == "zero":
                r = np.zeros(shape)
                same = True
            else:
                continue
            result[i] = r if same else unbroadcast(r, shape)
        return tuple(result)

    return gradient


def _accumulate(old: Any, new: Any) -> Any:
    if isinstance(old, tuple):
        return tuple(b if a is None else a if b is None else a + b for a, b in zip(old, new))
    return old + new


def _with_zeros(g: Any, output: Any) -> Any:
    if g is None:
        g = (None,) * len(output)
    items = [np.zeros_like(plain_value(o)) if x is None else x for x, o in zip(g, output)]
    return type(output)(items) if type(output) in (tuple, list) else tuple(items)


def _check_result(e: _Op, result: Any, args: list[Any], targets: list, traced: bool) -> None:
    if not isinstance(result, tuple) or len(result) != len(args):
        raise RuleError(
            f"the gradient rule for {e.op!r} returned {type(result).__name__} "
            f"({len(result) if isinstance(result, tuple) else 'not a tuple'}); it must "
            f"return a tuple with one gradient per positional argument ({len(args)})."
        )
    if traced:
        return
    for pos, _s in targets:
        r = result[pos]
        if r is None or isinstance(args[pos], (tuple, list)):
            continue
        if shape_of(r) != shape_of(args[pos]):
            raise ShapeError(
                f"the gradient rule for {e.op!r} returned a gradient of shape "
                f"{shape_of(r)} for argument {pos}, whose shape is {shape_of(args[pos])}; "
                f"the rule must return gradients shaped like its arguments."
            )


def _encode(a: Any, slot_of: dict[int, int]) -> tuple[bool, Any]:
    """``(True, slot)`` for a recorded node, else ``(False, constant)``."""
    if isinstance(a, CachedNode) or isinstance(a, Variable):
        s = slot_of.get(id(a))
        if s is not None:
            return True, s
    return False, a


def _build_program(key: Any, level: int, variables: list[Variable], input_leaves: list[int],
                   out: Any, recorder: _Recorder) -> Program:
    out_leaves, out_spec = tree_flatten(out)
    out_leaves = [lift_object_array(o) for o in out_leaves]
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
    ops: list[_Op] = []
    value_only: set[int] = set()  # slots of value-only results (comparisons, indices)
    n = len(variables)
    for node in order:
        if not isinstance(node, CachedNode) or id(node) in slot_of:
            continue
        e = _Op()
        e.op = node.op
        e.template, e.refs, e.seqs = [], [], []
        values = []
        for pos, a in enumerate(node.args):
            is_slot, payload = _encode(a, slot_of)
            if is_slot:
                e.template.append(None)
                e.refs.append((pos, payload))
                values.append(a._primal())
            elif type(a) in (list, tuple):
                items = [(j, slot_of[id(b)]) for j, b in enumerate(a)
                         if isinstance(b, (CachedNode, Variable)) and id(b) in slot_of]
                plain = [b._primal() if isinstance(b, (CachedNode, Variable))
                         and id(b) in slot_of else b for b in a]
                e.template.append(type(a)(plain))
                if items:
                    e.seqs.append((pos, type(a), items))
                values.append(type(a)(plain))
            else:
                e.template.append(a)
                values.append(a)
        e.kw, e.kw_refs = {}, []
        for k, v in node.kwargs.items():
            is_slot, payload = _encode(v, slot_of)
            if is_slot:
                e.kw_refs.append((k, payload))
            else:
                e.kw[k] = v
        e.refs, e.seqs, e.kw_refs = tuple(e.refs), tuple(e.seqs), tuple(e.kw_refs)
        e.differentiable = not isinstance(node, ValueNode)
        e.multi = isinstance(node.output, (tuple, list))
        e.fn = _resolve_forward(node.op, values)
        e.gfn = _resolve_gradient(node.op, node.output, values) if e.differentiable else None
        e.rule = _table_rule(node.op, e.gfn) if e.differentiable else None
        e.shape = shape_of(node.output) if not e.multi else None
        guards = list(guards_of.get(id(node), ()))
        used = [s for _, s in e.refs] + [s for _, _, items in e.seqs for _, s in items] + \
            [s for _, s in e.kw_refs]
        if e.differentiable and not e.multi and any(s in value_only for s in used):
            # indexed by a value (a mask, np.nonzero): the shape may change with it
            guards.append(("shape", e.shape))
        e.guards = tuple(guards)
        e.arg_shapes = [shape_of(v) if not isinstance(v, (list, tuple)) else None
                        for v in values]
        e.out = n
        if not e.differentiable:
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
    return program


# -- straight-line replay ------------------------------------------------------------------

#: Programs longer than this are replayed by the loop of :meth:`Program.run` instead.
MAX_COMPILED_OPS = 4000
#: A program is compiled (about 0.1 ms per operation) on its this-many-th replay of one
#: kind; earlier replays run the loop of :meth:`Program.run`.
COMPILE_AFTER = 8


def _due(program: Program, what: Any) -> bool:
    """Count a replay of ``what``; whether it is time to compile it."""
    n = program.uses.get(what, 0) + 1
    program.uses[what] = n
    return n >= COMPILE_AFTER


class _Compiler:
    """Writes a program as one straight-line Python function (a name per value, the
    resolved implementations and constants bound as globals), which runs without the
    interpreter loop's per-operation bookkeeping."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.namespace: dict[str, Any] = {"_GuardFailed": _GuardFailed, "_holds": _guard_holds,
                                          "_NEEDS": _NEEDS, "_acc": _accumulate,
                                          "_zeros": _with_zeros}
        self.lines: list[str] = []

    def bind(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def arg_exprs(self, index: int, e: _Op) -> list[str] | None:
        exprs = []
        refs = dict(e.refs)
        seqs = {pos: (kind, dict(items)) for pos, kind, items in e.seqs}
        for pos, a in enumerate(e.template):
            if pos in refs:
                exprs.append(f"v{refs[pos]}")
            elif pos in seqs:
                kind, items = seqs[pos]
                if kind not in (list, tuple):
                    return None
                parts = [f"v{items[j]}" if j in items else self.bind(f"c{index}_{pos}_{j}", b)
                         for j, b in enumerate(a)]
                text = ", ".join(parts)
                exprs.append(f"[{text}]" if kind is list else f"({text},)")
            else:
                exprs.append(self.bind(f"c{index}_{pos}", a))
        if e.kw:
            exprs.append("**" + self.bind(f"k{index}", e.kw))
        return exprs

    def forward(self) -> bool:
        p = self.program
        ins = ", ".join(f"v{s}" for s in range(p.n_inputs))
        self.lines.append(f"    {ins}{',' if p.n_inputs == 1 else ''} = inputs"
                          if p.n_inputs else "    pass")
        self.args: list[list[str]] = []
        for index, e in enumerate(p.ops):
            if e.kw_refs:
                return False
            exprs = self.arg_exprs(index, e)
            if exprs is None:
                return False
            self.args.append(exprs)
            fn = self.bind(f"f{index}", e.fn)
            self.lines.append(f"    v{e.out} = {fn}({', '.join(exprs)})")
            for j, (kind, recorded) in enumerate(e.guards):
                r = self.bind(f"r{index}_{j}", recorded)
                self.lines.append(f"    if not _holds({kind!r}, {r}, v{e.out}): "
                                  f"raise _GuardFailed")
        return True

    def outputs(self) -> str:
        items = [f"v{v}" if is_slot else self.bind(f"o{i}", v)
                 for i, (is_slot, v) in enumerate(self.program.outputs)]
        return "[" + ", ".join(items) + "]"

    def backward(self, wanted: tuple[int, ...], seed_slot: int) -> None:
        p = self.program
        plan = p.plan(wanted)
        grad_slots = {seed_slot} | set(wanted)
        for _index, e, _needs, targets, seq_targets, _gfn, _tell in plan:
            grad_slots.add(e.out)
            grad_slots.update(s for _, s in targets)
            grad_slots.update(s for _, live in seq_targets for _, s in live)
        multi = {e.out for e in p.ops if e.multi}
        for s in sorted(grad_slots):
            self.lines.append(f"    g{s} = None")
        self.lines.append(f"    g{seed_slot} = seed")
        for index, e, needs, targets, seq_targets, gfn, tell_needs in plan:
            lines = [f"    if g{e.out} is not None:"]
            g = f"g{e.out}"
            if e.multi:
                lines.append(f"        g{e.out} = _zeros(g{e.out}, v{e.out})")
            if tell_needs:
                lines.append(f"        _NEEDS.value = {self.bind(f'n{index}', needs)}")
            name = self.bind(f"d{index}", gfn)
            lines.append(f"        r = {name}({g}, v{e.out}, {', '.join(self.args[index])})")
            for pos, s in targets:
                add = f"_acc(g{s}, t)" if s in multi else f"g{s} + t"
                lines += [f"        t = r[{pos}]",
                          "        if t is not None:",
                          f"            g{s} = t if g{s} is None else {add}"]
            for pos, live in seq_targets:
                for j, s in live:
                    add = f"_acc(g{s}, t)" if s in multi else f"g{s} + t"
                    lines += [f"        t = r[{pos}][{j}]",
                              "        if t is not None:",
                              f"            g{s} = t if g{s} is None else {add}"]
            self.lines += lines
        self.grads = "[" + ", ".join(f"g{s}" for s in wanted) + "]"

    def build(self, signature: str, body_end: str) -> Callable[..., Any]:
        source = f"def replay({signature}):\n" + "\n".join(self.lines) + f"\n{body_end}\n"
        code = compile(source, f"<tape of {len(self.program.ops)} operations>", "exec")
        exec(code, self.namespace)  # noqa: S102 - our own generated replay code
        return self.namespace["replay"]


def _compiled_value(program: Program) -> Callable[..., Any] | None:
    """``replay(inputs) -> output values``, or None when the program is not compiled."""
    fn = program.compiled.get("value", False)
    if fn is not False:
        return fn
    if not _due(program, "value"):
        return None
    fn = None
    if len(program.ops) <= MAX_COMPILED_OPS:
        c = _Compiler(program)
        if c.forward():
            fn = c.build("inputs", f"    return {c.outputs()}")
    program.compiled["value"] = fn
    return fn


def _compiled_grad(program: Program, wanted: tuple[int, ...]) -> Callable[..., Any] | None:
    """``replay(inputs, seed) -> (output values, gradients of wanted)`` for a program with
    one scalar output, or None."""
    fn = program.compiled.get(wanted, False)
    if fn is not False:
        return fn
    if not _due(program, wanted):
        return None
    fn = None
    outputs = program.outputs
    if (len(program.ops) <= MAX_COMPILED_OPS and len(outputs) == 1 and outputs[0][0]
            and program.checked):
        c = _Compiler(program)
        if c.forward():
            out_slot = outputs[0][1]
            c.backward(wanted, out_slot)
            c.lines.append("    _NEEDS.value = None")
            fn = c.build("inputs, seed", f"    return {c.outputs()}, {c.grads}")
    program.compiled[wanted] = fn
    return fn


# -- the tape ---------------------------------------------------------------------------------


class Tape:
    """A function recorded by :func:`record`, replayed at new inputs.

    ``tape(*args)`` gives the value; ``.grad(*args, argnums=0)``, ``.value_and_grad``,
    ``.vjp(*args)``, ``.jvp(args, tangents)`` and ``.hvp(args, v)`` its derivatives.
    Float arguments (arrays and numbers, also inside tuples, lists and dicts) are the
    recorded inputs; every other argument is a constant of the recording (a different
    value records again).

    Example:
        >>> import numpy as np
        >>> from dualad.tape import record
        >>> tape = record(lambda a, b: np.trace(a @ b), np.eye(2), np.eye(2))
        >>> ga, gb = tape.grad(np.ones((2, 2)), 2 * np.eye(2), argnums=(0, 1))
        >>> ga
        array([[2., 0.],
               [0., 2.]])
    """

    def __init__(self, f: Callable[..., Any], strict: bool = False) -> None:
        self.f = f
        self.strict = strict
        self.__name__ = getattr(f, "__name__", "f")
        self.__doc__ = getattr(f, "__doc__", None)
        self._lock = threading.Lock()
        self._programs: dict[Any, list[Program]] = {}
        self._latest: Program | None = None
        self._warned = False
        self._argnums: dict[Any, tuple[tuple[int, ...], bool]] = {}
        self.recordings = 0

    def __repr__(self) -> str:
        n = len(self._latest.ops) if self._latest is not None else 0
        return f"<Tape of {self.__name__}: {n} operations, {self.recordings} recording(s)>"

    @property
    def program(self) -> Program | None:
        """The most recent recording (its ``ops`` are what :func:`dualad.to_dot` draws)."""
        return self._latest

    # arguments ---------------------------------------------------------------------------
    def _split(self, args: tuple) -> tuple[Any, list[Any], list[int], list[tuple[int, int]],
                                           bool, list[Any]]:
        """``(key, leaves, input leaf indices, leaf range per argument, traced?, spec per
        argument (None for an argument that is one leaf))``."""
        leaves: list[Any] = []
        ranges = []
        specs: list[Any] = []
        key_parts: list[Any] = []
        inputs = []
        traced = False
        simple = True
        for a in args:
            n = len(leaves)
            t = type(a)
            if t is np.ndarray and a.dtype.kind in "fc":  # the common case, inline
                ranges.append((n, n + 1))
                leaves.append(a)
                specs.append(None)
                key_parts.append(a.shape)
                inputs.append(n)
                continue
            if t is float:
                ranges.append((n, n + 1))
                leaves.append(a)
                specs.append(None)
                key_parts.append(())
                inputs.append(n)
                continue
            ls, spec = tree_flatten(a)
            ranges.append((n, n + len(ls)))
            leaves.extend(ls)
            if len(ls) == 1 and ls[0] is a:
                specs.append(None)
            else:
                specs.append(spec)
                simple = False
            for i, leaf in enumerate(ls, n):
                if _is_float_leaf(leaf):
                    if isinstance(leaf, Traced):
                        traced = True
                    key_parts.append(shape_of(leaf))
                    inputs.append(i)
                else:
                    key_parts.append(_constant_key(leaf))
        spec_key = None if simple else tuple(None if sp is None else repr(sp) for sp in specs)
        return (tuple(key_parts), spec_key), leaves, inputs, ranges, traced, specs

    def _record(self, args: tuple, key: Any, inputs: list[int]) -> Program:
        """Run ``f`` once on graph nodes at ``args`` (plain values) and keep its program."""
        level = new_level()
        leaves, spec = tree_flatten(args)
        variables = []
        for i in inputs:
            v = Variable(as_differentiable(plain_value(leaves[i]), f"argument leaf {i} of "
                                           f"record({self.__name__})"), level)
            leaves[i] = v
            variables.append(v)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Traced) and i not in inputs:
                leaves[i] = plain_value(leaf)
        recorder = _Recorder(level)
        token = value_observer.set(recorder)
        try:
            out = self.f(*tree_unflatten(spec, leaves))
        finally:
            value_observer.reset(token)
        if out is None or isinstance(out, (str, bytes)):
            raise TypeError(
                f"record({self.__name__}): the function returned {type(out).__name__}; it "
                f"must return a number or an array computed from its arguments."
            )
        program = _build_program(key, level, variables, inputs, out, recorder)
        self.recordings += 1
        return program

    def _programs_for(self, args: tuple, key: Any, inputs: list[int], ranges: Any
                      ) -> list[Program]:
        found = self._programs.get(key)
        if found:
            return found
        with self._lock:
            found = self._programs.get(key)
            if found:
                return found
            if self._latest is not None:
                if self.strict:
                    raise ShapeError(
                        f"record({self.__name__}, strict=True): called with arguments of "
                        f"{self._describe(key)}, but recorded with "
                        f"{self._describe(self._latest.key)}; pass arguments like the "
                        f"recorded ones or record without strict=True."
                    )
                self._warn(f"the arguments changed ({self._describe(key)}; recorded with "
                           f"{self._describe(self._latest.key)})")
            program = self._record(args, key, inputs)
            self._programs[key] = [program]
            self._latest = program
            return self._programs[key]

    @staticmethod
    def _describe(key: Any) -> str:
        shapes = [k if isinstance(k, tuple) and all(isinstance(d, int) for d in k)
                  else "a constant" for k in key[0]]
        return "leaf shapes " + ", ".join(map(str, shapes))

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"tape of {self.__name__} records again: {why}. Further re-recordings of "
                f"this tape are not reported.", TapeRetraceWarning, stacklevel=4)

    def _rerecord(self, args: tuple, key: Any, inputs: list[int], tried: list[Program]
                  ) -> list[Program]:
        """Record at ``args`` after every kept recording in ``tried`` failed a guard; the
        recordings to try next (only the new ones if another thread recorded meanwhile)."""
        with self._lock:
            kept = self._programs.setdefault(key, [])
            fresh = [p for p in kept if not any(p is t for t in tried)]
            if fresh:
                return fresh
            self._warn("a value the recording depended on (a branch, a loop count, an index) "
                       "differs at the new arguments")
            program = self._record(args, key, inputs)
            kept.insert(0, program)
            del kept[MAX_RECORDINGS:]
            self._latest = program
            return [program]

    def _replay(self, args: tuple, mode: str, nums: tuple[int, ...] = (),
                fname: str = "") -> _Replayed:
        """Run a program matching ``args``. ``mode`` is ``"value"`` (outputs only),
        ``"keep"`` (keep every value for reverse sweeps later) or ``"grad"`` (also the
        gradients of the single output with respect to the arguments ``nums``)."""
        key, leaves, inputs, ranges, traced, specs = self._split(args)
        values = []
        for i in inputs:
            leaf = leaves[i]
            if type(leaf) is np.ndarray and leaf.dtype.type is np.float64:
                values.append(leaf)
            elif traced and isinstance(leaf, Traced):
                values.append(leaf)
            else:
                values.append(as_differentiable(leaf, f"argument of {self.__name__}"))
        candidates = list(self._programs_for(args, key, inputs, ranges))
        tried: list[Program] = []
        while True:
            for program in candidates:
                r = _Replayed(program, leaves, ranges, specs, traced)
                try:
                    if program.input_guards:
                        _check_input_guards(program, values)
                    if traced:
                        r.slots, r.kept = program.run_traced(values)
                    elif mode == "value":
                        fn = _compiled_value(program)
                        if fn is not None:
                            r.outs = fn(values)
                        else:
                            r.slots, _ = program.run(values, False)
                    elif mode == "grad" and program.checked:
                        wanted = self._wanted(r, nums, fname)
                        fn = _compiled_grad(program, wanted)
                        if fn is None:
                            r.slots, r.kept = program.run(values, True)
                        else:
                            try:
                                r.outs, found = fn(values, _ONE)
                            finally:
                                _NEEDS.value = None
                            if key[1] is None and len(wanted) == len(nums):
                                r.found = found  # one input slot per argument, in order
                            else:
                                r.grads = dict(zip(wanted, found))
                    else:
                        r.slots, r.kept = program.run(values, True)
                    if r.outs is None:
                        r.outs = program.output_values(r.slots)
                    return r
                except _GuardFailed:
                    continue
            tried.extend(candidates)
            candidates = self._rerecord(args, key, inputs, tried)

    # public ------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        r = self._replay(args, "value")
        return tree_unflatten(r.program.out_spec, r.outs)

    def value_and_grad(self, *args: Any, argnums: int | Sequence[int] = 0) -> tuple[Any, Any]:
        """``(f(*args), gradient)`` for a scalar-valued ``f``, from the recorded program."""
        fname = f"Tape({self.__name__}).value_and_grad"
        try:
            nums, single = self._argnums[argnums, len(args)]
        except (KeyError, TypeError):
            nums, single = normalize_argnums(argnums, len(args), fname)
            try:
                self._argnums[argnums, len(args)] = nums, single
            except TypeError:  # a list of argnums: not kept
                pass
        fast = self._fast_grad(args, nums)
        if fast is not None:
            return fast[0], (fast[1][0] if single else tuple(fast[1]))
        r = self._replay(args, "grad", nums, fname)
        program, outs = r.program, r.outs
        if not program.scalar_output:
            if len(outs) != 1 or program.out_spec is not None:
                raise ValueError(
                    f"{fname}: grad needs a scalar output, but the function returned "
                    f"{len(outs)} values; use .vjp for several outputs.")
            raise ValueError(
                f"{fname}: grad needs a scalar output, but the function returned shape "
                f"{shape_of(outs[0])}; reduce it (e.g. np.sum) or use .vjp for non-scalar "
                f"outputs.")
        if r.found is not None:
            grads = [g if type(g) is np.ndarray else _finish(g, program.input_shapes[s])
                     for g, s in zip(r.found, program.wanted[nums, False])]
            return to_user(outs[0]), (grads[0] if single else tuple(grads))
        if r.grads is None:
            is_slot, s = program.outputs[0]
            seeds = [(s, np.float64(1.0))] if is_slot else []
            wanted = self._wanted(r, nums, fname)
            found = program.sweep(seeds, r.slots, r.kept, wanted, r.traced) if seeds else \
                [None] * len(wanted)
            r.grads = dict(zip(wanted, found))
        grads = self._assemble(r, nums)
        return to_user(outs[0]), (grads[0] if single else tuple(grads))

    def _fast_grad(self, args: tuple, nums: tuple[int, ...]) -> tuple[Any, list] | None:
        """``(value, gradients)`` when every argument is a float64 array and the matching
        recording is compiled for ``nums``; None otherwise (or when a guard fails), and the
        general path takes over."""
        shapes = []
        for a in args:
            if type(a) is not np.ndarray or a.dtype.type is not np.float64:
                return None
            shapes.append(a.shape)
        programs = self._programs.get((tuple(shapes), None))
        if not programs:
            return None
        program = programs[0]
        wanted = program.wanted.get((nums, False))
        if wanted is None or program.input_guards or len(wanted) != len(nums):
            return None
        fn = program.compiled.get(wanted)
        if not fn:
            return None
        try:
            outs, found = fn(list(args), _ONE)
        except _GuardFailed:
            return None
        finally:
            _NEEDS.value = None
        shapes_in = program.input_shapes
        grads = [g if type(g) is np.ndarray else _finish(g, shapes_in[s])
                 for g, s in zip(found, wanted)]
        return to_user(outs[0]), grads

    def grad(self, *args: Any, argnums: int | Sequence[int] = 0) -> Any:
        """The gradient of a scalar-valued ``f`` at ``args`` (reverse sweep of the program)."""
        return self.value_and_grad(*args, argnums=argnums)[1]

    def vjp(self, *args: Any) -> tuple[Any, Callable[[Any], tuple]]:
        """``(f(*args), pullback)``; ``pullback(cotangent)`` gives one gradient per argument
        (``None`` for an argument that was recorded as a constant)."""
        fname = f"Tape({self.__name__}).vjp"
        r = self._replay(args, "keep")
        program, outs = r.program, r.outs
        value = tree_unflatten(program.out_spec,
                               [o if isinstance(o, Traced) else to_user(o) for o in outs])
        nums = tuple(range(len(args)))

        def pullback(cotangent: Any) -> tuple:
            cots, _ = tree_flatten(cotangent)
            if len(cots) != len(outs):
                raise ShapeError(f"{fname}: the cotangent has {len(cots)} leaves but the "
                                 f"output has {len(outs)}; pass one shaped like the output.")
            seeds = []
            for (is_slot, s), c, o in zip(program.outputs, cots, outs):
                c = c if isinstance(c, Traced) else np.asarray(c, dtype=np.float64)
                if shape_of(c) != shape_of(o):
                    raise ShapeError(f"{fname}: a cotangent has shape {shape_of(c)} but the "
                                     f"output it pairs with has shape {shape_of(o)}.")
                if is_slot:
                    seeds.append((s, c))
            wanted = self._wanted(r, nums, fname, constants_none=True)
            found = program.sweep(seeds, r.slots, r.kept, wanted, r.traced) if seeds else \
                [None] * len(wanted)
            r.grads = dict(zip(wanted, found))
            return tuple(self._assemble(r, nums))

        return value, pullback

    def jvp(self, args: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        """``(f(*args), J @ tangents)``: the program replayed on dual numbers."""
        return forward_jvp(self, args, tangents)

    def hvp(self, args: Sequence[Any], v: Any, argnums: int | Sequence[int] = 0) -> Any:
        """The Hessian of scalar ``f`` at ``args`` (w.r.t. ``argnums``) applied to ``v``.

        Forward over reverse: the reverse sweep of the program, replayed on dual numbers;
        the Hessian is never formed. ``v`` is shaped like the argument (a tuple of such for
        a tuple ``argnums``); so is the result.
        """
        args = tuple(args)
        nums, single = normalize_argnums(argnums, len(args), f"Tape({self.__name__}).hvp")
        vs = (v,) if single else tuple(v)
        if len(vs) != len(nums):
            raise ValueError(f"Tape({self.__name__}).hvp: {len(nums)} argument(s) "
                             f"differentiated but {len(vs)} direction(s) given.")

        def gradient_at(*chosen: Any) -> Any:
            full = list(args)
            for i, c in zip(nums, chosen):
                full[i] = c
            return self.grad(*full, argnums=nums if not single else nums[0])

        _, tangent = forward_jvp(gradient_at, tuple(args[i] for i in nums), vs)
        return tangent

    @staticmethod
    def _wanted(r: _Replayed, nums: tuple[int, ...], fname: str,
                constants_none: bool = False) -> tuple[int, ...]:
        """The input slots of the arguments ``nums``."""
        found = r.program.wanted.get((nums, constants_none))
        if found is not None:
            return found
        slot_of_leaf = r.program.slot_of_leaf
        wanted = []
        for i in nums:
            lo, hi = r.ranges[i]
            for leaf in range(lo, hi):
                s = slot_of_leaf.get(leaf)
                if s is None and not constants_none:
                    raise TypeError(
                        f"{fname}: argument {i} holds a {type(r.leaves[leaf]).__name__} "
                        f"that the tape treats as a constant (only float arrays and numbers "
                        f"are differentiated); pass it as floats, e.g. np.asarray(x, float).")
                if s is not None:
                    wanted.append(s)
        r.program.wanted[nums, constants_none] = tuple(wanted)
        return tuple(wanted)

    @staticmethod
    def _assemble(r: _Replayed, nums: tuple[int, ...]) -> list[Any]:
        """One gradient per argument in ``nums`` (trees like the argument), from the
        gradients of the input slots in ``r.grads`` (zeros where none arrived)."""
        program = r.program
        slot_of_leaf = program.slot_of_leaf
        results = []
        for i in nums:
            lo, hi = r.ranges[i]
            items = []
            for leaf in range(lo, hi):
                s = slot_of_leaf.get(leaf)
                if s is None:
                    items.append(None)
                    continue
                g = r.grads.get(s)
                shape = program.input_shapes[s]
                if g is None:
                    g = np.zeros(shape)
                elif not isinstance(g, Traced) and shape_of(g) != shape:
                    g = np.broadcast_to(g, shape)
                items.append(to_user(g))
            if r.specs[i] is None:
                results.append(items[0])
            else:
                results.append(tree_unflatten(r.specs[i], items))
        return results


class _Replayed:
    """What one replay produced: the program, its values, and the arguments' layout."""

    __slots__ = ("program", "leaves", "ranges", "specs", "traced", "slots", "kept", "outs",
                 "grads", "found")

    def __init__(self, program: Program, leaves: list[Any], ranges: list[tuple[int, int]],
                 specs: list[Any], traced: bool) -> None:
        self.program, self.leaves, self.ranges = program, leaves, ranges
        self.specs, self.traced = specs, traced
        self.slots: list[Any] | None = None
        self.kept: list[Any] | None = None
        self.outs: list[Any] | None = None
        self.grads: dict[int, Any] | None = None
        self.found: list[Any] | None = None


_ONE = np.float64(1.0)


def _finish(g: Any, shape: tuple[int, ...]) -> Any:
    """A gradient as handed back: zeros when none arrived, broadcast to the input's shape."""
    if g is None:
        return np.zeros(shape)
    if not isinstance(g, Traced) and shape_of(g) != shape:
        g = np.broadcast_to(g, shape)
    return to_user(g)


def _check_input_guards(program: Program, values: list[Any]) -> None:
    for s, kind, recorded in program.input_guards:
        if not _guard_holds(kind, recorded, values[s]):
            raise _GuardFailed


def record(f: Callable[..., Any], *example_args: Any, strict: bool = False) -> Tape:
    """Record ``f`` at ``example_args`` once; replay the returned :class:`Tape` at new inputs.

    ``strict=True`` refuses (``ShapeError``) arguments whose shapes differ from the recorded
    ones instead of recording again.

    Example:
        >>> import numpy as np
        >>> from dualad.tape import record
        >>> tape = record(lambda x: x ** 3 if x > 0 else -x, 1.0)
        >>> float(tape.grad(2.0))
        12.0
    """
    tape = Tape(f, strict=strict)
    key, _, inputs, ranges, _, _ = tape._split(example_args)
    tape._programs_for(example_args, key, inputs, ranges)
    return tape
