"""The Numba backend: a lowered program (:mod:`dualad.tape.lowering`), partitioned into
fused regions and steps (:mod:`dualad.tape.regions`), written as Numba functions with
scalar loop bodies from the rules tables' expressions.

Entries are generated per program, each on demand:

- ``value``: the program's output;
- ``jacobian`` (and ``compressed_jacobian``): forward mode, the ``k`` directions
  innermost: every value read outside its region owns a ``(size, k)`` tangent buffer;
  per entry of a region, the body's derivatives in its reads come from a scalar backward
  sweep through the body (or, for straight-line bodies with many outputs, a loop over the
  directions around the body's tangents), and the reads' tangent rows are combined, the
  differentiated inputs' seeds added at their columns;
- ``gradient``: reverse mode for a scalar output: the values forward, then per region a
  backward loop that reads back the stored values and accumulates the reads' adjoints.

Matrix products call BLAS ``dgemm`` on the flat buffers (:mod:`dualad.tape.blas`: nothing
compiled per operand layout), small ones are scalar loops; large elementwise regions with
a function that numpy vectorises run as numpy calls in Python glue between Numba functions
(:mod:`dualad.tape.glue`), which also cuts long code into several functions. Generated
modules are written by :func:`dualad.derivatives.codegen.import_kernel_module` (named by
a digest of their source, compiled with ``cache=True``), so a new process loads them
from disk.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import lower
    >>> from dualad.tape.numba_backend import NumbaProgram
    >>> tape = record(lambda x: np.sin(x) * x[0], np.ones(2))
    >>> code = NumbaProgram(lower(tape.program, [np.ones(2)]))
    >>> code.jacobian((0,))(np.array([0.0, 1.0])).round(4)
    array([[0.    , 0.    ],
           [0.8415, 0.    ]])
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pickle
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..derivatives.codegen import import_kernel_module
from ..derivatives.language import numba_scalar_call
from .built_cache import Built, entry_key, load_built, program_digest, store_built
from .calls import GlueCall
from .cost_bound import CostBound, line_cost
from .glue import assemble
from .lowering import (
    Call,
    Guard,
    Linear,
    Lowered,
    LoweringError,
    MatMul,
    Order,
    Select,
    differentiated_output,
)
from .program import NanTangents
from .pruning import prune
from .regions import (
    MAX_REGION_NODES,
    NUMPY_FASTER,
    Node,
    Read,
    Region,
    Step,
    index_source,
    partition,
)
from .scalar_fold import fold
from .stencils import Stencil, stencil, transposed

__all__ = ["BatchLoop", "NumbaProgram", "batch_kernel"]

#: Programs with more instructions than this are not lowered further (see below).
MAX_INSTRUCTIONS = 4000
#: An entry whose Numba source costs more than this is not compiled (the compiled
#: interpreter runs its program); the writer stops as soon as a lower bound of the cost
#: passes it (:mod:`~dualad.tape.cost_bound`), so a large program's source is not written
#: in full for nothing. The cost weighs each line by what Numba spends on it
#: (:func:`~dualad.tape.cost_bound.line_cost`: loops, array subscripts, selects and
#: branches of straight-line code): measured on a loaded 2-core AMD EPYC, compiling takes
#: about 1.25 ms of CPU per unit (1000 scalar ops: 3003, 3.5 s; the loop-written
#: Rosenbrock gradient at n = 100: 1.7 ms per unit before its subscripts were counted),
#: so no entry takes more than about 4 s of CPU to compile.
MAX_COMPILE_COST = 3200
#: Numba functions are cut (between statements) to at most this many source lines, and
#: chained (Numba's compile time grows faster than linearly with a function's size).
MAX_FUNCTION_LINES = 1200
#: A dense Jacobian of at least this many bytes comes zeroed from numpy (see
#: ``NumbaProgram._dense_module``; glibc maps allocations this large afresh every time).
MIN_CALLER_ZEROS = 2 ** 25
#: Constant arrays longer than this are passed to the kernel instead of written in its source.
MAX_GLOBAL_ARRAY = 64
#: The fused tail of a reverse pass (see ``NumbaProgram._fused_tail``) holds at most this
#: many nodes: one loop body, its values and its sweep (measured: Numba's compile time
#: grows in proportion, about 3 ms per node, up to 290 nodes).
MAX_TAIL_NODES = 4 * MAX_REGION_NODES


class _Writer:
    """Source lines of one kernel, with the constant arrays it reads as module globals."""

    def __init__(self, low: Lowered, globals_: dict[str, np.ndarray],
                 early: bool = True) -> None:
        self.low = low
        #: what pruning keeps of the lines so far (cost_bound): past the cap, writing stops
        #: (``early=False``: lines are rewritten after writing, so the bound may not hold)
        self.bound = CostBound() if early else None
        self.cap = MAX_COMPILE_COST
        self.sizes = low.sizes
        self.lines: list[str] = []
        self.segments: list[tuple[str, list[str]]] = [("numba", self.lines)]
        self.allocated: set[int] = set()  # value buffers made
        self.unneeded: set[int] = set()  # values nothing reads (a Jacobian's output)
        self.adjoints: set[int] = set()  # adjoints made
        self.numpy = True  # numpy regions allowed (not in code run on dual numbers)
        self.globals = globals_
        self.arrays: dict[str, Any] = {}  # constant arrays and glue calls, bound first
        self._named: dict[tuple[str, bytes], str] = {}
        #: entries of the inputs read in straight-line code, by source, and the local
        #: holding each (read once: each constant-index read costs Numba milliseconds)
        self.input_reads: dict[str, str] = {}

    def const_array(self, a: np.ndarray) -> str:
        """A name for the constant array ``a``: a module global when small, else a
        parameter of the kernel bound at call time (Numba compiles large global arrays
        into the code, slowly, and the source would hold them). Equal arrays share a name."""
        key = (a.dtype.str, np.ascontiguousarray(a).tobytes())
        found = self._named.get(key)
        if found is not None:
            return found
        self._named[key] = name = self._new_const(a)
        return name

    def _new_const(self, a: np.ndarray) -> str:
        if a.size > MAX_GLOBAL_ARRAY:
            name = f"_A{len(self.arrays)}"
            self.arrays[name] = np.ascontiguousarray(a)
            return name
        name = f"_G{len(self.globals)}"
        self.globals[name] = a
        return name

    def idx_src(self, idx: np.ndarray | None, loop: str = "_i") -> str:
        """Source for ``idx[loop]`` (None: ``loop`` itself): loop arithmetic where the
        entries follow a pattern, else a read of a constant array."""
        if idx is None:
            return loop
        found = index_source(idx, loop)
        if found is not None:
            return found
        return f"{self.const_array(idx.astype(np.intp))}[{loop}]"

    def value(self, s: int, at: str) -> str:
        return f"_v{s}" if self.sizes[s] == 1 else f"_v{s}[{at}]"

    def emit(self, depth: int, text: str) -> None:
        line = "    " * depth + text
        self.lines.append(line)
        if self.bound is not None:
            self.count(line)

    def count(self, line: str) -> None:
        """Add ``line`` to the cost bound; past the cap, the entry is refused now
        (:class:`~dualad.tape.lowering.LoweringError`, as ``_module`` would)."""
        assert self.bound is not None
        cost = self.bound.add(line, self.segments[-1][0] == "numba")
        if cost > self.cap:
            raise LoweringError(f"a program this large quickly (its Numba code costs more "
                                f"than {cost:.0f} > MAX_COMPILE_COST = {self.cap})")

    def switch(self, kind: str) -> None:
        """Further lines are for Numba (``"numba"``) or plain Python (``"python"``)."""
        if self.segments[-1][0] != kind:
            self.lines = []
            self.segments.append((kind, self.lines))


def _renamed(text: str, tag: str) -> str:
    return re.sub(r"\b_t(\d+)\b", lambda m: f"_t{tag}_{m.group(1)}", text)


def _substituted(text: str, names: dict[str, str], tag: str) -> str:
    """A rule's scalar source with its argument names (and ``y``) replaced by ``names``
    and its temporaries made unique by ``tag``."""
    pattern = r"(?<![.\w])(" + "|".join(re.escape(k) for k in names) + r")\b"
    return _renamed(re.sub(pattern, lambda m: names[m.group(1)], text), tag)


def _constant_partial(expr: str) -> float | None:
    """The value of a partial written as a plain number (``1.0``, ``(-1.0)``), else None."""
    try:
        return float(expr.strip().strip("()"))
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _folded_partial(expr: str, numbers: tuple[tuple[str, float], ...]) -> float | None:
    """The value of a partial that is a number once the constant operands ``numbers``
    are written in (``x1`` of ``0.5 * s``), else None."""
    return _constant_partial(fold(expr, numbers))


def _partial_value(n: Node, a: int) -> float | None:
    """The value of node ``n``'s partial in operand ``a`` when it is a constant (its own
    constant operands folded in), else None (a local ``_d`` holds it)."""
    c = _constant_partial(n.partials[a])
    if c is not None or not any(isinstance(op, float) for op in n.operands):
        return c
    return _folded_partial(n.partials[a], tuple(
        (name, op) for name, op in zip(n.arg_names, n.operands) if isinstance(op, float)))


#: A partial that is 1 or 0 by a condition (``(1.0 if c else 0.0)``).
_SELECTS = re.compile(r"\((?:1\.0 if .+ else 0\.0|0\.0 if .+ else 1\.0)\)")
_NEGATED = re.compile(r"^\(-_\w+(?:\[[^\]]*\])?\)$")


def _summed(terms: list[str]) -> str:
    """``terms`` added up, a negated term subtracted: ``["a", "(-b)"]`` gives ``a - b``
    (one operation for Numba to type and lower instead of two)."""
    expr = terms[0]
    for t in terms[1:]:
        expr += f" - {t[2:-1]}" if _NEGATED.match(t) else f" + {t}"
    return expr


def _zeros(name: str, size: int, depth: int, fill: str = "0.0") -> list[str]:
    """Source lines making ``name`` a vector of ``size`` entries ``fill``: ``np.empty``
    and a fill (measured: ``np.zeros`` and ``np.full`` each compile an implementation of
    their own, about 0.1 s of CPU per process, which ``np.empty`` shares with every
    kernel)."""
    pad = "    " * depth
    return [f"{pad}{name} = np.empty({size})", f"{pad}{name}[:] = {fill}"]


def _literal(v: float) -> str:
    if v != v:
        return "np.nan"
    if v in (np.inf, -np.inf):
        return "np.inf" if v > 0 else "(-np.inf)"
    return repr(float(v))


def _zeroed_first(kernel: Callable[..., Any], m: int, K: int) -> Callable[..., Any]:
    """``kernel`` handed a fresh ``(m, K)`` matrix of zeros before the inputs."""

    def zeroed_first(*inputs: Any) -> Any:
        return kernel(np.zeros((m, K)), *inputs)

    return zeroed_first


def _made_from(built: Built, module: Any) -> Callable[..., Any]:
    """The entry ``built`` describes, of its imported ``module``."""
    kernel = getattr(module, built.function)
    if built.arrays:
        kernel = functools.partial(kernel, *built.arrays)
    return kernel if built.zeroed is None else _zeroed_first(kernel, *built.zeroed)


def _kept_on_disk(entry: Callable[..., Any]) -> Callable[..., Any]:
    """A :class:`NumbaProgram` entry, made once per set of arguments and kept on disk
    (:mod:`~dualad.tape.built_cache`): a new process that lowers the same program imports
    the module written before instead of writing it again (measured on POLLU's compressed
    Jacobian: the writer takes about 7 ms of a 23 ms first call from the disk cache), or
    is refused at once (LoweringError) where the writer refused it (a 1000-op chain's
    source written up to the compile-cost cap: about 25 ms)."""
    signature = inspect.signature(entry)
    name = entry.__name__

    def make(self: NumbaProgram, name: str, given: tuple, args: tuple, kw: dict
             ) -> Callable[..., Any]:
        """The entry read from the disk cache, or written (and kept there)."""
        key = entry_key(self.digest, name, given)
        found = load_built(key) if key is not None else None
        if found is not None and found[0].refused:
            raise LoweringError(found[0].refused)
        if found is not None:
            fn = _made_from(*found)
        else:
            self._made = None
            try:
                fn = entry(self, *args, **kw)
            except LoweringError as exc:  # the same program is refused again next time
                if key is not None:
                    store_built(key, Built(refused=str(exc) or type(exc).__name__))
                raise
            if key is not None and self._made is not None:
                store_built(key, self._made)
        return fn

    @functools.wraps(entry)
    def kept(self: NumbaProgram, *args: Any, **kw: Any) -> Callable[..., Any]:
        bound = signature.bind(self, *args, **kw)
        bound.apply_defaults()
        given = tuple(bound.arguments.values())[1:]
        memo = (name, pickle.dumps(given, protocol=5))  # slots, flags, arrays, shapes
        fn = self._kept.get(memo)
        if fn is not None:
            return fn
        with self._making:  # one entry at a time: _made is the one being made
            fn = self._kept.get(memo)
            if fn is None:
                fn = self._kept[memo] = make(self, name, given, args, kw)
        return fn

    return kept


class NumbaProgram:
    """The generated entries of one lowered program (each compiled on first use)."""

    def __init__(self, low: Lowered) -> None:
        if len(low.instructions) > MAX_INSTRUCTIONS:
            raise LoweringError(f"{len(low.instructions)} instructions exceed the compile "
                                f"size cap ({MAX_INSTRUCTIONS})")
        outputs = low.program.outputs
        if not any(is_slot for is_slot, _ in outputs):
            raise LoweringError("a program whose outputs are all constants")
        self.low = low
        #: ``(is_slot, slot or constant)`` per output; the derivative entries differentiate
        #: the first (the others, ``has_aux``'s, come back as values)
        self.outputs = outputs
        self.out = outputs[0][1] if outputs[0][0] else -1
        #: the entries check guards (and raise GuardFailed where one fails)
        self.guarded = any(isinstance(ins, Guard) and ins.kind != "shape"
                           for ins in low.instructions)
        #: complex values: calls run as themselves make and read them, in the glue
        self.complex_slots = {ins.out for ins in low.instructions
                              if isinstance(ins, Call) and ins.complex_out}
        #: which entries the output reads depends on the values (order statistics): a
        #: Jacobian pattern detected at one point need not hold at another
        self.pattern_varies = any(isinstance(ins, Order) for ins in low.instructions)
        self._kept: dict[Any, Callable[..., Any]] = {}  # entries by their arguments
        self._made: Built | None = None  # how the last module's entry was made
        self._making = threading.RLock()

    @functools.cached_property
    def digest(self) -> Any:
        """The program's running digest (:func:`~dualad.tape.built_cache.program_digest`;
        None: its entries are not kept on disk), which keys its entries and patterns."""
        return program_digest(self.low)

    @functools.cached_property
    def plan(self) -> Any:
        """The program's fused regions and steps (:func:`~dualad.tape.regions.partition`;
        not needed when every entry asked for is in the disk cache)."""
        return partition(self.low)

    def _differentiated(self, single: bool = True) -> int:
        """The slot of the differentiated output (the only output when ``single``)."""
        return differentiated_output(self.outputs, self.out, single)

    # analysis ---------------------------------------------------------------------------
    def active(self, wanted: tuple[int, ...]) -> list[bool]:
        """Which slots depend on the input slots ``wanted``."""
        act = [False] * len(self.low.sizes)
        for s in wanted:
            act[s] = True
        for item in self.plan.items:
            if isinstance(item, Region):
                for n in item.nodes:
                    if any(isinstance(op, Read) and act[op.slot] for op in n.operands):
                        act[n.out] = True
                continue
            ins = item.ins
            if isinstance(ins, Guard):
                continue
            if isinstance(ins, (Linear, Select, Order)):
                act[ins.out] = act[ins.source]
            elif isinstance(ins, MatMul):
                act[ins.out] = act[ins.a] or act[ins.b]
            elif isinstance(ins, Call):
                act[ins.out] = ins.differentiable and any(act[r] for r in ins.reads)
        for v, (base, _) in self.plan.views.items():
            act[v] = act[base]
        return act

    # generation -------------------------------------------------------------------------
    def _forward_values(self, w: _Writer, params: list[str],
                        act: list[bool] | None = None, end: int | None = None) -> None:
        """The inputs as parameters, the constants, then the values (see ``_values``)."""
        self._prologue(w, params)
        self._values(w, act, end)

    def _prologue(self, w: _Writer, params: list[str]) -> None:
        """The inputs as parameters and the constants."""
        low, plan = self.low, self.plan
        for s in range(low.program.n_inputs):
            params.append(f"_x{s}")
            w.emit(1, f"_v{s} = _x{s}")
        for c in plan.consts:
            if low.sizes[c.out] == 1:
                w.emit(1, f"_v{c.out} = {_literal(c.value[0])}")
            else:
                w.emit(1, f"_v{c.out} = {w.const_array(c.value)}")

    def _allocate(self, w: _Writer, r: Region) -> None:
        """Buffers for the values region ``r`` stores first."""
        for o in sorted(r.writes - w.allocated - w.unneeded):
            w.allocated.add(o)
            init = self.plan.inits.get(o)
            if self.low.sizes[o] == 1:
                w.emit(1, f"_v{o} = {_literal(init[0]) if init is not None else '0.0'}")
            elif init is not None:
                w.emit(1, f"_v{o} = {w.const_array(init)}.copy()")
            else:
                w.emit(1, f"_v{o} = np.empty({self.low.sizes[o]})")

    def _region_numpy(self, w: _Writer, r: Region, rid: int) -> None:
        """A region of large elementwise calls as numpy calls in the Python glue (numpy's
        vectorised transcendentals are several times faster than Numba's scalar ones on
        large arrays); every value is stored. Only those calls and what they read run as
        numpy calls: the cheap calls that read none of them (``x @ w + b`` before
        ``np.tanh``) run as a loop in the Numba code before (measured: the MLP gradient 3 µs
        faster than a broadcast ``np.add`` in the glue), the rest (``h * h`` after it,
        copies, sums) as a loop after."""
        head = self._numpy_head(r) if w.segments[-1][0] == "numba" else []
        if head:
            first = Region(r.domain, head, {n.out for n in head})
            self._allocate(w, first)
            self._body(w, first, f"{rid}h", self._open(w, first), None)
        done = {n.out for n in head}
        calls: set[int] = set()  # the nodes numpy computes: the fast calls and their reads
        maps = {n.out for n in r.nodes if n.kind == "map"}
        for n in reversed(r.nodes):
            if n.out not in done and n.kind == "map" and (n.name in NUMPY_FASTER or
                                                           n.out in calls):
                calls.add(n.out)
                calls.update(op.slot for op in n.operands if isinstance(op, Read) and op.local
                             and op.slot in maps and op.slot not in done)
        w.switch("python")
        rest = []
        for n in r.nodes:
            if n.out in done:
                continue
            if n.out not in calls:  # a Numba loop after the numpy calls reads their values
                ops = [Read(op.slot, None, False) if isinstance(op, Read) and op.local and
                       op.slot not in {m.out for m in rest} else op for op in n.operands]
                rest.append(replace(n, operands=ops))
                continue
            shape = self.low.shapes[n.out]
            args = [self._numpy_read(w, replace(op, local=False) if isinstance(op, Read) and
                                     op.slot in done else op, shape) for op in n.operands]
            w.emit(1, f"_l{n.out} = np.{n.name}({', '.join(args)})")
            w.emit(1, f"_v{n.out} = _l{n.out}.reshape(-1)")
            w.allocated.add(n.out)
        w.switch("numba")
        if rest:
            tail = Region(r.domain, rest, {n.out for n in rest})
            self._allocate(w, tail)
            self._body(w, tail, f"{rid}t", self._open(w, tail), None)

    @staticmethod
    def _numpy_head(r: Region) -> list[Node]:
        """The map nodes of numpy region ``r`` that are no call numpy does faster and read
        no value of one (see NUMPY_FASTER), in order."""
        late: set[int] = set()
        head = []
        for n in r.nodes:
            reads_late = any(isinstance(op, Read) and op.local and op.slot in late
                             for op in n.operands)
            if n.kind != "map" or n.name in NUMPY_FASTER or reads_late:
                late.add(n.out)
            else:
                head.append(n)
        return head

    def _numpy_read(self, w: _Writer, op: Any, shape: tuple[int, ...]) -> str:
        if isinstance(op, float):
            return _literal(op)
        if isinstance(op, np.ndarray):
            return f"{w.const_array(op)}.reshape({shape!r})"
        if op.local:
            return f"_l{op.slot}.reshape({shape!r})"
        if self.low.sizes[op.slot] == 1:
            return f"_v{op.slot}"
        if op.index is None:
            return f"_v{op.slot}.reshape({shape!r})"
        source = self.low.shapes[op.slot]
        try:
            ids = np.arange(self.low.sizes[op.slot]).reshape(source)
            if np.array_equal(np.broadcast_to(ids, shape).ravel(), op.index):
                return f"_v{op.slot}.reshape({source!r})"
        except ValueError:
            pass
        return f"_v{op.slot}[{w.const_array(op.index.astype(np.intp))}].reshape({shape!r})"

    def _read(self, w: _Writer, op: Any, loop: str = "_i") -> str:
        if isinstance(op, float):
            return _literal(op)
        if isinstance(op, np.ndarray):
            return f"{w.const_array(op)}[{loop}]"
        if op.local:
            return f"_l{op.slot}"
        if self.low.sizes[op.slot] == 1:
            return f"_v{op.slot}"
        return f"_v{op.slot}[{w.idx_src(op.index, loop)}]"

    @staticmethod
    def _name(n: Node, tag: str) -> str:
        return f"_l{n.out}" if n.kind == "map" else f"_n{tag}"

    def _target(self, w: _Writer, n: Node, prefix: str) -> str:
        """The stored entry node ``n`` writes (``_v``), or its adjoint (``_a``)."""
        if self.low.sizes[n.out] == 1:
            return f"{prefix}{n.out}"
        return f"{prefix}{n.out}[{w.idx_src(n.store)}]"

    def _body(self, w: _Writer, r: Region, rid: int | str, depth: int, act: list[bool] | None,
              load: bool = False) -> None:
        """The scalar body at entry ``_i``: values (stored when asked), and with ``act``
        the partials of active operands (``_d{tag}_{a}``). ``load``: stored map values are
        read back instead of computed (the backward pass)."""
        for j, n in enumerate(r.nodes):
            tag = f"{rid}_{j}"
            local = self._name(n, tag)
            names = {"y": local}  # every name assigned once (Numba compiles that faster)
            numbers = tuple((name, op) for name, op in zip(n.arg_names, n.operands)
                            if isinstance(op, float))  # written into the rule (scalar_fold)
            for k, (name, op) in enumerate(zip(n.arg_names, n.operands)):
                value = self._read(w, op)
                if isinstance(op, float) or isinstance(op, Read) and op.local:
                    names[name] = value
                elif depth == 1 and isinstance(op, Read) and \
                        op.slot < self.low.program.n_inputs:  # inputs are never written
                    if value not in w.input_reads:
                        w.input_reads[value] = f"_p{tag}_{k}"
                        w.emit(depth, f"_p{tag}_{k} = {value}")
                    names[name] = w.input_reads[value]
                else:
                    names[name] = f"_p{tag}_{k}"
                    w.emit(depth, f"_p{tag}_{k} = {value}")
            if load and n.kind == "map" and n.stored:
                w.emit(depth, f"{local} = {self._target(w, n, '_v')}")
            else:
                w.emit(depth, f"{local} = {_substituted(fold(n.call, numbers), names, tag)}")
            if n.stored and not load and n.out not in w.unneeded:
                w.emit(depth, f"{self._target(w, n, '_v')} "
                              f"{'+=' if n.accumulate else '='} {local}")
            if act is None:
                continue
            wanted = self._active_partials(n, act)
            if wanted and any(_partial_value(n, a) is None for a in wanted):
                for t in n.temps:
                    w.emit(depth, _substituted(fold(t, numbers), names, tag))
            for a in wanted:
                if _partial_value(n, a) is None:
                    partial = fold(n.partials[a], numbers)
                    w.emit(depth, f"_d{tag}_{a} = {_substituted(partial, names, tag)}")

    @staticmethod
    def _active_partials(n: Node, act: list[bool]) -> list[int]:
        return [a for a, (op, expr) in enumerate(zip(n.operands, n.partials))
                if isinstance(op, Read) and act[op.slot] and expr not in ("0.0", "(0.0)")]

    @staticmethod
    def _times(adjoint: str, n: Node, a: int, tag: str) -> str:
        c = _partial_value(n, a)
        if c is None and n.kind == "map" and not n.name and _SELECTS.fullmatch(n.partials[a]):
            # a declared form's partial that picks (np.where's): eager mode selects the
            # adjoint (an infinite one gives 0 where not picked, not NaN)
            return f"_where(_d{tag}_{a} != 0.0, {adjoint}, 0.0)"
        if c is None:
            return f"_d{tag}_{a}" if adjoint == "1.0" else f"{adjoint} * _d{tag}_{a}"
        if adjoint == "1.0":
            return _literal(c)
        if c == 1.0:
            return adjoint
        if c == -1.0:
            return f"(-{adjoint})"
        return f"{_literal(c)} * {adjoint}"

    def _sweep(self, w: _Writer, r: Region, rid: int, depth: int, act: list[bool],
               seeds: dict[int, list[str]], last: int, name: str
               ) -> dict[tuple[int, str], list[str]]:
        """Scalar reverse mode through the nodes ``last, ..., 0`` of ``r`` from the
        adjoints ``seeds`` (node -> terms); the terms of each materialized read."""
        terms = {j: list(t) for j, t in seeds.items()}
        leaves: dict[tuple[int, str], list[str]] = {}
        local_node = {r.nodes[j].out: j for j in range(len(r.nodes)) if r.nodes[j].kind == "map"}
        for j in range(last, -1, -1):
            got = terms.get(j)
            if not got:
                continue
            n = r.nodes[j]
            tag = f"{rid}_{j}"
            if len(got) == 1 and (got[0] == "1.0" or re.fullmatch(r"_\w+(\[[^\]]*\])?", got[0])
                                  and "[" not in got[0]):
                adjoint = got[0]
            else:
                adjoint = f"_b{name}_{j}"
                w.emit(depth, f"{adjoint} = {_summed(got)}")
            for a in self._active_partials(n, act):
                op = n.operands[a]
                term = self._times(adjoint, n, a, tag)
                if op.local:
                    terms.setdefault(local_node[op.slot], []).append(term)
                else:
                    key = (op.slot, "0" if self.low.sizes[op.slot] == 1 else
                           w.idx_src(op.index))
                    leaves.setdefault(key, []).append(term)
        return leaves

    def _region_tangents(self, w: _Writer, r: Region, rid: int, act: list[bool],
                         seed: Callable[[int, str], str], K: int) -> None:
        """Forward mode of one region, the directions innermost: per entry, each stored
        node's derivatives in its reads (scalar reverse mode through the body), then its
        tangent row: the reads' tangent rows combined, seeds added at their columns."""
        if not any(act[n.out] for n in r.nodes if n.shared):
            self._region_values(w, r, rid, numba=True)
            return
        self._allocate(w, r)
        d = self._open(w, r)
        self._body(w, r, rid, d, act)
        # one entry and few directions: forward mode (measured: POLLU's 20 outputs compile
        # in 1.2 s instead of 2.2 s, and run as fast); else per output when cheaper
        if r.domain == 1 and K <= 64 or self._sweep_cost(r, act) > 2 * len(r.nodes) + 8:
            self._region_forward(w, r, rid, act, seed, K, d)
            return
        for j, n in enumerate(r.nodes):
            if not n.shared or not self._active_partials(n, act):
                continue
            leaves = self._sweep(w, r, rid, d, act, {j: ["1.0"]}, j, f"{rid}_{j}")
            row = "0" if self.low.sizes[n.out] == 1 else w.idx_src(n.store)
            plain, seeded = [], []
            for q, ((s, idx), got) in enumerate(leaves.items()):
                value = f"_r{rid}_{j}_{q}"
                w.emit(d, f"{value} = {_summed(got)}")
                (seeded if seed(s, idx) else plain).append((value, s, idx))
            op = "+=" if n.accumulate else "="
            if plain or not (n.accumulate or r.domain == 1):  # one entry: rows start zero
                text = " + ".join(f"{v} * _T{s}[{idx}, _k]" for v, s, idx in plain) or "0.0"
                w.emit(d, f"for _k in range({K}):")
                w.emit(d + 1, f"_T{n.out}[{row}, _k] {op} {text}")
            for v, s, idx in seeded:
                w.emit(d, f"_T{n.out}[{row}, {seed(s, idx)}] += {v}")

    def _sweep_cost(self, r: Region, act: list[bool]) -> int:
        """How many nodes the backward sweeps from every stored node visit (a body with
        many outputs, a small right-hand side's, visits its nodes many times)."""
        local_node = {n.out: j for j, n in enumerate(r.nodes) if n.kind == "map"}
        cost = 0
        for j, n in enumerate(r.nodes):
            if not n.shared or not act[n.out]:
                continue
            seen, todo = {j}, [j]
            while todo:
                for op in r.nodes[todo.pop()].operands:
                    if isinstance(op, Read) and op.local and act[op.slot]:
                        k = local_node[op.slot]
                        if k not in seen:
                            seen.add(k)
                            todo.append(k)
            cost += len(seen)
        return cost

    def _region_forward(self, w: _Writer, r: Region, rid: int, act: list[bool],
                        seed: Callable[[int, str], str], K: int, d: int) -> None:
        """Forward mode of a body with many outputs: one loop over the directions around
        every node's scalar tangent (its size grows with the body, not body x outputs)."""
        # a seeded input's tangent in direction _k is 1.0 or 0.0: one local per seed
        # column, set at the top of the loop (a branch per use measured POLLU's compile
        # 1.0 s instead of 0.55 s: Numba's passes grow with the basic blocks), as a
        # comparison times 1.0 (no branch; measured, POLLU's kernel compiles in 300 ms
        # instead of 366 ms with a call of _where)
        seeds: dict[str, str] = {}
        body: list[str] = []
        for j, n in enumerate(r.nodes):
            tag = f"{rid}_{j}"
            terms = []
            for a in self._active_partials(n, act):
                op = n.operands[a]
                if op.local:
                    t = f"_u{op.slot}"
                else:
                    idx = "0" if self.low.sizes[op.slot] == 1 else w.idx_src(op.index)
                    col = seed(op.slot, idx)
                    if col:
                        t = seeds.setdefault(col, f"_s{rid}_{len(seeds)}")
                    else:
                        t = f"_T{op.slot}[{idx}, _k]"
                terms.append(self._times(t, n, a, tag))
            if not terms:
                if n.kind == "map" and act[n.out]:
                    body.append(f"_u{n.out} = 0.0")
                continue
            expr = _summed(terms)
            if n.kind == "map":
                body.append(f"_u{n.out} = {expr}")
                expr = f"_u{n.out}"
            if n.shared:
                row = "0" if self.low.sizes[n.out] == 1 else w.idx_src(n.store)
                body.append(f"_T{n.out}[{row}, _k] {'+=' if n.accumulate else '='} {expr}")
        w.emit(d, f"for _k in range({K}):")
        for col, name in seeds.items():
            w.emit(d + 1, f"{name} = (_k == {col}) * 1.0")
        for line in body:
            w.emit(d + 1, line)

    @staticmethod
    def _open(w: _Writer, r: Region) -> int:
        """The loop over a region's entries (none for one entry); the body's depth."""
        if r.domain == 1:
            w.emit(1, "_i = 0")
            return 1
        w.emit(1, f"for _i in range({r.domain}):")
        return 2

    def _region_values(self, w: _Writer, r: Region, rid: int,
                       act: list[bool] | None = None, numba: bool = False) -> None:
        """The values; with ``act``, a region of one entry also keeps its partials (as
        locals, which the backward pass reads instead of computing the body again)."""
        if r.numpy and not numba and w.numpy:
            self._region_numpy(w, r, rid)
            return
        self._allocate(w, r)
        self._body(w, r, rid, self._open(w, r), act if r.domain == 1 else None)

    def _region_adjoints(self, w: _Writer, r: Region, rid: int, act: list[bool]) -> None:
        """Reverse mode of one region: per entry, the body again (stored values read back),
        the stored entries' adjoints swept back to the reads' adjoints."""
        stored = [j for j, n in enumerate(r.nodes) if n.shared and act[n.out]
                  and self._active_partials(n, act)]
        if not stored:
            return
        for j in stored:
            self._adjoint(w, r.nodes[j].out)
        at = len(w.lines)  # the reads' adjoints are made here, once the sweep found them
        if r.domain == 1:  # the values and partials are still locals
            d = 1
        else:
            d = self._open(w, r)
            self._body(w, r, rid, d, act, load=True)
        seeds = {j: [self._target(w, r.nodes[j], "_a")] for j in stored}
        leaves = self._sweep(w, r, rid, d, act, seeds, max(stored), f"{rid}")
        self._made_here(w, at, self._leaf_adjoints(w, r, d, leaves))

    def _leaf_adjoints(self, w: _Writer, r: Region, d: int,
                       leaves: dict[tuple[int, str], list[str]],
                       once: Callable[[int], bool] = lambda s: True) -> list[str]:
        """The sweep's terms added to the reads' adjoints; the lines that make the adjoints
        not made yet (returned: they go before the loop). An adjoint every entry of which
        is written once (and ``once`` of its slot) is made empty, not zeros."""
        keys: dict[int, int] = {}
        for s, _ in leaves:
            keys[s] = keys.get(s, 0) + 1
        made = []
        for (s, idx), got in leaves.items():
            size = self.low.sizes[s]
            target = f"_a{s}" if size == 1 else f"_a{s}[{idx}]"
            if s not in w.adjoints and keys[s] == 1 and idx == "_i" and \
                    size == r.domain > 1 and once(s):
                w.adjoints.add(s)  # every entry written once: no zeros to add to
                made.append(f"    _a{s} = np.empty({size})")
                w.emit(d, f"{target} = {_summed(got)}")
                continue
            if s not in w.adjoints:
                w.adjoints.add(s)
                made.extend([f"    _a{s} = 0.0"] if size == 1 else _zeros(f"_a{s}", size, 1))
            w.emit(d, f"{target} += {_summed(got)}")
        return made

    @staticmethod
    def _made_here(w: _Writer, at: int, made: list[str]) -> None:
        """Insert ``made`` at line ``at`` (before a loop written since)."""
        w.lines[at:at] = made
        if w.bound is not None:
            for line in made:
                w.count(line)

    def _fused_tail(self, act: list[bool]) -> tuple[int, int]:
        """``(start, end)``: the plan's fused tail, items ``start`` to ``end`` (empty: it
        has none), and after it straight-line regions whose active partials are constants
        (``0.5 * np.sum(...)``, a mean's scale: their reverse mode needs no values, so it
        runs before the tail's loop, their values after it). The tail: the last regions,
        over one domain of several entries, that read one another's values only at the
        entry they compute (no sums they make). Reverse mode runs their bodies once, in
        one loop, each entry swept back right after its values (see
        :meth:`_tail_adjoints`)."""
        items = self.plan.items
        end = len(items)
        while end > 0 and isinstance(items[end - 1], Region) and \
                items[end - 1].domain == 1 and not items[end - 1].numpy and all(
                    _partial_value(n, a) is not None
                    for n in items[end - 1].nodes for a in self._active_partials(n, act)):
            end -= 1
        start = end
        reads: dict[int, list[Read]] = {}  # the tail's reads of materialized values
        nodes = 0
        while start > 0:
            r = items[start - 1]
            if not isinstance(r, Region) or r.domain == 1 or r.numpy or \
                    start < end and r.domain != items[start].domain or \
                    nodes + len(r.nodes) > MAX_TAIL_NODES:
                break
            writers: dict[int, int] = {}
            for n in r.nodes:
                if n.stored:
                    writers[n.out] = writers.get(n.out, 0) + 1
            if any(n.stored and n.out in reads and (
                    writers[n.out] != 1 or n.store is not None or n.accumulate or
                    any(op.index is not None for op in reads[n.out])) for n in r.nodes):
                break  # a later region reads it at other entries, or a sum of it
            start -= 1
            nodes += len(r.nodes)
            for n in r.nodes:
                for op in n.operands:
                    if isinstance(op, Read) and not op.local:
                        reads.setdefault(op.slot, []).append(op)
        if start == end or not any(n.shared and act[n.out] for r in items[start:end]
                                   for n in r.nodes):
            return len(items), len(items)
        return start, end

    def _tail_adjoints(self, w: _Writer, start: int, end: int, act: list[bool]) -> None:
        """Values and reverse mode of the fused tail (plan items ``start`` to ``end``) in one
        loop: per entry, every tail region's body (values and partials), then the sweeps
        back from the last region to the first. An earlier region's value is read later
        only at the same entry, so its adjoint there is complete when its sweep runs; the
        values the backward pass would read back are locals, not stored (measured on the
        100-op chain of 8-vectors: Numba compiles it in 0.24-0.33 s instead of 0.74-0.77 s,
        and it runs in 5.2 µs instead of 7.7 µs)."""
        items = self.plan.items
        tail = items[start:end]
        identity = {op.slot for r in tail for n in r.nodes for op in n.operands
                    if isinstance(op, Read) and not op.local and op.index is None}
        other = {op.slot for r in tail for n in r.nodes for op in n.operands
                 if isinstance(op, Read) and not op.local and op.index is not None}
        for r in tail:
            w.unneeded.update(n.out for n in r.nodes if n.stored and not n.shared)
            self._allocate(w, r)
        at = len(w.lines)
        d = self._open(w, tail[0])
        for rid, r in enumerate(tail, start):
            self._body(w, r, rid, d, act)
        made: list[str] = []
        for rid in range(end - 1, start - 1, -1):
            r = items[rid]
            seeds = {j: [self._target(w, n, "_a")] for j, n in enumerate(r.nodes)
                     if n.shared and n.out in w.adjoints and act[n.out] and
                     self._active_partials(n, act)}
            if seeds:
                leaves = self._sweep(w, r, rid, d, act, seeds, max(seeds), f"{rid}")
                made += self._leaf_adjoints(w, r, d, leaves,
                                            lambda s: s in identity and s not in other)
        self._made_here(w, at, made)

    # steps ------------------------------------------------------------------------------
    def _step_values(self, w: _Writer, ins: Any) -> None:
        if isinstance(ins, Guard):
            self._guard(w, ins)
        elif isinstance(ins, Linear):
            self._linear(w, ins)
        elif isinstance(ins, MatMul):
            self._matmul_values(w, ins)
        elif isinstance(ins, Select):
            self._select_values(w, ins)
        elif isinstance(ins, Call):
            self._call_values(w, ins)
        elif isinstance(ins, Order):
            self._order_values(w, ins)

    # calls run as themselves ------------------------------------------------------------
    def _glue_call(self, w: _Writer, ins: Call) -> str:
        """The name of the :class:`~dualad.tape.calls.GlueCall` of ``ins`` (a parameter of
        the entry bound at build time, as large constants are)."""
        if not w.numpy:
            raise LoweringError(f"{ins.operation.op!r} runs as a Python call ({ins.why}), "
                                f"which this entry cannot make")
        name = f"_call{ins.out}"
        if name not in w.arrays:
            w.arrays[name] = GlueCall(ins, self.low.shapes)
        return name

    def _call_values(self, w: _Writer, ins: Call) -> None:
        call = self._glue_call(w, ins)
        reads = ", ".join(f"_v{s}" for s in ins.reads)
        w.switch("python")
        w.emit(1, f"_v{ins.out} = {call}({reads})")
        w.switch("numba")

    def _call_tangents(self, w: _Writer, ins: Call, act: list[bool], K: int) -> None:
        call = self._glue_call(w, ins)
        values = "".join(f"_v{s}, " for s in ins.reads)
        tangents = "".join(f"_T{s}, " if act[s] else "None, " for s in ins.reads)
        w.switch("python")
        w.emit(1, f"_T{ins.out} = {call}.tangents({K}, ({values}), ({tangents}))")
        w.switch("numba")

    def _call_adjoints(self, w: _Writer, ins: Call, act: list[bool]) -> None:
        call = self._glue_call(w, ins)
        o = ins.out
        self._adjoint(w, o)
        live = [s for s in ins.reads if act[s]]
        for s in live:
            self._adjoint(w, s)
        values = "".join(f"_v{s}, " for s in ins.reads)
        needed = "".join(f"{act[s]}, " for s in ins.reads)
        w.switch("python")
        w.emit(1, f"_r{o} = {call}.adjoints(_a{o}, _v{o}, ({values}), ({needed}))")
        for i, s in enumerate(ins.reads):
            if act[s]:
                w.emit(1, f"if _r{o}[{i}] is not None:")
                w.emit(2, f"_a{s} += _r{o}[{i}]")
        w.switch("numba")

    def _small_product(self, ins: MatMul) -> bool:
        """A product with a one-entry operand or result (a dot product of vectors, a
        number times a row): scalar loops, since one-entry values are numbers here."""
        return 1 in (self.low.sizes[ins.out], self.low.sizes[ins.a], self.low.sizes[ins.b])

    @staticmethod
    def _flat(i: str, stride: int, j: str) -> str:
        """The flat position ``i * stride + j`` of a row-major matrix."""
        if i == "0":
            return j
        row = i if stride == 1 else f"{i} * {stride}"
        return row if j == "0" else f"{row} + {j}"

    def _matmul_values(self, w: _Writer, ins: MatMul) -> None:
        """``out (p, r) = a (p, q) @ b (q, r)``: one BLAS call (:func:`dualad.tape.blas.gemm`,
        the flat buffers read row-major; :func:`dualad.tape.blas.dot` for two vectors), or a
        scalar loop for a number times a row or a column."""
        o, a, b, p, q, r = ins.out, ins.a, ins.b, ins.p, ins.q, ins.r
        if not self._small_product(ins):
            w.emit(1, f"_v{o} = np.empty({p * r})")
            w.emit(1, f"_gemm(False, False, {p}, {r}, {q}, _v{a}, _v{b}, _v{o}, 0.0)")
            return
        if self.low.sizes[o] == 1:  # a dot product: BLAS ddot, as numpy calls it
            w.emit(1, f"_v{o} = _v{a} * _v{b}" if q == 1 else f"_v{o} = _dot({q}, _v{a}, _v{b})")
            return
        w.emit(1, f"_v{o} = np.empty({p * r})")  # a number times a row or a column
        w.emit(1, f"for _i in range({p}):")
        w.emit(2, f"for _j in range({r}):")
        w.emit(3, f"_v{o}[{self._flat('_i', r, '_j')}] = "
                  f"{w.value(a, self._flat('_i', q, '0'))} * "
                  f"{w.value(b, self._flat('0', r, '_j'))}")

    def _guard(self, w: _Writer, ins: Guard) -> None:
        """``raise GuardFailed`` unless the guarded value reads as recorded (the caller
        records again): the compiled form of the recording's value-dependent branches."""
        if ins.kind == "shape":
            return
        rec = ins.recorded
        m = self.low.sizes[ins.out]
        depth = 1
        if m != 1:
            w.emit(1, f"for _i in range({m}):")
            depth = 2
        expected = _literal(float(rec[0])) if rec.size == 1 else f"{w.const_array(rec)}[_i]"
        if ins.name is not None:  # a comparison: true or false as recorded
            names = {}
            for k, (name, op) in enumerate(zip(ins.arg_names, ins.operands)):
                if op.slot is None:
                    value = _literal(op.constant) if isinstance(op.constant, float) else \
                        f"{w.const_array(op.constant)}[_i]"
                elif self.low.sizes[op.slot] == 1:
                    value = f"_v{op.slot}"
                elif op.index is None:
                    value = f"_v{op.slot}[{'_i' if m != 1 else '0'}]"
                else:
                    value = f"_v{op.slot}[{w.idx_src(op.index) if m != 1 else int(op.index[0])}]"
                names[name] = f"_g{k}"
                w.emit(depth, f"_g{k} = {value}")
            call = _substituted(numba_scalar_call(ins.name, ins.arg_names), names, "g")
            w.emit(depth, f"_p = {call}")
            w.emit(depth, f"if _p != ({expected} != 0.0):")
        else:
            w.emit(depth, f"_x = {w.value(ins.slot, '_i')}")  # type: ignore[arg-type]
            if ins.kind == "bool":
                w.emit(depth, f"if (_x != 0.0) != ({expected} != 0.0):")
            elif ins.kind in ("int", "index"):
                w.emit(depth, f"if not abs(_x) < 9e18 or float(int(_x)) != {expected}:")
            else:  # "float", "value": equal, or both NaN
                w.emit(depth, f"_r = {expected}")
                w.emit(depth, "if not (_x == _r or (_x != _x and _r != _r)):")
        w.emit(depth + 1, "raise GuardFailed()")

    def _select_values(self, w: _Writer, ins: Select) -> None:
        """``out[g]`` = the largest (smallest) entry of group ``g``, and ``_n{o}``: how many
        entries tie for it (they share the derivative)."""
        o, s, n = ins.out, ins.source, ins.group.size
        m = self.low.sizes[o]
        if self.low.sizes[s] == 1:
            raise LoweringError("a selection over one entry")
        G = w.const_array(ins.group)
        better = ">" if ins.largest else "<"
        start = "-np.inf" if ins.largest else "np.inf"
        for line in _zeros(f"_m{o}", m, 1, start) + _zeros(f"_n{o}", m, 1):
            w.emit(0, line)
        w.emit(1, f"for _i in range({n}):")
        w.emit(2, f"_x = _v{s}[_i]")
        w.emit(2, f"_g = {G}[_i]")
        w.emit(2, f"if _x {better} _m{o}[_g]:")
        w.emit(3, f"_m{o}[_g] = _x")
        w.emit(3, f"_n{o}[_g] = 1.0")
        w.emit(2, f"elif _x == _m{o}[_g]:")
        w.emit(3, f"_n{o}[_g] += 1.0")
        if not ins.ignores_nan:  # a NaN stays: no entry compares with it
            w.emit(2, "elif _x != _x:")
            w.emit(3, f"_m{o}[_g] = _x")
        else:  # none counted: every entry NaN
            w.emit(1, f"for _g in range({m}):")
            w.emit(2, f"if _n{o}[_g] == 0.0:")
            w.emit(3, f"_m{o}[_g] = np.nan")
        w.emit(1, f"_v{o} = _m{o}[0]" if m == 1 else f"_v{o} = _m{o}")

    def _order_values(self, w: _Writer, ins: Order) -> None:
        """Each group's entries sorted (``_r{o}``: their positions), ``_z{o}``: 1.0 for a
        group holding a NaN (with ``nan_poisons``), then the weighted ranks: calls of
        :mod:`dualad.tape.order_kernels`."""
        o = ins.out
        n_groups, size = ins.members.shape
        m = self.low.sizes[o]
        src = self._order_source(w, ins)
        w.emit(1, f"_r{o} = np.empty({n_groups * size}, dtype=np.intp)")
        w.emit(1, f"_z{o} = np.empty({n_groups})")
        w.emit(1, f"_order_sort({src}, {w.const_array(ins.members.ravel())}, {n_groups}, "
                  f"{size}, {ins.nan_poisons}, _r{o}, _z{o})")
        w.emit(1, f"_m{o} = np.empty({m})")
        w.emit(1, f"_order_values({src}, {self._order_args(w, ins)}, _m{o})")
        w.emit(1, f"_v{o} = _m{o}[0]" if m == 1 else f"_v{o} = _m{o}")

    def _order_source(self, w: _Writer, ins: Order) -> str:
        """The source's values as an array (one-entry values are numbers)."""
        if self.low.sizes[ins.source] != 1:
            return f"_v{ins.source}"
        w.emit(1, f"_u{ins.out} = np.empty(1)")
        w.emit(1, f"_u{ins.out}[0] = _v{ins.source}")
        return f"_u{ins.out}"

    @staticmethod
    def _order_args(w: _Writer, ins: Order) -> str:
        terms = ins.ranks.shape[1]
        return (f"_r{ins.out}, _z{ins.out}, {w.const_array(ins.group_of)}, "
                f"{w.const_array(ins.ranks.ravel())}, {w.const_array(ins.weights.ravel())}, "
                f"{ins.members.shape[1]}, {terms}")

    def _order_terms(self, w: _Writer, ins: Order, what: str) -> None:
        """The tangent rows of :class:`Order` ``ins`` (``what="tangent"``), or its adjoint
        added to the source's."""
        o, s = ins.out, ins.source
        args = self._order_args(w, ins)
        if what == "tangent":
            w.emit(1, f"_order_tangents(_T{s}, {args}, _T{o})")
            return
        adjoint = f"_a{o}"
        if self.low.sizes[o] == 1:
            w.emit(1, f"_y{o} = np.empty(1)")
            w.emit(1, f"_y{o}[0] = _a{o}")
            adjoint = f"_y{o}"
        if self.low.sizes[s] == 1:
            w.emit(1, f"_q{o} = np.empty(1)")
            w.emit(1, f"_q{o}[0] = 0.0")
            w.emit(1, f"_order_adjoints({adjoint}, {args}, _q{o})")
            w.emit(1, f"_a{s} += _q{o}[0]")
        else:
            w.emit(1, f"_order_adjoints({adjoint}, {args}, _a{s})")

    def _linear(self, w: _Writer, ins: Linear) -> None:
        o, m, s = ins.out, self.low.sizes[ins.out], ins.source
        indptr, indices, data = ins.indptr, ins.indices, ins.data
        band = stencil(indptr, indices, data, self.low.sizes[s]) \
            if m > 1 and self.low.sizes[s] > 1 else None
        if band is not None:  # a few full diagonals: a vectorised loop each
            w.emit(1, f"_v{o} = {w.const_array(ins.offset)}.copy()")
            self._stencil(w, band, f"_v{o}", f"_v{s}", m)
            return
        ptr, ind, dat = (w.const_array(indptr), w.const_array(indices), w.const_array(data))
        # a one-entry value is a scalar (a scatter of a broadcast number)
        src = f"_v{s}" if self.low.sizes[s] == 1 else f"_v{s}[{ind}[_p]]"
        if m == 1:
            w.emit(1, f"_acc = {_literal(ins.offset[0])}")
            w.emit(1, f"for _p in range({indptr[-1]}):")
            w.emit(2, f"_acc += {dat}[_p] * {src}")
            w.emit(1, f"_v{o} = _acc")
        else:
            w.emit(1, f"_v{o} = {w.const_array(ins.offset)}.copy()")
            w.emit(1, f"for _i in range({m}):")
            w.emit(2, f"for _p in range({ptr}[_i], {ptr}[_i + 1]):")
            w.emit(3, f"_v{o}[_i] += {dat}[_p] * {src}")

    @staticmethod
    def _stencil(w: _Writer, band: Stencil, out: str, src: str, m: int) -> None:
        """``out[i] += C[k, i] * src[i + offsets[k]]`` along every diagonal ``k`` of
        ``band`` (``m`` rows)."""
        C = w.const_array(band.coefficients)
        D, L, H = (w.const_array(np.array(v, dtype=np.intp))
                   for v in (band.offsets, band.lo, band.hi))
        w.emit(1, f"for _k in range({len(band.offsets)}):")  # one loop: one to compile
        w.emit(2, f"_d = {D}[_k]")
        w.emit(2, f"_c = _k * {m}")
        w.emit(2, f"for _i in range({L}[_k], {H}[_k]):")
        w.emit(3, f"{out}[_i] += {C}[_c + _i] * {src}[_i + _d]")

    def _step_tangents(self, w: _Writer, ins: Any, act: list[bool], K: int) -> None:
        """A step's tangent rows (``_T{slot}``: one row per entry, a column per direction)."""
        sizes = self.low.sizes
        o = ins.out
        if isinstance(ins, Call):
            self._call_tangents(w, ins, act, K)
        elif isinstance(ins, Linear):
            s = ins.source
            ptr, ind, dat = (w.const_array(ins.indptr), w.const_array(ins.indices),
                             w.const_array(ins.data))
            w.emit(1, f"for _i in range({sizes[o]}):")
            w.emit(2, f"for _k in range({K}):")
            w.emit(3, f"_T{o}[_i, _k] = 0.0")
            w.emit(2, f"for _p in range({ptr}[_i], {ptr}[_i + 1]):")
            w.emit(3, f"_c = {dat}[_p]")
            w.emit(3, f"_e = {ind}[_p]")
            w.emit(3, f"for _k in range({K}):")
            w.emit(4, f"_T{o}[_i, _k] += _c * _T{s}[_e, _k]")
        elif isinstance(ins, Select):
            s = ins.source
            G = w.const_array(ins.group)
            w.emit(1, f"_T{o}[:, :] = 0.0")
            w.emit(1, f"for _i in range({ins.group.size}):")
            w.emit(2, f"_g = {G}[_i]")
            w.emit(2, f"if _v{s}[_i] == _m{o}[_g]:")
            w.emit(3, f"for _k in range({K}):")
            w.emit(4, f"_T{o}[_g, _k] += _T{s}[_i, _k] / _n{o}[_g]")
            w.emit(2, "else:  # weight 0, as eager mode: an infinite tangent gives NaN")
            w.emit(3, f"for _k in range({K}):")
            w.emit(4, f"_T{o}[_g, _k] += 0.0 * _T{s}[_i, _k]")
        elif isinstance(ins, Order):
            self._order_terms(w, ins, "tangent")
        elif isinstance(ins, MatMul):
            p, q, r = ins.p, ins.q, ins.r
            w.emit(1, f"_T{o}[:, :] = 0.0")
            w.emit(1, f"for _i in range({p}):")
            w.emit(2, f"for _l in range({q}):")
            w.emit(3, f"for _j in range({r}):")
            w.emit(4, f"_o = {self._flat('_i', r, '_j')}")
            if act[ins.a]:
                w.emit(4, f"_c = {self._entry('_v', ins.b, self._flat('_l', r, '_j'))}")
                w.emit(4, f"_e = {self._flat('_i', q, '_l')}")
                w.emit(4, f"for _k in range({K}):")
                w.emit(5, f"_T{o}[_o, _k] += _c * _T{ins.a}[_e, _k]")
            if act[ins.b]:
                w.emit(4, f"_c = {self._entry('_v', ins.a, self._flat('_i', q, '_l'))}")
                w.emit(4, f"_e = {self._flat('_l', r, '_j')}")
                w.emit(4, f"for _k in range({K}):")
                w.emit(5, f"_T{o}[_o, _k] += _c * _T{ins.b}[_e, _k]")

    def _step_adjoints(self, w: _Writer, ins: Any, act: list[bool]) -> None:
        if isinstance(ins, Guard):
            return
        sizes = self.low.sizes
        o, m = ins.out, sizes[ins.out]

        def adj(s: int, at: str) -> str:
            return f"_a{s}" if sizes[s] == 1 else f"_a{s}[{at}]"

        if isinstance(ins, MatMul):
            self._matmul_adjoints(w, ins, act)
            return
        if isinstance(ins, Call):
            self._call_adjoints(w, ins, act)
            return
        self._adjoint(w, o)
        if isinstance(ins, Order):
            if act[ins.source]:
                self._adjoint(w, ins.source)
                self._order_terms(w, ins, "adjoint")
        elif isinstance(ins, Select):
            s = ins.source
            if not act[s]:
                return
            self._adjoint(w, s)
            G = w.const_array(ins.group)
            ga = f"_a{o}" if m == 1 else f"_a{o}[{G}[_i]]"
            w.emit(1, f"for _i in range({ins.group.size}):")
            w.emit(2, f"if _v{s}[_i] == _m{o}[{G}[_i]]:")
            w.emit(3, f"_a{s}[_i] += {ga} / _n{o}[{G}[_i]]")
            w.emit(2, "else:  # weight 0, as eager mode: an infinite adjoint gives NaN")
            w.emit(3, f"_a{s}[_i] += 0.0 * {ga}")
        elif isinstance(ins, Linear):
            s = ins.source
            if not act[s]:
                return
            self._adjoint(w, s)
            n = sizes[s]
            band = None
            if m > 1 and n > 1:  # the transpose's diagonals: a vectorised loop each
                tptr, tind, tdat = transposed(ins.indptr, ins.indices, ins.data, n)
                band = stencil(tptr, tind, tdat, m)
            if band is not None:
                self._stencil(w, band, f"_a{s}", f"_a{o}", n)
                return
            ptr, ind, dat = (w.const_array(ins.indptr), w.const_array(ins.indices),
                             w.const_array(ins.data))
            w.emit(1, f"for _i in range({m}):")
            w.emit(2, f"for _p in range({ptr}[_i], {ptr}[_i + 1]):")
            w.emit(3, f"{adj(s, f'{ind}[_p]')} += {dat}[_p] * {adj(o, '_i')}")

    def _matmul_adjoints(self, w: _Writer, ins: MatMul, act: list[bool]) -> None:
        """``a`` gets ``g @ b.T`` and ``b`` gets ``a.T @ g`` (``g``: the output's adjoint):
        BLAS calls adding into the adjoints (the first contribution writes it), or scalar
        loops for a small product."""
        o, a, b, p, q, r = ins.out, ins.a, ins.b, ins.p, ins.q, ins.r
        self._adjoint(w, o)
        if not self._small_product(ins):
            for s, call in ((a, f"False, True, {p}, {q}, {r}, _a{o}, _v{b}"),
                            (b, f"True, False, {q}, {r}, {p}, _v{a}, _a{o}")):
                if not act[s]:
                    continue
                beta = "1.0"
                if s not in w.adjoints:  # the first contribution: no zeros to add to
                    w.adjoints.add(s)
                    w.emit(1, f"_a{s} = np.empty({self.low.sizes[s]})")
                    beta = "0.0"
                w.emit(1, f"_gemm({call}, _a{s}, {beta})")
            return
        for s in (a, b):
            if act[s]:
                self._adjoint(w, s)
        depth, at = 1, {}
        for var, extent in (("_i", p), ("_j", r), ("_l", q)):
            at[var] = "0"
            if extent > 1:
                w.emit(depth, f"for {var} in range({extent}):")
                at[var] = var
                depth += 1
            if var == "_j":
                w.emit(depth, f"_ga = {self._entry('_a', o, self._flat(at['_i'], r, at['_j']))}")
        ia = self._flat(at["_i"], q, at["_l"])
        ib = self._flat(at["_l"], r, at["_j"])
        if act[a]:
            w.emit(depth, f"{self._entry('_a', a, ia)} += _ga * {self._entry('_v', b, ib)}")
        if act[b]:
            w.emit(depth, f"{self._entry('_a', b, ib)} += {self._entry('_v', a, ia)} * _ga")

    def _entry(self, prefix: str, s: int, at: str) -> str:
        """Entry ``at`` of value (``_v``) or adjoint (``_a``) ``s`` (one-entry ones are
        numbers)."""
        return f"{prefix}{s}" if self.low.sizes[s] == 1 else f"{prefix}{s}[{at}]"

    def _adjoint(self, w: _Writer, s: int) -> None:
        """``_a{s}`` from here on: zeros, unless it is already there."""
        if s not in w.adjoints:
            w.adjoints.add(s)
            if s in self.complex_slots:  # read and written by calls only: in the glue
                w.switch("python")
                w.emit(1, f"_a{s} = np.zeros({self.low.sizes[s]}, dtype=np.complex128)")
                w.switch("numba")
            elif self.low.sizes[s] == 1:
                w.emit(1, f"_a{s} = 0.0")
            else:
                for line in _zeros(f"_a{s}", self.low.sizes[s], 1):
                    w.emit(0, line)

    # passes -----------------------------------------------------------------------------
    def _values(self, w: _Writer, act: list[bool] | None = None, end: int | None = None
                ) -> None:
        """The values of the plan's items (up to ``end``: a fused tail's come later)."""
        for rid, item in enumerate(self.plan.items[:end]):
            if isinstance(item, Region):
                self._region_values(w, item, rid, act)
            else:
                self._step_values(w, item.ins)

    def _read_slots(self) -> set[int]:
        """Slots whose values a region or a step reads."""
        found: set[int] = set()
        for item in self.plan.items:
            if isinstance(item, Region):
                found |= {op.slot for n in item.nodes for op in n.operands
                          if isinstance(op, Read) and not op.local}
            elif isinstance(item.ins, Guard):
                found |= {op.slot for op in item.ins.operands if op.slot is not None}
                if item.ins.slot is not None:
                    found.add(item.ins.slot)
            elif isinstance(item.ins, Call):
                found |= set(item.ins.reads)
            else:
                found |= {getattr(item.ins, a) for a in ("source", "a", "b")
                          if getattr(item.ins, a, None) is not None}
        return found

    def _tangents(self, w: _Writer, act: list[bool], wanted: tuple[int, ...], K: int,
                  colors: str | None = None, seeds: list[str] | None = None,
                  values: bool = False, colored: np.ndarray | None = None) -> None:
        """Forward mode over ``K`` directions: ``_T{slot}`` (entries x directions) for every
        active stored value; the inputs ``wanted`` are seeded with the identity, with one
        direction per colour of ``colors`` (the array's name; ``colored``, its values,
        written as numbers where the entry is), or with the given directions ``seeds`` (one
        parameter per wanted slot, ``K`` = 1). ``values``: the output's values are kept."""
        sizes = self.low.sizes
        if not values and all(s != self.out for s in self._read_slots()) and \
                all(not is_slot or s != self.out for is_slot, s in self.outputs[1:]):
            w.unneeded.add(self.out)  # a Jacobian's output: its values are not returned
        offsets, col = {}, 0
        for s in wanted:
            offsets[s] = col
            col += sizes[s]

        def seed(s: int, idx: str) -> str:
            if s not in offsets or seeds is not None:
                return ""
            at = str(offsets[s]) if sizes[s] == 1 else (
                idx if offsets[s] == 0 else f"{offsets[s]} + {idx}")
            if colors is None:
                return at
            if colored is not None and at.isdigit():  # a number: no array read to compile
                return str(int(colored[int(at)]))
            return f"{colors}[{at}]"

        stepped = {s for item in self.plan.items if isinstance(item, Step)
                   for s in (getattr(item.ins, "source", None), getattr(item.ins, "a", None),
                             getattr(item.ins, "b", None), *getattr(item.ins, "reads", ()))
                   if s is not None}
        stepped.add(self.out)  # an output that is an input: its seed rows
        for s, given in zip(wanted, seeds or ()):  # given directions: plain tangent rows
            w.emit(1, f"_T{s} = np.full((1, 1), {given})" if sizes[s] == 1 else
                   f"_T{s} = {given}.reshape(({sizes[s]}, 1))")
        for s in wanted:  # seed rows for the steps that read an input's tangent
            if s in stepped and seeds is None:
                w.emit(1, f"_T{s} = _zero_matrix({sizes[s]}, {K})")
                w.emit(1, f"for _i in range({sizes[s]}):")
                w.emit(2, f"_T{s}[_i, {seed(s, '_i')}] = 1.0")
        zeroed = set(self.plan.inits)
        for item in self.plan.items:
            if isinstance(item, Region):
                for n in item.nodes:
                    if n.shared and (n.accumulate or item.domain == 1 or
                                     not self._active_partials(n, act)):
                        zeroed.add(n.out)
        done = set(wanted)
        for item in self.plan.items:  # (a call's tangent rows are made by the call)
            outs = {n.out for n in item.nodes if n.shared} if isinstance(item, Region) \
                else set() if isinstance(item.ins, (Guard, Call)) else {item.ins.out}
            for o in sorted(outs - done):
                done.add(o)
                if act[o]:
                    w.emit(1, f"_T{o} = _zero_matrix({sizes[o]}, {K})" if o in zeroed
                           else f"_T{o} = np.empty(({sizes[o]}, {K}))")
        for rid, item in enumerate(self.plan.items):
            if isinstance(item, Region):
                self._region_tangents(w, item, rid, act, seed, K)
            else:
                self._step_values(w, item.ins)
                if not isinstance(item.ins, Guard) and act[item.ins.out]:
                    self._step_tangents(w, item.ins, act, K)

    def _adjoints(self, w: _Writer, act: list[bool], wanted: tuple[int, ...] = (),
                  tail: tuple[int, int] | None = None) -> None:
        """Reverse mode from the output's adjoint (1, or ``_seed``) to every active slot's
        ``_a{slot}``; with ``tail`` (:meth:`_fused_tail`), the fused tail and the
        straight-line regions after it, values included (the forward pass stopped before
        them)."""
        sizes = self.low.sizes
        items = self.plan.items
        w.emit(1, f"_a{self.out} = " + ("1.0" if sizes[self.out] == 1 else "_seed"))
        w.adjoints.add(self.out)
        start, end = (len(items), len(items)) if tail is None else tail
        for rid in range(len(items) - 1, end - 1, -1):  # constant partials: no values read
            self._region_adjoints(w, items[rid], rid, act)
        if start < end:
            self._tail_adjoints(w, start, end, act)
        for rid in range(end, len(items)):
            self._region_values(w, items[rid], rid, act)
        for rid in range(start - 1, -1, -1):
            item = items[rid]
            if isinstance(item, Region):
                self._region_adjoints(w, item, rid, act)
            elif act[item.ins.out]:
                self._step_adjoints(w, item.ins, act)
        for s in wanted:
            if act[s]:
                self._adjoint(w, s)

    # modules ----------------------------------------------------------------------------
    def _module(self, name: str, w: _Writer, params: list[str]) -> Callable[..., Any]:
        lines = ['"""A compiled dualad tape (generated)."""', "import math", "import numba",
                 "import numpy as np",
                 "from dualad.tape.program import GuardFailed, NanTangents", ""]
        for module, call in (("blas", "gemm"), ("blas", "dot"), ("order_kernels", "order_sort"),
                             ("order_kernels", "order_values"),
                             ("order_kernels", "order_tangents"),
                             ("order_kernels", "order_adjoints"), ("scalar_select", "where"),
                             ("zero_matrix", "zero_matrix"), ("reshaped", "reshaped")):
            if any(f"_{call}(" in line for _, segment in w.segments for line in segment):
                lines.insert(-1, f"from dualad.tape.{module} import {call} as _{call}")
        for gname, arr in w.globals.items():
            dtype = "np.intp" if arr.dtype.kind in "iu" else "np.float64"
            items = ", ".join(str(int(v)) for v in arr) if arr.dtype.kind in "iu" else \
                ", ".join(_literal(float(v)) for v in arr)
            lines.append(f"{gname} = np.array([{items}], dtype={dtype})")
        # the loops are written for the recorded sizes: another size is another recording
        checks = [line for p in params if p.startswith("_x") and
                  self.low.sizes[int(p[2:])] != 1
                  for line in (f"    if {p}.shape[0] != {self.low.sizes[int(p[2:])]}:",
                               "        raise GuardFailed()")]
        w.segments[0][1][:0] = checks
        w.segments[:] = prune(w.segments)
        cost = compile_cost(w.segments)
        if cost > w.cap:
            raise LoweringError(f"a program this large quickly (its Numba code costs "
                                f"{cost:.0f} > MAX_COMPILE_COST = {w.cap})")
        body = assemble(name, w.segments, list(w.arrays) + params,
                        MAX_FUNCTION_LINES if w.numpy else 10**9)
        cost += INTERFACE * _interface(body)  # what the parts hand each other
        if cost > w.cap:
            raise LoweringError(f"a program this large quickly (its Numba code costs "
                                f"{cost:.0f} > MAX_COMPILE_COST = {w.cap})")
        lines += ["", "", body]
        source = "\n".join(lines)
        module = import_kernel_module(source, subdirectory="tapes")
        kernel = getattr(module, name)
        arrays = tuple(w.arrays.values())
        self._made = Built(module.__name__, name, arrays) if all(
            type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
            for a in arrays) else None  # (a glue call is known here by its name only)
        if w.arrays:  # bound first: the kernel takes the program's inputs
            return functools.partial(kernel, *w.arrays.values())
        return kernel

    def _shape_literal(self, shape: tuple[int, ...]) -> str:
        return "(" + "".join(f"{d}, " for d in shape) + ")"

    def _reshaped(self, name: str, shape: tuple[int, ...], to: tuple[int, ...]) -> str:
        """Source of the C-contiguous array ``name`` of ``shape`` with shape ``to``, a view
        lowered inline (:mod:`dualad.tape.reshaped`; nothing where the shapes agree)."""
        return name if tuple(shape) == tuple(to) else \
            f"_reshaped({name}, {self._shape_literal(to)})"

    def _flat_as(self, flat: str, shape: tuple[int, ...]) -> str:
        """Source of the flat C-contiguous array ``flat`` with ``shape`` (as
        :meth:`_reshaped`; nothing for one dimension)."""
        return f"({flat})" if len(shape) == 1 else \
            f"_reshaped({flat}, {self._shape_literal(shape)})"

    def _output(self, s: int) -> str:
        """Source of the value of slot ``s`` as handed back: a float for shape ``()``,
        else a fresh array of the recorded shape."""
        shape = self.low.shapes[s]
        if self.low.sizes[s] == 1:
            return f"_v{s}" if shape == () else f"np.full({self._shape_literal(shape)}, _v{s})"
        return self._flat_as(f"_v{s}.copy()", shape)

    def _aux(self) -> str:
        """Source of the tuple of the computed outputs after the first (``has_aux``)."""
        items = [self._output(s) for is_slot, s in self.outputs[1:] if is_slot]
        return "(" + "".join(f"{item}, " for item in items) + ")"

    @_kept_on_disk
    def value(self) -> Callable[..., Any]:
        """``value(*inputs)``: the output (inputs flat, floats for size-one inputs)."""
        o = self._differentiated()
        w = _Writer(self.low, {})
        params: list[str] = []
        self._forward_values(w, params)
        w.emit(1, f"return {self._output(o)}")
        return self._module("tape_value", w, params)

    @_kept_on_disk
    def values(self) -> Callable[..., Any]:
        """``values(*inputs)``: the tuple of the computed outputs, in order (the constant
        outputs are left out: the caller has them)."""
        w = _Writer(self.low, {})
        params: list[str] = []
        self._forward_values(w, params)
        items = [self._output(s) for is_slot, s in self.outputs if is_slot]
        w.emit(1, "return (" + "".join(f"{item}, " for item in items) + ")")
        return self._module("tape_values", w, params)

    @_kept_on_disk
    def jacobian(self, wanted: tuple[int, ...], aux: bool = False) -> Callable[..., Any]:
        """``jacobian(*inputs)``: the output's Jacobian with respect to the input slots
        ``wanted``, shape ``out.shape + (k,)`` with ``k`` their total size (one slot: its
        shape in place of ``(k,)``). With ``aux``, ``(jacobian, other outputs)``."""
        o = self._differentiated(single=not aux)
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        self._prologue(w, params)
        K = sum(low.sizes[s] for s in wanted)
        if len(wanted) == 1:
            shape = low.shapes[o] + low.shapes[wanted[0]]
        else:
            shape = low.shapes[o] + (K,)
        tail = f", {self._aux()}" if aux else ""
        if act[o]:
            self._tangents(w, act, wanted, K)
            _refuse_nan(w, f"_T{o}", low.sizes[o], K)
            w.emit(1, f"return {self._reshaped(f'_T{o}', (low.sizes[o], K), shape)}{tail}")
        else:
            self._values(w)
            w.emit(1, f"return np.zeros({self._shape_literal(shape)}){tail}")
        return self._module("tape_jacobian", w, params)

    @_kept_on_disk
    def compressed_jacobian(self, wanted: tuple[int, ...], colors: np.ndarray,
                            rows: np.ndarray, cols: np.ndarray,
                            dense: tuple[int, ...] | None = None) -> Callable[..., Any]:
        """``compressed(*inputs)``: the values, in the order of ``(rows, cols)``, of the
        Jacobian's entries (output entries by input entries of the slots ``wanted``), from
        one direction per colour of ``colors`` (a distance-2 column colouring of that
        pattern); the decompression happens inside the compiled code. With ``dense`` (a
        shape), the entries are scattered into a dense Jacobian of that shape instead."""
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {}, early=dense is None)  # (_scatter_directly rewrites lines)
        params: list[str] = []
        act = self.active(wanted)
        self._prologue(w, params)
        m = low.sizes[o]
        c = int(colors.max()) + 1 if colors.size else 0
        nnz = rows.size
        if act[o] and nnz:
            C = w.const_array(colors.astype(np.intp))
            self._tangents(w, act, wanted, c, colors=C, colored=colors)
            K = sum(low.sizes[s] for s in wanted)
            if dense is not None and _scatter_directly(w, o, C, m, K):
                _nan_exit(w)
                w.emit(1, f"return {self._reshaped('_D', (m, K), dense)}")
                return self._dense_module(w, params, m, K)
            w.emit(1, f"_B = _T{o}")
            R, Q = w.const_array(rows.astype(np.intp)), w.const_array(cols.astype(np.intp))
            w.emit(1, "_nans = 0.0  # NaNs read (see NanTangents)")
            if dense is not None:
                w.emit(1, f"_D = _zero_matrix({m}, {K})  # written at fixed entries")
                w.emit(1, f"for _e in range({nnz}):")
                w.emit(2, f"_je = _B[{R}[_e], {C}[{Q}[_e]]]")
                w.emit(2, f"_D[{R}[_e], {Q}[_e]] = _je")
                w.emit(2, "_nans += _je != _je")
                result = self._reshaped("_D", (m, K), dense)
            else:
                w.emit(1, f"_data = np.empty({nnz})")
                w.emit(1, f"for _e in range({nnz}):")
                w.emit(2, f"_je = _B[{R}[_e], {C}[{Q}[_e]]]")
                w.emit(2, "_data[_e] = _je")
                w.emit(2, "_nans += _je != _je")
                result = "_data"
            _nan_exit(w)
            w.emit(1, f"return {result}")
            if dense is not None:
                return self._dense_module(w, params, m, K)
        elif dense is not None:
            self._values(w)
            w.emit(1, f"return np.zeros({self._shape_literal(dense)})")
        else:
            self._values(w)
            w.emit(1, f"return np.zeros({nnz})")
        return self._module("tape_compressed_jacobian", w, params)

    def _dense_module(self, w: _Writer, params: list[str], m: int, K: int
                      ) -> Callable[..., Any]:
        """The module of a dense Jacobian scattered at fixed entries of ``_D``; one of at
        least MIN_CALLER_ZEROS bytes is zeroed by numpy in the caller and passed in
        (numpy's calloc maps fresh zero pages and touches only those written; Numba's
        np.zeros writes every page: the 2-D Brusselator at N = 32, a 32 MiB Jacobian
        of 12 entries a row, 16-48 ms against 2.4-3 ms measured on a loaded 2-core EPYC)."""
        line = f"    _D = _zero_matrix({m}, {K})  # written at fixed entries"
        if m * K * 8 < MIN_CALLER_ZEROS or sum(line in part for _, part in w.segments) != 1:
            return self._module("tape_compressed_jacobian", w, params)
        for _, part in w.segments:
            if line in part:
                part[part.index(line)] = "    _D = _Dz  # zeroed by the caller"
        kernel = self._module("tape_compressed_jacobian", w, ["_Dz"] + params)
        if self._made is not None:
            self._made = replace(self._made, zeroed=(m, K))
        return _zeroed_first(kernel, m, K)

    def _slot_results(self, act: list[bool], o: int, wanted: tuple[int, ...],
                      prefix: str = "_a", scale: str = "") -> list[str]:
        """Source of each wanted slot's adjoint (``prefix``) shaped like the slot (zeros
        where nothing reaches it), times ``scale`` when given."""
        low = self.low
        found = []
        for s in wanted:
            shape = low.shapes[s]
            if not act[o] or not act[s]:
                found.append("0.0" if shape == () else f"np.zeros({self._shape_literal(shape)})")
                continue
            value = f"{prefix}{s}{scale}"
            if shape == ():
                found.append(value)
            elif low.sizes[s] != 1:
                found.append(self._flat_as(value, shape))
            else:
                found.append(f"np.full({self._shape_literal(shape)}, {value})")
        return found

    @_kept_on_disk
    def gradient(self, wanted: tuple[int, ...], aux: bool = False,
                 value: bool = True) -> Callable[..., Any]:
        """``gradient(*inputs)``: ``(value, (gradient per wanted slot, ...))`` for a scalar
        output; with ``aux``, ``(value, gradients, other outputs)``; with ``value=False``
        (no ``aux``), the gradient alone, or the tuple of gradients of several slots
        (nothing else to box; the value's own code is pruned when no gradient reads it)."""
        o = self._differentiated(single=not aux)
        low = self.low
        if low.sizes[o] != 1:
            raise LoweringError("a gradient needs a scalar output")
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        tail = self._fused_tail(act) if act[o] else None
        self._forward_values(w, params, act, tail and tail[0])
        if act[o]:
            self._adjoints(w, act, wanted, tail)
        grads = self._slot_results(act, o, wanted)
        tail = f", {self._aux()}" if aux else ""
        if value or aux:
            w.emit(1, f"return _v{o}, ({''.join(g + ', ' for g in grads)}){tail}")
        elif len(grads) == 1:
            w.emit(1, f"return {grads[0]}")
        else:
            w.emit(1, f"return ({''.join(g + ', ' for g in grads)})")
        return self._module("tape_gradient", w, params)

    @_kept_on_disk
    def jvp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``jvp(*inputs, *directions)``: ``(output, tangent)``, the output's derivative
        along the given directions of the input slots ``wanted`` (one per slot, flat, a
        float for a slot of size one): forward mode with one tangent."""
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        self._prologue(w, params)
        seeds = [f"_s{s}" for s in wanted]
        params += seeds
        shape = low.shapes[o]
        if act[o]:
            self._tangents(w, act, wanted, 1, seeds=seeds, values=True)
            _refuse_nan(w, f"_T{o}", low.sizes[o], 1)
            if low.sizes[o] != 1:
                w.emit(1, f"_dy = {self._flat_as(f'_T{o}[:, 0].copy()', shape)}")
            elif shape != ():
                w.emit(1, f"_dy = np.full({self._shape_literal(shape)}, _T{o}[0, 0])")
            else:
                w.emit(1, f"_dy = _T{o}[0, 0]")
        else:
            self._values(w)
            w.emit(1, "_dy = 0.0" if shape == () else
                   f"_dy = np.zeros({self._shape_literal(shape)})")
        w.emit(1, f"return {self._output(o)}, _dy")
        return self._module("tape_jvp", w, params)

    @_kept_on_disk
    def vjp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``vjp(*inputs, cotangent)``: ``(output, (gradient per wanted slot, ...))``, the
        cotangent (flat; a float for an output of size one) pulled back through the
        program: reverse mode seeded with it."""
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        tail = self._fused_tail(act) if act[o] else None
        self._forward_values(w, params, act, tail and tail[0])
        params.append("_c")
        scalar = low.sizes[o] == 1
        if act[o]:
            if not scalar:
                w.emit(1, "_seed = _c.copy()")
            self._adjoints(w, act, wanted, tail)
        grads = self._slot_results(act, o, wanted, scale=" * _c" if scalar else "")
        w.emit(1, f"return {self._output(o)}, ({''.join(g + ', ' for g in grads)})")
        return self._module("tape_vjp", w, params)

    @_kept_on_disk
    def flat_gradient(self, wanted: int) -> Callable[..., Any]:
        """``flat_gradient(*inputs)``: the gradient of the scalar output with respect to
        the input slot ``wanted``, flat (a float for size one), nothing else: the form
        :mod:`dualad.njit` runs on dual numbers for Hessian-vector products."""
        o = self._differentiated()
        low = self.low
        if low.sizes[o] != 1:
            raise LoweringError("a gradient needs a scalar output")
        w = _Writer(low, {})
        w.numpy = False  # one Numba function (run on dual numbers too)
        params: list[str] = []
        act = self.active((wanted,))
        tail = self._fused_tail(act) if act[o] and act[wanted] else None
        self._forward_values(w, params, act, tail and tail[0])
        if act[o] and act[wanted]:
            self._adjoints(w, act, (wanted,), tail)
            w.emit(1, f"return _a{wanted}")
        else:
            w.emit(1, "return 0.0" if low.sizes[wanted] == 1 else
                   f"return np.zeros({low.sizes[wanted]})")
        return self._module("tape_flat_gradient", w, params)


