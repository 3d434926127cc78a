"""Lowering: a recorded :class:`~dualad.tape.program.Program` as a few kinds of flat,
float64 instructions that a compiler can write as scalar loops.

Every value of the program becomes a flat float64 vector of its recorded size. The
instructions are:

- :class:`Const`: a value that does not depend on the inputs;
- :class:`Map`: an elementwise call with a rules-table entry (``out[i] = f(a[ia[i]], ...)``,
  broadcasting turned into gathers), whose value and partials come from the table's
  expressions;
- :class:`Gather`: a call declared an index map (``np.roll``, indexing, stacking, writes
  into buffers, ...): each output entry copies one input entry or is a constant;
- :class:`Linear`: a first-order reduction (``np.sum``, ``np.mean``), a contraction with
  one constant operand, or a scatter-add (the gradient of indexing), as a constant sparse
  matrix;
- :class:`MatMul`: a matrix product of two computed values (a declared contraction; or a
  call of two computed vectors that probes as their dot product, ``np.inner``);
- :class:`Select`: the largest (or smallest) entry of each group (``np.max`` over an axis);
- :class:`Order`: order statistics: each output entry a fixed weighted sum of the k-th
  smallest entries of its group, the groups sorted at run time (``np.sort``,
  ``np.median``, ``np.quantile``);
- :class:`Call`: any other differentiable call with real values, run as itself (a numpy
  call in the Python glue, derivatives from its eager rules);
- :class:`Guard`: a check that a value the recording depended on (a branch taken on a
  comparison, a number read from a value) reads as recorded; compiled code raises
  :class:`~dualad.tape.program.GuardFailed` when it does not, and the caller records again.

Which calls are which comes from the declarations of the numpy rule families
(:mod:`dualad.sparsity.flows`) and from the rules tables, never from a list of numpy
functions here. A call none of these express becomes a :class:`Call`; what
cannot be one either (complex values, several results, values without derivative) raises
:class:`LoweringError`, and the caller runs the program in Python instead.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import lower
    >>> tape = record(lambda x: np.sum(np.sin(x) * x), np.ones(3))
    >>> [type(i).__name__ for i in lower(tape.program, [np.ones(3)]).instructions]
    ['Map', 'Map', 'Linear']
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import DualadError
from ..derivatives.language import NUMBA_UFUNCS, numba_predicate_call, numba_scalar_source
from ..derivatives.registry import get_rule, operator_type
from ..derivatives.scalar_forms import scalar_form
from ..forward_mode.dual import Dual, Tag, partials_at
from ..reverse_mode.fast_path import NEEDS
from ..sparsity.flows import (
    index_map_data,
    is_contraction,
    is_linear_in,
    linear_reduction_axis,
    order_statistic_axis,
    scatter_positions,
)
from .linear_probes import ProbeRefused, linear_matrix
from .program import Operation, Program

__all__ = ["Call", "Const", "Gather", "Guard", "Linear", "Lowered", "LoweringError", "Map",
           "MatMul", "Order", "Select", "differentiated_output", "lower"]


class LoweringError(DualadError, TypeError):
    """An operation of a recorded program that the compiler cannot express."""


@dataclass
class Operand:
    """One argument of a :class:`Map`: a program slot read through ``index`` (None: the
    same position as the output; an int array otherwise), or a constant (an array of the
    output's size, or a float)."""

    slot: int | None
    index: np.ndarray | None = None
    constant: Any = None


@dataclass
class Const:
    out: int
    value: np.ndarray


@dataclass
class Map:
    out: int
    name: str  # the numpy ufunc computing the value
    arg_names: tuple[str, ...]
    operands: list[Operand]
    temps: list[str]  # scalar statements shared by the partials
    partials: list[str]  # one scalar expression per argument ("0.0": none)
    value: str | None = None  # the value's scalar source, when ``name`` is not a ufunc


@dataclass
class Gather:
    out: int
    constant: np.ndarray  # the output's constant entries (where source is -1)
    sources: list[tuple[int, np.ndarray, np.ndarray]]  # (slot, output positions, indices)


@dataclass
class Linear:
    """``out = matrix @ in + offset`` with a constant CSR ``matrix``."""

    out: int
    source: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    offset: np.ndarray


@dataclass
class MatMul:
    """``out (p, r) = a (p, q) @ b (q, r)``, operands computed values (or constants)."""

    out: int
    a: int | None
    b: int | None
    a_const: np.ndarray | None
    b_const: np.ndarray | None
    p: int
    q: int
    r: int


@dataclass
class Select:
    """``out[g] = max`` (or ``min``) over the entries ``i`` of ``source`` with
    ``group[i] == g``; ties share the derivative equally. A NaN entry makes its group's
    result NaN (``np.max``), or with ``ignores_nan`` is skipped, a group of NaNs giving NaN
    (``np.nanmax``)."""

    out: int
    source: int
    group: np.ndarray
    largest: bool
    ignores_nan: bool = False


@dataclass
class Call:
    """An operation with no compiled form, run as itself: a numpy call in the Python glue
    between compiled parts (:mod:`dualad.tape.calls`), its tangents from eager forward mode
    on dual numbers and its adjoints from its gradient rule. ``reads``: the computed slots
    it reads; ``why``: why it has no compiled form."""

    out: int
    reads: tuple[int, ...]
    operation: Operation
    why: str
    dtypes: tuple[str, ...] = ()  # of the reads, as recorded (an index stays an integer)
    differentiable: bool = True  # False: a value no derivative flows through
    complex_out: bool = False  # a complex result: only other calls read it


@dataclass
class Order:
    """Order statistics: ``out[o] = sum_t weights[o, t] * x[sorted[group_of[o], ranks[o, t]]]``
    where ``sorted[g]`` lists the entries ``members[g]`` of ``source`` (positions, in
    increasing order) sorted by value, stably (tied entries keep their order, as eager
    mode's sort) and NaN last; terms of weight 0 are padding. With ``nan_poisons``, a group
    holding a NaN gives NaN without derivative (``np.median``); else NaN sorts last
    (``np.sort``)."""

    out: int
    source: int
    members: np.ndarray  # (groups, group size) positions in ``source``
    group_of: np.ndarray  # (outputs,) the group each output entry reads
    ranks: np.ndarray  # (outputs, terms) ranks in the sorted group
    weights: np.ndarray  # (outputs, terms)
    nan_poisons: bool


@dataclass
class Guard:
    """The recording holds only while a value reads as it did: the value is slot ``slot``
    (``name`` None), or the elementwise predicate ufunc ``np.<name>`` of ``operands`` (a
    comparison whose result nothing else reads; its slot ``out`` is never written). It is
    read as ``kind`` (``"bool"``, ``"int"``, ``"float"``, ``"index"``, ``"value"``) and
    compared with ``recorded`` (flat float64; NaN equals NaN)."""

    out: int
    slot: int | None
    name: str | None
    arg_names: tuple[str, ...]
    operands: list[Operand]
    kind: str
    recorded: np.ndarray


#: How a guard reads a value, as the recording did (``program.guard_holds``).
GUARD_KINDS = ("bool", "int", "float", "index", "value")


@dataclass
class Lowered:
    program: Program
    sizes: list[int]
    shapes: list[tuple[int, ...]]
    instructions: list[Any] = field(default_factory=list)


def differentiated_output(outputs: list[tuple[bool, Any]], out: int, single: bool = True
                          ) -> int:
    """The slot ``out`` of a lowered program's differentiated output (first of
    ``outputs``, ``-1`` when it is a constant), which must be its only output when
    ``single``; a :class:`LoweringError` otherwise."""
    if single and len(outputs) != 1:
        raise LoweringError("a program with several outputs")
    if out < 0:
        raise LoweringError("the differentiated output is a constant")
    return out


def _float_array(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise LoweringError(f"{what} has dtype {a.dtype}; only real values compile")
    return a.astype(np.float64)


def _slot_positions(e: Operation) -> list[tuple[int, int | None, int]]:
    """``(position, index in a sequence or None, slot)`` of every slot argument."""
    if e.kw_refs:
        raise LoweringError(f"{e.op!r} takes a computed keyword argument")
    found = [(pos, None, s) for pos, s in e.refs]
    for pos, _kind, items in e.seqs:
        found += [(pos, j, s) for j, s in items]
    return found


def lower(program: Program, inputs: list[Any]) -> Lowered:
    """The instructions of ``program``, whose values at ``inputs`` fix shapes and constants."""
    slots, _ = program.run(list(inputs), False)
    shapes: list[tuple[int, ...]] = []
    for v in slots:
        if isinstance(v, (tuple, list)):
            shapes.append(())
            continue
        shapes.append(tuple(np.shape(v)))
    for s in range(program.n_inputs):
        _float_array(slots[s], f"input {s}")
    sizes = [int(np.prod(sh, dtype=np.int64)) for sh in shapes]
    low = Lowered(program, sizes, shapes)
    for s, kind, recorded in program.input_guards:
        low.instructions.append(_lower_guard(s, None, kind, recorded))
    read = _read_slots(program)
    masks: set[int] = set()  # values computed without derivative (masks, their counts)
    complex_slots: set[int] = set()  # values that only calls run as themselves read
    for e in program.ops:
        if e.multi:
            raise LoweringError(f"{e.op!r} returns several values")
        found = _slot_positions(e)
        if found and (np.iscomplexobj(slots[e.out]) or
                      any(s in complex_slots for _, _, s in found)):
            call = _as_call(e, slots, found, LoweringError(f"{e.op!r} has complex values"))
            if call.complex_out:
                complex_slots.add(e.out)
            low.instructions.append(call)
            low.instructions.extend(_lower_guard(e.out, None, kind, recorded)
                                    for kind, recorded in e.guards)
            continue
        if not found:
            if e.guards:
                raise LoweringError(f"{e.op!r} is guarded but depends on no input")
            low.instructions.append(Const(e.out, _float_array(slots[e.out], repr(e.op)).ravel()))
            continue
        if not e.differentiable:
            why = LoweringError(f"{e.op!r} computes a value without derivative from the "
                                f"inputs")
            try:
                lowered = _lower_predicate(e, shapes, read)
                data = index_map_data(type(e.op))
                if lowered is None and data is not None:  # entries of a mask (``m[0]``)
                    lowered = [_lower_gather(e, slots, sizes, found, data)] + [
                        _lower_guard(e.out, None, kind, recorded)
                        for kind, recorded in e.guards]
                if lowered is None and found and all(s in masks for _, _, s in found):
                    # linear in masks (how many ties a maximum has: ``np.add.reduce(hit)``):
                    # probed as any linear call; no derivative flows through masks
                    lowered = [_lower_linear(e, slots, sizes, found, probed=True)] + [
                        _lower_guard(e.out, None, kind, recorded)
                        for kind, recorded in e.guards]
            except LoweringError as exc:
                lowered, why = None, exc
            if lowered is None:  # run as itself, no derivative through it
                lowered = [_as_call(e, slots, found, why)] + [
                    _lower_guard(e.out, None, kind, recorded) for kind, recorded in e.guards]
            low.instructions.extend(lowered)
            masks.add(e.out)
            continue
        try:
            low.instructions.append(_lower_one(e, slots, shapes, sizes, found))
        except LoweringError as exc:  # no compiled form: run as itself, if it can be
            low.instructions.append(_as_call(e, slots, found, exc))
        if e.guards:  # the value itself is read: checked once it is computed
            low.instructions.extend(_lower_guard(e.out, None, kind, recorded)
                                    for kind, recorded in e.guards)
    if any(is_slot and s in complex_slots for is_slot, s in program.outputs):
        raise LoweringError("a complex result; only real values compile")
    return low


def _as_call(e: Operation, slots: list[Any], found: list[tuple[int, int | None, int]],
             why: LoweringError) -> Call:
    """An operation with no compiled form as a :class:`Call` (numbers in and out: real,
    or complex values that only other calls read); ``why`` is raised again where it cannot
    be one."""
    out = np.asarray(slots[e.out])
    if out.dtype.kind not in "biufc" or any(
            np.asarray(slots[s]).dtype.kind not in "biufc" for _, _, s in found):
        raise why
    reads = tuple(dict.fromkeys(s for _, _, s in found))
    return Call(e.out, reads, e, str(why), tuple(np.asarray(slots[s]).dtype.str for s in reads),
                e.differentiable, out.dtype.kind == "c")


def _lower_one(e: Operation, slots: list[Any], shapes: list[tuple[int, ...]],
               sizes: list[int], found: list[tuple[int, int | None, int]]) -> Any:
    """The instruction of one differentiable operation."""
    _float_array(slots[e.out], repr(e.op))
    rule = e.rule if e.rule is not None else _own_table_rule(e)
    if rule is not None:
        return _lower_map(e, rule, slots, shapes)
    form = scalar_form(getattr(e.op, "f", None))
    if form is not None:
        return _lower_form(e, form, shapes)
    declared = order_statistic_axis(type(e.op))
    if declared is not None:
        return _lower_order(e, slots, shapes, found, declared)
    data = index_map_data(type(e.op))
    if data is not None:
        return _lower_gather(e, slots, sizes, found, data)
    positions = scatter_positions(type(e.op))
    if positions is not None:
        return _lower_scatter(e, slots, sizes, found, positions)
    if is_contraction(type(e.op)) and len(found) == 2:
        return _lower_matmul(e, slots, shapes, found)
    if len(found) == 2:
        dot = _as_dot_product(e, slots, shapes, found)
        if dot is not None:
            return dot
    return _lower_linear(e, slots, sizes, found)


def _read_slots(program: Program) -> set[int]:
    """The slots some operation or output reads."""
    read = {s for is_slot, s in program.outputs if is_slot}
    for e in program.ops:
        read.update(s for _, s in e.refs)
        read.update(s for _, s in e.kw_refs)
        for _, _, items in e.seqs:
            read.update(s for _, s in items)
    return read


def _lower_guard(slot: int, predicate: Any, kind: str, recorded: Any) -> Guard:
    if kind == "shape":  # a lowered program's shapes are those recorded
        return Guard(slot, None, None, (), [], "shape", np.zeros(0))
    if kind not in GUARD_KINDS:
        raise LoweringError(f"a guard of kind {kind!r}")
    rec = np.asarray(recorded)
    if rec.dtype.kind not in "biuf":
        raise LoweringError(f"a guard on a {rec.dtype} value")
    return Guard(slot, slot, None, (), [], kind, rec.astype(np.float64).ravel())


def _is_predicate(f: Any) -> bool:
    """An elementwise function of floats with a boolean result (a comparison, ``isnan``)."""
    return isinstance(f, np.ufunc) and f.nout == 1 and any(
        t == "d" * f.nin + "->?" for t in f.types)


def _lower_predicate(e: Operation, shapes: list[tuple[int, ...]], read: set[int]
                     ) -> list[Any] | None:
    """A comparison (or another boolean ufunc) of computed values: a :class:`Map` to 1.0 /
    0.0 without derivative when something reads it (a mask), and the guards of the
    branches taken on it (``if x[0] > 0:``); None for other values without derivative."""
    f = getattr(e.op, "f", None)
    if not _is_predicate(f) or e.kw or e.seqs or len(e.template) != f.nin:
        return None
    operands = _map_operands(e, shapes)
    names = tuple(f"x{i}" for i in range(f.nin))
    lowered: list[Any] = []
    if e.out in read:
        lowered.append(Map(e.out, f.__name__, names, operands, [], ["0.0"] * f.nin,
                           numba_predicate_call(f.__name__, names)))
    for kind, recorded in e.guards:
        g = _lower_guard(e.out, None, kind, recorded)
        g.slot, g.name, g.arg_names, g.operands = None, f.__name__, names, operands
        if e.out in read and g.kind != "shape":  # the computed mask itself is read
            g.slot, g.name, g.arg_names, g.operands = e.out, None, (), []
        if g.kind not in ("shape", "bool", "value"):
            raise LoweringError(f"a comparison read as {kind}")
        lowered.append(g)
    return lowered


def _lower_matmul(e: Operation, slots: list[Any], shapes: list[tuple[int, ...]],
                  found: list[tuple[int, int | None, int]]) -> MatMul:
    """A matrix product of two computed values (1-D operands as a row or a column; two
    vectors: their dot product)."""
    if e.kw or len(e.template) != 2 or any(j is not None for _, j, _ in found):
        raise LoweringError(f"{e.op!r} with these arguments has no compiled form")
    by_pos = {pos: s for pos, _, s in found}
    sa, sb = shapes[by_pos[0]], shapes[by_pos[1]]
    if len(sa) not in (1, 2) or len(sb) not in (1, 2):
        raise LoweringError(f"{e.op!r} of shapes {sa} and {sb} has no compiled form")
    p, q = (1, sa[0]) if len(sa) == 1 else sa
    q2, r = (sb[0], 1) if len(sb) == 1 else sb
    if q != q2:
        raise LoweringError(f"{e.op!r} of shapes {sa} and {sb} has no compiled form")
    return MatMul(e.out, by_pos[0], by_pos[1], None, None, p, q, r)


def _as_dot_product(e: Operation, slots: list[Any], shapes: list[tuple[int, ...]],
                    found: list[tuple[int, int | None, int]]) -> MatMul | None:
    """Two computed vectors of one length and a 0-d result that the call computes as their
    dot product, probed at random vectors (``np.inner``, ``np.vdot``, ``np.vecdot`` of real
    vectors): a :class:`MatMul` of a row and a column; else None."""
    (pa, ja, sa), (pb, jb, sb) = found
    if ja is not None or jb is not None or len(shapes[sa]) != 1 or \
            shapes[sa] != shapes[sb] or shapes[e.out] != () or pa == pb:
        return None
    rng = np.random.default_rng(0)
    n = shapes[sa][0]
    for _ in range(3):
        u, v = rng.standard_normal(n), rng.standard_normal(n)
        try:
            got = np.asarray(_probe_call(e, {(pa, None): u, (pb, None): v}, slots))
        except Exception:  # noqa: BLE001 - a call that cannot be probed is not a dot product
            return None
        if got.shape != () or got.dtype.kind != "f" or \
                not np.isclose(float(got), float(u @ v), rtol=1e-12, atol=1e-12):
            return None
    return MatMul(e.out, sa, sb, None, None, 1, n, 1)


def _groups(shape: tuple[int, ...], axis: Any) -> np.ndarray:
    """The output entry each input entry of a reduction over ``axis`` belongs to."""
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(sorted(int(a) % max(ndim, 1) for a in
                            (axis if isinstance(axis, (tuple, list)) else (axis,))))
    kept = [d for d in range(ndim) if d not in axes]
    coords = np.indices(shape).reshape(ndim, -1)
    if not kept:
        return np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.intp)
    return np.ravel_multi_index(tuple(coords[d] for d in kept),
                                tuple(shape[d] for d in kept)).astype(np.intp)


def _own_table_rule(e: Operation) -> Any:
    """The table rule of an elementwise call whose gradient is another of dualad's own
    methods (e.g. one that also handles complex values): on the real values compiled here
    it agrees with the table. A user's own method is never replaced."""
    f = getattr(e.op, "f", None)
    method = getattr(e.gfn, "func", None)
    if f is None or method is None:
        return None
    rule = get_rule(f)
    if rule is None or operator_type(rule.function) is not type(e.op):
        return None
    module = getattr(method, "__module__", "") or ""
    return rule if module.startswith("dualad.") else None


def _lower_map(e: Operation, rule: Any, slots: list[Any], shapes: list[tuple[int, ...]]
               ) -> Map:
    name = rule.numpy_name
    if name not in NUMBA_UFUNCS or e.kw or e.seqs or len(e.template) != len(rule.arg_names):
        raise LoweringError(f"{e.op!r} has no scalar Numba form")
    body = _scalar_source(rule.expressions)
    if body is None:
        raise LoweringError(f"{e.op!r}: its derivative needs a function Numba lacks")
    temps, partials = body
    return Map(e.out, name, rule.arg_names, _map_operands(e, shapes), list(temps),
               list(partials))


@functools.lru_cache(maxsize=512)
def _scalar_source(expressions: tuple) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The scalar Numba source of a rule's partials, written once per rule (a long
    program calls the same few rules thousands of times)."""
    body = numba_scalar_source(expressions, indent="")
    return None if body is None else (tuple(body[0]), tuple(body[1]))


def _lower_form(e: Operation, form: Any, shapes: list[tuple[int, ...]]) -> Map:
    """An elementwise function with a declared scalar form (``np.where``)."""
    if e.kw or e.seqs or len(e.template) != len(form.arg_names):
        raise LoweringError(f"{e.op!r} with these arguments has no compiled form")
    value = numba_scalar_source([form.value], indent="")
    body = numba_scalar_source(list(form.derivatives), indent="")
    if value is None or body is None or value[0]:
        raise LoweringError(f"{e.op!r}: its scalar form needs a function Numba lacks")
    temps, partials = body
    return Map(e.out, "", form.arg_names, _map_operands(e, shapes), temps, partials,
               value[1][0])


def _map_operands(e: Operation, shapes: list[tuple[int, ...]]) -> list[Operand]:
    """The operands of an elementwise call, broadcast to its output's shape."""
    out_shape = shapes[e.out]
    refs = dict(e.refs)
    operands = []
    for pos, a in enumerate(e.template):
        if pos in refs:
            s = refs[pos]
            if shapes[s] == out_shape:
                operands.append(Operand(s))
            else:
                ids = np.arange(int(np.prod(shapes[s], dtype=np.int64))).reshape(shapes[s])
                index = np.ascontiguousarray(np.broadcast_to(ids, out_shape)).ravel()
                operands.append(Operand(s, index.astype(np.intp)))
        else:
            c = _float_array(a, f"a constant argument of {e.op!r}")
            if c.size == 1:
                operands.append(Operand(None, constant=float(c.ravel()[0])))
            else:
                operands.append(Operand(None, constant=np.ascontiguousarray(
                    np.broadcast_to(c, out_shape)).ravel().copy()))
    return operands


