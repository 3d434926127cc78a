"""Fused regions: a lowered program's elementwise, index-map and row-reduction
instructions grouped into loop nests with one scalar body each.

A :class:`Region` is one loop over ``domain`` entries. Its :class:`Node` s are scalar
statements in program order: an elementwise call (a :class:`~dualad.tape.lowering.Map`),
a copy (one piece of a gather that is not a plain view), or a term of a reduction
(``out[g(i)] += c(i) * x``). A node reads either another node of the same region at the
same entry (a scalar local: no temporary array) or a *materialized* value (an input, or a
value stored by an earlier region or step) through an index map; in straight-line code
(one entry) an entry a copy stored is read again from what the copy read (a buffer filled
entry by entry and read back: ``f[2] = f[1] - f[3]``). Gathers that move every
entry of one value (``np.roll``, slices, reshapes, broadcasts, transposes) are not
instructions at all: they are *views*, composed into the index maps of their readers.
Index maps are written as loop arithmetic where they follow a pattern
(:func:`index_source`: shifts, strides, rolls along an axis, broadcasts), else read
from a constant array.

Everything else (matrix products, general linear maps, row maxima) is a :class:`Step` of
its own between regions.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import lower
    >>> from dualad.tape.regions import partition, Region
    >>> f = lambda x: (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0
    >>> plan = partition(lower(record(f, np.ones(6)).program, [np.ones(6)]))
    >>> [(type(p).__name__, len(p.nodes)) for p in plan.items]
    [('Region', 4)]
    >>> index_source(np.roll(np.arange(6), 2))
    '((_i + 4) % 6)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..derivatives.language import numba_scalar_call
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
    Operand,
    Order,
    Select,
)

#: A loop's body holds at most this many nodes (Numba's compile time grows faster than
#: linearly with a function's size; straight-line code, one entry, is cut between
#: statements instead).
MAX_REGION_NODES = 100
#: numpy ufuncs whose vectorised loops beat Numba's scalar calls several times over on
#: large arrays (measured on an AMD EPYC, numpy 2: exp 4.6x, log 3.5x, tanh 12x, sinh
#: 7.6x, cosh 4.6x, expm1 4.4x, log1p 4.6x, arctan 5.6x, arcsinh 4.9x, cbrt 19x,
#: log10 5.2x, log2 2.9x, exp2 2.4x, arctan2 7.9x at 1024 entries; not sin, cos, sqrt).
NUMPY_FASTER = frozenset({"exp", "log", "tanh", "sinh", "cosh", "expm1", "log1p", "arctan",
                          "arcsinh", "cbrt", "log10", "log2", "exp2", "arctan2"})
#: Regions whose such calls cover at least this many entries (entries x calls) run as
#: numpy calls when only values are needed (the forward pass of a gradient, a value).
#: Below it the Python glue around the numpy calls (a Numba function's end, its
#: arguments, the next one's start: about 3 µs) costs more than the calls save (measured:
#: the MLP 64x32 gradient's one exp over 640 entries, 4 µs faster inside Numba).
NUMPY_MIN_SIZE = 1024
STORE_CALLS = True

__all__ = ["Node", "Plan", "Read", "Region", "Step", "compose_gathers", "index_source",
           "partition"]


@dataclass
class Read:
    """An operand: slot ``slot`` at ``index`` (None: the loop's entry); ``local`` when the
    region computes it at this entry (a scalar), else a materialized array."""

    slot: int
    index: np.ndarray | None
    local: bool


@dataclass
class Node:
    """One scalar statement: ``y = call(args)``, stored into ``out`` at ``store`` (None:
    the entry itself) by ``=`` or by ``+=`` (``accumulate``), or kept local."""

    out: int
    call: str
    arg_names: tuple[str, ...]
    operands: list[Any]  # Read, float or a constant array over the domain
    temps: list[str]
    partials: list[str]
    kind: str  # "map", "copy" or "reduce"
    name: str = ""  # the numpy ufunc of a map
    stored: bool = False
    shared: bool = False  # read outside its region's body (has a tangent, an adjoint)
    store: np.ndarray | None = None
    accumulate: bool = False


@dataclass
class Region:
    domain: int
    nodes: list[Node] = field(default_factory=list)
    writes: set[int] = field(default_factory=set)  # slots stored by this region
    locals: dict[int, int] = field(default_factory=dict)  # slot -> node computing it
    #: one entry: ``(slot, position)`` a copy node stored -> what it read (``(slot,
    #: index)``), read again from there (a buffer written entry by entry and read back)
    entries: dict[tuple[int, int], tuple[int, Any]] = field(default_factory=dict)
    numpy: bool = False  # values computed by numpy calls (see NUMPY_FASTER)


@dataclass
class Step:
    """An instruction written on its own (matrix product, linear map, selection)."""

    ins: Any


@dataclass
class Plan:
    low: Lowered
    items: list[Any]
    consts: list[Const]
    inits: dict[int, np.ndarray]  # slots written piecewise: initial values
    views: dict[int, tuple[int, np.ndarray]]
    producers: dict[int, Any]  # slot -> the Region or Step that writes it
    out: int


def _is_identity(idx: np.ndarray | None, n: int) -> bool:
    return idx is None or (idx.size == n and bool(np.array_equal(idx, np.arange(n))))


def _pattern_1d(v: np.ndarray, var: str) -> str | None:
    """``v[j]`` as arithmetic in ``var`` (= j): constant, affine or a rolled affine."""
    n = v.size
    c0 = int(v[0])
    if n == 1 or np.all(v == c0):
        return str(c0)
    d = int(v[1] - v[0])
    if np.array_equal(v, c0 + d * np.arange(n)):
        term = var if d == 1 else f"{var} * {d}"
        return term if c0 == 0 else f"({term} + {c0})"
    diffs = np.diff(v)
    values, counts = np.unique(diffs, return_counts=True)
    a = int(values[np.argmax(counts)])
    if a == 0:
        return None
    base = int(v.min()) if a > 0 else int(v.max())
    u = (v - base) / a
    if not np.all(u == np.round(u)):
        return None
    u = u.astype(np.int64)
    c = int(u[0])
    if not np.array_equal(u, (np.arange(n) + c) % n):
        return None
    term = f"(({var} + {c}) % {n})"
    term = term if a == 1 else f"{term} * {a}"
    return term if base == 0 else f"({term} + {base})"


def index_source(idx: np.ndarray, loop: str = "_i") -> str | None:
    """Source for ``idx[loop]`` as loop arithmetic, or None when it follows no pattern.

    Example:
        >>> index_source(np.arange(3, 9, 2))
        '(_i * 2 + 3)'
        >>> index_source(np.repeat(np.arange(3), 4))
        '(_i // 4)'
    """
    idx = np.asarray(idx, dtype=np.int64)
    found = _pattern_1d(idx, loop)
    if found is not None:
        return found
    m = idx.size
    for r in range(2, m // 2 + 1):
        if m % r:
            continue
        A = idx.reshape(m // r, r)
        F = A[:, 0] - A[0, 0]
        G = A[0, :]
        if not np.array_equal(A, F[:, None] + G[None, :]):
            continue
        f = _pattern_1d(F, f"{loop} // {r}")
        g = _pattern_1d(G, f"{loop} % {r}")
        if f is None or g is None:
            continue
        parts = [p for p in (f, g) if p != "0"]
        if len(parts) == 1:
            return parts[0] if parts[0].startswith("(") else f"({parts[0]})"
        return "(" + " + ".join(parts) + ")" if parts else "0"
    return None


def _slots_read(ins: Any) -> list[int]:
    """The slots one instruction reads (with repeats)."""
    if isinstance(ins, Gather):
        return [s for s, _, _ in ins.sources]
    if isinstance(ins, (Map, Guard)):
        found = [op.slot for op in ins.operands if op.slot is not None]
        return found + ([ins.slot] if isinstance(ins, Guard) and ins.slot is not None else [])
    if isinstance(ins, (Linear, Select, Order)):
        return [ins.source]
    if isinstance(ins, MatMul):
        return [s for s in (ins.a, ins.b) if s is not None]
    if isinstance(ins, Call):
        return list(ins.reads)
    return []


def compose_gathers(low: Lowered) -> list[Any]:
    """The instructions of ``low`` with chains of gathers composed: a gather whose result
    only one later gather reads (``dy = np.zeros(n); dy[0] = a; dy[1] = b; ...``: each
    write copies the buffer) is folded into that reader, which then copies each entry
    from where it came from once.

    Example:
        >>> import numpy as np
        >>> from dualad.tape import record
        >>> from dualad.tape.lowering import lower
        >>> def f(x):
        ...     out = np.zeros(3)
        ...     out[0] = x[0] * x[1]; out[1] = np.sin(x[1]); out[2] = x[2] + 1.0
        ...     return out
        >>> low = lower(record(f, np.ones(3)).program, [np.ones(3)])
        >>> last = compose_gathers(low)[-1]  # one copy from each of the three values
        >>> type(last).__name__, [slot for slot, _, _ in last.sources] == [
        ...     i.out for i in low.instructions if type(i).__name__ == "Map"]
        ('Gather', True)
    """
    readers: dict[int, int] = {}
    by_others: set[int] = set()  # read by an instruction that is not a gather
    for ins in low.instructions:
        for s in _slots_read(ins):
            readers[s] = readers.get(s, 0) + 1
            if not isinstance(ins, Gather):
                by_others.add(s)
    for is_slot, s in low.program.outputs:
        if is_slot:
            readers[s] = readers.get(s, 0) + 2  # never folded away
    folded: dict[int, Gather] = {}  # gathers read once, by a gather, kept out of the list
    result: list[Any] = []
    for ins in low.instructions:
        if isinstance(ins, Gather) and any(s in folded for s, _, _ in ins.sources):
            ins = _compose(ins, folded)
        if isinstance(ins, Gather) and readers.get(ins.out, 0) == 1 and \
                ins.out not in by_others:
            folded[ins.out] = ins
            continue
        result.append(ins)
    if folded:  # every folded gather has its one reader, a gather, after it
        raise LoweringError(f"gathers {sorted(folded)} were folded but never read")
    return result


def _compose(ins: Gather, folded: dict[int, Gather]) -> Gather:
    """``ins`` reading through the folded gathers it reads (removed from ``folded``)."""
    constant = ins.constant.copy()
    pieces: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def add(slot: int, positions: np.ndarray, local: np.ndarray) -> None:
        ps, ls = pieces.setdefault(slot, ([], []))
        ps.append(positions)
        ls.append(local)

    for s, positions, local in ins.sources:
        inner = folded.pop(s, None)
        if inner is None:
            add(s, positions, local)
            continue
        m = inner.constant.size
        owner = np.full(m, -1, dtype=np.intp)  # which inner piece holds each entry
        where = np.zeros(m, dtype=np.intp)
        for k, (_, p, loc) in enumerate(inner.sources):
            owner[p] = k
            where[p] = loc
        constant[positions] = inner.constant[local]
        for k, (s2, _, _) in enumerate(inner.sources):
            hit = owner[local] == k
            if np.any(hit):
                constant[positions[hit]] = 0.0
                add(s2, positions[hit], where[local[hit]])
    sources = [(slot, np.concatenate(ps), np.concatenate(ls))
               for slot, (ps, ls) in pieces.items()]
    return Gather(ins.out, constant, sources)


def partition(low: Lowered) -> Plan:
    """Group the instructions of ``low`` into regions and steps (see the module doc)."""
    sizes = low.sizes
    views: dict[int, tuple[int, np.ndarray]] = {}
    items: list[Any] = []
    consts: list[Const] = []
    inits: dict[int, np.ndarray] = {}
    producers: dict[int, Any] = {}
    region: Region | None = None
    constants: dict[int, np.ndarray] = {}  # constant slots' values
    written: dict[int, np.ndarray] = {}  # entries of gathers that pieces write

    def resolve(slot: int, index: np.ndarray | None) -> tuple[int, np.ndarray | None]:
        if slot in views:
            base, g = views[slot]
            return base, (g if index is None else g[index])
        return slot, index

    def close() -> None:
        nonlocal region
        region = None

    def region_for(domain: int, reads: list[tuple[int, np.ndarray | None]]) -> Region:
        """The current region if ``domain`` and the reads allow joining it, else a new one."""
        nonlocal region
        if region is not None and region.domain == domain and \
                (domain == 1 or len(region.nodes) < MAX_REGION_NODES):
            ok = True
            for slot, idx in reads:
                if slot in region.locals and _is_identity(idx, domain):
                    continue
                if slot in region.writes or slot in region.locals:
                    ok = False
                    break
            if ok:
                return region
        region = Region(domain)
        items.append(region)
        return region

    def forwarded(slot: int, idx: np.ndarray | None) -> tuple[int, Any]:
        """An entry the open straight-line region stored by a copy, read from where the
        copy read it (so the region does not read back what it writes)."""
        if region is not None and region.domain == 1 and idx is not None and \
                idx.size == 1 and (slot, int(idx.ravel()[0])) in region.entries:
            return region.entries[slot, int(idx.ravel()[0])]
        return slot, idx

    def read(r: Region, slot: int, idx: np.ndarray | None) -> Read:
        if slot in r.locals and _is_identity(idx, r.domain):
            return Read(slot, None, True)
        if _is_identity(idx, r.domain) and sizes[slot] == r.domain:
            idx = None
        return Read(slot, idx, False)

    def materialize(slot: int) -> int:
        """A step reads ``slot`` as an array: a view becomes a copy region."""
        if slot not in views:
            return slot
        base, g = views.pop(slot)
        r = region_for(sizes[slot], [(base, g)])
        r.nodes.append(Node(slot, "x", ("x",), [read(r, base, g)], [], ["1.0"], "copy",
                            stored=True))
        r.writes.add(slot)
        producers[slot] = r
        close()
        return slot

    for ins in compose_gathers(low):
        o, m = ins.out, sizes[ins.out]
        if isinstance(ins, Const):
            consts.append(ins)
            constants[o] = ins.value
            continue
        if isinstance(ins, Guard):  # a step of its own, reading materialized values
            if ins.kind == "shape":
                continue
            slot = materialize(ins.slot) if ins.slot is not None else None
            ops = [op if op.slot is None else Operand(materialize(op.slot), op.index,
                                                       op.constant) for op in ins.operands]
            close()
            items.append(Step(Guard(ins.out, slot, ins.name, ins.arg_names, ops, ins.kind,
                                    ins.recorded)))
            continue
        if isinstance(ins, Gather):
            constant = ins.constant
            sources = [(s, p, loc) for s, p, loc in ins.sources]
            if len(sources) > 1 and any(resolve(s, loc)[0] in constants for s, _, loc in sources):
                constant = constant.copy()  # pieces of constants (np.zeros' entries left
                for s, p, loc in sources:  # unwritten) are the gather's own constant
                    base, idx = resolve(s, loc)
                    if base in constants:
                        constant[p] = constants[base][np.arange(sizes[base]) if idx is None
                                                      else idx]
                sources = [(s, p, loc) for s, p, loc in sources
                           if resolve(s, loc)[0] not in constants]
            covered = sum(p.size for _, p, _ in sources)
            if len(sources) == 1 and covered == m and np.unique(sources[0][1]).size == m:
                s, positions, local = sources[0]
                g = np.empty(m, dtype=np.intp)
                g[positions] = local
                views[o] = resolve(s, g)  # type: ignore[assignment]
                continue
            if not sources:
                consts.append(Const(o, constant))
                constants[o] = constant
                continue
            counts = np.zeros(m, dtype=np.intp)
            for _, p, _ in sources:
                counts[p] += 1
            if np.any(counts > 1):  # later pieces overwrite earlier ones
                raise LoweringError(f"a gather writes entries twice ({ins.out})")
            if covered < m:
                inits[o] = constant.copy()
            unwritten = counts == 0
            pieces: list[tuple[np.ndarray, int, Any]] = []
            for s, positions, local in sources:
                base, idx = resolve(s, local)
                known = [] if idx is None or region is None or region.domain != 1 else \
                    [(base, int(j)) in region.entries or base in written and
                     not written[base][int(j)] for j in idx.ravel()]
                if known and all(known):  # entries the open straight-line region stored
                    for k, j in enumerate(idx.ravel()):  # (or left constant): one each
                        if (base, int(j)) in region.entries:
                            pieces.append((positions[k:k + 1],
                                           *region.entries[base, int(j)]))
                        else:
                            if o not in inits:
                                inits[o] = constant.copy()
                            inits[o][positions[k]] = inits[base][j]
                            unwritten[positions[k]] = True
                else:
                    pieces.append((positions, base, idx))
            written[o] = ~unwritten
            pieces.sort(key=lambda piece: piece[0].size != 1)  # entries first: into the
            for positions, base, idx in pieces:  # open straight-line region
                r = region_for(positions.size, [(base, idx)])
                r.nodes.append(Node(o, "x", ("x",), [read(r, base, idx)], [], ["1.0"],
                                    "copy", stored=True, shared=True,
                                    store=None if _is_identity(positions, positions.size)
                                    and m == positions.size else positions))
                if r.domain == 1 and positions.size == 1:
                    r.entries[o, int(positions[0])] = (base, idx)
                r.writes.add(o)
                producers[o] = r
            continue
        if isinstance(ins, Map):
            reads = []
            for op in ins.operands:
                if op.slot is not None:
                    reads.append(forwarded(*resolve(op.slot, op.index)) if m == 1 else
                                 resolve(op.slot, op.index))
            r = region_for(m, reads)
            operands: list[Any] = []
            it = iter(reads)
            for op in ins.operands:
                if op.slot is None:
                    operands.append(op.constant)
                else:
                    operands.append(read(r, *next(it)))
            call = ins.value if ins.value is not None else numba_scalar_call(ins.name,
                                                                             ins.arg_names)
            r.nodes.append(Node(o, call, ins.arg_names, operands, ins.temps, ins.partials,
                                "map", ins.name if ins.value is None else ""))
            r.locals[o] = len(r.nodes) - 1
            producers[o] = r
            continue
        if isinstance(ins, Linear):
            reduce = _as_reduction(ins, sizes)
            if reduce is not None:
                group, coef = reduce
                base, idx = resolve(ins.source, None)
                r = region_for(sizes[ins.source], [(base, idx)])
                inits[o] = ins.offset.copy()
                c = float(coef[0]) if coef.size and np.all(coef == coef[0]) else (
                    coef if coef.size else 1.0)  # an empty sum: nothing to scale
                call = "x" if isinstance(c, float) and c == 1.0 else (
                    f"x * {c!r}" if isinstance(c, float) else "x * _c")
                r.nodes.append(Node(o, call, ("x",), [read(r, base, idx)], [],
                                    ["1.0" if call == "x" else
                                     (repr(c) if isinstance(c, float) else "_c")],
                                    "reduce", stored=True, shared=True,
                                    store=None if m == r.domain and
                                    _is_identity(group, m) else group,
                                    accumulate=True))
                if not isinstance(c, float):
                    r.nodes[-1].operands.append(c)
                    r.nodes[-1].arg_names = ("x", "_c")
                    r.nodes[-1].partials.append("0.0")
                r.writes.add(o)
                producers[o] = r
                continue
            src = materialize(ins.source)
            ins = Linear(o, src, ins.indptr, ins.indices, ins.data, ins.offset)
        elif isinstance(ins, Select):
            ins = Select(o, materialize(ins.source), ins.group, ins.largest, ins.ignores_nan)
        elif isinstance(ins, Order):
            ins = replace(ins, out=o, source=materialize(ins.source))
        elif isinstance(ins, MatMul):
            ins = MatMul(o, materialize(ins.a), materialize(ins.b), ins.a_const, ins.b_const,
                         ins.p, ins.q, ins.r)
        elif isinstance(ins, Call):
            ins = replace(ins, reads=tuple(materialize(s) for s in ins.reads))
        close()
        items.append(Step(ins))
        producers[o] = items[-1]
    outs = [s for is_slot, s in low.program.outputs if is_slot]
    for s in outs:
        _materialize_output(s, views, sizes, items, producers)
    out = outs[0]
    _mark_stored(items, set(outs))
    for item in [item for item in items if isinstance(item, Region) and not item.nodes]:
        items.remove(item)  # its copies were read again from where they came from
    for o in [o for o in inits if o not in producers or o not in producers[o].writes]:
        del inits[o]
    for item in items:
        if isinstance(item, Region) and \
                all(n.kind != "map" or hasattr(np, n.name) for n in item.nodes) and \
                item.domain * sum(n.name in NUMPY_FASTER for n in item.nodes) >= NUMPY_MIN_SIZE:
            item.numpy = True
            for n in item.nodes:
                if n.kind == "map":
                    n.stored = True
                    item.writes.add(n.out)
    return Plan(low, items, consts, inits, views, producers, out)


def _as_reduction(ins: Linear, sizes: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(group, coefficient)`` per source entry when every source entry feeds exactly one
    output entry (sums and means over axes), else None."""
    n = sizes[ins.source]
    if ins.indices.size != n:
        return None
    group = np.empty(n, dtype=np.intp)
    coef = np.empty(n)
    rows = np.repeat(np.arange(ins.indptr.size - 1), np.diff(ins.indptr))
    if np.unique(ins.indices).size != n:
        return None
    group[ins.indices] = rows
    coef[ins.indices] = ins.data
    return group, coef


def _materialize_output(out: int, views: dict, sizes: list[int], items: list[Any],
                        producers: dict[int, Any]) -> int:
    if out in producers or out not in views:  # computed, an input or a constant
        return out
    base, g = views.pop(out)
    r = Region(sizes[out])
    r.nodes.append(Node(out, "x", ("x",), [Read(base, None if _is_identity(g, sizes[out])
                                                and sizes[base] == sizes[out] else g,
                                                False)],
                        [], ["1.0"], "copy", stored=True, shared=True))
    r.writes.add(out)
    items.append(r)
    producers[out] = r
    return out


def _calls_function(source: str) -> bool:
    """Whether scalar ``source`` calls a function (``math.exp(x)``), not only arithmetic."""
    return re.search(r"[A-Za-z_][\w.]*\(", source) is not None


def _mark_stored(items: list[Any], outs: set[int]) -> None:
    """A map node is stored when anything but its own region's nodes at the same entry
    reads it (another region, a step, the program's output)."""
    read_outside: set[int] = set(outs)
    for item in items:
        if isinstance(item, Region):
            for n in item.nodes:
                for op in n.operands:
                    if isinstance(op, Read) and not op.local:
                        read_outside.add(op.slot)
        else:
            ins = item.ins
            if isinstance(ins, Guard):
                read_outside.update(op.slot for op in ins.operands if op.slot is not None)
            for name in ("source", "a", "b", "slot"):
                s = getattr(ins, name, None)
                if s is not None:
                    read_outside.add(s)
            read_outside.update(getattr(ins, "reads", ()))
    for item in items:
        if isinstance(item, Region):
            # copies nothing reads (every entry read again from where it came from)
            dead = {n.out for n in item.nodes if n.kind == "copy" and n.out not in read_outside}
            item.nodes = [n for n in item.nodes if n.out not in dead]
            item.writes -= dead
            for n in item.nodes:  # stored too: calls of functions (backward reads them)
                if n.kind != "map":
                    n.shared = True
                if n.kind == "map" and (n.out in read_outside or
                                        STORE_CALLS and item.domain > 1 and _calls_function(n.call)):
                    n.stored = True
                    n.shared = n.out in read_outside
                    item.writes.add(n.out)
