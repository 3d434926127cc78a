"""Linear calls lowered to sparse matrices read from their structure
(dualad/tape/linear_probes.py): by the gradient rule per colour of rows, by dual numbers or
plain calls per colour of columns; every route gives the matrix that probing one column per
call gives, in few calls, and what is not linear (a maximum) is a selection."""

from __future__ import annotations

import numpy as np
import pytest

import dualad.tape.linear_probes as probes
import dualad.tape.lowering as lowering
from dualad.forward_mode.dual import Dual, partials_at
from dualad.sparsity.flows import SparsityTracer
from dualad.tape import record
from dualad.tape.linear_probes import ProbeRefused, linear_matrix
from dualad.tape.lowering import Linear, LoweringError, Select, lower

A = np.random.default_rng(0).standard_normal((5, 7))
K = np.array([0.5, -1.0, 2.0, 0.25])
CASES = [
    (lambda x: np.sum(np.sin(x), axis=1), (6, 7)),
    (lambda x: np.mean(np.sin(x), axis=0, keepdims=True), (6, 7)),
    (lambda x: np.sum(np.sin(x)), (300,)),  # more directions than one call carries
    (lambda x: A @ np.sin(x), (7, 3)),
    (lambda x: np.sin(x) @ A.T, (4, 7)),
    (lambda x: np.sum(np.sin(x), axis=(0, 2)), (3, 4, 5)),
    (lambda x: np.mean(np.sin(x)), (12,)),
    (lambda x: np.trace(np.sin(x), 1), (4, 6)),
    (lambda x: np.convolve(np.sin(x), K, "same"), (11,)),
    (lambda x: np.correlate(K, np.sin(x), "full"), (6,)),
    (lambda x: np.cumsum(np.sin(x), axis=1), (3, 5)),
    (lambda x: np.diff(np.sin(x), n=2, axis=0), (5, 3)),
    (lambda x: np.kron(A[:2, :3], np.sin(x)), (2, 2)),
    (lambda x: np.outer(np.sin(x), K), (3,)),
    (lambda x: np.tensordot(A, np.sin(x), axes=([1], [0])), (7, 2)),
    (lambda x: np.einsum("ij,jk->ik", A, np.sin(x)), (7, 2)),
]
ROUTES = ["rows", "dual columns", "plain columns"]


def column_by_column(f, x):
    """The matrix of a call linear in ``sin(x)``: one column per call."""
    g = lambda u: np.asarray(f(np.arcsin(u)), dtype=float).ravel()  # noqa: E731
    u0 = np.zeros(x.shape)
    base = g(u0)
    cols = []
    for i in range(x.size):
        u = np.zeros(x.size)
        u[i] = 0.5
        cols.append((g(u.reshape(x.shape)) - base) / 0.5)
    return np.column_stack(cols)


def dense(ins, n):
    m = ins.indptr.size - 1
    out = np.zeros((m, n))
    out[np.repeat(np.arange(m), np.diff(ins.indptr)), ins.indices] = ins.data
    return out