def _refuse_nan(w: _Writer, name: str, m: int, K: int) -> None:
    """Raise NanTangents where the tangent rows ``name`` (``m`` x ``K``) hold a NaN: eager
    forward mode, NaN-safe, may hold a number there (see NanTangents)."""
    w.emit(1, "_nans = 0.0")
    w.emit(1, f"for _i in range({m}):")  # no branch in the loop: it vectorises
    w.emit(2, f"for _k in range({K}):")
    w.emit(3, f"_nans += {name}[_i, _k] != {name}[_i, _k]")
    _nan_exit(w)


def _nan_exit(w: _Writer) -> None:
    """Raise NanTangents where ``_nans`` counted a NaN written (a batch loop marks the
    row instead: :func:`_fused_batch_source`). A float counted by adding comparisons
    (measured: typing a boolean ``&=`` per entry cost POLLU's compressed Jacobian about
    40 ms of its 0.5 s compile, a float sum about 5 ms)."""
    w.emit(1, "if _nans != 0.0:")
    w.emit(2, "raise NanTangents()")


def _scatter_directly(w: _Writer, o: int, colors: str, m: int, K: int) -> bool:
    """Rewrite the output's compressed tangent rows ``_T{o}`` as writes into the dense
    Jacobian ``_D`` at the input's own column, when every partial the output receives is
    seeded from an input (a right-hand side whose outputs read the state directly):
    no compressed buffer to clear and no decompression loop (measured: half the time of a
    Lorenz-96 Jacobian at n = 40). False, and nothing changed, for any other form."""
    name = re.escape(f"_T{o}")
    alloc = re.compile(rf"^\s+{name} = (?:np\.empty\(\({m}, \d+\)\)|_zero_matrix\({m}, \d+\))$")
    clear = re.compile(rf"^\s+{name}\[(.+), _k\] = 0\.0$")
    seeded = re.compile(rf"^(\s+){name}\[(.+?), {re.escape(colors)}\[(.+)\]\] \+= (.+)$")
    uses = re.compile(rf"\b{name}\b")
    loop = re.compile(r"^\s+for _k in range\(\d+\):$")
    plan: list[tuple[list[str], int, str | None]] = []
    allocated = False
    for _, lines in w.segments:
        for i, line in enumerate(lines):
            if not uses.search(line):
                continue
            if alloc.match(line) and not allocated:
                allocated = True
                plan.append((lines, i, f"    _D = _zero_matrix({m}, {K})  # written at fixed "
                                       f"entries\n    _nans = 0.0  # NaNs written"))
            elif clear.match(line) and i > 0 and loop.match(lines[i - 1]):
                plan += [(lines, i - 1, None), (lines, i, None)]
            elif (found := seeded.match(line)) is not None:
                indent, row, col, value = found.groups()
                text = f"{indent}_D[{row}, {col}] += {value}"
                if _constant_partial(value) is None:  # one comparison, no branch
                    text += f"\n{indent}_nans += {value} != {value}"
                plan.append((lines, i, text))
            else:
                return False
    if not allocated:
        return False
    for lines, i, text in plan:
        lines[i] = "" if text is None else text
    for _, lines in w.segments:
        lines[:] = [part for line in lines if line != "" for part in line.split("\n")]
    return True


