"""The compile-cost cap decided while the source is written (dualad/tape/cost_bound.py):
the bound never exceeds the pruned source's cost, so no program changes side of the cap,
and a program far beyond the cap is refused before its source is written in full."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dualad.tape.numba_backend as backend
from dualad.tape import record
from dualad.tape.cost_bound import CostBound, line_cost
from dualad.tape.lowering import LoweringError, lower
from dualad.tape.numba_backend import NumbaProgram, compile_cost
from dualad.tape.pruning import prune

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from strategies import chain, programs  # noqa: E402


class _Written(Exception):
    """Raised in place of importing (compiling) the source: the cap let it through."""


@pytest.fixture
def no_compile(monkeypatch):
    """Entries stop where they would import their module; ``costs`` collects the exact
    (pruned) cost each one was checked at."""
    costs: list[float] = []

    def cost(segments):
        found = compile_cost(segments)
        costs.append(found)
        return found

    def written(source, subdirectory=None):
        raise _Written

    monkeypatch.setattr(backend, "compile_cost", cost)
    monkeypatch.setattr(backend, "import_kernel_module", written)
    # what the parts of a cut program hand each other is counted once they are assembled,
    # on top of the lines' cost (the bound stays below it): left out of the sides checked
    monkeypatch.setattr(backend, "INTERFACE", 0.0)
    return costs


def model(x):
    """Gathers, a row sum, a product of computed matrices, a guard (np.where)."""
    a = x.reshape(2, -1)
    b = np.tanh(a) * np.exp(-a[::-1] ** 2) + 0.5 * a.sum(axis=0)
    c = np.concatenate([b[0], np.roll(b[1], 1)])
    m = (c[:, None] * np.cos(x)) @ np.sin(x)
    return np.where(x > 0.2, m * x[0], np.sqrt(1.5 + x * x))


ENTRIES = {
    "value": lambda code: code.value(),
    "gradient": lambda code: code.gradient((0,)),
    "value-less gradient": lambda code: code.gradient((0,), value=False),
    "jacobian": lambda code: code.jacobian((0,)),
    "jvp": lambda code: code.jvp((0,)),
    "vjp": lambda code: code.vjp((0,)),
    "flat_gradient": lambda code: code.flat_gradient(0),
    "compressed": lambda code: code.compressed_jacobian(
        (0,), np.arange(code.low.sizes[0]), np.zeros(code.low.sizes[0], dtype=np.intp),
        np.arange(code.low.sizes[0])),
}


def _outcome(low, entry, cap, monkeypatch):
    """``"written"`` (the cap let the entry through), or the LoweringError's message."""
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", cap)
    try:
        ENTRIES[entry](NumbaProgram(low))
    except _Written:
        return "written"
    except LoweringError as exc:
        return str(exc)
    raise AssertionError("the entry was neither written nor refused")


def _check_sides(low, entry, costs, monkeypatch):
    """At its exact cost, an entry is written; half a unit below, it is refused."""
    costs.clear()
    try:
        found = _outcome(low, entry, 10**9, monkeypatch)
    except LoweringError:
        return None
    if found != "written":  # not for this program (a scalar output's gradient, say)
        return None
    exact = costs[-1]
    assert _outcome(low, entry, exact, monkeypatch) == "written"
    refused = _outcome(low, entry, exact - 0.5, monkeypatch)
    assert "MAX_COMPILE_COST" in refused, refused
    return exact


def _lowered(f, x):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return lower(record(f, x).program, [x])


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("f, x", [
    (lambda x: np.sum(chain(x, 40)), np.linspace(0.1, 0.5, 8)),
    (lambda x: chain(x, 30), np.linspace(0.1, 0.5, 8)),
    (lambda x: np.sum(chain(x, 60)), 0.3),
    (lambda x: np.sum(model(x) ** 2), np.linspace(-0.9, 1.1, 6)),
    (model, np.linspace(-0.9, 1.1, 6)),
], ids=["chain-vector-loss", "chain-vector", "chain-scalar", "model-loss", "model"])
def test_no_entry_changes_side_of_the_cap(no_compile, monkeypatch, entry, f, x):
    low = _lowered(f, x)
    assert _check_sides(low, entry, no_compile, monkeypatch) is not None or \
        entry in ("gradient", "value-less gradient", "flat_gradient")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_ops=12, max_inputs=1))