def _probe_call(e: Operation, replaced: dict[tuple[int, int | None], Any],
                slots: list[Any]) -> Any:
    f = getattr(e.op, "f", None)
    if f is None:
        raise LoweringError(f"{e.op!r} is not a plain call")
    args = list(e.template)
    for (pos, j), value in replaced.items():
        if j is None:
            args[pos] = value
        else:
            seq = list(args[pos])
            seq[j] = value
            args[pos] = type(e.template[pos])(seq)
    return f(*args, **e.kw)


def _lower_gather(e: Operation, slots: list[Any], sizes: list[int],
                  found: list[tuple[int, int | None, int]], data: tuple[int, ...]) -> Gather:
    ids: dict[tuple[int, int | None], Any] = {}
    owners = [(-1, 0)]
    start = 1
    for pos, j, s in found:
        if pos not in data:
            raise LoweringError(f"{e.op!r} takes a computed value as a parameter")
        shape = np.shape(slots[s])
        ids[pos, j] = np.arange(start, start + sizes[s], dtype=np.float64).reshape(shape)
        owners.append((s, start))
        start += sizes[s]
    # constants among the data read as zeros: entries that depend on nothing
    for pos in data:
        if pos >= len(e.template):
            continue
        a = e.template[pos]
        if type(a) in (list, tuple):
            for j, b in enumerate(a):
                if (pos, j) not in ids:
                    ids[pos, j] = np.zeros(np.shape(b))
        elif (pos, None) not in ids:
            ids[pos, None] = np.zeros(np.shape(a))
    index = np.asarray(_probe_call(e, ids, slots), dtype=np.float64).ravel()
    out = _float_array(slots[e.out], repr(e.op)).ravel()
    if index.size == 1 and out.size == 1:  # one entry (``y[3]``): no passes over arrays
        return _gather_one(e, float(index[0]), float(out[0]), owners, slots, sizes)
    if index.shape != out.shape or not np.all(index == np.round(index)):
        raise LoweringError(f"{e.op!r} does not move entries as declared")
    index = index.astype(np.intp)
    constant = np.where(index == 0, out, 0.0)
    sources = []
    for s, begin in owners[1:]:
        positions = np.flatnonzero((index >= begin) & (index < begin + sizes[s]))
        if positions.size:
            local = (index[positions] - begin).astype(np.intp)
            check = np.asarray(slots[s], dtype=np.float64).ravel()[local]
            if not np.array_equal(check, out[positions], equal_nan=True):
                raise LoweringError(f"{e.op!r} does not move entries as declared")
            sources.append((s, positions.astype(np.intp), local))
    return Gather(e.out, constant, sources)


