"""The recorded program: a flat list of operations with their guards, its forward replay
(plain numpy, or through the ordinary dispatch for traced inputs) and its reverse sweep.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> program = record(lambda x: np.sum(x * x), np.ones(2)).program
    >>> [type(op.op).__name__ for op in program.ops]
    ['Broadcasted[multiply]', 'Method[sum]']
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.arguments import value as plain_value
from ..core.array_protocol import shape_of
from ..core.dispatch import gradient as gradient_rules
from ..core.errors import RuleError, ShapeError
from ..core.tracing import apply_operator
from ..core.unbroadcast import unbroadcast
from ..derivatives.kinds import cotangent_term, rule_kinds
from ..reverse_mode.backward import _NEEDS, no_gradient_error

__all__ = ["Operation", "GuardFailed", "NanTangents", "guard_holds", "Program", "accumulate", "with_zeros"]


class Operation:
    """One recorded operation of a program."""

    __slots__ = ("op", "fn", "gfn", "rule", "template", "refs", "seqs", "kw", "kw_refs", "out",
                 "differentiable", "guards", "multi", "shape", "arg_shapes", "real_args")
    op: Any  # the recorded call's Operator
    fn: Callable[..., Any]  # its forward implementation, resolved when recorded
    gfn: Callable[..., Any] | None  # its gradient rule (None for a value-only operation)
    rule: Any  # the table rule of an elementwise operation, else None
    template: list[Any]  # the positional arguments, None where a slot goes
    refs: Any  # ((position, slot), ...): arguments that are recorded values
    seqs: Any  # ((position, list or tuple, ((index, slot), ...)), ...)
    kw: dict[str, Any]  # the keyword arguments that are constants
    kw_refs: Any  # ((keyword, slot), ...)
    out: int  # the slot of the result
    differentiable: bool
    guards: tuple[tuple[str, Any], ...]  # (kind, recorded reading) of the result
    multi: bool  # the result is a tuple or list of values
    shape: tuple[int, ...] | None
    arg_shapes: list[tuple[int, ...] | None]
    real_args: tuple  # ((position, None or item indices), ...): real parts of gradients

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


def fresh(v: Any) -> Any:
    """A constant output as handed back: an array copied (a caller may write into it; the
    next call must not see that)."""
    return v.copy() if type(v) is np.ndarray else v


class GuardFailed(Exception):
    """A replayed value differs from the recorded one where the recording depended on it."""


class NanTangents(Exception):
    """A compiled forward-mode result holds a NaN where eager forward mode may hold a
    number: eager mode's tangent products are NaN-safe (an exactly zero tangent times an
    infinite or NaN partial gives zero), compiled code's are not. Only entries that are
    NaN can differ, so the caller answers such a call from the tape's replay."""


_READERS: dict[str, Callable[[Any], Any]] = {
    "shape": shape_of, "bool": bool, "int": int, "float": float, "index": operator.index,
    "value": lambda v: np.array(plain_value(v), copy=True),
}