#: The compile cost of each local that one part of a program cut into several Numba
#: functions (glue) hands to another: typed, unboxed and boxed, as a parameter and as an
#: item of the tuple returned (measured: the loop-written Rosenbrock gradient at
#: n = 120, its two parts handing over 370 locals, 6.6 s of CPU where its lines cost 3134).
INTERFACE = 1.0
_PART = re.compile(r"^def _part\d+\((.*)\):$|^    return \((.*,)\)$", re.MULTILINE)


def _interface(source: str) -> int:
    """How many locals the parts of ``source`` (:func:`~dualad.tape.glue.assemble`'s)
    take as parameters and return as tuples (none for a single function)."""
    if "\ndef _part" not in source:
        return 0
    found = (m.group(1) if m.group(1) is not None else m.group(2)
             for m in _PART.finditer(source))
    return sum(len([n for n in names.split(",") if n.strip()]) for names in found)


def compile_cost(segments: list[tuple[str, list[str]]]) -> float:
    """The cost of the Numba lines of ``segments`` (:func:`~dualad.tape.cost_bound.line_cost`;
    see MAX_COMPILE_COST)."""
    return sum(line_cost(line) for kind, lines in segments if kind == "numba"
               for line in lines)


class BatchLoop:
    """``loop(out, xs, *other_inputs)``: a compiled entry applied to each row of ``xs``,
    its result written into ``out[row]``; ``zeroed``: ``out`` must start as zeros (the
    loop writes only the structurally nonzero entries of a compressed dense Jacobian).
    Rows whose forward-mode result holds a NaN raise ``NanTangents(rows)`` after the loop
    (the other rows are written)."""

    def __init__(self, fn: Callable[..., Any], zeroed: bool, parallel: bool,
                 nan_rows: bool = False) -> None:
        self.fn, self.zeroed, self.parallel = fn, zeroed, parallel
        self.nan_rows = nan_rows  # the loop marks rows with a NaN instead of raising

    def __call__(self, out: np.ndarray, xs: np.ndarray, *others: Any) -> Any:
        head: tuple = ()
        if self.parallel:
            import numba

            head = (numba.get_num_threads(),)
        if not self.nan_rows:
            return self.fn(*head, out, xs, *others)
        marks = np.zeros(xs.shape[0], dtype=np.bool_)
        result = self.fn(*head, out, xs, marks, *others)
        if marks.any():
            raise NanTangents(np.flatnonzero(marks))
        return result


