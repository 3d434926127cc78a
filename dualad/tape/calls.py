"""Operations with no compiled form, run as themselves between compiled parts.

A :class:`~dualad.tape.lowering.Call` (an FFT round trip, ``np.linalg.solve``,
``np.prod``, a scipy function, ...) is a numpy call in the Python glue of a generated
entry (:mod:`dualad.tape.glue`): :class:`GlueCall` takes the flat float64 values the
compiled parts keep, gives the call its recorded arguments back (shapes, constants,
keywords), and returns a flat float64 result. Its tangents come from eager forward mode
(the call on dual numbers carrying the directions), its adjoints from its gradient rule,
so a program with one such call still compiles everything around it, with eager mode's
numbers for the call.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> from dualad.tape.lowering import Call, lower
    >>> x = np.array([3.0, 1.0, 2.0])
    >>> low = lower(record(lambda x: np.prod(x) * x, x).program, [x])
    >>> call = next(GlueCall(i, low.shapes) for i in low.instructions if isinstance(i, Call))
    >>> call(x)
    6.0
    >>> call.tangents(1, (x,), (np.ones((3, 1)),)).ravel()  # 1*2 + 3*2 + 3*1
    array([11.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.tracing import apply_operator
from ..forward_mode.dual import Tag, new_dual, partials_at
from ..reverse_mode.backward import _NEEDS
from .lowering import Call

__all__ = ["GlueCall"]


class GlueCall:
    """The call of one :class:`~dualad.tape.lowering.Call` on flat values (see the module
    doc): ``call(*values)``, ``call.tangents(K, values, tangents)`` and
    ``call.adjoints(g, out, values, needed)``, with ``values`` in the order of
    ``Call.reads`` (a number for a one-entry value)."""

    def __init__(self, ins: Call, shapes: list[tuple[int, ...]]) -> None:
        e = ins.operation
        self.op = e.op
        self.fn = e.fn
        self.gfn = e.gfn
        self.template = list(e.template)
        self.kw = dict(e.kw)
        self.shapes = [shapes[s] for s in ins.reads]
        self.dtypes = [np.dtype(d) for d in ins.dtypes] or [np.dtype(np.float64)] * len(
            ins.reads)
        self.out_shape = shapes[ins.out]
        self.out_size = int(np.prod(self.out_shape, dtype=np.int64))
        #: complex values (read and written only by calls) stay complex between them
        self.out_dtype = np.dtype(np.complex128 if ins.complex_out else np.float64)
        self.complex_reads = [d.kind == "c" for d in self.dtypes]
        where = {s: i for i, s in enumerate(ins.reads)}
        #: (position, index in a sequence or None, which read) of every computed argument
        self.places = [(pos, None, where[s]) for pos, s in e.refs]
        self.seqs = [(pos, kind) for pos, kind, _ in e.seqs]
        for pos, _kind, items in e.seqs:
            self.places += [(pos, j, where[s]) for j, s in items]
        self.__name__ = f"call of {e.op!r}"

    def _arguments(self, values: tuple) -> list[Any]:
        args = self.template.copy()
        seqs = {pos: list(args[pos]) for pos, _ in self.seqs}
        for pos, j, i in self.places:
            if j is None:
                args[pos] = values[i]
            else:
                seqs[pos][j] = values[i]
        for pos, kind in self.seqs:
            args[pos] = kind(seqs[pos])
        return args

    def _shaped(self, values: tuple) -> tuple:
        return tuple(np.reshape(np.asarray(v).astype(dt, copy=False), sh)
                     for v, sh, dt in zip(values, self.shapes, self.dtypes))

    def _flat(self, out: Any) -> Any:
        a = np.asarray(out)
        if a.size != self.out_size:
            raise ValueError(f"{self.__name__} gave {a.size} values, recorded {self.out_size}")
        if self.out_size == 1 and self.out_dtype.kind == "f":
            return float(a.reshape(()))
        return np.ascontiguousarray(a, dtype=self.out_dtype).reshape(-1)

    def __call__(self, *values: Any) -> Any:
        return self._flat(self.fn(*self._arguments(self._shaped(values)), **self.kw))

    def tangents(self, K: int, values: tuple, tangents: tuple) -> np.ndarray:
        """The ``(size, K)`` tangent rows of the result, from those of the reads (None: a
        read without derivative)."""
        tag = Tag()
        duals = tuple(v if t is None else  # complex tangents too (a complex value's)
                      new_dual(v, np.reshape(np.asarray(t), v.shape + (K,)), tag)
                      for v, t in zip(self._shaped(values), tangents))
        out = apply_operator(self.op, tuple(self._arguments(duals)), self.kw)
        partials = partials_at(out, tag)
        if partials is None:
            return np.zeros((self.out_size, K), dtype=self.out_dtype)
        if self.out_dtype.kind == "f":
            partials = np.real(partials)
        return np.ascontiguousarray(partials, dtype=self.out_dtype).reshape(self.out_size, K)

    def adjoints(self, g: Any, out: Any, values: tuple, needed: tuple) -> list[Any]:
        """The adjoints of the reads (flat, a number for a one-entry read; None where not
        ``needed``) from ``g``, the result's."""
        if self.gfn is None:
            raise TypeError(f"{self.__name__} has no gradient rule")
        needs = [False] * len(self.template)
        for pos, _j, i in self.places:
            if needed[i]:
                needs[pos] = True
        shaped = self._shaped(values)
        _NEEDS.value = needs
        try:
            r = self.gfn(np.reshape(np.asarray(g, dtype=self.out_dtype), self.out_shape),
                         np.reshape(np.asarray(out, dtype=self.out_dtype), self.out_shape),
                         *self._arguments(shaped), **self.kw)
        finally:
            _NEEDS.value = None
        found: list[Any] = [None] * len(shaped)
        for pos, j, i in self.places:
            if not needed[i]:
                continue
            piece = r[pos] if j is None else (r[pos][j] if r[pos] is not None else None)
            if piece is None:
                continue
            piece = np.asarray(piece)
            if not self.complex_reads[i]:  # a real argument's gradient is real
                piece = np.real(piece)
            piece = np.broadcast_to(piece, shaped[i].shape)
            found[i] = piece if found[i] is None else found[i] + piece
        return [None if f is None else
                np.ascontiguousarray(f, dtype=np.complex128).reshape(-1) if c else
                float(np.reshape(f, ())) if f.size == 1 else
                np.ascontiguousarray(f, dtype=np.float64).reshape(-1)
                for f, c in zip(found, self.complex_reads)]
