"""The source of the compiled interpreter (:mod:`dualad.tape.interpreter`): its opcodes and
one Numba function per pass, generated from the rules tables.

Every elementwise rule whose function Numba compiles on float64 scalars becomes one opcode:
its value (:func:`~dualad.derivatives.language.numba_scalar_call`) and its partials (the
rule's expressions in the scalar language, :func:`~dualad.derivatives.language.
numba_scalar_source`) are written into the branches of the passes; so do the predicates the
tables declare not differentiable (comparisons, ``isnan``, ...) that Numba compiles, as
guard opcodes and as opcodes computing masks (1.0 / 0.0, without derivative). The structural opcodes (copies, sparse linear maps, max/min selections, order statistics,
guards on read values) are written here once. Nothing in this module names a numpy
function.

An instruction is ``WIDTH`` integers of the code array ``C`` (after ``HEADER``
integers): ``op, n, out, a, sa, b, sb, p, q, m, c, sc``: ``n`` entries written from
``V[out]`` on, operands read at ``V[a + i * sa]``, ``V[b + i * sb]`` and ``V[c + i * sc]``
(a step of 0 broadcasts one entry), ``p`` an offset into ``C`` (index tables), ``q`` an
offset into the float array ``F`` (coefficients, recorded readings), ``m`` a count. ``V`` holds every entry
of every value (the inputs first, then each instruction's result, then the constants),
``A`` their adjoints, ``T`` their tangents (a row per entry, a column per direction).

Example:
    >>> from dualad.tape.interpreter_source import interpreter_source
    >>> source, opcodes = interpreter_source()
    >>> opcodes["gather"], "def forward(" in source
    (0, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..derivatives.language import (
    NUMBA_UFUNCS,
    numba_predicate_call,
    numba_scalar_call,
    numba_scalar_source,
)
from ..derivatives.registry import not_differentiable_functions, rules
from ..derivatives.scalar_forms import scalar_forms

__all__ = ["FIELDS", "HEADER", "WIDTH", "interpreter_source", "map_key", "predicate_key"]

#: The fields of one instruction, in order.
FIELDS = ("op", "n", "out", "a", "sa", "b", "sb", "p", "q", "m", "c", "sc")
WIDTH = len(FIELDS)
#: ``C[0]``: instructions; ``C[1]``: entries of ``V``; ``C[2]``: where the constants
#: start in ``V``; ``C[3]``: how many there are; ``C[4]``: how many entries the inputs
#: have (``V[:C[4]]``); ``C[5]``: where the constants start in ``F``.
HEADER = 6
#: The structural opcodes, numbered first.
STRUCTURAL = ("gather", "linear", "select", "matmul", "guard_bool", "guard_int",
              "guard_float", "order")


def map_key(name: str, arg_names: Sequence[str], temps: Sequence[str],
            partials: Sequence[str], value: str | None = None) -> tuple:
    """The opcode key of an elementwise call: its function (or the scalar source of its
    value) and the exact scalar source of its partials (a rule redefined since the
    interpreter was written has no opcode)."""
    return ("map", name, tuple(arg_names), tuple(t.strip() for t in temps), tuple(partials),
            value)


def predicate_key(name: str) -> tuple:
    return ("predicate", name)


def _is_predicate(f: Any) -> bool:
    return isinstance(f, np.ufunc) and f.nout == 1 and f.nin in (1, 2) and any(
        t == "d" * f.nin + "->?" for t in f.types)


def _numba_predicates() -> list[str]:
    """The predicates the loaded tables declare (not differentiable) that Numba compiles."""
    try:
        from numba.np import ufunc_db

        supported = set(ufunc_db.get_ufuncs())
    except Exception:  # noqa: BLE001 - another Numba: no predicate opcodes
        return []
    return sorted(f.__name__ for f in not_differentiable_functions()
                  if _is_predicate(f) and f in supported)


def _maps() -> list[tuple[tuple, str, list[str], list[str], list[str]]]:
    """``(key, value source, temps, partials, arg names)`` per elementwise rule Numba
    compiles, in the registry's order (one per function)."""
    found = []
    seen = set()
    for rule in rules():
        name = rule.numpy_name
        if name not in NUMBA_UFUNCS or len(rule.arg_names) > 3 or name in seen:
            continue
        body = numba_scalar_source(rule.expressions, indent="")
        if body is None:
            continue
        temps, partials = body
        seen.add(name)
        args = list(rule.arg_names)
        found.append((map_key(name, args, temps, partials), numba_scalar_call(name, args),
                      [t.strip() for t in temps], list(partials), args))
    for form in scalar_forms():  # elementwise functions that are not ufuncs (np.where)
        value = numba_scalar_source([form.value], indent="")
        body = numba_scalar_source(list(form.derivatives), indent="")
        if value is None or body is None or value[0] or len(form.arg_names) > 3:
            continue
        temps, partials = body
        args = list(form.arg_names)
        found.append((map_key("", args, temps, partials, value[1][0]), value[1][0],
                      [t.strip() for t in temps], list(partials), args))
    return found