def batch_kernel(kernel: Callable[..., Any], n_inputs: int, parallel: bool = False,
                 position: int = 0) -> BatchLoop:
    """The :class:`BatchLoop` of ``kernel`` (an entry made above, whose result is an
    array or a float, its input ``position`` the batched one, the loop's other inputs
    in order after ``xs``); ``parallel`` spreads the rows over Numba's threads
    (``prange`` over one chunk of rows per thread).

    The kernel's body is written into the loop (:func:`_fused_batch_source`), its
    buffers allocated once per chunk instead of once per row; a kernel whose source does
    not have that form is called once per row instead."""
    bound: tuple = ()
    if isinstance(kernel, functools.partial):
        bound, kernel = kernel.args, kernel.func
    py_func = getattr(kernel, "py_func", None)
    if py_func is None:  # an entry in parts chained by Python glue: a Python loop
        entry = functools.partial(kernel, *bound)

        def loop(out: np.ndarray, xs: np.ndarray, *others: Any) -> np.ndarray:
            for b in range(xs.shape[0]):
                out[b] = entry(*others[:position], xs[b], *others[position:])
            return out

        return BatchLoop(loop, False, False)
    module = importlib.import_module(py_func.__module__)
    fused = None
    try:
        fused = _fused_batch_source(Path(module.__file__).read_text(), py_func.__name__,
                                    parallel, position)
    except (OSError, UnicodeDecodeError, TypeError):
        pass
    if fused is None:  # serial: the kernel raises (its size check, guards), which a
        parallel = False  # prange loop does not hand back
        arrays = [f"_A{i}" for i in range(len(bound))]
        others = [f"_x{i}" for i in range(n_inputs) if i != position]
        call = ", ".join(arrays + others[:position] + ["_xs[_b]"] + others[position:])
        loop = "numba.prange" if parallel else "range"
        source = "\n".join([
            '"""A batch loop over a compiled dualad tape (generated)."""', "import numba",
            "import numpy as np",
            f"from {py_func.__module__} import {py_func.__name__} as _K", "", "",
            f'@numba.njit(cache=True, error_model="numpy", parallel={parallel})',
            f"def tape_batch({', '.join(arrays + ['_threads'] * parallel + ['_out', '_xs'] + others)}):",
            f"    for _b in {loop}(_xs.shape[0]):",
            f"        _out[_b] = _K({call})",
            "    return _out"]) + "\n"
        fused = (source, [], False, parallel, False)
    source, constants, zeroed, parallel, nan_rows = fused
    batch = import_kernel_module(source, subdirectory="tapes").tape_batch
    values = [getattr(module, name) for name in constants]
    if bound or values:  # the module's constant arrays as arguments: parallel code caches
        batch = functools.partial(batch, *values, *bound)
    return BatchLoop(batch, zeroed, parallel, nan_rows)