def _gather_one(e: Operation, k: float, value: float, owners: list[tuple[int, int]],
                slots: list[Any], sizes: list[int]) -> Gather:
    """:func:`_lower_gather`'s instruction for an output of one entry, the probe's ``k``
    (0: a constant; else the position among the owners' numbered entries)."""
    if not math.isfinite(k) or k != math.floor(k):
        raise LoweringError(f"{e.op!r} does not move entries as declared")
    at = int(k)
    for s, begin in owners[1:]:
        if begin <= at < begin + sizes[s]:
            found = float(np.asarray(slots[s], dtype=np.float64).reshape(-1)[at - begin])
            if found != value and not (found != found and value != value):
                raise LoweringError(f"{e.op!r} does not move entries as declared")
            return Gather(e.out, np.zeros(1), [(s, np.zeros(1, dtype=np.intp),
                                                np.array([at - begin], dtype=np.intp))])
    return Gather(e.out, np.array([value if at == 0 else 0.0]), [])


def _lower_scatter(e: Operation, slots: list[Any], sizes: list[int],
                   found: list[tuple[int, int | None, int]], positions: Any) -> Linear:
    """A scatter-add of its first argument (declared with its output positions) as a
    constant sparse matrix: entries sent to one position add up."""
    if len(found) != 1 or found[0][:2] != (0, None):
        raise LoweringError(f"{e.op!r} scatters a computed value with computed parameters")
    s = found[0][2]
    shape = np.shape(slots[s])
    n, m = sizes[s], sizes[e.out]
    rows = np.asarray(positions(*e.template, **e.kw))
    if rows.dtype.kind not in "iu":
        raise LoweringError(f"{e.op!r}: its declared positions are not integers")
    ids = np.arange(n, dtype=np.intp).reshape(shape)
    try:
        cols = np.broadcast_to(ids, rows.shape)
    except ValueError:
        if ids.size != rows.size:
            raise LoweringError(f"{e.op!r}: {n} values do not fill {rows.size} positions"
                                ) from None
        cols = ids.reshape(rows.shape)
    rows, cols = rows.ravel().astype(np.intp), cols.ravel()
    if rows.size and (rows.min() < 0 or rows.max() >= m):
        raise LoweringError(f"{e.op!r}: a declared position lies outside its {m} entries")
    # one entry per (row, column), counted: a value sent twice to one position adds twice
    pairs, counts = np.unique(rows * max(n, 1) + cols, return_counts=True)
    r, c = pairs // max(n, 1), pairs % max(n, 1)
    indptr = np.zeros(m + 1, dtype=np.intp)
    np.add.at(indptr, r + 1, 1)
    indptr = np.cumsum(indptr).astype(np.intp)
    data = counts.astype(np.float64)
    probe = np.random.default_rng(2).standard_normal(n)
    got = np.asarray(_probe_call(e, {(0, None): probe.reshape(shape)}, slots),
                     dtype=np.float64).ravel()
    expected = np.zeros(m)
    np.add.at(expected, r, data * probe[c])
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-12,
                                                      atol=1e-12):
        raise LoweringError(f"{e.op!r} does not scatter its entries as declared")
    return Linear(e.out, s, indptr, c.astype(np.intp), data, np.zeros(m))