#: A partial that is 1 or 0 by a condition (``(1.0 if c else 0.0)``).
_SELECTS = re.compile(r"\((?:1\.0 if .+ else 0\.0|0\.0 if .+ else 1\.0)\)")


def _renamed(text: str, names: dict[str, str], op: int) -> str:
    """``text`` with the rule's argument names (and ``y``) replaced and its temporaries
    made unique to opcode ``op`` (Numba unifies a name's type across branches)."""
    pattern = r"(?<![.\w])(" + "|".join(re.escape(k) for k in names) + r")\b"
    text = re.sub(pattern, lambda m: names[m.group(1)], text)
    return re.sub(r"\b_t(\d+)\b", lambda m: f"_t{op}_{m.group(1)}", text)


def _is_zero(expr: str) -> bool:
    return expr.strip().strip("()") in ("0.0", "-0.0", "0")


class _Branches:
    """The bodies of one pass, per opcode: written into helper functions of at most
    ``GROUP`` opcodes each (Numba's compile time grows faster than linearly with a
    function's size), each dispatching by a balanced tree of comparisons, and the pass's
    own tree over the helpers."""

    def __init__(self, name: str, params: str, status: bool,
                 each: tuple[list[str], list[str]] = ([], []),
                 only: frozenset[int] | None = None) -> None:
        self.name, self.params, self.status = name, params, status
        self.only = only  # the opcodes written (None: every one)
        self.bodies: dict[int, list[str]] = {}
        self.per_entry: set[int] = set()  # bodies that are one loop over the entries
        self.before, self.after = each  # per entry, around those bodies

    def add(self, op: int, lines: list[str], whole: bool = False) -> None:
        """``lines`` run opcode ``op``; unless ``whole``, a body that is one loop over the
        entries runs inside the helper's loop (with the pass's lines per entry)."""
        if not lines or (self.only is not None and op not in self.only):
            return
        if not whole and lines[0] == "for _i in range(_n):" and all(
                line.startswith("    ") for line in lines[1:]):
            self.per_entry.add(op)  # kept without its loop: the helper loops once
            lines = [line[4:] for line in lines[1:]]
        self.bodies[op] = lines

    def helpers(self, decorator: str) -> list[str]:
        """The helper functions (they return 1 where a guard fails, else 0). A body that
        is one loop over the entries is written inside the helper's one loop (measured:
        Numba compiles a loop around a tree of branches about twice as fast as a tree of
        loops)."""
        out: list[str] = []
        for k, group in enumerate(self._groups()):
            out += ["", "", decorator, f"def _{self.name}_{k}({self.params}):"]
            whole = [op for op in group if op not in self.per_entry]
            each = [op for op in group if op in self.per_entry]
            if whole:
                bodies = {op: self.bodies[op] + ["return 0"] for op in whole}
                out += _tree(whole, bodies, 4)
            if each:
                out.append("    for _i in range(_n):")
                out += ["        " + line for line in self.before]
                out += _tree(each, self.bodies, 8)
                out += ["        " + line for line in self.after]
            out.append("    return 0")
        return out

    def dispatch(self, depth: int) -> list[str]:
        """The pass's calls of its helpers, by opcode."""
        groups = self._groups()
        if not groups:
            return [" " * depth + "pass"]
        args = ", ".join(p.split("=")[0] for p in self.params.split(", "))
        calls = {}
        for k, group in enumerate(groups):
            call = f"_{self.name}_{k}({args})"
            calls[group[0]] = [f"if {call} != 0:", "    return 1"] if self.status else [call]
        firsts = sorted(calls)
        return _tree(firsts, calls, depth, ranges=True)

    def _groups(self) -> list[list[int]]:
        """The opcodes written, by block of ``GROUP`` consecutive opcodes: a subset's
        helpers hold the opcodes the interpreter of every opcode groups together (measured
        against groups of ``GROUP`` opcodes present, on an interpreter of five opcodes: the
        structural ones apart from the elementwise ones, RK4's gradient runs in 248 µs
        instead of 384 µs, a 1000-op chain's in 78 µs instead of 89 µs)."""
        groups: dict[int, list[int]] = {}
        for op in sorted(self.bodies):
            groups.setdefault(op // GROUP, []).append(op)
        return list(groups.values())


#: Opcodes per block, each block one helper function (measured: 8 compiles the three
#: passes in about a third of the time one function per pass takes, and runs as fast).
GROUP = 8


def _tree(ops: list[int], bodies: dict[int, list[str]], depth: int,
          ranges: bool = False) -> list[str]:
    """Source running ``bodies[op]`` for ``_op == op`` (``ranges``: for ``_op`` from
    ``op`` up to the next key), by a balanced tree of comparisons; opcodes without a body
    fall through every test."""
    pad = " " * depth
    if len(ops) == 1 and ranges:
        return [pad + line for line in bodies[ops[0]]]
    if len(ops) <= 3 and not ranges:
        out: list[str] = []
        for k, op in enumerate(ops):
            out.append(pad + f"{'if' if k == 0 else 'elif'} _op == {op}:")
            out += [pad + "    " + line for line in bodies[op]]
        return out
    mid = len(ops) // 2
    return ([pad + f"if _op < {ops[mid]}:"] + _tree(ops[:mid], bodies, depth + 4, ranges) +
            [pad + "else:"] + _tree(ops[mid:], bodies, depth + 4, ranges))


_LOAD = ["_n = C[_r + 1]", "_o = C[_r + 2]", "_a = C[_r + 3]", "_sa = C[_r + 4]",
         "_b = C[_r + 5]", "_sb = C[_r + 6]", "_p = C[_r + 7]", "_q = C[_r + 8]",
         "_m = C[_r + 9]", "_z = C[_r + 10]", "_sz = C[_r + 11]"]


def _structural(forward: _Branches, backward: _Branches, tangent: _Branches,
                ops: dict[Any, int]) -> None:
    g, lin, sel = ops["gather"], ops["linear"], ops["select"]
    forward.add(g, ["for _j in range(_n):",
                    "    V[C[_p + 2 * _j]] = V[C[_p + 2 * _j + 1]]"], whole=True)
    backward.add(g, ["for _j in range(_n):",
                     "    A[C[_p + 2 * _j + 1]] += A[C[_p + 2 * _j]]"], whole=True)
    tangent.add(g, ["for _j in range(_n):",
                    "    _d = C[_p + 2 * _j]",
                    "    _s = C[_p + 2 * _j + 1]",
                    "    for _k in range(K):",
                    "        T[_d, _k] = T[_s, _k]"], whole=True)
    # linear: C[_p:] indptr (n + 1), then indices; F[_q:] offsets (n), then coefficients
    forward.add(lin, ["_ind = _p + _n + 1",
                      "_dat = _q + _n",
                      "for _i in range(_n):",
                      "    _acc = F[_q + _i]",
                      "    for _e in range(C[_p + _i], C[_p + _i + 1]):",
                      "        _acc += F[_dat + _e] * V[_a + C[_ind + _e]]",
                      "    V[_o + _i] = _acc"], whole=True)
    backward.add(lin, ["_ind = _p + _n + 1",
                       "_dat = _q + _n",
                       "for _i in range(_n):",
                       "    _g = A[_o + _i]",
                       "    for _e in range(C[_p + _i], C[_p + _i + 1]):",
                       "        A[_a + C[_ind + _e]] += F[_dat + _e] * _g"], whole=True)
    tangent.add(lin, ["_ind = _p + _n + 1",
                      "_dat = _q + _n",
                      "for _i in range(_n):",
                      "    for _k in range(K):",
                      "        T[_o + _i, _k] = 0.0",
                      "    for _e in range(C[_p + _i], C[_p + _i + 1]):",
                      "        _c = F[_dat + _e]",
                      "        _s = _a + C[_ind + _e]",
                      "        for _k in range(K):",
                      "            T[_o + _i, _k] += _c * T[_s, _k]"], whole=True)
    # select: n source entries at _a, groups at C[_p:], _m outputs at _o, tie counts at _b;
    # F[_q] is 1.0 for the largest entry, 0.0 for the smallest; F[_q + 1] is 1.0 where NaN
    # entries are skipped (np.nanmax: a group of NaNs gives NaN), 0.0 where one gives NaN
    forward.add(sel, ["_big = F[_q] != 0.0",
                      "_skip = F[_q + 1] != 0.0",
                      "for _i in range(_m):",
                      "    V[_o + _i] = -np.inf if _big else np.inf",
                      "    V[_b + _i] = 0.0",
                      "for _i in range(_n):",
                      "    _x = V[_a + _i]",
                      "    _d = C[_p + _i]",
                      "    if (_x > V[_o + _d]) if _big else (_x < V[_o + _d]):",
                      "        V[_o + _d] = _x",
                      "        V[_b + _d] = 1.0",
                      "    elif _x == V[_o + _d]:",
                      "        V[_b + _d] += 1.0",
                      "    elif _x != _x and not _skip:",
                      "        V[_o + _d] = _x",
                      "if _skip:",
                      "    for _i in range(_m):",
                      "        if V[_b + _i] == 0.0:",
                      "            V[_o + _i] = np.nan"], whole=True)
    backward.add(sel, ["for _i in range(_n):",
                       "    _d = C[_p + _i]",
                       "    if V[_a + _i] == V[_o + _d]:",
                       "        A[_a + _i] += A[_o + _d] / V[_b + _d]",
                       "    else:",  # weight 0, as eager: an infinite adjoint gives NaN
                       "        A[_a + _i] += 0.0 * A[_o + _d]"], whole=True)
    tangent.add(sel, ["for _i in range(_m):",
                      "    for _k in range(K):",
                      "        T[_o + _i, _k] = 0.0",
                      "for _i in range(_n):",
                      "    _d = C[_p + _i]",
                      "    _c = 1.0 / V[_b + _d] if V[_a + _i] == V[_o + _d] else 0.0",
                      "    for _k in range(K):",  # weight 0 as eager: inf gives NaN
                      "        T[_o + _d, _k] += _c * T[_a + _i, _k]"], whole=True)
    # matmul: (_n, _q) at _a times (_q, _m) at _b, row-major, into (_n, _m) at _o
    mm = ops["matmul"]
    forward.add(mm, ["for _i in range(_n):",
                     "    for _j in range(_m):",
                     "        _acc = 0.0",
                     "        for _e in range(_q):",
                     "            _acc += V[_a + _i * _q + _e] * V[_b + _e * _m + _j]",
                     "        V[_o + _i * _m + _j] = _acc"], whole=True)
    backward.add(mm, ["for _i in range(_n):",
                      "    for _j in range(_m):",
                      "        _g = A[_o + _i * _m + _j]",
                      "        for _e in range(_q):",
                      "            if _f & 2:",
                      "                A[_a + _i * _q + _e] += _g * V[_b + _e * _m + _j]",
                      "            if _f & 4:",
                      "                A[_b + _e * _m + _j] += V[_a + _i * _q + _e] * _g"], whole=True)
    tangent.add(mm, ["for _i in range(_n):",
                     "    for _j in range(_m):",
                     "        _d = _o + _i * _m + _j",
                     "        for _k in range(K):",
                     "            T[_d, _k] = 0.0",
                     "        for _e in range(_q):",
                     "            _s = _a + _i * _q + _e",
                     "            _c = V[_b + _e * _m + _j]",
                     "            if _f & 2:",
                     "                for _k in range(K):",
                     "                    T[_d, _k] += _c * T[_s, _k]",
                     "            _s = _b + _e * _m + _j",
                     "            _c = V[_a + _i * _q + _e]",
                     "            if _f & 4:",
                     "                for _k in range(K):",
                     "                    T[_d, _k] += _c * T[_s, _k]"], whole=True)
    _order(forward, backward, tangent, ops["order"])
    # guards on read values: n entries at _a against the recorded F[_q:]
    forward.add(ops["guard_bool"], ["for _i in range(_n):",
                                    "    if (V[_a + _i] != 0.0) != (F[_q + _i] != 0.0):",
                                    "        return 1"], whole=True)
    forward.add(ops["guard_int"], ["for _i in range(_n):",
                                   "    _x = V[_a + _i]",
                                   "    if not abs(_x) < 9e18 or float(int(_x)) != F[_q + _i]:",
                                   "        return 1"], whole=True)
    forward.add(ops["guard_float"], ["for _i in range(_n):",
                                     "    _x = V[_a + _i]",
                                     "    _c = F[_q + _i]",
                                     "    if not (_x == _c or (_x != _x and _c != _c)):",
                                     "        return 1"], whole=True)


def _order(forward: _Branches, backward: _Branches, tangent: _Branches, op: int) -> None:
    """Order statistics (:class:`~dualad.tape.lowering.Order`): ``_n`` groups of the source
    at ``_a``, ``_m`` outputs at ``_o``. ``C[_p:]``: the group size, the terms per output,
    1 where a NaN makes its group's outputs NaN, then the members (positions, group by
    group), the group of each output and its ranks; ``F[_q:]`` the weights (0: padding).
    Scratch at ``_b``: each group's members sorted by value (stably, NaN last: by
    :func:`dualad.tape.order_kernels.order_sort`, as the straight-line code), then 1.0 per
    group holding a NaN."""
    head = ["_L = C[_p]",
            "_T = C[_p + 1]",
            "_grp = _p + 3 + _n * _L",
            "_rk = _grp + _m",
            "_nan = _b + _n * _L"]
    forward.add(op, head + [
        "_ranked = np.empty(_n * _L, dtype=np.intp)",
        "_poisoned = np.empty(_n)",
        "_order_sort(V[_a:], C[_p + 3:_grp], _n, _L, C[_p + 2] != 0, _ranked, _poisoned)",
        "for _j in range(_n * _L):",
        "    V[_b + _j] = float(_ranked[_j])",
        "for _g in range(_n):",
        "    V[_nan + _g] = _poisoned[_g]",
        "for _i in range(_m):",
        "    _h = C[_grp + _i] * _L",
        "    if V[_nan + C[_grp + _i]] != 0.0:",
        "        V[_o + _i] = np.nan",
        "        continue",
        "    _acc = 0.0",
        "    for _t in range(_T):",
        "        _c = F[_q + _i * _T + _t]",
        "        if _c != 0.0:",
        "            _acc += _c * V[_a + int(V[_b + _h + C[_rk + _i * _T + _t]])]",
        "    V[_o + _i] = _acc"], whole=True)
    backward.add(op, head + [
        "for _i in range(_m):",
        "    _h = C[_grp + _i] * _L",
        "    if V[_nan + C[_grp + _i]] != 0.0:",  # no derivative
        "        continue",
        "    _g = A[_o + _i]",
        "    for _t in range(_T):",
        "        _c = F[_q + _i * _T + _t]",
        "        if _c != 0.0:",
        "            A[_a + int(V[_b + _h + C[_rk + _i * _T + _t]])] += _c * _g"], whole=True)
    tangent.add(op, head + [
        "for _i in range(_m):",
        "    for _k in range(K):",
        "        T[_o + _i, _k] = 0.0",
        "    _h = C[_grp + _i] * _L",
        "    if V[_nan + C[_grp + _i]] != 0.0:",
        "        continue",
        "    for _t in range(_T):",
        "        _c = F[_q + _i * _T + _t]",
        "        if _c != 0.0:",
        "            _s = _a + int(V[_b + _h + C[_rk + _i * _T + _t]])",
        "            for _k in range(K):",
        "                T[_o + _i, _k] += _c * T[_s, _k]"], whole=True)


def _map_bodies(op: int, call: str, temps: list[str], partials: list[str], args: list[str],
                forward: _Branches, backward: _Branches, tangent: _Branches,
                selects: bool = False) -> None:
    """The opcode's passes; ``selects``: a declared form (np.where), whose partials that
    are 1 or 0 by a condition pick the adjoint, as eager mode's rule does (an infinite
    adjoint gives 0 where not picked, not NaN)."""
    names = {a: f"_x{k}" for k, a in enumerate(args)}
    names["y"] = "_y"
    bases = ["_a", "_b", "_z"]
    steps = ["_sa", "_sb", "_sz"]
    loads = [f"_x{k} = V[{bases[k]} + _i * {steps[k]}]" for k in range(len(args))]
    value = _renamed(call, names, op)
    forward.add(op, ["for _i in range(_n):", *["    " + line for line in loads],
                     f"    V[_o + _i] = {value}"])
    temp_lines = [_renamed(t, names, op) for t in temps]
    exprs = [_renamed(p, names, op) for p in partials]
    live = [k for k in range(len(args)) if not _is_zero(exprs[k])]
    if not live:  # no derivative: nothing flows back, tangents are zero (_TANGENT_ROWS)
        tangent.add(op, ["for _i in range(_n):", "    pass"])
        return
    body = ["for _i in range(_n):", *["    " + line for line in loads],
            "    _y = V[_o + _i]", *["    " + line for line in temp_lines]]
    back = body + ["    _g = A[_o + _i]"]
    for k in live:
        term = f"(_g if ({exprs[k]}) != 0.0 else 0.0)" if selects and \
            _SELECTS.fullmatch(partials[k].strip()) else f"_g * ({exprs[k]})"
        back += [f"    if _f & {2 << k}:",
                 f"        A[{bases[k]} + _i * {steps[k]}] += {term}"]
    backward.add(op, back)
    tan = list(body)
    for k in live:  # the partials; the rows are combined once per helper (_TANGENT_ROWS)
        tan += [f"    _w{k} = True",
                f"    _d{k} = ({exprs[k]}) if _f & {2 << k} else 0.0",
                f"    _r{k} = {bases[k]} + _i * {steps[k]}"]
    tangent.add(op, tan)


#: The tangent pass, per entry of an elementwise opcode: the operands whose partial is not
#: zero (``_w``), their partials (``_d``) and rows (``_r``), set by the opcode's body,
#: then its tangent row; a zero tangent contributes zero, even times inf (as eager mode).
_TANGENT_ROWS = (
    ["_w0 = False", "_w1 = False", "_w2 = False", "_d0 = 0.0", "_d1 = 0.0", "_d2 = 0.0",
     "_r0 = 0", "_r1 = 0", "_r2 = 0"],
    ["for _k in range(K):",
     "    _s = 0.0",
     *[line for k in range(3) for line in (
         f"    if _w{k}:",
         f"        _u = T[_r{k}, _k]",
         "        if _u != 0.0:",
         f"            _s += _d{k} * _u")],
     "    T[_o + _i, _k] = _s"])


def _predicate_body(op: int, name: str, nin: int, forward: _Branches) -> None:
    bases, steps = ["_a", "_b"], ["_sa", "_sb"]
    args = [f"V[{bases[k]} + _i * {steps[k]}]" for k in range(nin)]
    forward.add(op, ["for _i in range(_n):",
                     f"    if {numba_scalar_call(name, args)} != (F[_q + _i] != 0.0):",
                     "        return 1"])


#: The entries' first lines: ``V`` with the inputs and the constants in place. Loops, not
#: slice assignments: Numba compiles a slice assignment's shape-mismatch message with its
#: string formatting, about 1.5 s once per process (measured, Numba 0.68).
_PROLOGUE = ["    V = np.empty(C[1])",
             "    for _i in range(C[3]):",
             "        V[C[2] + _i] = F[C[5] + _i]",
             "    for _i in range(C[4]):",
             "        V[_i] = xin[_i]"]


def interpreter_source(only: frozenset[int] | None = None) -> tuple[str, dict[Any, int]]:
    """``(module source, {opcode key: opcode})``: the module defines ``forward(V, C, F,
    order)`` (values; returns 1 where a guard fails, else 0), ``backward(V, A, C, F,
    order, flags)`` and ``tangents(V, T, C, F, order, flags, K)``, and the entries
    ``value``, ``gradient`` and ``jacobian`` (see :mod:`dualad.tape.interpreter`).
    ``order`` lists the instructions a pass runs; ``flags[pc]`` has bit ``2 << k`` set
    where operand ``k`` of instruction ``pc`` carries a derivative. With ``only``, the
    passes run those opcodes alone (every opcode keeps its number; the others are not
    written, and Numba compiles a pass in time growing with the opcodes written)."""
    ops: dict[Any, int] = {}
    for name in STRUCTURAL:
        ops[name] = len(ops)
    fields = "_op, _n, _o, _a, _sa, _b, _sb, _p, _q, _m, _z, _sz"
    forward = _Branches("forward", "V, C, F, " + fields, True, only=only)
    backward = _Branches("backward", "V, A, C, F, _f, " + fields, False, only=only)
    tangent = _Branches("tangents", "V, T, C, F, _f, K, " + fields, False, _TANGENT_ROWS,
                        only)
    _structural(forward, backward, tangent, ops)
    import numpy as _np

    for name in _numba_predicates():
        nin = getattr(_np, name).nin
        op = ops[predicate_key(name)] = len(ops)
        _predicate_body(op, name, nin, forward)
        args = ["x0", "x1"][:nin]  # the mask it computes, read by other instructions
        call = numba_predicate_call(name, args)
        op = ops[map_key(name, args, [], ["0.0"] * nin, call)] = len(ops)
        _map_bodies(op, call, [], ["0.0"] * nin, args, forward, backward, tangent)
    for key, call, temps, partials, args in _maps():
        op = ops[key] = len(ops)
        _map_bodies(op, call, temps, partials, args, forward, backward, tangent,
                    selects=key[1] == "")
    decorator = '@numba.njit(cache=True, error_model="numpy", nogil=True)'
    helper = decorator if only is None else \
        '@numba.njit(cache=True, error_model="numpy", nogil=True, inline="always")'
    lines = [
        '"""The compiled interpreter of dualad tapes (generated from the rules tables)."""',
        "import math",
        "import numba",
        "import numpy as np",
        "from dualad.tape.order_kernels import order_sort as _order_sort",
        "",
        f"HEADER = {HEADER}",
        f"WIDTH = {WIDTH}",
        *forward.helpers(helper),
        *backward.helpers(helper),
        *tangent.helpers(helper),
        "",
        "",
        helper,
        "def forward(V, C, F, order):",
        "    for _pc in order:",
        f"        _r = {HEADER} + _pc * {WIDTH}",
        "        _op = C[_r]",
        *["        " + line for line in _LOAD],
        *forward.dispatch(8),
        "    return 0",
        "",
        "",
        helper,
        "def backward(V, A, C, F, order, flags):",
        "    for _j in range(order.shape[0] - 1, -1, -1):",
        "        _pc = order[_j]",
        f"        _r = {HEADER} + _pc * {WIDTH}",
        "        _op = C[_r]",
        *["        " + line for line in _LOAD],
        "        _f = flags[_pc]",
        *backward.dispatch(8),
        "",
        "",
        helper,
        "def tangents(V, T, C, F, order, flags, K):",
        "    for _pc in order:",
        f"        _r = {HEADER} + _pc * {WIDTH}",
        "        _op = C[_r]",
        *["        " + line for line in _LOAD],
        "        _f = flags[_pc]",
        *tangent.dispatch(8),
        "",
        "",
        decorator,
        "def values(xin, C, F, order):",
        *_PROLOGUE,
        "    return forward(V, C, F, order), V",
        "",
        "",
        decorator,
        "def gradient(xin, C, F, order, active, flags, out):",
        *_PROLOGUE,
        "    status = forward(V, C, F, order)",
        "    A = np.empty(C[1])",
        "    for _i in range(C[1]):",
        "        A[_i] = 0.0",
        "    if status == 0:",
        "        A[out] = 1.0",
        "        backward(V, A, C, F, active, flags)",
        "    return status, V, A",
        "",
        "",
        decorator,
        "def jacobian(xin, C, F, order, active, flags, seeds, K):",
        *_PROLOGUE,
        "    status = forward(V, C, F, order)",
        "    T = np.empty((C[1], K))",
        "    for _i in range(C[1]):",
        "        for _k in range(K):",
        "            T[_i, _k] = 0.0",
        "    if status == 0:",
        "        for _j in range(seeds.shape[0] // 2):",
        "            T[seeds[2 * _j], seeds[2 * _j + 1]] = 1.0",
        "        tangents(V, T, C, F, active, flags, K)",
        "    return status, V, T",
    ]
    return "\n".join(lines) + "\n", ops