_EMPTY = re.compile(r"^    (\w+) = np\.empty\((\d+|\(\d+, \d+\))\)$")
_FIXED = re.compile(r"^    (\w+) = _zero_matrix\((\d+, \d+)\)  # written at fixed entries$")
_SIZE_CHECK = re.compile(r"^    if (_x\d+)\.shape\[0\] != (\d+):$")
_GLOBAL = re.compile(r"^(_G\d+) = np\.array\(")
_RESHAPED = "from dualad.tape.reshaped import reshaped as _reshaped"


def _fused_batch_source(source: str, name: str, parallel: bool, position: int = 0
                        ) -> tuple[str, list[str], bool, bool, bool] | None:
    """``(module source, constant arrays passed as arguments, out zeroed?, parallel, rows
    with a NaN marked?)`` of
    a batch loop around the body of the kernel ``name`` in ``source``: the input
    ``position`` (``_x0``: the first) is row ``_b`` of ``_xs``, the other inputs follow
    ``_out, _xs`` in order, the returned value is written into ``_out[_b]``, and
    the function-level ``np.empty`` buffers are allocated once per chunk of rows (every
    correct body writes such a buffer before reading it, so a row may start from the last
    row's contents). A dense result scattered at fixed entries is scattered into
    ``_out[_b]`` directly (``out`` zeroed by the caller). A body that raises (guards) runs
    serially; a forward-mode body's NaN check marks its row in ``_nan_rows`` instead of
    raising. None when the source has another form."""
    lines = source.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(f"def {name}(")]
    if len(found) != 1 or not lines[found[0] - 1].startswith("@numba.njit("):
        return None
    at = found[0]
    params = lines[at][len(f"def {name}("):].rstrip("):").split(", ")
    body = lines[at + 1:]
    batched = f"_x{position}"
    if batched not in params or not body or not body[-1].startswith("    return ") or \
            any("return" in line for line in body[:-1]) or \
            any(line and not line.startswith("    ") for line in body):
        return None
    result = body[-1][len("    return "):]
    body = body[:-1]
    checks: list[str] = []
    while len(body) >= 2 and _SIZE_CHECK.match(body[0]):  # once, on the rows' width
        name_, size = _SIZE_CHECK.match(body[0]).groups()  # type: ignore[union-attr]
        checks += [f"    if _xs.shape[1] != {size}:" if name_ == batched else body[0],
                   body[1]]
        body = body[2:]
    hoisted, kept, zeroed = [], [], False
    for line in body:
        fixed = _FIXED.match(line)
        if fixed and (result == fixed.group(1) or
                      result.startswith(f"_reshaped({fixed.group(1)}, ")):
            kept.append(f"    {fixed.group(1)} = _reshaped(_out[_b], ({fixed.group(2)}))")
            result, zeroed = "", True
        elif _EMPTY.match(line):
            hoisted.append(line)
        else:
            kept.append(line)
    nan_rows = False
    for i in range(len(kept) - 1):
        if kept[i] == "    if _nans != 0.0:" and kept[i + 1] == "        raise NanTangents()":
            kept[i + 1], nan_rows = "        _nan_rows[_b] = True", True
    parallel = parallel and not any("raise" in line for line in kept)
    constants = [m.group(1) for m in map(_GLOBAL.match, lines[:at]) if m] if parallel else []
    head = lines[:at - 1]
    if _RESHAPED not in head and any("_reshaped(" in line for line in kept):
        head.insert(head.index("import numpy as np") + 1, _RESHAPED)
    new_params = constants + [p for p in params if p.startswith("_A")] + \
        ["_out", "_xs"] + [p for p in params if not p.startswith("_A") and p != batched]
    if nan_rows:
        new_params.insert(new_params.index("_xs") + 1, "_nan_rows")
    if parallel:  # numba.get_num_threads() inside would keep the code from the disk cache
        new_params.insert(new_params.index("_out"), "_threads")
    inner = [f"    {batched} = _xs[_b]"] + kept + ([f"    _out[_b] = {result}"] if result else [])
    if parallel:
        loop = ["    _n = _xs.shape[0]",
                "    _chunks = max(1, min(_n, _threads))",
                "    for _c in numba.prange(_chunks):"]
        loop += ["    " + line for line in hoisted]
        loop += ["        for _b in range(_c * _n // _chunks, (_c + 1) * _n // _chunks):"]
        inner = ["        " + line for line in inner]
    else:
        loop = hoisted + ["    for _b in range(_xs.shape[0]):"]
        inner = ["    " + line for line in inner]
    text = "\n".join(head + [
        f'@numba.njit(cache=True, error_model="numpy", parallel={parallel})',
        f"def tape_batch({', '.join(new_params)}):"] + checks + loop + inner +
        ["    return _out"]) + "\n"
    return text, constants, zeroed, parallel, nan_rows