def _as_selection(e: Operation, slots: list[Any], pos: int, s: int,
                  shape: tuple[int, ...], axis_at: int | None) -> Select | None:
    """A reduction that picks the largest (or smallest) entry of each group, if it is one."""
    if axis_at is None:
        return None
    axis = e.template[axis_at] if len(e.template) > axis_at else e.kw.get("axis")
    group = _groups(shape, axis)
    rng = np.random.default_rng(1)
    r = rng.standard_normal(group.size)
    got = np.asarray(_probe_call(e, {(pos, None): r.reshape(shape)}, slots),
                     dtype=np.float64).ravel()
    n_out = int(group.max()) + 1 if group.size else 0
    if got.size != n_out:
        return None
    for largest, ufunc in ((True, np.maximum), (False, np.minimum)):
        expected = np.full(n_out, -np.inf if largest else np.inf)
        ufunc.at(expected, group, r)
        if np.array_equal(got, expected):
            r[0] = np.nan  # np.max gives NaN, np.nanmax the largest of the others (a
            with warnings.catch_warnings():  # group of one entry: NaN either way)
                warnings.simplefilter("ignore", RuntimeWarning)
                got = np.asarray(_probe_call(e, {(pos, None): r.reshape(shape)}, slots),
                                 dtype=np.float64).ravel()
            return Select(e.out, s, group, largest, not np.isnan(got[group[0]]))
    return None


