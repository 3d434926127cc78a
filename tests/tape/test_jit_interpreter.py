"""ad.jit beyond the compile-cost cap: the compiled interpreter (dualad/tape/interpreter.py)
against eager mode and central differences, per opcode, with guards, and its fallbacks."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dualad as ad
from dualad.derivatives.registry import get_rule
from dualad.derivatives.scalar_forms import scalar_forms
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape.interpreter import InterpretedProgram, interpreter_opcodes
from dualad.tape.interpreter_source import interpreter_source, map_key
from dualad.tape.jit import JitFallbackWarning
from dualad.tape.tape import TapeRetraceWarning

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from strategies import chain, programs  # noqa: E402

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def interpreted(fn):
    """``ad.jit(fn, fallback="error")`` (nothing may run in Python) whose calls must reach
    the interpreter."""
    jitted = ad.jit(fn, fallback="error")

    def call(*args):
        result = jitted(*args)
        kernel = jitted._fast_entry.kernel if jitted._fast_entry is not None else None
        assert kernel is not None and kernel.__qualname__.startswith("InterpretedProgram."), \
            "the call did not run in the interpreter"
        return result

    call.jitted = jitted
    return call


def model(x):
    """Broadcasting, gathers (slices, roll, concatenate, a buffer), sums over axes, a
    maximum over a row, powers with constant and computed exponents."""
    a = x.reshape(2, -1)
    b = np.tanh(a) * np.exp(-a[::-1] ** 2) + 0.5 * a.sum(axis=0)
    c = np.concatenate([b[0], np.roll(b[1], 1)])
    buf = np.zeros(c.size + 1)
    buf[1:] = c * np.cos(x) / (1.0 + x * x)
    buf[0] = np.max(a[0]) + np.min(b)
    return buf + np.sqrt(1.5 + x[0] * x[-1]) - np.abs(x[1]) ** 1.5 + np.sum(np.log1p(x * x) ** x[2])


def loss(x):
    return np.sum(model(x) ** 2) / x.size


POINTS = [np.linspace(-0.9, 1.1, 6), np.array([0.3, -1.2, 0.7, 2.0, -0.4, 0.9])]


# -- every transform, against eager mode and central differences -----------------------------

@pytest.mark.parametrize("x", POINTS)
def test_value_gradient_and_jacobian_beyond_the_cap(small_cap, x):
    np.testing.assert_allclose(interpreted(model)(x), model(x), rtol=1e-14, atol=1e-15)
    g = interpreted(ad.grad(loss))(x)
    np.testing.assert_allclose(g, ad.grad(loss)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, numerical_jacobian(loss, (x,), 0), rtol=1e-6, atol=1e-7)
    value, g2 = interpreted(ad.value_and_grad(loss))(x)
    assert isinstance(value, np.ndarray) and value.shape == ()
    np.testing.assert_allclose(value, loss(x), rtol=1e-14)
    np.testing.assert_allclose(g2, g, rtol=1e-15)
    J = interpreted(ad.jacobian(model, mode="forward"))(x)
    np.testing.assert_allclose(J, ad.jacobian(model, mode="forward")(x), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(J, numerical_jacobian(model, (x,), 0), rtol=1e-6, atol=1e-7)


def test_a_real_400_op_program_runs_in_the_interpreter():
    """No monkeypatch: the gradient of a 400-op chain of 8-vectors is above the cap."""
    f = lambda x: np.sum(chain(x, 400))  # noqa: E731
    x = np.linspace(0.1, 0.5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)
        g = interpreted(ad.grad(f))
        got = g(x)
        np.testing.assert_allclose(got, ad.grad(f)(x), rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(g(x * 2), ad.grad(f)(x * 2), rtol=1e-12, atol=1e-300)
    h = lambda y: chain(y, 400) * np.sum(y)  # noqa: E731 - a dense Jacobian
    J = ad.jit(ad.jacobian(h), fallback="error")(x)  # forward mode: below the cap
    np.testing.assert_allclose(J, ad.jacobian(h)(x), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(J, numerical_jacobian(h, (x,), 0), rtol=1e-6, atol=1e-10)


def test_numbers_zero_d_inputs_and_several_arguments(small_cap):
    f = lambda a, b, c: np.sum(np.sin(a * b) + c ** 2 * b) * a  # noqa: E731
    args = (0.7, np.array([0.2, -0.5, 1.5]), np.array(1.3))
    for argnums in (0, 1, 2, (0, 2), (1, 0, 2)):
        got = interpreted(ad.grad(f, argnums=argnums))(*args)
        expected = ad.grad(f, argnums=argnums)(*args)
        for gi, ei in zip(got if isinstance(got, tuple) else (got,),
                          expected if isinstance(expected, tuple) else (expected,)):
            assert np.shape(gi) == np.shape(ei)
            np.testing.assert_allclose(gi, ei, rtol=1e-13)
    for k in range(3):
        fd = numerical_jacobian(f, args, k)
        np.testing.assert_allclose(interpreted(ad.grad(f, argnums=k))(*args), fd, rtol=1e-6,
                                   atol=1e-8)
    jac = interpreted(ad.jacobian(lambda a, b: np.sin(a * b) + b[0], argnums=(0, 1)))
    Ja, Jb = jac(0.7, args[1])
    ea, eb = ad.jacobian(lambda a, b: np.sin(a * b) + b[0], argnums=(0, 1))(0.7, args[1])
    np.testing.assert_allclose(Ja, ea, rtol=1e-13)
    np.testing.assert_allclose(Jb, eb, rtol=1e-13)


def test_trees_of_outputs_aux_and_batches(small_cap):
    def f(x):
        return {"y": np.sin(x) * x[0], "s": np.sum(x ** 2), "c": 2.0}

    x = np.array([0.4, -1.1, 2.0])
    got = interpreted(f)(x)
    assert set(got) == {"y", "s", "c"} and got["c"] == 2.0
    np.testing.assert_allclose(got["y"], f(x)["y"], rtol=1e-15)
    np.testing.assert_allclose(got["s"], f(x)["s"], rtol=1e-15)
    with_aux = lambda x: (np.sum(np.tanh(x)), {"m": x * 2})  # noqa: E731
    (value, aux), g = interpreted(ad.value_and_grad(with_aux, has_aux=True))(x)
    (ev, eaux), eg = ad.value_and_grad(with_aux, has_aux=True)(x)
    np.testing.assert_allclose(g, eg, rtol=1e-14)
    np.testing.assert_allclose(aux["m"], eaux["m"])
    np.testing.assert_allclose(value, ev)
    jac, aux = interpreted(ad.jacobian(lambda x: (np.sin(x) * x, x.sum()), has_aux=True))(x)
    np.testing.assert_allclose(jac, ad.jacobian(np.sin)(x) * x + np.diag(np.sin(x)))
    assert aux == pytest.approx(x.sum())
    xs = np.stack([x, -x, x * 0.5])
    jitted = interpreted(ad.jacobian(model))
    jitted(np.linspace(0.1, 0.6, 6))
    Js = jitted.jitted.batch(np.stack([POINTS[0], POINTS[1]]))
    for J, p in zip(Js, POINTS):
        np.testing.assert_allclose(J, ad.jacobian(model)(p), rtol=1e-12, atol=1e-14)
    grads = interpreted(ad.grad(lambda x: np.sum(np.sin(x) * x)))
    grads(x)
    np.testing.assert_allclose(grads.jitted.batch(xs), [np.sin(r) + r * np.cos(r) for r in xs],
                               rtol=1e-14)


def test_constants_keep_their_sign_and_nan(small_cap):
    f = lambda x: np.copysign(x, -0.0) * 2.0 + np.copysign(x, 0.0) + np.fmax(x, np.nan)  # noqa: E731
    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_array_equal(interpreted(f)(x), f(x))
    np.testing.assert_allclose(interpreted(ad.jacobian(f))(x), ad.jacobian(f)(x), rtol=1e-15)


def test_masks_of_comparisons(small_cap):
    f = lambda x: np.sum(x * (x > 0.2) + np.sin(x) * np.isnan(x) + (x <= x[1]) * x ** 2)  # noqa: E731
    for x in (np.linspace(-1.0, 1.0, 5), np.array([0.3, -0.2, 0.25, 2.0, -1.5])):
        np.testing.assert_allclose(interpreted(ad.grad(f))(x), ad.grad(f)(x), rtol=1e-14)
        np.testing.assert_allclose(interpreted(ad.grad(f))(x),
                                   numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)


def test_where_of_computed_values(small_cap):
    f = lambda x: np.sum(np.where(x > 0.1, x * x, np.sin(x)) * np.where(x < x[0], 2.0, x))  # noqa: E731
    for x in (np.linspace(-1.0, 1.0, 5), np.array([0.3, -0.2, 0.25, 2.0, -1.5])):
        np.testing.assert_allclose(interpreted(f)(x), f(x), rtol=1e-15)
        np.testing.assert_allclose(interpreted(ad.grad(f))(x), ad.grad(f)(x), rtol=1e-14)
        np.testing.assert_allclose(interpreted(ad.grad(f))(x),
                                   numerical_jacobian(f, (x,), 0), rtol=1e-6, atol=1e-8)
        h = lambda x: np.where(x > 0.1, x * x, np.sin(x))  # noqa: E731
        np.testing.assert_allclose(interpreted(ad.jacobian(h))(x), ad.jacobian(h)(x),
                                   rtol=1e-14)


def test_in_the_background(small_cap):
    f = lambda x: np.sum(np.tanh(x) * x)  # noqa: E731
    g = ad.jit(ad.grad(f), fallback="error", background=True)
    x = np.linspace(-1.0, 1.0, 4)
    np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-14)  # the replay, or compiled
    assert g.wait(120)
    np.testing.assert_allclose(g(x), ad.grad(f)(x), rtol=1e-14)
    assert g._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")


def test_sparse_jacobian(small_cap):
    def f(y):
        return np.roll(y, 1) * y - np.sin(y) + y[0]

    y = np.linspace(-1.0, 2.0, 7)
    J = interpreted(ad.sparse_jacobian(f))(y)
    np.testing.assert_allclose(J.toarray(), ad.jacobian(f)(y), rtol=1e-14)


@settings(max_examples=int(os.environ.get("DUALAD_INTERPRETER_EXAMPLES", "8")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(programs(max_ops=8, max_inputs=1))
def test_random_programs_interpreted_agree_with_eager(small_cap, program):
    """The tape differential guard, run by the interpreter (or its fallback where the
    program does not lower)."""
    x = program.inputs[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            expected = ad.jacobian(program, mode="forward")(x)
            got = ad.jit(ad.jacobian(program))(x)
            value = ad.jit(program)(x)
            loss = lambda y: np.sum(program(y))  # noqa: E731
            g = ad.jit(ad.grad(loss))(x)
            eg = ad.grad(loss)(x)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(value, program(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, eg, rtol=1e-10, atol=1e-10)


# -- each generated opcode against its eager derivative ---------------------------------------

def _opcode_rules():
    """The rules whose functions the interpreter runs (one opcode each; its source, not
    the module: collection runs before the kernel cache fixture)."""
    _, ops = interpreter_source()
    return sorted(key[1] for key in ops if key[0] == "map" and
                  get_rule(getattr(np, key[1], None)) is not None)


#: Points where a rule is at an edge of its domain or derivative (eager mode's value there
#: is the reference: inf, nan and the JAX conventions included).
EDGES = {
    "power": [(0.0, 2.0), (0.0, 0.0), (0.0, 0.5), (0.0, 3.0), (-1.5, 2.0), (2.0, -1.0)],
    "float_power": [(0.0, 2.0), (0.0, 0.0), (0.0, 0.5)],
    "log": [(1e-300,), (0.0,)], "log2": [(1e-300,)], "log10": [(1e-300,)],
    "log1p": [(-1.0 + 1e-12,)], "sqrt": [(0.0,), (1e-300,)], "cbrt": [(0.0,)],
    "absolute": [(0.0,)], "fabs": [(0.0,)], "sign": [(0.0,)],
    "maximum": [(1.0, 1.0)], "minimum": [(1.0, 1.0)], "fmax": [(1.0, 1.0)],
    "fmin": [(1.0, 1.0)], "hypot": [(0.0, 0.0)], "arctan2": [(0.0, 1.0)],
    "divide": [(1.0, 1e-300)], "reciprocal": [(1e-300,)], "arcsin": [(1.0,)],
    "copysign": [(0.0, -1.0), (2.0, -0.0)],
}


def _points(name):
    rule = get_rule(getattr(np, name))
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    n = len(rule.arg_names)
    if rule.domain:
        cols = [np.asarray(rule.domain[a].sample(rng, (5,)), dtype=np.float64)
                for a in rule.arg_names]
    else:
        cols = [rng.uniform(0.2, 1.5, 5) for _ in range(n)]
    edges = EDGES.get(name, [])
    for k in range(n):
        cols[k] = np.concatenate([cols[k], [e[k] for e in edges]])
    return rule, cols


@pytest.mark.parametrize("name", _opcode_rules())
def test_every_opcode_against_eager_mode(small_cap, name, monkeypatch):
    from dualad.tape import interpreter

    monkeypatch.setattr(interpreter, "SUBSET_MODULES", 0)  # one interpreter for them all
    rule, cols = _points(name)
    fn = getattr(np, name)
    n = len(cols)
    m = cols[0].size
    x = np.concatenate(cols)

    def f(x):  # the ufunc on slices (gathers feed it), summed with weights, and a constant
        parts = [x[k * m:(k + 1) * m] for k in range(n)]
        return fn(*parts) * 1.0

    def g(x):
        return np.sum(f(x) * np.linspace(0.5, 1.5, m))

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(interpreted(f)(x), f(x), rtol=1e-15, atol=0)
        eager_J = ad.jacobian(f, mode="forward")(x)
        # a Jacobian with a NaN is answered by the tape's replay (eager forward mode is
        # NaN-safe, the compiled code is not: see NanTangents)
        J = (ad.jit if np.isnan(eager_J).any() else interpreted)(
            ad.jacobian(f, mode="forward"))(x)
        np.testing.assert_allclose(J, eager_J, rtol=1e-13, atol=0)
        got = interpreted(ad.grad(g))(x)
        np.testing.assert_allclose(got, ad.grad(g)(x), rtol=1e-13, atol=0)
    # central differences at the sampled points, inside the rule's domain
    inner = np.concatenate([c[:5] for c in cols])
    with np.errstate(all="ignore"):
        h = lambda y: fn(*[y[k * 5:(k + 1) * 5] for k in range(n)])  # noqa: E731
        fd = numerical_jacobian(h, (inner,), 0)
        Jh = interpreted(ad.jacobian(h, mode="forward"))(inner)
    ok = np.isfinite(fd) & np.isfinite(Jh)
    assert ok.sum() >= 5 * n
    np.testing.assert_allclose(Jh[ok], fd[ok], rtol=1e-4, atol=1e-6)


def test_opcodes_follow_the_rules_tables():
    """The opcode of each rule carries the table's own scalar partials: a rule with
    different partials (a redefined one) finds no opcode, so it is never run wrongly."""
    ops = interpreter_opcodes()
    keys = [k for k in ops if k[0] == "map"]
    ufuncs = [k[1] for k in keys if k[1]]
    assert len(set(ufuncs)) == len(ufuncs) >= 40  # one per function
    assert map_key("sin", ("x",), [], ["math.cos(x)"]) in ops
    assert map_key("sin", ("x",), [], ["(-math.cos(x))"]) not in ops
    # the declared scalar forms (np.where's, the NaN-safe tangent product), one each
    forms = [k for k in keys if k[1] == ""]
    assert len(forms) == len(set(forms)) == len(scalar_forms()) >= 2


# -- guards -------------------------------------------------------------------------------------

def branchy(x):
    y = np.sin(x) * 1.5
    if y[0] > 0.2:  # a guard on a comparison
        y = y * x
    else:
        y = np.exp(y)
    while np.sum(y * y) > 4.0:  # a loop count that depends on the values
        y = y * 0.5
    return np.sum(y ** 2) + x[2]


def test_guards_fail_over_and_record_again(small_cap):
    g = interpreted(ad.grad(branchy))
    a = np.array([0.5, 0.3, 1.0])
    b = np.array([-0.5, 0.3, 1.0])  # the other branch
    c = np.array([1.5, 1.3, 2.0])  # another loop count
    np.testing.assert_allclose(g(a), ad.grad(branchy)(a), rtol=1e-13)
    for point in (b, c, a, b):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TapeRetraceWarning)
            got = g(point)
        np.testing.assert_allclose(got, ad.grad(branchy)(point), rtol=1e-13)
        np.testing.assert_allclose(got, numerical_jacobian(branchy, (point,), 0), rtol=1e-6,
                                   atol=1e-8)


def test_a_failing_guard_raises_guard_failed_in_the_entries(small_cap):
    from dualad.tape import record
    from dualad.tape.lowering import lower
    from dualad.tape.program import GuardFailed

    a = np.array([0.5, 0.3, 1.0])
    code = InterpretedProgram(lower(record(branchy, a).program, [a]))
    assert code.guarded
    for entry in (code.value(), code.gradient((0,)), code.jacobian((0,))):
        entry(a)
        entry(np.array([0.6, 0.3, 1.0]))
        with pytest.raises(GuardFailed):  # the other branch
            entry(np.array([-0.5, 0.3, 1.0]))
        with pytest.raises(GuardFailed):  # another loop count
            entry(np.array([1.5, 1.3, 2.0]))
        with pytest.raises(GuardFailed):  # another size: another recording's
            entry(np.ones(4))
        with pytest.raises(TypeError):
            entry(a.astype(np.float32))


@pytest.mark.parametrize("kind, recorded, same, other", [
    ("float", [0.5, 0.3, 1.0], [0.5, 0.3, 1.0], [0.5, 0.3, 1.5]),
    ("int", [0.0, 0.0, 1.0], [0.7, 0.2, 1.9], [1.5, 0.3, 1.0]),
    ("bool", [1.0, 1.0, 1.0], [0.7, -0.2, 1.9], [0.0, 0.3, 1.0])])
def test_guards_on_values_read_as_numbers(small_cap, kind, recorded, same, other):
    from dualad.tape import record
    from dualad.tape.lowering import Guard, lower
    from dualad.tape.program import GuardFailed

    a = np.array([0.5, 0.3, 1.0])
    low = lower(record(lambda x: np.sum(np.sin(x)), a).program, [a])
    low.instructions.append(Guard(0, 0, None, (), [], kind, np.array(recorded)))
    code = InterpretedProgram(low)
    for entry in (code.value(), code.gradient((0,)), code.jacobian((0,))):
        entry(np.array(same))
        with pytest.raises(GuardFailed):
            entry(np.array(other))


# -- what the interpreter refuses --------------------------------------------------------------

@pytest.fixture
def no_sin_opcode(monkeypatch):
    """An interpreter without an opcode for np.sin (as for a function it cannot run)."""
    import dualad.tape.interpreter as interpreter

    ops = interpreter_opcodes()
    fewer = {k: v for k, v in ops.items() if not (k[0] == "map" and k[1] == "sin")}
    monkeypatch.setattr(interpreter, "interpreter_opcodes", lambda: fewer)


def with_sin(x):
    return np.sum(np.sin(x) @ np.cos(x) + x)


def test_a_refused_program_falls_back_once(small_cap, no_sin_opcode):
    x = np.linspace(0.1, 0.9, 4).reshape(2, 2)
    g = ad.jit(ad.grad(with_sin))
    with pytest.warns(JitFallbackWarning, match="nor interpret it.*np.sin"):
        got = g(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # said once
        np.testing.assert_allclose(g(x * 2), ad.grad(with_sin)(x * 2), rtol=1e-14)
    np.testing.assert_allclose(got, ad.grad(with_sin)(x), rtol=1e-14)
    with pytest.raises(ad.JitError, match="MAX_COMPILE_COST.*nor interpret it.*np.sin"):
        ad.jit(ad.grad(with_sin), fallback="error")(x)


def mm(a, b):
    return np.tanh(a) @ (b * b) + 1.0


def mm_loss(a, b):
    return np.sum(mm(a, b) ** 2)


def test_matrix_products_of_computed_values(small_cap):
    for sa, sb in (((2, 3), (3, 4)), ((3, 2), (2, 3))):
        a = np.linspace(-1.0, 1.0, sa[0] * sa[1]).reshape(sa)
        b = np.cos(np.arange(sb[0] * sb[1], dtype=float)).reshape(sb)
        np.testing.assert_allclose(interpreted(mm)(a, b), mm(a, b), rtol=1e-14)
        for k in (0, 1):
            g = interpreted(ad.grad(mm_loss, argnums=k))(a, b)
            np.testing.assert_allclose(g, ad.grad(mm_loss, argnums=k)(a, b), rtol=1e-13)
            np.testing.assert_allclose(g, numerical_jacobian(mm_loss, (a, b), k), rtol=1e-6,
                                       atol=1e-8)
            J = interpreted(ad.jacobian(mm, argnums=k, mode="forward"))(a, b)
            np.testing.assert_allclose(J, ad.jacobian(mm, argnums=k)(a, b), rtol=1e-13,
                                       atol=1e-15)


def test_inputs_of_other_layouts_are_copied_not_compiled_for(small_cap):
    g = interpreted(ad.grad(lambda x: np.sum(np.sin(x) * x)))
    x = np.linspace(0.0, 1.0, 10)
    expected = np.sin(x) + x * np.cos(x)
    np.testing.assert_allclose(g(x), expected, rtol=1e-14)
    frozen = x.copy()
    frozen.flags.writeable = False
    np.testing.assert_allclose(g(frozen), expected, rtol=1e-14)
    strided = np.repeat(x, 2)[::2]
    np.testing.assert_allclose(g(strided), expected, rtol=1e-14)
    np.testing.assert_allclose(g(x.astype(np.float32)), expected, rtol=1e-6)
    from dualad.tape import interpreter

    forms = [len(module.gradient.signatures) for module, _ in interpreter._modules.values()
             if module.gradient.signatures]
    assert forms and max(forms) == 1  # one compiled form, whatever came in


def test_a_process_compiles_its_programs_opcodes_then_every_opcode(small_cap, monkeypatch):
    """The first programs get interpreters of their own opcodes; a module that runs a
    program's opcodes serves it; past ``SUBSET_MODULES`` sets a process takes the
    interpreter of every opcode, and the numbers do not depend on which one ran."""
    from dualad.tape import interpreter

    monkeypatch.setattr(interpreter, "_modules", {})
    monkeypatch.setattr(interpreter, "SUBSET_MODULES", 2)
    ops = interpreter_opcodes()
    sin_op = ops[map_key("sin", ("x",), [], ["math.cos(x)"])]
    cos_op = ops[map_key("cos", ("x",), [], ["(-math.sin(x))"])]
    x = np.linspace(0.1, 1.0, 6)

    def run(fn):
        g = interpreted(ad.grad(lambda x: np.sum(fn(x) * x)))
        np.testing.assert_allclose(g(x), ad.grad(lambda x: np.sum(fn(x) * x))(x),
                                   rtol=1e-14)
        return [key[1] for key in interpreter._modules]

    (first,) = run(np.sin)
    assert sin_op in first and cos_op not in first
    assert run(np.sin) == [first]  # the same opcodes: the same module
    second = run(np.cos)[1]
    assert cos_op in second and sin_op not in second
    assert run(np.tanh)[2] is None  # the third set: every opcode
    assert len(run(np.arctan)) == 3  # served by the interpreter of every opcode


def test_programs_that_do_not_lower_still_fall_back_as_before(small_cap):
    f = lambda x: np.sum(np.linalg.eigh(np.outer(x, x))[0] * x)  # noqa: E731 - two results
    x = np.array([0.5, 2.0, 3.0])
    with pytest.raises(ad.JitError) as info:
        ad.jit(ad.grad(f), fallback="error")(x)
    assert "nor interpret" not in str(info.value)
    with pytest.warns(JitFallbackWarning):
        np.testing.assert_allclose(ad.jit(ad.grad(f))(x), ad.grad(f)(x), rtol=1e-14)


def test_calls_without_compiled_form_are_not_interpreted(small_cap):
    """A call run as itself between compiled parts (``np.prod`` here) has no opcode:
    beyond the cap, the program runs as the replay, and the message names the call."""
    f = lambda x: np.sum(np.prod(x) * x)  # noqa: E731
    x = np.array([0.5, 2.0, 3.0])
    with pytest.raises(ad.JitError, match=r"nor interpret it \(Method\[prod\]"):
        ad.jit(ad.grad(f), fallback="error")(x)
    with pytest.warns(JitFallbackWarning):
        np.testing.assert_allclose(ad.jit(ad.grad(f))(x), ad.grad(f)(x), rtol=1e-14)


def test_below_the_cap_the_straight_line_code_runs():
    g = ad.jit(ad.grad(lambda x: np.sum(np.sin(x) * x)), fallback="error")
    x = np.array([0.1, 0.2])
    np.testing.assert_allclose(g(x), np.sin(x) + x * np.cos(x), rtol=1e-14)
    kernel = g._fast_entry.kernel
    assert not getattr(kernel, "__qualname__", "").startswith("InterpretedProgram.")


def test_the_interpreters_first_compile_runs_in_the_background(small_cap, monkeypatch):
    """Where the interpreter has never compiled on this machine (seconds), the first call
    runs the tape's replay while a thread compiles; later calls run the interpreter."""
    from dualad.tape.interpreter import InterpretedProgram

    monkeypatch.setattr(InterpretedProgram, "compiled", lambda self: False)
    x = POINTS[1]
    g = ad.jit(ad.grad(loss))  # fallback="warn"
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitFallbackWarning)  # nothing to report
        first = g(x)
        assert g.wait()
        later = g(x * 0.5)
    np.testing.assert_allclose(first, ad.grad(loss)(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(later, ad.grad(loss)(x * 0.5), rtol=1e-12, atol=1e-14)
    assert g._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")
    strict = ad.jit(ad.grad(loss), fallback="error")  # waits for the compile instead
    np.testing.assert_allclose(strict(x), first, rtol=1e-15)
    assert strict._fast_entry.kernel.__qualname__.startswith("InterpretedProgram.")
