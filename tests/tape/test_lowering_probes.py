"""Linear calls lowered to sparse matrices: read from the tangents of dual numbers (a few
calls) or probed one column per call; both give the same matrix, and what is not linear
(a maximum) is a selection either way."""

from __future__ import annotations

import numpy as np
import pytest

import dualad.tape.lowering as lowering
from dualad.tape import record
from dualad.tape.lowering import Linear, Select, lower

A = np.random.default_rng(0).standard_normal((5, 7))
CASES = [
    (lambda x: np.sum(np.sin(x), axis=1), (6, 7)),
    (lambda x: np.mean(np.sin(x), axis=0, keepdims=True), (6, 7)),
    (lambda x: np.sum(np.sin(x)), (300,)),  # more directions than one call carries
    (lambda x: A @ np.sin(x), (7, 3)),
    (lambda x: np.sin(x) @ A.T, (4, 7)),
    (lambda x: np.sum(np.sin(x), axis=(0, 2)), (3, 4, 5)),
    (lambda x: np.mean(np.sin(x)), (12,)),
]


def steps(f, shape, monkeypatch=None, plain=False):
    x = np.linspace(-1.0, 2.0, int(np.prod(shape))).reshape(shape)
    if plain:
        monkeypatch.setattr(lowering, "_columns_by_tangents", lambda *a: None)
    low = lower(record(f, x).program, [x])
    return [ins for ins in low.instructions if isinstance(ins, (Linear, Select))], low, x


@pytest.mark.parametrize("f, shape", CASES)
def test_tangents_give_the_matrix_column_probes_give(f, shape, monkeypatch):
    by_tangents, _, _ = steps(f, shape)
    with monkeypatch.context() as m:
        by_columns, _, _ = steps(f, shape, m, plain=True)
    assert len(by_tangents) == len(by_columns) == 1
    a, b = by_tangents[0], by_columns[0]
    assert isinstance(a, Linear) and isinstance(b, Linear)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(a.offset, b.offset)


def test_the_matrix_is_read_in_few_calls(monkeypatch):
    calls = []
    probe = lowering._probe_call
    monkeypatch.setattr(lowering, "_probe_call", lambda *a: calls.append(1) or probe(*a))
    steps(lambda x: np.sum(np.sin(x), axis=1), (64, 10))
    assert len(calls) <= 8  # the offset, 3 calls on dual numbers, 3 random checks


def test_a_maximum_is_a_selection(monkeypatch):
    for plain in (False, True):
        with monkeypatch.context() as m:
            found, _, _ = steps(lambda x: np.max(np.sin(x), axis=1), (5, 4), m, plain=plain)
        assert len(found) == 1 and isinstance(found[0], Select) and found[0].largest


def test_a_call_without_dual_numbers_is_probed_by_columns(monkeypatch):
    def refuse(*args, **kwargs):
        raise TypeError("no rule on dual numbers here")

    monkeypatch.setattr(lowering, "Dual", refuse)
    found, _, _ = steps(lambda x: np.sum(np.sin(x), axis=0), (3, 4))
    assert isinstance(found[0], Linear)
    np.testing.assert_array_equal(found[0].indptr, [0, 3, 6, 9, 12])
    np.testing.assert_allclose(found[0].data, 1.0)
