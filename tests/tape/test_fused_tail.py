"""The fused tail of a compiled reverse pass: the last regions' values and sweeps in one
loop, entry by entry. Plans inspected; gradients, value_and_grad and vjp against eager mode
and central differences, on several points and shapes, with regions split small so that a
tail spans several of them."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dualad as ad
import dualad.tape.regions as regions
from dualad.diagnostics.gradcheck import numerical_jacobian
from dualad.tape import record
from dualad.tape.lowering import lower
from dualad.tape.numba_backend import NumbaProgram

pytestmark = pytest.mark.usefixtures("kernel_cache")  # see conftest.py


@pytest.fixture
def small_regions(monkeypatch):
    """Regions of at most 4 nodes: a chain of elementwise calls spans several."""
    monkeypatch.setattr(regions, "MAX_REGION_NODES", 4)


def chain(x, n=14):
    for i in range(n):
        x = np.sin(x) if i % 3 == 0 else (x * 1.0001 if i % 3 == 1 else x + 0.1)
    return x


def chain_loss(x):
    return np.sum(chain(x) * x)  # the input read again at the tail's end


def rolled_input_loss(x):
    # the last regions read the input at the same entry, the first one reads it rolled
    # (its adjoint gets terms at other entries: it starts as zeros, not empty)
    y = chain(np.sin(np.roll(x, 1)) * 2.0, 6)
    return np.sum(y * x)


def rolled_value_loss(x):
    y = np.sin(x) * 2.0  # read rolled by the next region: not in the tail
    return np.sum(chain(np.roll(y, 1), 6) * x)


def tail_of(f, x, wanted=(0,)):
    x = np.asarray(x, dtype=float)
    code = NumbaProgram(lower(record(f, x).program, [x]))
    return code, code._fused_tail(code.active(wanted))[0]


def check_gradient(f, x):
    compiled = ad.jit(ad.value_and_grad(f), fallback="error")
    value, grad = compiled(x)
    eager_value, eager_grad = ad.value_and_grad(f)(x)
    np.testing.assert_allclose(value, eager_value, rtol=1e-13)
    np.testing.assert_allclose(grad, eager_grad, rtol=1e-12, atol=1e-15)
    fd = numerical_jacobian(f, (x,), 0)
    np.testing.assert_allclose(grad, fd.reshape(np.shape(x)), atol=1e-6)
    forward = ad.jacobian(f, mode="forward")(x)  # forward mode agrees with the sweep
    np.testing.assert_allclose(grad, np.reshape(forward, np.shape(x)), rtol=1e-12, atol=1e-15)
    alone = ad.jit(ad.grad(f), fallback="error")(x)
    np.testing.assert_allclose(alone, eager_grad, rtol=1e-12, atol=1e-15)


@pytest.mark.usefixtures("small_regions")
@pytest.mark.parametrize("shape", [(3,), (7,), (3, 4)])
def test_a_tail_of_several_regions_is_fused_and_agrees(shape):
    rng = np.random.default_rng(sum(shape))
    x = 0.3 + 0.2 * rng.standard_normal(shape)
    code, start = tail_of(chain_loss, x)
    items = code.plan.items
    assert sum(type(item).__name__ == "Region" for item in items) >= 3
    assert start == 0  # every region is in the tail
    for point in (x, -x, 2.0 * x):
        check_gradient(chain_loss, point)


@pytest.mark.usefixtures("small_regions")
def test_an_input_read_rolled_and_at_the_entry_gets_every_term():
    x = np.array([0.3, -0.7, 1.1, 0.2, -0.4])
    code, start = tail_of(rolled_input_loss, x)
    assert start == 0
    for point in (x, 0.5 * x[::-1]):
        check_gradient(rolled_input_loss, point)


@pytest.mark.usefixtures("small_regions")
def test_a_value_read_rolled_ends_the_tail():
    x = np.array([0.3, -0.7, 1.1, 0.2, -0.4])
    code, start = tail_of(rolled_value_loss, x)
    assert 0 < start < len(code.plan.items)
    for point in (x, 0.5 * x[::-1]):
        check_gradient(rolled_value_loss, point)


def test_a_sum_read_by_a_later_region_is_not_in_the_tail():
    def normalised(x):  # the sum is complete only after its loop
        y = np.sin(x) * x
        return np.sum(y * np.sum(y))

    x = np.array([0.3, -0.7, 1.1, 0.2])
    code, start = tail_of(normalised, x)
    items = code.plan.items
    assert start > 0 and all(type(item).__name__ == "Region" for item in items)
    check_gradient(normalised, x)


@pytest.mark.usefixtures("small_regions")
def test_vjp_through_a_fused_tail_of_a_vector_output():
    x = np.array([0.3, -0.7, 1.1, 0.2])
    code, start = tail_of(chain, x)
    assert start == 0
    vjp = ad.jit(lambda x, c: ad.vjp(chain, x)[1](c), fallback="error")
    J = numerical_jacobian(chain, (x,), 0)
    for c in (np.ones(4), np.array([1.0, -2.0, 0.5, 3.0])):
        (got,) = vjp(x, c)
        np.testing.assert_allclose(got, ad.vjp(chain, x)[1](c)[0], rtol=1e-12)
        np.testing.assert_allclose(got, J.T @ c, atol=1e-6)


def test_the_100_op_chain_is_one_loop():
    x = np.linspace(0.1, 0.5, 8)
    code, start = tail_of(lambda x: np.sum(chain(x, 100)), x)
    assert start == 0 and len(code.plan.items) == 2  # 100 nodes, then the sum
    kernel = code.gradient((0,), value=False)
    source = inspect.getsource(getattr(kernel, "func", kernel).py_func)
    assert source.count("for _i in range(8):") == 1  # values and sweep: one loop
    assert source.count("np.empty(8)") == 3  # the sum's operand, its adjoint, the gradient
    check_gradient(lambda x: np.sum(chain(x, 100)), x)


@pytest.mark.parametrize("scale", [
    lambda s: 0.5 * s,  # straight-line regions of constant partials after the tail
    lambda s: -s / 7.0 + 3.0,
])
@pytest.mark.parametrize("shape", [(5,), (2, 3)])
def test_a_scaled_sum_after_the_tail_is_swept_before_its_loop(scale, shape):
    def loss(x):
        return scale(np.sum(chain(x, 8) * x))

    x = np.linspace(-0.8, 1.1, int(np.prod(shape))).reshape(shape)
    code = NumbaProgram(lower(record(loss, x).program, [x]))
    start, end = code._fused_tail(code.active((0,)))
    assert start == 0 and end < len(code.plan.items)
    for point in (x, -0.5 * x):
        check_gradient(loss, point)


def test_a_sum_read_by_a_nonlinear_scalar_ends_no_fusion_wrongly():
    def loss(x):  # log of the sum: its partial needs the sum, which the loop makes
        return np.log(np.sum(np.exp(np.sin(x) * x)))

    x = np.array([0.3, -0.7, 1.1, 0.2])
    code = NumbaProgram(lower(record(loss, x).program, [x]))
    start, end = code._fused_tail(code.active((0,)))
    assert start == end == len(code.plan.items)  # nothing fused
    check_gradient(loss, x)
