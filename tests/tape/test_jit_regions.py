"""The compiler's regions, index arithmetic, numpy glue and parts: plans inspected,
compiled results against eager mode, central differences and hand-written Jacobians."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualad as ad
import dualad.tape.numba_backend as backend
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import record
from dualad.tape.jit import JitFallbackWarning
from dualad.tape.lowering import lower
from dualad.tape.regions import Region, Step, compose_gathers, index_source, partition

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


def plan_of(f, *args):
    args = [np.asarray(a, dtype=float) for a in args]
    return partition(lower(record(f, *args).program, args))


def kinds(plan):
    return [type(item).__name__ for item in plan.items]


# -- index arithmetic ------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data())
def test_index_source_matches_moved_indices(shape, data):
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    shift = data.draw(st.integers(-6, 6))
    kind = data.draw(st.sampled_from(["roll", "transpose", "broadcast", "slice", "flip"]))
    if kind == "roll":
        moved = np.roll(ids, shift, axis)
    elif kind == "transpose":
        moved = np.transpose(ids)
    elif kind == "broadcast":
        moved = np.broadcast_to(ids, (data.draw(st.integers(1, 3)),) + tuple(shape))
    elif kind == "slice":
        moved = ids[..., ::2]
    else:
        moved = np.flip(ids, axis)
    idx = np.ascontiguousarray(moved).ravel()
    source = index_source(idx)
    if source is None:  # no pattern: read from a constant array (rare for these)
        assert kind in ("transpose", "flip", "roll", "slice")
        return
    _i = np.arange(idx.size)
    got = eval(source, {"_i": _i})  # noqa: S307 - generated arithmetic on _i
    np.testing.assert_array_equal(np.broadcast_to(got, idx.shape), idx)


def test_index_patterns_are_loop_arithmetic():
    assert index_source(np.arange(6)) == "_i"
    assert index_source(np.arange(2, 8)) == "(_i + 2)"
    assert index_source(np.roll(np.arange(5), -1)) == "((_i + 1) % 5)"
    a = np.arange(12).reshape(3, 4)
    assert index_source(np.roll(a, 1, axis=1).ravel()) == "(_i // 4 * 4 + ((_i % 4 + 3) % 4))"
    assert index_source(np.broadcast_to(np.arange(4), (3, 4)).ravel()) == "(_i % 4)"
    assert index_source(np.array([3, 0, 2, 1])) is None


# -- plans -----------------------------------------------------------------------------------

def lorenz96(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0


def brusselator(y, n=4):
    u, v = y[:n * n].reshape(n, n), y[n * n:].reshape(n, n)

    def lap(a):
        return (np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1)
                + np.roll(a, -1, 1) - 4 * a) * n * n

    uuv = u * u * v
    return np.concatenate([(1.0 + uuv - 4.4 * u + 10.0 * lap(u)).ravel(),
                           (3.4 * u - uuv + 10.0 * lap(v)).ravel()])


def test_views_and_pieces_fuse_into_one_region():
    plan = plan_of(lorenz96, np.ones(7))
    assert kinds(plan) == ["Region"] and len(plan.items[0].nodes) == 4  # rolls are views
    plan = plan_of(brusselator, np.ones(32))
    assert kinds(plan) == ["Region"]  # the two halves write the concatenation directly
    region = plan.items[0]
    assert region.domain == 16 and region.writes == {plan.out}


def test_reductions_end_regions_and_steps_stand_apart():
    plan = plan_of(lambda x: np.sum(np.sin(x) * x, axis=1), np.ones((3, 4)))
    assert kinds(plan) == ["Region"] and plan.items[0].nodes[-1].kind == "reduce"
    plan = plan_of(lambda x, w: np.sum(np.tanh(x @ w)), np.ones((3, 4)), np.ones((4, 2)))
    assert kinds(plan) == ["Step", "Region"] and isinstance(plan.items[0], Step)


def test_a_local_read_at_another_entry_starts_a_new_region():
    plan = plan_of(lambda x: np.roll(np.sin(x), 1) * x, np.ones(5))
    assert kinds(plan) == ["Region", "Region"]
    assert plan.items[0].nodes[0].shared  # sin(x) is read by the next region


# -- compiled against eager mode and differences ---------------------------------------------

def mixed(x):
    """Views composed (reshape, transpose, roll on an axis, slices), broadcasting, writes into
    a buffer with constants, sums and means over axes, a row maximum."""
    a = x.reshape(3, 4)
    b = np.roll(a.T, 1, axis=0) * a.T[:, ::-1]  # (4, 3)
    buf = np.zeros(14)
    buf[1:13] = np.exp(-b.ravel() ** 2) + np.sum(a, axis=0).repeat(3)
    c = buf.reshape(2, 7)
    return np.concatenate([np.mean(c * np.cos(c), axis=1), np.max(a, axis=1),
                           np.sin(x[2:5]) * x[0]])


@pytest.mark.parametrize("seed", [0, 1])
def test_mixed_program_jacobian_and_gradient(seed):
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, 12)
    J = ad.jit(ad.jacobian(mixed), fallback="error")(x)
    np.testing.assert_allclose(J, ad.jacobian(mixed)(x), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(J, numerical_jacobian(mixed, (x,), 0), atol=1e-6)
    loss = lambda x: np.sum(mixed(x) ** 2)  # noqa: E731
    g = ad.jit(ad.grad(loss), fallback="error")(x)
    np.testing.assert_allclose(g, ad.grad(loss)(x), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ad.jit(mixed, fallback="error")(x), mixed(x), rtol=1e-14)


def test_compressed_brusselator_matches_hand_written_jacobian():
    n = 4
    y = np.random.default_rng(2).uniform(0.5, 2.0, 2 * n * n)
    J = ad.jit(ad.sparse_jacobian(brusselator), fallback="error")(y).toarray()
    u, v = y[:n * n], y[n * n:]
    lap = np.zeros((n * n, n * n))
    for i in range(n):
        for j in range(n):
            k = i * n + j
            lap[k, k] = -4.0
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                lap[k, ((i + di) % n) * n + (j + dj) % n] += 1.0
    lap *= 10.0 * n * n
    hand = np.block([[np.diag(2 * u * v - 4.4) + lap, np.diag(u * u)],
                     [np.diag(3.4 - 2 * u * v), np.diag(-u * u) + lap]])
    np.testing.assert_allclose(J, hand, rtol=1e-13, atol=1e-10)


# -- numpy glue, parts and the compile-cost cap ----------------------------------------------

def big_loss(x):
    """Large tanh and exp (numpy's vectorised loops run them), then a reduction."""
    h = np.tanh(x * 0.5 + 0.1)
    return np.sum(h * h + np.exp(-x * x)) / x.size


def test_large_transcendentals_run_as_numpy_in_the_glue():
    plan = plan_of(big_loss, np.ones(600))
    assert any(isinstance(r, Region) and r.numpy for r in plan.items)
    x = np.random.default_rng(3).standard_normal(600)
    vg = ad.jit(ad.value_and_grad(big_loss), fallback="error")
    value, g = vg(x)
    np.testing.assert_allclose(value, big_loss(x), rtol=1e-13)
    np.testing.assert_allclose(g, ad.grad(big_loss)(x), rtol=1e-12, atol=1e-16)
    h = 1e-6
    e = np.zeros(600)
    for i in (0, 17, 599):
        e[i] = h
        fd = (big_loss(x + e) - big_loss(x - e)) / (2 * h)
        e[i] = 0.0
        assert abs(g[i] - fd) < 1e-7
    kernel = vg._fast_entry.kernel
    assert not hasattr(getattr(kernel, "func", kernel), "py_func")  # Python glue
    xs = np.stack([x, x[::-1]])
    values, grads = vg.batch(xs)
    np.testing.assert_allclose(grads[1], ad.grad(big_loss)(x[::-1]), rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(values, [big_loss(x), big_loss(x[::-1])], rtol=1e-13)


def layer_loss(x, b):
    """A layer's activations: a broadcast add before tanh, cheap calls after it."""
    h = np.tanh(x * 0.5 + b)
    return np.sum(h * h - 0.25 * h) + np.sum(np.exp(-b * b))


def test_cheap_calls_before_a_numpy_call_run_in_the_numba_code():
    rng = np.random.default_rng(5)
    x, b = rng.standard_normal((64, 32)), rng.standard_normal(32)
    plan = plan_of(layer_loss, x, b)
    numpy_regions = [r for r in plan.items if isinstance(r, Region) and r.numpy]
    assert len(numpy_regions) == 1 and numpy_regions[0].domain == 64 * 32
    head = backend.NumbaProgram._numpy_head(numpy_regions[0])
    assert [n.name for n in head] == ["multiply", "add"]  # x * 0.5 + b; not h * h after tanh
    vg = ad.jit(ad.value_and_grad(layer_loss, argnums=(0, 1)), fallback="error")
    value, (gx, gb) = vg(x, b)
    ex, eb = ad.grad(layer_loss, argnums=(0, 1))(x, b)
    np.testing.assert_allclose(value, layer_loss(x, b), rtol=1e-13)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gb, eb, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gb, numerical_jacobian(layer_loss, [x, b], 1),
                               rtol=1e-6, atol=1e-8)
    h, e = 1e-6, np.zeros_like(x)
    for i in ((0, 0), (17, 3), (63, 31)):
        e[i] = h
        fd = (layer_loss(x + e, b) - layer_loss(x - e, b)) / (2 * h)
        e[i] = 0.0
        assert abs(gx[i] - fd) < 1e-7
    kernel = vg._fast_entry.kernel
    source = open(__import__(getattr(kernel, "func", kernel).__module__).__file__).read()
    glue = source.split("def tape_")[-1]
    assert "np.tanh(" in glue and "np.exp(" not in glue  # exp over 32 entries: in Numba
    for name in ("add", "multiply", "subtract"):  # before tanh and after it: Numba loops
        assert f"np.{name}(" not in glue


def test_a_small_region_of_one_fast_call_stays_in_numba():
    x = np.linspace(-1.0, 1.0, 640)  # one exp over 640 entries: below NUMPY_MIN_SIZE
    plan = plan_of(lambda x: np.sum(np.exp(x * x)), x)
    assert not any(isinstance(r, Region) and r.numpy for r in plan.items)
    g = ad.jit(ad.grad(lambda x: np.sum(np.exp(x * x))), fallback="error")
    np.testing.assert_allclose(g(x), 2 * x * np.exp(x * x), rtol=1e-13)


def test_programs_cut_into_parts_agree(monkeypatch):
    monkeypatch.setattr(backend, "MAX_FUNCTION_LINES", 12)

    def f(x):
        for _ in range(4):
            x = np.sin(x) * 1.1 + np.roll(x, 1)
        return x

    x = np.linspace(-1.0, 1.0, 5)
    jac = ad.jit(ad.jacobian(f), fallback="error")
    np.testing.assert_allclose(jac(x), ad.jacobian(f)(x), rtol=1e-12, atol=1e-14)
    g = ad.jit(ad.grad(lambda x: np.sum(f(x))), fallback="error")
    np.testing.assert_allclose(g(x), ad.grad(lambda x: np.sum(f(x)))(x), rtol=1e-12)
    kernel = g._fast_entry.kernel
    module = __import__(getattr(kernel, "func", kernel).__module__)
    assert sum(name.startswith("_part") for name in dir(module)) >= 3


def test_too_large_programs_run_in_python(monkeypatch):
    """Beyond the cap, a program the interpreter refuses too (here: one whose opcodes are
    all taken away) runs as the tape's replay (tests/tape/test_jit_interpreter.py: the
    programs it runs)."""
    import dualad.tape.interpreter as interpreter

    monkeypatch.setattr(interpreter, "interpreter_opcodes", lambda: {})
    monkeypatch.setattr(backend, "MAX_COMPILE_COST", 20)
    f = lambda x: np.sum(np.sin(np.cos(x) * x) + x ** 3)  # noqa: E731
    x = np.linspace(0.1, 0.9, 4)
    with pytest.raises(ad.JitError, match="MAX_COMPILE_COST.*nor interpret it"):
        ad.jit(ad.grad(f), fallback="error")(x)
    g = ad.jit(ad.grad(f))
    with pytest.warns(JitFallbackWarning, match="MAX_COMPILE_COST.*nor interpret"):
        got = g(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(g(x * 2), ad.grad(f)(x * 2), rtol=1e-14)
    np.testing.assert_allclose(got, ad.grad(f)(x), rtol=1e-14)


def test_buffer_updates_in_place_keep_derivatives():
    def f(x):
        y = np.zeros(4)
        y[0] = x[0] * 2.0
        y[1] = y[0] + x[1]  # reads the buffer before the next write
        y[0] = np.sin(y[1]) * x[2]  # overwrites an entry whose old value was read
        y[2] = x[3]
        y[3] = y[0] * y[2]
        return y

    loss = lambda x: np.sum(f(x) ** 2)  # noqa: E731
    for x in (np.array([0.3, -0.2, 1.1, 0.7]), np.array([-1.0, 0.5, 0.25, 2.0])):
        J = ad.jit(ad.jacobian(f), fallback="error")(x)
        np.testing.assert_allclose(J, ad.jacobian(f)(x), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(J, numerical_jacobian(f, (x,), 0), atol=1e-6)
        g = ad.jit(ad.grad(loss), fallback="error")(x)
        np.testing.assert_allclose(g, ad.grad(loss)(x), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(g, numerical_jacobian(loss, (x,), 0), atol=1e-6)


def test_writes_into_a_buffer_compose_into_one_gather():
    def f(x):  # each write of an entry copies the buffer: the chain folds into one gather
        y = np.zeros(6)
        y[0] = x[0] * x[1]
        y[1] = np.sin(x[1])
        y[2] = x[2] + 1.0
        y[4] = x[0] - x[2]
        y[5] = y[1] * 2.0  # a written entry read back before the buffer is done
        y[1] = x[1] * x[1]  # an entry written twice: the second write wins
        return y

    x0 = np.array([0.3, -0.7, 1.2])
    low = lower(record(f, x0).program, [x0])
    composed = compose_gathers(low)
    last = composed[-1]
    assert type(last).__name__ == "Gather" and len(composed) < len(low.instructions)
    # the buffer as it was when y[1] was read (its entries 0, 2, 3, 4: those writes folded
    # into one gather), y[5] and the second y[1]; entry 3 is never written
    assert sorted(np.concatenate([p for _, p, _ in last.sources])) == [0, 1, 2, 3, 4, 5]
    assert len(last.sources) == 3 and last.constant[3] == 0.0
    loss = lambda x: np.sum(f(x) * f(x))  # noqa: E731
    for x in (x0, np.array([-1.0, 0.5, 0.25])):
        J = ad.jit(ad.jacobian(f), fallback="error")(x)
        np.testing.assert_allclose(J, ad.jacobian(f)(x), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(J, numerical_jacobian(f, (x,), 0), atol=1e-6)
        g = ad.jit(ad.grad(loss), fallback="error")(x)
        np.testing.assert_allclose(g, ad.grad(loss)(x), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(g, numerical_jacobian(loss, (x,), 0), atol=1e-6)


def read_back(y):  # right-hand sides that read entries of their output back (E5, HIRES)
    f = np.zeros(6)
    f[0] = -0.5 * y[0] - y[0] * y[2]
    f[1] = 0.5 * y[0] - 3.0 * y[1] * y[2]
    f[3] = y[0] * y[2] - y[3]
    f[4] = y[1]  # an input entry, copied
    f[2] = f[1] - f[3]  # entries written above, read back
    f[5] = -f[2] * f[4] + np.sin(f[0])
    return f


def test_entries_read_back_come_from_what_was_written():
    y0 = np.array([1.0, 0.5, 0.25, 2.0])
    plan = plan_of(read_back, y0)
    regions = [item for item in plan.items if isinstance(item, Region)]
    # one straight-line region: no copy loop of the buffer, no value read back from it
    assert len(regions) == 1 and regions[0].domain == 1 and regions[0].writes == {plan.out}
    loss = lambda y: np.sum(read_back(y) ** 2)  # noqa: E731
    vjp = ad.jit(lambda y, c: ad.vjp(read_back, y)[1](c), fallback="error")
    jvp = ad.jit(lambda y, v: ad.jvp(read_back, (y,), (v,)), fallback="error")
    c, v = np.linspace(-1.0, 1.0, 6), np.array([0.5, -1.0, 2.0, 0.25])
    for y in (y0, np.array([-0.3, 1.5, 0.8, -1.1]), np.zeros(4)):
        J = ad.jit(ad.jacobian(read_back), fallback="error")(y)
        np.testing.assert_allclose(J, ad.jacobian(read_back)(y), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(J, numerical_jacobian(read_back, (y,), 0), atol=1e-6)
        J = ad.jit(ad.ode_jacobian(lambda t, y: read_back(y)), fallback="error")(0.0, y)
        np.testing.assert_allclose(J, ad.jacobian(read_back)(y), rtol=1e-13, atol=1e-14)
        g = ad.jit(ad.grad(loss), fallback="error")(y)
        np.testing.assert_allclose(g, ad.grad(loss)(y), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(g, numerical_jacobian(loss, (y,), 0), atol=1e-6)
        np.testing.assert_allclose(vjp(y, c)[0], J.T @ c, rtol=1e-12, atol=1e-14)
        out, tangent = jvp(y, v)
        np.testing.assert_allclose(out, read_back(y), rtol=1e-14)
        np.testing.assert_allclose(tangent, J @ v, rtol=1e-12, atol=1e-14)
