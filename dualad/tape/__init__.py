"""Record once, replay fast: ``ad.record(f, *example_args)`` gives a :class:`Tape`.

The package holds one concept per module: :mod:`~dualad.tape.program` (the recorded
operations, guards, the replay and the reverse sweep), :mod:`~dualad.tape.recording` (running
``f`` on graph nodes and linearising what it called), :mod:`~dualad.tape.python_backend`
(programs written out as straight-line Python), :mod:`~dualad.tape.recorded_tape`
(recording and replaying a function at new inputs), :mod:`~dualad.tape.tape` (the
:class:`Tape` users hold: that, and ``compile``), :mod:`~dualad.tape.lowering` (programs as flat float64
instructions), :mod:`~dualad.tape.numba_backend` (those written as Numba kernels) and
:mod:`~dualad.tape.jit` (``ad.jit``: recording, compiling and calling them) and
:mod:`~dualad.tape.compiled_tape` (``tape.compile()``: a tape's transforms compiled).

Example:
    >>> import numpy as np
    >>> from dualad.tape import record
    >>> record(lambda x: np.sum(x ** 2), np.zeros(2)).grad(np.array([1.0, 2.0]))
    array([2., 4.])
"""

from .program import Program
from .recording import TapeRetraceWarning, ValueNode
from .tape import Tape, record

__all__ = ["Program", "Tape", "TapeRetraceWarning", "ValueNode", "record"]


def __dir__() -> list[str]:
    """This module's face: the tape API."""
    return sorted(__all__)
