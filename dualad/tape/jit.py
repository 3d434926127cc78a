"""``ad.jit``: a function or a transform of it, recorded at its first call and compiled.

``ad.jit(f)``, ``ad.jit(ad.grad(f))``, ``ad.jit(ad.value_and_grad(f))``,
``ad.jit(ad.jacobian(f, mode=...))``, ``ad.jit(ad.ode_jacobian(f))`` and
``ad.jit(ad.sparse_jacobian(f))`` (with ``has_aux`` and tuple ``argnums`` where they take
them) record ``f`` on a :class:`~dualad.tape.Tape` at the first call, lower the recorded
program (:mod:`~dualad.tape.lowering`) and compile it with Numba
(:mod:`~dualad.tape.numba_backend`): values (any tree of outputs), forward-mode Jacobians
(both ``mode`` values are accepted; the compiled code is forward mode, except the Jacobian
of one output entry, one reverse pass as eager ``mode="auto"`` chooses, unless
``mode="forward"``) and reverse-mode gradients. A function that calls ``ad.jvp`` / ``ad.vjp`` / ``ad.hvp`` records what they
compute and compiles like any other. A call with the recorded argument types goes
straight to the compiled code.

The tape's semantics hold: values that ``f`` computes from anything but its arguments are
frozen at recording; new shapes (or new values of non-float arguments) record again; the
guards of a recording that depends on values are checked in the compiled code, which
raises :class:`~dualad.tape.program.GuardFailed` where one fails: the other recordings are
tried, else ``f`` records again (:class:`~dualad.tape.TapeRetraceWarning`) and the new
recording compiles. What cannot be compiled (see the README's "What compiles") runs the
tape's Python replay of the same transform, with a :class:`JitFallbackWarning` once, or
raises :class:`JitError` with ``fallback="error"``. Compiled results equal eager ones up
to floating-point reassociation (partials summed in another order) and the last bit of
elementary functions (the C library's ``exp``, ``sin``, ... where numpy may use its own
vectorised versions).

Example:
    >>> import numpy as np, dualad as ad
    >>> jac = ad.jit(ad.jacobian(lambda x: np.sin(x) * x[0]))
    >>> jac(np.array([1.0, 2.0])).round(4)
    array([[ 1.3818,  0.    ],
           [ 0.9093, -0.4161]])
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.arguments import as_dtype, check_real_output, derivative_dtype, normalize_argnums
from ..core.errors import DualadError, MissingRuleError
from ..core.marks import transform_mark
from ..core.tracing import recording_paused
from ..derivatives.codegen import forget_compiled
from ..sparsity.detection import jacobian_sparsity
from .built_cache import entry_key, program_digest
from .interpreter import InterpretedProgram, interpret
from .lowering import Call, LoweringError, lower
from .numba_backend import BatchLoop, NumbaProgram, batch_kernel
from .pattern_cache import Pattern, load_pattern, store_pattern
from .program import GuardFailed, NanTangents, fresh
from .recorded_tape import RecordedTape, check_input_guards

__all__ = ["JitError", "JitFallbackWarning", "Jitted", "jit"]

FALLBACKS = ("warn", "error")
#: The transforms whose recorded program compiles, by the name of their mark.
COMPILED = ("value", "grad", "value_and_grad", "jacobian", "ode_jacobian", "sparse_jacobian")
#: A dense Jacobian over fewer inputs runs all its directions: compressed seeds could save
#: one or two directions of a loop that already costs nanoseconds, while detecting the
#: pattern and colouring it costs a first call milliseconds (and scipy.sparse's import).
MIN_COMPRESSED = 8



#: Bumped when what a kept pattern means changes.
_PATTERN_VERSION = 1


def _qualified(f: Any) -> str:
    return f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__name__)}"


def _calls(code: NumbaProgram) -> list[Call]:
    """The operations of ``code`` run as themselves (numpy calls in the glue)."""
    return [i for i in code.low.instructions if isinstance(i, Call)]


def _rows(pattern: Pattern) -> np.ndarray:
    """The row index of each entry of ``pattern``."""
    return np.repeat(np.arange(pattern.shape[0], dtype=np.intp), np.diff(pattern.indptr))


class JitError(DualadError, TypeError):
    """``ad.jit(..., fallback="error")``: part of the function cannot be compiled."""


class JitFallbackWarning(UserWarning):
    """``ad.jit`` runs a function in Python (the tape's replay): it cannot compile it."""


class _Miss:
    pass


_MISS = _Miss()
_NOT_HERE = _Miss()  # a recording whose guards fail at the arguments it was built for
_REPLAY = _Miss()  # a recording whose compiled guards fail where it was recorded
_PENDING = _Miss()  # a recording compiling in the background: the replay serves meanwhile
_LATER = _Miss()  # a recording whose build would wait for the interpreter's first compile
_F8 = np.dtype(np.float64)
#: The transforms whose derivatives come back in a float32 argument's dtype, as eager.
_CAST = ("grad", "value_and_grad", "jacobian")
#: The transforms compiled as forward mode whatever their ``mode``.
_FORWARD = ("jacobian", "ode_jacobian", "sparse_jacobian")


class _Entry:
    """The compiled code of one recording for one transform, and how to call it."""

    __slots__ = ("kernel", "finish", "program", "guarded", "fast")

    def __init__(self, program: Any, kernel: Callable[..., Any],
                 finish: Callable[[Any], Any], guarded: bool = False) -> None:
        self.program, self.kernel, self.finish = program, kernel, finish
        self.guarded = guarded  # the kernel may raise GuardFailed
        self.fast: Callable[..., Any] | None = None  # its __call__ (_install_fast)


def _kernel_input(v: Any) -> Any:
    """A program input as the compiled code takes it: a float for one entry, else flat."""
    a = np.asarray(v, dtype=np.float64)
    if a.size == 1:
        return float(a.reshape(-1)[0])
    if not a.flags.writeable:  # one compiled type: writeable, contiguous
        a = a.copy()
    return np.ascontiguousarray(a).reshape(-1)


class Jitted:
    """A compiled function: ``jitted(*args)``, ``jitted.batch(xs, *args)``."""

    def __init__(self, fn: Callable[..., Any], fallback: str = "warn",
                 tape: RecordedTape | None = None,
                 coloring: Callable[[Any], np.ndarray] | None = None,
                 background: bool = False, defer: bool | None = None) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(f"jit: fallback={fallback!r}; use 'warn' or 'error'.")
        mark = self._mark = transform_mark(fn)
        self._keywords: dict[tuple[str, ...], Jitted | None] = {}  # see _with_keywords
        #: ``ad.hessian(f)``'s argnums: the transform is recorded and compiled as a whole (a
        #: value), its blocks cast to the dtypes eager mode gives them
        self._hessian = None
        if mark is not None and mark.name == "hessian":
            self._hessian, mark = mark.argnums, None
        self.fn = fn
        self.fallback = fallback
        self.background = bool(background)
        # the interpreter's first compile (seconds) in the background while the replay
        # serves: with fallback="warn", unless told otherwise
        self._defer = fallback == "warn" if defer is None else bool(defer)
        self._build_lock = threading.Lock()  # one build at a time (the sparsity detection
        self._compiling: dict[int, tuple[threading.Thread, list[Any]]] = {}  # reads args)
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
        self.tape = tape if tape is not None else RecordedTape(self.f)
        if tape is None and self.kind == "value" and self._hessian is None:
            # eager f writes into its array arguments, and may return a string
            self.tape._values_of = f"ad.jit({self.__name__})"
        self._coloring = coloring
        self._rebuild = mark.rebuild if mark is not None else None
        self._python: Callable[..., Any] | None = None
        self._forward_python: Callable[..., Any] | None = None
        self._argnums_checked: set[int] = set()  # argument counts argnums fits
        self._entries: dict[int, Any] = {}  # _Entry, None (replays) or _REPLAY
        self._why_not: str | None = None
        self._fast_entry: _Entry | None = None
        # a class of its own, whose __call__ is rewritten for the recorded argument shapes
        self.__class__ = type("Jitted", (Jitted,), {"__module__": Jitted.__module__})
        if self.kind not in COMPILED:
            self._why_not = f"ad.{self.kind} is not compiled yet"
        elif self.options.get("holomorphic"):
            self._why_not = "holomorphic derivatives (complex values) are not compiled"
        elif self.kind == "sparse_jacobian" and \
                not isinstance(self.argnums, (int, np.integer)):
            self._why_not = "a tuple of argnums of a sparse Jacobian is not compiled"

    def __repr__(self) -> str:
        return f"<ad.jit of {self.kind} of {getattr(self.f, '__name__', 'f')}>"

    def __reduce__(self) -> tuple:
        """Pickled as the function it compiles (workers compile, or load, their own)."""
        return (Jitted, (self.fn, self.fallback, None, self._coloring, self.background))

    # the Python path ---------------------------------------------------------------------
    def python(self) -> Callable[..., Any]:
        """The same transform of the tape: what runs where compiled code cannot."""
        if self._python is None:
            if self.kind not in COMPILED:  # no compiled form: the transform itself
                self._python = self.fn
            elif self.kind == "value":
                self._python = self.tape
            elif self._rebuild is not None:  # mode="auto" chooses as eager mode does (at
                self._python = self._rebuild(self.tape)  # a NaN, the modes differ)
            else:  # pragma: no cover - every mark has rebuild
                self._python = self.fn
        return self._python

    def forward_python(self) -> Callable[..., Any]:
        """The transform of the tape in forward mode, as the compiled code computes it
        whatever the ``mode``: it answers the calls whose compiled tangents hold a NaN
        (eager forward mode is NaN-safe there; see NanTangents)."""
        if self._forward_python is None:
            self._forward_python = self._rebuild(self.tape, mode="forward") if \
                self.kind in _FORWARD and self._rebuild is not None else self.python()
        return self._forward_python

    def _not_compiled(self, why: str, instead: str = "as the tape's Python replay") -> None:
        message = f"ad.jit({self.__name__}): cannot compile {why}; it runs {instead} instead."
        if self.fallback == "error":
            raise JitError(message + " Pass fallback='warn' to accept that.")
        warnings.warn(message + " (reported once per function)", JitFallbackWarning,
                      stacklevel=4)

    # calls -------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            return self._with_keywords(args, kwargs)
        return self._call(args)

    def _with_keywords(self, args: tuple, kwargs: dict) -> Any:
        """A call with keyword arguments, as eager mode makes it (``f(*args, **kwargs)``,
        the keywords not differentiated): the keyword values are one more argument of the
        recording, a tuple in the order of their sorted names (one compiled function per
        set of names). Like positional ones, float values (arrays, numbers) are inputs of
        the compiled code and other values constants of the recording (a new value
        records again), as with ``jax.jit`` without ``static_argnames``."""
        names = tuple(sorted(kwargs))
        mark = self._mark
        if mark is not None and mark.argnums is not None:  # eager mode's refusals first
            normalize_argnums(mark.argnums, len(args),
                              f"{mark.name}({getattr(mark.f, '__name__', 'f')})")
        try:
            inner = self._keywords[names]
        except KeyError:
            inner = self._keywords[names] = self._keyword_jit(names)
        values = tuple(kwargs[n] for n in names)
        if inner is None:  # negative argnums: they would count the keywords' tuple
            return self.fn(*args, **kwargs)
        return inner(*args, values)

    def _keyword_jit(self, names: tuple[str, ...]) -> Jitted | None:
        """The compiled function taking the keyword values ``names`` as a last argument."""
        mark = self._mark
        f = mark.f if mark is not None else self.fn

        def with_keywords(*args: Any) -> Any:
            return f(*args[:-1], **dict(zip(names, args[-1])))

        with_keywords.__name__ = self.__name__
        if mark is None:
            fn = with_keywords
        else:
            nums = mark.argnums
            flat = [nums] if isinstance(nums, (int, np.integer)) else list(nums or ())
            if any(int(a) < 0 for a in flat):
                self._not_compiled(f"a call with keyword arguments ({', '.join(names)}) "
                                   f"when argnums counts from the end", "eagerly")
                return None
            fn = mark.rebuild(with_keywords)
        return Jitted(fn, self.fallback, coloring=self._coloring, background=self.background,
                      defer=self._defer)

    def _call(self, args: tuple) -> Any:
        if self._hessian is None:
            return self._run(args)
        return self._as_hessian_dtypes(self._run(args), args)

    def _run(self, args: tuple) -> Any:
        if self._why_not is not None:
            if self._why_not != "":
                why, self._why_not = self._why_not, ""
                self._not_compiled(why)
            return self.python()(*args)
        if recording_paused():  # a value read with recording off: no tape can see it
            return self.fn(*args)
        tape = self.tape
        key, leaves, inputs, ranges, traced, specs = tape._split(args)
        if traced or _complex(key):  # an outer transform traces through, or complex
            return self.python()(*args)  # values: the tape's replay (compiled: float64)
        if self.argnums is not None and len(args) not in self._argnums_checked:
            normalize_argnums(self.argnums, len(args), f"{self.kind}({self.__name__})")
            self._argnums_checked.add(len(args))  # a clear error, as eager mode's
        try:
            programs = tape._programs_for(args, key, inputs, ranges)
        except MissingRuleError as exc:  # no tape of it: the function itself, eagerly
            if self._entries:
                raise
            self._why_not, self._python = "", self.fn
            cause = str(exc).splitlines()[0].split(" Add one")[0].rstrip(".")
            self._not_compiled(f"a recording of it ({cause})", "eagerly")
            return self.fn(*args)
        values = [_kernel_input(leaves[i]) for i in inputs]
        tried: list[Any] = []
        recorded = replay = False
        while True:  # the first recording whose guards hold here; else record again
            for program in programs:
                entry = self._entries.get(id(program), _MISS)
                if entry is _REPLAY:
                    replay = True
                    continue
                if entry is _MISS and self.background:
                    self._compile_in_background(program, args, leaves, inputs, ranges, specs)
                    entry = _PENDING
                if entry is _PENDING:
                    entry = self._compiled_in_background(program)
                    if entry is _PENDING:  # the replay serves until the code is ready
                        return self.python()(*args)
                    if entry is _NOT_HERE:
                        continue
                if entry is _MISS:
                    with self._build_lock:
                        self._current_args = args
                        entry = self._build(program, leaves, inputs, ranges, specs)
                    if entry is _LATER:  # the interpreter compiles for the first time
                        self._compile_in_background(program, args, leaves, inputs, ranges,
                                                    specs)
                        return self.python()(*args)
                    if entry is _NOT_HERE:
                        continue
                    self._entries[id(program)] = entry
                if entry is None:
                    return self.python()(*args)
                try:
                    result = entry.finish(entry.kernel(*values))
                    if self.kind in _CAST:  # float32 arguments: float32 derivatives
                        result = self._as_argument_dtypes(result, args)
                except NanTangents:  # eager forward mode may have a number there
                    return self.forward_python()(*args)
                except GuardFailed:
                    if recorded:  # a guard read in the last bit otherwise than numpy
                        self._entries[id(program)] = _REPLAY  # did (C library vs numpy's
                        return self.python()(*args)  # own): this recording replays
                    continue
                if entry is not self._fast_entry:
                    self._install_fast(entry, args, inputs)
                return result
            if replay:  # the replay checks those recordings' guards as numpy reads them
                return self.python()(*args)
            tried.extend(programs)
            programs = tape._rerecord(args, key, inputs, tried)
            recorded = True

    def _as_argument_dtypes(self, result: Any, args: tuple) -> Any:
        """The derivatives in ``result`` in the dtypes eager mode hands them back in: a
        float32 (float16, ...) argument's as float32; float64 otherwise."""
        single = isinstance(self.argnums, (int, np.integer))
        nums = [self.argnums] if single else list(self.argnums)
        dtypes = [derivative_dtype(args[int(a)]) for a in nums]
        if all(d is None for d in dtypes):
            return result

        def cast(ds: Any) -> Any:
            if single:
                return as_dtype(ds, dtypes[0])
            return tuple(as_dtype(d, t) for d, t in zip(ds, dtypes))

        aux = bool(self.options.get("has_aux"))
        if self.kind == "value_and_grad":
            return result[0], cast(result[1])
        if aux:  # grad, jacobian: (derivatives, aux)
            return cast(result[0]), result[1]
        return cast(result)

    def _as_hessian_dtypes(self, result: Any, args: tuple) -> Any:
        """An ``ad.hessian``'s blocks in eager mode's dtypes: block ``[i][j]`` in the dtype
        of argument ``argnums[i]`` (a float32 argument's: float32; float64 otherwise)."""
        argnums = self._hessian
        try:
            nums, single = normalize_argnums(argnums, len(args), f"hessian({self.__name__})")
        except (TypeError, ValueError):  # refused eagerly, as the transform refuses it
            return result
        dtypes = [derivative_dtype(args[a]) for a in nums]
        if single:
            return as_dtype(_array(result), dtypes[0])
        return tuple(tuple(as_dtype(_array(h), t) for h in row)
                     for row, t in zip(result, dtypes))

    def _install_fast(self, entry: _Entry, args: tuple, inputs: list[int]) -> None:
        """A ``__call__`` for arguments like ``args``, which hands them to the compiled
        code as they are: the kernel compiles no other types (``disable_compile``) and
        checks its sizes, so a call it refuses (TypeError, GuardFailed) takes the general
        path. Only arrays that are not 1-D are checked and flattened here."""
        if len(inputs) != len(args):
            return
        if entry.fast is not None:  # made before (recordings taking turns)
            self._fast_entry = entry
            type(self).__call__ = entry.fast
            return
        names = [f"_jit_arg{i}" for i in range(len(args))]
        checks, passed = [], []
        for name, a in zip(names, args):
            if type(a) is float or type(a) is np.float64:
                passed.append(name)
                if self.kind in _CAST or self._hessian is not None:  # the compiled code
                    # would take a float32 too
                    checks.append(f"type({name}) in FLOATS")
            elif type(a) is np.ndarray and a.dtype == _F8:
                if a.ndim == 1 and a.size > 1:  # the compiled code refuses other dtypes
                    passed.append(name)
                    continue
                checks.append(f"type({name}) is ndarray and {name}.shape == {a.shape!r} "
                              f"and {name}.dtype is F8")
                passed.append(f"{name}.item()" if a.size == 1 else
                              f"ascontiguous({name}).reshape(-1)")
            else:
                return
        namespace = {"FINISH": entry.finish, "ndarray": np.ndarray, "F8": _F8,
                     "FLOATS": (float, np.float64),
                     "ascontiguous": np.ascontiguousarray, "asarray": np.asarray,
                     "MISS": _MISS,
                     "REFUSED": (TypeError, GuardFailed, NanTangents)}
        kernel = entry.kernel
        if isinstance(kernel, functools.partial):  # constant arrays: globals of the call
            for k, bound in enumerate(kernel.args):
                namespace[f"C{k}"] = bound
            passed = [f"C{k}" for k in range(len(kernel.args))] + passed
            kernel = kernel.func
        namespace["K"] = kernel
        call = f"K({', '.join(passed)})"
        finish = {_same: call, _array: f"asarray({call})"}.get(entry.finish,
                                                             f"FINISH({call})")
        params = ", ".join(f"{n}=MISS" for n in names)
        test = " and ".join(["not rest", "not kw"] + checks)
        given = f"tuple(a for a in ({', '.join(names)},) + rest if a is not MISS)"
        source = (f"def __call__(self, {params}, *rest, **kw):\n"
                  f"    if {test}:\n"
                  f"        try:\n"
                  f"            return {finish}\n"
                  f"        except REFUSED:\n"
                  f"            pass\n"
                  f"    if kw:\n"
                  f"        return self._with_keywords({given}, kw)\n"
                  f"    return self._call({given})\n")
        exec(compile(source, f"<ad.jit call of {self.__name__}>", "exec"), namespace)  # noqa: S102
        self._fast_entry = entry
        entry.fast = type(self).__call__ = namespace["__call__"]

    def _wanted(self, program: Any, ranges: list[tuple[int, int]], specs: list[Any],
                argnum: int) -> tuple[int, ...]:
        lo, hi = ranges[argnum]
        if hi - lo != 1 or specs[argnum] is not None:
            raise LoweringError("a differentiated argument that is a tree")
        s = program.slot_of_leaf.get(lo)
        if s is None:
            raise LoweringError(f"argument {argnum} is not a float array or number")
        return (s,)

    def _compile_in_background(self, program: Any, args: tuple, leaves: list[Any],
                               inputs: list[int], ranges: list[tuple[int, int]],
                               specs: list[Any]) -> None:
        """Build ``program``'s entry in a thread of its own (``background=True``); what
        it could not compile is reported by the call that picks the entry up."""
        done: list[Any] = []
        why: list[str] = []

        def build() -> None:
            with self._build_lock:
                self._current_args = args
                try:
                    done.append(self._build(program, leaves, inputs, ranges, specs, why))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                    done.append(exc)

        thread = threading.Thread(target=build, name=f"ad.jit({self.__name__})")
        self._entries[id(program)] = _PENDING
        self._compiling[id(program)] = (thread, [done, why])
        thread.start()

    def _compiled_in_background(self, program: Any) -> Any:
        """The entry of ``program`` if its background build has finished, else _PENDING.
        A build that failed, or cannot compile with ``fallback="error"``, raises at every
        call, as a build in the caller's thread does."""
        thread, (done, why) = self._compiling[id(program)]
        if thread.is_alive():
            return _PENDING
        entry = done[0] if done else None
        if isinstance(entry, BaseException):
            raise entry
        if why and self.fallback == "error":
            self._not_compiled(why[0])
        del self._compiling[id(program)]
        if entry is _NOT_HERE:  # built where its guards fail: build again when it is met
            del self._entries[id(program)]
            return _NOT_HERE
        self._entries[id(program)] = entry
        for message in why:
            self._not_compiled(message)
        return entry

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the code compiling in the background (``background=True``); True when
        none is left compiling.

        Example:
            >>> import numpy as np, dualad as ad
            >>> f = ad.jit(ad.grad(lambda x: np.sum(x ** 3)), background=True)
            >>> f(np.array([1.0, 2.0]))  # the tape's replay, while Numba compiles
            array([ 3., 12.])
            >>> f.wait()
            True
            >>> f(np.array([1.0, 2.0]))  # the compiled code
            array([ 3., 12.])
        """
        for thread, _ in list(self._compiling.values()):
            thread.join(timeout)
        return not any(t.is_alive() for t, _ in self._compiling.values())

    def _build(self, program: Any, leaves: list[Any], inputs: list[int],
               ranges: list[tuple[int, int]], specs: list[Any],
               why: list[str] | None = None) -> _Entry | None:
        """The compiled entry of ``program`` (None: it runs as the replay; _NOT_HERE). What
        cannot compile is reported now, or appended to ``why`` (a background build)."""
        if not any(is_slot for is_slot, _ in program.outputs):  # nothing computed to
            return None  # compile (a constant, a string): the replay returns it
        values = [np.asarray(leaves[i], dtype=np.float64) for i in inputs]
        low = None
        try:  # built where its guards hold (a pattern detected here is the recording's)
            check_input_guards(program, values)
            low = lower(program, values)
            code = NumbaProgram(low)
            kernel, finish = self._entry(code, program, ranges, specs)
        except LoweringError as exc:  # too large to compile (say): the interpreter's
            found = interpret(low, exc, lambda code: self._entry(code, program, ranges,
                                                                 specs))
            if isinstance(found, str):
                if why is None:
                    self._not_compiled(found)
                else:
                    why.append(found)
                return None
            code, (kernel, finish) = found
            if why is None and self._defer and not code.compiled():
                return _LATER  # seconds, once per machine: not in the caller's thread
        except GuardFailed:  # lowered at arguments this recording does not cover
            return _NOT_HERE
        try:
            _first_call(kernel, [_kernel_input(v) for v in values])
        except (GuardFailed, NanTangents):  # compiled; the call that follows tries the
            pass  # next recording, or replays
        if isinstance(code, InterpretedProgram):
            code.note_compiled()
        dispatcher = getattr(kernel, "func", kernel)
        if hasattr(dispatcher, "disable_compile"):  # other types: the general path
            dispatcher.disable_compile()
        return _Entry(program, kernel, finish, code.guarded)

    def _entry(self, code: NumbaProgram, program: Any, ranges: list[tuple[int, int]],
               specs: list[Any]) -> tuple[Callable[..., Any], Callable[[Any], Any]]:
        """The compiled entry of this transform for one recording, and what turns its
        result into the transform's."""
        kind = self.kind
        aux = bool(self.options.get("has_aux"))
        if kind == "value" and self._hessian is not None:  # blocks: arrays, as eager
            if len(program.outputs) == 1 and program.out_spec is None:
                return code.value(), _array
            whole = _outputs(program, np.asarray)
            return code.values(), lambda r: _arrays_in(whole(r))
        if kind == "value":
            if len(program.outputs) == 1 and program.out_spec is None:
                scalar = code.low.shapes[code.out] == ()
                return code.value(), _scalar if scalar else _same
            return code.values(), _outputs(program)
        if kind in ("grad", "value_and_grad"):
            if program.out_dtype.kind != "f":  # eager mode refuses it
                check_real_output(np.zeros((), program.out_dtype),
                                  f"{kind}({getattr(self.f, '__name__', 'f')})")
            single = isinstance(self.argnums, (int, np.integer))
            nums = [self.argnums] if single else list(self.argnums)
            wanted = sum((self._wanted(program, ranges, specs, int(a) % len(ranges))
                          for a in nums), ())
            if kind == "grad" and not aux:  # the gradients alone; a number's as a 0-d
                kernel = code.gradient(wanted, value=False)  # array, as eager mode's
                if not single:  # a tuple, of one gradient too (argnums=(0,))
                    return kernel, _gradients_alone if len(wanted) > 1 else _one_gradient
                return kernel, _same if code.low.shapes[wanted[0]] else _array
            kernel = code.gradient(wanted, aux=aux)
            if aux:
                return kernel, _with_aux_gradients(program, kind, single)
            if single:
                return kernel, _value_and_gradient
            return kernel, _gradients if kind == "grad" else _value_and_gradients
        if kind == "sparse_jacobian":
            if aux:
                raise LoweringError("has_aux of a sparse Jacobian")
            argnum = int(self.argnums) % len(ranges)
            wanted = self._wanted(program, ranges, specs, argnum)
            calls = _calls(code)
            if calls and self.options.get("sparsity") is None:
                raise LoweringError(f"a sparse Jacobian through {calls[0].operation.op!r}, "
                                    f"run as itself: its pattern may change from point to "
                                    f"point (pass sparsity= to fix it)")
            if code.pattern_varies and self.options.get("sparsity") is None:
                raise LoweringError("a sparse Jacobian of order statistics (np.sort, "
                                    "np.median, ...): the entries they read depend on the "
                                    "values, so its pattern may change from point to point "
                                    "(pass sparsity=, each output's whole group)")
            return self._sparse(code, wanted)
        if kind == "jacobian" and not isinstance(self.argnums, (int, np.integer)):
            nums = [int(a) % len(ranges) for a in self.argnums]
            wanted = sum((self._wanted(program, ranges, specs, a) for a in nums), ())
            return code.jacobian(wanted, aux=aux), _split_jacobian(code, wanted, aux)
        argnum = 1 if kind == "ode_jacobian" else int(self.argnums) % len(ranges)
        wanted = self._wanted(program, ranges, specs, argnum)
        if aux:
            return code.jacobian(wanted, aux=True), _with_aux(program)
        low = code.low
        if kind == "jacobian" and self.options.get("mode", "auto") != "forward" and \
                low.sizes[code.out] == 1 and program.out_dtype.kind == "f":
            # one output entry: one reverse pass, as eager mode chooses (measured: the
            # loop-written Rosenbrock at n = 100 compiles in 2.9 s instead of 4.1 s and
            # runs one pass instead of 100 directions)
            shape = low.shapes[code.out] + low.shapes[wanted[0]]
            finish = _array if shape == () else \
                _same if shape == low.shapes[wanted[0]] else _Shaped(shape)
            return code.gradient(wanted, value=False), finish
        kernel = None
        if "color" in self.options and not _calls(code) and not code.pattern_varies:
            # structurally sparse: compressed seeds (not through calls run as themselves or
            # order statistics: a sort's pattern follows the point)
            kernel = self._compressed_dense(code, wanted)
        if kernel is None:
            kernel = code.jacobian(wanted)
        if kind == "ode_jacobian" and (len(low.shapes[code.out]) != 1 or
                                       len(low.shapes[wanted[0]]) != 1):
            return kernel, _Shaped((low.sizes[code.out], low.sizes[wanted[0]]))
        return kernel, _same

    def _pattern(self, code: NumbaProgram, wanted: tuple[int, ...]) -> Pattern:
        """The boolean CSR pattern of the Jacobian (given, or detected at this call's
        arguments; the lowered program fixes it, guards included, so a detected pattern is
        kept on disk by program) and its column colouring."""
        pattern = self.options.get("sparsity")
        key = None
        if pattern is None:
            low = code.low
            program = code.digest if isinstance(code, NumbaProgram) else program_digest(low)
            key = entry_key(program, "pattern", (_PATTERN_VERSION,
                                                 _qualified(self.options["color"]), code.out,
                                                 wanted))
            found = load_pattern(key) if key is not None else None
            if found is not None and found.shape == (low.sizes[code.out],
                                                     sum(low.sizes[s] for s in wanted)):
                return found
            pattern = self.options["detect"](*self._current_args)
        import scipy.sparse

        csr = scipy.sparse.csr_array(pattern, dtype=bool)
        csr.sum_duplicates()
        csr.sort_indices()
        colors = np.asarray(self.options["color"](csr), dtype=np.intp)
        found = Pattern(csr.shape, csr.indptr.astype(np.intp), csr.indices.astype(np.intp),
                        colors)
        if key is not None:
            store_pattern(key, found)
        return found

    def _compressed_dense(self, code: NumbaProgram, wanted: tuple[int, ...]
                          ) -> Callable[..., Any] | None:
        """A dense Jacobian from compressed seeds, when the colouring needs clearly fewer
        directions than there are inputs (measured: the tangent loop costs in proportion to
        the directions; the scatter into zeros is cheap beside it)."""
        low = code.low
        K = sum(low.sizes[s] for s in wanted)
        if K < MIN_COMPRESSED:  # a few directions: nothing to save, the detection costs
            return None
        found = self._pattern(code, wanted)
        if found.shape != (low.sizes[code.out], K):
            return None
        colors = found.colors
        if colors.size and (int(colors.max()) + 1) * 4 > K * 3:
            return None
        shape = low.shapes[code.out] + (low.shapes[wanted[0]] if len(wanted) == 1 else (K,))
        return code.compressed_jacobian(wanted, colors, _rows(found), found.indices,
                                         dense=shape)

    def _sparse(self, code: NumbaProgram, wanted: tuple[int, ...]
                ) -> tuple[Callable[..., Any], Callable[[Any], Any]]:
        """The compressed kernel of ``sparse_jacobian`` and the CSR result around its data:
        the pattern (given, or detected at this call), its column colouring (one direction
        per colour) and the decompression are fixed at compile time."""
        import scipy.sparse

        found = self._pattern(code, wanted)
        m, n = found.shape
        kernel = code.compressed_jacobian(wanted, found.colors, _rows(found), found.indices)
        indices, indptr = found.indices.copy(), found.indptr.copy()

        def finish(data: np.ndarray) -> Any:
            return scipy.sparse.csr_array((data, indices, indptr), shape=(m, n))

        return kernel, finish

    # batches -----------------------------------------------------------------------------
    def batch(self, xs: Any, *args: Any) -> Any:
        """The function applied to each row of ``xs`` (its leading axis) with the same
        ``args``; results stacked (tuples of results: a tuple of stacks). Compiled entries
        that return one array loop inside Numba (over threads when Numba has several)."""
        return self._batch_at(0, (xs,) + args)

    def _batch_at(self, position: int, args: tuple) -> Any:
        """:meth:`batch` over the rows of ``args[position]``, the other arguments the
        same for every row (what ``ad.vmap`` calls for ``in_axes`` with one 0 and Nones)."""
        xs = np.asarray(args[position])
        if xs.ndim < 1:
            raise ValueError(f"ad.jit({self.__name__}).batch: xs must have a leading batch "
                             f"axis, got shape {xs.shape}.")
        if len(xs) == 0:
            return np.empty((0,))

        def at(row: Any) -> tuple:
            return args[:position] + (row,) + args[position + 1:]

        others = args[:position] + args[position + 1:]
        first = self._call(at(xs[0]))
        entry = self._fast_entry
        if (entry is not None and (entry.finish in (_same, _scalar) or
                                      type(entry.finish) is _Shaped) and xs.dtype == _F8
                and all(type(a) in (float, np.float64) or (type(a) is np.ndarray and
                        a.dtype == _F8) for a in others)
                and len(entry.program.input_leaves) == len(args)
                and isinstance(first, (np.ndarray, np.float64))):
            loop = self._batch_loop(entry, position)
            rows = np.ascontiguousarray(xs.reshape(len(xs), -1))
            if not rows.flags.writeable:  # the compiled code's one array type
                rows = rows.copy()
            if rows.shape[1] == 1:
                rows = rows.reshape(-1)
            inputs = [_kernel_input(a) for a in others]
            try:  # the kernel's own shape
                raw = np.shape(entry.kernel(*inputs[:position], rows[0], *inputs[position:]))
                out = (np.zeros if loop.zeroed else np.empty)((len(xs),) + raw)
                try:
                    loop(out, rows, *inputs)
                except NanTangents as exc:  # rows with a NaN: as eager mode has them
                    if not exc.args:
                        raise
                    result = out.reshape((len(xs),) + first.shape)
                    for b in exc.args[0]:
                        result[b] = self.forward_python()(*at(xs[b]))
                    return result
            except (GuardFailed, NanTangents):  # rows that other recordings cover, or
                # whose NaN eager forward mode may not have: one call each
                return np.stack([first] + [self._call(at(x)) for x in xs[1:]])
            return out.reshape((len(xs),) + first.shape)
        results = [first] + [self._call(at(x)) for x in xs[1:]]
        if isinstance(first, tuple):
            return tuple(np.stack(parts) for parts in zip(*results))
        return np.stack(results)

    def _batch_loop(self, entry: _Entry, position: int = 0) -> BatchLoop:
        loops = self.__dict__.setdefault("_batch_loops", {})
        found = loops.get((id(entry), position))
        if found is None:
            import numba

            parallel = numba.config.NUMBA_NUM_THREADS > 1 and numba.get_num_threads() > 1
            found = loops[(id(entry), position)] = batch_kernel(
                entry.kernel, len(entry.program.input_leaves), parallel, position)
        return found


def _complex(key: Any) -> bool:
    """Whether a tape's key of arguments has a complex leaf."""
    return any(type(k) is tuple and k[-1:] == ("complex",) for k in key[0])


def _first_call(kernel: Callable[..., Any], values: list[Any]) -> None:
    """Compile (or load from the disk cache) now; a corrupt cache entry is rebuilt."""
    try:
        kernel(*values)
    except (GuardFailed, NanTangents):  # compiled, and a guard fails at these values (or
        raise  # a NaN): the caller's turn
    except Exception:  # noqa: BLE001 - unreadable cache files: compile afresh
        forget_compiled(kernel)
        kernel(*values)


def _same(r: Any) -> Any:
    return r


def _scalar(r: Any) -> Any:
    return np.float64(r)


def _array(v: Any) -> Any:
    """A result as eager mode hands it back: a number as a 0-d array."""
    return v if type(v) is np.ndarray else np.asarray(v)


def _arrays_in(tree: Any) -> Any:
    """A Hessian's blocks (tuples of tuples of them) as arrays, as eager mode's."""
    if type(tree) is tuple:
        return tuple(_arrays_in(t) for t in tree)
    return _array(tree)


def _value_and_gradient(r: Any) -> Any:
    return np.asarray(r[0]), _array(r[1][0])


def _gradients(r: Any) -> Any:
    return tuple(_array(g) for g in r[1])


def _gradients_alone(r: Any) -> Any:
    return tuple(_array(g) for g in r)


def _one_gradient(r: Any) -> Any:
    """The gradient of ``argnums=(i,)``: a tuple of one, as eager mode's (the kernel of
    one gradient returns it alone)."""
    return (_array(r),)


def _value_and_gradients(r: Any) -> Any:
    return np.asarray(r[0]), tuple(_array(g) for g in r[1])


def _outputs(program: Any, number: Callable[[float], Any] = np.float64
             ) -> Callable[[Any], Any]:
    """The function's result (a tree) from the tuple of its computed outputs; a computed
    number (the compiled code's float) as ``number`` makes it: numpy's ``np.float64`` as
    eager mode's values have it, a 0-d array as eager ``has_aux`` hands back aux values."""
    from ..core.trees import tree_unflatten

    layout = [(is_slot, v) for is_slot, v in program.outputs]
    spec = program.out_spec

    def finish(computed: tuple) -> Any:
        found = iter(computed)
        leaves = [fresh(v) if not is_slot else number(c) if type(c := next(found)) is float
                  else c for is_slot, v in layout]
        return tree_unflatten(spec, leaves) if spec is not None else leaves[0]

    return finish


def _aux_tree(program: Any) -> Callable[[tuple], Any]:
    """``has_aux``: the auxiliary tree from the computed outputs after the first."""
    whole = _outputs(program, np.asarray)
    first = program.outputs[0]

    def aux(rest: tuple) -> Any:
        return whole(((None,) if first[0] else ()) + tuple(rest))[1]

    return aux


def _with_aux(program: Any) -> Callable[[Any], Any]:
    aux = _aux_tree(program)
    return lambda r: (r[0], aux(r[1]))


def _with_aux_gradients(program: Any, kind: str, single: bool) -> Callable[[Any], Any]:
    aux = _aux_tree(program)

    def finish(r: Any) -> Any:
        grads = _array(r[1][0]) if single else tuple(_array(g) for g in r[1])
        if kind == "grad":
            return grads, aux(r[2])
        return (np.asarray(r[0]), aux(r[2])), grads

    return finish


def _split_jacobian(code: NumbaProgram, wanted: tuple[int, ...], aux: bool
                    ) -> Callable[[Any], Any]:
    """A tuple ``argnums``: the columns of one Jacobian split per argument, each shaped
    ``out.shape + argument.shape``."""
    low = code.low
    out_shape = low.shapes[code.out]
    parts, lo = [], 0
    for s in wanted:
        parts.append((lo, lo + low.sizes[s], out_shape + low.shapes[s]))
        lo += low.sizes[s]
    aux_tree = _aux_tree(low.program) if aux else None

    def split(J: np.ndarray) -> tuple:
        J = J.reshape(-1, lo) if lo else J
        return tuple(np.ascontiguousarray(J[:, a:b]).reshape(shape) for a, b, shape in parts)

    if aux_tree is not None:
        return lambda r: (split(r[0]), aux_tree(r[1]))
    return split


class _Shaped:
    """A result reshaped to ``shape``: an ODE Jacobian as scipy takes it, ``(f.size,
    y.size)`` whatever the shapes of ``y`` and ``f(t, y)`` (as eager ``ode_jacobian``), or
    a Jacobian of one output entry from a gradient."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __call__(self, r: Any) -> Any:
        return np.asarray(r).reshape(self.shape)


def jit(fn: Callable[..., Any], *, fallback: str = "warn",
        coloring: Callable[[Any], np.ndarray] | None = None,
        background: bool = False) -> Jitted:
    """``fn`` (a function or a transform of one) recorded at its first call and compiled.

    ``background=True`` compiles in a thread of its own: until the code is ready, calls
    run the tape's Python replay (a first call costs a recording, not a compile), and what
    cannot be compiled is reported by the first call after the build (``wait()`` blocks
    until it is done).

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
    return Jitted(fn, fallback, coloring=coloring, background=background)
