"""The standing differential guard for tapes: random programs built from the numpy surface
where a replay can go wrong (index sets computed from traced values, masks, every in-place
write form, in-place writes seen through other names and views, where= reductions, complex
intermediates, dtype casts, Python branches and loop counts) are recorded at one point and replayed at others. At every point the tape's value,
gradient, jvp and hvp equal eager mode's (a replay either recomputes what changed or
records again with a warning), and the gradient equals central differences away from the
jumps of piecewise-constant steps.

Short in CI (the "ci" hypothesis profile); ``HYPOTHESIS_PROFILE=long`` runs many more.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from alias_programs import ALIAS_FORMS, alias_step
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import dualad as ad
from dualad.diagnostics.gradcheck import numerical_jacobian

N = 4  # every value of a program is a length-4 vector
THRESHOLDS = [-0.37, 0.21, 0.83]


def _margin(values: Any, thresholds: Any, margins: list[float]) -> None:
    """How far ``values`` are from where a piecewise-constant step jumps."""
    v = np.asarray(ad.value(values), dtype=float)
    margins.append(float(np.min(np.abs(v - thresholds))) if v.size else np.inf)


def _gaps(values: Any, margins: list[float]) -> None:
    """How far apart the entries of ``values`` are (ties flip an argmax or a sort)."""
    v = np.sort(np.asarray(ad.value(values), dtype=float).ravel())
    margins.append(float(np.min(np.diff(v))) if v.size > 1 else np.inf)


@dataclass
class Step:
    kind: str
    args: tuple

    def __repr__(self) -> str:
        return f"{self.kind}{self.args}"


def _run_step(step: Step, pool: list[Any], m: list[float]) -> Any:
    k, p = step.kind, step.args
    a, b = pool[p[0]], pool[p[1]]
    t = p[2] if len(p) > 2 else 0.21
    if k == "unary":
        return {"sin": np.sin, "tanh": np.tanh, "square": np.square,
                "exp_tanh": lambda v: np.exp(np.tanh(v))}[p[2]](a) + 0.0 * b
    if k == "binary":
        return {"mul": a * b, "add": a + b, "mixed": a * 0.5 - np.sin(b)}[p[2]]
    if k == "where_index":
        _margin(a, t, m)
        out = np.zeros_like(a)
        idx = np.where(a > t)
        out[idx] = b[idx] ** 2
        return out + a
    if k == "nonzero":
        _margin(b, t, m)
        out = np.copy(a)
        idx = np.nonzero(b > t)[0]
        out[idx] = out[idx] * 2.0 + b[idx]
        return out
    if k == "method_nonzero":
        _margin(b, t, m)
        return a * np.sum(a[(b > t).nonzero()] ** 2) + b
    if k == "flatnonzero":
        _margin(b, t, m)
        return a * np.sum(np.take(a, np.flatnonzero(b > t))) + b
    if k == "argmax":
        _gaps(a, m)
        return a * b[np.argmax(a)] + b
    if k == "unravel":
        _gaps(a, m)
        i, j = np.unravel_index(np.argmax(a), (2, 2))
        return a * np.reshape(b, (2, 2))[i, j] + np.reshape(b, (2, 2))[j, i]
    if k == "argsort":
        _gaps(a, m)
        return b[np.argsort(a)] * a
    if k == "mask_select":
        _margin(a, t, m)
        return a * np.sum(b[a > t]) + b
    if k == "np_where":
        _margin(a, t, m)
        return np.where(a > t, a * b, np.sin(b))
    if k == "putmask":
        _margin(b, t, m)
        y = np.copy(a)
        np.putmask(y, b > t, a * b)
        return y
    if k == "place":
        _margin(b, t, m)
        y = np.copy(a)
        np.place(y, b > t, b[:2] * 3.0)
        return y
    if k == "copyto_where":
        _margin(a, t, m)
        y = np.zeros_like(a)
        np.copyto(y, np.sin(b), where=a > t)
        return y + a
    if k == "put":
        y = np.ones_like(a)
        np.put(y, [p[2] % N, (p[2] + 1) % N], b[:2] * a[0])
        return y * a
    if k == "ufunc_at":
        y = np.copy(a)
        np.add.at(y, [0, p[2] % N, p[2] % N], b[:3])
        np.multiply.at(y, [1, 1], b[3])
        return y
    if k == "fill":
        y = np.zeros_like(a)
        y.fill(b[p[2] % N])
        return y * a
    if k == "assignments":
        _margin(a, t, m)
        y = np.zeros_like(a)
        y[1:3] = b[:2] ** 2
        y[a > t] = 2.0 * a[a > t]
        y[[0, 3]] = y[[3, 0]] + b[1]
        return y
    if k == "where_reduce":
        _margin(a, t, m)
        which = p[3]
        if which == "sum":
            return a * np.sum(b ** 2, where=a > t)
        if which == "prod":
            return a * np.prod(b, where=a > t)
        if which == "max":
            _gaps(b, m)  # ties split the derivative: a kink
            return a * np.max(b, where=a > t, initial=-5.0)
        assume(bool(np.any(ad.value(a) > t)))
        return a * np.mean(b ** 2, where=a > t)
    if k == "complex":
        which = p[2]
        if which == "abs":
            _margin(np.abs(a + 1j * b), 0.0, m)  # |z| has a kink at 0
            return np.abs(a + 1j * b)
        if which == "real_exp":
            return np.real(np.exp(1j * a) * b)
        if which == "angle":
            return np.angle(a + 1j * (b ** 2 + 0.5))
        _margin(np.abs(np.fft.fft(a * b)), 0.0, m)
        return np.abs(np.fft.fft(a * b))
    if k == "cast":
        return (a * b).astype(np.complex128).real * 2.0 + a.astype(np.float64)
    if k == "branch":
        s = np.sum(a)
        _margin(s, t, m)
        if s > t:
            return a * b
        return np.sin(a) - b
    if k == "loop":
        _margin(a, t, m)
        out = b * 1.0
        for _ in range(int(np.sum(a > t))):
            out = out * 0.5 + a
        return out
    if k == "initial":
        return a * np.sum(b, initial=a[0]) + np.prod(b[:2], initial=a[1])
    if k == "alias":
        return alias_step(p[2], a, b, lambda v, at: _margin(v, at, m))
    if k == "interp":
        xp = np.sort(a)
        _gaps(a, m)
        _margin(xp, 0.3, m)
        return b * np.interp(0.3, xp, np.array([1.0, 2.0, 3.0, 5.0]))
    raise AssertionError(k)


KINDS = ["unary", "binary", "where_index", "nonzero", "method_nonzero", "flatnonzero",
         "argmax", "unravel", "argsort", "mask_select", "np_where", "putmask", "place", "copyto_where",
         "put", "ufunc_at", "fill", "assignments", "where_reduce", "complex", "cast",
         "branch", "loop", "initial", "interp", "alias"]


@dataclass
class Program:
    steps: list[Step]

    def __call__(self, x: Any, margins: list[float] | None = None) -> Any:
        m = [] if margins is None else margins
        pool = [x, np.sin(x) * 1.3]
        for step in self.steps:
            pool.append(_run_step(step, pool, m))
        return np.sum(pool[-1] * np.array([0.7, -1.1, 0.4, 1.3])) + 0.25 * np.sum(pool[-2])

    def __repr__(self) -> str:
        return "\n".join(f"v{i + 2} = {s!r}" for i, s in enumerate(self.steps))


@st.composite
def steps(draw: Any, n: int) -> Step:
    kind = draw(st.sampled_from(KINDS))
    v = st.integers(0, n - 1)
    a, b = draw(v), draw(v)
    if kind == "unary":
        return Step(kind, (a, b, draw(st.sampled_from(["sin", "tanh", "square", "exp_tanh"]))))
    if kind == "binary":
        return Step(kind, (a, b, draw(st.sampled_from(["mul", "add", "mixed"]))))
    if kind in ("put", "ufunc_at", "fill"):
        return Step(kind, (a, b, draw(st.integers(0, N - 1))))
    if kind == "where_reduce":
        return Step(kind, (a, b, draw(st.sampled_from(THRESHOLDS)),
                           draw(st.sampled_from(["sum", "prod", "max", "mean"]))))
    if kind == "complex":
        return Step(kind, (a, b, draw(st.sampled_from(["abs", "real_exp", "angle", "fft"]))))
    if kind == "alias":
        return Step(kind, (a, b, draw(st.sampled_from(ALIAS_FORMS))))
    if kind in ("cast", "initial", "interp", "argmax", "unravel", "argsort"):
        return Step(kind, (a, b))
    return Step(kind, (a, b, draw(st.sampled_from(THRESHOLDS))))


@st.composite
def programs(draw: Any, max_steps: int = 4) -> Program:
    count = draw(st.integers(1, max_steps))
    return Program([draw(steps(i + 2)) for i in range(count)])


vectors = st.lists(st.floats(-1.5, 1.5, allow_nan=False, allow_subnormal=False),
                   min_size=N, max_size=N).map(np.array)


def _finite(*values: Any) -> bool:
    return all(np.all(np.isfinite(v)) and np.max(np.abs(v)) < 1e6 for v in values)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
          deadline=None)
@given(programs(), vectors, st.lists(vectors, min_size=1, max_size=3), vectors)
def test_tapes_replay_what_eager_mode_computes(program, x0, points, v):
    note(repr(program))
    with np.errstate(all="ignore"):
        assume(_finite(program(x0)))
    _check_program(program, x0, points, v)


@pytest.mark.parametrize("which", ALIAS_FORMS)
def test_alias_forms(which):
    """Each aliasing form, alone and fed into another, at points on both sides of the mask's
    threshold (the differential guard draws them at random)."""
    rng = np.random.default_rng(len(which))
    x0, v = rng.uniform(-1.5, 1.5, N), rng.uniform(-1.5, 1.5, N)
    points = [rng.uniform(-1.5, 1.5, N) for _ in range(3)]
    for program in (Program([Step("alias", (0, 1, which))]),
                    Program([Step("alias", (1, 0, which)), Step("alias", (2, 0, which))])):
        _check_program(program, x0, points, v)


def _check_program(program: Program, x0: Any, points: list[Any], v: Any) -> None:
    with np.errstate(all="ignore"):
        tape = ad.record(program, x0)
    for x in points:
        margins: list[float] = []
        with np.errstate(all="ignore"):
            value = program(x, margins)
        if not _finite(value):
            continue
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", ad.TapeRetraceWarning)
            eager_grad = ad.grad(program)(x)
            got_value, got_grad = tape.value_and_grad(x)
            _, got_jvp = tape.jvp((x,), (v,))
            got_hvp = tape.hvp((x,), v)
            _, eager_jvp = ad.jvp(program, (x,), (v,))
            eager_hvp = ad.hvp(program, x, v)
        if not _finite(eager_grad, eager_hvp):
            continue
        scale = max(1.0, float(np.max(np.abs(eager_grad))))
        np.testing.assert_allclose(got_value, value, rtol=1e-12, atol=1e-12,
                                   err_msg="tape value vs numpy")
        assert got_grad.dtype == np.float64 and not np.iscomplexobj(got_grad)
        np.testing.assert_allclose(got_grad, eager_grad, rtol=1e-9, atol=1e-12 * scale,
                                   err_msg="tape grad vs eager")
        np.testing.assert_allclose(got_jvp, eager_jvp, rtol=1e-9, atol=1e-12 * scale,
                                   err_msg="tape jvp vs eager")
        hscale = max(1.0, float(np.max(np.abs(eager_hvp))))
        np.testing.assert_allclose(got_hvp, eager_hvp, rtol=1e-8, atol=1e-10 * hscale,
                                   err_msg="tape hvp vs eager")
        np.testing.assert_allclose(got_jvp, got_grad @ v, rtol=1e-8, atol=1e-10 * scale,
                                   err_msg="jvp vs grad . v")
        if margins and min(margins) < 1e-3:
            continue  # too near a jump for differences
        with np.errstate(all="ignore"):
            expected = numerical_jacobian(lambda y: program(y), (x,), 0)
        if _finite(expected):
            np.testing.assert_allclose(got_grad, expected, rtol=1e-4, atol=1e-5 * scale,
                                       err_msg="tape grad vs central differences")
