"""The Numba backend: a lowered program (:mod:`dualad.tape.lowering`) written as one
``@numba.njit`` function with scalar loop bodies from the rules tables' expressions.

Three entries are generated per program, each on demand:

- ``value``: the program's output;
- ``jacobian``: forward mode, the ``k`` tangents innermost: every active value ``v`` of
  size ``m`` owns ``m`` rows of one ``(rows, k)`` tangent buffer, seeded with the identity
  on the differentiated inputs; the result is the output's rows (``out.size x k``);
- ``gradient``: reverse mode for a scalar output: the values forward, then adjoints
  accumulated backwards through the same instructions.

Values of size one are scalar locals (no allocation), so small right-hand sides written
as ``np.array([...])`` of scalar expressions become straight-line code. Generated modules
are written by :func:`dualad.derivatives.codegen.import_kernel_module` (named by a digest
of their source, compiled with ``cache=True``), so a new process loads them from disk.

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
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..derivatives.codegen import import_kernel_module
from ..derivatives.language import numba_scalar_call
from .lowering import (
    Const,
    Gather,
    Guard,
    Linear,
    Lowered,
    LoweringError,
    Map,
    MatMul,
    Select,
)

__all__ = ["BatchLoop", "NumbaProgram", "batch_kernel"]

#: Programs with more instructions than this are not compiled (Numba's compile time grows
#: faster than linearly with a function's size); they run in Python.
MAX_INSTRUCTIONS = 400
#: Constant arrays longer than this are passed to the kernel instead of written in its source.
MAX_GLOBAL_ARRAY = 64


class _Writer:
    """Source lines of one kernel, with the constant arrays it reads as module globals."""

    def __init__(self, low: Lowered, globals_: dict[str, np.ndarray]) -> None:
        self.low = low
        self.sizes = low.sizes
        self.lines: list[str] = []
        self.globals = globals_
        self.arrays: dict[str, np.ndarray] = {}

    def const_array(self, a: np.ndarray) -> str:
        """A name for the constant array ``a``: a module global when small, else a
        parameter of the kernel bound at call time (Numba compiles large global arrays
        into the code, slowly, and the source would hold them)."""
        if a.size > MAX_GLOBAL_ARRAY:
            name = f"_A{len(self.arrays)}"
            self.arrays[name] = np.ascontiguousarray(a)
            return name
        name = f"_G{len(self.globals)}"
        self.globals[name] = a
        return name

    def index(self, idx: np.ndarray, loop: str = "_i") -> str:
        """Source for ``idx[loop]``: a literal, an affine expression or a global read."""
        if idx.size == 1:
            return str(int(idx[0]))
        start = int(idx[0])
        if np.array_equal(idx, np.arange(start, start + idx.size)):
            return loop if start == 0 else f"{loop} + {start}"
        return f"{self.const_array(idx.astype(np.intp))}[{loop}]"

    def value(self, s: int, at: str) -> str:
        return f"_v{s}" if self.sizes[s] == 1 else f"_v{s}[{at}]"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)


def _renamed(text: str, tag: str) -> str:
    return re.sub(r"\b_t(\d+)\b", lambda m: f"_t{tag}_{m.group(1)}", text)


def _constant_partial(expr: str) -> float | None:
    """The value of a partial written as a plain number (``1.0``, ``(-1.0)``), else None."""
    try:
        return float(expr.strip().strip("()"))
    except ValueError:
        return None


def _literal(v: float) -> str:
    if v != v:
        return "np.nan"
    if v in (np.inf, -np.inf):
        return "np.inf" if v > 0 else "(-np.inf)"
    return repr(float(v))


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
        self._cache: dict[Any, Callable[..., Any]] = {}

    def _differentiated(self, single: bool = True) -> int:
        """The slot of the differentiated output (the only output when ``single``)."""
        if single and len(self.outputs) != 1:
            raise LoweringError("a program with several outputs")
        if self.out < 0:
            raise LoweringError("the differentiated output is a constant")
        return self.out

    # analysis ---------------------------------------------------------------------------
    def active(self, wanted: tuple[int, ...]) -> list[bool]:
        """Which slots depend on the input slots ``wanted``."""
        act = [False] * len(self.low.sizes)
        for s in wanted:
            act[s] = True
        for ins in self.low.instructions:
            if isinstance(ins, Map):
                act[ins.out] = any(o.slot is not None and act[o.slot] for o in ins.operands)
            elif isinstance(ins, Gather):
                act[ins.out] = any(act[s] for s, _, _ in ins.sources)
            elif isinstance(ins, (Linear, Select)):
                act[ins.out] = act[ins.source]
            elif isinstance(ins, MatMul):
                act[ins.out] = act[ins.a] or act[ins.b]
        return act

    # generation -------------------------------------------------------------------------
    def _forward_values(self, w: _Writer, params: list[str],
                        act: list[bool] | None = None) -> None:
        """The values; with ``act``, also every active elementwise partial (``_d{k}_{a}``:
        a local for size one, else an array), which the tangent loop reads."""
        low = self.low
        for s in range(low.program.n_inputs):
            params.append(f"_x{s}")
            w.emit(1, f"_v{s} = _x{s}")
        for k, ins in enumerate(low.instructions):
            o, m = ins.out, low.sizes[ins.out]
            if isinstance(ins, Const):
                if m == 1:
                    w.emit(1, f"_v{o} = {_literal(ins.value[0])}")
                else:
                    w.emit(1, f"_v{o} = {w.const_array(ins.value)}")
            elif isinstance(ins, Map):
                if m != 1:
                    w.emit(1, f"_v{o} = np.empty({m})")
                    w.emit(1, f"for _i in range({m}):")
                depth = 2 if m != 1 else 1
                wanted = [] if act is None or not act[o] else self._active_partials(ins, act)
                if m != 1:
                    for a in wanted:
                        if _constant_partial(ins.partials[a]) is None:
                            w.lines.insert(len(w.lines) - 1, f"    _d{k}_{a} = np.empty({m})")
                self._map_arguments(w, ins, depth, k)
                w.emit(depth, f"y = {numba_scalar_call(ins.name, ins.arg_names)}")
                w.emit(depth, f"_v{o} = y" if m == 1 else f"_v{o}[_i] = y")
                if wanted:
                    for t in ins.temps:
                        w.emit(depth, _renamed(t, str(k)))
                    for a in wanted:
                        if _constant_partial(ins.partials[a]) is not None:
                            continue  # written into the tangent loop as a literal
                        expr = _renamed(ins.partials[a], str(k))
                        w.emit(depth, f"_d{k}_{a} = {expr}" if m == 1 else
                               f"_d{k}_{a}[_i] = {expr}")
            elif isinstance(ins, Gather):
                if m == 1:
                    s, _, local = ins.sources[0] if ins.sources else (None, None, None)
                    w.emit(1, f"_v{o} = " + (w.value(s, str(int(local[0]))) if s is not None
                                             else _literal(ins.constant[0])))
                    continue
                if np.any(ins.constant):
                    w.emit(1, f"_v{o} = {w.const_array(ins.constant)}.copy()")
                elif sum(p.size for _, p, _ in ins.sources) == m:  # every entry written
                    w.emit(1, f"_v{o} = np.empty({m})")
                else:
                    w.emit(1, f"_v{o} = np.zeros({m})")
                for s, positions, local in ins.sources:
                    n = positions.size
                    if n == 1:
                        w.emit(1, f"_v{o}[{int(positions[0])}] = "
                                  f"{w.value(s, str(int(local[0])))}")
                    else:
                        w.emit(1, f"for _i in range({n}):")
                        w.emit(2, f"_v{o}[{w.index(positions)}] = "
                                  f"{w.value(s, w.index(local))}")
            elif isinstance(ins, Linear):
                self._linear(w, ins, forward_tangent=None)
            elif isinstance(ins, MatMul):
                w.emit(1, f"_v{o} = ({self._matrix(ins.a, ins.p, ins.q)} @ "
                          f"{self._matrix(ins.b, ins.q, ins.r)}).reshape(-1)")
            elif isinstance(ins, Select):
                self._select_values(w, ins)
            elif isinstance(ins, Guard):
                self._guard(w, ins, k)

    def _guard(self, w: _Writer, ins: Guard, k: int) -> None:
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
            self._map_arguments(w, ins, depth, k)  # type: ignore[arg-type]
            w.emit(depth, f"_p = {numba_scalar_call(ins.name, ins.arg_names)}")
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

    @staticmethod
    def _active_partials(ins: Map, act: list[bool]) -> list[int]:
        return [a for a, (op, expr) in enumerate(zip(ins.operands, ins.partials))
                if op.slot is not None and act[op.slot] and expr not in ("0.0", "(0.0)")]

    def _map_arguments(self, w: _Writer, ins: Map, depth: int, k: int) -> list[str]:
        """Assign each argument's scalar to its rule name; the index expression per operand."""
        at = []
        m = self.low.sizes[ins.out]
        for name, op in zip(ins.arg_names, ins.operands):
            if op.slot is None:
                if isinstance(op.constant, float):
                    w.emit(depth, f"{name} = {_literal(op.constant)}")
                else:
                    w.emit(depth, f"{name} = {w.const_array(op.constant)}[_i]")
                at.append("")
                continue
            if self.low.sizes[op.slot] == 1:
                idx = "0"
            elif op.index is None:
                idx = "_i" if m != 1 else "0"
            else:
                idx = w.index(op.index) if m != 1 else str(int(op.index[0]))
            w.emit(depth, f"{name} = {w.value(op.slot, idx)}")
            at.append(idx)
        return at

    @staticmethod
    def _matrix(s: int, rows: int, cols: int, prefix: str = "_v") -> str:
        return f"{prefix}{s}.reshape(({rows}, {cols}))"

    def _select_values(self, w: _Writer, ins: Select) -> None:
        """``out[g]`` = the largest (smallest) entry of group ``g``, and ``_n{o}``: how many
        entries tie for it (they share the derivative)."""
        o, s, n = ins.out, ins.source, ins.group.size
        m = self.low.sizes[o]
        if self.low.sizes[s] == 1 or m == 1:
            if self.low.sizes[s] == 1:
                raise LoweringError("a selection over one entry")
        G = w.const_array(ins.group)
        better = ">" if ins.largest else "<"
        start = "-np.inf" if ins.largest else "np.inf"
        w.emit(1, f"_m{o} = np.full({m}, {start})")
        w.emit(1, f"_n{o} = np.zeros({m})")
        w.emit(1, f"for _i in range({n}):")
        w.emit(2, f"_x = _v{s}[_i]")
        w.emit(2, f"_g = {G}[_i]")
        w.emit(2, f"if _x {better} _m{o}[_g]:")
        w.emit(3, f"_m{o}[_g] = _x")
        w.emit(3, f"_n{o}[_g] = 1.0")
        w.emit(2, f"elif _x == _m{o}[_g]:")
        w.emit(3, f"_n{o}[_g] += 1.0")
        w.emit(1, f"_v{o} = _m{o}[0]" if m == 1 else f"_v{o} = _m{o}")

    def _linear(self, w: _Writer, ins: Linear, forward_tangent: Any) -> None:
        o, m, s = ins.out, self.low.sizes[ins.out], ins.source
        indptr, indices, data = ins.indptr, ins.indices, ins.data
        if m == 1 and self.low.sizes[s] == 1:
            w.emit(1, f"_v{o} = {_literal(ins.offset[0])} + {_literal(data[0]) if data.size else 0.0}"
                      f" * _v{s}")
            return
        ptr, ind, dat = (w.const_array(indptr), w.const_array(indices), w.const_array(data))
        src = f"_v{s}[{ind}[_p]]" if self.low.sizes[s] != 1 else f"_v{s}"
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

    def _tangents(self, w: _Writer, act: list[bool], wanted: tuple[int, ...], K: int,
                  colors: str | None = None, seeds: list[str] | None = None) -> None:
        """One loop over the ``K`` directions around the whole program's tangents (scalar
        locals for size one, one reused vector per larger value): one compact loop body,
        which Numba compiles fast, and the partials computed once, before it. ``seeds``
        (one name per slot of ``wanted``, with ``K == 1``) seeds the given directions."""
        low = self.low
        sizes = low.sizes
        for s, a in enumerate(act):
            if a and sizes[s] != 1:
                w.emit(1, f"_t{s} = np.empty({sizes[s]})")
        w.emit(1, f"for _j in range({K}):")
        col = 0
        for n_seed, s in enumerate(wanted):  # seeds: the identity, one direction per
            m = sizes[s]                       # colour of columns, or the given ones
            if seeds is not None:
                if m == 1:
                    w.emit(2, f"_t{s} = {seeds[n_seed]}")
                else:
                    w.emit(2, f"for _i in range({m}):")
                    w.emit(3, f"_t{s}[_i] = {seeds[n_seed]}[_i]")
            elif colors is not None:
                if m == 1:
                    w.emit(2, f"_t{s} = 1.0 if _j == {colors}[{col}] else 0.0")
                else:
                    w.emit(2, f"for _i in range({m}):")
                    w.emit(3, f"_t{s}[_i] = 1.0 if _j == {colors}[{col} + _i] else 0.0")
            elif m == 1:
                w.emit(2, f"_t{s} = 1.0 if _j == {col} else 0.0")
            else:
                w.emit(2, f"for _i in range({m}):")
                w.emit(3, f"_t{s}[_i] = 1.0 if _j == {col} + _i else 0.0")
            col += m

        def tan(s: int, at: str) -> str:
            return f"_t{s}" if sizes[s] == 1 else f"_t{s}[{at}]"

        for k, ins in enumerate(low.instructions):
            o, m = ins.out, sizes[ins.out]
            if not act[o] or isinstance(ins, Const):
                continue
            if isinstance(ins, Map):
                terms = []
                depth = 2 if m == 1 else 3
                if m != 1:
                    w.emit(2, f"for _i in range({m}):")
                for a in self._active_partials(ins, act):
                    op = ins.operands[a]
                    if sizes[op.slot] == 1:
                        at = "0"
                    elif op.index is None:
                        at = "_i"
                    else:
                        at = w.index(op.index) if m != 1 else str(int(op.index[0]))
                    c = _constant_partial(ins.partials[a])
                    t = tan(op.slot, at)
                    if c is None:
                        d = f"_d{k}_{a}" if m == 1 else f"_d{k}_{a}[_i]"
                        terms.append(f"+ {d} * {t}")
                    elif c == 1.0:
                        terms.append(f"+ {t}")
                    elif c == -1.0:
                        terms.append(f"- {t}")
                    else:
                        terms.append(f"+ {_literal(c)} * {t}")
                text = " ".join(terms).removeprefix("+ ") if terms else "0.0"
                w.emit(depth, f"{tan(o, '_i')} = {text}")
            elif isinstance(ins, Gather):
                covered = np.zeros(m, dtype=bool)
                for s, positions, local in ins.sources:
                    covered[positions] = True
                    src = tan(s, w.index(local)) if act[s] else "0.0"
                    if m == 1:
                        w.emit(2, f"_t{o} = {tan(s, str(int(local[0]))) if act[s] else '0.0'}")
                        continue
                    if positions.size == 1:
                        w.emit(2, f"_t{o}[{int(positions[0])}] = "
                                  f"{tan(s, str(int(local[0]))) if act[s] else '0.0'}")
                        continue
                    w.emit(2, f"for _i in range({positions.size}):")
                    w.emit(3, f"_t{o}[{w.index(positions)}] = {src}")
                free = np.flatnonzero(~covered)
                if free.size:
                    if m == 1:
                        w.emit(2, f"_t{o} = 0.0")
                    else:
                        w.emit(2, f"for _i in range({free.size}):")
                        w.emit(3, f"_t{o}[{w.index(free)}] = 0.0")
            elif isinstance(ins, MatMul):
                terms = []
                if act[ins.a]:
                    terms.append(f"({self._matrix(ins.a, ins.p, ins.q, '_t')} @ "
                                 f"{self._matrix(ins.b, ins.q, ins.r)})")
                if act[ins.b]:
                    terms.append(f"({self._matrix(ins.a, ins.p, ins.q)} @ "
                                 f"{self._matrix(ins.b, ins.q, ins.r, '_t')})")
                w.emit(2, f"_t{o}[:] = ({' + '.join(terms)}).reshape(-1)")
            elif isinstance(ins, Select):
                s = ins.source
                G = w.const_array(ins.group)
                w.emit(2, f"_acc_{o} = np.zeros({m})")
                w.emit(2, f"for _i in range({ins.group.size}):")
                w.emit(3, f"if _v{s}[_i] == _m{o}[{G}[_i]]:")
                w.emit(4, f"_acc_{o}[{G}[_i]] += _t{s}[_i] / _n{o}[{G}[_i]]")
                w.emit(2, f"_t{o} = _acc_{o}[0]" if m == 1 else f"_t{o}[:] = _acc_{o}")
            elif isinstance(ins, Linear):
                s = ins.source
                ptr, ind, dat = (w.const_array(ins.indptr), w.const_array(ins.indices),
                                 w.const_array(ins.data))
                src = f"_t{s}[{ind}[_p]]" if sizes[s] != 1 else f"_t{s}"
                if m == 1:
                    w.emit(2, "_acc = 0.0")
                    w.emit(2, f"for _p in range({int(ins.indptr[-1])}):")
                    w.emit(3, f"_acc += {dat}[_p] * {src}")
                    w.emit(2, f"_t{o} = _acc")
                else:
                    w.emit(2, f"for _i in range({m}):")
                    w.emit(3, "_acc = 0.0")
                    w.emit(3, f"for _p in range({ptr}[_i], {ptr}[_i + 1]):")
                    w.emit(4, f"_acc += {dat}[_p] * {src}")
                    w.emit(3, f"_t{o}[_i] = _acc")

    def _adjoints(self, w: _Writer, act: list[bool]) -> None:
        low = self.low
        sizes = low.sizes
        for s, a in enumerate(act):
            if a:
                w.emit(1, f"_a{s} = 0.0" if sizes[s] == 1 else f"_a{s} = np.zeros({sizes[s]})")
        w.emit(1, f"_a{self.out} = " + ("1.0" if sizes[self.out] == 1 else "_seed"))

        def adj(s: int, at: str) -> str:
            return f"_a{s}" if sizes[s] == 1 else f"_a{s}[{at}]"

        for k in range(len(low.instructions) - 1, -1, -1):
            ins = low.instructions[k]
            o, m = ins.out, sizes[ins.out]
            if not act[o] or isinstance(ins, Const):
                continue
            if isinstance(ins, Map):
                depth = 1
                if m != 1:
                    w.emit(1, f"for _i in range({m}):")
                    depth = 2
                at = self._map_arguments(w, ins, depth, k)
                w.emit(depth, "y = " + (f"_v{o}" if m == 1 else f"_v{o}[_i]"))
                w.emit(depth, "_g = " + adj(o, "_i"))
                for t in ins.temps:
                    w.emit(depth, _renamed(t, str(k)))
                for a, (op, expr) in enumerate(zip(ins.operands, ins.partials)):
                    if op.slot is None or not act[op.slot] or expr in ("0.0", "(0.0)"):
                        continue
                    w.emit(depth, f"{adj(op.slot, at[a])} += _g * {_renamed(expr, str(k))}")
            elif isinstance(ins, Gather):
                for s, positions, local in ins.sources:
                    if not act[s]:
                        continue
                    if positions.size == 1:
                        w.emit(1, f"{adj(s, str(int(local[0])))} += "
                                  f"{adj(o, str(int(positions[0])))}")
                    else:
                        w.emit(1, f"for _i in range({positions.size}):")
                        w.emit(2, f"{adj(s, w.index(local))} += {adj(o, w.index(positions))}")
            elif isinstance(ins, MatMul):
                g = self._matrix(o, ins.p, ins.r, "_a")
                if act[ins.a]:
                    w.emit(1, f"_a{ins.a} += ({g} @ {self._matrix(ins.b, ins.q, ins.r)}.T)"
                              f".reshape(-1)")
                if act[ins.b]:
                    w.emit(1, f"_a{ins.b} += ({self._matrix(ins.a, ins.p, ins.q)}.T @ {g})"
                              f".reshape(-1)")
            elif isinstance(ins, Select):
                s = ins.source
                if not act[s]:
                    continue
                G = w.const_array(ins.group)
                ga = f"_a{o}" if m == 1 else f"_a{o}[{G}[_i]]"
                w.emit(1, f"for _i in range({ins.group.size}):")
                w.emit(2, f"if _v{s}[_i] == _m{o}[{G}[_i]]:")
                w.emit(3, f"_a{s}[_i] += {ga} / _n{o}[{G}[_i]]")
            elif isinstance(ins, Linear):
                s = ins.source
                if not act[s]:
                    continue
                ptr, ind, dat = (w.const_array(ins.indptr), w.const_array(ins.indices),
                           w.const_array(ins.data))
                w.emit(1, f"for _i in range({m}):")
                w.emit(2, f"for _p in range({ptr}[_i], {ptr}[_i + 1]):")
                w.emit(3, f"{adj(s, f'{ind}[_p]')} += {dat}[_p] * {adj(o, '_i')}")

    # modules ----------------------------------------------------------------------------
    def _module(self, name: str, w: _Writer, params: list[str]) -> Callable[..., Any]:
        lines = ['"""A compiled dualad tape (generated)."""', "import math", "import numba",
                 "import numpy as np", "from dualad.tape.program import GuardFailed", ""]
        for gname, arr in w.globals.items():
            dtype = "np.intp" if arr.dtype.kind in "iu" else "np.float64"
            items = ", ".join(str(int(v)) for v in arr) if arr.dtype.kind in "iu" else \
                ", ".join(_literal(float(v)) for v in arr)
            lines.append(f"{gname} = np.array([{items}], dtype={dtype})")
        # the loops are written for the recorded sizes: another size is another recording
        checks = [f"    if {p}.shape[0] != {self.low.sizes[int(p[2:])]}:\n"
                  f"        raise GuardFailed()" for p in params
                  if p.startswith("_x") and self.low.sizes[int(p[2:])] != 1]
        lines += ["", "", '@numba.njit(cache=True, error_model="numpy")',
                  f"def {name}({', '.join(list(w.arrays) + params)}):"] + checks + w.lines
        source = "\n".join(lines) + "\n"
        module = import_kernel_module(source, subdirectory="tapes")
        kernel = getattr(module, name)
        if w.arrays:  # bound first: the kernel takes the program's inputs
            return functools.partial(kernel, *w.arrays.values())
        return kernel

    def _shape_literal(self, shape: tuple[int, ...]) -> str:
        return "(" + "".join(f"{d}, " for d in shape) + ")"

    def _output(self, s: int) -> str:
        """Source of the value of slot ``s`` as handed back: a float for shape ``()``,
        else a fresh array of the recorded shape."""
        shape = self.low.shapes[s]
        if self.low.sizes[s] == 1:
            return f"_v{s}" if shape == () else f"np.full({self._shape_literal(shape)}, _v{s})"
        return f"_v{s}.copy().reshape({self._shape_literal(shape)})"

    def _aux(self) -> str:
        """Source of the tuple of the computed outputs after the first (``has_aux``)."""
        items = [self._output(s) for is_slot, s in self.outputs[1:] if is_slot]
        return "(" + "".join(f"{item}, " for item in items) + ")"

    def value(self) -> Callable[..., Any]:
        """``value(*inputs)``: the output (inputs flat, floats for size-one inputs)."""
        fn = self._cache.get("value")
        if fn is None:
            o = self._differentiated()
            w = _Writer(self.low, {})
            params: list[str] = []
            self._forward_values(w, params)
            w.emit(1, f"return {self._output(o)}")
            fn = self._cache["value"] = self._module("tape_value", w, params)
        return fn

    def values(self) -> Callable[..., Any]:
        """``values(*inputs)``: the tuple of the computed outputs, in order (the constant
        outputs are left out: the caller has them)."""
        fn = self._cache.get("values")
        if fn is None:
            w = _Writer(self.low, {})
            params: list[str] = []
            self._forward_values(w, params)
            items = [self._output(s) for is_slot, s in self.outputs if is_slot]
            w.emit(1, "return (" + "".join(f"{item}, " for item in items) + ")")
            fn = self._cache["values"] = self._module("tape_values", w, params)
        return fn

    def jacobian(self, wanted: tuple[int, ...], aux: bool = False) -> Callable[..., Any]:
        """``jacobian(*inputs)``: the output's Jacobian with respect to the input slots
        ``wanted``, shape ``out.shape + (k,)`` with ``k`` their total size (one slot: its
        shape in place of ``(k,)``). With ``aux``, ``(jacobian, other outputs)``."""
        fn = self._cache.get(("jacobian", wanted, aux))
        if fn is not None:
            return fn
        o = self._differentiated(single=not aux)
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        self._forward_values(w, params, act)
        K = sum(low.sizes[s] for s in wanted)
        m = low.sizes[o]
        if len(wanted) == 1:
            shape = low.shapes[o] + low.shapes[wanted[0]]
        else:
            shape = low.shapes[o] + (K,)
        tail = f", {self._aux()}" if aux else ""
        if act[o]:
            w.emit(1, f"_J = np.empty(({m}, {K}))")
            self._tangents(w, act, wanted, K)
            if m == 1:
                w.emit(2, f"_J[0, _j] = _t{o}")
            else:
                w.emit(2, f"for _i in range({m}):")
                w.emit(3, f"_J[_i, _j] = _t{o}[_i]")
            w.emit(1, f"return _J.reshape({self._shape_literal(shape)}){tail}")
        else:
            w.emit(1, f"return np.zeros({self._shape_literal(shape)}){tail}")
        fn = self._cache[("jacobian", wanted, aux)] = self._module("tape_jacobian", w, params)
        return fn

    def compressed_jacobian(self, wanted: tuple[int, ...], colors: np.ndarray,
                            rows: np.ndarray, cols: np.ndarray,
                            dense: tuple[int, ...] | None = None) -> Callable[..., Any]:
        """``compressed(*inputs)``: the values, in the order of ``(rows, cols)``, of the
        Jacobian's entries (output entries by input entries of the slots ``wanted``), from
        one direction per colour of ``colors`` (a distance-2 column colouring of that
        pattern); the decompression happens inside the compiled code. With ``dense`` (a
        shape), the entries are scattered into a dense Jacobian of that shape instead."""
        key = ("compressed", wanted, colors.tobytes(), rows.tobytes(), cols.tobytes(), dense)
        fn = self._cache.get(key)
        if fn is not None:
            return fn
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        self._forward_values(w, params, act)
        m = low.sizes[o]
        c = int(colors.max()) + 1 if colors.size else 0
        nnz = rows.size
        if act[o] and nnz:
            C = w.const_array(colors.astype(np.intp))
            w.emit(1, f"_B = np.empty(({m}, {c}))")
            self._tangents(w, act, wanted, c, colors=C)
            if m == 1:
                w.emit(2, f"_B[0, _j] = _t{o}")
            else:
                w.emit(2, f"for _i in range({m}):")
                w.emit(3, f"_B[_i, _j] = _t{o}[_i]")
            R, Q = w.const_array(rows.astype(np.intp)), w.const_array(cols.astype(np.intp))
            if dense is not None:
                K = sum(low.sizes[s] for s in wanted)
                w.emit(1, f"_D = np.zeros(({m}, {K}))  # written at fixed entries")
                w.emit(1, f"for _e in range({nnz}):")
                w.emit(2, f"_D[{R}[_e], {Q}[_e]] = _B[{R}[_e], {C}[{Q}[_e]]]")
                w.emit(1, f"return _D.reshape({self._shape_literal(dense)})")
            else:
                w.emit(1, f"_data = np.empty({nnz})")
                w.emit(1, f"for _e in range({nnz}):")
                w.emit(2, f"_data[_e] = _B[{R}[_e], {C}[{Q}[_e]]]")
                w.emit(1, "return _data")
        elif dense is not None:
            w.emit(1, f"return np.zeros({self._shape_literal(dense)})")
        else:
            w.emit(1, f"return np.zeros({nnz})")
        fn = self._cache[key] = self._module("tape_compressed_jacobian", w, params)
        return fn

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
                found.append(f"({value}).reshape({self._shape_literal(shape)})")
            else:
                found.append(f"np.full({self._shape_literal(shape)}, {value})")
        return found

    def gradient(self, wanted: tuple[int, ...], aux: bool = False) -> Callable[..., Any]:
        """``gradient(*inputs)``: ``(value, (gradient per wanted slot, ...))`` for a scalar
        output; with ``aux``, ``(value, gradients, other outputs)``."""
        fn = self._cache.get(("gradient", wanted, aux))
        if fn is not None:
            return fn
        o = self._differentiated(single=not aux)
        low = self.low
        if low.sizes[o] != 1:
            raise LoweringError("a gradient needs a scalar output")
        w = _Writer(low, {})
        params: list[str] = []
        self._forward_values(w, params)
        act = self.active(wanted)
        if act[o]:
            self._adjoints(w, act)
        grads = self._slot_results(act, o, wanted)
        tail = f", {self._aux()}" if aux else ""
        w.emit(1, f"return _v{o}, ({''.join(g + ', ' for g in grads)}){tail}")
        fn = self._cache[("gradient", wanted, aux)] = self._module("tape_gradient", w, params)
        return fn

    def jvp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``jvp(*inputs, *directions)``: ``(output, tangent)``, the output's derivative
        along the given directions of the input slots ``wanted`` (one per slot, flat, a
        float for a slot of size one): forward mode with one tangent."""
        fn = self._cache.get(("jvp", wanted))
        if fn is not None:
            return fn
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        act = self.active(wanted)
        self._forward_values(w, params, act)
        seeds = [f"_s{s}" for s in wanted]
        params += seeds
        shape = low.shapes[o]
        if act[o]:
            self._tangents(w, act, wanted, 1, seeds=seeds)
            tangent = f"_t{o}" if low.sizes[o] == 1 else f"_t{o}.copy()"
            w.emit(2, f"_dy = {tangent}")
            if low.sizes[o] != 1:
                w.emit(1, f"_dy = _dy.reshape({self._shape_literal(shape)})")
            elif shape != ():
                w.emit(1, f"_dy = np.full({self._shape_literal(shape)}, _dy)")
        else:
            w.emit(1, "_dy = 0.0" if shape == () else
                   f"_dy = np.zeros({self._shape_literal(shape)})")
        w.emit(1, f"return {self._output(o)}, _dy")
        fn = self._cache[("jvp", wanted)] = self._module("tape_jvp", w, params)
        return fn

    def vjp(self, wanted: tuple[int, ...]) -> Callable[..., Any]:
        """``vjp(*inputs, cotangent)``: ``(output, (gradient per wanted slot, ...))``, the
        cotangent (flat; a float for an output of size one) pulled back through the
        program: reverse mode seeded with it."""
        fn = self._cache.get(("vjp", wanted))
        if fn is not None:
            return fn
        o = self._differentiated()
        low = self.low
        w = _Writer(low, {})
        params: list[str] = []
        self._forward_values(w, params)
        params.append("_c")
        act = self.active(wanted)
        scalar = low.sizes[o] == 1
        if act[o]:
            if not scalar:
                w.emit(1, "_seed = _c.copy()")
            self._adjoints(w, act)
        grads = self._slot_results(act, o, wanted, scale=" * _c" if scalar else "")
        w.emit(1, f"return {self._output(o)}, ({''.join(g + ', ' for g in grads)})")
        fn = self._cache[("vjp", wanted)] = self._module("tape_vjp", w, params)
        return fn

    def flat_gradient(self, wanted: int) -> Callable[..., Any]:
        """``flat_gradient(*inputs)``: the gradient of the scalar output with respect to
        the input slot ``wanted``, flat (a float for size one), nothing else: the form
        :mod:`dualad.njit` runs on dual numbers for Hessian-vector products."""
        fn = self._cache.get(("flat_gradient", wanted))
        if fn is not None:
            return fn
        o = self._differentiated()
        low = self.low
        if low.sizes[o] != 1:
            raise LoweringError("a gradient needs a scalar output")
        w = _Writer(low, {})
        params: list[str] = []
        self._forward_values(w, params)
        act = self.active((wanted,))
        if act[o] and act[wanted]:
            self._adjoints(w, act)
            w.emit(1, f"return _a{wanted}")
        else:
            w.emit(1, "return 0.0" if low.sizes[wanted] == 1 else
                   f"return np.zeros({low.sizes[wanted]})")
        fn = self._cache[("flat_gradient", wanted)] = self._module("tape_flat_gradient", w,
                                                                    params)
        return fn


class BatchLoop:
    """``loop(out, xs, *other_inputs)``: a compiled entry applied to each row of ``xs``,
    its result written into ``out[row]``; ``zeroed``: ``out`` must start as zeros (the
    loop writes only the structurally nonzero entries of a compressed dense Jacobian)."""

    def __init__(self, fn: Callable[..., Any], zeroed: bool, parallel: bool) -> None:
        self.fn, self.zeroed, self.parallel = fn, zeroed, parallel

    def __call__(self, out: np.ndarray, xs: np.ndarray, *others: Any) -> Any:
        if self.parallel:
            import numba

            return self.fn(numba.get_num_threads(), out, xs, *others)
        return self.fn(out, xs, *others)


def batch_kernel(kernel: Callable[..., Any], n_inputs: int, parallel: bool = False
                 ) -> BatchLoop:
    """The :class:`BatchLoop` of ``kernel`` (an entry made above, whose result is an
    array or a float, its first input the batched one); ``parallel`` spreads the rows
    over Numba's threads (``prange`` over one chunk of rows per thread).

    The kernel's body is written into the loop (:func:`_fused_batch_source`), its
    buffers allocated once per chunk instead of once per row; a kernel whose source does
    not have that form is called once per row instead."""
    bound: tuple = ()
    if isinstance(kernel, functools.partial):
        bound, kernel = kernel.args, kernel.func
    py_func = kernel.py_func
    module = importlib.import_module(py_func.__module__)
    fused = None
    try:
        fused = _fused_batch_source(Path(module.__file__).read_text(), py_func.__name__,
                                    parallel)
    except (OSError, UnicodeDecodeError, TypeError):
        pass
    if fused is None:
        arrays = [f"_A{i}" for i in range(len(bound))]
        others = [f"_x{i}" for i in range(1, n_inputs)]
        call = ", ".join(arrays + ["_xs[_b]"] + others)
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
        fused = (source, [], False, parallel)
    source, constants, zeroed, parallel = fused
    batch = import_kernel_module(source, subdirectory="tapes").tape_batch
    values = [getattr(module, name) for name in constants]
    if bound or values:  # the module's constant arrays as arguments: parallel code caches
        batch = functools.partial(batch, *values, *bound)
    return BatchLoop(batch, zeroed, parallel)


_EMPTY = re.compile(r"^    (\w+) = np\.empty\((\d+|\(\d+, \d+\))\)$")
_FIXED = re.compile(r"^    (\w+) = np\.zeros\((\(\d+, \d+\))\)  # written at fixed entries$")
_SIZE_CHECK = re.compile(r"^    if _x0\.shape\[0\] != (\d+):$")
_GLOBAL = re.compile(r"^(_G\d+) = np\.array\(")


def _fused_batch_source(source: str, name: str, parallel: bool
                        ) -> tuple[str, list[str], bool, bool] | None:
    """``(module source, constant arrays passed as arguments, out zeroed?, parallel)`` of
    a batch loop around the body of the kernel ``name`` in ``source``: the first input
    ``_x0`` is row ``_b`` of ``_xs``, the returned value is written into ``_out[_b]``, and
    the function-level ``np.empty`` buffers are allocated once per chunk of rows (every
    correct body writes such a buffer before reading it, so a row may start from the last
    row's contents). A dense result scattered at fixed entries is scattered into
    ``_out[_b]`` directly (``out`` zeroed by the caller). A body that raises (guards) runs
    serially. None when the source has another form."""
    lines = source.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(f"def {name}(")]
    if len(found) != 1 or not lines[found[0] - 1].startswith("@numba.njit("):
        return None
    at = found[0]
    params = lines[at][len(f"def {name}("):].rstrip("):").split(", ")
    body = lines[at + 1:]
    if "_x0" not in params or not body or not body[-1].startswith("    return ") or \
            any("return" in line for line in body[:-1]) or \
            any(line and not line.startswith("    ") for line in body):
        return None
    result = body[-1][len("    return "):]
    body = body[:-1]
    checks: list[str] = []
    if len(body) >= 2 and _SIZE_CHECK.match(body[0]):  # once, on the rows' width
        checks = [f"    if _xs.shape[1] != {_SIZE_CHECK.match(body[0]).group(1)}:",  # type: ignore[union-attr]
                  "        raise GuardFailed()"]
        body = body[2:]
    hoisted, kept, zeroed = [], [], False
    for line in body:
        fixed = _FIXED.match(line)
        if fixed and result.startswith(f"{fixed.group(1)}.reshape("):
            kept.append(f"    {fixed.group(1)} = _out[_b].reshape({fixed.group(2)})")
            result, zeroed = "", True
        elif _EMPTY.match(line):
            hoisted.append(line)
        else:
            kept.append(line)
    parallel = parallel and not any("raise" in line for line in kept)
    constants = [m.group(1) for m in map(_GLOBAL.match, lines[:at]) if m] if parallel else []
    head = lines[:at - 1]
    new_params = constants + ["_out" if p == "_x0" else p for p in params]
    new_params.insert(new_params.index("_out") + 1, "_xs")
    if parallel:  # numba.get_num_threads() inside would keep the code from the disk cache
        new_params.insert(new_params.index("_out"), "_threads")
    inner = ["    _x0 = _xs[_b]"] + kept + ([f"    _out[_b] = {result}"] if result else [])
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
    return text, constants, zeroed, parallel
