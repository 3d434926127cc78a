"""numpy functions written in Python (diff, gradient, average, cov, interp, ...) in both modes."""

import numpy as np
import pytest
from numpy_rule_checks import check, check_second_order, rand

import dualad as ad
from dualad.numpy_rules import functions

X = rand(3, 4)
KNOTS = [0.0, 0.5, 1.0, 2.0]
POINTS = np.array([-0.3, 0.2, 0.7, 1.4, 2.5])

CASES = {
    "diff": (lambda x: np.diff(x), [X]),
    "diff n axis": (lambda x: np.diff(x, 2, axis=0), [X]),
    "diff prepend append": (lambda x: np.diff(x, prepend=x[:, :1] * 2, append=3.0), [X]),
    "diff prepend keyword": (lambda x, p: np.diff(x, axis=0, prepend=p), [X, rand(1, 4)]),
    "gradient": (np.gradient, [rand(5)]),
    "gradient spacing axes": (lambda f: np.gradient(f, 0.5, 2.0)[1]
                              + np.gradient(f, axis=0, edge_order=2), [rand(4, 3)]),
    "average": (np.average, [X]),
    "average weights": (lambda x, w: np.average(x, axis=1, weights=w),
                        [X, np.abs(rand(4)) + 0.5]),
    "average full weights": (lambda x, w: np.average(x, axis=0, weights=w, keepdims=True),
                             [X, np.abs(rand(3, 4)) + 0.5]),
    "trapezoid": (np.trapezoid, [X]),
    "trapezoid x": (lambda y, t: np.trapezoid(y, t, axis=0), [X, np.cumsum(np.abs(rand(3)))]),
    "trapezoid dx": (lambda y: np.trapezoid(y, dx=0.3, axis=0), [X]),
    "cov": (np.cov, [X]),
    "cov two": (lambda a, b: np.cov(a, b, rowvar=False, ddof=0), [rand(5, 2), rand(5)]),
    "corrcoef": (np.corrcoef, [X]),
    "polyval": (np.polyval, [rand(4), rand(5)]),
    "interp": (lambda x, fp: np.interp(x, KNOTS, fp), [POINTS, rand(4)]),
    "interp bounds": (lambda x, fp: np.interp(x, KNOTS, fp, left=-1.0, right=fp[0]),
                      [POINTS, rand(4)]),
    "meshgrid": (lambda a, b: np.meshgrid(a, b)[0] * np.meshgrid(a, b)[1], [rand(3), rand(2)]),
    "meshgrid ij sparse": (lambda a, b, c: sum(np.meshgrid(a, b, c, indexing="ij",
                                                           sparse=True)),
                           [rand(3), rand(2), rand(2)]),
    "sinc": (np.sinc, [rand(4)]),
    "angle": (np.angle, [rand(4, low=0.1)]),
    "linspace": (lambda a, b: np.linspace(a, b, 5), [rand(), rand()]),
    "linspace arrays": (lambda a, b: np.linspace(a, b, 4, endpoint=False, axis=1),
                        [rand(3), rand(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_functions(name):
    f, args = CASES[name]
    check(f, *args)


@pytest.mark.parametrize("f,ours,args", [
    (lambda x: np.diff(x, 2, 0, prepend=1.0), functions._diff, (2, 0)),
    (np.cov, functions._cov, ()),
    (np.corrcoef, functions._corrcoef, ()),
    (lambda x: np.gradient(x, 0.5), functions._gradient, (0.5,)),
])
def test_compositions_reproduce_numpy(f, ours, args):
    kw = {"prepend": 1.0} if ours is functions._diff else {}
    want, got = f(X), ours(X, *args, **kw)
    for w, g in zip(want if isinstance(want, tuple) else [want],
                    got if isinstance(got, tuple) else [got]):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


def test_second_order_functions():
    check_second_order(lambda x: np.diff(x ** 3), rand(4))
    check_second_order(lambda x: np.cov(x), rand(2, 3))
    check_second_order(lambda x: np.gradient(x ** 2), rand(4))


def test_traced_keywords_reach_their_gradient():
    x = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(np.clip(x, min=x[1])))(x),
                               [0.0, 2.0, 1.0])
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(np.full_like(x, fill_value=x[0])))(x),
                               [3.0, 0.0, 0.0])
    check(lambda x: np.clip(x, max=x[1]), x)
    check(lambda x: np.linspace(start=x[0], stop=x[1], num=3), x)


def test_sinc_derivative_at_zero():
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(ad.jacobian(np.sinc, mode=mode)(np.zeros(2)), np.zeros((2, 2)))
