"""The :class:`Tape` facade: a recorded function (:mod:`~dualad.tape.recorded_tape`)
that also compiles (``tape.compile()``, :mod:`~dualad.tape.compiled_tape`), and
:func:`record`, which makes one.

Example:
    >>> import numpy as np
    >>> tape = record(lambda x: np.sum(x ** 2), np.zeros(3))
    >>> tape.value_and_grad(np.array([1.0, 2.0, 3.0]))
    (array(14.), array([2., 4., 6.]))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.allocations import allocation_policy
from .compiled_tape import CompiledTape
from .recorded_tape import RecordedTape
from .recording import TapeRetraceWarning

__all__ = ["Tape", "TapeRetraceWarning", "record"]


class Tape(RecordedTape):
    """A function recorded by :func:`record`, replayed at new inputs.

    ``tape(*args)`` gives the value; ``.grad(*args, argnums=0)``, ``.value_and_grad``,
    ``.vjp(*args)``, ``.jvp(args, tangents)`` and ``.hvp(args, v)`` its derivatives;
    ``.compile()`` the same compiled. Float arguments (arrays and numbers, also inside
    tuples, lists and dicts) are the recorded inputs; every other argument is a constant
    of the recording (a different value records again).

    Example:
        >>> import numpy as np
        >>> tape = Tape(lambda x: np.sum(x ** 3))
        >>> float(tape.grad(np.float64(2.0)))
        12.0
    """

    def compile(self, fallback: str = "warn") -> CompiledTape:
        """This tape compiled with Numba (see :func:`dualad.jit`): a ``CompiledTape`` with
        ``__call__``, ``.grad``, ``.value_and_grad``, ``.jvp``, ``.vjp`` and ``.hvp``.

        Example:
            >>> import numpy as np
            >>> from dualad.tape import record
            >>> fast = record(lambda x: np.sum(x * x), np.ones(3)).compile()
            >>> fast.grad(np.array([1.0, 2.0, 3.0]))
            array([2., 4., 6.])
        """
        return CompiledTape(self, fallback)


def record(f: Callable[..., Any], *example_args: Any, strict: bool = False,
           allocations: str = "promote") -> Tape:
    """Record ``f`` at ``example_args`` once; replay the returned :class:`Tape` at new inputs.

    ``strict=True`` refuses (``ShapeError``) arguments whose shapes differ from the recorded
    ones instead of recording again.

    Example:
        >>> import numpy as np
        >>> from dualad.tape import record
        >>> tape = record(lambda x: x ** 3 if x > 0 else -x, 1.0)
        >>> float(tape.grad(2.0))
        12.0
    """
    f = allocation_policy(f, allocations, "record")
    tape = Tape(f, strict=strict)
    key, _, inputs, ranges, _, _ = tape._split(example_args)
    tape._programs_for(example_args, key, inputs, ranges)
    return tape
