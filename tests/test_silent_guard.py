"""The standing guard against silent wrong numbers: random programs built from the numpy
surface where derivatives used to leak (lists of traced values, object arrays, views and
writes, in-place operators, in-place writes into computed values seen through other names
and views, ufunc methods, foreign array types, integer and boolean
intermediates) are differentiated in forward and reverse mode and checked against each
other and against central finite differences of the plain numpy program.

Short in CI (the "ci" hypothesis profile); ``HYPOTHESIS_PROFILE=long`` runs many more.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import numpy as np
from alias_programs import ALIAS_FORMS, alias_step
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

N = 4  # every value of a program is a length-4 vector
_HAS_PANDAS = importlib.util.find_spec("pandas") is not None
_HAS_XARRAY = importlib.util.find_spec("xarray") is not None
_CONSTANT = np.array([1.5, -0.5, 2.0, 0.25])

UNARY = {
    "sin": np.sin,
    "tanh": np.tanh,
    "square": lambda v: v * v,
    "exp_tanh": lambda v: np.exp(np.tanh(v)),
    "softplus": lambda v: np.logaddexp(0.0, v),
}
BINARY = {
    "add": lambda a, b: a + b,
    "multiply": lambda a, b: a * b,
    "mixed": lambda a, b: a * 0.5 - np.sin(b),
}


@dataclass
class Step:
    kind: str
    args: tuple
    text: str


def _margin(values: Any, thresholds: Any, margins: list[float]) -> None:
    """Record how far ``values`` are from where a piecewise-constant step jumps."""
    margins.append(float(np.min(np.abs(ad.value(values) - thresholds))) if np.size(
        ad.value(values)) else np.inf)


def _run_step(step: Step, pool: list[Any], margins: list[float]) -> Any:
    k, p = step.kind, step.args
    if k == "unary":
        return UNARY[p[0]](pool[p[1]])
    if k == "binary":
        return BINARY[p[0]](pool[p[1]], pool[p[2]])
    if k == "list_stack":  # a list of traced scalars made into one array
        a, b, idx = pool[p[0]], pool[p[1]], p[2]
        return np.stack([a[idx[0]], b[idx[1]] * 2.0, a[idx[2]], b[idx[3]]])
    if k == "object_array":  # np.array([...]) of traced scalars: an object array
        a, b, idx = pool[p[0]], pool[p[1]], p[2]
        holder = np.array([a[idx[0]], b[idx[1]], a[idx[2]] * b[idx[3]], 0.5])
        return holder * a if p[3] else a * holder
    if k == "list_reduce":  # numpy reductions that handle lists through object arrays
        a, b = pool[p[0]], pool[p[1]]
        return a * np.sum([a[p[2]], b[p[3]]]) + np.prod((a[0], b[1]))
    if k == "concatenate":
        a, b, cut = pool[p[0]], pool[p[1]], p[2]
        return np.concatenate([a[:cut], b[cut:]])
    if k == "view_write":  # a view taken, the buffer written, the view read
        a, b, lo, hi, i, j, through = pool[p[0]], pool[p[1]], *p[2:]
        buf = np.copy(a)
        view = buf[lo:hi]
        if through and hi > lo:
            view[0] = b[j] * 2.0
        else:
            buf[i] = b[j] * 2.0
        return np.concatenate([view * 1.0, buf[:lo], buf[hi:]])
    if k == "transpose_write":
        a, b, i, j, through = pool[p[0]], pool[p[1]], *p[2:]
        buf = np.copy(a).reshape(2, 2)
        t = buf.T
        if through:
            t[i, j] = b[i] + b[j]
        else:
            buf[i, j] = b[i] * b[j]
        return np.concatenate([np.ravel(t) * 0.5, buf[0] * 0.0])[:N] + np.ravel(buf)
    if k == "in_place":
        a, b, lo, hi, op = pool[p[0]], pool[p[1]], *p[2:]
        buf = np.ones_like(a) * 1.0
        buf = np.copy(buf)
        view = buf[lo:hi]
        if op == "add":
            view += b[lo:hi]
        else:
            view *= b[lo:hi]
        return buf * a
    if k == "computed_alias":  # in-place writes into computed values seen through aliases
        return alias_step(p[2], pool[p[0]], pool[p[1]],
                          lambda v, at: _margin(v, at, margins))
    if k == "ufunc_at":
        a, b, name, idx = pool[p[0]], pool[p[1]], p[2], np.array(p[3])
        buf = np.copy(a)
        getattr(np, name).at(buf, idx, b[: len(idx)] if len(idx) <= N else b[0])
        return buf
    if k == "ufunc_method":
        a, b, which = pool[p[0]], pool[p[1]], p[2]
        if which == "reduce":
            return np.logaddexp.reduce(a) * b
        if which == "accumulate":
            return np.logaddexp.accumulate(a) + np.multiply.accumulate(np.tanh(b))
        if which == "reduceat":
            return np.add.reduceat(a * b, [0, 2, 1, 3])
        return np.multiply.outer(a, b) @ _CONSTANT + np.subtract.outer(a, b)[0]
    if k == "axes":  # axis moves in their several argument forms, and 0-d stacking
        m = np.reshape(pool[p[0]], (2, 2))
        which = p[1]
        if which == "moveaxis":
            m = np.moveaxis(m, source=0, destination=-1)
        elif which == "swapaxes":
            m = m.swapaxes(0, 1)
        elif which == "rollaxis":
            m = np.rollaxis(m, 1)
        else:
            m = np.vstack([m[0, 0], m[1, 1], m[0, 1], m[1, 0]]).reshape(2, 2)
        return np.ravel(m)
    if k == "methods":  # ndarray methods on traced values
        a, b = pool[p[0]], pool[p[1]]
        return a.var() * b + a.cumsum() + a.reshape(2, 2).trace() + a.take([1, 0, 3, 2])
    if k == "integer":  # an integer intermediate is a constant
        a, b = pool[p[0]], pool[p[1]]
        _margin(b * 2.0, np.round(ad.value(b) * 2.0), margins)
        return a * (b * 2.0).astype(int)
    if k == "boolean":
        a, b, t = pool[p[0]], pool[p[1]], p[2]
        _margin(a, t, margins)
        return np.where(a > t, a * b, b) + a * (a > t)
    if k == "foreign":
        a, which, first = pool[p[0]], p[1], p[2]
        if which == "pandas":
            import pandas as pd
            other = pd.Series(_CONSTANT)
        else:
            import xarray as xr
            other = xr.DataArray(_CONSTANT, dims=("i",))
        r = other * a if first else a * other
        if _HAS_XARRAY:
            import xarray as xr
            if isinstance(r, xr.DataArray):
                r = r.data
        if type(r).__module__.startswith("pandas"):
            r = r.to_numpy()
        return r
    raise AssertionError(k)


@dataclass
class Program:
    steps: list[Step]

    def __call__(self, x: Any, margins: list[float] | None = None) -> Any:
        margins = [] if margins is None else margins
        pool = [x]
        for step in self.steps:
            pool.append(_run_step(step, pool, margins))
        out = pool[-1]
        if len(pool) > 2:
            out = out + 0.25 * pool[-2]
        return out

    def __repr__(self) -> str:
        return "\n".join(f"v{i + 1} = {s.text}" for i, s in enumerate(self.steps))


@st.composite
def steps(draw: Any, n: int) -> Step:
    """One step whose operands are earlier values ``0 .. n - 1``."""
    kinds = ["unary", "binary", "list_stack", "object_array", "list_reduce", "concatenate",
             "view_write", "transpose_write", "in_place", "computed_alias", "ufunc_at",
             "ufunc_method",
             "axes", "methods", "integer", "boolean"]
    if _HAS_PANDAS or _HAS_XARRAY:
        kinds.append("foreign")
    kind = draw(st.sampled_from(kinds))
    v = st.integers(0, n - 1)
    i4 = st.integers(0, N - 1)
    if kind == "unary":
        args = (draw(st.sampled_from(sorted(UNARY))), draw(v))
    elif kind == "binary":
        args = (draw(st.sampled_from(sorted(BINARY))), draw(v), draw(v))
    elif kind in ("list_stack", "object_array"):
        args = (draw(v), draw(v), tuple(draw(i4) for _ in range(4)), draw(st.booleans()))
    elif kind == "list_reduce":
        args = (draw(v), draw(v), draw(i4), draw(i4))
    elif kind == "concatenate":
        args = (draw(v), draw(v), draw(st.integers(0, N)))
    elif kind == "view_write":
        lo = draw(st.integers(0, N - 1))
        args = (draw(v), draw(v), lo, draw(st.integers(lo, N)), draw(i4), draw(i4),
                draw(st.booleans()))
    elif kind == "transpose_write":
        args = (draw(v), draw(v), draw(st.integers(0, 1)), draw(st.integers(0, 1)),
                draw(st.booleans()))
    elif kind == "in_place":
        lo = draw(st.integers(0, N - 1))
        args = (draw(v), draw(v), lo, draw(st.integers(lo, N)),
                draw(st.sampled_from(["add", "multiply"])))
    elif kind == "computed_alias":
        args = (draw(v), draw(v), draw(st.sampled_from(ALIAS_FORMS)))
    elif kind == "ufunc_at":
        args = (draw(v), draw(v), draw(st.sampled_from(["add", "subtract", "multiply"])),
                tuple(draw(st.lists(i4, min_size=1, max_size=N))))
    elif kind == "ufunc_method":
        args = (draw(v), draw(v),
                draw(st.sampled_from(["reduce", "accumulate", "reduceat", "outer"])))
    elif kind == "axes":
        args = (draw(v), draw(st.sampled_from(["moveaxis", "swapaxes", "rollaxis", "vstack"])))
    elif kind in ("integer", "methods"):
        args = (draw(v), draw(v))
    elif kind == "boolean":
        args = (draw(v), draw(v), draw(st.sampled_from([-0.37, 0.21, 0.83])))
    else:
        which = [w for w, ok in (("pandas", _HAS_PANDAS), ("xarray", _HAS_XARRAY)) if ok]
        args = (draw(v), draw(st.sampled_from(which)), draw(st.booleans()))
    return Step(kind, args, f"{kind}{args}")


@st.composite
def programs(draw: Any, max_steps: int = 5) -> Program:
    count = draw(st.integers(1, max_steps))
    return Program([draw(steps(i + 1)) for i in range(count)])


inputs = st.lists(st.floats(-2.0, 2.0, allow_nan=False, allow_subnormal=False),
                  min_size=N, max_size=N).map(np.array)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
          deadline=None)
@given(programs(), inputs)
def test_forward_reverse_and_finite_differences_agree(program, x):
    note(repr(program))
    margins: list[float] = []
    with np.errstate(all="ignore"):
        out = program(x, margins)
    assume(not margins or min(margins) > 1e-3)  # away from jumps of int/bool steps
    assume(np.all(np.isfinite(out)) and np.max(np.abs(out)) < 1e4)
    expected = numerical_jacobian(lambda v: program(v), (x,), 0)
    assume(np.all(np.isfinite(expected)))
    forward = ad.jacobian(program, mode="forward")(x)
    reverse = ad.jacobian(program, mode="reverse")(x)
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(forward, reverse, rtol=1e-9, atol=1e-9 * scale,
                               err_msg="forward vs reverse")
    np.testing.assert_allclose(reverse, expected, rtol=1e-4, atol=1e-5 * scale,
                               err_msg="reverse vs central differences")
