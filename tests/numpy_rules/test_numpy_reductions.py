"""Reductions in both modes against finite differences, and their conventions."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad

SHAPES_AXES = [
    ((), None),
    ((1,), None),
    ((4,), 0),
    ((2, 3), None),
    ((2, 3), 1),
    ((2, 3), -2),
    ((2, 3, 2), (0, 2)),
    ((2, 1, 3), (1,)),
]

REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "amax": np.amax,
    "amin": np.amin,
    "var": np.var,
    "std": np.std,
    "nansum": np.nansum,
    "nanmean": np.nanmean,
    "nanmax": np.nanmax,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_axis_tuples_and_keepdims(name, shape, axis, keepdims):
    f = REDUCTIONS[name]
    x = rand(*shape, low=0.3)
    if name == "std" and (np.size(x) == 1 or axis is not None and
                          all(shape[a] == 1 for a in np.atleast_1d(axis))):
        pytest.skip("std of a single entry is not differentiable (sqrt at 0)")
    check(lambda x: f(x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("f", [np.add.reduce, np.multiply.reduce, np.maximum.reduce,
                               np.minimum.reduce, np.ptp])
def test_ufunc_reduce_and_ptp(f):
    x = rand(3, 4)
    check(lambda x: f(x, axis=1), x)
    check(lambda x: f(x), x)


def test_array_methods_reduce():
    check(lambda x: x.sum(axis=0) + x.mean() + x.max(axis=1).sum() + x.prod(axis=0).sum(),
          rand(2, 3, low=0.5))


def test_where_masks():
    x = rand(3, 4)
    mask = np.array([[True, False, True, True]] * 3)
    check(lambda x: np.sum(x, axis=1, where=mask), x)
    check(lambda x: np.mean(x, axis=1, where=mask, keepdims=True), x)
    check(lambda x: np.nansum(x, axis=1, where=mask), x)
    check(lambda x: np.max(x, axis=1, where=mask, initial=-10.0), x)
    check(lambda x: np.prod(x, axis=0, where=mask), x)


def test_max_min_split_ties_equally():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(np.max, mode=mode)(x)
        np.testing.assert_allclose(jac, [0.0, 0.5, 0.5, 0.0])
        jac = ad.jacobian(lambda x: np.min(x - x), mode=mode)(x)
        np.testing.assert_allclose(jac, [0.0, 0.0, 0.0, 0.0])
    m = np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]])
    g = ad.grad(lambda m: np.sum(np.max(m, axis=1) * np.array([1.0, 2.0])))(m)
    np.testing.assert_allclose(g, [[0.5, 0.5, 0.0], [0.0, 1.0, 1.0]])


@pytest.mark.parametrize("x", [
    np.array([0.0, 2.0, 3.0]),
    np.array([0.0, 0.0, 3.0]),
    np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 0.0]]),
])
def test_prod_with_zeros(x):
    check(np.prod, x)
    check(lambda x: np.prod(x, axis=-1), x)
    check_second_order(np.prod, x)


def test_prod_zero_gradient_is_product_of_the_others():
    g = ad.grad(np.prod)(np.array([0.0, 2.0, 3.0]))
    np.testing.assert_allclose(g, [6.0, 0.0, 0.0])


@pytest.mark.parametrize("f", [np.cumsum, np.cumprod])
@pytest.mark.parametrize("shape,axis", [((4,), None), ((2, 3), None), ((2, 3), 0),
                                        ((2, 3), -1), ((1,), 0)])
def test_cumulative(f, shape, axis):
    check(lambda x: f(x, axis=axis), rand(*shape, low=0.2))


def test_cumprod_with_zeros_and_accumulate():
    x = np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 2.0, 1.0]])
    check(lambda x: np.cumprod(x, axis=1), x)
    check(np.cumprod, x)
    check(lambda x: np.multiply.accumulate(x, axis=1), x)
    check(lambda x: np.add.accumulate(x), x)


def test_cumulative_sum_and_prod_include_initial():
    x = rand(2, 3, low=0.2)
    check(lambda x: np.cumulative_sum(x, axis=1, include_initial=True), x)
    check(lambda x: np.cumulative_prod(x, axis=0, include_initial=True), x)


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_std_ddof(ddof):
    x = rand(4, 3)
    check(lambda x: np.var(x, ddof=ddof), x)
    check(lambda x: np.std(x, axis=0, ddof=ddof, keepdims=True), x)
    check(lambda x: np.std(x, axis=1, correction=ddof), x)


def test_logsumexp_composition_is_stable_for_large_inputs():
    def lse(x):
        m = np.max(x, axis=-1, keepdims=True)
        return np.squeeze(m, -1) + np.log(np.sum(np.exp(x - m), axis=-1))

    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])
    softmax = np.exp(x - x.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    for mode in ("forward", "reverse"):
        jac = ad.jacobian(lse, mode=mode)(x)
        assert np.all(np.isfinite(jac))
        np.testing.assert_allclose(jac[0, 0], softmax[0], rtol=1e-12)
        np.testing.assert_allclose(jac[1, 1], softmax[1], rtol=1e-12)
    check(lse, rand(2, 3) * 50)


def test_second_order_reductions():
    check_second_order(lambda x: np.var(x, axis=1) + np.cumsum(x, axis=1)[:, -1], rand(3, 2))
    check_second_order(lambda x: np.cumprod(x), rand(4, low=0.3))
    check_second_order(lambda x: np.max(x ** 2, axis=0), rand(3, 2))


@settings(max_examples=25, deadline=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3),
       data=st.data())
def test_random_shapes_and_axes(shape, data):
    axes = data.draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                              max_size=len(shape)))
    axis = tuple(axes) if axes else None
    keepdims = data.draw(st.booleans())
    name = data.draw(st.sampled_from(["sum", "mean", "prod", "max", "var", "cumsum"]))
    x = np.random.default_rng(len(shape)).uniform(0.5, 1.5, size=shape)
    if name == "cumsum":
        ax = axes[0] if axes else None
        check(lambda x: np.cumsum(x, axis=ax), x)
    else:
        check(lambda x: REDUCTIONS.get(name, getattr(np, name))(x, axis=axis, keepdims=keepdims),
              x)
