"""Record once, replay fast: the recording and replay under :class:`~dualad.tape.Tape`
(``ad.record(f, *example_args)`` gives one).

Recording runs ``f`` once on graph nodes and keeps the operations it called as a flat,
linearised program: per operation its function, its gradient rule (both resolved once,
at record time, so a replay does no dispatch), its constant arguments and which of its
arguments are results of earlier operations. A replay evaluates that program at new
inputs with plain numpy values (no graph objects are made) and, for a gradient, sweeps it
backwards calling the resolved rules.

Guards keep a replay from running the wrong program. While recording, every place where
``f`` depended on a value is noted with its outcome: a Python ``if`` / ``while`` on a
traced value (``bool()``), ``int()`` / ``float()`` / an index taken from a value computed
from the inputs (a comparison, ``np.argmax``, ...), or such a value handed to plain numpy.
A replay recomputes those values as it goes; when one differs, the tape records ``f``
again at the new point (a :class:`TapeRetraceWarning`, once per tape) and answers from
the new recording. Values used as data, e.g. ``np.where``'s condition or an index from
``np.argmax``, are part of the program and need no guard; an operation indexed by such a
value (``x[x > 0]``) is guarded on the shape of its result. New input shapes (or new
values of non-float arguments) record again too, unless ``strict=True``, where they raise
:class:`~dualad.ShapeError`. Every recording is kept (a few per input signature), so a
function that alternates between branches does not record on every call.

Tapes nest with the transforms: called with traced values (``ad.grad`` of a function
that calls a tape, ``ad.jvp`` of a tape, ``tape.hvp``), the program is replayed through
the ordinary dispatch, so the outer differentiation sees every operation.

What a tape cannot see: plain numpy values that ``f`` computes from anything but its
arguments (they are constants of the recording, as with ``jax.jit``), and values read
with ``ad.value`` (compare traced values instead, ``if x > 0:``, which is guarded).
Integer arguments are constants (a new value records again); differentiate floats.

One tape may be used from several threads: a replay keeps its values in per-call lists,
and recording (the only change to a tape) holds the tape's lock.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> tape = record(lambda x: np.sum(np.sin(x) * x), np.zeros(2))
    >>> tape.grad(np.array([1.0, 2.0])).round(4)
    array([1.3818, 0.077 ])
    >>> round(float(tape(np.array([1.0, 2.0]))), 4)
    2.6601
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.arguments import (
    as_differentiable,
    as_dtype,
    check_real_output,
    derivative_dtype,
    guard_opaque_calls,
    normalize_argnums,
    to_user,
)
from ..core.arguments import value as plain_value
from ..core.array_protocol import shape_of, value_observer
from ..core.errors import ShapeError
from ..core.tracing import Traced, new_level, recording_paused
from ..core.trees import tree_flatten, tree_unflatten
from ..forward_mode.transforms import jvp as forward_jvp
from ..reverse_mode.backward import _NEEDS
from ..reverse_mode.graph import Variable
from .program import GuardFailed, Program, guard_holds
from .python_backend import compiled_grad, compiled_value
from .recording import (
    MAX_RECORDINGS,
    ArgumentVariable,
    Recorder,
    TapeRetraceWarning,
    build_program,
    constant_key,
    is_float_leaf,
)

__all__ = ["RecordedTape", "check_input_guards"]


class RecordedTape:
    """A function recorded by :func:`~dualad.tape.record`, replayed at new inputs (the
    :class:`~dualad.tape.Tape` without ``compile``: what ``ad.jit`` records on).

    ``tape(*args)`` gives the value; ``.grad(*args, argnums=0)``, ``.value_and_grad``,
    ``.vjp(*args)``, ``.jvp(args, tangents)`` and ``.hvp(args, v)`` its derivatives.
    Float arguments (arrays and numbers, also inside tuples, lists and dicts) are the
    recorded inputs; every other argument is a constant of the recording (a different
    value records again).

    Example:
        >>> import numpy as np
        >>> from dualad.tape import record
        >>> tape = record(lambda a, b: np.trace(a @ b), np.eye(2), np.eye(2))
        >>> ga, gb = tape.grad(np.ones((2, 2)), 2 * np.eye(2), argnums=(0, 1))
        >>> ga
        array([[2., 0.],
               [0., 2.]])
    """

    def __init__(self, f: Callable[..., Any], strict: bool = False) -> None:
        self.f = f
        # float allocations inside f can hold derivatives; compiled code failing on traced
        # values is explained
        self._run = guard_opaque_calls(f, f"record({getattr(f, '__name__', 'f')})")
        self.strict = strict
        self.__name__ = getattr(f, "__name__", "f")
        self.__doc__ = getattr(f, "__doc__", None)
        self._lock = threading.Lock()
        self._programs: dict[Any, list[Program]] = {}
        self._latest: Program | None = None
        self._warned = False
        self._argnums: dict[Any, tuple[tuple[int, ...], bool]] = {}
        self.recordings = 0
        #: set by ``ad.jit(f)`` (its name): in-place writes into array arguments are refused
        #: (see ArgumentVariable); a function's non-array result (a string) is returned
        self._values_of: str | None = None

    def __repr__(self) -> str:
        n = len(self._latest.ops) if self._latest is not None else 0
        return f"<Tape of {self.__name__}: {n} operations, {self.recordings} recording(s)>"

    @property
    def program(self) -> Program | None:
        """The most recent recording (its ``ops`` are what :func:`dualad.to_dot` draws)."""
        return self._latest

    # arguments ---------------------------------------------------------------------------
    def _split(self, args: tuple) -> tuple[Any, list[Any], list[int], list[tuple[int, int]],
                                           bool, list[Any]]:
        """``(key, leaves, input leaf indices, leaf range per argument, traced?, spec per
        argument (None for an argument that is one leaf))``."""
        leaves: list[Any] = []
        ranges = []
        specs: list[Any] = []
        key_parts: list[Any] = []
        inputs = []
        traced = False
        simple = True
        for a in args:
            n = len(leaves)
            t = type(a)
            if t is np.ndarray and a.dtype.kind in "fc":  # the common case, inline
                ranges.append((n, n + 1))
                leaves.append(a)
                specs.append(None)
                key_parts.append(a.shape if a.dtype.kind == "f" else (a.shape, "complex"))
                inputs.append(n)
                continue
            if t is float:
                ranges.append((n, n + 1))
                leaves.append(a)
                specs.append(None)
                key_parts.append(())
                inputs.append(n)
                continue
            ls, spec = tree_flatten(a)
            ranges.append((n, n + len(ls)))
            leaves.extend(ls)
            if len(ls) == 1 and ls[0] is a:
                specs.append(None)
            else:
                specs.append(spec)
                simple = False
            for i, leaf in enumerate(ls, n):
                if is_float_leaf(leaf):
                    if isinstance(leaf, Traced):
                        traced = True
                    shape = shape_of(leaf)
                    key_parts.append((shape, "complex") if np.iscomplexobj(plain_value(leaf))
                                     else shape)
                    inputs.append(i)
                else:
                    key_parts.append(constant_key(leaf))
        spec_key = None if simple else tuple(None if sp is None else repr(sp) for sp in specs)
        return (tuple(key_parts), spec_key), leaves, inputs, ranges, traced, specs

    def _record(self, args: tuple, key: Any, inputs: list[int]) -> Program:
        """Run ``f`` once on graph nodes at ``args`` (plain values) and keep its program."""
        level = new_level()
        leaves, spec = tree_flatten(args)
        variables = []
        for i in inputs:
            value = as_differentiable(plain_value(leaves[i]),
                                      f"argument leaf {i} of record({self.__name__})")
            if self._values_of is not None and type(leaves[i]) is np.ndarray:
                v = ArgumentVariable(value, level)  # numpy would write into it in place
                v.owner = self._values_of
            else:
                v = Variable(value, level)
            leaves[i] = v
            variables.append(v)
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Traced) and i not in inputs:
                leaves[i] = plain_value(leaf)
        recorder = Recorder(level)
        token = value_observer.set(recorder)
        try:
            out = self._run(*tree_unflatten(spec, leaves))
        finally:
            value_observer.reset(token)
        if self._values_of is None and (out is None or isinstance(out, (str, bytes))):
            raise TypeError(
                f"record({self.__name__}): the function returned {type(out).__name__}; it "
                f"must return a number or an array computed from its arguments."
            )
        program = build_program(key, level, variables, inputs, out, recorder)
        self.recordings += 1
        return program

    def _programs_for(self, args: tuple, key: Any, inputs: list[int], ranges: Any
                      ) -> list[Program]:
        found = self._programs.get(key)
        if found:
            return found
        with self._lock:
            found = self._programs.get(key)
            if found:
                return found
            if self._latest is not None:
                if self.strict:
                    raise ShapeError(
                        f"record({self.__name__}, strict=True): called with arguments of "
                        f"{self._describe(key)}, but recorded with "
                        f"{self._describe(self._latest.key)}; pass arguments like the "
                        f"recorded ones or record without strict=True."
                    )
                self._warn(f"the arguments changed ({self._describe(key)}; recorded with "
                           f"{self._describe(self._latest.key)})")
            program = self._record(args, key, inputs)
            self._programs[key] = [program]
            self._latest = program
            return self._programs[key]

    @staticmethod
    def _describe(key: Any) -> str:
        shapes = [k if isinstance(k, tuple) and all(isinstance(d, int) for d in k)
                  else f"{k[0]} (complex)" if isinstance(k, tuple) and k[1:] == ("complex",)
                  else "a constant" for k in key[0]]
        return "leaf shapes " + ", ".join(map(str, shapes))

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"tape of {self.__name__} records again: {why}. Further re-recordings of "
                f"this tape are not reported.", TapeRetraceWarning, stacklevel=4)

    def _rerecord(self, args: tuple, key: Any, inputs: list[int], tried: list[Program]
                  ) -> list[Program]:
        """Record at ``args`` after every kept recording in ``tried`` failed a guard; the
        recordings to try next (only the new ones if another thread recorded meanwhile)."""
        with self._lock:
            kept = self._programs.setdefault(key, [])
            fresh = [p for p in kept if not any(p is t for t in tried)]
            if fresh:
                return fresh
            self._warn("a value the recording depended on (a branch, a loop count, an index) "
                       "differs at the new arguments")
            program = self._record(args, key, inputs)
            kept.insert(0, program)
            del kept[MAX_RECORDINGS:]
            self._latest = program
            return [program]

    def _replay(self, args: tuple, mode: str, nums: tuple[int, ...] = (),
                fname: str = "") -> _Replayed:
        """Run a program matching ``args``. ``mode`` is ``"value"`` (outputs only),
        ``"keep"`` (keep every value for reverse sweeps later) or ``"grad"`` (also the
        gradients of the single output with respect to the arguments ``nums``)."""
        key, leaves, inputs, ranges, traced, specs = self._split(args)
        values = []
        for i in inputs:
            leaf = leaves[i]
            if type(leaf) is np.ndarray and leaf.dtype.type is np.float64:
                values.append(leaf)
            elif traced and isinstance(leaf, Traced):
                values.append(leaf)
            else:
                values.append(as_differentiable(leaf, f"argument of {self.__name__}"))
        candidates = list(self._programs_for(args, key, inputs, ranges))
        tried: list[Program] = []
        while True:
            for program in candidates:
                r = _Replayed(program, leaves, ranges, specs, traced)
                try:
                    if program.input_guards:
                        check_input_guards(program, values)
                    if traced:
                        r.slots, r.kept = program.run_traced(values)
                    elif mode == "value":
                        fn = compiled_value(program)
                        if fn is not None:
                            r.outs = fn(values)
                        else:
                            r.slots, _ = program.run(values, False)
                    elif mode == "grad" and program.checked:
                        wanted = self._wanted(r, nums, fname)
                        fn = compiled_grad(program, wanted)
                        if fn is None:
                            r.slots, r.kept = program.run(values, True)
                        else:
                            try:
                                r.outs, found = fn(values, _ONE)
                            finally:
                                _NEEDS.value = None
                            if key[1] is None and len(wanted) == len(nums):
                                r.found = found  # one input slot per argument, in order
                            else:
                                r.grads = dict(zip(wanted, found))
                    else:
                        r.slots, r.kept = program.run(values, True)
                    if r.outs is None:
                        r.outs = program.output_values(r.slots)
                    return r
                except GuardFailed:
                    continue
            tried.extend(candidates)
            candidates = self._rerecord(args, key, inputs, tried)

    # public ------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        if recording_paused():  # nothing records now (ad.jacobian's mode="auto" probe)
            return self.f(*args)
        r = self._replay(args, "value")
        return tree_unflatten(r.program.out_spec, r.outs)

    def value_and_grad(self, *args: Any, argnums: int | Sequence[int] = 0) -> tuple[Any, Any]:
        """``(f(*args), gradient)`` for a scalar-valued ``f``, from the recorded program."""
        fname = f"Tape({self.__name__}).value_and_grad"
        try:
            nums, single = self._argnums[argnums, len(args)]
        except (KeyError, TypeError):
            nums, single = normalize_argnums(argnums, len(args), fname)
            try:
                self._argnums[argnums, len(args)] = nums, single
            except TypeError:  # a list of argnums: not kept
                pass
        fast = self._fast_grad(args, nums)
        if fast is not None:
            return fast[0], (fast[1][0] if single else tuple(fast[1]))
        r = self._replay(args, "grad", nums, fname)
        program, outs = r.program, r.outs
        if program.out_dtype.kind != "f":
            check_real_output(outs[0], fname)
        if not program.scalar_output:
            if len(outs) != 1 or program.out_spec is not None:
                raise ValueError(
                    f"{fname}: grad needs a scalar output, but the function returned "
                    f"{len(outs)} values; use .vjp for several outputs.")
            raise ValueError(
                f"{fname}: grad needs a scalar output, but the function returned shape "
                f"{shape_of(outs[0])}; reduce it (e.g. np.sum) or use .vjp for non-scalar "
                f"outputs.")
        if r.found is not None:
            grads = [as_dtype(g if type(g) is np.ndarray else
                              _finish(g, program.input_shapes[s]), derivative_dtype(args[i]))
                     for g, s, i in zip(r.found, program.wanted[nums, False], nums)]
            return to_user(outs[0]), (grads[0] if single else tuple(grads))
        if r.grads is None:
            is_slot, s = program.outputs[0]
            seeds = [(s, np.float64(1.0))] if is_slot else []
            wanted = self._wanted(r, nums, fname)
            found = program.sweep(seeds, r.slots, r.kept, wanted, r.traced) if seeds else \
                [None] * len(wanted)
            r.grads = dict(zip(wanted, found))
        grads = self._assemble(r, nums)
        return to_user(outs[0]), (grads[0] if single else tuple(grads))

    def _fast_grad(self, args: tuple, nums: tuple[int, ...]) -> tuple[Any, list] | None:
        """``(value, gradients)`` when every argument is a float64 array and the matching
        recording is compiled for ``nums``; None otherwise (or when a guard fails), and the
        general path takes over."""
        shapes = []
        for a in args:
            if type(a) is not np.ndarray or a.dtype.type is not np.float64:
                return None
            shapes.append(a.shape)
        programs = self._programs.get((tuple(shapes), None))
        if not programs:
            return None
        program = programs[0]
        wanted = program.wanted.get((nums, False))
        if wanted is None or program.input_guards or len(wanted) != len(nums) or \
                program.out_dtype.kind != "f":
            return None
        fn = program.compiled.get(wanted)
        if not fn:
            return None
        try:
            outs, found = fn(list(args), _ONE)
        except GuardFailed:
            return None
        finally:
            _NEEDS.value = None
        shapes_in = program.input_shapes
        grads = [g if type(g) is np.ndarray else _finish(g, shapes_in[s])
                 for g, s in zip(found, wanted)]
        return to_user(outs[0]), grads

    def grad(self, *args: Any, argnums: int | Sequence[int] = 0) -> Any:
        """The gradient of a scalar-valued ``f`` at ``args`` (reverse sweep of the program)."""
        return self.value_and_grad(*args, argnums=argnums)[1]

    def vjp(self, *args: Any) -> tuple[Any, Callable[[Any], tuple]]:
        """``(f(*args), pullback)``; ``pullback(cotangent)`` gives one gradient per argument
        (``None`` for an argument that was recorded as a constant)."""
        fname = f"Tape({self.__name__}).vjp"
        r = self._replay(args, "keep")
        program, outs = r.program, r.outs
        value = tree_unflatten(program.out_spec,
                               [o if isinstance(o, Traced) else to_user(o) for o in outs])
        nums = tuple(range(len(args)))

        def pullback(cotangent: Any) -> tuple:
            cots, _ = tree_flatten(cotangent)
            if len(cots) != len(outs):
                raise ShapeError(f"{fname}: the cotangent has {len(cots)} leaves but the "
                                 f"output has {len(outs)}; pass one shaped like the output.")
            seeds = []
            for (is_slot, s), c, o in zip(program.outputs, cots, outs):
                c = c if isinstance(c, Traced) else np.asarray(c, dtype=np.float64)
                if shape_of(c) != shape_of(o):
                    raise ShapeError(f"{fname}: a cotangent has shape {shape_of(c)} but the "
                                     f"output it pairs with has shape {shape_of(o)}.")
                if is_slot:
                    seeds.append((s, c))
            wanted = self._wanted(r, nums, fname, constants_none=True)
            found = program.sweep(seeds, r.slots, r.kept, wanted, r.traced) if seeds else \
                [None] * len(wanted)
            r.grads = dict(zip(wanted, found))
            return tuple(self._assemble(r, nums))

        return value, pullback

    def jvp(self, args: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        """``(f(*args), J @ tangents)``: the program replayed on dual numbers."""
        return forward_jvp(self, args, tangents)

    def hvp(self, args: Sequence[Any], v: Any, argnums: int | Sequence[int] = 0) -> Any:
        """The Hessian of scalar ``f`` at ``args`` (w.r.t. ``argnums``) applied to ``v``.

        Forward over reverse: the reverse sweep of the program, replayed on dual numbers;
        the Hessian is never formed. ``v`` is shaped like the argument (a tuple of such for
        a tuple ``argnums``); so is the result.
        """
        args = tuple(args)
        nums, single = normalize_argnums(argnums, len(args), f"Tape({self.__name__}).hvp")
        vs = (v,) if single else tuple(v)
        if len(vs) != len(nums):
            raise ValueError(f"Tape({self.__name__}).hvp: {len(nums)} argument(s) "
                             f"differentiated but {len(vs)} direction(s) given.")

        def gradient_at(*chosen: Any) -> Any:
            full = list(args)
            for i, c in zip(nums, chosen):
                full[i] = c
            return self.grad(*full, argnums=nums if not single else nums[0])

        _, tangent = forward_jvp(gradient_at, tuple(args[i] for i in nums), vs)
        return tangent

    @staticmethod
    def _wanted(r: _Replayed, nums: tuple[int, ...], fname: str,
                constants_none: bool = False) -> tuple[int, ...]:
        """The input slots of the arguments ``nums``."""
        found = r.program.wanted.get((nums, constants_none))
        if found is not None:
            return found
        slot_of_leaf = r.program.slot_of_leaf
        wanted = []
        for i in nums:
            lo, hi = r.ranges[i]
            for leaf in range(lo, hi):
                s = slot_of_leaf.get(leaf)
                if s is None and not constants_none:
                    raise TypeError(
                        f"{fname}: argument {i} holds a {type(r.leaves[leaf]).__name__} "
                        f"that the tape treats as a constant (only float arrays and numbers "
                        f"are differentiated); pass it as floats, e.g. np.asarray(x, float).")
                if s is not None:
                    wanted.append(s)
        r.program.wanted[nums, constants_none] = tuple(wanted)
        return tuple(wanted)

    @staticmethod
    def _assemble(r: _Replayed, nums: tuple[int, ...]) -> list[Any]:
        """One gradient per argument in ``nums`` (trees like the argument), from the
        gradients of the input slots in ``r.grads`` (zeros where none arrived)."""
        program = r.program
        slot_of_leaf = program.slot_of_leaf
        results = []
        for i in nums:
            lo, hi = r.ranges[i]
            items = []
            for leaf in range(lo, hi):
                s = slot_of_leaf.get(leaf)
                if s is None:
                    items.append(None)
                    continue
                g = r.grads.get(s)
                shape = program.input_shapes[s]
                if g is None:
                    g = np.zeros(shape)
                elif not isinstance(g, Traced) and shape_of(g) != shape:
                    g = np.broadcast_to(g, shape)
                items.append(as_dtype(to_user(g), derivative_dtype(r.leaves[leaf])))
            if r.specs[i] is None:
                results.append(items[0])
            else:
                results.append(tree_unflatten(r.specs[i], items))
        return results


class _Replayed:
    """What one replay produced: the program, its values, and the arguments' layout."""

    __slots__ = ("program", "leaves", "ranges", "specs", "traced", "slots", "kept", "outs",
                 "grads", "found")

    def __init__(self, program: Program, leaves: list[Any], ranges: list[tuple[int, int]],
                 specs: list[Any], traced: bool) -> None:
        self.program, self.leaves, self.ranges = program, leaves, ranges
        self.specs, self.traced = specs, traced
        self.slots: list[Any] | None = None
        self.kept: list[Any] | None = None
        self.outs: list[Any] | None = None
        self.grads: dict[int, Any] | None = None
        self.found: list[Any] | None = None


_ONE = np.float64(1.0)


def _finish(g: Any, shape: tuple[int, ...]) -> Any:
    """A gradient as handed back: zeros when none arrived, broadcast to the input's shape."""
    if g is None:
        return np.zeros(shape)
    if not isinstance(g, Traced) and shape_of(g) != shape:
        g = np.broadcast_to(g, shape)
    return to_user(g)


def check_input_guards(program: Program, values: list[Any]) -> None:
    """Raise :class:`~dualad.tape.program.GuardFailed` unless ``values`` pass the
    recording's guards on its inputs."""
    for s, kind, recorded in program.input_guards:
        if not guard_holds(kind, recorded, values[s]):
            raise GuardFailed
