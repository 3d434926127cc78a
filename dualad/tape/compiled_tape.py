"""``tape.compile()``: a :class:`~dualad.tape.Tape` whose value and derivatives run as
compiled code.

``__call__``, ``.grad`` and ``.value_and_grad`` are :func:`~dualad.tape.jit.jit` of the
tape's function (sharing its recordings); ``.jvp`` runs the forward kernel seeded with the
given tangents, ``.vjp`` the reverse kernel seeded with the cotangent, and ``.hvp``
forward over reverse, recorded as a program of its own and compiled (where that program
does not compile: the compiled reverse kernel on dual numbers, :mod:`dualad.njit`; both
exact).
Programs beyond the compile-cost cap (``MAX_COMPILE_COST``) run in the compiled
interpreter (:mod:`~dualad.tape.interpreter`), as with ``ad.jit``: ``.jvp`` and ``.vjp``
by its passes seeded with the given tangents or cotangent, ``.hvp`` by its run of the
recorded forward-over-reverse program (the reverse kernel on dual numbers needs
straight-line code). The interpreter's first compile on a machine (seconds) happens in a
thread of its own while the tape's replay serves (``fallback="warn"``; with
``fallback="error"`` the call waits for it; ``wait()`` blocks until it is done).
Arguments that are trees or not floats, and recordings that do not compile, run the
tape's own replay with one :class:`~dualad.tape.jit.JitFallbackWarning` per method (or
:class:`~dualad.tape.jit.JitError` with ``fallback="error"``).

Example:
    >>> import numpy as np, dualad as ad
    >>> tape = ad.record(lambda x: np.sum(np.sin(x) * x), np.zeros(2))
    >>> compiled = tape.compile()
    >>> out, tangent = compiled.jvp((np.array([1.0, 2.0]),), (np.array([1.0, 0.0]),))
    >>> round(float(tangent), 4)
    1.3818
    >>> compiled.hvp((np.array([1.0, 2.0]),), np.array([1.0, 0.0])).round(4) + 0.0
    array([0.2391, 0.    ])
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.arguments import normalize_argnums
from ..core.errors import ShapeError
from ..core.tracing import recording_paused
from .interpreter import InterpretedProgram, interpret
from .jit import JitError, JitFallbackWarning, Jitted, _first_call, _kernel_input
from .lowering import Lowered, LoweringError, lower
from .numba_backend import NumbaProgram
from .program import GuardFailed, NanTangents
from .recorded_tape import RecordedTape, check_input_guards

__all__ = ["CompiledTape"]


class _Miss:
    pass


_MISS = _Miss()
_REPLAY = _Miss()  # a recording whose compiled guards fail where it was recorded


class _Later(Exception):
    """The interpreter's pass compiles in the background: the replay answers meanwhile."""


def _signature(args: tuple) -> tuple | None:
    """The shapes of arguments that are all float64 arrays or floats, else None."""
    shapes = []
    for a in args:
        if type(a) is np.ndarray and a.dtype == np.float64:
            shapes.append(a.shape)
        elif type(a) is float or type(a) is np.float64:
            shapes.append(None)
        else:
            return None
    return tuple(shapes)