def _lower_linear(e: Operation, slots: list[Any], sizes: list[int],
                  found: list[tuple[int, int | None, int]], probed: bool = False
                  ) -> Linear | Select:
    """A call linear in its one computed argument (a reduction over axes, a contraction with
    a constant operand, a call its family notes linear in that argument) as a constant
    sparse matrix read from its structure (:mod:`dualad.tape.linear_probes`), or a
    reduction that selects the largest or smallest entry of each group; ``probed``: any
    call the probes find linear."""
    if len(found) == 2 and found[0][1] is None and found[1][1] is None and \
            all(is_linear_in(type(e.op), pos) for pos, _, _ in found):
        raise LoweringError(
            f"{e.op!r} of two computed values (arguments {found[0][0]} and {found[1][0]}) "
            f"has no compiled form: it is declared linear in each of them, and compiles "
            f"where only one of them is computed (the other a constant)")
    if len(found) != 1 or found[0][1] is not None:
        raise LoweringError(f"{e.op!r} is not a linear function of one computed value")
    pos, _, s = found[0]
    axis_at = linear_reduction_axis(type(e.op))
    if axis_at is None and not is_contraction(type(e.op)) and not probed and \
            not is_linear_in(type(e.op), pos):
        raise LoweringError(f"{e.op!r} has no compiled form")
    shape = np.shape(slots[s])
    if axis_at is not None and _groups_of_two(e, shape, axis_at):
        selected = _as_selection(e, slots, pos, s, shape, axis_at)  # np.max: no matrix
        if selected is not None:
            return selected

    def call(x: Any) -> Any:
        return _probe_call(e, {(pos, None): x}, slots)

    try:
        matrix = linear_matrix(call, shape, sizes[e.out], _transposed(e, pos, slots))
    except ProbeRefused as exc:
        raise LoweringError(f"{e.op!r} {exc}") from None
    except ValueError:
        raise LoweringError(f"{e.op!r} changes size or type when probed") from None
    if matrix is None:
        selected = _as_selection(e, slots, pos, s, shape, axis_at)  # not linear: max?
        if selected is not None:
            return selected
        raise LoweringError(f"{e.op!r} is not linear in its computed argument")
    return Linear(e.out, s, matrix.indptr, matrix.indices, matrix.data, matrix.offset)


