"""``ad.jit``: a function or a transform of it, recorded at its first call and compiled.

``ad.jit(f)``, ``ad.jit(ad.grad(f))``, ``ad.jit(ad.value_and_grad(f))``,
``ad.jit(ad.jacobian(f, mode=...))`` and ``ad.jit(ad.ode_jacobian(f))`` record ``f`` on a
:class:`~dualad.tape.Tape` at the first call, lower the recorded program
(:mod:`~dualad.tape.lowering`) and compile it with Numba
(:mod:`~dualad.tape.numba_backend`): values, forward-mode Jacobians (both ``mode`` values
are accepted; the compiled code is forward mode) and reverse-mode gradients. A call with
the recorded argument shapes goes straight to the compiled code.

The tape's semantics hold: values that ``f`` computes from anything but its arguments are
frozen at recording; new shapes (or new values of non-float arguments) record again; a
recording that depends on values (guards) runs through the tape, which records again when
a guard fails (:class:`~dualad.tape.TapeRetraceWarning`). What cannot be compiled (see the
README's "What compiles") runs the tape's Python replay of the same transform, with a
:class:`JitFallbackWarning` once, or raises :class:`JitError` with ``fallback="error"``.
Compiled results equal eager ones up to floating-point reassociation (partials summed in
another order) and the last bit of elementary functions (the C library's ``exp``, ``sin``,
... where numpy may use its own vectorised versions).

Example:
    >>> import numpy as np, dualad as ad
    >>> jac = ad.jit(ad.jacobian(lambda x: np.sin(x) * x[0]))
    >>> jac(np.array([1.0, 2.0])).round(4)
    array([[ 1.3818,  0.    ],
           [ 0.9093, -0.4161]])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import DualadError
from ..core.marks import transform_mark
from ..core.tracing import recording_paused
from ..derivatives.codegen import forget_compiled
from ..sparsity.detection import jacobian_sparsity
from .lowering import LoweringError, lower
from .numba_backend import NumbaProgram, batch_kernel
from .tape import Tape

__all__ = ["CompiledTape", "JitError", "JitFallbackWarning", "jit"]

FALLBACKS = ("warn", "error")
#: The transforms whose recorded program compiles, by the name of their mark.
COMPILED = ("value", "grad", "value_and_grad", "jacobian", "ode_jacobian", "sparse_jacobian")


class JitError(DualadError, TypeError):
    """``ad.jit(..., fallback="error")``: part of the function cannot be compiled."""


class JitFallbackWarning(UserWarning):
    """``ad.jit`` runs a function in Python (the tape's replay): it cannot compile it."""


class _Miss:
    pass


_MISS = _Miss()
_F8 = np.dtype(np.float64)


class _Entry:
    """The compiled code of one recording for one transform, and how to call it."""

    __slots__ = ("kernel", "finish", "program")

    def __init__(self, program: Any, kernel: Callable[..., Any],
                 finish: Callable[[Any], Any]) -> None:
        self.program, self.kernel, self.finish = program, kernel, finish


def _kernel_input(v: Any) -> Any:
    """A program input as the compiled code takes it: a float for one entry, else flat."""
    a = np.asarray(v, dtype=np.float64)
    if a.size == 1:
        return float(a.reshape(-1)[0])
    return np.ascontiguousarray(a).reshape(-1)  # one compiled layout: contiguous


class Jitted:
    """A compiled function: ``jitted(*args)``, ``jitted.batch(xs, *args)``."""

    def __init__(self, fn: Callable[..., Any], fallback: str = "warn",
                 tape: Tape | None = None,
                 coloring: Callable[[Any], np.ndarray] | None = None) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"jit: fallback={fallback!r}; use 'warn' or 'error'.")
        mark = transform_mark(fn)
        self.fn = fn
        self.fallback = fallback
        self.kind = mark.name if mark is not None else "value"
        self.f = mark.f if mark is not None else fn
        self.argnums = mark.argnums if mark is not None else None
        self.options = dict(mark.options) if mark is not None else {}
        if self.kind == "jacobian" and coloring is not None and "color" not in self.options \
                and isinstance(self.argnums, (int, np.integer)):
            self.options["color"] = coloring  # dense Jacobians may seed compressed
            self.options["detect"] = jacobian_sparsity(self.f, int(self.argnums))
        self.__name__ = getattr(fn, "__name__", "f")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self.tape = tape if tape is not None else Tape(self.f)
        self._coloring = coloring
        self._rebuild = mark.rebuild if mark is not None else None
        self._python: Callable[..., Any] | None = None
        self._entries: dict[int, _Entry | None] = {}
        self._why_not: str | None = None
        self._fast_entry: _Entry | None = None
        # a class of its own, whose __call__ is rewritten for the recorded argument shapes
        self.__class__ = type("Jitted", (Jitted,), {"__module__": Jitted.__module__})
        if self.kind not in COMPILED:
            self._why_not = f"ad.{self.kind} is not compiled yet"
        elif self.options.get("has_aux") or self.options.get("holomorphic"):
            self._why_not = "has_aux and holomorphic are not compiled"
        elif self.kind in ("jacobian", "sparse_jacobian") and \
                not isinstance(self.argnums, (int, np.integer)):
            self._why_not = "a tuple of argnums is not compiled"

    def __repr__(self) -> str:
        return f"<ad.jit of {self.kind} of {getattr(self.f, '__name__', 'f')}>"

    def __reduce__(self) -> tuple:
        """Pickled as the function it compiles (workers compile, or load, their own)."""
        return (Jitted, (self.fn, self.fallback, None, self._coloring))

    # the Python path ---------------------------------------------------------------------
    def python(self) -> Callable[..., Any]:
        """The same transform of the tape: what runs where compiled code cannot."""
        if self._python is None:
            if self.kind not in COMPILED:  # no compiled form: the transform itself
                self._python = self.fn
            elif self.kind == "value":
                self._python = self.tape
            elif self._rebuild is not None:
                # "auto" would first evaluate the tape with recording paused: forward
                overrides = {"mode": "forward"} if self.options.get("mode") == "auto" else {}
                self._python = self._rebuild(self.tape, **overrides)
            else:  # pragma: no cover - every mark has rebuild
                self._python = self.fn
        return self._python

    def _not_compiled(self, why: str) -> None:
        message = (f"ad.jit({self.__name__}): cannot compile {why}; it runs as the tape's "
                   f"Python replay instead.")
        if self.fallback == "error":
            raise JitError(message + " Pass fallback='warn' to accept that.")
        warnings.warn(message + " (reported once per function)", JitFallbackWarning,
                      stacklevel=4)

    # calls -------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        return self._call(args)

    def _call(self, args: tuple) -> Any:
        if self._why_not is not None:
            if self._why_not != "":
                why, self._why_not = self._why_not, ""
                self._not_compiled(why)
            return self.python()(*args)
        if recording_paused():  # a value read with recording off: no tape can see it
            return self.fn(*args)
        tape = self.tape
        key, leaves, inputs, ranges, traced, specs = tape._split(args)
        if traced:  # an outer transform traces through: the tape's dispatching replay
            return self.python()(*args)
        programs = tape._programs_for(args, key, inputs, ranges)
        program = programs[0]
        entry = self._entries.get(id(program), _MISS)
        if entry is _MISS:
            self._current_args = args
            entry = self._build(program, leaves, inputs, ranges, specs)
            self._entries[id(program)] = entry
        if entry is None:
            return self.python()(*args)
        values = [_kernel_input(leaves[i]) for i in inputs]
        result = entry.finish(entry.kernel(*values))
        if entry is not self._fast_entry:
            self._install_fast(entry, args, inputs)
        return result

    def _install_fast(self, entry: _Entry, args: tuple, inputs: list[int]) -> None:
        """A ``__call__`` for arguments shaped like ``args``: checks written out, then the
        compiled code (every other call takes the general path)."""
        if len(inputs) != len(args):
            return
        names = [f"a{i}" for i in range(len(args))]
        checks, passed = [], []
        for name, a in zip(names, args):
            if type(a) is float or type(a) is np.float64:
                checks.append(f"type({name}) in SCALARS")
                passed.append(name)
            elif type(a) is np.ndarray and a.dtype == _F8:
                checks.append(f"type({name}) is ndarray and {name}.shape == {a.shape!r} and "
                              f"{name}.dtype is F8" + (f" and {name}.strides == (8,)"
                                                       if a.ndim == 1 and a.size > 1 else ""))
                if a.size == 1:
                    passed.append(f"{name}.item()")
                elif a.ndim == 1:
                    passed.append(name)
                else:
                    passed.append(f"ascontiguous({name}).reshape(-1)")
            else:
                return
        call = f"K({', '.join(passed)})"
        finish = {_same: call, _gradient: f"{call}[1][0]",
                  _square: f"FINISH({call})"}.get(entry.finish)
        if finish is None:
            finish = f"FINISH({call})"
        params = ", ".join(f"{n}=MISS" for n in names)
        source = (f"def __call__(self, {params}, *rest):\n"
                  f"    if {' and '.join(checks)} and not rest:\n"
                  f"        return {finish}\n"
                  f"    return self._call(tuple(a for a in ({', '.join(names)},) + rest "
                  f"if a is not MISS))\n")
        namespace = {"K": entry.kernel, "FINISH": entry.finish, "ndarray": np.ndarray,
                     "SCALARS": frozenset((float, np.float64)), "F8": _F8,
                     "ascontiguous": np.ascontiguousarray,
                     "MISS": _MISS}
        exec(compile(source, f"<ad.jit call of {self.__name__}>", "exec"), namespace)  # noqa: S102
        self._fast_entry = entry
        type(self).__call__ = namespace["__call__"]

    def _wanted(self, program: Any, ranges: list[tuple[int, int]], specs: list[Any],
                argnum: int) -> tuple[int, ...]:
        lo, hi = ranges[argnum]
        if hi - lo != 1 or specs[argnum] is not None:
            raise LoweringError("a differentiated argument that is a tree")
        s = program.slot_of_leaf.get(lo)
        if s is None:
            raise LoweringError(f"argument {argnum} is not a float array or number")
        return (s,)

    def _build(self, program: Any, leaves: list[Any], inputs: list[int],
               ranges: list[tuple[int, int]], specs: list[Any]) -> _Entry | None:
        try:
            values = [np.asarray(leaves[i], dtype=np.float64) for i in inputs]
            code = NumbaProgram(lower(program, values))
            kind = self.kind
            if kind == "value":
                kernel, finish = code.value(), _same
            elif kind in ("grad", "value_and_grad"):
                single = isinstance(self.argnums, (int, np.integer))
                nums = [self.argnums] if single else list(self.argnums)
                wanted = sum((self._wanted(program, ranges, specs, int(a) % len(ranges))
                              for a in nums), ())
                kernel = code.gradient(wanted)
                if single:
                    finish = _gradient if kind == "grad" else _value_and_gradient
                else:
                    finish = _gradients if kind == "grad" else _value_and_gradients
            elif kind == "sparse_jacobian":
                argnum = int(self.argnums) % len(ranges)
                wanted = self._wanted(program, ranges, specs, argnum)
                kernel, finish = self._sparse(code, wanted)
            else:
                argnum = 1 if kind == "ode_jacobian" else int(self.argnums) % len(ranges)
                wanted = self._wanted(program, ranges, specs, argnum)
                kernel = None
                if "color" in self.options:  # structurally sparse: compressed seeds
                    kernel = self._compressed_dense(code, wanted)
                if kernel is None:
                    kernel = code.jacobian(wanted)
                finish = _square if kind == "ode_jacobian" else _same
            _first_call(kernel, [_kernel_input(v) for v in values])
        except LoweringError as exc:
            self._not_compiled(str(exc))
            return None
        return _Entry(program, kernel, finish)

    def _pattern(self, code: NumbaProgram, wanted: tuple[int, ...]) -> Any:
        """The boolean CSR pattern of the Jacobian (given, or detected at this call's
        arguments; a recording without guards has the same pattern everywhere), its
        column colouring, and its row and column indices."""
        import scipy.sparse

        pattern = self.options.get("sparsity")
        if pattern is None:
            pattern = self.options["detect"](*self._current_args)
        csr = scipy.sparse.csr_array(pattern, dtype=bool)
        csr.sum_duplicates()
        csr.sort_indices()
        colors = np.asarray(self.options["color"](csr), dtype=np.intp)
        rows = np.repeat(np.arange(csr.shape[0], dtype=np.intp), np.diff(csr.indptr))
        return csr, colors, rows, csr.indices.astype(np.intp)

    def _compressed_dense(self, code: NumbaProgram, wanted: tuple[int, ...]
                          ) -> Callable[..., Any] | None:
        """A dense Jacobian from compressed seeds, when the colouring needs clearly fewer
        directions than there are inputs (measured: the tangent loop costs in proportion to
        the directions; the scatter into zeros is cheap beside it)."""
        low = code.low
        K = sum(low.sizes[s] for s in wanted)
        csr, colors, rows, cols = self._pattern(code, wanted)
        if csr.shape != (low.sizes[code.out], K):
            return None
        if colors.size and (int(colors.max()) + 1) * 4 > K * 3:
            return None
        shape = low.shapes[code.out] + (low.shapes[wanted[0]] if len(wanted) == 1 else (K,))
        return code.compressed_jacobian(wanted, colors, rows, cols, dense=shape)

    def _sparse(self, code: NumbaProgram, wanted: tuple[int, ...]
                ) -> tuple[Callable[..., Any], Callable[[Any], Any]]:
        """The compressed kernel of ``sparse_jacobian`` and the CSR result around its data:
        the pattern (given, or detected at this call), its column colouring (one direction
        per colour) and the decompression are fixed at compile time."""
        import scipy.sparse

        csr, colors, rows, cols = self._pattern(code, wanted)
        m, n = csr.shape
        kernel = code.compressed_jacobian(wanted, colors, rows, cols)
        indices, indptr = csr.indices.copy(), csr.indptr.copy()

        def finish(data: np.ndarray) -> Any:
            return scipy.sparse.csr_array((data, indices, indptr), shape=(m, n))

        return kernel, finish

    # batches -----------------------------------------------------------------------------
    def batch(self, xs: Any, *args: Any) -> Any:
        """The function applied to each row of ``xs`` (its leading axis) with the same
        ``args``; results stacked (tuples of results: a tuple of stacks). Compiled entries
        that return one array loop inside Numba (over threads when Numba has several)."""
        xs = np.asarray(xs)
        if xs.ndim < 1:
            raise ValueError(f"ad.jit({self.__name__}).batch: xs must have a leading batch "
                             f"axis, got shape {xs.shape}.")
        if len(xs) == 0:
            return np.empty((0,))
        first = self._call((xs[0],) + args)
        entry = self._fast_entry
        if (entry is not None and entry.finish in (_same, _square) and xs.dtype == _F8
                and all(type(a) in (float, np.float64) or (type(a) is np.ndarray and
                        a.dtype == _F8) for a in args)
                and len(entry.program.input_leaves) == 1 + len(args)
                and isinstance(first, np.ndarray)):
            loop = self._batch_loop(entry)
            rows = np.ascontiguousarray(xs.reshape(len(xs), -1))
            if rows.shape[1] == 1:
                rows = rows.reshape(-1)
            out = loop(rows, *[_kernel_input(a) for a in args])
            return out.reshape((len(xs),) + first.shape)
        results = [first] + [self._call((x,) + args) for x in xs[1:]]
        if isinstance(first, tuple):
            return tuple(np.stack(parts) for parts in zip(*results))
        return np.stack(results)

    def _batch_loop(self, entry: _Entry) -> Callable[..., Any]:
        loops = self.__dict__.setdefault("_batch_loops", {})
        found = loops.get(id(entry))
        if found is None:
            import numba

            parallel = numba.config.NUMBA_NUM_THREADS > 1 and numba.get_num_threads() > 1
            found = loops[id(entry)] = batch_kernel(entry.kernel,
                                                    len(entry.program.input_leaves),
                                                    parallel)
        return found


