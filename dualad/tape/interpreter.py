"""The compiled interpreter: lowered programs too large to compile quickly, run by Numba
functions (cached on disk) that loop over opcode arrays. A program runs in an interpreter
of its own opcodes, or of every opcode once a process has met several sets of them
(:func:`interpreter_module`): a new program of known opcodes costs only its encoding.

A lowered program (:mod:`dualad.tape.lowering`) is flattened to entries: every entry of
every value is one float of a vector ``V`` (the inputs, each instruction's result, the
constants), and each instruction becomes one record of an integer code array (its opcode,
where it reads and writes in ``V``, its index tables) plus coefficients in a float array
(:mod:`dualad.tape.interpreter_source` lists the fields). The opcodes and their value and
partial-derivative formulas are generated from the rules tables.

The passes are those of the compiled code: values (``value``, ``values``), reverse mode
for a scalar output (``gradient``: the values forward, then the adjoints backward through
the instructions that lie between the inputs differentiated and the output) or from a
given cotangent (``vjp``), forward mode (``jacobian``, ``compressed_jacobian``: one
tangent row per entry, the directions innermost; ``jvp``: one given direction). ``jvp``
and ``vjp`` call the values pass and the tangent or adjoint pass from Python, one after
the other (they need no compiled function of their own). Guards are opcodes that return a status; the entries raise
:class:`~dualad.tape.program.GuardFailed` where one fails, as the compiled code does.
Every lowered instruction has an opcode (matrix products of two computed values included);
an instruction without one (a predicate Numba lacks) raises
:class:`~dualad.tape.lowering.LoweringError` when encoded. Redefining the rule of a
function Numba compiles writes (and compiles) another interpreter at its next use.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import lower
    >>> from dualad.tape.interpreter import InterpretedProgram
    >>> tape = record(lambda x: np.sum(np.sin(x) * x), np.ones(2))
    >>> code = InterpretedProgram(lower(tape.program, [np.ones(2)]))
    >>> value, (g,) = code.gradient((0,))(np.array([0.0, 1.0]))
    >>> round(value, 4), g.round(4)
    (0.8415, array([0.    , 1.3818]))
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..derivatives.codegen import import_kernel_module
from ..derivatives.language import NUMBA_UFUNCS
from ..derivatives.registry import rules
from ..derivatives.scalar_forms import scalar_forms
from .interpreter_source import HEADER, WIDTH, interpreter_source, map_key, predicate_key
from .lowering import (
    Call,
    Const,
    Gather,
    Guard,
    Linear,
    Lowered,
    LoweringError,
    Map,
    MatMul,
    Order,
    Select,
    differentiated_output,
)
from .program import GuardFailed, NanTangents
from .regions import compose_gathers

__all__ = ["InterpretedProgram", "interpreter_module", "interpreter_opcodes"]

_lock = threading.Lock()
_modules: dict[Any, tuple[Any, dict[Any, int]]] = {}
_opcodes: dict[Any, dict[Any, int]] = {}

#: How many interpreters of a subset of the opcodes a process compiles before it takes
#: the interpreter of every opcode (about 1-3 s each cold, against 15-40 s once).
SUBSET_MODULES = 8


def _rules_key() -> tuple:
    """What the interpreter's source is written from: the rules Numba compiles, the
    scalar forms."""
    return tuple((r.numpy_name, tuple(d.text for d in r.expressions)) for r in rules()
                 if r.numpy_name in NUMBA_UFUNCS) + tuple(
        (f.arg_names, f.value.text, tuple(d.text for d in f.derivatives))
        for f in scalar_forms())


def interpreter_opcodes() -> dict[Any, int]:
    """``{opcode key: opcode}`` of the interpreter for the rules registered now."""
    key = _rules_key()
    found = _opcodes.get(key)
    if found is None:
        found = _opcodes[key] = interpreter_source()[1]
    return found


def interpreter_module(only: frozenset[int] | None = None) -> tuple[Any, dict[Any, int]]:
    """``(module, {opcode key: opcode})`` of an interpreter for the rules registered now
    whose passes run at least the opcodes ``only`` (None: every opcode). Written and
    imported once per set of rules and opcodes; Numba compiles each pass at its first
    call, or loads it from the disk cache.

    A program's own opcodes compile in a fraction of the time every opcode takes
    (measured: 1.3 s against 15 s for a 1000-op program's gradient), so the first
    programs of a process get interpreters of their own opcodes; a module already here
    that runs them all serves them, and from the ``SUBSET_MODULES + 1``-th set of opcodes
    on a process gets the interpreter of every opcode (compiled once per machine), so
    that a process meeting many programs does not compile many interpreters."""
    rules_key = _rules_key()
    found = _modules.get((rules_key, only))
    if found is not None:
        return found
    with _lock:
        mine = [(k[1], m) for k, m in _modules.items() if k[0] == rules_key]
        for ops_run, module in mine:
            if ops_run is None or (only is not None and only <= ops_run):
                return module
        if sum(ops_run is not None for ops_run, _ in mine) >= SUBSET_MODULES:
            only = None
        source, ops = interpreter_source(only)
        found = _modules[rules_key, only] = (
            import_kernel_module(source, subdirectory="tapes"), ops)
    return found


_F8 = np.dtype(np.float64)


class _Encoder:
    """Lays out ``V`` and writes the code: values in order (constants coded as negative
    positions ``-1 - k`` until the constants' place after the values is known)."""

    def __init__(self, low: Lowered, ops: dict[Any, int]) -> None:
        self.low = low
        self.ops = ops
        self.sizes = low.sizes
        self.base: dict[int, int] = {}  # slot -> position (negative: constant k = -1 - pos)
        self.free = 0  # the next free position among the values
        self.consts: list[np.ndarray] = []
        self.n_consts = 0
        self.scalars: dict[bytes, int] = {}
        self.records: list[list[int]] = []
        self.pool: list[np.ndarray] = []  # integer tables (after the records)
        self.pool_size = 0
        self.fpool: list[np.ndarray] = []
        self.fpool_size = 0
        self.outs: list[int] = []  # value id written per record
        self.reads: list[tuple[int, ...]] = []  # value ids read per record (operands first)
        self.temps = len(low.sizes)  # ids of temporaries (gathered operands)
        self.inputs = 0  # entries of the inputs (the first of V)
        self.alias: dict[int, int] = {}  # slot -> the slot whose entries it reads in place

    # layout ------------------------------------------------------------------------------
    def values(self, n: int) -> int:
        at = self.free
        self.free += n
        return at

    def const(self, a: np.ndarray) -> int:
        """The coded position of the constant entries ``a``."""
        a = np.ascontiguousarray(a, dtype=np.float64).ravel()
        key = a.tobytes() if a.size == 1 else None  # -0.0 is not 0.0, NaN is NaN
        if key is not None:
            found = self.scalars.get(key)
            if found is not None:
                return found
        at = -1 - self.n_consts
        self.consts.append(a)
        self.n_consts += a.size
        if key is not None:
            self.scalars[key] = at
        return at

    def ints(self, a: np.ndarray) -> int:
        at = self.pool_size
        a = np.asarray(a, dtype=np.int64).ravel()
        self.pool.append(a)
        self.pool_size += a.size
        return at

    def floats(self, a: np.ndarray) -> int:
        at = self.fpool_size
        a = np.asarray(a, dtype=np.float64).ravel()
        self.fpool.append(a)
        self.fpool_size += a.size
        return at

    def opcode(self, name: Any) -> int:
        op = self.ops.get(name)
        if op is None:
            raise LoweringError(f"the interpreter has no opcode {name!r}")
        return op

    def record(self, op: int, n: int, out: int, a: int = 0, sa: int = 0, b: int = 0,
               sb: int = 0, p: int = 0, q: int = 0, m: int = 0, c: int = 0, sc: int = 0, *,
               writes: int = -1, reads: tuple[int, ...] = ()) -> None:
        self.records.append([op, n, out, a, sa, b, sb, p, q, m, c, sc])
        self.outs.append(writes)
        self.reads.append(reads)

    def ident(self, slot: int) -> int:
        """The value id of ``slot``: the slot it views, for a view."""
        return self.alias.get(slot, slot)

    def output(self, slot: int) -> int:
        at = self.base.get(slot)
        if at is None:
            at = self.base[slot] = self.values(self.sizes[slot])
        return at

    # operands ----------------------------------------------------------------------------
    def operand(self, op: Any, n: int) -> tuple[int, int, int]:
        """``(position, step, value id)`` of a map's or a guard's operand over ``n``
        entries (a gathered copy when it reads its entries out of order)."""
        if op.slot is None:
            c = op.constant
            if isinstance(c, float) or np.size(c) == 1:
                return self.const(np.asarray(c)), 0, -1
            c = np.asarray(c, dtype=np.float64).ravel()
            if np.all(c == c[0]):
                return self.const(c[:1]), 0, -1
            return self.const(c), 1, -1
        s = op.slot
        if s not in self.base:
            raise LoweringError(f"slot {s} is read before it is written")
        at, vid = self.base[s], self.ident(s)
        if self.sizes[s] == 1:
            return at, 0, vid
        index = op.index
        if index is None:
            return at, 1, vid
        first = int(index[0])
        if np.all(index == first):
            return self._offset(at, first), 0, vid
        if np.array_equal(index, first + np.arange(n)):  # a run of entries in order
            return self._offset(at, first), 1, vid
        temp = self.values(n)
        tid = self.temps
        self.temps += 1
        pairs = np.empty((n, 2), dtype=np.int64)
        pairs[:, 0] = temp + np.arange(n)
        pairs[:, 1] = self._offset(at, index)
        self.record(self.opcode("gather"), n, temp, p=self.ints(pairs), writes=tid,
                    reads=(vid,))
        return temp, 1, tid

    @staticmethod
    def _offset(at: int, index: Any) -> Any:
        """Position ``at`` moved by ``index`` entries (constants count downwards)."""
        return at + index if at >= 0 else at - index

    # instructions ------------------------------------------------------------------------
    def encode(self, ins: Any) -> None:
        if isinstance(ins, Const):
            self.base[ins.out] = self.const(ins.value)
        elif isinstance(ins, Map):
            self.map(ins)
        elif isinstance(ins, Gather):
            self.gather(ins)
        elif isinstance(ins, Linear):
            self.linear(ins)
        elif isinstance(ins, Select):
            self.select(ins)
        elif isinstance(ins, Order):
            self.order(ins)
        elif isinstance(ins, Guard):
            self.guard(ins)
        elif isinstance(ins, MatMul):
            self.matmul(ins)
        elif isinstance(ins, Call):  # numpy calls between compiled parts: not in here
            raise LoweringError(f"{ins.operation.op!r}, which has no compiled form "
                                f"({ins.why.split('; ')[0]})")
        else:  # pragma: no cover - every lowered instruction is one of the above
            raise LoweringError(f"an instruction {type(ins).__name__}")

    def map(self, ins: Map) -> None:
        key = map_key(ins.name, ins.arg_names, ins.temps, ins.partials,
                      getattr(ins, "value", None))
        op = self.ops.get(key)
        if op is None:
            what = f"np.{ins.name}" if ins.name else f"the elementwise form {ins.value!r}"
            raise LoweringError(f"{what} with the derivative recorded here has no "
                                f"interpreter opcode")
        n = self.sizes[ins.out]
        found = [self.operand(o, n) for o in ins.operands] + [(0, 0, -1)] * 2
        out = self.output(ins.out)
        (a, sa, ra), (b, sb, rb), (c, sc, rc) = found[:3]
        self.record(op, n, out, a, sa, b, sb, c=c, sc=sc, writes=ins.out, reads=(ra, rb, rc))

    def gather(self, ins: Gather) -> None:
        m = self.sizes[ins.out]
        if len(ins.sources) == 1 and ins.out not in self.base:
            s, positions, local = ins.sources[0]
            if s in self.base and positions.size == m:  # every entry from one value
                order = np.empty(m, dtype=np.int64)
                order[positions] = local
                first = int(order[0])
                if np.array_equal(order, first + np.arange(m)):  # a run in order: a view
                    self.base[ins.out] = self._offset(self.base[s], first)
                    self.alias[ins.out] = self.ident(s)
                    return
        out = self.output(ins.out)
        covered = np.zeros(m, dtype=bool)
        pieces = []
        slots = []
        for s, positions, local in ins.sources:
            if s not in self.base:
                raise LoweringError(f"slot {s} is read before it is written")
            covered[positions] = True
            piece = np.empty((positions.size, 2), dtype=np.int64)
            piece[:, 0] = out + positions
            piece[:, 1] = self._offset(self.base[s], local)
            pieces.append(piece)
            slots.append(self.ident(s))
        rest = np.flatnonzero(~covered)
        if rest.size:
            piece = np.empty((rest.size, 2), dtype=np.int64)
            piece[:, 0] = out + rest
            piece[:, 1] = self._offset(self.const(ins.constant[rest]), np.arange(rest.size))
            pieces.append(piece)
        pairs = np.concatenate(pieces) if pieces else np.zeros((0, 2), dtype=np.int64)
        self.record(self.opcode("gather"), len(pairs), out, p=self.ints(pairs), writes=ins.out,
                    reads=tuple(slots))

    def linear(self, ins: Linear) -> None:
        s = ins.source
        if s not in self.base:
            raise LoweringError(f"slot {s} is read before it is written")
        m = self.sizes[ins.out]
        out = self.output(ins.out)
        at = self.base[s]  # (a constant's code: fixed up with the other positions)
        p = self.ints(np.concatenate([ins.indptr, ins.indices]))
        q = self.floats(np.concatenate([ins.offset, ins.data]))
        self.record(self.opcode("linear"), m, out, at, 1, p=p, q=q, writes=ins.out,
                    reads=(self.ident(s),))

    def matmul(self, ins: MatMul) -> None:
        if ins.a is None or ins.b is None or ins.a not in self.base or \
                ins.b not in self.base:  # pragma: no cover - the lowering reads two slots
            raise LoweringError("a matrix product with a constant operand")
        out = self.output(ins.out)
        self.record(self.opcode("matmul"), ins.p, out, self.base[ins.a], 1, self.base[ins.b], 1,
                    q=ins.q, m=ins.r, writes=ins.out,
                    reads=(self.ident(ins.a), self.ident(ins.b)))

    def select(self, ins: Select) -> None:
        s = ins.source
        if s not in self.base:
            raise LoweringError(f"slot {s} is read before it is written")
        m = self.sizes[ins.out]
        out = self.output(ins.out)
        counts = self.values(m)
        self.record(self.opcode("select"), ins.group.size, out, self.base[s], 1, counts, 0,
                    p=self.ints(ins.group), q=self.floats([1.0 if ins.largest else 0.0,
                                                     1.0 if ins.ignores_nan else 0.0]), m=m,
                    writes=ins.out, reads=(self.ident(s),))

    def order(self, ins: Order) -> None:
        """Order statistics: the layout the ``order`` opcode reads (see
        :func:`~dualad.tape.interpreter_source.interpreter_source`)."""
        s = ins.source
        if s not in self.base:
            raise LoweringError(f"slot {s} is read before it is written")
        n_groups, size = ins.members.shape
        m, terms = ins.ranks.shape
        out = self.output(ins.out)
        scratch = self.values(n_groups * size + n_groups)
        p = self.ints(np.concatenate([[size, terms, 1 if ins.nan_poisons else 0],
                                      ins.members.ravel(), ins.group_of, ins.ranks.ravel()]))
        self.record(self.opcode("order"), n_groups, out, self.base[s], 1, scratch, 0, p=p,
                    q=self.floats(ins.weights), m=m, writes=ins.out, reads=(self.ident(s),))

    def guard(self, ins: Guard) -> None:
        if ins.kind == "shape":  # the entries are written for the recorded sizes
            return
        if ins.name is not None:
            op = self.ops.get(predicate_key(ins.name))
            if op is None:
                raise LoweringError(f"a guard on np.{ins.name} has no interpreter opcode")
            n = self.sizes[ins.out]
            found = [self.operand(o, n) for o in ins.operands]
            (a, sa, _), (b, sb, _) = found[0], found[1] if len(found) > 1 else (0, 0, -1)
            q = self.floats(np.broadcast_to(ins.recorded, (n,)))
            self.record(op, n, 0, a, sa, b, sb, q=q)
            return
        s = ins.slot
        if s is None or s not in self.base:
            raise LoweringError(f"a guard on slot {s}, never written")
        n = self.sizes[s]
        kind = {"bool": "guard_bool", "int": "guard_int", "index": "guard_int"}.get(
            ins.kind, "guard_float")
        q = self.floats(np.broadcast_to(ins.recorded, (n,)))
        self.record(self.opcode(kind), n, 0, self.base[s], 1, q=q)

    # the code ----------------------------------------------------------------------------
    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        n_values = self.free
        n_ins = len(self.records)
        records = np.array(self.records, dtype=np.int64).reshape(n_ins, WIDTH)
        for col in (2, 3, 5, 10):  # out, a, b, c: constants after the values
            c = records[:, col]
            records[:, col] = np.where(c < 0, n_values - 1 - c, c)
        pool = np.concatenate(self.pool) if self.pool else np.zeros(0, dtype=np.int64)
        pool = np.where(pool < 0, n_values - 1 - pool, pool)  # gathered constants
        start = HEADER + records.size
        for col in (7,):  # the pool's offsets in C
            records[:, col] += start
        header = np.array([n_ins, n_values + self.n_consts, n_values, self.n_consts,
                           self.inputs, self.fpool_size], dtype=np.int64)
        code = np.concatenate([header, records.ravel(), pool]).astype(np.int64)
        floats = self.fpool + self.consts
        F = np.concatenate(floats) if floats else np.zeros(0)
        self.n_values = n_values
        return code, np.ascontiguousarray(F, dtype=np.float64)


class InterpretedProgram:
    """The entries of one lowered program run by the interpreter: the same entries, with
    the same arguments and results, as :class:`~dualad.tape.numba_backend.NumbaProgram`'s
    ``value``, ``values``, ``gradient``, ``jacobian``, ``compressed_jacobian``, ``jvp`` and
    ``vjp``; and ``split_vjp``, a ``vjp`` whose pullback reuses the values pass."""

    def __init__(self, low: Lowered) -> None:
        outputs = low.program.outputs
        if not any(is_slot for is_slot, _ in outputs):
            raise LoweringError("a program whose outputs are all constants")
        self.low = low
        self.outputs = outputs
        self.out = outputs[0][1] if outputs[0][0] else -1
        enc = _Encoder(low, interpreter_opcodes())
        sizes = low.sizes
        n_inputs = low.program.n_inputs
        for s in range(n_inputs):
            enc.base[s] = enc.values(sizes[s])
        enc.inputs = enc.free
        for ins in compose_gathers(low):
            enc.encode(ins)
        for is_slot, s in outputs:
            if is_slot and s not in enc.base:
                raise LoweringError(f"output slot {s} is never written")
        self.code, self.floats = enc.finish()
        used = frozenset(int(r[0]) for r in enc.records)
        self.module, _ = interpreter_module(used)
        self.position = {s: enc.n_values - 1 - at if at < 0 else at
                         for s, at in enc.base.items()}
        self.n_inputs = n_inputs
        self.input_sizes = [sizes[s] for s in range(n_inputs)]
        self.n_in = enc.inputs
        self._outs = np.array(enc.outs, dtype=np.int64)
        self._reads = enc.reads
        self._alias = enc.alias
        self.n_ids = enc.temps  # value ids: slots, then temporaries
        self.all = np.arange(len(enc.records), dtype=np.int64)
        self.guarded = any(isinstance(ins, Guard) and ins.kind != "shape"
                           for ins in low.instructions)
        #: as NumbaProgram's: a Jacobian pattern detected at one point may not hold
        self.pattern_varies = any(isinstance(ins, Order) for ins in low.instructions)
        self._cache: dict[Any, Callable[..., Any]] = {}
        self.passes: set[str] = set()  # the interpreter's passes its entries call

    def _marker(self, name: str) -> Path:
        file = Path(self.module.__file__)
        return file.with_name(f"{file.stem}.{name}.compiled")

    #: The interpreter's compiled functions each entry calls.
    PASSES = {"value": ("values",), "values": ("values",), "gradient": ("gradient",),
              "jacobian": ("jacobian",), "compressed_jacobian": ("jacobian",),
              "jvp": ("forward", "tangents"), "vjp": ("forward", "backward"),
              "split_vjp": ("forward", "backward")}

    def _passes(self, entries: tuple[str, ...] | None) -> set[str]:
        return self.passes if entries is None else {
            name for e in entries for name in self.PASSES[e]}

    def compiled(self, entries: tuple[str, ...] | None = None) -> bool:
        """Whether the passes this program's entries call (or those of the entries named)
        are compiled, in this process or in the disk cache (they compile once per machine,
        for seconds: a caller may build in the background meanwhile)."""
        return all(getattr(self.module, name).signatures or self._marker(name).exists()
                   for name in self._passes(entries))

    def note_compiled(self, entries: tuple[str, ...] | None = None) -> None:
        """Record that the passes this program's entries call (or those of the entries
        named) are in the disk cache."""
        for name in self._passes(entries):
            marker = self._marker(name)
            if not marker.exists():
                try:
                    marker.touch()
                except OSError:  # a read-only cache: it compiles again next time
                    pass

    def _differentiated(self, single: bool = True) -> int:
        """The slot of the differentiated output (the only output when ``single``)."""
        return differentiated_output(self.outputs, self.out, single)

    # analysis ---------------------------------------------------------------------------
    def _active(self, wanted: tuple[int, ...], live_from: int | None
                ) -> tuple[list[bool], np.ndarray, np.ndarray]:
        """``(active per value id, the records to run, flags per record)``: a record runs
        when it depends on the inputs ``wanted`` (and, with ``live_from``, when that output
        depends on it); its flags mark the operands that carry derivatives."""
        act = [False] * self.n_ids
        for s in wanted:
            act[s] = True
        outs, reads = self._outs, self._reads
        n = len(reads)
        run = [False] * n
        for pc in range(n):
            o = outs[pc]
            if o >= 0 and any(r >= 0 and act[r] for r in reads[pc]):
                act[o] = run[pc] = True
        if live_from is not None:
            live = [False] * self.n_ids
            live[live_from] = True
            for pc in range(n - 1, -1, -1):
                if run[pc] and live[outs[pc]]:
                    for r in reads[pc]:
                        if r >= 0 and act[r]:
                            live[r] = True
                else:
                    run[pc] = False
        flags = np.zeros(n, dtype=np.int64)
        for pc in range(n):
            if run[pc]:
                f = 0
                for k, r in enumerate(reads[pc][:3]):
                    if r >= 0 and act[r]:
                        f |= 2 << k
                flags[pc] = f
        return act, np.flatnonzero(run).astype(np.int64), flags

    # calls ------------------------------------------------------------------------------
    def _pack(self, inputs: tuple) -> np.ndarray:
        """The inputs as one flat float64 vector (TypeError for another type or a wrong
        number of inputs, GuardFailed for another size: the compiled code's refusals)."""
        if len(inputs) != self.n_inputs:
            raise TypeError(f"{len(inputs)} inputs given, {self.n_inputs} expected")
        if self.n_inputs == 1:
            x = inputs[0]
            if type(x) is np.ndarray:
                if x.dtype != _F8 or x.ndim != 1:  # (flat, as the compiled code takes it)
                    raise TypeError(f"an input of dtype {x.dtype} and shape {x.shape}")
                if x.size != self.n_in:
                    raise GuardFailed
                if x.ndim == 1 and x.flags.c_contiguous and x.flags.writeable:
                    return x  # (Numba would compile again for another layout)
                return np.array(x, dtype=np.float64, order="C").reshape(-1)
            if self.n_in != 1:
                raise TypeError("a number where an array was recorded")
            return np.array([float(x)])
        xin = np.empty(self.n_in)
        lo = 0
        for x, m in zip(inputs, self.input_sizes):
            if type(x) is np.ndarray:
                if x.dtype != _F8 or x.ndim != 1:
                    raise TypeError(f"an input of dtype {x.dtype} and shape {x.shape}")
                if x.size != m:
                    raise GuardFailed
                xin[lo:lo + m] = x.reshape(-1)
            elif m != 1:
                raise TypeError("a number where an array was recorded")
            else:
                xin[lo] = float(x)
            lo += m
        return xin

    def _result(self, V: np.ndarray, s: int) -> Any:
        """The value of slot ``s`` in ``V`` as the compiled code hands it back."""
        shape = self.low.shapes[s]
        at = self.position[s]
        if self.low.sizes[s] == 1:
            return float(V[at]) if shape == () else np.full(shape, V[at])
        return V[at:at + self.low.sizes[s]].copy().reshape(shape)

    def _aux(self, V: np.ndarray) -> tuple:
        return tuple(self._result(V, s) for is_slot, s in self.outputs[1:] if is_slot)

    def value(self) -> Callable[..., Any]:
        """``value(*inputs)``: the output."""
        o = self._differentiated()
        run, C, F, order = self.module.values, self.code, self.floats, self.all
        pack, result = self._pack, self._result
        self.passes.add("values")

        def value(*inputs: Any) -> Any:
            status, V = run(pack(inputs), C, F, order)
            if status:
                raise GuardFailed
            return result(V, o)

        return value

    def values(self) -> Callable[..., Any]:
        """``values(*inputs)``: the tuple of the computed outputs, in order."""
        run, C, F, order = self.module.values, self.code, self.floats, self.all
        pack, result = self._pack, self._result
        slots = [s for is_slot, s in self.outputs if is_slot]
        self.passes.add("values")

        def values(*inputs: Any) -> tuple:
            status, V = run(pack(inputs), C, F, order)
            if status:
                raise GuardFailed
            return tuple(result(V, s) for s in slots)

        return values

    def gradient(self, wanted: tuple[int, ...], aux: bool = False,
                 value: bool = True) -> Callable[..., Any]:
        """``gradient(*inputs)``: ``(value, (gradient per wanted slot, ...))`` for a scalar
        output; with ``aux``, ``(value, gradients, other outputs)``; with ``value=False``
        (no ``aux``), the gradient alone, or the tuple of gradients of several slots."""
        o = self._differentiated(single=not aux)
        low = self.low
        if low.sizes[o] != 1:
            raise LoweringError("a gradient needs a scalar output")
        _, active, flags = self._active(wanted, self._alias.get(o, o))
        run, C, F, order = self.module.gradient, self.code, self.floats, self.all
        self.passes.add("gradient")
        pack, at = self._pack, self.position[o]
        parts = [(self.position[s], low.sizes[s], low.shapes[s]) for s in wanted]
        tail = self._aux if aux else None
        alone = not (value or aux)

        def gradient(*inputs: Any) -> Any:
            status, V, A = run(pack(inputs), C, F, order, active, flags, at)
            if status:
                raise GuardFailed
            grads = tuple(float(A[b]) if shape == () else
                          (A[b:b + m].copy().reshape(shape) if m != 1 else
                           np.full(shape, A[b])) for b, m, shape in parts)
            if tail is not None:
                return float(V[at]), grads, tail(V)
            if alone:
                return grads[0] if len(grads) == 1 else grads
            return float(V[at]), grads

        return gradient

    def _gradients(self, A: np.ndarray, wanted: tuple[int, ...]) -> tuple:
        """The adjoints in ``A`` of the slots ``wanted``, each shaped like its slot (a
        float for shape ``()``)."""
        low = self.low
        found = []
        for s in wanted:
            at, m, shape = self.position[s], low.sizes[s], low.shapes[s]
            found.append(float(A[at]) if shape == () else
                         A[at:at + m].copy().reshape(shape) if m != 1 else
                         np.full(shape, A[at]))
        return tuple(found)

    def _forward(self, inputs: tuple) -> np.ndarray:
        """``V`` after the values pass (GuardFailed where a guard fails): the first half of
        ``jvp`` and ``vjp``, which call the interpreter's passes from Python (one dispatch
        each, a few microseconds) rather than entries of their own (seconds of compiling
        each, once per machine)."""
        C = self.code
        V = np.empty(int(C[1]))
        V[int(C[2]):int(C[2]) + int(C[3])] = self.floats[int(C[5]):int(C[5]) + int(C[3])]
        V[:int(C[4])] = self._pack(inputs)
        if self.module.forward(V, C, self.floats, self.all):
            raise GuardFailed
        return V

    def split_vjp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``split(*inputs)``: ``(output, pullback)``, where ``pullback(cotangent)`` (flat;
        a float for an output of size one) gives ``(gradient per wanted slot, ...)``: the
        values pass once, its values kept for the adjoint passes of the pullbacks."""
        o = self._differentiated()
        low = self.low
        _, active, flags = self._active(wanted, self._alias.get(o, o))
        backward, C, F = self.module.backward, self.code, self.floats
        self.passes.update(self.PASSES["vjp"])
        forward, result, gradients = self._forward, self._result, self._gradients
        at, m = self.position[o], low.sizes[o]

        def split(*inputs: Any) -> Any:
            V = forward(inputs)

            def pullback(cotangent: Any) -> tuple:
                c = np.asarray(cotangent, dtype=np.float64).reshape(-1)
                if c.size != m:
                    raise GuardFailed
                A = np.zeros(V.size)
                A[at:at + m] = c
                backward(V, A, C, F, active, flags)
                return gradients(A, wanted)

            return result(V, o), pullback

        return split

    def vjp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``vjp(*inputs, cotangent)``: ``(output, (gradient per wanted slot, ...))``, the
        cotangent (flat; a float for an output of size one) pulled back through the
        program (reverse mode seeded with it), as the compiled code's ``vjp``."""
        split, n = self.split_vjp(wanted), self.n_inputs

        def vjp(*inputs_and_cotangent: Any) -> Any:
            if len(inputs_and_cotangent) != n + 1:
                raise TypeError(f"{len(inputs_and_cotangent)} arguments given, {n + 1} "
                                f"expected")
            out, pullback = split(*inputs_and_cotangent[:n])
            return out, pullback(inputs_and_cotangent[n])

        return vjp

    def jvp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``jvp(*inputs, *directions)``: ``(output, tangent)``, the output's derivative
        along the given directions of the input slots ``wanted`` (one per slot, flat, a
        float for a slot of size one): forward mode with one tangent, as the compiled
        code's ``jvp``."""
        o = self._differentiated()
        low = self.low
        _, active, flags = self._active(wanted, None)
        rows = (np.concatenate([self.position[s] + np.arange(low.sizes[s]) for s in wanted])
                if wanted else np.zeros(0)).astype(np.int64)
        sizes = [low.sizes[s] for s in wanted]
        tangents, C, F = self.module.tangents, self.code, self.floats
        self.passes.update(self.PASSES["jvp"])
        forward, result = self._forward, self._result
        at, m, shape, n = self.position[o], low.sizes[o], low.shapes[o], self.n_inputs

        def jvp(*inputs_and_directions: Any) -> Any:
            if len(inputs_and_directions) != n + len(sizes):
                raise TypeError(f"{len(inputs_and_directions)} arguments given, "
                                f"{n + len(sizes)} expected")
            parts = []
            for d, size in zip(inputs_and_directions[n:], sizes):
                d = np.asarray(d, dtype=np.float64).reshape(-1)
                if d.size != size:
                    raise GuardFailed
                parts.append(d)
            V = forward(inputs_and_directions[:n])
            T = np.zeros((V.size, 1))
            if parts:
                T[rows, 0] = np.concatenate(parts)
            tangents(V, T, C, F, active, flags, 1)
            if np.isnan(T[at:at + m, 0]).any():  # eager forward mode is NaN-safe
                raise NanTangents
            dy = float(T[at, 0]) if shape == () else \
                T[at:at + m, 0].copy().reshape(shape) if m != 1 else np.full(shape, T[at, 0])
            return result(V, o), dy

        return jvp

    def _tangent_kernel(self, wanted: tuple[int, ...], columns: np.ndarray, K: int,
                        finish: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., Any]:
        """Forward mode: input entry ``j`` of the slots ``wanted`` (in order) seeded in
        direction ``columns[j]``; ``finish(V, T)`` makes the result."""
        _, active, flags = self._active(wanted, None)
        rows = np.concatenate([self.position[s] + np.arange(self.low.sizes[s])
                               for s in wanted]) if wanted else np.zeros(0, dtype=np.int64)
        seeds = np.empty((rows.size, 2), dtype=np.int64)
        seeds[:, 0] = rows
        seeds[:, 1] = columns
        seeds = seeds.ravel()
        self.passes.add("jacobian")
        run, C, F, order, pack = self.module.jacobian, self.code, self.floats, self.all, \
            self._pack
        o = self._differentiated(single=False)
        at, m = self.position[o], self.low.sizes[o]

        def tangents(*inputs: Any) -> Any:
            status, V, T = run(pack(inputs), C, F, order, active, flags, seeds, K)
            if status:
                raise GuardFailed
            if np.isnan(T[at:at + m]).any():  # eager forward mode is NaN-safe
                raise NanTangents
            return finish(V, T)

        return tangents

    def jacobian(self, wanted: tuple[int, ...], aux: bool = False) -> Callable[..., Any]:
        """``jacobian(*inputs)``: the output's Jacobian with respect to the input slots
        ``wanted``, shape ``out.shape + (k,)`` (one slot: its shape in place of ``(k,)``);
        with ``aux``, ``(jacobian, other outputs)``."""
        o = self._differentiated(single=not aux)
        low = self.low
        K = sum(low.sizes[s] for s in wanted)
        shape = low.shapes[o] + (low.shapes[wanted[0]] if len(wanted) == 1 else (K,))
        at, m = self.position[o], low.sizes[o]
        tail = self._aux if aux else None

        def finish(V: np.ndarray, T: np.ndarray) -> Any:
            J = T[at:at + m].copy().reshape(shape)
            return (J, tail(V)) if tail is not None else J

        return self._tangent_kernel(wanted, np.arange(K), K, finish)

    def compressed_jacobian(self, wanted: tuple[int, ...], colors: np.ndarray,
                            rows: np.ndarray, cols: np.ndarray,
                            dense: tuple[int, ...] | None = None) -> Callable[..., Any]:
        """``compressed(*inputs)``: the Jacobian's entries at ``(rows, cols)`` from one
        direction per colour of ``colors``; with ``dense`` (a shape), scattered into a
        dense Jacobian of that shape."""
        o = self._differentiated()
        low = self.low
        colors = np.asarray(colors, dtype=np.int64)
        K = int(colors.max()) + 1 if colors.size else 0
        at = self.position[o]
        picks = (at + np.asarray(rows, dtype=np.int64), colors[cols])
        total = sum(low.sizes[s] for s in wanted)
        m = low.sizes[o]

        def finish(V: np.ndarray, T: np.ndarray) -> Any:
            data = T[picks]
            if dense is None:
                return data
            D = np.zeros((m, total))
            D[rows, cols] = data
            return D.reshape(dense)

        return self._tangent_kernel(wanted, colors, max(K, 1), finish)


def interpret(low: Lowered | None, refused: LoweringError,
              entry: Callable[[InterpretedProgram], Any]) -> Any:
    """Where the compiler refused the lowered program ``low`` (``refused``: too large to
    compile quickly, say): ``(interpreted program, entry(program))``, or the reason, a
    string, why neither compiles it (``low`` None: the program did not lower)."""
    if low is None:
        return str(refused)
    try:
        code = InterpretedProgram(low)
        return code, entry(code)
    except LoweringError as exc:
        return f"{refused}, nor interpret it ({exc})"