def _groups_of_two(e: Operation, shape: tuple[int, ...], axis_at: int) -> bool:
    """Whether a reduction over ``axis`` reduces groups of two entries or more (where a
    group holds one entry, a sum is also its maximum: the matrix decides)."""
    axis = e.template[axis_at] if len(e.template) > axis_at else e.kw.get("axis")
    try:
        group = _groups(shape, axis)
    except Exception:  # noqa: BLE001 - an axis this cannot read: the probes decide
        return False
    return group.size > 0 and int(np.bincount(group).min()) >= 2


def _transposed(e: Operation, pos: int, slots: list[Any]) -> Any:
    """The gradient rule of ``e`` as a function of the cotangent, giving the gradient of
    argument ``pos`` (the transposed matrix times the cotangent: one call reads every row
    that shares no column with another); None for a call without one."""
    if e.gfn is None or not e.differentiable:
        return None
    args = e.args(slots)
    out = slots[e.out]
    out_shape = np.shape(out)
    needs = [i == pos for i in range(len(args))]

    def transpose(cotangent: np.ndarray) -> Any:
        before = getattr(NEEDS, "value", None)
        NEEDS.value = needs
        try:
            result = e.gfn(cotangent.reshape(out_shape), out, *args, **e.kw)
        finally:
            NEEDS.value = before
        return result[pos]

    return transpose




#: An order statistic whose outputs read more than two neighbouring ranks is probed with
#: (group size + 2) directions on every entry; past this many (entries x directions), the
#: call is not compiled (the replay runs it).
MAX_ORDER_PROBE = 2 ** 25
#: At most this many ranks per output entry (interpolations read two).
MAX_ORDER_TERMS = 16
#: Directions per call when an order statistic is probed on dual numbers.
ORDER_PROBE_DIRECTIONS = 256