def test_random_programs_keep_their_side_of_the_cap(no_compile, monkeypatch, program):
    x = program.inputs[0]
    try:
        low = _lowered(lambda y: np.sum(program(y)), x)
    except Exception:  # noqa: BLE001 - a program that does not lower: nothing to decide
        return
    for entry in ("value", "gradient", "jacobian"):
        _check_sides(low, entry, no_compile, monkeypatch)


def test_the_bound_is_below_the_pruned_cost_and_close_to_it(monkeypatch):
    """On every entry of a 300-op chain, the bound of the whole source is at most the
    cost of the pruned source, and within 5% of it (it stops writing near the cap)."""
    seen: list[tuple[float, float]] = []

    def spy(self, name, w, params):
        bound = CostBound()
        for kind, lines in w.segments:
            for line in lines:
                bound.add(line, kind == "numba")
        seen.append((bound.cost, compile_cost(prune([(k, list(v)) for k, v in w.segments]))))
        raise _Written

    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 10**9)
    monkeypatch.setattr(NumbaProgram, "_module", spy)
    low = _lowered(lambda x: np.sum(chain(x, 300)), np.linspace(0.1, 0.5, 8))
    for entry in ENTRIES:
        with pytest.raises(_Written):
            ENTRIES[entry](NumbaProgram(low))
    assert len(seen) == len(ENTRIES)
    for bound, pruned in seen:
        assert bound <= pruned
        assert bound >= 0.95 * pruned


def test_a_program_far_beyond_the_cap_is_refused_before_pruning(monkeypatch):
    """A 1000-op chain's gradient is refused while its source is written: nothing is
    pruned, and only part of the source was written."""
    pruned: list[int] = []
    monkeypatch.setattr(backend, "prune", lambda segments: pruned.append(1) or segments)
    written: list[int] = []
    add = CostBound.add

    def counted(self, line, numba=True):
        written.append(1)
        return add(self, line, numba)

    monkeypatch.setattr(CostBound, "add", counted)
    low = _lowered(lambda x: np.sum(chain(x, 1000)), np.linspace(0.1, 0.5, 8))
    with pytest.raises(LoweringError, match="costs more than .* > MAX_COMPILE_COST"):
        NumbaProgram(low).gradient((0,))
    assert not pruned
    partial = len(written)
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 10**9)
    written.clear()
    monkeypatch.setattr(NumbaProgram, "_module", lambda self, name, w, params: None)
    NumbaProgram(low).gradient((0,))
    assert partial < 0.5 * len(written)


def test_bound_counts_what_pruning_keeps():
    """Lines read by kept lines count, through chains of assignments and wherever the
    reader comes (before or after the assignment); unread ones, numbers and copies (their
    readers read what they copy) do not."""
    lines = [("numba", ["    _a1 = np.zeros(4)",
                        "    for _i in range(4):",
                        "        _l2 = math.sin(_x0[_i])",
                        "        _l3 = _l2 * 2.0",
                        "        _dead = _l2 + 1.0",
                        "        _c = 0.5",
                        "        _a1[_i] += _l3 * _c"]),
             ("python", ["    _g = np.tanh(_a1)"]),
             ("numba", ["    _h = _g * 3.0", "    _k = _h", "    return _k"])]
    bound = CostBound()
    for kind, part in lines:
        for line in part:
            bound.add(line, kind == "numba")
    kept = compile_cost(prune(lines))
    # kept: _a1 = ..., _l2, _l3, _a1[_i] += ..., _h, return (the loop header is not counted)
    straight, loop = line_cost("    _h = _g * 3.0"), line_cost("        _l3 = _l2 * 2.0")
    assert bound.cost == straight + 3 * loop + 2 * straight
    assert kept == bound.cost + straight  # and the loop header
    assert "_k" not in "".join(line for _, part in prune(lines) for line in part)