def steps(f, shape, monkeypatch=None, route="rows"):
    x = np.linspace(-0.9, 0.8, int(np.prod(shape))).reshape(shape)
    if route != "rows":
        monkeypatch.setattr(probes, "_rows", lambda *a: None)
    if route == "plain columns":
        def refuse(*args, **kwargs):
            raise TypeError("no rule on dual numbers here")
        monkeypatch.setattr(probes, "Dual", refuse)
    low = lower(record(f, x).program, [x])
    return [ins for ins in low.instructions if isinstance(ins, (Linear, Select))], low, x


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("f, shape", CASES)
def test_every_route_gives_the_matrix_of_column_probes(f, shape, route, monkeypatch):
    found, _, x = steps(f, shape, monkeypatch, route)
    assert len(found) == 1 and isinstance(found[0], Linear)
    expected = column_by_column(f, x)
    np.testing.assert_allclose(dense(found[0], x.size), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(found[0].offset, 0.0, atol=0)


def calls_counted(monkeypatch):
    calls = []
    probe = lowering._probe_call
    monkeypatch.setattr(lowering, "_probe_call", lambda *a: calls.append(1) or probe(*a))
    return calls


@pytest.mark.parametrize("f, shape, most", [
    (lambda x: np.sum(np.sin(x), axis=1), (64, 10), 8),
    (lambda x: np.sum(np.sin(x), axis=0), (512, 10), 8),   # beyond the old 4096 cap
    (lambda x: np.mean(np.sin(x)), (100, 100), 8),
    (lambda x: np.trace(np.sin(x)), (300, 300), 8),       # one call of the gradient rule
    (lambda x: np.convolve(np.sin(x), K, "same"), (10000,), 8),  # a band of 4 colours
])
def test_the_matrix_is_read_in_few_calls(f, shape, most, monkeypatch):
    calls = calls_counted(monkeypatch)
    found, _, _ = steps(f, shape)
    assert isinstance(found[0], Linear)
    # the zero point, the pattern, the probes, two random checks
    assert len(calls) <= most


def test_a_band_takes_as_many_colours_as_its_width():
    seen = []

    def f(x):
        if isinstance(x, Dual):
            seen.append(np.shape(partials_at(x, x.tag)))
        return np.convolve(x, K, "same")

    a = probes.linear_matrix(f, (50,), 50)  # no gradient rule given: columns
    assert seen == [(50, 4)]  # the tangents of 4 colours, in one call
    expected = np.column_stack([np.convolve(e, K, "same") for e in np.eye(50)])
    np.testing.assert_array_equal(a.dense(), expected)
    assert a.indices.size == np.count_nonzero(expected)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("shape", [(5, 4), (512, 10)])
def test_a_maximum_is_a_selection(shape, route, monkeypatch):
    found, _, _ = steps(lambda x: np.max(np.sin(x), axis=1), shape, monkeypatch, route)
    assert len(found) == 1 and isinstance(found[0], Select) and found[0].largest


def test_a_minimum_over_groups_of_one_is_read_as_a_matrix_or_a_selection():
    found, _, _ = steps(lambda x: np.min(np.sin(x), axis=1), (4, 1))
    assert len(found) == 1 and isinstance(found[0], (Select, Linear))
    found, _, _ = steps(lambda x: np.nansum(np.sin(x), axis=1), (4, 1))
    assert isinstance(found[0], Linear)  # a sum of one entry, not a selection: NaN gives 0


def test_a_call_without_dual_numbers_is_probed_by_plain_calls(monkeypatch):
    found, _, _ = steps(lambda x: np.sum(np.sin(x), axis=0), (3, 4), monkeypatch,
                        "plain columns")
    assert isinstance(found[0], Linear)
    np.testing.assert_array_equal(found[0].indptr, [0, 3, 6, 9, 12])
    np.testing.assert_allclose(found[0].data, 1.0)


def test_an_affine_call_keeps_its_offset():
    a = linear_matrix(lambda x: np.diff(x, prepend=2.0, append=-1.0), (4,), 5)
    np.testing.assert_allclose(a.offset, [-2.0, 0.0, 0.0, 0.0, -1.0])
    np.testing.assert_allclose(a.dense(), np.eye(5, 4) - np.eye(5, 4, -1))


def test_a_call_without_a_flow_is_probed_densely():
    def f(x):  # no numpy function: the tracer's flow would be wrong, the probes are not
        return np.asarray(x, dtype=float)[::-1] * 2.0

    a = linear_matrix(f, (5,), 5)
    np.testing.assert_allclose(a.dense(), 2.0 * np.eye(5)[::-1])


def test_what_is_not_linear_gives_none():
    assert linear_matrix(lambda x: np.sort(x), (6,), 6) is None
    assert linear_matrix(lambda x: x * x, (3,), 3) is None
    assert linear_matrix(lambda x: np.ptp(x, axis=0), (3, 2), 2) is None


def test_a_wrong_gradient_rule_is_caught_by_the_checks():
    # a transpose that disagrees with the call: the checks send the probes to the columns
    rules = []
    a = linear_matrix(lambda x: np.sum(x, axis=0), (50, 2), 2,
                      transpose=lambda g: rules.append(1) or np.full(100, 2.0))
    assert rules == [1]  # one call of the rule (the rows share no column), then columns
    np.testing.assert_array_equal(a.dense(), np.tile(np.eye(2), 50))


def test_a_flow_that_misses_entries_is_caught_by_the_checks():
    def f(x):  # the flow says "the identity", the values say "reversed"
        return x if isinstance(x, SparsityTracer) else np.asarray(x)[::-1] * 3.0

    a = linear_matrix(f, (6,), 6)
    np.testing.assert_array_equal(a.dense(), 3.0 * np.eye(6)[::-1])


def test_too_large_matrices_are_refused(monkeypatch):
    monkeypatch.setattr(probes, "MAX_MATRIX_ENTRIES", 1000)
    with pytest.raises(ProbeRefused, match="too many to hold"):
        linear_matrix(lambda x: np.cumsum(x), (50,), 50)
    x = np.linspace(0.0, 1.0, 50)
    with pytest.raises(LoweringError, match=r"Method\[cumsum\]\(\) on 50 entries is a 50 x 50"):
        lowering._lower_linear(*linear_call(lambda x: np.cumsum(x), x))
    monkeypatch.setattr(probes, "MAX_MATRIX_ENTRIES", 1 << 22)
    monkeypatch.setattr(probes, "MAX_PROBE_WORK", 1000)
    with pytest.raises(ProbeRefused, match="too many to read"):
        linear_matrix(lambda x: np.cumsum(x), (50,), 50)


def test_two_computed_operands_of_a_linear_call_are_refused_clearly():
    x = np.linspace(0.0, 1.0, 5)
    with pytest.raises(LoweringError, match="declared linear in each of them"):
        lowering._lower_linear(*linear_call(lambda x: np.convolve(x, np.sin(x)), x))


def linear_call(f, x):
    """The arguments of ``_lower_linear`` for the last operation ``f`` records."""
    program = record(f, x).program
    slots, _ = program.run([x], False)
    sizes = [int(np.size(v)) for v in slots]
    e = program.ops[-1]
    return e, slots, sizes, lowering._slot_positions(e)