def order_apply(ins: Order, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The value and the tangent (in direction ``v``) of :class:`Order` ``ins`` at the flat
    ``x``, in numpy: the reference the probes compare the call with.

    Example:
        >>> ins = Order(1, 0, np.array([[0, 1, 2]]), np.array([0]), np.array([[1, 2]]),
        ...             np.array([[0.5, 0.5]]), True)  # the mean of the two largest
        >>> order_apply(ins, np.array([3.0, 1.0, 2.0]), np.array([1.0, 0.0, 0.0]))
        (array([2.5]), array([0.5]))
    """
    vals = x[ins.members]
    order = np.argsort(vals, axis=1, kind="stable")  # NaN last
    ranked = np.take_along_axis(ins.members, order, axis=1)
    pos = ranked[ins.group_of[:, None], ins.ranks]
    used = ins.weights != 0.0
    with np.errstate(invalid="ignore"):
        y = np.sum(np.where(used, ins.weights * x[pos], 0.0), axis=1)
        t = np.sum(np.where(used, ins.weights * v[pos], 0.0), axis=1)
    if ins.nan_poisons:
        bad = np.isnan(vals).any(axis=1)[ins.group_of]
        y[bad] = np.nan
        t[bad] = 0.0
    return y, t


def _order_probe(e: Operation, shape: tuple[int, ...], point: np.ndarray,
                 seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The call's value and tangents (``(m, k)``) at the flat ``point`` in the directions
    ``seeds`` (``(n, k)``), from calls on dual numbers, ``ORDER_PROBE_DIRECTIONS`` at a time."""
    n, k = seeds.shape
    value: np.ndarray | None = None
    parts = []
    for start in range(0, max(k, 1), ORDER_PROBE_DIRECTIONS):
        chunk = np.ascontiguousarray(seeds[:, start:start + ORDER_PROBE_DIRECTIONS])
        tag = Tag()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            out = _probe_call(e, {(0, None): Dual(point.reshape(shape).copy(), chunk.reshape(
                shape + (chunk.shape[1],)), tag)}, [])
        got = np.asarray(getattr(out, "value", out), dtype=np.float64).ravel()
        partials = partials_at(out, tag)
        if partials is None:
            partials = np.zeros((got.size, chunk.shape[1]))
        partials = np.asarray(partials, dtype=np.float64).reshape(got.size, chunk.shape[1])
        value = got if value is None else value
        parts.append(partials)
    assert value is not None
    return value, np.concatenate(parts, axis=1)


def _lower_order(e: Operation, slots: list[Any], shapes: list[tuple[int, ...]],
                 found: list[tuple[int, int | None, int]], declared: tuple[int, Any]) -> Order:
    """A call declared an order statistic (:func:`~dualad.sparsity.flows.
    note_order_statistic`): its groups from the declared axis; the ranks and weights each
    output entry reads, probed on dual numbers at a point of distinct entries (see
    ``_ranks_by_moments`` and ``_ranks_by_positions``); then checked against the call,
    values and derivatives, at other points: random ones, ties (eager mode's convention),
    and NaNs (which decide ``nan_poisons``)."""
    what = repr(e.op)
    if len(found) != 1 or found[0][:2] != (0, None):
        raise LoweringError(f"{what} with a computed parameter (such as q) has no compiled "
                            f"form; pass the parameters as constants")
    s = found[0][2]
    shape = shapes[s]
    axis_at, default = declared
    axis = e.template[axis_at] if len(e.template) > axis_at else e.kw.get("axis", default)
    try:  # a 0-d value: one group of one entry
        group = np.zeros(1, dtype=np.intp) if shape == () else _groups(shape, axis)
    except (TypeError, ValueError, IndexError) as exc:
        raise LoweringError(f"{what} over axis {axis!r} of shape {shape}: {exc}") from None
    n, m = group.size, int(np.prod(shapes[e.out], dtype=np.int64))
    if n == 0 or m == 0:
        raise LoweringError(f"{what} of an empty value")
    counts = np.bincount(group)
    size = int(counts[0])
    if np.any(counts != size):
        raise LoweringError(f"{what}: groups of unequal sizes")
    members = np.argsort(group, kind="stable").reshape(-1, size).astype(np.intp)
    rng = np.random.default_rng(3)
    point = rng.standard_normal(n)  # distinct entries: every rank is one entry
    rank_of = np.empty_like(members)  # rank_of[g, j]: the rank of member j of group g
    order = np.argsort(point[members], axis=1, kind="stable")
    np.put_along_axis(rank_of, order, np.broadcast_to(np.arange(size), members.shape), axis=1)
    rank = np.empty(n, dtype=np.intp)
    rank[members] = rank_of
    probe = functools.partial(_order_probe, e, shape)
    checks = [rng.standard_normal(n), np.floor(point * 1.5), np.zeros(n)]  # ties, all tied
    nan_point = point.copy()
    nan_point[members[:, 0]] = np.nan
    checks.append(nan_point)
    why = "its ranks"
    for find in (_ranks_by_moments, _ranks_by_positions):
        try:
            group_of, ranks, weights = find(probe, point, group, rank, members, m, what)
        except LoweringError as exc:
            why = str(exc)
            continue
        ins = Order(e.out, s, members, group_of, ranks, weights, True)
        if _order_holds(ins, probe, checks, rng):
            return ins
        why = f"{what} does not read fixed ranks of its groups as declared"
    raise LoweringError(why)


def _order_holds(ins: Order, probe: Any, checks: list[np.ndarray],
                 rng: np.random.Generator) -> bool:
    """Whether ``ins`` computes what the call does (values, and the derivative in a random
    direction) at each of ``checks``; at the last (NaNs in every group), ``nan_poisons``
    is set to what the call does."""
    for k, at in enumerate(checks):
        direction = rng.standard_normal((at.size, 1))
        got, tangent = probe(at, direction)
        for poisons in ((True, False) if k == len(checks) - 1 else (ins.nan_poisons,)):
            ins.nan_poisons = poisons
            ref_y, ref_t = order_apply(ins, at, direction[:, 0])
            if got.shape == ref_y.shape and \
                    np.allclose(got, ref_y, rtol=1e-12, atol=1e-12, equal_nan=True) and \
                    np.allclose(tangent[:, 0], ref_t, rtol=1e-10, atol=1e-10, equal_nan=True):
                break
        else:
            return False
    return True


def _group_of_outputs(total: np.ndarray, by_group: np.ndarray, n_groups: int,
                      what: str) -> np.ndarray:
    """The group each output reads, from its tangents in the directions ``1`` (the sum of
    its weights) and ``group + 1`` (that sum times its group + 1)."""
    if np.any(np.abs(total) < 1e-9):
        raise LoweringError(f"{what}: an output entry whose weights add up to 0")
    ratio = by_group / total - 1.0
    group_of = np.round(ratio).astype(np.intp)
    if not np.allclose(ratio, group_of, atol=1e-6) or group_of.min() < 0 or \
            group_of.max() >= n_groups:
        raise LoweringError(f"{what} does not read one group per output entry")
    return group_of


def _ranks_by_moments(probe: Any, point: np.ndarray, group: np.ndarray, rank: np.ndarray,
                      members: np.ndarray, m: int, what: str
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranks and weights of outputs that read one rank or two neighbouring ranks (a sort,
    a median, an interpolated quantile), from five directions whatever the group size:
    ``group + 1``, ``rank + 1`` and its square (the mean rank read says which ranks, the
    second moment checks it), and the entries of even and of odd rank (each output's two
    weights, as the call computes them)."""
    seeds = np.stack([group + 1.0, rank + 1.0, (rank + 1.0) ** 2, (rank % 2 == 0) * 1.0,
                      (rank % 2 == 1) * 1.0], axis=1)
    y, t = probe(point, seeds)
    if y.size != m:
        raise LoweringError(f"{what} changes size when probed")
    even, odd = t[:, 3], t[:, 4]
    total = even + odd
    group_of = _group_of_outputs(total, t[:, 0], members.shape[0], what)
    mean = t[:, 1] / total - 1.0  # the mean rank read, weighted
    low = np.floor(mean + 1e-9).astype(np.intp)
    low_is_even = low % 2 == 0
    w_low = np.where(low_is_even, even, odd)
    w_high = np.where(low_is_even, odd, even)
    single = np.abs(w_high) <= 1e-14 * np.abs(w_low)
    ranks = np.stack([low, np.where(single, 0, low + 1)], axis=1)
    weights = np.stack([w_low, np.where(single, 0.0, w_high)], axis=1)
    size = members.shape[1]
    second = np.sum(weights * (ranks + 1.0) ** 2, axis=1)
    if np.any(ranks < 0) or np.any(ranks >= size) or \
            not np.allclose(second, t[:, 2], rtol=1e-9, atol=1e-9) or \
            not np.allclose(np.sum(weights * (ranks + 1.0), axis=1), t[:, 1], rtol=1e-9,
                            atol=1e-9):
        raise LoweringError(f"{what}: outputs that read more than two neighbouring ranks")
    if np.all(single):
        ranks, weights = ranks[:, :1].copy(), weights[:, :1].copy()
    return group_of, ranks, weights


def _ranks_by_positions(probe: Any, point: np.ndarray, group: np.ndarray, rank: np.ndarray,
                        members: np.ndarray, m: int, what: str
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranks and weights of outputs that read any ranks, from one direction per position
    in a group (the j-th member of every group) and two saying which group each output
    reads: (group size + 2) directions, within MAX_ORDER_PROBE."""
    n, size = group.size, members.shape[1]
    if n * (size + 2) > MAX_ORDER_PROBE or m * (size + 2) > MAX_ORDER_PROBE:
        raise LoweringError(f"{what} over groups of {size} of {n} entries is too large to "
                            f"probe (more than MAX_ORDER_PROBE = {MAX_ORDER_PROBE})")
    seeds = np.zeros((n, size + 2))
    seeds[members, np.arange(size)] = 1.0  # direction j: the j-th member of each group
    seeds[:, size] = 1.0  # the sum of an output's weights
    seeds[:, size + 1] = group + 1.0  # (its group + 1) times that sum
    y, tangents = probe(point, seeds)
    if y.size != m:
        raise LoweringError(f"{what} changes size when probed")
    group_of = _group_of_outputs(tangents[:, size], tangents[:, size + 1], members.shape[0],
                                 what)
    rows, cols = np.nonzero(tangents[:, :size])
    per_row = np.bincount(rows, minlength=m)
    terms = int(per_row.max()) if rows.size else 0
    if terms == 0 or terms > MAX_ORDER_TERMS:
        raise LoweringError(f"{what}: output entries read {terms} ranks")
    slot_in_row = np.arange(rows.size) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    ranks = np.zeros((m, terms), dtype=np.intp)
    weights = np.zeros((m, terms))
    ranks[rows, slot_in_row] = rank[members[group_of[rows], cols]]
    weights[rows, slot_in_row] = tangents[rows, cols]
    return group_of, ranks, weights