def _first_call(kernel: Callable[..., Any], values: list[Any]) -> None:
    """Compile (or load from the disk cache) now; a corrupt cache entry is rebuilt."""
    try:
        kernel(*values)
    except Exception:  # noqa: BLE001 - unreadable cache files: compile afresh
        forget_compiled(kernel)
        kernel(*values)


def _same(r: Any) -> Any:
    return r


def _gradient(r: Any) -> Any:
    return r[1][0]


def _value_and_gradient(r: Any) -> Any:
    return r[0], r[1][0]


def _gradients(r: Any) -> Any:
    return tuple(r[1])


def _value_and_gradients(r: Any) -> Any:
    return r[0], tuple(r[1])


def _square(r: Any) -> Any:
    return r if r.ndim == 2 else r.reshape(r.size // max(r.shape[-1], 1), -1)


class CompiledTape:
    """A :class:`~dualad.tape.Tape` compiled: ``__call__``, ``.grad``, ``.value_and_grad``
    compiled per ``argnums``; ``.jvp``, ``.vjp`` and ``.hvp`` replay the tape."""

    def __init__(self, tape: Tape, fallback: str = "warn") -> None:
        self.tape = tape
        self.fallback = fallback
        self._value = Jitted(tape.f, fallback, tape=tape)
        self._grads: dict[Any, Jitted] = {}

    def __call__(self, *args: Any) -> Any:
        return self._value(*args)

    def _jitted(self, kind: str, argnums: Any) -> Jitted:
        key = (kind, argnums)
        found = self._grads.get(key)
        if found is None:
            from ..reverse_mode.transforms import grad, value_and_grad

            transform = grad if kind == "grad" else value_and_grad
            found = self._grads[key] = Jitted(transform(self.tape.f, argnums), self.fallback,
                                              tape=self.tape)
        return found

    def grad(self, *args: Any, argnums: Any = 0) -> Any:
        return self._jitted("grad", argnums)(*args)

    def value_and_grad(self, *args: Any, argnums: Any = 0) -> Any:
        return self._jitted("value_and_grad", argnums)(*args)

    def jvp(self, args: Any, tangents: Any) -> Any:
        return self.tape.jvp(args, tangents)

    def vjp(self, *args: Any) -> Any:
        return self.tape.vjp(*args)

    def hvp(self, args: Any, v: Any, argnums: Any = 0) -> Any:
        return self.tape.hvp(args, v, argnums)


def jit(fn: Callable[..., Any], *, fallback: str = "warn",
        coloring: Callable[[Any], np.ndarray] | None = None) -> Jitted:
    """``fn`` (a function or a transform of one) recorded at its first call and compiled.

    ``coloring(pattern) -> colours`` (a distance-2 column colouring, ``dualad.jit`` passes
    :func:`dualad.color_columns`) lets a dense ``ad.jacobian`` whose pattern is sparse seed
    one direction per colour.

    Example:
        >>> import numpy as np, dualad as ad
        >>> g = ad.jit(ad.grad(lambda x: np.sum(np.sin(x) * x)))
        >>> g(np.array([0.0, 1.0])).round(4)
        array([0.    , 1.3818])
    """
    if isinstance(fn, Jitted):
        return fn
    return Jitted(fn, fallback, coloring=coloring)
