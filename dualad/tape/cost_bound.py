"""A lower bound on the compile cost of generated source, kept while the source is written.

:mod:`~dualad.tape.numba_backend` refuses an entry whose Numba source costs more than
``MAX_COMPILE_COST`` once pruned (:func:`~dualad.tape.pruning.prune`, then
:func:`~dualad.tape.numba_backend.compile_cost`); such programs run in the compiled
interpreter. Writing and pruning the whole source of a program far beyond the cap costs
most of its first call, so the writer keeps this bound and stops as soon as it passes the
cap: since the bound never exceeds the pruned cost, no program changes side.

The bound counts, at ``compile_cost``'s rates (:func:`line_cost`), only the
Numba lines the pruning keeps whatever follows: lines that assign no local (stores into
arrays, updates, returns, raises), and assignments to a local that such a line reads,
directly or through other assignments counted (pruning keeps every assignment of a local
that a kept line reads). Block headers (a loop whose body is pruned away goes with it),
assignments of a number and copies of another local (pruning writes the number, or the
local copied, into their readers) are not counted; what a copy reads is kept with it.
Lines of the Python glue cost nothing but keep what they read. The rules follow
:mod:`~dualad.tape.pruning`'s; ``tests/tape/test_cost_bound.py`` checks, on every entry
of sample and random programs, that no entry changes side of the cap.

Example:
    >>> bound = CostBound()
    >>> for line in ["    _l1 = math.sin(_x0)", "    _d1 = 0.5", "    _u2 = _l1 * _d1",
    ...              "    _unread = _x0 * 2.0", "    _c = _u2", "    return _c"]:
    ...     cost = bound.add(line)
    >>> cost  # the return, then _u2 and _l1 that it reads: not _d1, _unread or the copy
    4.5
"""

from __future__ import annotations

from .pruning import _ASSIGN, _COPY, _HEADER, _LITERAL, _NAME  # the forms pruning reads

__all__ = ["CostBound", "line_cost"]

#: The weights of :func:`line_cost`, in units of about 1.25 ms of CPU (fitted on loop-written
#: programs, the Rosenbrock function, a 1-D Brusselator, Lorenz-96 and scalar chains, on a
#: 2-core AMD EPYC): a line of straight-line code, a line inside a loop, what a
#: straight-line line adds per array subscript, and what any line adds per call of
#: ``_where`` and per branch
#: (Numba types and lowers each constant-index access on its own, and its SSA pass grows
#: with the basic blocks times the locals).
STRAIGHT, LOOP, SUBSCRIPT, SELECT, BRANCH = 1.5, 4.5, 4.0, 3.0, 10.0


def line_cost(line: str) -> float:
    """The compile cost of one Numba line (see the weights above). Pruning writes numbers
    and copied locals into lines, which changes none of what is counted.

    Example:
        >>> line_cost("    _l3 = _x0[4] * _x0[5]"), line_cost("        _v3[_i] = _l2")
        (9.5, 4.5)
    """
    calls = SELECT * line.count("_where(") + \
        BRANCH * (line.count(" if ") + line.count(" and ") + line.count(" or "))
    if line.startswith("        "):
        return LOOP + calls
    return STRAIGHT + SUBSCRIPT * line.count("[") + calls


class CostBound:
    """The cost of the lines added so far that pruning certainly keeps (see the module)."""

    __slots__ = ("cost", "_live", "_pending")

    def __init__(self) -> None:
        self.cost = 0.0
        self._live: set[str] = set()  # locals a kept line reads
        self._pending: dict[str, list[tuple[float, list[str]]]] = {}  # their assignments

    def add(self, line: str, numba: bool = True) -> float:
        """Count ``line`` (of the Numba part, else of the Python glue); the bound so far."""
        weight = line_cost(line) if numba else 0.0
        m = _ASSIGN.match(line)
        if m is None:
            if not _HEADER.match(line):
                self._keep(weight, _NAME.findall(line))
            return self.cost
        name, value = m.group(2), m.group(3).strip()
        if _LITERAL.match(value):  # written into its readers
            return self.cost
        reads = _NAME.findall(value)
        if _COPY.match(value):  # its readers may read the local copied instead
            weight = 0.0
        if name in self._live:
            self._keep(weight, reads)
        else:
            self._pending.setdefault(name, []).append((weight, reads))
        return self.cost

    def _keep(self, weight: float, reads: list[str]) -> None:
        """A kept line: its cost, and the assignments of what it reads, transitively."""
        self.cost += weight
        todo = [name for name in reads if name not in self._live]
        while todo:
            name = todo.pop()
            if name in self._live:
                continue
            self._live.add(name)
            for w, more in self._pending.pop(name, ()):
                self.cost += w
                todo.extend(n for n in more if n not in self._live)