class CompiledTape:
    """A :class:`~dualad.tape.Tape` compiled: ``__call__``, ``.grad``,
    ``.value_and_grad`` (per ``argnums``), ``.jvp``, ``.vjp`` and ``.hvp``."""

    def __init__(self, tape: RecordedTape, fallback: str = "warn") -> None:
        self.tape = tape
        self.fallback = fallback
        self._value = Jitted(tape.f, fallback, tape=tape)
        self._grads: dict[Any, Jitted] = {}
        self._codes: dict[int, Any] = {}  # NumbaProgram, None, _REPLAY
        self._kernels: dict[Any, Any] = {}  # a kernel, or the LoweringError refusing it
        self._interpreted: dict[int, Any] = {}  # (lowered, its InterpretedProgram or why not)
        self._compiling: dict[Any, threading.Thread] = {}  # interpreter passes, by kernel
        self._told: set[str] = set()
        self._by_signature: dict[tuple, NumbaProgram] = {}
        self._hvps: dict[tuple[int, int], Jitted | None] = {}

    def __repr__(self) -> str:
        return f"<compiled {self.tape!r}>"

    def __call__(self, *args: Any) -> Any:
        return self._value(*args)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the code compiling in the background (the interpreter's first compile,
        see the module); True when none is left compiling."""
        jitted = [self._value, *self._grads.values(),
                  *(h for h in self._hvps.values() if h is not None)]
        done = all([j.wait(timeout) for j in jitted])
        for thread in list(self._compiling.values()):
            thread.join(timeout)
        return done and not any(t.is_alive() for t in self._compiling.values())

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
        """The gradient of the scalar output (compiled reverse mode), as ``Tape.grad``."""
        return self._jitted("grad", argnums)(*args)

    def value_and_grad(self, *args: Any, argnums: Any = 0) -> Any:
        """``(value, gradient)`` (compiled reverse mode), as ``Tape.value_and_grad``."""
        return self._jitted("value_and_grad", argnums)(*args)

    # the compiled code of the recording that matches some arguments ------------------------
    def _not_compiled(self, method: str, why: str) -> None:
        if method in self._told and self.fallback != "error":
            return
        self._told.add(method)
        message = (f"Tape({self.tape.__name__}).compile().{method}: cannot compile {why}; "
                   f"it runs as the tape's Python replay instead.")
        if self.fallback == "error":
            raise JitError(message + " Pass fallback='warn' to accept that.")
        warnings.warn(message + " (reported once per method)", JitFallbackWarning,
                      stacklevel=3)

    def _run(self, args: tuple, method: str,
             run: Callable[[Any, list[Any]], Any]) -> Any:
        """``run(code, kernel inputs)`` on the lowered recording that matches ``args``
        (the first whose guards hold; else the tape records again), by the compiled code
        or, where the compiler refuses the entry, by the interpreter; ``_MISS`` where the
        tape's replay must answer (traced arguments, trees, code that does not compile,
        the interpreter compiling in the background)."""
        if recording_paused():
            return _MISS
        signature = _signature(args)
        code = self._by_signature.get(signature) if signature is not None else None
        if code is not None:  # the code last used for arguments like these
            values = [a if type(a) is np.ndarray and a.ndim == 1 and a.size > 1
                      else _kernel_input(a) for a in args]
            try:
                return self._attempt(code, run, values)
            except NanTangents:  # eager forward mode is NaN-safe: the tape's replay
                return _MISS
            except (GuardFailed, TypeError):  # another recording's turn, or an array
                pass                          # the code was not compiled for: in general
            except _Later:
                return _MISS
            except LoweringError:  # reported by the general path
                pass
        tape = self.tape
        key, leaves, inputs, ranges, traced, specs = tape._split(args)
        if traced:  # an outer transform traces through: the tape's dispatching replay
            return _MISS
        if len(inputs) != len(args) or any(sp is not None for sp in specs):
            self._not_compiled(method, "arguments that are trees or not float arrays")
            return _MISS
        arrays = [np.asarray(leaves[i], dtype=np.float64) for i in inputs]
        values = [_kernel_input(a) for a in arrays]
        tried: list[Any] = []
        recorded = replay = False
        candidates = tape._programs_for(args, key, inputs, ranges)
        while True:
            for program in candidates:
                code = self._codes.get(id(program), _MISS)
                if code is _REPLAY:
                    replay = True
                    continue
                try:
                    if code is _MISS:
                        check_input_guards(program, arrays)
                        code = self._codes[id(program)] = self._lowered(program, arrays,
                                                                         method)
                    if code is None:
                        return _MISS
                    result = self._attempt(code, run, values)
                    if signature is not None:
                        self._by_signature[signature] = code
                    return result
                except NanTangents:  # eager forward mode is NaN-safe: the tape's replay
                    return _MISS
                except GuardFailed:
                    if recorded:  # compiled guards read otherwise than numpy did: this
                        self._codes[id(program)] = _REPLAY  # recording replays
                        return _MISS
                    continue
                except LoweringError as exc:
                    self._not_compiled(method, str(exc))
                    return _MISS
                except _Later:
                    return _MISS
            if replay:  # the replay checks those recordings' guards as numpy reads them
                return _MISS
            tried.extend(candidates)
            candidates = tape._rerecord(args, key, inputs, tried)
            recorded = True

    def _lowered(self, program: Any, arrays: list[np.ndarray], method: str) -> Any:
        """The compiled code of ``program`` (its interpreted form where it is too large
        to compile at all), or None (reported: it does not lower)."""
        try:
            low = lower(program, arrays)
        except LoweringError as exc:
            self._not_compiled(method, str(exc))
            return None
        try:
            return NumbaProgram(low)
        except LoweringError as exc:  # more instructions than the compiler takes
            return self._interpreter(low, exc)

    def _interpreter(self, low: Lowered, refused: LoweringError) -> InterpretedProgram:
        """The interpreted form of the lowered program ``low``, whose compiled entry
        ``refused`` gave way (LoweringError with both reasons where it does not encode)."""
        held = self._interpreted.get(id(low))
        if held is None:
            made = interpret(low, refused, lambda code: None)
            held = self._interpreted[id(low)] = (low, made if isinstance(made, str)
                                                 else made[0])
        found = held[1]
        if isinstance(found, str):
            raise LoweringError(found)
        return found

    def _attempt(self, code: Any, run: Callable[[Any, list[Any]], Any],
                 values: list[Any]) -> Any:
        """``run(code, values)``; where the compiler refuses this entry (above the
        compile-cost cap, say), ``run`` on the interpreted program."""
        try:
            return run(code, values)
        except LoweringError as exc:
            if not isinstance(code, NumbaProgram):
                raise
            refused = exc
        interpreted = self._interpreter(code.low, refused)
        try:
            return run(interpreted, values)
        except LoweringError as exc:
            raise LoweringError(f"{refused}, nor interpret it ({exc})") from None

    def _kernel(self, code: Any, name: str, *options: Any,
                values: list[Any], extra: Sequence[Any] = ()) -> Callable[..., Any]:
        """Entry ``name(*options)`` of ``code``, compiled (or loaded) at its first use.
        Raises the LoweringError that refused it (every time), or _Later while the
        interpreter compiles it in the background."""
        key = (id(code), name, options)
        kernel = self._kernels.get(key)
        if isinstance(kernel, LoweringError):  # a new one (a raised one keeps its frames)
            raise LoweringError(str(kernel))
        if kernel is None:
            thread = self._compiling.get(key)
            if thread is not None:
                if thread.is_alive():
                    raise _Later
                del self._compiling[key]
            try:
                kernel = getattr(code, name)(*options)
            except LoweringError as exc:
                self._kernels[key] = LoweringError(str(exc))
                raise
            inputs = list(values) + list(extra)
            if isinstance(code, InterpretedProgram) and thread is None and \
                    self.fallback == "warn" and not code.compiled((name,)):
                self._compile_in_background(key, code, kernel, inputs)
                raise _Later
            self._kernels[key] = kernel
            try:
                _first_call(kernel, inputs)
            except (GuardFailed, NanTangents):  # compiled; the caller tries the next
                pass  # recording, or replays
            if isinstance(code, InterpretedProgram):
                code.note_compiled((name,))
        return kernel

    def _compile_in_background(self, key: Any, code: InterpretedProgram,
                               kernel: Callable[..., Any], inputs: list[Any]) -> None:
        """The interpreter's pass behind ``kernel`` (entry ``key[1]``) compiled (seconds,
        once per machine) in a thread of its own; the first call after it takes it up."""
        def build() -> None:
            try:
                _first_call(kernel, inputs)
            except (GuardFailed, NanTangents):
                pass
            except Exception:  # noqa: BLE001 - the call that takes it up compiles again
                return
            code.note_compiled((key[1],))

        # not a daemon (as ad.jit's): a process that ends waits for the cache files
        thread = threading.Thread(target=build, name=f"compile({self.tape.__name__})")
        self._compiling[key] = thread
        thread.start()

    # transforms -------------------------------------------------------------------------
    def jvp(self, args: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        """``(f(*args), J @ tangents)``: the forward kernel seeded with ``tangents``."""
        args, tangents = tuple(args), tuple(tangents)
        name = f"Tape({self.tape.__name__}).compile().jvp"
        if len(args) != len(tangents):
            raise ValueError(f"{name}: {len(args)} argument(s) but {len(tangents)} "
                             f"tangent(s); pass one tangent per argument.")
        for k, (a, t) in enumerate(zip(args, tangents)):
            if (t.shape if type(t) is np.ndarray else np.shape(t)) != \
                    (a.shape if type(a) is np.ndarray else np.shape(a)):
                raise ShapeError(f"{name}: tangent {k} has shape {np.shape(t)} but its "
                                 f"argument has shape {np.shape(a)}; tangents are shaped "
                                 f"like the arguments.")

        def run(code: Any, values: list[Any]) -> Any:
            seeds = [t if type(t) is np.ndarray and t.ndim == 1 and t.size > 1 and
                     t.dtype == np.float64 else _kernel_input(t) for t in tangents]
            kernel = self._kernel(code, "jvp", tuple(range(len(values))), values=values,
                                  extra=seeds)
            return kernel(*values, *seeds)

        found = self._run(args, "jvp", run)
        return self.tape.jvp(args, tangents) if found is _MISS else found

    def vjp(self, *args: Any) -> tuple[Any, Callable[[Any], tuple]]:
        """``(f(*args), pullback)``: ``pullback(cotangent)`` runs the reverse kernel seeded
        with the cotangent and gives one gradient per argument."""
        name = f"Tape({self.tape.__name__}).compile().vjp"

        def run(code: Any, values: list[Any]) -> Any:
            shape = code.low.shapes[code._differentiated()]
            nums = tuple(range(len(values)))
            # the reverse entry now: one that is refused, or compiling, is known here
            kernel = self._kernel(code, "vjp", nums, values=values,
                                  extra=(_kernel_input(np.zeros(shape)),))
            if isinstance(code, InterpretedProgram):  # its values kept for the pullback
                key = (id(code), "split_vjp", nums)
                split = self._kernels.get(key)
                if split is None:
                    split = self._kernels[key] = code.split_vjp(nums)
                out, pull = split(*values)
            else:  # the values again in the pullback, from the arguments as called
                out = self._kernel(code, "value", values=values)(*values)
                kept = [v.copy() if type(v) is np.ndarray else v for v in values]

                def pull(c: Any) -> tuple:
                    return kernel(*kept, c)[1]

            def pullback(cotangent: Any) -> tuple:
                c = np.asarray(cotangent, dtype=np.float64)
                if c.shape != shape:
                    raise ShapeError(f"{name}: the cotangent has shape {c.shape} but the "
                                     f"output has shape {shape}; pass one shaped like the "
                                     f"output.")
                return tuple(pull(_kernel_input(c)))

            return out, pullback

        found = self._run(args, "vjp", run)
        return self.tape.vjp(*args) if found is _MISS else found

    def _recorded_hvp(self, i: int, n: int) -> Jitted | None:
        """``ad.jit`` of ``(*args, v) -> H v`` (forward over reverse, recorded as a program
        of its own and compiled like any function), or None once that has failed."""
        key = (i, n)
        if key not in self._hvps:
            from ..forward_mode.transforms import jvp
            from ..reverse_mode.transforms import grad

            f = self.tape.f

            def hvp(*args_and_v: Any) -> Any:
                args, v = list(args_and_v[:n]), args_and_v[n]

                def at(xi: Any) -> Any:
                    args[i] = xi
                    return f(*args)

                return jvp(grad(at), (args[i],), (v,))[1]

            hvp.__name__ = f"hvp_of_{self.tape.__name__}"
            # any failure: the reverse kernel on dual numbers instead; the interpreter's
            # first compile in the background as the tape's own fallback says
            self._hvps[key] = Jitted(hvp, "error", defer=self.fallback == "warn")
        return self._hvps[key]

    def hvp(self, args: Sequence[Any], v: Any, argnums: Any = 0) -> Any:
        """The Hessian of the scalar output at ``args`` (w.r.t. ``argnums``) applied to
        ``v``: forward over reverse recorded as a program and compiled; where that
        program does not compile, the compiled reverse kernel run on dual numbers."""
        args = tuple(args)
        name = f"Tape({self.tape.__name__}).compile().hvp"
        nums, single = normalize_argnums(argnums, len(args), name)
        if not single:
            self._not_compiled("hvp", "a tuple of argnums")
            return self.tape.hvp(args, v, argnums)
        (i,) = nums
        if np.shape(v) != np.shape(args[i]):
            raise ShapeError(f"{name}: v has shape {np.shape(v)} but argument {i} has shape "
                             f"{np.shape(args[i])}; pass v shaped like the argument.")
        recorded = self._recorded_hvp(i, len(args))
        if recorded is not None and not recording_paused():
            try:
                return recorded(*args, v)
            except Exception:  # noqa: BLE001 - the recording or its lowering failed
                self._hvps[i, len(args)] = None  # from now on: the reverse kernel on duals
        from ..njit import jvp as njit_jvp
        from ..njit.drivers import NjitError

        def run(code: Any, values: list[Any]) -> Any:
            if not isinstance(code, NumbaProgram):
                raise LoweringError("the reverse kernel on dual numbers needs straight-line "
                                    "compiled code")
            kernel = self._kernel(code, "flat_gradient", i, values=values)
            if not hasattr(kernel, "py_func"):  # constants bound as arguments
                raise LoweringError("a program with large constant arrays")
            if code.guarded:
                kernel(*values)  # GuardFailed here: the next recording
            tangents = [np.zeros(np.size(a)) if np.ndim(a) else 0.0 for a in values]
            tangents[i] = _kernel_input(v)
            try:
                _, hv = njit_jvp(kernel, tuple(values), tuple(tangents))
            except NjitError as exc:
                raise LoweringError(str(exc).split("\n")[0]) from None
            return np.reshape(hv, np.shape(args[i]))

        found = self._run(args, "hvp", run)
        return self.tape.hvp(args, v, argnums) if found is _MISS else found