def guard_holds(kind: str, recorded: Any, v: Any) -> bool:
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

    input_guards: list[Any]  # guards on the inputs' values, set when the program is built

    def __init__(self, key: Any, n_slots: int, n_inputs: int, input_leaves: list[int],
                 ops: list[Operation], out_spec: Any, outputs: list[tuple[bool, Any]],
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
        self.out_dtype = np.dtype(np.float64)  # the first output's: set when built
        self.wanted: dict[Any, tuple[int, ...]] = {}  # input slots per argnums
        self.checked = False
        self.compiled: dict[Any, Any] = {}  # replay functions, None where not compiled
        self.uses: dict[Any, int] = {}  # replays so far, per kind, until compiled
        self._plans: dict[tuple[int, ...], list[tuple[int, Operation, list[bool], list, list]]] = {}

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
                    if not guard_holds(kind, recorded, out):
                        raise GuardFailed
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
                if not guard_holds(kind, recorded, out):
                    raise GuardFailed
            kept.append(args)
        return slots, kept

    def output_values(self, slots: list[Any]) -> list[Any]:
        return [slots[v] if is_slot else fresh(v) for is_slot, v in self.outputs]

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
                gfn = special or e.gfn
                if e.real_args:
                    gfn = _real_parts(gfn, e.real_args)
                steps.append((index, e, needs, targets, seq_targets, gfn, special is None))
        steps.reverse()
        self._plans[wanted] = steps
        return steps

    def _learn_real_parts(self, e: Operation, result: tuple, args: list[Any], targets: list,
                          seq_targets: list) -> tuple:
        """On a checked sweep: a rule that gives a complex gradient for a real argument (an
        inverse FFT of a real input, say) has its real part taken, from now on too (the
        plans are rebuilt with the projection; dtypes are fixed per recording)."""
        found: list[tuple[int, Any]] = []
        for pos, _s in targets:
            r = result[pos]
            if r is not None and _complex_value(r) and not _complex_value(args[pos]):
                found.append((pos, None))
        for pos, live in seq_targets:
            items = tuple(j for j, _s in live if result[pos][j] is not None
                          and _complex_value(result[pos][j])
                          and not _complex_value(args[pos][j]))
            if items:
                found.append((pos, items))
        if not found:
            return result
        merged = dict(e.real_args)
        for pos, items in found:
            if pos in merged and merged[pos] is not None and items is not None:
                merged[pos] = tuple(sorted(set(merged[pos]) | set(items)))
            elif pos not in merged:
                merged[pos] = items
        e.real_args = tuple(merged.items())
        self._plans.clear()
        self.compiled = {k: v for k, v in self.compiled.items() if k == "value"}
        return real_parts(result, tuple(found))

    def sweep(self, seeds: list[tuple[int, Any]], slots: list[Any], kept: list[Any],
              wanted: tuple[int, ...], traced: bool) -> list[Any]:
        """Gradients of the input slots ``wanted`` (None where nothing reached)."""
        grads: list[Any] = [None] * self.n_slots
        for s, seed in seeds:
            grads[s] = seed if grads[s] is None else accumulate(grads[s], seed)
        check = traced or not self.checked
        try:
            for index, e, needs, targets, seq_targets, gfn, tell_needs in self.plan(wanted):
                g = grads[e.out]
                if g is None:
                    continue
                out = slots[e.out]
                if e.multi:
                    g = with_zeros(g, out)
                args = kept[index]
                if traced:
                    _NEEDS.value = needs
                    result = gradient_rules(e.op, g, out, *args, **e.kwargs(slots))
                    if e.real_args:
                        result = real_parts(result, e.real_args)
                else:
                    if tell_needs:
                        _NEEDS.value = needs
                    if e.kw or e.kw_refs:
                        result = gfn(g, out, *args, **e.kwargs(slots))
                    else:
                        result = gfn(g, out, *args)
                if check:
                    _check_result(e, result, args, targets, traced)
                    result = self._learn_real_parts(e, result, args, targets, seq_targets)
                for pos, s in targets:
                    r = result[pos]
                    if r is not None:
                        prev = grads[s]
                        grads[s] = r if prev is None else accumulate(prev, r)
                    elif check:
                        raise _none_for_traced(e, pos, args)
                for pos, live in seq_targets:
                    if result[pos] is None:
                        raise _none_for_traced(e, pos, args)
                    for j, s in live:
                        r = result[pos][j]
                        if r is not None:
                            prev = grads[s]
                            grads[s] = r if prev is None else accumulate(prev, r)
        finally:
            _NEEDS.value = None
        if not traced:
            self.checked = True
        return [grads[s] for s in wanted]



def _complex_value(v: Any) -> bool:
    if type(v) is complex:
        return True
    dtype = getattr(plain_value(v), "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def _elementwise_gradient(rule: Any, needs: list[bool], arg_shapes: list[Any],
                          out_shape: Any) -> Callable[..., tuple] | None:
    """A rules-table gradient specialised to the arguments needed and the recorded shapes:
    the same partials, without the generic rule's per-call work (shapes, unbroadcasting
    and partials of constant arguments)."""
    kinds = rule_kinds(rule)
    n = len(kinds)
    if len(arg_shapes) != n or out_shape is None:
        return None
    derivatives = rule.derivatives
    items = tuple((i, kinds[i], cotangent_term(kinds[i]), arg_shapes[i] == out_shape,
                   arg_shapes[i]) for i in range(n) if needs[i])
    if rule.may_warn:
        return None  # the generic rule silences floating-point warnings: keep it
    if len(items) == 1:
        i, kind, _term, same, _shape = items[0]
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
    expr = any(kind == "expr" for _, kind, _, _, _ in items)

    def gradient(g: Any, out: Any, *args: Any) -> tuple:
        ds = derivatives(*args, out) if expr else None
        result: list[Any] = [None] * n
        for i, kind, term, same, shape in items:
            if term is not None:
                r = term(g, ds[i] if expr else None)
            elif kind == "zero":
                r = np.zeros(shape)
                same = True
            else:
                continue
            result[i] = r if same else unbroadcast(r, shape)
        return tuple(result)

    return gradient


def _none_for_traced(e: Operation, pos: int, args: list[Any]) -> Exception:
    """A rule gave no gradient for an argument computed from the inputs (never a silent
    zero): the error reverse mode raises."""
    builtin = gradient_rules.is_builtin_implementation(getattr(e.gfn, "func", e.gfn))
    return no_gradient_error(e.op, pos, args, builtin)


def real_parts(result: tuple, real_args: tuple[tuple[int, Any], ...]) -> tuple:
    """``result`` with the real part taken of each gradient of a real argument: a real
    value has a real gradient even where complex intermediates carried it (as the reverse
    pass of :mod:`dualad.reverse_mode.backward` does). ``real_args`` lists ``(position,
    None)`` for a real argument, ``(position, items)`` for the real items of a list."""
    result = list(result)
    for pos, items in real_args:
        r = result[pos]
        if r is None:
            continue
        if items is None:
            if np.iscomplexobj(r):
                result[pos] = np.real(r)
        else:
            r = list(r)
            for j in items:
                if r[j] is not None and np.iscomplexobj(r[j]):
                    r[j] = np.real(r[j])
            result[pos] = r
    return tuple(result)


def _real_parts(gfn: Callable[..., tuple], real_args: tuple) -> Callable[..., tuple]:
    def gradient(*args: Any, **kwargs: Any) -> tuple:
        return real_parts(gfn(*args, **kwargs), real_args)
    return gradient


def accumulate(old: Any, new: Any) -> Any:
    if isinstance(old, tuple):
        return tuple(b if a is None else a if b is None else a + b for a, b in zip(old, new))
    return old + new


def with_zeros(g: Any, output: Any) -> Any:
    if g is None:
        g = (None,) * len(output)
    items = [np.zeros_like(plain_value(o)) if x is None else x for x, o in zip(g, output)]
    return type(output)(items) if type(output) in (tuple, list) else tuple(items)


def _check_result(e: Operation, result: Any, args: list[Any], targets: list, traced: bool) -> None:
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
