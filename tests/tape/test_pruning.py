"""The pruning of generated kernel source: the pruned body computes what the body did."""

from __future__ import annotations

import math

import numpy as np

from dualad.tape.pruning import prune


def run(lines, **inputs):
    source = "def f(" + ", ".join(inputs) + "):\n" + "\n".join(lines) + "\n"
    namespace = {"np": np, "math": math}
    exec(source, namespace)  # noqa: S102
    return namespace["f"](**inputs)


BODY = [
    "    _i = 0",
    "    _d0 = -2.5",
    "    _d1 = 1e-3",
    "    _l1 = _x0[_i] * 3.0",  # read only by a dropped line: dropped too
    "    _n1 = _l1",
    "    _T = np.zeros(4)",
    "    for _i in range(4):",
    "        _u = _x0[_i] * _d0",
    "        _dead = math.sin(_u)",
    "        _T[_i] = _u + _d1",
    "    _acc = 0.0",
    "    for _j in range(4):",
    "        _acc += _T[_j]",
    "    if _acc > 0.0:",
    "        _unused = 1.0",
    "    else:",
    "        _acc = -_acc",
    "    _a, _b, = _x0[0], _x0[1]",
    "    return _acc, _T, _a",
]


def test_pruned_body_computes_the_same():
    x = np.array([0.5, -1.0, 2.0, 3.5])
    (kind, lines), = prune([("numba", BODY)])
    assert kind == "numba"
    assert not any("_dead" in line or "_n1" in line or "_l1" in line for line in lines)
    assert not any(line.strip().startswith(("_d0 =", "_d1 =")) for line in lines)
    assert "for _i in range(4):" in "\n".join(lines)  # a loop variable is never substituted
    expected, got = run(BODY, _x0=x), run(lines, _x0=x)
    assert expected[0] == got[0] and expected[2] == got[2]
    np.testing.assert_array_equal(expected[1], got[1])
    assert run(lines, _x0=-x)[0] == run(BODY, _x0=-x)[0]  # the else branch


def test_names_read_in_a_later_segment_are_kept():
    segments = [("numba", ["    _v1 = _x0 * 2.0", "    _v2 = _x0 + 1.0"]),
                ("python", ["    _v3 = np.tanh(_v1)"]),
                ("numba", ["    return _v3"])]
    pruned = prune(segments)
    flat = [line for _, part in pruned for line in part]
    assert "    _v1 = _x0 * 2.0" in flat and not any("_v2" in line for line in flat)
    assert run(flat, _x0=0.3) == np.tanh(0.6)


def test_source_it_does_not_understand_is_left_alone():
    segments = [("numba", ["    _v1 = f(_x0,", "            2.0)", "    return _x0"])]
    assert prune(segments) == segments


COPIES = [
    "    _v0 = _x0",  # a parameter, never updated: its readers read _x0
    "    _p1 = _v0[1]",
    "    _d1 = _p1",  # a chain of copies
    "    _e1 = _d1",
    "    _r = _x0[0]",
    "    _c = _r",  # its source is assigned again below: kept
    "    _r = _x0[2]",
    "    _T = np.zeros(2)",
    "    _B = _T",  # its source is updated below: kept
    "    _T[0] = 1.0",
    "    _late = _q",  # its source is assigned after it (a later iteration's): kept
    "    _q = _x0[1] * 3.0",
    "    _s = _late",
    "    return _e1 * 2.0 + _c + _r + _B[0], _s",
]


def test_copies_are_read_through():
    x = np.array([0.5, -1.0, 2.0])
    (_, lines), = prune([("numba", COPIES[:10] + [COPIES[-1].replace(", _s", "")])])
    text = "\n".join(lines)
    assert "_d1" not in text and "_e1" not in text and "_v0" not in text
    assert "return _p1 * 2.0" in text and "_p1 = _x0[1]" in text
    assert "_c = _r" in text and "_B = _T" in text
    assert run(lines, _x0=x) == run(COPIES[:10] + [COPIES[-1].replace(", _s", "")], _x0=x)
    (_, lines), = prune([("numba", COPIES)])
    assert "    _late = _q" in lines  # would read _q before it exists: kept as written
