"""The Python backend: a program written out as one straight-line Python function (a name
per value, the resolved implementations and constants bound as globals), compiled after
``COMPILE_AFTER`` replays of one kind.

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> tape = record(lambda x: np.sum(np.sin(x)), np.zeros(3))
    >>> for _ in range(10):
    ...     _ = tape(np.ones(3))
    >>> tape.program.compiled["value"] is not None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..reverse_mode.backward import _NEEDS
from .program import GuardFailed, Operation, Program, accumulate, guard_holds, with_zeros

__all__ = ["MAX_COMPILED_OPS", "COMPILE_AFTER", "compiled_value", "compiled_grad"]

#: Programs longer than this are replayed by the loop of :meth:`Program.run` instead.
MAX_COMPILED_OPS = 4000
#: A program is compiled (about 0.1 ms per operation) on its this-many-th replay of one
#: kind; earlier replays run the loop of :meth:`Program.run`.
COMPILE_AFTER = 8


def _due(program: Program, what: Any) -> bool:
    """Count a replay of ``what``; whether it is time to compile it."""
    n = program.uses.get(what, 0) + 1
    program.uses[what] = n
    return n >= COMPILE_AFTER


class _Compiler:
    """Writes a program as one straight-line Python function (a name per value, the
    resolved implementations and constants bound as globals), which runs without the
    interpreter loop's per-operation bookkeeping."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.namespace: dict[str, Any] = {"GuardFailed": GuardFailed, "_holds": guard_holds,
                                          "_NEEDS": _NEEDS, "_acc": accumulate,
                                          "_zeros": with_zeros}
        self.lines: list[str] = []

    def bind(self, name: str, value: Any) -> str:
        self.namespace[name] = value
        return name

    def arg_exprs(self, index: int, e: Operation) -> list[str] | None:
        exprs = []
        refs = dict(e.refs)
        seqs = {pos: (kind, dict(items)) for pos, kind, items in e.seqs}
        for pos, a in enumerate(e.template):
            if pos in refs:
                exprs.append(f"v{refs[pos]}")
            elif pos in seqs:
                kind, items = seqs[pos]
                if kind not in (list, tuple):
                    return None
                parts = [f"v{items[j]}" if j in items else self.bind(f"c{index}_{pos}_{j}", b)
                         for j, b in enumerate(a)]
                text = ", ".join(parts)
                exprs.append(f"[{text}]" if kind is list else f"({text},)")
            else:
                exprs.append(self.bind(f"c{index}_{pos}", a))
        if e.kw:
            exprs.append("**" + self.bind(f"k{index}", e.kw))
        return exprs

    def forward(self) -> bool:
        p = self.program
        ins = ", ".join(f"v{s}" for s in range(p.n_inputs))
        self.lines.append(f"    {ins}{',' if p.n_inputs == 1 else ''} = inputs"
                          if p.n_inputs else "    pass")
        self.args: list[list[str]] = []
        for index, e in enumerate(p.ops):
            if e.kw_refs:
                return False
            exprs = self.arg_exprs(index, e)
            if exprs is None:
                return False
            self.args.append(exprs)
            fn = self.bind(f"f{index}", e.fn)
            self.lines.append(f"    v{e.out} = {fn}({', '.join(exprs)})")
            for j, (kind, recorded) in enumerate(e.guards):
                r = self.bind(f"r{index}_{j}", recorded)
                self.lines.append(f"    if not _holds({kind!r}, {r}, v{e.out}): "
                                  f"raise GuardFailed")
        return True

    def outputs(self) -> str:
        items = [f"v{v}" if is_slot else self.bind(f"o{i}", v) + (
                 ".copy()" if hasattr(v, "copy") and hasattr(v, "shape") else "")  # a
                 for i, (is_slot, v) in enumerate(self.program.outputs)]  # caller's own
        return "[" + ", ".join(items) + "]"

    def backward(self, wanted: tuple[int, ...], seed_slot: int) -> None:
        p = self.program
        plan = p.plan(wanted)
        grad_slots = {seed_slot} | set(wanted)
        for _index, e, _needs, targets, seq_targets, _gfn, _tell in plan:
            grad_slots.add(e.out)
            grad_slots.update(s for _, s in targets)
            grad_slots.update(s for _, live in seq_targets for _, s in live)
        multi = {e.out for e in p.ops if e.multi}
        for s in sorted(grad_slots):
            self.lines.append(f"    g{s} = None")
        self.lines.append(f"    g{seed_slot} = seed")
        for index, e, needs, targets, seq_targets, gfn, tell_needs in plan:
            lines = [f"    if g{e.out} is not None:"]
            g = f"g{e.out}"
            if e.multi:
                lines.append(f"        g{e.out} = _zeros(g{e.out}, v{e.out})")
            if tell_needs:
                lines.append(f"        _NEEDS.value = {self.bind(f'n{index}', needs)}")
            name = self.bind(f"d{index}", gfn)
            lines.append(f"        r = {name}({g}, v{e.out}, {', '.join(self.args[index])})")
            for pos, s in targets:
                add = f"_acc(g{s}, t)" if s in multi else f"g{s} + t"
                lines += [f"        t = r[{pos}]",
                          "        if t is not None:",
                          f"            g{s} = t if g{s} is None else {add}"]
            for pos, live in seq_targets:
                for j, s in live:
                    add = f"_acc(g{s}, t)" if s in multi else f"g{s} + t"
                    lines += [f"        t = r[{pos}][{j}]",
                              "        if t is not None:",
                              f"            g{s} = t if g{s} is None else {add}"]
            self.lines += lines
        self.grads = "[" + ", ".join(f"g{s}" for s in wanted) + "]"

    def build(self, signature: str, body_end: str) -> Callable[..., Any]:
        source = f"def replay({signature}):\n" + "\n".join(self.lines) + f"\n{body_end}\n"
        code = compile(source, f"<tape of {len(self.program.ops)} operations>", "exec")
        exec(code, self.namespace)  # noqa: S102 - our own generated replay code
        return self.namespace["replay"]


def compiled_value(program: Program) -> Callable[..., Any] | None:
    """``replay(inputs) -> output values``, or None when the program is not compiled."""
    fn = program.compiled.get("value", False)
    if fn is not False:
        return fn
    if not _due(program, "value"):
        return None
    fn = None
    if len(program.ops) <= MAX_COMPILED_OPS:
        c = _Compiler(program)
        if c.forward():
            fn = c.build("inputs", f"    return {c.outputs()}")
    program.compiled["value"] = fn
    return fn


def compiled_grad(program: Program, wanted: tuple[int, ...]) -> Callable[..., Any] | None:
    """``replay(inputs, seed) -> (output values, gradients of wanted)`` for a program with
    one scalar output, or None."""
    fn = program.compiled.get(wanted, False)
    if fn is not False:
        return fn
    if not _due(program, wanted):
        return None
    fn = None
    outputs = program.outputs
    if (len(program.ops) <= MAX_COMPILED_OPS and len(outputs) == 1 and outputs[0][0]
            and program.checked):
        c = _Compiler(program)
        if c.forward():
            out_slot = outputs[0][1]
            c.backward(wanted, out_slot)
            c.lines.append("    _NEEDS.value = None")
            fn = c.build("inputs, seed", f"    return {c.outputs()}, {c.grads}")
    program.compiled[wanted] = fn
    return fn
